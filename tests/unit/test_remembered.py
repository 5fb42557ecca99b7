"""status.autoscaler is input: each bad shape is dropped or corrected alone, said once, and cleared."""

from datetime import UTC, datetime, timedelta
from typing import Any

from inferscale.api import InferenceService, ObjectMeta, parse_spec
from inferscale.autoscaler import MEMORY_FIELD, Plan, ServiceView, plan_service, remembered
from inferscale.replicas import ReplicaCounts

from tests.unit.test_autoscaler import _signals

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
WINDOW = {"stale_after": timedelta(seconds=60), "ttft_window": timedelta(seconds=60)}
GOOD = {
    "capacityRps": 2.5,
    "readyReplicas": 3,
    "scaleDownWindow": [{"time": "2026-12-02T11:59:00+00:00", "replicas": 3}],
}


def test_a_field_of_the_wrong_type_is_dropped_alone_and_named() -> None:
    found = remembered({**GOOD, "readyReplicas": "three", "scaleUpWindow": "garbage"}, NOW)
    assert found.memory.capacity_rps == 2.5
    assert [r.replicas for r in found.memory.scale_down_window] == [3]
    assert found.memory.ready_replicas is None and found.memory.scale_up_window == ()
    assert len(found.problems) == 2
    assert found.problems[0].startswith("status.autoscaler.readyReplicas ('three') is invalid:")
    assert found.problems[1].startswith("status.autoscaler.scaleUpWindow ('garbage') is invalid:")


def test_out_of_range_values_and_bad_window_entries_are_dropped() -> None:
    found = remembered({"capacityRps": -1, "scaleDownWindow": [{"time": "yesterday", "replicas": 2}]}, NOW)
    assert found.memory.capacity_rps is None and found.memory.scale_down_window == ()
    assert [p.split(" ")[0] for p in found.problems] == [
        "status.autoscaler.capacityRps",
        "status.autoscaler.scaleDownWindow",
    ]


def test_times_in_the_future_are_taken_as_now_and_a_little_skew_is_not() -> None:
    far = "3000-01-01T00:00:00+00:00"
    skewed = (NOW + timedelta(seconds=20)).isoformat()
    found = remembered(
        {"readyChangedAt": far, "lastScaleTime": skewed, "scaleUpWindow": [{"time": far, "replicas": 2}]}, NOW
    )
    assert found.memory.ready_changed_at == NOW
    assert found.memory.last_scale_time == NOW + timedelta(seconds=20)
    assert [r.time for r in found.memory.scale_up_window] == [NOW]
    assert [p.split(" ")[0] for p in found.problems] == [
        "status.autoscaler.readyChangedAt",
        "status.autoscaler.scaleUpWindow",
    ]
    assert "time in the future (3000-01-01T00:00:00+00:00); taken as now" in found.problems[0]


def test_unknown_fields_missing_memory_and_a_non_object() -> None:
    assert remembered({**GOOD, "fromANewerVersion": 1}, NOW).problems == []
    assert remembered(None, NOW).problems == []
    assert remembered([1, 2], NOW).problems == ["status.autoscaler is a list, not an object; ignored"]


def _view(status: dict[str, Any], replicas: int = 3) -> ServiceView:
    isvc = InferenceService(
        metadata=ObjectMeta(name="llama", namespace="serving"),
        spec=parse_spec({"model": {"id": "m"}, "maxConcurrency": 8, "replicas": {"min": 1, "max": 6}}),
    )
    return ServiceView(isvc=isvc, status=status, deployment_replicas=replicas, pods=ReplicaCounts(ready=replicas))


def _written(status: dict[str, Any], plan: Plan) -> dict[str, Any]:
    """The status after the operator applied the plan and cleared what it forgets."""
    memory = {**status.get(MEMORY_FIELD, {}), **plan.status[MEMORY_FIELD]}
    for alias in plan.forget:
        memory.pop(alias, None)
    return {**status, **plan.status, MEMORY_FIELD: memory}


def test_bad_memory_is_reported_once_then_cleared() -> None:
    status = {"desiredReplicas": 3, MEMORY_FIELD: {**GOOD, "readyReplicas": "three", "slosKnee": "x"}}
    plan = plan_service(
        _view(status), _signals(waiting=0, running=1, ttft=0.2, at=NOW), metrics_error=None, now=NOW, **WINDOW
    )
    [event] = [e for e in plan.events if e.reason == "RememberedStateInvalid"]
    assert event.type == "Warning" and "status.autoscaler.readyReplicas ('three')" in event.message
    # The tick rewrites readyReplicas itself; the unknown field is not its to clear.
    assert plan.forget == [] and plan.status[MEMORY_FIELD]["readyReplicas"] == 3

    later = NOW + timedelta(seconds=15)
    idle = _signals(waiting=0, running=1, ttft=0.2, at=later)
    again = plan_service(_view(_written(status, plan)), idle, metrics_error=None, now=later, **WINDOW)
    assert [e for e in again.events if e.reason == "RememberedStateInvalid"] == []


def test_a_field_the_memory_no_longer_holds_is_cleared() -> None:
    # A backlog once cleared; now requests wait again, so backlogClearedAt becomes None.
    past = (NOW - timedelta(minutes=5)).isoformat()
    status = {"desiredReplicas": 3, MEMORY_FIELD: {"backlogSeenAt": past, "backlogClearedAt": past}}
    plan = plan_service(
        _view(status), _signals(waiting=40, running=1, ttft=0.2, at=NOW), metrics_error=None, now=NOW, **WINDOW
    )
    assert "backlogClearedAt" in plan.forget
    assert "backlogClearedAt" not in plan.status[MEMORY_FIELD]


def test_a_far_future_time_no_longer_holds_scale_down_for_good() -> None:
    """The issue's case: readyChangedAt in the year 3000 held an idle service forever; now it
    holds one p95 window at most and then scales down as an idle service should."""
    status: dict[str, Any] = {
        "desiredReplicas": 3,
        MEMORY_FIELD: {"readyReplicas": 3, "readyChangedAt": "3000-01-01T00:00:00+00:00"},
    }
    replicas, now = 3, NOW
    for _ in range(40):  # 10 minutes of 15 s ticks
        plan = plan_service(
            _view(status, replicas),
            _signals(waiting=0, running=1, ttft=0.2, at=now),
            metrics_error=None,
            now=now,
            **WINDOW,
        )
        status = _written(status, plan)
        if plan.scale_to is not None:
            break
        now += timedelta(seconds=15)
    assert plan.scale_to is not None and plan.scale_to < replicas, plan.decision.message
    # The default scale-down window (300 s) plus one p95 window, not more.
    assert now - NOW <= timedelta(seconds=300 + 60 + 15)
