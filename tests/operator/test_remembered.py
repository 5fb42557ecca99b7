"""status.autoscaler is input: each bad shape is dropped or corrected alone, said once, and cleared."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from inferscale.api import InferenceService, ObjectMeta, parse_spec
from inferscale.autoscaler import MEMORY_FIELD, Plan, ServiceView, plan_service, remembered
from inferscale.replicas import ReplicaCounts

from tests.operator.test_autoscaler import service_signals

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


@pytest.mark.parametrize("replicas", [0, 5000])
def test_a_capacity_learnt_on_an_impossible_fleet_is_dropped_and_the_rate_kept(replicas: int) -> None:
    found = remembered({"capacityRps": 2.5, "capacityReplicas": replicas}, NOW)
    assert found.memory.capacity_rps == 2.5 and found.memory.capacity_replicas is None
    assert [p.split(" ")[0] for p in found.problems] == ["status.autoscaler.capacityReplicas"]


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


def test_times_before_the_object_was_created_are_taken_as_now() -> None:
    created = NOW - timedelta(hours=1)
    epoch = "1970-01-01T00:00:00+00:00"
    after = (created + timedelta(seconds=1)).isoformat()
    found = remembered(
        {
            "lastScaleTime": epoch,
            "readyChangedAt": after,
            "scaleDownWindow": [{"time": epoch, "replicas": 4}, {"time": after, "replicas": 3}],
        },
        NOW,
        created=created,
    )
    assert found.memory.last_scale_time == NOW
    assert found.memory.ready_changed_at == created + timedelta(seconds=1)
    # Still oldest first: the corrected entry moves behind the good one.
    assert [(r.time, r.replicas) for r in found.memory.scale_down_window] == [
        (created + timedelta(seconds=1), 3),
        (NOW, 4),
    ]
    assert [p.split(" ")[0] for p in found.problems] == [
        "status.autoscaler.lastScaleTime",
        "status.autoscaler.scaleDownWindow",
    ]
    assert found.problems[0] == (
        "status.autoscaler.lastScaleTime holds a time before the InferenceService was created "
        f"(1970-01-01T00:00:00+00:00 < {created.isoformat()}); taken as now"
    )
    # Without a creation time only the future is judged.
    assert remembered({"lastScaleTime": epoch}, NOW).problems == []


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


def _merged(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, as the API server applies it: null removes a field."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merged(out.get(key), value)
    return out


def _written(status: dict[str, Any], plan: Plan) -> dict[str, Any]:
    """The status after the operator applied the plan (fields another writer also set survive the
    apply) and nulled what it no longer holds."""
    return dict(_merged(_merged(status, plan.status), plan.clear))


def test_bad_memory_is_reported_once_then_cleared() -> None:
    status = {"desiredReplicas": 3, MEMORY_FIELD: {**GOOD, "readyReplicas": "three", "slosKnee": "x"}}
    plan = plan_service(
        _view(status), service_signals(waiting=0, running=1, ttft=0.2, at=NOW), metrics_error=None, now=NOW, **WINDOW
    )
    [event] = [e for e in plan.events if e.reason == "RememberedStateInvalid"]
    assert event.type == "Warning" and "status.autoscaler.readyReplicas ('three')" in event.message
    # The tick rewrites readyReplicas itself; the unknown field is not its to clear.
    assert plan.clear == {} and plan.status[MEMORY_FIELD]["readyReplicas"] == 3

    later = NOW + timedelta(seconds=15)
    idle = service_signals(waiting=0, running=1, ttft=0.2, at=later)
    again = plan_service(_view(_written(status, plan)), idle, metrics_error=None, now=later, **WINDOW)
    assert [e for e in again.events if e.reason == "RememberedStateInvalid"] == []


def test_a_field_the_memory_no_longer_holds_is_cleared() -> None:
    # A backlog once cleared; now requests wait again, so backlogClearedAt becomes None.
    past = (NOW - timedelta(minutes=5)).isoformat()
    status = {"desiredReplicas": 3, MEMORY_FIELD: {"backlogSeenAt": past, "backlogClearedAt": past}}
    plan = plan_service(
        _view(status), service_signals(waiting=40, running=1, ttft=0.2, at=NOW), metrics_error=None, now=NOW, **WINDOW
    )
    assert plan.clear[MEMORY_FIELD] == {"backlogClearedAt": None}
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
            service_signals(waiting=0, running=1, ttft=0.2, at=now),
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


def _created(status: dict[str, Any], created: datetime, replicas: int = 3) -> ServiceView:
    view = _view(status, replicas)
    meta = view.isvc.metadata.model_copy(update={"creation_timestamp": created})
    return ServiceView(isvc=view.isvc.model_copy(update={"metadata": meta}), status=status,
                       deployment_replicas=replicas, pods=view.pods)  # fmt: skip


def test_an_absurdly_old_time_holds_replicas_one_window_then_scaling_converges() -> None:
    """readyChangedAt of 1970 claims the ready count has been steady for decades, so an idle service
    would scale down on a p95 that may not reflect its replicas yet; taken as now, it holds one p95
    window, as after any change of the ready count, and then scales down."""
    created = NOW - timedelta(hours=1)
    status: dict[str, Any] = {
        "desiredReplicas": 3,
        MEMORY_FIELD: {"readyReplicas": 3, "readyChangedAt": "1970-01-01T00:00:00+00:00"},
    }
    replicas, now, plans = 3, NOW, []
    for _ in range(8):  # 2 minutes of 15 s ticks
        plan = plan_service(
            _created(status, created, replicas), service_signals(waiting=0, running=1, ttft=0.2, at=now),
            metrics_error=None, now=now, **WINDOW,
        )  # fmt: skip
        plans.append(plan)
        status = _written(status, plan)
        if plan.scale_to is not None:
            break
        now += timedelta(seconds=15)
    [event] = [e for e in plans[0].events if e.reason == "RememberedStateInvalid"]
    assert "status.autoscaler.readyChangedAt holds a time before the InferenceService was created" in event.message
    assert plans[0].scale_to is None and "changed 0s ago" in plans[0].decision.message, plans[0].decision.message
    assert plan.scale_to is not None and plan.scale_to < replicas, plan.decision.message
    assert now - NOW <= timedelta(seconds=60 + 15)  # within one p95 window (and a tick)


def test_top_level_fields_the_autoscaler_no_longer_holds_are_nulled() -> None:
    """status.lastScaleTime and status.signals written by another manager are not left standing when
    the autoscaler holds no value for them: server-side apply alone would keep them."""
    status: dict[str, Any] = {
        "desiredReplicas": 3,
        "lastScaleTime": "3000-01-01T00:00:00+00:00",
        "signals": {"queueDepth": 7.0, "ttftP95Seconds": 9.0, "observedAt": "2026-12-02T11:00:00+00:00"},
        "replicas": 3,  # the readiness writer's: not the autoscaler's to clear
    }
    plan = plan_service(_view(status), None, metrics_error=None, now=NOW, **WINDOW)
    assert "lastScaleTime" not in plan.status and "signals" not in plan.status
    assert plan.clear == {"lastScaleTime": None, "signals": None}
    written = _written(status, plan)
    assert "lastScaleTime" not in written and "signals" not in written and written["replicas"] == 3

    # A signal that goes missing (no TTFT while idle) is nulled inside signals, the rest stays.
    idle = service_signals(waiting=0, running=0, ttft=None)
    stale = {**written, "signals": {"queueDepth": 7.0, "ttftP95Seconds": 9.0}}
    again = plan_service(_view(stale), idle, metrics_error=None, now=NOW, **WINDOW)
    assert again.clear == {"signals": {"ttftP95Seconds": None}}
    assert _written(stale, again)["signals"]["queueDepth"] == 0
    # Once cleared, nothing more to clear: no write every tick.
    settled = plan_service(_view(_written(stale, again)), idle, metrics_error=None, now=NOW, **WINDOW)
    assert settled.clear == {}
