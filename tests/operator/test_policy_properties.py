"""Properties of the scaling policy for any spec, observation and memory (hypothesis).

- Bounds: the decision is always within [spec.replicas.min, spec.replicas.max]. A
  Deployment already outside them goes straight to the bound it violates; from inside,
  one decision moves at most scaleUp.maxStepReplicas up or scaleDown.maxStepReplicas down.
- Missing, NaN or stale engine metrics never remove replicas (beyond enforcing max).
- More load (queue, running requests, p95 TTFT, KV cache, GPU utilisation, each at least
  as high) never yields fewer replicas than less load from the same state.
- Steady load settles: in a simulated fleet whose capacity follows its ready replicas,
  the replica count stops changing and changes direction at most once (at most twice when
  the engine breaks the SLO below 80% of its concurrency ceiling, which the policy learns
  by crossing it once).
- Memory survives a round trip through the JSON written to status.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from itertools import pairwise
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inferscale.api import InferenceServiceSpec, parse_spec
from inferscale.policy import (
    FILL,
    MAX_WINDOW_ENTRIES,
    Decision,
    Direction,
    Limit,
    Memory,
    Observation,
    Reason,
    Recommendation,
    decide,
)

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
TICK = timedelta(seconds=15)
NAN = float("nan")


# --- strategies -------------------------------------------------------------------


# Strategies are built once, at import: building them inside each draw costs more than
# the policy itself. Values that depend on a drawn spec are drawn as fractions and scaled.


@cache
def ints(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high)


def pick(draw: st.DrawFn, *weights: int) -> int:
    """Index of a choice, drawn in proportion to the weights."""
    roll = draw(ints(0, sum(weights) - 1))
    for index, weight in enumerate(weights):
        if roll < weight:
            return index
        roll -= weight
    raise AssertionError("unreachable")


def ago(draw: st.DrawFn, low: int, high: int) -> datetime:
    return NOW - timedelta(seconds=draw(ints(low, high)))


@st.composite
def specs(draw: st.DrawFn, *, most: int = 20, lowest: int = 10) -> InferenceServiceSpec:
    low = draw(ints(0, lowest))
    high = draw(ints(max(low, 1), most))
    return parse_spec(
        {
            "model": {"id": "m/x"},
            "maxConcurrency": draw(ints(1, 64)),
            "coldStartSeconds": [1, 30, 90, 300][draw(ints(0, 3))],
            "replicas": {"min": low, "max": high},
            "scaling": {
                "ttftP95Seconds": [0.2, 0.5, 1.0, 2.0][draw(ints(0, 3))],
                "queueDepthPerReplica": [0.5, 1.0, 4.0, 10.0][draw(ints(0, 3))],
                "gpuUtilizationPercent": draw(ints(1, 100)),
                "scaleUp": {
                    "stabilizationSeconds": [0, 0, 30, 60][draw(ints(0, 3))],
                    "maxStepReplicas": draw(ints(1, 5)),
                },
                "scaleDown": {
                    "stabilizationSeconds": [0, 60, 300, 600][draw(ints(0, 3))],
                    "maxStepReplicas": draw(ints(1, 3)),
                },
            },
        }
    )


def windows(draw: st.DrawFn, most: int, top: int = 30) -> tuple[Recommendation, ...]:
    count = draw(ints(0, most))
    return tuple(Recommendation(time=ago(draw, 0, 900), replicas=draw(ints(0, top))) for _ in range(count))


KNEES = st.floats(0.1, 100)


@st.composite
def memories(draw: st.DrawFn, ready: int | None = None, *, settled: bool = False) -> Memory:
    """Remembered state; `settled` when the ready count is known and has not changed lately."""
    if settled:
        seen, changed = ready, None
    else:
        seen = [None, draw(ints(0, 30)), ready][pick(draw, 1, 1, 0 if ready is None else 6)]
        changed = [None, ago(draw, 0, 900)][pick(draw, 3, 1)]
    return Memory(
        scale_up_window=windows(draw, 4),
        # Settled: nothing above the ready count was recommended lately, so scale-down is open.
        scale_down_window=windows(draw, 2, ready or 0) if settled else windows(draw, 4),
        last_scale_time=[None, ago(draw, 0, 900)][pick(draw, 1, 1)],
        last_scale_direction=[None, Direction.UP, Direction.DOWN][pick(draw, 1, 1, 1)],
        ready_replicas=seen,
        ready_changed_at=changed,
        slo_knee_per_replica=[None, draw(KNEES)][pick(draw, 2, 1)],
        capacity_rps=[None, draw(st.floats(0.05, 50))][pick(draw, 1, 2)],
        capacity_replicas=[None, draw(st.integers(1, 64))][pick(draw, 1, 2)],
        demand_level=[None, draw(st.floats(0, 100))][pick(draw, 1, 2)],
        demand_trend=draw(st.floats(-1, 1)),
        demand_at=[None, ago(draw, 0, 120)][pick(draw, 1, 2)],
        rate_since=[None, ago(draw, 0, 900)][pick(draw, 1, 2)],
        burst_rps=[None, draw(st.floats(0, 100))][pick(draw, 1, 2)],
        burst_at=[None, ago(draw, 0, 3600)][pick(draw, 1, 2)],
    )


@dataclass(frozen=True)
class State:
    """Everything but the load signals: the spec, the replica counts and the memory."""

    spec: InferenceServiceSpec
    counts: dict[str, int]
    memory: Memory
    settled: bool = False

    def observe(self, **signals: Any) -> Observation:
        return Observation(**self.counts, **signals)

    def decide(self, **signals: Any) -> Decision:
        return decide(self.spec, self.observe(**signals), self.memory, NOW)

    def scales(self) -> dict[str, float]:
        """Typical size of each load signal here: where the policy's thresholds lie."""
        ready = max(self.counts["ready_replicas"], 1)
        return {
            "queue_depth": ready * self.spec.scaling.queue_depth_per_replica,
            "running_requests": ready * self.spec.max_concurrency,
            "ttft_p95_seconds": self.spec.scaling.ttft_p95_seconds,
            "kv_cache_usage": 1.0,
            "gpu_utilization_percent": 100.0,
            "request_rate": ready * 2.0,
            "queue_time_seconds": 0.1 * self.spec.scaling.ttft_p95_seconds,
        }


@st.composite
def states(draw: st.DrawFn, *, settled: bool = False) -> State:
    """Any state, or (`settled`) one inside the bounds with every replica ready and nothing just changed."""
    spec = draw(specs())
    low, high = spec.replicas.min, spec.replicas.max
    # Mostly inside the bounds, where the policy has choices to make.
    current = draw(ints(low, high)) if settled or pick(draw, 6, 1) == 0 else draw(ints(0, 25))
    ready = current if settled or pick(draw, 2, 1) == 0 else draw(ints(0, current))
    starting = draw(ints(0, current - ready))
    counts = {
        "current_replicas": current,
        "ready_replicas": ready,
        "starting_replicas": starting,
        "pending_replicas": current - ready - starting,
    }
    return State(spec, counts, draw(memories(ready, settled=settled)), settled)


FRACTION = st.floats(0, 1)
BOOLEANS = st.booleans()


def reading(draw: st.DrawFn, scale: float, *, complete: bool) -> float | None:
    # Mostly present, low (room to scale down) or near the thresholds; sometimes far off,
    # zero, missing or NaN.
    missing = 0 if complete else 1
    choice = pick(draw, 10, 10, 3, 2, missing, missing)
    if choice < 3:
        return scale * draw(FRACTION) * [0.5, 1.5, 20][choice]
    return [0.0, None, NAN][choice - 3]


@st.composite
def signals(draw: st.DrawFn, state: State) -> dict[str, Any]:
    seen: dict[str, Any] = {
        name: reading(draw, scale, complete=state.settled) for name, scale in state.scales().items()
    }
    for key in ("metrics_at", "gpu_metrics_at"):
        choice = 0 if state.settled else pick(draw, 20, 1, 1)
        seen[key] = None if choice == 1 else ago(draw, 0, 60) if choice == 0 else ago(draw, 61, 300)
    return seen


@st.composite
def rising_loads(draw: st.DrawFn, state: State) -> list[dict[str, Any]]:
    """Loads that only ever rise: each repeats the one before, with some present readings higher."""
    loads = [draw(signals(state))]
    scales = state.scales()
    present = [name for name in scales if loads[0][name] is not None and not math.isnan(loads[0][name])]
    for _ in range(draw(ints(1, 8)) if present else 0):
        load = dict(loads[-1])
        raised = [name for name in present if draw(BOOLEANS)] or [present[draw(ints(0, len(present) - 1))]]
        for name in raised:
            step = draw(FRACTION) * (0.1 if pick(draw, 3, 1) == 0 else 1.0)
            load[name] += scales[name] * step
        loads.append(load)
    return loads


# Half of the cases come from settled states with fresh, complete metrics, where most
# scaling decisions (rather than holds) are taken.
any_states = states() | states(settled=True)
with_signals = any_states.flatmap(lambda state: st.tuples(st.just(state), signals(state)))
with_loads = any_states.flatmap(lambda state: st.tuples(st.just(state), rising_loads(state)))


# --- single decisions -------------------------------------------------------------


@given(case=with_signals)
@settings(max_examples=400, deadline=None)
def test_bounds_and_step_limits_always_hold(case: tuple[State, dict[str, Any]]) -> None:
    state, seen = case
    decision = state.decide(**seen)
    spec, current = state.spec, state.counts["current_replicas"]
    low, high = spec.replicas.min, spec.replicas.max

    assert low <= decision.replicas <= high
    if current < low:
        assert decision.replicas == low
    elif current > high:
        assert decision.replicas == high
    else:
        # Replicas not ready yet (starting, Pending) that no demand needs are stopped at once: the step limit
        # bounds the ready ones removed.
        ready = state.counts["ready_replicas"]
        floor = min(current - spec.scaling.scale_down.max_step_replicas, max(ready, low))
        assert floor <= decision.replicas
        if decision.replicas < current - spec.scaling.scale_down.max_step_replicas:
            assert "still starting no longer needed" in decision.message
        assert decision.replicas <= current + spec.scaling.scale_up.max_step_replicas
    _assert_consistent(decision, current)


@given(case=with_signals)
@settings(max_examples=300, deadline=None)
def test_missing_or_stale_metrics_never_remove_replicas(case: tuple[State, dict[str, Any]]) -> None:
    state, seen = case
    at = seen["metrics_at"]
    stale = at is None or NOW - at > timedelta(seconds=60)
    missing = any(seen[key] is None or math.isnan(seen[key]) for key in ("queue_depth", "running_requests"))
    decision = state.decide(**seen)
    if stale or missing:
        assert decision.replicas >= min(state.counts["current_replicas"], state.spec.replicas.max)
        assert decision.reason in {
            Reason.METRICS_MISSING,
            Reason.METRICS_STALE,
            Reason.WAITING_FOR_STARTING_REPLICAS,
            Reason.GPU_CAPACITY_REACHED,
            Reason.BELOW_MIN_REPLICAS,
            Reason.ABOVE_MAX_REPLICAS,
        }


@given(case=with_loads)
@settings(max_examples=500, deadline=None)
def test_more_load_never_yields_fewer_replicas(case: tuple[State, list[dict[str, Any]]]) -> None:
    state, loads = case
    decisions = [state.decide(**load) for load in loads]
    for less, more in pairwise(decisions):
        assert more.replicas >= less.replicas, (less.message, more.message)


@given(memory=memories())
def test_memory_round_trips_through_status_json(memory: Memory) -> None:
    stored = memory.model_dump(mode="json", by_alias=True)
    assert Memory.model_validate(stored) == memory
    assert "scaleDownWindow" in stored  # camelCase, as the rest of the status


@given(case=with_signals)
@settings(deadline=None)
def test_decided_memory_round_trips_and_stays_bounded(case: tuple[State, dict[str, Any]]) -> None:
    state, seen = case
    new = state.decide(**seen).memory
    assert Memory.model_validate(new.model_dump(mode="json", by_alias=True)) == new
    assert len(new.scale_up_window) <= MAX_WINDOW_ENTRIES
    assert len(new.scale_down_window) <= MAX_WINDOW_ENTRIES


def _assert_consistent(decision: Decision, current: int) -> None:
    assert decision.held == (decision.replicas == current and decision.reason is not Reason.STEADY)
    if decision.limited_by is Limit.GPU_CAPACITY:
        assert decision.reason is Reason.GPU_CAPACITY_REACHED
    if decision.limited_by is Limit.MAX_REPLICAS:
        assert decision.reason in {
            Reason.AT_MAX_REPLICAS, Reason.SLO_BREACHED, Reason.QUEUE_GROWING, Reason.DEMAND_RISING,
        }  # fmt: skip
    assert decision.message.endswith(".")
    assert decision.reason.value.isalpha() and decision.reason.value[0].isupper()


# --- steady load in a simulated fleet ---------------------------------------------


@dataclass(frozen=True)
class Fleet:
    """A fleet model in which capacity follows ready replicas.

    Each ready replica runs up to maxConcurrency requests; the rest of the constant
    in-flight demand waits. p95 TTFT reaches the SLO when a replica runs `knee` requests,
    grows with the queue, and is reported as the worst value over the last minute (the
    p95 window), so it lags changes in capacity. New replicas take `cold_ticks` ticks to
    become ready; only `gpu_slots` replicas fit on the GPUs, the rest stay Pending.
    """

    demand: float
    knee: float
    base: float
    cold_ticks: int
    gpu_slots: int
    report_gpu: bool


@st.composite
def fleets(draw: st.DrawFn, spec: InferenceServiceSpec) -> Fleet:
    concurrency = spec.max_concurrency
    # Demand is drawn in replicas' worth of requests, so that most fleets have scaling to do.
    replicas_worth = 0.0 if pick(draw, 1, 8) == 0 else draw(st.floats(0.1, spec.replicas.max * 1.3))
    return Fleet(
        demand=concurrency * replicas_worth,
        knee=concurrency * draw(st.floats(0.3, 2)),
        base=draw(st.floats(0.05, 0.5)),
        cold_ticks=draw(ints(0, 8)),
        gpu_slots=100 if pick(draw, 3, 1) == 0 else draw(ints(1, 15)),
        report_gpu=draw(st.booleans()),
    )


def simulate(spec: InferenceServiceSpec, fleet: Fleet, *, start: int, ticks: int) -> list[int]:
    """The starting count, then the count decided at each tick; memory goes through status JSON each tick."""
    slo, concurrency = spec.scaling.ttft_p95_seconds, spec.max_concurrency
    ages = [fleet.cold_ticks] * start  # oldest first; the first gpu_slots are scheduled
    window: deque[float | None] = deque(maxlen=4)  # one minute of 15 s ticks
    memory, now, series = Memory(), NOW, [start]
    for _ in range(ticks):
        scheduled = ages[: fleet.gpu_slots]
        ready = sum(age >= fleet.cold_ticks for age in scheduled)
        running = min(fleet.demand, concurrency * ready)
        waiting = fleet.demand - running
        per_replica = running / ready if ready else 0.0
        if ready and fleet.demand > 0:
            load = fleet.base + (1 - fleet.base) * per_replica / fleet.knee
            window.append(slo * (load + 0.5 * waiting / ready))
        else:
            window.append(None)
        seen = [value for value in window if value is not None]
        observed = Observation(
            current_replicas=len(ages),
            ready_replicas=ready,
            starting_replicas=len(scheduled) - ready,
            pending_replicas=len(ages) - len(scheduled),
            queue_depth=waiting,
            running_requests=running,
            ttft_p95_seconds=max(seen) if seen else NAN,
            kv_cache_usage=0.9 * per_replica / concurrency,
            gpu_utilization_percent=min(100.0, 30 + 100 * per_replica / concurrency) if fleet.report_gpu else None,
            metrics_at=now,
        )
        decision = decide(spec, observed, memory, now)
        memory = Memory.model_validate(decision.memory.model_dump(mode="json", by_alias=True))
        # A Deployment removes Pending pods first, then starting ones, then ready ones.
        ages = ages[: decision.replicas] + [0] * (decision.replicas - len(ages))
        ages = [age + 1 if index < fleet.gpu_slots else age for index, age in enumerate(ages)]
        series.append(decision.replicas)
        now += TICK
    return series


def direction_changes(series: list[int]) -> int:
    steps = [b - a for a, b in pairwise(series) if b != a]
    return sum(1 for a, b in pairwise(steps) if (a > 0) != (b > 0))


@given(data=st.data())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_steady_load_settles_without_oscillating(data: Any) -> None:
    spec = data.draw(specs(most=12, lowest=2))
    fleet = data.draw(fleets(spec))
    start = data.draw(
        st.sampled_from([spec.replicas.min, spec.replicas.max]) | st.integers(spec.replicas.min, spec.replicas.max)
    )
    series = simulate(spec, fleet, start=start, ticks=600)

    settled = series[-120:]  # the last half hour
    assert len(set(settled)) == 1, series
    learns_once = fleet.knee < FILL * spec.max_concurrency
    assert direction_changes(series) <= (2 if learns_once else 1), series
