"""Imports point one way: the operator imports neither loadgen nor the tests; loadgen and the benches import
the operator's pure core at most, and never the tests (what they share with the tests is in loadgen)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imports(folder: str) -> dict[str, set[str]]:
    """Top-level package of every import, by file, over the Python files under `folder`."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                found.setdefault(str(path.relative_to(ROOT)), set()).add(name.split(".")[0])
    return found


def test_nothing_outside_tests_imports_them() -> None:
    for folder in ("operator", "loadgen", "bench"):
        assert {f: p for f, p in _imports(folder).items() if "tests" in p} == {}


def test_the_operator_never_imports_loadgen() -> None:
    assert {f: p for f, p in _imports("operator").items() if "loadgen" in p} == {}


def test_loadgen_imports_only_the_operators_pure_modules() -> None:
    # The image ships the operator without loadgen; loadgen reads the operator's models, settings, PromQL and
    # policy, never its edges (kopf handlers, the Kubernetes and Prometheus clients).
    edges = {"handlers", "kube", "prometheus", "config", "cli", "leader", "telemetry"}
    offending = {}
    for path in sorted((ROOT / "loadgen").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "inferscale":
                module = (node.module or "").removeprefix("inferscale").lstrip(".")
                used = ({module} if module else {alias.name for alias in node.names}) & edges
                if used:
                    offending[str(path.relative_to(ROOT))] = used
    assert offending == {}
