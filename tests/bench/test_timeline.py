"""``bench/timeline.py``: one cell's timeline, as a user reading it for where the policy over- or
under-provisions would check it: the misses per span against the TTFTs, the replicas against the ticks, the
learnt capacity against the policy's own memory, and a cell the matrix kept found and reused."""

from __future__ import annotations

import math
import pickle
import sys
from dataclasses import replace
from pathlib import Path

import matrix_cells
import pytest
import timeline

from loadgen.engine.profiles import get_profile
from loadgen.fleet.compare import Comparison, Settings, compare, default_spec, engine_for, inferscale_policy
from loadgen.fleet.policies import POLICY_NAMES, Capacity
from loadgen.fleet.sim import FleetResult, ScaleEvent, TickRow, simulate
from loadgen.traffic.shapes import Arrival, Lognormal
from loadgen.traffic.synthetic import synthetic_arrivals

SLO = 1.0
NAN = math.nan


def _tick(t: float, replicas: int, ready: int, reason: str = "Steady") -> TickRow:
    return TickRow(t, 0.0, replicas, ready, 0.0, 0.0, None, None, reason, f"{reason} at {t:g}")


def _run(name: str, ttft: list[float], ticks: list[TickRow], events: list[ScaleEvent]) -> FleetResult:
    return FleetResult(name, ttft, [0] * len(ttft), 0, 0, 0, 0.0, 120.0, events, ticks)


# Eight requests over two minutes; the second one (index 1) no replica count can serve within the SLO.
ARRIVALS = [Arrival(t, 100, 10) for t in (5.0, 10.0, 20.0, 50.0, 61.0, 70.0, 100.0, 119.0)]
FEASIBLE = (0, 2, 3, 4, 5, 6, 7)


@pytest.fixture
def by_hand() -> Comparison:
    """inferscale starts at 2 replicas, scales to 4 at its first tick (15 s) and to 1 at 45 s (4 ready then);
    the oracle holds 3 all along, the reactive bound 1 then 5 from 60 s. Two GPUs a replica."""
    profile = get_profile("test")
    spec = default_spec(profile, SLO).model_copy(update={"gpus_per_replica": 2})
    settings = Settings(profile=profile, spec=spec, slo_ttft_s=SLO, policies=("inferscale", "oracle", "reactive"))
    times = [15.0 * k for k in range(1, 9)]
    ours = [_tick(15.0, 4, 2, "DemandRising"), _tick(30.0, 4, 2, "Stabilizing")]
    ours += [_tick(45.0, 1, 4, "Stabilizing")] + [_tick(t, 1, 1) for t in times[3:]]
    events = [ScaleEvent(15.0, 2, 4, "DemandRising", ""), ScaleEvent(45.0, 4, 1, "Stabilizing", "")]
    results = {
        # TTFTs: a miss (NaN: never served) in the first minute, two in the second (1.5 s, NaN); 2.0 s does
        # not count (not feasible), 1.0 s is within the SLO.
        "inferscale": _run("inferscale", [0.5, 2.0, NAN, 0.9, 1.5, 0.2, NAN, 1.0], ours, events),
        "oracle": _run("oracle", [0.1, 9.0, 0.1, 0.1, 0.1, 3.0, 0.1, 0.1], [_tick(t, 3, 3) for t in times], []),
        "reactive": _run("reactive", [0.1] * 8, [_tick(t, 1 if t < 60 else 5, 1) for t in times], []),
    }
    return Comparison(
        settings=settings,
        results=results,
        descriptions=dict.fromkeys(results, ""),
        capacity=Capacity({1: 1.0}, SLO, profile.name, 0, 0.0),
        peak_rate=0.0,
        opening_rate=0.0,
        initial_replicas=2,
        oracle=None,
        feasible=FEASIBLE,
    )


def test_each_minute_counts_its_misses_and_its_replica_seconds(by_hand: Comparison) -> None:
    first, second = timeline.rows(by_hand, ARRIVALS, 60.0, 0.0, 120.0, [])
    assert (first.requests, first.counted, first.missed, first.oracle_missed) == (4, 3, 1, 0)
    assert (second.requests, second.counted, second.missed, second.oracle_missed) == (4, 4, 2, 1)
    # 2 replicas for 15 s (what the first tick scaled from), 4 for 30 s, 1 for the last 15 s.
    assert first.replicas == pytest.approx((2 * 15 + 4 * 30 + 1 * 15) / 60)
    assert first.ready == pytest.approx((2 * 15 + 2 * 30 + 4 * 15) / 60)
    assert (first.oracle, first.reactive) == pytest.approx((3.0, 1.0))
    assert (second.replicas, second.reactive) == pytest.approx((1.0, 5.0))
    assert first.reason == "Stabilizing"  # two of the minute's three ticks
    assert second.reason == "Steady"
    assert first.rate == pytest.approx(4 / 60)


def test_a_span_cut_across_ticks_weights_each_count_by_its_time(by_hand: Comparison) -> None:
    [row] = timeline.rows(by_hand, ARRIVALS, 60.0, 10.0, 40.0, [])
    assert row.replicas == pytest.approx((2 * 5 + 4 * 25) / 30)
    # Sent at 10 s (not counted: no replica count serves it within the SLO) and at 20 s (never served).
    assert (row.requests, row.counted, row.missed) == (2, 1, 1)
    # The last span stops at --to.
    spans = timeline.rows(by_hand, ARRIVALS, 45.0, 0.0, 100.0, [])
    assert [(r.start, r.end) for r in spans] == [(0.0, 45.0), (45.0, 90.0), (90.0, 100.0)]


def test_the_last_line_sums_the_span(by_hand: Comparison) -> None:
    line = timeline.format_totals(timeline.totals(by_hand, ARRIVALS, 0.0, 120.0))
    # inferscale: 165 + 60 replica-seconds, the oracle 3 x 120; two GPUs a replica.
    assert line == ("span=0..120 requests=8 counted=7 missed=3 oracle_missed=1 gpu_seconds=450 oracle_gpu_seconds=720")
    line = timeline.format_totals(timeline.totals(by_hand, ARRIVALS, 60.0, 90.0))
    assert line == "span=60..90 requests=2 counted=2 missed=1 oracle_missed=1 gpu_seconds=60 oracle_gpu_seconds=180"


def test_the_table_shows_times_as_minutes_and_the_learnt_rate_at_its_fleet(by_hand: Comparison) -> None:
    capacities = [timeline.Learnt(15.0, None, None, None), timeline.Learnt(75.0, 1.234, 3, 2.0)]
    capacities += [timeline.Learnt(t, 0.5, None, 2.0) for t in (90.0, 105.0)]
    lines = timeline.format_rows(timeline.rows(by_hand, ARRIVALS, 60.0, 0.0, 120.0, capacities[:2]))
    assert lines[0].split() == [
        "time", "req/s", "replicas", "ready", "oracle", "reactive", "missed", "oracle_missed", "learnt", "reason",
    ]  # fmt: skip
    assert lines[1].split()[:1] + lines[1].split()[6:] == ["00:00", "1/3", "0/3", "-", "Stabilizing"]
    assert lines[2].split()[:1] + lines[2].split()[6:] == ["01:00", "2/4", "1/4", "1.23@3", "Steady"]
    [row] = timeline.rows(by_hand, ARRIVALS, 60.0, 60.0, 120.0, capacities)
    assert timeline.capacity(row.learnt) == "0.50"  # no fleet size remembered: the ready replicas then
    assert timeline.clock(3725.0) == "62:05"


# --- on a real comparison ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spike() -> tuple[Comparison, list[Arrival]]:
    """Six minutes at 3 req/s with a minute at 10, on an h100 at a 1 s SLO (about 2 s to run)."""
    knots = ((0.0, 3.0), (150.0, 3.0), (150.01, 10.0), (210.0, 10.0), (210.01, 3.0))
    arrivals = synthetic_arrivals(
        duration=360.0,
        knots=knots,
        seed=3,
        prompt=Lognormal(median=1000, sigma=0.8, max=4096),
        output=Lognormal(median=120, sigma=0.8, max=512),
        cv=2.0,
    )
    profile = get_profile("h100-llama3-8b-bf16")
    spec = default_spec(profile, SLO, max_replicas=8)
    settings = Settings(
        profile=engine_for(profile, spec),
        spec=spec,
        slo_ttft_s=SLO,
        policies=("inferscale", "oracle", "reactive"),
        capacity_requests=300,
        oracle_max_simulations=2,
    )
    return compare(arrivals, settings), arrivals


def test_the_misses_are_those_of_each_minute_and_add_up_to_the_attainment(
    spike: tuple[Comparison, list[Arrival]],
) -> None:
    comparison, arrivals = spike
    minutes = timeline.rows(comparison, arrivals, 60.0, 0.0, 360.0, [])
    for name in ("inferscale", "oracle"):
        ttft = comparison.results[name].ttft
        by_hand = [0] * 6
        for i in comparison.feasible:
            if math.isnan(ttft[i]) or ttft[i] > SLO:
                by_hand[int(arrivals[i].send_time // 60)] += 1
        missed = [r.missed if name == "inferscale" else r.oracle_missed for r in minutes]
        assert missed == by_hand
        # ... and, over the run, what the matrix reports as the feasible attainment.
        attained = comparison.summaries()[name]["slo_attainment_feasible"]
        assert sum(by_hand) == round(len(comparison.feasible) * (1 - attained))
    assert sum(r.counted for r in minutes) == len(comparison.feasible)
    assert sum(r.requests for r in minutes) == len(arrivals)


def test_the_learnt_capacity_is_the_policys_own_memory(spike: tuple[Comparison, list[Arrival]]) -> None:
    comparison, arrivals = spike
    capacities = timeline.learnt(comparison, arrivals)
    ticks = comparison.results["inferscale"].timeseries
    assert [c.t for c in capacities] == [row.t for row in ticks]
    # The same policy run alone ends with the memory the recording noted at the last tick.
    policy = inferscale_policy(comparison.settings)
    simulate(arrivals, policy, comparison.settings.fleet(comparison.initial_replicas))
    assert capacities[-1].capacity_rps == policy.memory.capacity_rps is not None
    assert capacities[-1].capacity_replicas == policy.memory.capacity_replicas
    # ... and it is noted along the way, as it moves, not only at the end.
    assert len({c.capacity_rps for c in capacities}) > 1


def test_the_ticks_carry_each_decision_in_full(spike: tuple[Comparison, list[Arrival]]) -> None:
    comparison, arrivals = spike
    capacities = timeline.learnt(comparison, arrivals)
    lines = timeline.format_ticks(comparison, capacities, 150.0, 240.0)
    ticks = [row for row in comparison.results["inferscale"].timeseries if 150.0 <= row.t < 240.0]
    assert len(lines) == len(ticks) == 6
    held = [c for c in capacities if 150.0 <= c.t < 240.0]
    for line, row, learnt in zip(lines, ticks, held, strict=True):
        assert line.startswith(f"{timeline.clock(row.t)} replicas={row.replicas}/{row.ready} ")
        assert line.endswith(f" {row.reason}: {row.message}") and len(row.message) > 20
        # The prefill's p95 and the mean wait the policy read at that tick, beside the p95 TTFT.
        assert learnt.prefill_p95 is not None and learnt.queue_time is not None
        assert f" prefill_p95={learnt.prefill_p95:.2f}s waited={learnt.queue_time:.2f}s " in line
    # ... noted at every tick as the wait moves, not one value carried along.
    waits = [c.queue_time for c in capacities if c.queue_time is not None]
    assert waits and max(waits) > 0 and len(set(waits)) > 1


def test_a_run_that_is_not_the_comparisons_is_refused(spike: tuple[Comparison, list[Arrival]]) -> None:
    comparison, arrivals = spike
    # Ticks the operator's policy would not give on these arrivals (the oracle's).
    other = replace(comparison, results={**comparison.results, "inferscale": comparison.results["oracle"]})
    with pytest.raises(RuntimeError, match="does not give the comparison's ticks"):
        timeline.learnt(other, arrivals)
    # Nor on others: the first minute only.
    with pytest.raises(RuntimeError, match="does not give the comparison's ticks"):
        timeline.learnt(comparison, [a for a in arrivals if a.send_time < 60])


def test_a_cell_the_matrix_kept_is_found_and_only_the_policy_runs_again(
    spike: tuple[Comparison, list[Arrival]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    comparison, arrivals = spike
    # Kept as policy_matrix.py --reuse keeps it (the matrix's traces are hours long: a short one stands in).
    cell = matrix_cells.CELLS[0]
    policies = matrix_cells.chosen_policies(POLICY_NAMES)
    key, requests = matrix_cells.reuse_key(policies), matrix_cells.requests_key(arrivals)
    kept = tmp_path / matrix_cells.kept_name("short", cell, "knee", key, requests)
    kept.write_bytes(pickle.dumps(comparison))
    monkeypatch.setattr(timeline, "traces", lambda names: {"short": arrivals} if names == ["short"] else {})
    argv = ["timeline.py", "--trace", "short", "--cell", cell.name, "--reuse", str(tmp_path), "--from", "120"]
    monkeypatch.setattr(sys, "argv", [*argv, "--to", "240"])
    assert timeline.main() == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"# short {cell.name} ceiling=") and out[0].endswith(", baselines kept)")
    # What the simulator measured pools of each size to hold, beside what the policy learnt.
    assert f"pools_rps={{{comparison.capacity.curve()}}}" in out[0]
    assert [line.split()[0] for line in out[1:-1]] == ["time", "02:00", "03:00"]
    assert out[-1] == timeline.format_totals(timeline.totals(comparison, arrivals, 120.0, 240.0))
