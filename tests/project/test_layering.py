"""Imports point one way: the operator imports neither loadgen, the harness nor the tests; loadgen imports the
operator's pure core at most, and its subpackages point down (cli, fleet, client, traffic, engine); the harness
(cluster/harness) and the benches may import both, and nothing but the tests imports the tests (what the benches
share with them is in the harness). The two distributions follow the same line."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
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
    for folder in ("operator", "loadgen", "cluster", "bench"):
        assert {f: p for f, p in _imports(folder).items() if "tests" in p} == {}


def test_the_operator_never_imports_loadgen() -> None:
    assert {f: p for f, p in _imports("operator").items() if p & {"loadgen", "harness"}} == {}


def test_importing_the_operator_loads_no_loadgen_module() -> None:
    # Every module of the operator, in a fresh interpreter: none pulls in loadgen, the harness or their
    # dependencies, which the operator's image does not carry.
    code = (
        "import importlib, pkgutil, sys, inferscale\n"
        "for m in pkgutil.iter_modules(inferscale.__path__):\n"
        "    if m.name != '__main__': importlib.import_module('inferscale.' + m.name)\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    leaked = [m for m in loaded.stdout.split() if m.split(".")[0] in ("loadgen", "harness", "httptools", "matplotlib")]
    assert "inferscale.handlers" in loaded.stdout.split()
    assert leaked == []


def test_loadgen_never_imports_the_harness() -> None:
    assert {f: p for f, p in _imports("loadgen").items() if "harness" in p} == {}


LAYERS = ("engine", "traffic", "client", "fleet", "cli")
"""loadgen's subpackages, lowest first: each imports only those before it (and itself)."""


def test_loadgen_subpackages_import_downwards_only() -> None:
    assert {p.name for p in (ROOT / "loadgen").iterdir() if (p / "__init__.py").exists()} == set(LAYERS)
    upward = {}
    for layer in LAYERS:
        allowed = set(LAYERS[: LAYERS.index(layer) + 1])
        for path in sorted((ROOT / "loadgen" / layer).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("loadgen."):
                    used = node.module.split(".")[1]  # type: ignore[union-attr]
                    if used not in allowed:
                        upward.setdefault(str(path.relative_to(ROOT)), set()).add(used)
    assert upward == {}


def test_the_two_distributions_package_what_the_tree_holds() -> None:
    operator = tomllib.loads((ROOT / "operator" / "pyproject.toml").read_text())["project"]
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # The operator's install carries none of loadgen's dependencies.
    names = {dep.split(">")[0].split("<")[0].split("=")[0].strip().lower() for dep in operator["dependencies"]}
    assert names.isdisjoint({"aiohttp", "httptools", "httpx", "matplotlib"})
    assert set(operator["scripts"]) == {"inferscale"}
    # Every loadgen package folder (and the harness) is in the loadgen distribution.
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "loadgen").rglob("__init__.py")} | {
        "harness"
    }
    assert set(dev["tool"]["setuptools"]["packages"]) == folders
    assert dev["tool"]["setuptools"]["package-dir"] == {"harness": "cluster/harness"}
    assert dev["project"]["scripts"] == {"simengine": "loadgen.engine.server:main", "loadgen": "loadgen.cli.main:main"}


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
