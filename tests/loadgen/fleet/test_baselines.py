"""The WVA, Dynamo planner and Knative KPA baselines: each rule on crafted fleet views, each following a step of
load up and back down in the simulator, and all ten runs (policies and bounds) compared on a short trace."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

from loadgen.engine.profiles import get_profile
from loadgen.fleet.baselines import (
    ArimaPredictor,
    DynamoPlanner,
    KnativeKpa,
    WvaSaturation,
    WvaThresholds,
    ndiffs,
    profiled_engine_rps,
    wva_analyze,
)
from loadgen.fleet.compare import Settings, compare, default_spec, engine_for
from loadgen.fleet.policies import POLICY_NAMES, Capacity, feasible_attainment, plan_oracle, plan_reactive
from loadgen.fleet.sim import FleetConfig, FleetResult, FleetView, Scale, simulate
from loadgen.traffic.shapes import Arrival
from loadgen.traffic.trace import read_trace

A10G = get_profile("a10g-llama3-8b-awq")
TRACE = Path(__file__).resolve().parents[2] / "data" / "synthetic_trace.csv"
TH = WvaThresholds()


def view(**overrides: Any) -> FleetView:
    """A fleet view of ``ready_replicas`` ready replicas, each with the per-replica signals given (or idle)."""
    ready = overrides.get("ready_replicas", 2)
    fields: dict[str, Any] = {
        "t": 60.0,
        "current_replicas": ready + overrides.get("starting_replicas", 0),
        "ready_replicas": ready,
        "starting_replicas": 0,
        "draining_replicas": 0,
        "queue_depth": 0.0,
        "running_requests": 0.0,
        "ttft_p95": 0.4,
        "kv_cache_usage": 0.1,
        "gpu_utilization": 50.0,
        "replica_gpu_utilization": (50.0,) * ready,
        "arrival_rate": 1.0,
        "replica_queue_depth": (0.0,) * ready,
        "replica_running_requests": (0.0,) * ready,
        "replica_kv_cache_usage": (0.1,) * ready,
    }
    fields.update(overrides)
    return FleetView(**fields)


def stepped(*parts: tuple[float, float], prompt: int = 256, output: int = 64) -> list[Arrival]:
    """Evenly spaced arrivals: ``(seconds, requests per second)`` one after the other."""
    arrivals, start = [], 0.0
    for duration, rate in parts:
        arrivals += [Arrival(start + (k + 0.5) / rate, prompt, output) for k in range(int(duration * rate))]
        start += duration
    return arrivals


STEP = stepped((360.0, 1.0), (720.0, 6.0), (900.0, 1.0))  # low, six times higher for 12 minutes, low again


def run_step(policy: Any, arrivals: list[Arrival] = STEP) -> FleetResult:
    config = FleetConfig(profile=A10G, initial_replicas=1, tick_s=policy.tick_s, cold_start_s=30.0)
    return simulate(arrivals, policy, config)


def replicas_between(result: FleetResult, start: float, end: float) -> list[int]:
    return [row.replicas for row in result.timeseries if start <= row.t < end]


# --- the per-replica signals ---------------------------------------------------------------------------


def test_the_view_carries_each_ready_replicas_queue_running_requests_and_kv_cache() -> None:
    seen: list[FleetView] = []

    class Record:
        name = "record"

        def decide(self, v: FleetView) -> Scale:
            seen.append(v)
            return Scale(2, "Static")

    simulate(stepped((60.0, 6.0), output=256), Record(), FleetConfig(profile=A10G, initial_replicas=2, tick_s=5.0))
    for v in seen:
        assert len(v.replica_queue_depth) == len(v.replica_running_requests) == len(v.replica_kv_cache_usage) == 2
        assert sum(v.replica_queue_depth) == v.queue_depth and sum(v.replica_running_requests) == v.running_requests
        assert sum(v.replica_kv_cache_usage) / 2 == pytest.approx(v.kv_cache_usage)
    assert any(min(v.replica_running_requests) > 0 for v in seen)  # both replicas serve


# --- wva-saturation -------------------------------------------------------------------------------------


def test_wva_counts_a_replica_saturated_by_kv_cache_or_by_queue() -> None:
    a = wva_analyze([0.85, 0.5, 0.3], [0.0, 5.0, 1.0], TH)  # KV >= 0.8; queue >= 5; neither
    assert a.non_saturated == 1
    assert a.spare_kv == pytest.approx(0.8 - 0.3) and a.spare_queue == pytest.approx(5 - 1)
    assert not a.scale_up
    assert not a.scale_down_safe  # one non-saturated replica is never enough to scale down


def test_wva_scales_up_when_the_spare_capacity_of_the_others_runs_low() -> None:
    assert wva_analyze([0.75, 0.75], [0.0, 0.0], TH).scale_up  # spare KV 0.05 < 0.10
    assert wva_analyze([0.2, 0.2], [3.0, 3.0], TH).scale_up  # spare queue 2 < 3
    assert wva_analyze([0.9, 0.9], [0.0, 0.0], TH).scale_up  # all saturated: no spare at all
    assert not wva_analyze([0.65, 0.2], [2.0, 0.0], TH).scale_up  # spares 0.375 and 4


def test_wva_scales_down_only_when_the_load_of_n_replicas_fits_in_n_minus_1() -> None:
    # Three at KV 0.4: on two, 0.6 each leaves 0.2 spare (>= 0.1): safe.
    assert wva_analyze([0.4, 0.4, 0.4], [0.0] * 3, TH).scale_down_safe
    # Two at KV 0.4: on one, 0.8 leaves nothing.
    assert not wva_analyze([0.4, 0.4], [0.0, 0.0], TH).scale_down_safe
    # Three with 2 waiting each: on two, 3 each leaves a spare queue of 2 (< 3).
    assert not wva_analyze([0.1] * 3, [2.0] * 3, TH).scale_down_safe


def test_wva_decides_once_a_minute_one_replica_at_a_time_from_the_ready_count() -> None:
    wva = WvaSaturation()
    assert wva.tick_s == 15.0 and wva.loop_s == 60.0
    busy = {"ready_replicas": 3, "replica_kv_cache_usage": (0.9,) * 3}
    for t in (15.0, 30.0, 45.0):
        assert wva.decide(view(t=t, **busy)).replicas == 3  # between loops: no change
    decision = wva.decide(view(t=60.0, **busy))
    assert (decision.replicas, decision.reason) == (4, "ScaleUp")


def test_wva_makes_no_decision_while_replicas_are_starting() -> None:
    wva = WvaSaturation()
    decision = wva.decide(view(ready_replicas=2, starting_replicas=1, replica_kv_cache_usage=(0.95, 0.95)))
    assert (decision.replicas, decision.reason) == (3, "InTransition")


def test_wva_reads_each_replicas_peak_of_the_last_minute() -> None:
    wva = WvaSaturation()
    wva.decide(view(t=15.0, replica_queue_depth=(6.0, 0.0)))  # a burst on the first replica
    for t in (30.0, 45.0):
        wva.decide(view(t=t))
    # At 60 s the burst is 45 s old: the first replica counts as saturated, the other alone has spare 0.7 and 5.
    assert wva.decide(view(t=60.0)).replicas == 2  # neither trigger, and one non-saturated cannot scale down
    for t in (75.0, 90.0, 105.0):
        wva.decide(view(t=t))
    # At 120 s it is out of the window: two idle replicas, one would do.
    decision = wva.decide(view(t=120.0))
    assert (decision.replicas, decision.reason) == (1, "ScaleDown")


def test_wva_stays_within_the_replica_bounds() -> None:
    idle = {"ready_replicas": 2}
    assert WvaSaturation(min_replicas=2).decide(view(**idle)).replicas == 2
    full = {"ready_replicas": 4, "replica_kv_cache_usage": (0.9,) * 4}
    assert WvaSaturation(max_replicas=4).decide(view(**full)).replicas == 4


def test_wva_follows_a_step_of_load_up_and_back_down() -> None:
    result = run_step(WvaSaturation())
    assert set(replicas_between(result, 0, 360)) == {1}
    assert max(replicas_between(result, 360, 1080)) >= 3
    assert replicas_between(result, 1500, math.inf)[-1] == 1


# --- dynamo-planner -------------------------------------------------------------------------------------


def test_dynamo_asks_for_the_predicted_rate_over_the_profiled_rate_per_engine_every_three_minutes() -> None:
    planner = DynamoPlanner(engine_rps=1.5)
    assert planner.tick_s == 180.0
    # 4 req/s over the last 180 s: 720 requests, predicted to stay (one point); ceil(4 / 1.5) = 3.
    decision = planner.decide(view(t=180.0, arrival_rate=4.0))
    assert (decision.replicas, decision.reason) == (3, "ScaleUp")
    assert "720 requests" in decision.message


def test_dynamo_keeps_at_least_min_endpoint_and_at_most_the_budget() -> None:
    assert DynamoPlanner(engine_rps=1.5).decide(view(t=180.0, arrival_rate=0.0)).replicas == 1
    assert DynamoPlanner(engine_rps=1.5, max_replicas=4).decide(view(t=180.0, arrival_rate=30.0)).replicas == 4


def test_dynamo_holds_when_the_profiling_found_no_rate_within_the_slo() -> None:
    decision = DynamoPlanner(engine_rps=0.0).decide(view(t=180.0, arrival_rate=4.0))
    assert (decision.replicas, decision.reason) == (2, "ModelNotReady")


def test_the_profiled_rate_is_one_engine_alone_or_the_smallest_pool_that_held_the_slo() -> None:
    assert profiled_engine_rps(Capacity({1: 1.2, 2: 3.0}, 1.0, "p", 1, 0.0)) == pytest.approx(1.2)
    assert profiled_engine_rps(Capacity({1: 0.0, 2: 3.0}, 1.0, "p", 1, 0.0)) == pytest.approx(1.5)
    assert profiled_engine_rps(Capacity({1: 0.0}, 1.0, "p", 1, 0.0)) == 0.0


def test_the_arima_predictor_repeats_the_last_value_until_it_has_five_and_skips_the_idle_start() -> None:
    predictor = ArimaPredictor()
    predictor.add_data_point(0.0)  # the idle period after deployment is not load
    for value in (100.0, 300.0, 200.0, 400.0):
        predictor.add_data_point(value)
        assert predictor.predict_next() == value
    assert predictor.order is None


def test_the_arima_predictor_differences_a_trend_and_extrapolates_it() -> None:
    rng = random.Random(3)
    series = [100 + 10 * i + rng.gauss(0, 2) for i in range(40)]
    assert ndiffs(series) == 1
    assert ndiffs([100 + rng.gauss(0, 5) for _ in range(40)]) == 0
    predictor = ArimaPredictor()
    for value in series:
        predictor.add_data_point(value)
    assert predictor.predict_next() == pytest.approx(100 + 10 * 40, abs=8)
    assert predictor.order is not None and predictor.order.d == 1


def test_the_arima_predictor_keeps_the_order_it_chose_first() -> None:
    predictor = ArimaPredictor()
    for value in (180.0, 180.0, 1080.0, 1080.0, 1080.0):
        predictor.add_data_point(value)
    predictor.predict_next()
    first = predictor.order
    assert first is not None
    for value in (180.0,) * 5:
        predictor.add_data_point(value)
        assert 180.0 <= predictor.predict_next() <= 1080.0
    assert predictor.order == first  # later points only refit its parameters (pmdarima's update)


def test_dynamo_follows_a_step_of_load_up_and_back_down() -> None:
    arrivals = stepped((360.0, 1.0), (360.0, 6.0), (1440.0, 1.0))
    result = run_step(DynamoPlanner(engine_rps=2.0), arrivals)
    assert [e.t for e in result.scale_events][:1] == [540.0]  # the first decision after the step
    assert max(replicas_between(result, 540, 720)) == 3  # ceil(6 / 2)
    assert replicas_between(result, 2000, math.inf)[-1] == 1


# --- knative-kpa ----------------------------------------------------------------------------------------


def kpa_views(kpa: KnativeKpa, concurrency: float, start: float, end: float, ready: int) -> int:
    """Feed ``kpa`` a steady total concurrency over ``ready`` pods every 2 s; the last decision's replicas."""
    replicas = ready
    t = start
    while t <= end + 1e-9:
        per_pod = (concurrency / ready,) * ready
        replicas = kpa.decide(view(t=t, ready_replicas=ready, replica_running_requests=per_pod)).replicas
        t += 2.0
    return replicas


def test_kpa_stable_mode_asks_for_the_concurrency_over_the_target() -> None:
    kpa = KnativeKpa(target=10.0)
    assert kpa.tick_s == 2.0
    # 30 concurrent on 2 pods: ceil(30 / 10) = 3, and 3 / 2 < 200%: no panic.
    assert kpa_views(kpa, 30.0, 2.0, 120.0, ready=2) == 3
    assert not kpa.in_panic()


def test_kpa_panics_at_twice_the_ready_pods_and_never_scales_down_while_panicking() -> None:
    kpa = KnativeKpa(target=10.0)
    kpa_views(kpa, 15.0, 2.0, 100.0, ready=2)
    # A surge: 60 concurrent over the last 6 s; ceil(60 / 10) = 6 >= 2 x 2 ready: panic, and 6 pods.
    assert kpa_views(kpa, 60.0, 102.0, 106.0, ready=2) == 6
    assert kpa.in_panic()
    # The surge is gone: the stable window would ask for fewer, but panic holds 6 ...
    assert kpa_views(kpa, 5.0, 108.0, 160.0, ready=6) == 6
    assert kpa.in_panic()
    # ... until a stable window has passed since the panic condition last held; then it halves at most.
    assert kpa_views(kpa, 5.0, 162.0, 170.0, ready=6) == 3
    assert not kpa.in_panic()


def test_kpa_scales_down_by_at_most_the_scale_down_rate_per_decision() -> None:
    kpa = KnativeKpa(target=10.0)
    kpa.started = True  # as if it had been running, not in panic
    assert kpa.decide(view(t=2.0, ready_replicas=8)).replicas == 4  # floor(8 / 2), though 1 would do


def test_kpa_created_with_several_ready_pods_starts_in_panic_at_that_scale() -> None:
    kpa = KnativeKpa(target=10.0)
    assert kpa_views(kpa, 1.0, 2.0, 60.0, ready=4) == 4  # no history yet: keep the scale for a window
    assert kpa_views(kpa, 1.0, 62.0, 62.0, ready=4) == 2


@pytest.mark.parametrize(("delay", "expected"), [(0.0, 2), (30.0, 3)])
def test_kpa_scale_down_delay_keeps_the_highest_count_of_its_window(delay: float, expected: int) -> None:
    kpa = KnativeKpa(target=10.0, scale_down_delay_s=delay)
    kpa.started = True
    assert kpa.decide(view(t=2.0, ready_replicas=3, replica_running_requests=(10.0,) * 3)).replicas == 3
    # The load is gone: the mean of the window (15) asks for 2; with a delay, the 3 of 2 s ago still stand.
    assert kpa.decide(view(t=4.0, ready_replicas=3)).replicas == expected


def test_kpa_follows_a_step_of_load_up_and_back_down() -> None:
    result = run_step(KnativeKpa(target=0.7 * A10G.max_num_seqs))
    assert set(replicas_between(result, 0, 360)) == {1}
    assert max(replicas_between(result, 360, 1080)) >= 4
    assert replicas_between(result, 1500, math.inf)[-1] == 1


# --- the reactive bound ----------------------------------------------------------------------------------


def test_the_reactive_bound_meets_a_step_only_after_it_came_and_the_oracle_before() -> None:
    capacity = Capacity({1: 3.5, 2: 7.5, 4: 16.0}, 1.0, A10G.name, 0, 0.0)  # 1 req/s: one replica; 6: two
    config = FleetConfig(profile=A10G, initial_replicas=1, tick_s=15.0, cold_start_s=30.0)
    reactive = plan_reactive(STEP, capacity, config, scales=(1.0, 2.0), holds_s=(0.0, 300.0))
    oracle = plan_oracle(STEP, capacity, config, max_simulations=2)
    # The step to 6 req/s comes at 360 s: the oracle's replicas are ready for it, the reactive bound's are
    # asked for once a tick has seen it and are ready a cold start later.
    assert max(replicas_between(oracle.result, 330, 360)) >= 2
    assert set(replicas_between(reactive.result, 0, 375)) == {1}
    assert min(replicas_between(reactive.result, 420, 1080)) >= 2
    assert reactive.simulations == 4 and reactive.source == "reactive"
    # Knowing the past only, it pays more than the oracle for as much attainment, and at its own too.
    attained = feasible_attainment(reactive.result, range(len(STEP)), 1.0) or 0.0
    assert oracle.gpu_seconds_at(attained)[0] < reactive.result.gpu_seconds
    assert reactive.gpu_seconds_at(attained)[0] == pytest.approx(reactive.result.gpu_seconds)


# --- all ten --------------------------------------------------------------------------------------------


def test_compare_runs_all_ten_policies_and_bounds_on_the_same_requests() -> None:
    spec = default_spec(A10G, 1.0)
    arrivals = read_trace(TRACE, window=240.0).arrivals
    assert 200 < len(arrivals) < 600
    settings = Settings(
        profile=engine_for(A10G, spec), spec=spec, slo_ttft_s=1.0, capacity_requests=200, oracle_max_simulations=1
    )
    comparison = compare(arrivals, settings)
    summaries = comparison.summaries()
    assert list(summaries) == list(POLICY_NAMES) and len(POLICY_NAMES) == 10
    assert {s["requests"] for s in summaries.values()} == {len(arrivals)}
    ticks = {name: r.timeseries[0].t for name, r in comparison.results.items()}  # the first tick: one interval
    assert (ticks["wva-saturation"], ticks["dynamo-planner"], ticks["knative-kpa"]) == (15.0, 180.0, 2.0)
    assert ticks["inferscale"] == settings.tick_s
    assert "every 60s" in summaries["wva-saturation"]["description"]
    assert "every 180s" in summaries["dynamo-planner"]["description"]
    assert "target 5.6 per pod" in summaries["knative-kpa"]["description"]


def test_every_policy_has_its_own_colour_in_the_png() -> None:
    matplotlib = pytest.importorskip("matplotlib")
    colours = [matplotlib.colormaps["tab10"](POLICY_NAMES.index(name)) for name in POLICY_NAMES]
    assert len(set(colours)) == len(POLICY_NAMES)
