"""Each baseline's rule on crafted fleet views, the operator's policy behind its adapter, and the sizing helpers."""

from __future__ import annotations

import math
from typing import Any

import pytest
from inferscale.policy import Memory

from loadgen.engine.model import EngineModel
from loadgen.engine.profiles import get_profile
from loadgen.fleet.compare import default_spec, engine_for
from loadgen.fleet.policies import (
    Capacity,
    HpaBehavior,
    HpaGpuUtilization,
    InferscalePolicy,
    KedaQueueDepth,
    SchedulePolicy,
    StaticPolicy,
    raise_batch,
    unloaded_ttft,
    workload_of,
)
from loadgen.fleet.sim import FleetView
from loadgen.traffic.shapes import Arrival

A10G = get_profile("a10g-llama3-8b-awq")


def view(**overrides: Any) -> FleetView:
    ready = overrides.get("ready_replicas", 2)
    fields: dict[str, Any] = {
        "t": 15.0,
        "current_replicas": ready + overrides.get("starting_replicas", 0),
        "ready_replicas": ready,
        "starting_replicas": 0,
        "draining_replicas": 0,
        "queue_depth": 0.0,
        "running_requests": 4.0,
        "ttft_p95": 0.4,
        "kv_cache_usage": 0.1,
        "gpu_utilization": 50.0,
        "replica_gpu_utilization": (50.0,) * ready,
        "arrival_rate": 2.0,
    }
    fields.update(overrides)
    return FleetView(**fields)


# --- hpa-gpu-util ------------------------------------------------------------------------------------


def test_hpa_scales_by_the_utilisation_ratio() -> None:
    hpa = HpaGpuUtilization(80.0)
    # 100% on 2 pods for an 80% target: ceil(2 x 1.25) = 3.
    decision = hpa.decide(view(replica_gpu_utilization=(100.0, 100.0)))
    assert decision.replicas == 3 and decision.reason == "ScaleUp"


def test_hpa_holds_within_its_ten_percent_tolerance() -> None:
    assert HpaGpuUtilization(80.0).decide(view(replica_gpu_utilization=(86.0, 86.0))).replicas == 2
    assert HpaGpuUtilization(80.0).decide(view(replica_gpu_utilization=(73.0, 73.0))).replicas == 2


def test_hpa_counts_replicas_still_loading_as_idle_gpus() -> None:
    # Two busy ready pods and two loading: mean 50% of 80% -> ceil(4 x 0.625) = 3, but the scale-down window
    # still holds the 4 recommended at time 0.
    hpa = HpaGpuUtilization(80.0, initial_replicas=4)
    decision = hpa.decide(view(ready_replicas=2, starting_replicas=2, replica_gpu_utilization=(100.0, 100.0)))
    assert decision.replicas == 4


def test_hpa_scales_down_only_to_the_highest_recommendation_of_the_last_five_minutes() -> None:
    hpa = HpaGpuUtilization(80.0, initial_replicas=4)
    idle = {"ready_replicas": 4, "replica_gpu_utilization": (10.0,) * 4}
    assert hpa.decide(view(t=15.0, **idle)).replicas == 4
    assert hpa.decide(view(t=299.0, **idle)).replicas == 4
    assert hpa.decide(view(t=301.0, **idle)).replicas == 1  # ceil(4 x 0.125); the window has passed


def test_hpa_scale_up_is_limited_to_double_or_four_pods_per_period() -> None:
    hpa = HpaGpuUtilization(10.0, HpaBehavior(max_replicas=100))
    assert hpa.decide(view(replica_gpu_utilization=(100.0, 100.0))).replicas == 6  # wants 20: 2 + 4
    big = view(ready_replicas=10, replica_gpu_utilization=(100.0,) * 10)
    assert HpaGpuUtilization(10.0, HpaBehavior(max_replicas=100)).decide(big).replicas == 20  # wants 100: 2x
    assert HpaGpuUtilization(10.0, HpaBehavior(max_replicas=8)).decide(big).replicas == 8  # bounded by max


def test_hpa_holds_without_metrics() -> None:
    decision = HpaGpuUtilization(80.0).decide(view(ready_replicas=0, starting_replicas=2, replica_gpu_utilization=()))
    assert decision.replicas == 2


# --- keda-queue --------------------------------------------------------------------------------------


def test_keda_asks_for_one_replica_per_five_waiting() -> None:
    assert KedaQueueDepth(5.0).decide(view(queue_depth=23.0)).replicas == 5


def test_keda_holds_within_tolerance_and_treats_no_answer_as_zero() -> None:
    assert KedaQueueDepth(5.0).decide(view(queue_depth=10.5)).replicas == 2  # 10.5 / (5 x 2) = 1.05
    keda = KedaQueueDepth(5.0, initial_replicas=3)
    no_data = view(ready_replicas=3, queue_depth=None)
    assert keda.decide(no_data).replicas == 3  # 0 recommended, the window keeps 3
    assert keda.decide(view(t=400.0, ready_replicas=3, queue_depth=None)).replicas == 1  # min replicas


# --- static, raise-batch, schedule --------------------------------------------------------------------


def test_static_and_raise_batch_never_move() -> None:
    assert StaticPolicy("static-peak", 7).decide(view(queue_depth=500.0)).replicas == 7
    policy, engine = raise_batch(A10G, 4)
    assert (policy.name, policy.replicas, engine.max_num_seqs) == ("raise-batch", 1, 32)
    assert policy.decide(view(ttft_p95=60.0)).replicas == 1


def test_a_schedule_asks_now_for_every_replica_needed_before_the_next_one_can_be_ready() -> None:
    schedule = SchedulePolicy("oracle", [1, 1, 3, 2, 1], interval_s=60.0, lead_s=105.0)
    assert schedule.decide(view(t=0.0)).replicas == 1
    # Replicas asked for at 15 s are ready at 105 s, those of the next tick at 120 s: the third window (from
    # 120 s) is asked for at 30 s, not before.
    assert schedule.decide(view(t=15.0)).replicas == 1
    assert schedule.decide(view(t=30.0)).replicas == 3
    assert schedule.decide(view(t=185.0)).replicas == 2  # 3 is over, 2 still ahead
    assert schedule.decide(view(t=300.0)).replicas == 1  # past the plan: the floor


# --- the operator's policy -----------------------------------------------------------------------------


def test_inferscale_scales_up_on_an_slo_breach_and_remembers_through_json() -> None:
    spec = default_spec(A10G, slo_ttft_s=1.0)
    policy = InferscalePolicy(spec)
    steady = policy.decide(view(t=15.0))
    assert steady.replicas == 2
    breach = policy.decide(view(t=30.0, ttft_p95=2.5, running_requests=10.0, queue_depth=0.0))
    assert (breach.replicas, breach.reason) == (5, "SLOBreached")  # ceil(2 x 2.5 / 1.0)
    assert "2.50s > SLO 1.00s" in breach.message
    assert isinstance(policy.memory, Memory)
    assert policy.memory.slo_knee_per_replica == pytest.approx(5.0)  # broke at 10 in flight on 2 ready
    assert policy.memory.last_scale_time is not None and policy.memory.last_scale_time.tzinfo is not None
    # While they start, it waits for them instead of stacking more.
    waiting = policy.decide(view(t=45.0, ready_replicas=2, starting_replicas=3, ttft_p95=3.0, queue_depth=12.0))
    assert (waiting.replicas, waiting.reason) == (5, "WaitingForStartingReplicas")


def test_inferscale_sees_no_engine_metrics_without_a_ready_replica() -> None:
    policy = InferscalePolicy(default_spec(A10G, slo_ttft_s=1.0))
    decision = policy.decide(view(ready_replicas=0, starting_replicas=1, queue_depth=None, running_requests=None))
    assert (decision.replicas, decision.reason) == (1, "WaitingForStartingReplicas")


def test_the_default_spec_pins_the_profiles_knee_and_the_engine_follows_the_spec() -> None:
    spec = default_spec(A10G, slo_ttft_s=0.8, max_replicas=12)
    assert (spec.max_concurrency, spec.max_model_len, spec.cold_start_seconds) == (8, 8192, 90)
    assert (spec.replicas.min, spec.replicas.max, spec.scaling.ttft_p95_seconds) == (1, 12, 0.8)
    custom = spec.model_copy(update={"max_concurrency": 4, "max_model_len": 4096})
    engine = engine_for(A10G, custom)
    assert (engine.max_num_seqs, engine.max_model_len) == (4, 4096)


# --- sizing ----------------------------------------------------------------------------------------------


def test_capacity_interpolates_per_replica_and_never_extrapolates_up() -> None:
    capacity = Capacity({1: 1.0, 2: 3.0, 4: 8.0}, 1.0, "x", 0, 0.0)
    assert capacity.per_replica_at(3) == pytest.approx((1.5 + 2.0) / 2)
    assert capacity.per_replica_at(10) == pytest.approx(2.0)
    assert [capacity.replicas_for(r) for r in (0.0, 1.0, 1.01, 3.0, 5.25, 5.3, 8.0, 20.0)] == [1, 1, 2, 2, 3, 4, 4, 10]


def test_capacity_reads_as_each_pools_rate_smallest_first() -> None:
    # Measured out of order; printed by ``loadgen simulate`` and ``bench/timeline.py`` as the pools' own rates.
    assert Capacity({4: 8.0, 1: 1.0, 2: 3.25}, 1.0, "x", 0, 0.0).curve() == "1: 1.00, 2: 3.25, 4: 8.00"


def test_pools_that_hold_nothing_are_never_enough() -> None:
    # Bursts of simultaneous long prompts: one or two replicas miss the SLO at any rate, four hold 3 req/s.
    capacity = Capacity({1: 0.0, 2: 0.0, 4: 3.0, 8: 10.0}, 2.0, "x", 0, 0.0)
    assert capacity.per_replica_rps == 0.0
    assert [capacity.replicas_for(r) for r in (0.1, 3.0, 3.1, 10.0)] == [4, 4, 5, 8]


def test_a_workload_keeps_the_traces_bursts_and_drops_its_swings_of_rate() -> None:
    # Two requests at once every 2 s for a minute, then every 1 s: the same pattern at twice the rate.
    slow = [Arrival(2.0 * (i // 2), 100 + i, 10) for i in range(60)]
    fast = [Arrival(60.0 + (i // 2), 200 + i, 20) for i in range(120)]
    workload = workload_of(slow + fast, 60.0, skip=frozenset({5}))
    assert len(workload) == 179 and (100 + 5) not in [p for _, p, _ in workload]
    assert sum(g for g, _, _ in workload) / len(workload) == pytest.approx(1.0)
    first, second = [g for g, _, _ in workload[1:59]], [g for g, _, _ in workload[60:]]
    assert first.count(0.0) == 29 and second.count(0.0) == 60  # the second of each pair comes at once
    # Between pairs, the gap measured in each minute's own mean gaps is the same (the first minute lost a
    # request, so its rate is 59/60 of 1 req/s).
    assert {round(g, 9) for g in first if g} == {round(max(first), 9)}
    assert max(first) == pytest.approx(max(second[1:]) * 59 / 60)


@pytest.mark.parametrize("profile", [A10G, get_profile("h100-llama3-8b-bf16")], ids=lambda p: p.name)
def test_unloaded_ttft_is_what_an_idle_engine_takes(profile: Any) -> None:
    for prompt in (1, 900, 2048, 2049, 7000):
        model = EngineModel(profile, token_events=False)
        model.submit("r", prompt, 2, at=0.0)
        first = None
        while first is None and (t := model.next_event_time()) is not None:
            first = next((e.t for e in model.advance(t) if type(e).__name__ == "FirstToken"), None)
        assert first == pytest.approx(unloaded_ttft(profile, prompt))  # the h100's front end included
    assert math.ceil(7000 / 2048) == 4  # four chunks of chunked prefill


def test_inferscale_runs_the_operators_tick_and_its_status_round_trips() -> None:
    policy = InferscalePolicy(default_spec(A10G, slo_ttft_s=1.0))
    # Prefill breaks the SLO, nobody waits: the operator's condition says so, and nothing is added.
    decision = policy.decide(
        view(t=15.0, ttft_p95=2.5, running_requests=6.0, queue_depth=0.0, queue_time=0.0, prefill_p95=2.4)
    )
    assert decision.replicas == 2
    conditions = {c["type"]: c for c in policy.status["conditions"]}
    assert conditions["SLOUnattainable"]["status"] == "True"
    assert policy.status["lastDecision"]["reason"] == decision.reason
    assert policy.status["signals"]["prefillP95Seconds"] == 2.4


def test_the_oracle_is_judged_at_the_attainment_a_policy_reached() -> None:
    from loadgen.fleet.policies import OraclePlan, pareto_frontier

    # A dearer run that attains less, and a tie on cost, are not on the frontier.
    frontier = pareto_frontier([(100.0, 0.90), (150.0, 0.85), (200.0, 0.96), (200.0, 0.94), (300.0, 0.99)])
    assert frontier == ((100.0, 0.90), (200.0, 0.96), (300.0, 0.99))
    plan = OraclePlan(SchedulePolicy("oracle", [1], 60.0, 90.0), None, 1, True, frontier=frontier)  # type: ignore[arg-type]
    assert plan.gpu_seconds_at(0.93) == (pytest.approx(150.0), True)  # halfway between 0.90 and 0.96
    assert plan.gpu_seconds_at(0.45) == (pytest.approx(50.0), True)  # below the cheapest: in proportion
    assert plan.gpu_seconds_at(0.995) == (300.0, False)  # more than any plan reached: the dearest, flagged
