"""status.autoscaler and the autoscaler's other status fields are input, through the real API server:
another field manager writes garbage there (hypothesis generates it), and the operator says which
field and why (a RememberedStateInvalid Event), never moves the replicas on it, and rewrites or
clears it within a tick or two; fields it no longer holds (status.lastScaleTime, status.signals)
are nulled, not left to whoever else wrote them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from harness.processes import wait_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inferscale.autoscaler import remembered

from tests.e2e.conftest import Operator, get_json, kubectl
from tests.e2e.test_engines import endpoints, prometheus, runner  # noqa: F401
from tests.e2e.test_scaling import ISVC, scaling_operator  # noqa: F401

WRITER = "someone-else"  # the other field manager
TIMES = [
    "lastScaleTime", "readyChangedAt", "backlogSeenAt", "backlogClearedAt", "queueDepthAt", "demandAt", "rateSince",
    "burstAt",
]  # fmt: skip
NUMBERS = [
    "readyReplicas", "queueDepth", "capacityRps", "capacityReplicas", "demandLevel", "burstRps", "sloKneePerReplica",
]  # fmt: skip
WINDOWS = ["scaleUpWindow", "scaleDownWindow"]

# Values no parser could read as a valid one of any field (no digits, no "Up"/"Down", no bools).
JUNK = (
    st.text(alphabet="xyz!? #", min_size=1, max_size=8)
    | st.lists(st.integers(-5, 5), min_size=1, max_size=3)
    | st.dictionaries(st.sampled_from(["a", "time", "replicas"]), st.integers(-5, 5), min_size=1, max_size=2)
)
# Times out of range: far future, before the object existed (as text or epoch seconds), or without a zone.
BAD_TIMES = st.sampled_from(
    ["3000-01-01T00:00:00Z", "1970-01-01T00:00:00Z", "2001-09-09T01:46:40+00:00", "2026-01-01T00:00:00"]
) | st.integers(0, 10**9)
BAD_ENTRIES = st.lists(
    st.fixed_dictionaries({"time": BAD_TIMES, "replicas": st.integers(0, 10)})
    | st.fixed_dictionaries({"time": st.just("2026-01-01T00:00:00Z"), "replicas": st.integers(-9, -1)}),
    min_size=1,
    max_size=3,
)
GARBAGE = (
    st.tuples(
        st.dictionaries(st.sampled_from(TIMES), BAD_TIMES | JUNK, max_size=2),
        st.dictionaries(st.sampled_from([*NUMBERS, "lastScaleDirection"]), JUNK, max_size=2),
        st.dictionaries(st.sampled_from(WINDOWS), BAD_ENTRIES | JUNK, max_size=1),
    )
    .map(lambda parts: {key: value for part in parts for key, value in part.items()})
    .filter(bool)
)


def _isvc(namespace: str) -> dict[str, Any]:
    return get_json("-n", namespace, "inferenceservice", "chat")


def _replicas(namespace: str) -> int:
    return int(get_json("-n", namespace, "deployment", "chat")["spec"]["replicas"])


def _write_status(namespace: str, status: dict[str, Any]) -> None:
    kubectl("-n", namespace, "patch", "inferenceservice", "chat", "--subresource=status", "--type=merge",
            f"--field-manager={WRITER}", "-p", json.dumps({"status": status}))  # fmt: skip


def _said(namespace: str) -> dict[str, str]:
    """RememberedStateInvalid Events by name: their messages."""
    items = get_json("-n", namespace, "events", "--field-selector", "reason=RememberedStateInvalid")["items"]
    return {e["metadata"]["name"]: e["message"] for e in items}


@pytest.fixture
def idle(scaling_operator: Operator, namespace: str) -> Iterator[str]:  # noqa: F811
    """One idle service at its minimum (1 of at most 3) whose memory the tick has written."""
    kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(ISVC))
    wait_for("one ready engine", lambda: endpoints(namespace, "chat", 1), timeout=60)
    wait_for("the tick's memory in status", lambda: _isvc(namespace)["status"].get("autoscaler"), timeout=30)
    yield namespace
    assert "Traceback" not in scaling_operator.log_text()


def test_fields_another_writer_left_are_cleared_and_old_times_are_named(idle: str) -> None:
    namespace = idle
    created = _isvc(namespace)["metadata"]["creationTimestamp"]
    _write_status(
        namespace,
        {
            "lastScaleTime": "3000-01-01T00:00:00Z",  # the service never scaled: the autoscaler holds none
            "signals": {"ttftP95Seconds": 42.0, "prefillP95Seconds": 42.0},  # idle: no TTFT to report
            "autoscaler": {"readyChangedAt": "1970-01-01T00:00:00Z"},
        },
    )
    started = time.monotonic()

    def cleared() -> bool:
        status = _isvc(namespace)["status"]
        signals = status.get("signals") or {}
        return "lastScaleTime" not in status and 42.0 not in signals.values()

    wait_for("lastScaleTime and the stale signals cleared", cleared, timeout=15, interval=0.3)
    print(f"cleared {time.monotonic() - started:.1f}s after they were written")
    [message] = wait_for("a RememberedStateInvalid Event", lambda: list(_said(namespace).values()), timeout=10)
    assert (
        "status.autoscaler.readyChangedAt holds a time before the InferenceService was created "
        f"(1970-01-01T00:00:00+00:00 < {datetime.fromisoformat(created).isoformat()}); taken as now"
    ) in message
    time.sleep(5)  # two more ticks: nothing writes them back, nothing more to say
    assert cleared() and len(_said(namespace)) == 1
    assert _replicas(namespace) == 1


@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(garbage=GARBAGE)
def test_generated_garbage_in_the_memory_is_named_never_moves_replicas_and_is_gone_in_a_tick(
    idle: str, garbage: dict[str, Any]
) -> None:
    namespace = idle
    before = set(_said(namespace))
    _write_status(namespace, {"autoscaler": garbage})

    def named() -> str | None:
        assert _replicas(namespace) == 1, "the replicas moved on corrupt memory"
        fresh = [message for name, message in _said(namespace).items() if name not in before]
        return next((m for m in fresh if all(f"status.autoscaler.{f} " in m for f in garbage)), None)

    message = wait_for(f"an Event naming every field of {garbage}", named, timeout=15, interval=0.3)
    assert "taken as now" in message or "is invalid" in message

    def clean() -> bool:
        assert _replicas(namespace) == 1, "the replicas moved on corrupt memory"
        isvc = _isvc(namespace)
        created = datetime.fromisoformat(isvc["metadata"]["creationTimestamp"])
        raw = isvc["status"].get("autoscaler")
        return remembered(raw, datetime.now(UTC), created=created).problems == []

    wait_for("the memory rewritten or cleared", clean, timeout=15, interval=0.3)
