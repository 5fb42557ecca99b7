"""docs/runbook.md names every condition type, condition reason, Event reason and decision reason
the operator can set, so it cannot silently fall behind the code.

Condition types and reasons are found in the source with `ast` rather than listed here: a
new `set_condition(type=...)`, `reason=...`, `reason = "..."`, `record(status, "...")` or
`Event(type, "...")` in the operator shows up without anyone updating this test.
"""

import ast
import importlib
from pathlib import Path
from types import ModuleType

import pytest
from inferscale.policy import Limit, Reason

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = (ROOT / "docs" / "runbook.md").read_text()
# The modules that write conditions and post Events.
WRITERS = ("inferscale.status", "inferscale.autoscaler", "inferscale.handlers")
# Calls whose second positional argument is a reason: handlers' record(status, reason, ...)
# and autoscaler's Event(type, reason, message).
REASON_SECOND_ARG = {"record", "Event"}


def _strings(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _resolve(node: ast.expr, module: ModuleType) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Name) and isinstance(getattr(module, node.id, None), str):
        return {getattr(module, node.id)}
    return set()


def _assigned_reasons(node: ast.Assign) -> set[str]:
    found: set[str] = set()
    for target in node.targets:
        if isinstance(target, ast.Name) and target.id == "reason":
            found |= _strings(node.value)
        elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
            for element, value in zip(target.elts, node.value.elts, strict=False):
                if isinstance(element, ast.Name) and element.id == "reason":
                    found |= _strings(value)
    return found


def _used_in_code() -> tuple[set[str], set[str]]:
    """(condition types, reasons) written as literals or module constants by the writers."""
    types: set[str] = set()
    reasons: set[str] = set()
    for name in WRITERS:
        module = importlib.import_module(name)
        assert module.__file__ is not None
        for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
            if isinstance(node, ast.Assign):
                reasons |= _assigned_reasons(node)
            if not isinstance(node, ast.Call):
                continue
            for keyword in node.keywords:
                if keyword.arg == "type":
                    types |= _resolve(keyword.value, module)
                elif keyword.arg == "reason":
                    reasons |= _resolve(keyword.value, module)
            called = node.func.id if isinstance(node.func, ast.Name) else None
            if called in REASON_SECOND_ARG and len(node.args) > 1:
                reasons |= _resolve(node.args[1], module)
    return types, reasons


TYPES, REASONS = _used_in_code()


def test_the_scan_finds_what_is_known_to_be_there() -> None:
    # Guards the scan itself: if it stopped finding these, the tests below would pass vacuously.
    assert {"Reconciled", "Ready", "MetricsAvailable", "ScalingLimited", "ReplicasOverridden"} <= TYPES
    assert {"Applied", "InvalidSpec", "SecretNotFound", "ReplicasReady", "ScaledToZero", "SignalsFresh"} <= REASONS
    assert {"PrometheusUnavailable", "GPUCapacityReached", "ChangedExternally", "ReplicasChangedExternally"} <= REASONS


@pytest.mark.parametrize("condition_type", sorted(TYPES))
def test_every_condition_type_has_a_section(condition_type: str) -> None:
    assert f"### `{condition_type}`" in RUNBOOK, f"docs/runbook.md has no section for condition {condition_type}"


@pytest.mark.parametrize("reason", sorted(REASONS))
def test_every_condition_and_event_reason_is_explained(reason: str) -> None:
    assert f"`{reason}`" in RUNBOOK, f"docs/runbook.md does not mention reason {reason}"


@pytest.mark.parametrize("value", [*Reason, *Limit], ids=str)
def test_every_policy_reason_and_limit_is_explained(value: str) -> None:
    assert f"`{value}`" in RUNBOOK, f"docs/runbook.md does not mention {type(value).__name__} {value}"


@pytest.mark.parametrize("reason", list(Reason), ids=str)
def test_every_decision_reason_has_a_row(reason: Reason) -> None:
    assert f"\n| `{reason.value}` |" in RUNBOOK, f"the decision reasons table has no row for {reason.value}"
