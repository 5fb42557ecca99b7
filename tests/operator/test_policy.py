"""The scaling policy, one decision at a time: each reason a user can see, with its numbers.

Unless a test says otherwise the service has maxConcurrency 16, a 1.2 s p95 TTFT SLO, 4
waiting requests per replica as the queue target, 1..8 replicas, scale-up steps of 4,
scale-down steps of 1 after a 300 s window, and a 300 s cold start.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from inferscale.api import InferenceServiceSpec, parse_spec
from inferscale.policy import (
    Decision,
    Direction,
    Limit,
    Memory,
    Observation,
    Reason,
    Recommendation,
    adopt,
    decide,
)

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
NAN = float("nan")


def _spec(**fields: Any) -> InferenceServiceSpec:
    spec: dict[str, Any] = {
        "model": {"id": "meta-llama/Llama-3.1-8B-Instruct"},
        "maxConcurrency": 16,
        "coldStartSeconds": 300,
        "replicas": {"min": 1, "max": 8},
        "scaling": {"ttftP95Seconds": 1.2, "queueDepthPerReplica": 4},
    }
    return parse_spec({**spec, **fields})


def _seen(
    current: int,
    ready: int | None = None,
    *,
    starting: int = 0,
    pending: int = 0,
    waiting: float | None = 0.0,
    running: float | None = 0.0,
    ttft: float | None = 0.3,
    kv: float | None = None,
    gpu: float | None = None,
    at: datetime | None = T0,
) -> Observation:
    return Observation(
        current_replicas=current,
        ready_replicas=current - starting - pending if ready is None else ready,
        starting_replicas=starting,
        pending_replicas=pending,
        queue_depth=waiting,
        running_requests=running,
        ttft_p95_seconds=ttft,
        kv_cache_usage=kv,
        gpu_utilization_percent=gpu,
        metrics_at=at,
    )


def _settled(ready: int, **fields: Any) -> Memory:
    """Memory of a service whose ready count has not changed lately."""
    return Memory(ready_replicas=ready, **fields)


def _decide(observed: Observation, memory: Memory | None = None, spec: InferenceServiceSpec | None = None) -> Decision:
    return decide(spec or _spec(), observed, _settled(observed.ready_replicas) if memory is None else memory, T0)


def _ago(seconds: int) -> datetime:
    return T0 - timedelta(seconds=seconds)


# --- scaling up -------------------------------------------------------------------


def test_slo_breach_scales_up_in_proportion() -> None:
    decision = _decide(_seen(2, waiting=3, running=32, ttft=1.9))
    assert (decision.replicas, decision.reason) == (4, Reason.SLO_BREACHED)
    assert decision.message == "p95 TTFT 1.90s > SLO 1.20s with 3 waiting: scaling 2 -> 4."
    assert not decision.held
    assert decision.limited_by is None
    assert (decision.memory.last_scale_time, decision.memory.last_scale_direction) == (T0, Direction.UP)


def test_queue_above_target_scales_up_before_ttft_breaches() -> None:
    decision = _decide(_seen(2, waiting=20, running=32, ttft=0.9))
    assert (decision.replicas, decision.reason) == (3, Reason.QUEUE_GROWING)
    assert decision.message == "20 requests waiting on 2 ready replicas (target 4 per replica): scaling 2 -> 3."


def test_a_queue_over_its_target_for_one_scrape_is_a_burst_and_the_second_is_not() -> None:
    # Target 8 on 2 replicas: 12 waiting once is absorbed; 12 again a tick later, or a surge past 16, is not.
    once = _decide(_seen(2, waiting=12, running=32, ttft=0.9))
    assert (once.replicas, once.reason) == (2, Reason.STEADY)
    again = _decide(_seen(2, waiting=12, running=32, ttft=0.9), once.memory)
    assert (again.replicas, again.reason) == (3, Reason.QUEUE_GROWING)
    surge = _decide(_seen(2, waiting=17, running=32, ttft=0.9))
    assert (surge.replicas, surge.reason) == (3, Reason.QUEUE_GROWING)


def test_queue_within_tolerance_of_its_target_does_nothing() -> None:
    decision = _decide(_seen(2, waiting=8.5, running=32, ttft=0.9))  # target 8, tolerance to 8.8
    assert (decision.replicas, decision.reason) == (2, Reason.STEADY)


def test_queue_alone_scales_up_when_ttft_is_missing() -> None:
    decision = _decide(_seen(2, waiting=40, running=32, ttft=NAN))
    assert (decision.replicas, decision.reason) == (4, Reason.QUEUE_GROWING)


def test_scale_up_moves_at_most_one_step_and_stops_at_max() -> None:
    first = _decide(_seen(2, waiting=50, running=32, ttft=12.0))
    assert (first.replicas, first.reason, first.limited_by) == (6, Reason.SLO_BREACHED, None)
    assert "(20 needed; the step limit)" in first.message

    second = _decide(_seen(6, waiting=50, running=96, ttft=12.0))
    assert (second.replicas, second.limited_by) == (8, Limit.MAX_REPLICAS)
    assert "(60 needed; spec.replicas.max is 8)" in second.message


def test_at_max_replicas_holds_and_says_scaling_is_limited() -> None:
    decision = _decide(_seen(8, waiting=0, running=100, ttft=1.9))
    assert (decision.replicas, decision.reason, decision.limited_by) == (8, Reason.AT_MAX_REPLICAS, Limit.MAX_REPLICAS)
    assert decision.held
    assert "13 replicas needed, but spec.replicas.max is 8: holding 8 replicas." in decision.message


def test_pending_pods_stop_scale_up_at_gpu_capacity() -> None:
    decision = _decide(_seen(4, pending=2, waiting=10, running=32, ttft=1.9))
    assert (decision.replicas, decision.reason) == (4, Reason.GPU_CAPACITY_REACHED)
    assert decision.limited_by is Limit.GPU_CAPACITY
    assert decision.held
    assert "2 pods are Pending (no free nvidia.com/gpu), so none are added: holding 4 replicas." in decision.message


def test_pending_pods_with_nothing_ready_are_said_so() -> None:
    decision = _decide(_seen(2, ready=0, pending=2, waiting=None, running=None, ttft=None, at=None))
    assert (decision.replicas, decision.reason, decision.limited_by) == (
        2,
        Reason.GPU_CAPACITY_REACHED,
        Limit.GPU_CAPACITY,
    )
    assert decision.message.startswith("2 pods are Pending (no free nvidia.com/gpu) and none is ready")


def test_no_stacking_while_added_replicas_start() -> None:
    memory = _settled(2, last_scale_time=_ago(60), last_scale_direction=Direction.UP)
    decision = _decide(_seen(4, starting=2, waiting=10, running=32, ttft=3.0), memory)
    assert (decision.replicas, decision.reason) == (4, Reason.WAITING_FOR_STARTING_REPLICAS)
    assert decision.held
    assert "2 replicas added 60s ago still starting (cold start 300s): holding 4 replicas." in decision.message


def test_starting_replicas_that_cover_the_need_are_waited_for() -> None:
    decision = _decide(_seen(4, starting=2, waiting=10, running=32, ttft=1.9))
    assert (decision.replicas, decision.reason) == (4, Reason.WAITING_FOR_STARTING_REPLICAS)
    assert "2 of 4 replicas are not ready yet and make up the 4 needed" in decision.message


def test_replicas_starting_past_twice_the_cold_start_no_longer_block() -> None:
    memory = _settled(2, last_scale_time=_ago(700), last_scale_direction=Direction.UP)
    decision = _decide(_seen(4, starting=2, waiting=10, running=32, ttft=3.0), memory)
    assert (decision.replicas, decision.reason) == (5, Reason.SLO_BREACHED)
    assert "not waiting for 2 replicas still starting 700s after the last scale-up" in decision.message


def test_nothing_ready_while_replicas_start_is_said_so() -> None:
    decision = _decide(_seen(2, starting=2, waiting=None, running=None, ttft=None, at=None))
    assert (decision.replicas, decision.reason) == (2, Reason.WAITING_FOR_STARTING_REPLICAS)
    assert decision.message.startswith("2 replicas starting and none ready to report load")


def test_ttft_breach_waits_for_the_p95_window_to_cover_new_replicas() -> None:
    memory = _settled(4, ready_changed_at=_ago(30))
    decision = _decide(_seen(4, running=40, ttft=1.9), memory)
    assert (decision.replicas, decision.reason) == (4, Reason.STABILIZING)
    assert decision.message == (
        "p95 TTFT 1.90s > SLO 1.20s, but the ready replicas changed 30s ago and the 120s p95 TTFT window "
        "does not reflect them yet: holding 4 replicas."
    )
    at = T0 + timedelta(seconds=90)
    later = decide(_spec(), _seen(4, running=40, ttft=1.9, at=at), memory, at)
    assert (later.replicas, later.reason) == (7, Reason.SLO_BREACHED)


def test_replicas_just_ready_drain_the_backlog_before_more_are_added() -> None:
    # 4 replicas became ready 15 s ago and took their share at once: 120 waiting, down from 150 at the
    # last tick's scrape 15 s ago, 2 a second: gone in 60 s, before a replica added now (300 s) could start.
    draining = _settled(4, ready_changed_at=_ago(15), queue_depth=150, queue_depth_at=_ago(15))
    decision = _decide(_seen(4, waiting=120, running=64, ttft=0.9), draining)
    assert (decision.replicas, decision.reason) == (4, Reason.STABILIZING)
    assert decision.message == (
        "120 requests waiting on 4 ready replicas (target 4 per replica), down from 150 at the last tick: "
        "the replicas ready 15s ago are draining it (gone in 60s at that pace, within the 300s cold start): "
        "holding 4 replicas."
    )
    assert decision.memory.queue_depth == 120
    # Falling too slowly to be gone within a cold start: the replicas run at their limit, not far below
    # it, and one more is added (a queue that grows adds the step its requests need).
    crawling = _decide(_seen(4, waiting=148, running=64, ttft=0.9), draining)
    assert (crawling.replicas, crawling.reason) == (5, Reason.QUEUE_GROWING)
    assert crawling.message == (
        "148 requests waiting on 4 ready replicas (target 4 per replica), falling too slowly to be gone within "
        "the 300s cold start (1110s at the pace since the last tick): scaling 4 -> 5."
    )
    # Without the last scrape's time (status written by an older operator) the pace is unknown: held.
    unknown = _settled(4, ready_changed_at=_ago(15), queue_depth=150)
    held = _decide(_seen(4, waiting=148, running=64, ttft=0.9), unknown)
    assert (held.reason, held.message) == (
        Reason.STABILIZING,
        "148 requests waiting on 4 ready replicas (target 4 per replica), down from 150 at the last tick: "
        "the replicas ready 15s ago are draining it: holding 4 replicas.",
    )
    # Still growing with them: they are not enough, and more are added at once.
    growing = _decide(_seen(4, waiting=160, running=64, ttft=0.9), draining)
    assert (growing.replicas, growing.reason) == (8, Reason.QUEUE_GROWING)
    # Neither is a queue that has not moved (two ticks may read the same scrape): not shown to drain.
    flat = _decide(_seen(4, waiting=150, running=64, ttft=0.9), draining)
    assert (flat.replicas, flat.reason) == (8, Reason.QUEUE_GROWING)
    # Once the ready count has been steady for the p95 window, a backlog above target scales up again.
    settled = _decide(_seen(4, waiting=120, running=64, ttft=0.9), _settled(4, queue_depth=150))
    assert (settled.replicas, settled.reason) == (8, Reason.QUEUE_GROWING)


def test_replicas_ready_since_the_last_tick_get_a_tick_to_take_their_share() -> None:
    # The last tick read 88 waiting on 2; 2 more are ready now, and the queue read now was scraped before
    # they took their share: sizing from it would stack a step on top of the one that just arrived.
    before = _settled(2, queue_depth=88)
    decision = _decide(_seen(4, waiting=88, running=64, ttft=5.0), before)
    assert (decision.replicas, decision.reason) == (4, Reason.STABILIZING)
    assert decision.message == (
        "88 requests waiting on 4 ready replicas (target 4 per replica), but 2 of them became ready since the "
        "last tick and have not taken their share yet: holding 4 replicas."
    )
    # One tick only: a queue that has not moved once they have had it adds replicas.
    after = _decide(_seen(4, waiting=88, running=64, ttft=5.0), decision.memory)
    assert after.reason is Reason.QUEUE_GROWING
    assert after.replicas > 4
    # One replica more in a fleet of 8 is not a third of it: a queue it cannot take adds replicas at once.
    spec = _spec(replicas={"min": 1, "max": 16})
    surge = decide(spec, _seen(8, waiting=88, running=128, ttft=5.0), _settled(7, queue_depth=80), T0)
    assert surge.reason is Reason.QUEUE_GROWING
    assert surge.replicas > 8


def test_a_drained_backlogs_waits_in_the_p95_window_do_not_size_a_scale_up() -> None:
    # The queue was over its target 70 s ago and emptied 45 s ago; its requests' long waits are
    # still in the 120 s p95 window, though nothing waits now.
    after_backlog = _settled(4, backlog_seen_at=_ago(70), backlog_cleared_at=_ago(45))
    decision = _decide(_seen(4, running=20, ttft=30.0), after_backlog)
    assert (decision.replicas, decision.reason) == (4, Reason.STABILIZING)
    assert decision.message == (
        "p95 TTFT 30.00s > SLO 1.20s, but requests waited beyond the queue target until 45s ago, "
        "and the 120s p95 TTFT window holds their waits: holding 4 replicas."
    )
    assert decision.memory.slo_knee_per_replica is None  # nothing learnt from those waits
    # A window after it cleared, a breach is the replicas' own again.
    at = T0 + timedelta(seconds=75)
    later = decide(_spec(), _seen(4, running=20, ttft=3.0, at=at), after_backlog, at)
    assert (later.replicas, later.reason) == (8, Reason.SLO_BREACHED)
    # A backlog first seen in this very tick does not mute this tick's breach.
    first = _decide(_seen(4, waiting=17, running=64, ttft=3.0))
    assert first.reason is Reason.SLO_BREACHED
    assert first.memory.backlog_seen_at == T0 and first.memory.backlog_cleared_at is None


def test_a_backlog_clears_when_nothing_waits_or_a_window_after_it_fell_to_target() -> None:
    seen = _settled(4, backlog_seen_at=_ago(30))
    still = _decide(_seen(4, waiting=10, running=64), seen)  # at the target of 16: not cleared yet
    assert still.memory.backlog_cleared_at is None
    assert _decide(_seen(4, waiting=0, running=64), seen).memory.backlog_cleared_at == T0
    long_ago = _settled(4, backlog_seen_at=_ago(120))
    assert _decide(_seen(4, waiting=10, running=64), long_ago).memory.backlog_cleared_at == T0


def test_scale_up_stabilization_window_waits_for_a_sustained_breach() -> None:
    spec = _spec(scaling={"ttftP95Seconds": 1.2, "scaleUp": {"stabilizationSeconds": 60}})
    memory = _settled(2, scale_up_window=(Recommendation(time=_ago(30), replicas=2),))
    decision = _decide(_seen(2, running=32, ttft=1.9), memory, spec)
    assert (decision.replicas, decision.reason) == (2, Reason.STABILIZING)
    assert "but the lowest recommendation within the 60s scale-up window is 2: holding 2 replicas." in decision.message


def test_high_gpu_utilisation_alone_does_not_scale_up() -> None:
    decision = _decide(_seen(2, running=20, ttft=0.5, gpu=99))
    assert (decision.replicas, decision.reason) == (2, Reason.STEADY)


# --- scaling down -----------------------------------------------------------------


def test_scales_down_one_step_when_the_slo_holds_with_headroom() -> None:
    memory = _settled(4, scale_down_window=(Recommendation(time=_ago(400), replicas=4),))
    decision = _decide(_seen(4, running=10, ttft=0.4), memory)
    assert (decision.replicas, decision.reason) == (3, Reason.SCALED_DOWN)
    assert decision.message == (
        "p95 TTFT 0.40s within SLO 1.20s; 10 requests in flight fit 1 replica (at most 1 removed per step): "
        "scaling 4 -> 3."
    )
    assert decision.memory.last_scale_direction is Direction.DOWN


def test_scale_down_goes_no_lower_than_the_window_allows() -> None:
    spec = _spec(scaling={"ttftP95Seconds": 1.2, "scaleDown": {"maxStepReplicas": 5}})
    memory = _settled(6, scale_down_window=(Recommendation(time=_ago(100), replicas=4),))
    decision = _decide(_seen(6, running=10, ttft=0.4), memory, spec)
    assert (decision.replicas, decision.reason) == (4, Reason.SCALED_DOWN)
    assert "fit 1 replica (the highest recommendation within the 300s window): scaling 6 -> 4." in decision.message


def test_scale_down_waits_for_the_window() -> None:
    memory = _settled(4, scale_down_window=(Recommendation(time=_ago(100), replicas=4),))
    decision = _decide(_seen(4, running=10, ttft=0.4), memory)
    assert (decision.replicas, decision.reason) == (4, Reason.STABILIZING)
    assert decision.held
    assert decision.message == (
        "10 requests in flight fit 1 replica, but the highest recommendation within the 300s scale-down window "
        "is 4: holding 4 replicas."
    )


def test_first_tick_without_memory_removes_nothing() -> None:
    # After a restart that lost its memory, the current count counts as just recommended.
    decision = decide(_spec(), _seen(4, running=10, ttft=0.4), Memory(), T0)
    assert (decision.replicas, decision.reason) == (4, Reason.STABILIZING)


def test_scale_down_waits_until_ttft_reflects_the_last_change() -> None:
    memory = _settled(5)  # five were ready at the last tick, four now
    decision = _decide(_seen(4, running=10, ttft=0.4), memory)
    assert (decision.replicas, decision.reason) == (4, Reason.STABILIZING)
    assert "the ready replicas changed 0s ago and the 120s p95 TTFT window does not reflect them yet" in (
        decision.message
    )
    assert decision.memory.ready_changed_at == T0


def test_no_scale_down_without_ttft_headroom() -> None:
    decision = _decide(_seen(4, running=10, ttft=1.0))
    assert (decision.replicas, decision.reason) == (4, Reason.INSUFFICIENT_HEADROOM)
    assert decision.held
    assert decision.message == (
        "10 requests in flight fit 1 replica, but p95 TTFT 1.00s is above 80% of SLO 1.20s: holding 4 replicas."
    )


def test_busy_gpus_do_not_block_a_scale_down_the_slo_allows() -> None:
    # A continuous-batching engine keeps DCGM utilisation near 100% at any load.
    decision = _decide(_seen(4, running=10, ttft=0.4, gpu=97))
    assert decision.reason is Reason.SCALED_DOWN


def test_stale_gpu_utilisation_is_ignored() -> None:
    observed = _seen(4, running=10, ttft=0.4, gpu=92).model_copy(update={"gpu_metrics_at": _ago(300)})
    assert _decide(observed).reason is Reason.SCALED_DOWN


def test_kv_cache_keeps_replicas_that_concurrency_alone_would_remove() -> None:
    decision = _decide(_seen(4, running=10, ttft=0.4, kv=0.7))
    assert (decision.replicas, decision.reason) == (4, Reason.STEADY)
    assert "KV cache 70% full on 4 replicas fit 4 replicas" in decision.message


def test_waiting_requests_keep_replicas_below_the_queue_target() -> None:
    decision = _decide(_seen(4, waiting=12, running=10, ttft=0.4))  # 12 < 4 x 4, but above 80% of it on 3
    assert (decision.replicas, decision.reason) == (4, Reason.STEADY)
    assert "12 requests waiting fit 4 replicas" in decision.message


def test_steady_when_the_load_needs_the_replicas_there_are() -> None:
    decision = _decide(_seen(3, running=40, ttft=0.7))
    assert (decision.replicas, decision.reason, decision.held) == (3, Reason.STEADY, False)
    assert decision.message == (
        "p95 TTFT 0.70s within SLO 1.20s; 40 requests in flight fit 4 replicas: holding 3 replicas."
    )


def test_small_changes_within_tolerance_do_nothing() -> None:
    spec = _spec(replicas={"min": 1, "max": 30})
    decision = _decide(_seen(20, running=19 * 12.8, ttft=0.4), spec=spec)
    assert (decision.replicas, decision.reason) == (20, Reason.STEADY)
    assert "fit 19 replicas, within the 10% tolerance of 20" in decision.message


def test_idle_service_scales_down_although_ttft_has_no_samples() -> None:
    decision = _decide(_seen(3, running=0, ttft=NAN))
    assert (decision.replicas, decision.reason) == (2, Reason.SCALED_DOWN)
    assert decision.message.startswith("idle; 0 requests in flight fit 0 replicas (spec.replicas.min is 1)")


def test_at_min_replicas_when_the_load_would_allow_fewer() -> None:
    decision = _decide(_seen(1, running=0, ttft=None))
    assert (decision.replicas, decision.reason, decision.held) == (1, Reason.AT_MIN_REPLICAS, True)
    assert decision.message == "0 requests in flight fit 0 replicas (spec.replicas.min is 1): holding 1 replica."


def test_scale_to_zero_only_when_nothing_is_in_flight() -> None:
    spec = _spec(replicas={"min": 0, "max": 4})
    busy = _decide(_seen(1, running=0.5, ttft=0.2), spec=spec)
    idle = _decide(_seen(1, running=0, ttft=None), spec=spec)
    assert (busy.replicas, busy.reason) == (1, Reason.STEADY)
    assert (idle.replicas, idle.reason) == (0, Reason.SCALED_DOWN)


# --- the SLO knee ------------------------------------------------------------------


def test_breach_below_the_ceiling_is_remembered_and_limits_scale_down() -> None:
    breach = _decide(_seen(4, running=40, ttft=1.5))
    assert breach.reason is Reason.SLO_BREACHED
    assert breach.memory.slo_knee_per_replica == 10.0  # 40 in flight on 4 ready replicas

    # One more replica later, the SLO holds; concurrency alone would fit 4 again, the knee says 5.
    memory = breach.memory.model_copy(update={"ready_replicas": 5, "ready_changed_at": None})
    after = _decide(_seen(5, running=40, ttft=0.6), memory)
    assert (after.replicas, after.reason) == (5, Reason.STEADY)
    assert "40 requests in flight, the SLO having broken at 10 per replica, fit 5 replicas" in after.message


def test_breach_at_the_ceiling_is_queueing_and_not_remembered() -> None:
    assert _decide(_seen(2, waiting=3, running=32, ttft=1.9)).memory.slo_knee_per_replica is None


def test_knee_rises_when_the_slo_holds_at_a_higher_load() -> None:
    decision = _decide(_seen(4, running=48, ttft=0.5), _settled(4, slo_knee_per_replica=10.0))
    assert decision.memory.slo_knee_per_replica == 12.0


# --- holding on bad data ----------------------------------------------------------


def test_nan_queue_depth_holds() -> None:
    decision = _decide(_seen(3, waiting=NAN, running=10))
    assert (decision.replicas, decision.reason, decision.held) == (3, Reason.METRICS_MISSING, True)
    assert decision.message == "queue depth missing or NaN: holding 3 replicas."


def test_missing_engine_metrics_hold() -> None:
    decision = _decide(_seen(3, waiting=None, running=None, ttft=None, at=None))
    assert (decision.replicas, decision.reason) == (3, Reason.METRICS_MISSING)
    assert decision.message == "no engine metrics were found: holding 3 replicas."


def test_missing_ttft_under_load_holds() -> None:
    decision = _decide(_seen(3, running=5, ttft=NAN))
    assert (decision.replicas, decision.reason) == (3, Reason.METRICS_MISSING)
    assert decision.message == "p95 TTFT is missing or NaN with 5 requests in flight: holding 3 replicas."


def test_stale_metrics_hold() -> None:
    decision = _decide(_seen(3, running=0, ttft=0.2, at=_ago(95)))
    assert (decision.replicas, decision.reason, decision.held) == (3, Reason.METRICS_STALE, True)
    assert decision.message == "engine metrics are 95s old (limit 60s): holding 3 replicas."
    relaxed = decide(
        _spec(), _seen(3, running=0, ttft=0.2, at=_ago(95)), _settled(3), T0, stale_after=timedelta(minutes=2)
    )
    assert relaxed.reason is not Reason.METRICS_STALE


# --- bounds -------------------------------------------------------------------------


def test_below_min_goes_to_min_even_without_metrics() -> None:
    decision = _decide(_seen(1, waiting=None, running=None, at=None), spec=_spec(replicas={"min": 2, "max": 8}))
    assert (decision.replicas, decision.reason) == (2, Reason.BELOW_MIN_REPLICAS)
    assert decision.message == "the Deployment has 1 replica, below spec.replicas.min 2: scaling 1 -> 2."


def test_above_max_goes_to_max_at_once() -> None:
    decision = _decide(_seen(10, running=150, ttft=2.0))
    assert (decision.replicas, decision.reason) == (8, Reason.ABOVE_MAX_REPLICAS)
    assert decision.message == "the Deployment has 10 replicas, above spec.replicas.max 8: scaling 10 -> 8."


# --- the contract -------------------------------------------------------------------


def test_memory_survives_a_restart_through_status_json() -> None:
    first = _decide(_seen(2, waiting=3, running=32, ttft=1.9))
    stored = first.memory.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert set(stored) == {
        "scaleUpWindow",
        "scaleDownWindow",
        "lastScaleTime",
        "lastScaleDirection",
        "readyReplicas",
        "queueDepth",
        "queueDepthAt",
    }
    assert stored["scaleDownWindow"] == [{"time": "2026-01-01T12:00:00Z", "replicas": 4}]

    later = T0 + timedelta(seconds=15)
    observed = _seen(4, starting=2, waiting=5, running=32, ttft=1.9)
    restarted = decide(_spec(), observed, Memory.model_validate(stored), later)
    assert restarted == decide(_spec(), observed, first.memory, later)
    assert restarted.reason is Reason.WAITING_FOR_STARTING_REPLICAS


def test_memory_ignores_fields_from_other_operator_versions() -> None:
    assert Memory.model_validate({"readyReplicas": 2, "somethingNew": 1}) == Memory(ready_replicas=2)


def test_the_batch_ceiling_is_never_an_output() -> None:
    assert set(Decision.model_fields) == {
        "replicas", "reason", "message", "held", "limited_by", "slo_unattainable", "memory",
    }  # fmt: skip


def test_now_must_be_timezone_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        decide(_spec(), _seen(2), Memory(), datetime(2026, 1, 1))


# --- what replicas fix, demand and capacity ---------------------------------------


def _timed(
    current: int, *, ttft: float, queue_time: float, prefill_p95: float = 1.6, rate: float | None = None, **kw: Any
) -> Observation:
    seen = _seen(current, ttft=ttft, **kw)
    return seen.model_copy(
        update={
            "queue_time_seconds": queue_time,
            "prefill_time_seconds": 0.8,
            "prefill_p95_seconds": prefill_p95,
            "request_rate": rate,
        }
    )


def test_a_breach_of_prefill_not_waiting_adds_no_replica_and_says_why() -> None:
    decision = _decide(_timed(4, ttft=2.0, queue_time=0.01, running=50))  # 50 in flight need 4
    assert (decision.replicas, decision.reason) == (4, Reason.SLO_UNATTAINABLE)
    assert decision.slo_unattainable is not None
    for fact in ("2.00s", "1.60s at p95", "ttftP95Seconds", "maxModelLen", "gpusPerReplica"):
        assert fact in decision.slo_unattainable


def test_a_breach_with_requests_waiting_still_scales_up() -> None:
    decision = _decide(_timed(4, ttft=2.0, queue_time=0.9, running=20))
    assert decision.reason is Reason.SLO_BREACHED and decision.replicas > 4
    assert decision.slo_unattainable is None


def test_a_breach_adds_a_step_where_the_request_rate_sizes_the_rest() -> None:
    # p95 TTFT at twice the SLO with requests waiting. With the request rate known (3 req/s, which 4 replicas
    # serve), the breach adds one replica; without it (an engine that lacks the signal), twice the replicas.
    memory = _settled(4, capacity_rps=1.0, capacity_replicas=4, demand_level=3.0, demand_trend=0.0,
                      demand_at=_ago(15), rate_since=_ago(600))  # fmt: skip
    with_rate = _decide(_timed(4, ttft=2.4, queue_time=0.9, running=20, waiting=2, rate=3.0), memory)
    assert (with_rate.replicas, with_rate.reason) == (5, Reason.SLO_BREACHED)
    without = _decide(_timed(4, ttft=2.4, queue_time=0.9, running=20, waiting=2), memory)
    assert (without.replicas, without.reason) == (8, Reason.SLO_BREACHED)


def test_an_unattainable_slo_does_not_stop_a_scale_down_when_the_load_falls() -> None:
    memory = _settled(6, scale_down_window=(Recommendation(time=_ago(600), replicas=6),))
    decision = _decide(_timed(6, ttft=2.5, queue_time=0.0, running=8), memory)
    assert (decision.replicas, decision.reason) == (5, Reason.SCALED_DOWN)
    assert decision.slo_unattainable is not None


def test_demand_sizes_from_the_learnt_capacity_with_starting_replicas_counted() -> None:
    # 4 req/s, and a replica known to serve 1 req/s within the SLO in a fleet of 2. Pooled (POOL_BETA 2), a
    # fleet of n serves (sqrt(n + 1) - 1) ** 2 / 0.268 req/s at that rate: 3 serve 3.7, 4 serve 5.7. Run at
    # 90%, 3 replicas fall short of 4 req/s (3.4) and 4 carry it (5.1).
    memory = _settled(2, capacity_rps=1.0, demand_level=4.0, demand_trend=0.0, demand_at=_ago(15), rate_since=_ago(600))
    decision = _decide(_timed(2, ttft=0.4, queue_time=0.0, rate=4.0, running=6), memory)
    assert (decision.replicas, decision.reason) == (4, Reason.DEMAND_RISING)
    # Two replicas already starting make up the need: nothing is stacked on them.
    starting = _timed(4, ttft=0.4, queue_time=0.0, rate=4.0, running=6, starting=2)
    assert _decide(starting, memory.model_copy(update={"ready_replicas": 2})).replicas == 4


def test_a_queue_that_grows_counts_as_demand_the_finished_rate_misses() -> None:
    # Every seat busy (2 x 16 running): the rate (requests finished, 1.6 req/s) is what the replicas get through,
    # which 2 carry at 1 req/s a replica learnt on 2. The queue grew from none to 6 since the scrape the last
    # tick read, 15 s before this one's: 0.4 req/s more arrive than finish, 2 req/s in all, which need 3.
    memory = _settled(2, capacity_rps=1.0, capacity_replicas=2, demand_level=1.6, demand_trend=0.0,
                      demand_at=_ago(15), rate_since=_ago(600), queue_depth=0.0, queue_depth_at=_ago(15))  # fmt: skip
    full = _timed(2, ttft=0.4, queue_time=0.0, rate=1.6, running=32, waiting=6)
    decision = _decide(full, memory)
    assert (decision.replicas, decision.reason) == (3, Reason.DEMAND_RISING)
    assert "1.6 req/s + 0.4 req/s by which the queue grew" in decision.message
    assert (decision.memory.queue_depth, decision.memory.queue_depth_at) == (6, T0)
    # Over 30 s between scrapes (ticks may come faster or slower than them), the same growth is 0.2 req/s: 2 fit.
    assert _decide(full, memory.model_copy(update={"queue_depth_at": _ago(30)})).replicas == 2
    # The same queue, no longer growing: the rate is the demand, and 2 replicas carry it.
    assert _decide(full, memory.model_copy(update={"queue_depth": 6.0})).replicas == 2


def test_two_replicas_are_kept_while_one_alone_would_run_above_half_its_rate() -> None:
    # A replica serves 1 req/s alone. At 0.7 req/s one would do (at 81%, the fill a scale-down asks for), but a
    # burst of twice the load before a new one is ready would break it: two are kept, and the message says why.
    def settled_at(level: float) -> Memory:
        return _settled(2, capacity_rps=1.0, capacity_replicas=1, demand_level=level, demand_trend=0.0,
                        demand_at=_ago(15), rate_since=_ago(600),
                        scale_down_window=(Recommendation(time=_ago(600), replicas=2),))  # fmt: skip

    busy = _decide(_timed(2, ttft=0.4, queue_time=0.0, rate=0.7, running=2), settled_at(0.7))
    assert (busy.replicas, busy.reason) == (2, Reason.STEADY)
    assert "one alone would run at 70% of its rate" in busy.message
    # At 0.4 req/s one replica alone runs at 40%: it takes a burst of twice the load.
    quiet = _decide(_timed(2, ttft=0.4, queue_time=0.0, rate=0.4, running=2), settled_at(0.4))
    assert (quiet.replicas, quiet.reason) == (1, Reason.SCALED_DOWN)


def test_replicas_are_kept_for_a_burst_the_fleet_was_short_for_until_it_fades() -> None:
    # Each replica serves 1 req/s (behind a balancer blind to the load, so no pooling: 1 req/s each). The rate
    # is 1 req/s, which 2 replicas carry at the fill a scale-down asks for, but a burst of 3.5 req/s found the
    # fleet short 15 s ago: the 4 replicas it needs are kept, and the message says why.
    blind = _spec(scaling={"ttftP95Seconds": 1.2, "queueDepthPerReplica": 4, "loadBalancing": "Random"})
    memory = _settled(4, capacity_rps=1.0, capacity_replicas=1, demand_level=1.0, demand_trend=0.0,
                      demand_at=_ago(15), rate_since=_ago(600), burst_rps=3.5, burst_at=_ago(15),
                      scale_down_window=(Recommendation(time=_ago(600), replicas=4),))  # fmt: skip
    quiet = _timed(4, ttft=0.4, queue_time=0.0, rate=1.0, running=4)
    kept = decide(blind, quiet, memory, T0)
    assert (kept.replicas, kept.reason) == (4, Reason.STEADY)
    assert "4 kept for a burst of 3.5 req/s" in kept.message
    # A half-life (20 minutes) later it has faded halfway to the rate, 2.25 req/s: 3 replicas are kept.
    faded = decide(blind, quiet, memory.model_copy(update={"burst_at": _ago(1200)}), T0)
    assert (faded.replicas, faded.reason) == (3, Reason.SCALED_DOWN)
    assert (faded.memory.burst_rps, faded.memory.burst_at) == (2.25, T0)
    # Without it, the scale-down goes as far as its step allows, and one faded to the rate is forgotten.
    assert decide(blind, quiet, memory.model_copy(update={"burst_rps": None}), T0).replicas == 3
    assert decide(blind, quiet, memory.model_copy(update={"burst_at": _ago(86400)}), T0).memory.burst_rps is None


def test_a_burst_is_remembered_only_while_requests_wait_beyond_the_target() -> None:
    # 2 replicas finish 2 req/s, and the queue grew from 5 to 20 over the 15 s between scrapes: 3 req/s arrive.
    memory = _settled(2, capacity_rps=1.0, capacity_replicas=2, demand_level=2.0, demand_trend=0.0,
                      demand_at=_ago(15), rate_since=_ago(600), queue_depth=5.0, queue_depth_at=_ago(15))  # fmt: skip
    short = _decide(_timed(2, ttft=0.4, queue_time=0.0, rate=2.0, running=32, waiting=20), memory)
    assert short.memory.burst_rps == pytest.approx(3.0)
    # The same arrivals with the queue within its target (8 for 2 replicas): a burst the replicas absorb.
    absorbed = memory.model_copy(update={"queue_depth": 0.0, "queue_depth_at": _ago(30)})
    within = _decide(_timed(2, ttft=0.4, queue_time=0.0, rate=2.0, running=32, waiting=8), absorbed)
    assert within.memory.burst_rps is None


def test_a_rate_learnt_on_a_small_fleet_sizes_a_larger_one_as_a_pool() -> None:
    # Behind a least-request balancer a larger fleet serves more per replica. 1 req/s a replica learnt on 2
    # replicas: 8 req/s at 90% would be 9 replicas each serving as those 2 did, but a pool of 6 carries it
    # ((sqrt(7) - 1) ** 2 / 0.268 = 10.1 req/s at that rate, 9.1 at 90%) and a pool of 5 does not (7.1).
    spec = _spec(replicas={"min": 1, "max": 16}, scaling={"ttftP95Seconds": 1.2, "queueDepthPerReplica": 4,
                                                         "scaleUp": {"maxStepReplicas": 8}})  # fmt: skip
    memory = _settled(
        2, capacity_rps=1.0, capacity_replicas=2, demand_level=8.0, demand_trend=0.0, demand_at=_ago(15),
        rate_since=_ago(600),
    )  # fmt: skip
    decision = decide(spec, _timed(2, ttft=0.4, queue_time=0.0, rate=8.0, running=8), memory, T0)
    assert (decision.replicas, decision.reason) == (6, Reason.DEMAND_RISING)
    assert "at 1.7 req/s per replica" in decision.message  # what each of the 6 serves, pooled
    # 1 req/s learnt on one replica alone says more of a pool (each of 4 serves 2.3): 4 replicas.
    alone = memory.model_copy(update={"capacity_replicas": 1})
    assert decide(spec, _timed(2, ttft=0.4, queue_time=0.0, rate=8.0, running=8), alone, T0).replicas == 4
    # The learnt rate is kept with the fleet it was learnt on.
    assert decision.memory.capacity_replicas == 2
    # Behind a balancer blind to the load (kube-proxy), each replica queues alone: 9 replicas, as before pooling.
    scaling = {"ttftP95Seconds": 1.2, "queueDepthPerReplica": 4, "scaleUp": {"maxStepReplicas": 8}}
    blind = _spec(replicas={"min": 1, "max": 16}, scaling={**scaling, "loadBalancing": "Random"})
    assert decide(blind, _timed(2, ttft=0.4, queue_time=0.0, rate=8.0, running=8), memory, T0).replicas == 9


def test_status_from_before_the_fleet_size_was_kept_is_taken_as_learnt_on_the_ready_replicas() -> None:
    old = _settled(2, capacity_rps=1.0, demand_level=8.0, demand_trend=0.0, demand_at=_ago(15), rate_since=_ago(600))
    new = old.model_copy(update={"capacity_replicas": 2})
    seen = _timed(2, ttft=0.4, queue_time=0.0, rate=8.0, running=8)
    assert _decide(seen, old).replicas == _decide(seen, new).replicas


def test_a_forecast_adds_one_step_beyond_the_rate_and_none_on_top_of_a_step_still_starting() -> None:
    # 8.9 req/s at 1 req/s a replica (run at 90%) need 10; Holt's forecast (capped at 1.2x: 10.7 req/s) asks 12.
    spec = _spec(
        replicas={"min": 1, "max": 16},
        scaling={"ttftP95Seconds": 1.2, "queueDepthPerReplica": 4, "scaleUp": {"maxStepReplicas": 1}},
    )
    memory = _settled(
        8, capacity_rps=1.0, demand_level=8.9, demand_trend=0.01, demand_at=_ago(15), rate_since=_ago(600)
    )
    ready = _timed(10, ttft=0.4, queue_time=0.0, rate=8.9, running=40)
    assert decide(spec, ready, memory.model_copy(update={"ready_replicas": 10}), T0).replicas == 11  # one step
    # 11 replicas, 3 of them still starting: the forecast's step is under way; no second one on top.
    starting = _timed(11, ttft=0.4, queue_time=0.0, rate=8.9, running=40, starting=3)
    decision = decide(spec, starting, memory, T0)
    assert decision.replicas == 11 and decision.reason is not Reason.DEMAND_RISING


def _after_a_burst(ready: int, starting: int, *, rate: float, ttft: float = 0.4) -> tuple[Observation, Memory]:
    # A scale-up for a burst a minute ago is still starting (the scale-down window holds its count); the rate
    # is back at `rate`, and a replica serves 1 req/s.
    memory = _settled(
        ready,
        capacity_rps=1.0,
        demand_level=rate,
        demand_trend=0.0,
        demand_at=_ago(15),
        rate_since=_ago(600),
        scale_down_window=(Recommendation(time=_ago(60), replicas=ready + starting),),
        last_scale_time=_ago(60),
        last_scale_direction=Direction.UP,
    )
    seen = _timed(
        ready + starting, ttft=ttft, queue_time=0.0, prefill_p95=0.3, rate=rate, running=10, starting=starting
    )
    return seen, memory


def test_replicas_still_starting_are_stopped_when_the_burst_that_asked_for_them_is_over() -> None:
    spec = _spec(replicas={"min": 1, "max": 16})
    # 1 req/s a replica in a fleet of 6 is 6, 7.2 and 8.4 req/s in all for 6, 8 and 9 replicas (pooled) at
    # the scale-down's fill (81%). 4 req/s fit 6: 6 are ready, so the 3 starting serve nothing.
    decision = decide(spec, *_after_a_burst(6, 3, rate=4.0), T0)
    assert (decision.replicas, decision.reason) == (6, Reason.SCALED_DOWN)
    assert "3 replicas still starting no longer needed" in decision.message
    # Still needed: 8 req/s fit 9 replicas, the 6 ready and the 3 starting.
    assert decide(spec, *_after_a_burst(6, 3, rate=8.0), T0).replicas == 9


def test_starting_replicas_are_kept_in_a_small_fleet_or_while_the_slo_breaks() -> None:
    spec = _spec(replicas={"min": 1, "max": 16})
    # Two ready: one replica is half the fleet, and a burst that comes back would find it short.
    assert decide(spec, *_after_a_burst(2, 2, rate=1.0), T0).replicas == 4
    # p95 TTFT above the SLO: the replicas on their way are what fixes it.
    assert decide(spec, *_after_a_burst(6, 3, rate=4.0, ttft=1.3), T0).replicas == 9
    # Someone else started them (kubectl scale): theirs, not ours to stop.
    seen, memory = _after_a_burst(6, 3, rate=4.0)
    assert decide(spec, seen, adopt(spec, memory, 9, T0), T0).replicas == 9


def test_stopping_replicas_still_starting_is_not_a_scale_down_the_learnt_rate_answers_for() -> None:
    spec = _spec(replicas={"min": 1, "max": 16})
    # The 6th replica of the burst's scale-up became ready 15 s ago; the 3 still starting are stopped.
    seen, memory = _after_a_burst(6, 3, rate=4.0)
    stopped = decide(spec, seen, memory.model_copy(update={"ready_changed_at": _ago(15)}), T0)
    assert (stopped.replicas, stopped.reason) == (6, Reason.SCALED_DOWN)
    assert (stopped.memory.last_scale_direction, stopped.memory.last_scale_time) == (Direction.UP, _ago(60))
    # 30 s on, p95 TTFT is over its target on busy seats, while the window still holds the fleet of 5: the lag
    # of the scale-up, not the 6 replicas failing at 0.67 req/s each (learnt: about 1 req/s). The rate stays.
    busy = _timed(6, ttft=1.15, queue_time=0.05, prefill_p95=0.3, rate=4.0, running=30)
    learnt = stopped.memory.capacity_rps
    assert learnt is not None and learnt > 1.0
    assert decide(spec, busy, stopped.memory, T0 + timedelta(seconds=30)).memory.capacity_rps == learnt


def test_capacity_is_lowered_when_requests_wait_at_the_rate_it_promised() -> None:
    memory = _settled(2, capacity_rps=2.0, demand_level=3.0, demand_trend=0.0, demand_at=_ago(15), rate_since=_ago(600))
    decision = _decide(_timed(2, ttft=0.9, queue_time=0.4, rate=3.0, running=16), memory)
    # Requests wait 0.4s where 0.06s is their share: lowered, by at most 20% a tick.
    assert decision.memory.capacity_rps == pytest.approx(1.6)


def test_capacity_follows_the_part_of_ttft_replicas_fix_where_the_slo_is_within_reach() -> None:
    memory = _settled(2, capacity_rps=2.0, demand_level=3.6, demand_trend=0.0, demand_at=_ago(15), rate_since=_ago(600))
    # Prefill p95 0.3s, SLO 1.2s aimed at 85%: 0.72s are left to waiting. 1.1s is too much, 0.4s is room.
    slow = _timed(2, ttft=1.1, queue_time=0.02, prefill_p95=0.3, rate=3.6, running=16, waiting=2)
    fast = _timed(2, ttft=0.4, queue_time=0.02, prefill_p95=0.3, rate=3.6, running=16)
    assert _decide(slow, memory).memory.capacity_rps < 2.0 < _decide(fast, memory).memory.capacity_rps


def test_a_tail_over_its_target_while_nothing_waits_does_not_lower_the_capacity() -> None:
    # A 2 s SLO aims p95 TTFT at 1.6 s; the prefill's p95 reads 1.42 s, so 0.18 s are left to waiting, and
    # p95 TTFT, interpolated in vLLM's 1.0-2.5 s bucket, reads 1.95 s. Yet nothing is queued, 24 of 96 seats
    # are busy and requests waited 0.08 s on average of the 0.12 s their share allows: not waiting, and no
    # replica count moves that reading. Lowered on it, the fleet grew tick after tick on a flat load.
    spec = _spec(maxConcurrency=16, scaling={"ttftP95Seconds": 2.0, "queueDepthPerReplica": 4})
    learnt = {"capacity_rps": 0.64, "demand_level": 2.6, "demand_trend": 0.0}
    memory = _settled(6, **learnt, demand_at=_ago(15), rate_since=_ago(600))
    calm = {"ttft": 1.95, "prefill_p95": 1.42, "rate": 2.6}
    idle_seats = _timed(6, queue_time=0.08, running=24, **calm)
    assert _decide(idle_seats, memory, spec).memory.capacity_rps == pytest.approx(0.64)
    # Any sign of waiting and the same tail lowers it: a request queued, every seat busy, or a mean wait
    # above its share.
    for waits in (
        _timed(6, queue_time=0.08, running=24, waiting=1, **calm),
        _timed(6, queue_time=0.08, running=96, **calm),
        _timed(6, queue_time=0.2, running=24, **calm),
    ):
        assert _decide(waits, memory, spec).memory.capacity_rps < 0.63


def test_capacity_is_not_learnt_from_a_fleet_far_below_it_or_mid_scale() -> None:
    memory = _settled(4, capacity_rps=2.0, demand_level=1.0, demand_trend=0.0, demand_at=_ago(15), rate_since=_ago(600))
    idle = _timed(4, ttft=0.3, queue_time=0.0, prefill_p95=0.3, rate=1.0, running=4)  # 0.25 req/s each
    assert _decide(idle, memory).memory.capacity_rps == 2.0
    starting = _timed(4, ttft=3.0, queue_time=1.0, rate=6.0, running=40, starting=1)
    assert _decide(starting, memory.model_copy(update={"ready_replicas": 3})).memory.capacity_rps == 2.0


def test_capacity_is_not_lowered_by_a_breach_above_the_rate_it_promised() -> None:
    # 5 req/s on 2 replicas learnt to serve 2 req/s each: a burst they were never sized for.
    memory = _settled(2, capacity_rps=2.0, demand_level=8.0, demand_trend=0.0, demand_at=_ago(15), rate_since=_ago(600))
    decision = _decide(_timed(2, ttft=3.0, queue_time=1.0, rate=5.0, running=32, waiting=20), memory)
    assert decision.memory.capacity_rps == 2.0


def test_a_lightly_loaded_fleet_raises_its_capacity_as_far_as_its_pressure_reaches() -> None:
    # 4 replicas learnt at 0.6 req/s serve 2 req/s (0.5 each) with p95 TTFT at the prefill's own p95.
    memory = _settled(4, capacity_rps=0.6, demand_level=2.0, demand_trend=0.0, demand_at=_ago(15), rate_since=_ago(600))
    idle = _timed(4, ttft=0.3, queue_time=0.0, prefill_p95=0.3, rate=2.0, running=4)
    raised = _decide(idle, memory).memory.capacity_rps
    assert raised == pytest.approx(0.66)  # 10% a tick
    # Far below it, no pressure claims more than 1.8x what replicas serve now: 0.5 / 90% x 0.05 ** -0.2.
    reach = 0.5 / 0.9 * 0.05**-0.2
    far = memory.model_copy(update={"capacity_rps": 0.95})
    assert _decide(idle, far).memory.capacity_rps == pytest.approx(reach)
    beyond = memory.model_copy(update={"capacity_rps": 1.1})
    assert _decide(idle, beyond).memory.capacity_rps == 1.1  # neither raised nor lowered


def test_the_first_capacity_is_extrapolated_from_how_far_below_its_target_the_fleet_runs() -> None:
    # 4 replicas started for a peak serve 2 req/s (0.5 each) with p95 TTFT at the prefill's own p95: the
    # bare 0.5 / 90% would be learnt as all a replica serves; the curve reaches 1.8x that (as when raising).
    memory = _settled(4, demand_level=2.0, demand_trend=0.0, demand_at=_ago(15), rate_since=_ago(600))
    idle = _timed(4, ttft=0.3, queue_time=0.0, prefill_p95=0.3, rate=2.0, running=4)
    assert _decide(idle, memory).memory.capacity_rps == pytest.approx(0.5 / 0.9 * 0.05**-0.2)
    # At the target (0.96 s of the 1.2 s SLO), what they serve is what they serve.
    at_target = _timed(4, ttft=0.96, queue_time=0.0, prefill_p95=0.3, rate=2.0, running=4)
    assert _decide(at_target, memory).memory.capacity_rps == pytest.approx(0.5 / 0.9)


def test_replicas_near_their_target_never_learn_the_rate_one_fewer_would_need() -> None:
    # 2 replicas at 1.8 req/s each, learnt at 2.5: one fewer would need 4.4 req/s. Idle, that is worth a try
    # (raised 10%); at 0.9 of the target, the curve says one replica would be far over it: not raised.
    memory = _settled(2, capacity_rps=2.5, demand_level=3.6, demand_trend=0.0, demand_at=_ago(15), rate_since=_ago(600))
    idle = _timed(2, ttft=0.3, queue_time=0.0, prefill_p95=0.3, rate=3.6, running=8)
    near = _timed(2, ttft=0.9, queue_time=0.0, prefill_p95=0.3, rate=3.6, running=8)
    assert _decide(idle, memory).memory.capacity_rps == pytest.approx(2.75)
    assert _decide(near, memory).memory.capacity_rps == 2.5


def test_a_tail_below_the_prefills_own_p95_is_read_by_the_queue_time() -> None:
    # 2 replicas at 1.8 req/s each, learnt at 2.5. A p95 TTFT of 0.24 s under a prefill p95 of 0.285 s cannot
    # be: that prefill quantile is interpolated inside vLLM's first bucket (0.3 s), and the tail read against
    # it says 0. Requests wait 0.035 s of their 0.04 s: one replica fewer is not tried.
    memory = _settled(2, capacity_rps=2.5, demand_level=3.6, demand_trend=0.0, demand_at=_ago(15), rate_since=_ago(600))
    waits = _timed(2, ttft=0.24, queue_time=0.035, prefill_p95=0.285, rate=3.6, running=8)
    assert _decide(waits, memory).memory.capacity_rps == 2.5
    # Nothing waits: as idle as it looks, and one fewer is worth a try (raised 10%).
    idle = _timed(2, ttft=0.24, queue_time=0.0, prefill_p95=0.285, rate=3.6, running=8)
    assert _decide(idle, memory).memory.capacity_rps == pytest.approx(2.75)


def test_a_scale_down_that_breaks_the_target_teaches_the_rate_it_broke_at() -> None:
    # Learnt at 7 req/s a replica, the fleet went down to 2 replicas for 8 req/s; 30 s later, both busy and
    # nothing queued, p95 TTFT is 1.15 s where the target leaves 0.96 s: 4 req/s each is already too much.
    memory = _settled(2, ready_changed_at=_ago(30), last_scale_time=_ago(45), last_scale_direction=Direction.DOWN,
                      capacity_rps=7.0, demand_level=8.0, demand_trend=0.0, demand_at=_ago(15),
                      rate_since=_ago(600))  # fmt: skip
    broke = _timed(2, ttft=1.15, queue_time=0.05, prefill_p95=0.3, rate=8.0, running=20)
    assert _decide(broke, memory).memory.capacity_rps == pytest.approx(4.0)
    # Not from a window that remembers a burst (idle seats), a queue or rising demand: those lag the arrivals.
    idle = _timed(2, ttft=1.15, queue_time=0.05, prefill_p95=0.3, rate=8.0, running=4)
    queued = _timed(2, ttft=1.15, queue_time=0.05, prefill_p95=0.3, rate=8.0, running=32, waiting=20)
    rising = memory.model_copy(update={"demand_trend": 0.01})  # 3 req/s more within the 300 s cold start
    for observed, remembered in ((idle, memory), (queued, memory), (broke, rising)):
        assert _decide(observed, remembered).memory.capacity_rps == 7.0


def test_a_breach_the_window_remembers_from_a_burst_already_served_adds_nothing() -> None:
    # p95 TTFT over the window still breaks the SLO, but nothing waits and 3 of 64 seats are busy.
    decision = _decide(_timed(4, ttft=3.0, queue_time=0.9, running=3))
    assert (decision.replicas, decision.reason) == (4, Reason.STABILIZING)
    assert "nothing waits and 3 requests run now: the window holds a burst already served" in decision.message
    # The same breach with a quarter of the seats busy is the replicas' own.
    assert _decide(_timed(4, ttft=3.0, queue_time=0.9, running=16)).reason is Reason.SLO_BREACHED


def test_a_drained_backlog_in_the_rate_window_is_not_demand() -> None:
    # A backlog cleared 30 s ago: its requests finished in the rate's 120 s window and count in 6 req/s.
    memory = _settled(
        2,
        capacity_rps=1.0,
        demand_level=6.0,
        demand_trend=0.0,
        demand_at=_ago(15),
        rate_since=_ago(600),
        backlog_seen_at=_ago(240),
        backlog_cleared_at=_ago(30),
    )
    decision = _decide(_timed(2, ttft=0.4, queue_time=0.0, rate=6.0, running=6), memory)
    assert decision.replicas == 2 and decision.reason is not Reason.DEMAND_RISING
    # A window after it cleared, the same rate is demand again.
    settled = memory.model_copy(update={"backlog_cleared_at": _ago(150)})
    assert _decide(_timed(2, ttft=0.4, queue_time=0.0, rate=6.0, running=6), settled).reason is Reason.DEMAND_RISING


def test_the_forecast_rises_at_most_a_fifth_above_the_rate_now() -> None:
    # A steep trend (0.1 req/s per s) projected over the 300 s cold start would ask for 29 req/s; the
    # smoothed level (3.75 req/s) x 1.2 is the most a forecast may claim.
    memory = _settled(2, capacity_rps=1.0, demand_level=3.0, demand_trend=0.1, demand_at=_ago(15), rate_since=_ago(600))
    decision = _decide(_timed(2, ttft=0.4, queue_time=0.0, rate=3.0, running=6), memory)
    # 4.5 req/s fit 4 replicas (1 req/s a replica in a fleet of 2, pooled, run at 90%); the forecast uncapped
    # would ask for the step limit beyond the 2 ready (6).
    assert (decision.replicas, decision.reason) == (4, Reason.DEMAND_RISING)
    assert "Holt forecast 4.5 req/s in 300s" in decision.message


def test_a_breach_while_replicas_start_never_holds_below_what_the_demand_needs() -> None:
    # Found by test_more_load_never_yields_fewer_replicas: a breach while the ready count is unsettled must
    # not hold fewer replicas than the same tick without it would start for the request rate.
    memory = _settled(2, ready_changed_at=_ago(15), capacity_rps=1.0, demand_level=3.0, demand_trend=0.0,
                      demand_at=_ago(15), rate_since=_ago(600))  # fmt: skip
    calm = _decide(_timed(2, ttft=0.4, queue_time=0.0, rate=3.0, running=6), memory)
    breach = _decide(_timed(2, ttft=3.0, queue_time=0.9, rate=3.0, running=6, waiting=2), memory)
    assert calm.replicas == breach.replicas == 3  # 3 req/s at 1 req/s a replica in a fleet of 2, pooled


def test_a_scale_down_just_after_the_ready_count_changed_does_not_wait_on_which_measure_sizes_it() -> None:
    # Found by test_more_load_never_yields_fewer_replicas: with the ready count just changed, a scale-down
    # went ahead when the request rate sized it (0.4 req/s need 1 replica) but waited for the p95 window when
    # the in-flight count did (idle: both say none, and the count is named first). More load removed more.
    memory = _settled(4, ready_changed_at=_ago(15), capacity_rps=1.0, capacity_replicas=4, demand_level=0.0,
                      demand_trend=0.0, demand_at=_ago(15), rate_since=_ago(600))  # fmt: skip
    idle = _decide(_timed(4, ttft=0.3, queue_time=0.0, rate=0.0), memory)
    light = _decide(_timed(4, ttft=0.3, queue_time=0.0, rate=0.4), memory)
    assert (idle.replicas, idle.reason) == (light.replicas, light.reason) == (3, Reason.SCALED_DOWN)
    # Without the rate, the in-flight count alone cannot tell whether the window has caught up: it waits.
    unknown = _decide(_timed(4, ttft=0.3, queue_time=0.0), memory)
    assert (unknown.replicas, unknown.reason) == (4, Reason.STABILIZING)


# --- an engine that exports no TTFT (llama.cpp) -----------------------------------


def _no_ttft(current: int, **fields: Any) -> Observation:
    return _seen(current, ttft=None, **fields).model_copy(update={"ttft_exported": False})


def test_an_engine_without_ttft_scales_up_on_its_queue() -> None:
    decision = _decide(_no_ttft(2, waiting=40, running=32))
    assert (decision.replicas, decision.reason) == (4, Reason.QUEUE_GROWING)


def test_an_engine_without_ttft_is_not_held_for_a_ttft_it_never_exports() -> None:
    # With TTFT expected, a busy service missing it holds; without, it is sized on its busy seats.
    held = _decide(_seen(4, running=6, ttft=None))
    assert held.reason is Reason.METRICS_MISSING
    memory = _settled(4, scale_down_window=(Recommendation(time=_ago(400), replicas=4),))
    decision = _decide(_no_ttft(4, running=6), memory)
    assert (decision.replicas, decision.reason) == (3, Reason.SCALED_DOWN)
    assert decision.message.startswith("6 running and 0 waiting (the engine exports no TTFT); 6 requests in flight")


def test_an_engine_without_ttft_keeps_replicas_while_its_seats_are_busy() -> None:
    decision = _decide(_no_ttft(2, waiting=2, running=30))
    assert (decision.replicas, decision.reason) == (2, Reason.STEADY)


def test_the_learnt_and_the_smoothed_rate_move_with_time_not_with_ticks() -> None:
    # The lightly loaded fleet above (learnt at 0.6 req/s a replica, raised 10% per 15 s) while the rate rises
    # from a smoothed 2.0 to 2.4 req/s: an operator ticking every 5 s learns and smooths as far in 30 s as one
    # ticking every 15 s (INFERSCALE_TICK_SECONDS), not three times as far.
    def after_30s(tick_seconds: int, rate_seen_for: int) -> Memory:
        memory = _settled(4, capacity_rps=0.6, demand_level=2.0, demand_trend=0.0, demand_at=_ago(tick_seconds),
                          rate_since=_ago(rate_seen_for))  # fmt: skip
        for k in range(30 // tick_seconds):
            now = T0 + timedelta(seconds=k * tick_seconds)
            seen = _timed(4, ttft=0.3, queue_time=0.0, prefill_p95=0.3, rate=2.4, running=4, at=now)
            memory = decide(_spec(), seen, memory, now).memory
        return memory

    assert after_30s(15, 600).capacity_rps == pytest.approx(0.6 * 1.1**2)
    assert after_30s(5, 600).capacity_rps == pytest.approx(0.6 * 1.1**2)
    # Half the level's weight goes to the newest rate every 15 s: 2.0 -> 2.2 -> 2.3 (a rate seen for less than
    # a window has no trend yet, so the level alone moves).
    assert after_30s(15, 30).demand_level == pytest.approx(2.3)
    assert after_30s(5, 30).demand_level == pytest.approx(2.3)
