"""The fleet simulator on tiny cases whose answers are known: service times, cold starts, drains, GPU-seconds."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from loadgen.engine.model import EngineModel, FirstToken
from loadgen.engine.profiles import get_profile
from loadgen.fleet.policies import StaticPolicy, unloaded_ttft
from loadgen.fleet.sim import FleetConfig, FleetView, Scale, histogram_quantile, simulate
from loadgen.traffic.shapes import Arrival

A10G = get_profile("a10g-llama3-8b-awq")


@dataclass
class Script:
    """A policy that answers a fixed count from a given time on, and records what it saw."""

    name: str = "script"
    steps: list[tuple[float, int]] = field(default_factory=list)
    seen: list[FleetView] = field(default_factory=list)

    def decide(self, view: FleetView) -> Scale:
        self.seen.append(view)
        wanted = view.current_replicas
        for at, replicas in self.steps:
            if view.t >= at:
                wanted = replicas
        return Scale(wanted, "Scripted")


def alone(profile_name: str, arrivals: list[Arrival]) -> list[float]:
    """TTFT of each request on one engine driven directly, as the engine model's own tests do."""
    model = EngineModel(get_profile(profile_name), token_events=False)
    first: dict[int, float] = {}
    for i, a in enumerate(arrivals):
        for e in model.advance(a.send_time):
            if isinstance(e, FirstToken):
                first[int(e.request_id)] = e.t  # type: ignore[call-overload]
        model.submit(i, a.prompt_tokens, a.max_tokens, at=a.send_time)
    while (t := model.next_event_time()) is not None:
        for e in model.advance(t):
            if isinstance(e, FirstToken):
                first[int(e.request_id)] = e.t  # type: ignore[call-overload]
    return [first[i] - a.send_time for i, a in enumerate(arrivals)]


def test_one_replica_gives_the_engine_models_own_ttft() -> None:
    arrivals = [Arrival(0.5 * i, 300 + 97 * (i % 7), 20 + 13 * (i % 5)) for i in range(60)]
    result = simulate(arrivals, StaticPolicy("one", 1), FleetConfig(profile=A10G, initial_replicas=1))
    assert result.ttft == pytest.approx(alone("a10g-llama3-8b-awq", arrivals), abs=1e-9)
    assert result.rejected == 0 and result.failed == 0
    # A lone request's TTFT is its prefill: overhead per 2,048-token chunk plus tokens at the prefill rate.
    lone = simulate([Arrival(0.0, 5000, 8)], StaticPolicy("one", 1), FleetConfig(profile=A10G, initial_replicas=1))
    assert lone.ttft[0] == pytest.approx(unloaded_ttft(A10G, 5000)) == pytest.approx(3 * 0.015 + 5000 / 3500)


def test_cold_start_delays_service_and_requests_wait_at_the_balancer() -> None:
    profile = A10G.with_overrides(cold_start_s=30.0)
    policy = Script(steps=[(0.0, 1)])
    result = simulate([Arrival(1.0, 100, 4)], policy, FleetConfig(profile=profile, initial_replicas=0, tick_s=15.0))
    # Nothing until the first tick at 15 s asks for a replica; it is ready at 45 s, then prefills.
    assert result.ttft[0] == pytest.approx(45.0 - 1.0 + unloaded_ttft(profile, 100))
    assert policy.seen[0].ready_replicas == 0 and policy.seen[0].queue_depth is None  # no engine metrics yet
    assert policy.seen[1].starting_replicas == 1 and policy.seen[1].current_replicas == 1
    assert [(e.t, e.from_replicas, e.to_replicas) for e in result.scale_events] == [(15.0, 0, 1)]
    # GPU-seconds run from the replica's start (cold start included) to the end of the run.
    assert result.gpu_seconds == pytest.approx(result.end_time - 15.0)


def test_scale_down_drains_the_removed_replica_and_counts_it_until_it_is_empty() -> None:
    # Two replicas, each given one long request at time 0; at 15 s the policy asks for one (ticks every 5 s).
    arrivals = [Arrival(0.0, 200, 2000), Arrival(0.0, 200, 2000), Arrival(20.0, 200, 10)]
    policy = Script(steps=[(15.0, 1)])
    result = simulate(arrivals, policy, FleetConfig(profile=A10G, initial_replicas=2, tick_s=5.0))
    assert result.failed == 0 and all(not math.isnan(x) for x in result.ttft)
    assert sorted(result.served_by[:2]) == [0, 1]
    assert result.served_by[2] == 0  # the drained replica (the younger) takes no new request
    # The drained replica is counted until its request finished (as it would have alone), the other until the
    # end of the run (its long request was slowed a little by the short one it took at 20 s).
    drained_until = simulate(arrivals[:1], StaticPolicy("s", 1), FleetConfig(profile=A10G)).end_time
    assert drained_until > 25.0  # 2,000 decode steps of 12.5 ms
    assert result.gpu_seconds == pytest.approx(result.end_time + drained_until, rel=1e-9)
    after = next(v for v in policy.seen if v.t == 20.0)
    assert (after.current_replicas, after.ready_replicas, after.draining_replicas) == (1, 1, 1)
    # The draining replica still serves and is still scraped; the request that arrived at 20 s is queued.
    assert (after.running_requests, after.queue_depth) == (2.0, 1.0)


def test_a_drain_that_outlasts_its_grace_period_fails_what_never_started() -> None:
    profile = A10G.with_overrides(max_num_seqs=1)
    # Four requests queue on the younger replica (least outstanding spreads them 4 and 4).
    arrivals = [Arrival(0.0, 100, 3000) for _ in range(8)]
    policy = Script(steps=[(15.0, 1)])
    config = FleetConfig(profile=profile, initial_replicas=2, drain_timeout_s=5.0)
    result = simulate(arrivals, policy, config)
    killed = [i for i, r in enumerate(result.served_by) if r == 1]
    assert len(killed) == 4
    # Killed at 20 s: the request running had its first token, the three waiting never did.
    assert (result.killed, result.failed) == (4, 3)
    assert sum(1 for i in killed if math.isnan(result.ttft[i])) == 3
    summary = result.summary(slo_ttft_s=1000.0)
    assert summary["slo_attainment"] == pytest.approx(5 / 8)  # failed requests count as misses
    assert result.gpu_seconds == pytest.approx(result.end_time + 20.0, rel=1e-6)


def test_gpu_seconds_include_cold_starts_and_replicas_cancelled_while_starting() -> None:
    arrivals = [Arrival(float(t), 100, 10) for t in range(0, 120, 2)]
    # Up to 3 at 15 s (two start), back to 1 at 60 s: the two still starting (90 s cold start) are cancelled.
    policy = Script(steps=[(15.0, 3), (60.0, 1)])
    result = simulate(arrivals, policy, FleetConfig(profile=A10G, initial_replicas=1))
    assert result.gpu_seconds == pytest.approx(result.end_time + 2 * (60.0 - 15.0))
    assert {r for r in result.served_by} == {0}
    assert FleetConfig(profile=A10G, gpus_per_replica=4).gpus_per_replica == 4
    four = simulate(arrivals, StaticPolicy("s", 1), FleetConfig(profile=A10G, gpus_per_replica=4))
    assert four.gpu_seconds == pytest.approx(4 * four.end_time)


def test_requests_too_long_for_the_engine_are_refused_and_left_out_of_attainment() -> None:
    arrivals = [Arrival(0.0, 100, 10), Arrival(1.0, 9000, 10), Arrival(2.0, 8000, 500), Arrival(3.0, 100, 10)]
    result = simulate(arrivals, StaticPolicy("s", 1), FleetConfig(profile=A10G))
    assert result.rejected == 2 and result.rejected_ids == frozenset({1, 2})
    assert math.isnan(result.ttft[1]) and result.served_by[1] == -1
    summary = result.summary(slo_ttft_s=1.0)
    assert summary["requests"] == 4 and summary["rejected"] == 2
    assert summary["slo_attainment"] == 1.0 and summary["slo_attainment_all"] == 0.5


def test_the_balancer_sends_each_request_to_the_least_loaded_replica() -> None:
    arrivals = [Arrival(0.0, 100, 500) for _ in range(6)] + [Arrival(0.01, 100, 5)]
    result = simulate(arrivals, StaticPolicy("s", 3), FleetConfig(profile=A10G, initial_replicas=3))
    assert sorted(result.served_by[:6]) == [0, 0, 1, 1, 2, 2]


def test_the_view_carries_the_operators_signals() -> None:
    # 12 requests at once on one replica with a ceiling of 8: 8 run, 4 wait; the GPU is busy all tick.
    arrivals = [Arrival(0.0, 100, 3000) for _ in range(12)]
    policy = Script()
    simulate(arrivals, policy, FleetConfig(profile=A10G, initial_replicas=1, tick_s=15.0))
    first = policy.seen[0]
    assert (first.ready_replicas, first.queue_depth, first.running_requests) == (1, 4.0, 8.0)
    assert first.gpu_utilization == pytest.approx(100.0, abs=0.5)
    assert first.replica_gpu_utilization == (pytest.approx(100.0, abs=0.5),)
    assert first.ttft_p95 is not None and 0 < first.ttft_p95 <= 0.25  # 8 first tokens, bucketed
    assert first.kv_cache_usage is not None and 0 < first.kv_cache_usage < 1
    assert first.arrival_rate == pytest.approx(12 / 15)


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ([0] * 23, None),
        ([0] * 11 + [10] + [0] * 11, 0.75 + 0.25 * 0.95),  # all in (0.75, 1.0]: interpolated inside it
        ([10] + [0] * 22, 0.001 * 0.95),  # the first bucket starts at 0
        ([0] * 22 + [5], 2560.0),  # in +Inf: the highest finite bound
        ([0] * 11 + [90, 10] + [0] * 10, 1.0 + 1.5 * 0.5),  # rank 95 of 100: half-way into (1.0, 2.5]
    ],
)
def test_histogram_quantile_answers_as_prometheus_does(counts: list[int], expected: float | None) -> None:
    value = histogram_quantile(0.95, counts)
    assert value == (pytest.approx(expected) if expected is not None else None)


def test_bad_arguments_are_refused_with_the_field_named() -> None:
    with pytest.raises(ValueError, match="sorted"):
        simulate([Arrival(2.0, 10, 1), Arrival(1.0, 10, 1)], StaticPolicy("s", 1), FleetConfig(profile=A10G))
    with pytest.raises(ValueError, match="tick_s"):
        FleetConfig(profile=A10G, tick_s=0)
