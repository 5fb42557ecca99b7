"""Arrival shapes and length distributions: counts, rates, bounds and determinism."""

from __future__ import annotations

import argparse
import itertools
import math
import random
import statistics
from pathlib import Path

import pytest

from loadgen.traffic import synthetic as synthetic_trace
from loadgen.traffic.shapes import (
    Arrival,
    Burst,
    Constant,
    Diurnal,
    Fixed,
    Lognormal,
    Ramp,
    Step,
    Uniform,
    build_schedule,
    expected_requests,
    parse_length,
)

FIXED = {"prompt": Fixed(100), "output": Fixed(50)}


def count_between(schedule: list[Arrival], start: float, end: float) -> int:
    return sum(1 for a in schedule if start <= a.send_time < end)


def test_constant_rate_sends_evenly_spaced_requests_from_zero() -> None:
    schedule = build_schedule(Constant(10), 10, **FIXED)
    assert len(schedule) == 100
    assert schedule[0] == Arrival(0.0, 100, 50)
    gaps = {round(b.send_time - a.send_time, 9) for a, b in itertools.pairwise(schedule)}
    assert gaps == {0.1}
    assert schedule[-1].send_time < 10


def test_poisson_rate_matches_on_average_and_is_random_but_reproducible() -> None:
    schedule = build_schedule(Constant(50, poisson=True), 100, **FIXED, seed=3)
    assert abs(len(schedule) - 5000) < 4 * math.sqrt(5000)
    gaps = [b.send_time - a.send_time for a, b in itertools.pairwise(schedule)]
    assert statistics.mean(gaps) == pytest.approx(1 / 50, rel=0.05)
    assert statistics.stdev(gaps) == pytest.approx(1 / 50, rel=0.1)  # exponential: sd == mean
    assert build_schedule(Constant(50, poisson=True), 100, **FIXED, seed=3) == schedule
    assert build_schedule(Constant(50, poisson=True), 100, **FIXED, seed=4) != schedule
    assert all(0 <= a.send_time < 100 for a in schedule)
    assert [a.send_time for a in schedule] == sorted(a.send_time for a in schedule)


def test_step_changes_rate_at_the_step_and_back() -> None:
    schedule = build_schedule(Step(10, 50, at=5, until=8), 10, **FIXED, poisson=False)
    assert count_between(schedule, 0, 5) == 50
    assert count_between(schedule, 5, 8) == 150
    assert count_between(schedule, 8, 10) == 20
    assert expected_requests(Step(10, 50, at=5, until=8), 10) == pytest.approx(220)


def test_step_with_poisson_arrivals_keeps_each_phase_rate() -> None:
    schedule = build_schedule(Step(20, 200, at=50), 100, **FIXED, seed=1)
    assert count_between(schedule, 0, 50) == pytest.approx(1000, abs=4 * math.sqrt(1000))
    assert count_between(schedule, 50, 100) == pytest.approx(10000, abs=4 * math.sqrt(10000))


def test_ramp_rises_linearly_then_holds() -> None:
    schedule = build_schedule(Ramp(0, 100, ramp_time=10), 20, **FIXED, poisson=False)
    assert len(schedule) == pytest.approx(500 + 1000, abs=1)
    # the rate at t is 10 t during the ramp: 5 requests in [0, 1), 95 in [9, 10), 100/s after
    assert count_between(schedule, 0, 1) == pytest.approx(5, abs=1)
    assert count_between(schedule, 9, 10) == pytest.approx(95, abs=1)
    assert count_between(schedule, 15, 16) == pytest.approx(100, abs=1)


def test_burst_repeats_a_high_rate_for_a_while_every_period() -> None:
    shape = Burst(rate=10, peak_rate=100, period=10, burst_length=2, at=5)
    schedule = build_schedule(shape, 30, **FIXED, poisson=False)
    for start in (5, 15, 25):
        assert count_between(schedule, start, start + 2) == pytest.approx(200, abs=1)
    for start in (5, 15):
        assert count_between(schedule, start + 2, start + 10) == pytest.approx(80, abs=1)
    assert count_between(schedule, 0, 5) == pytest.approx(50, abs=1)


def test_diurnal_is_low_at_the_edges_and_peaks_mid_period() -> None:
    shape = Diurnal(rate=10, peak_rate=110, period=100)
    schedule = build_schedule(shape, 100, **FIXED, poisson=False)
    assert len(schedule) == pytest.approx(60 * 100, abs=2)  # mean of a raised cosine: (10 + 110) / 2
    assert count_between(schedule, 0, 2) < 25
    assert count_between(schedule, 49, 51) == pytest.approx(220, abs=3)
    assert count_between(schedule, 98, 100) < 25


def test_schedule_is_bounded_and_lengths_do_not_move_arrivals() -> None:
    full = build_schedule(Constant(100, poisson=True), 10, **FIXED, seed=9)
    capped = build_schedule(Constant(100, poisson=True), 10, **FIXED, seed=9, max_requests=10)
    assert capped == full[:10]
    other = build_schedule(Constant(100, poisson=True), 10, prompt=Uniform(1, 9), output=Fixed(3), seed=9)
    assert [a.send_time for a in other] == [a.send_time for a in full]
    with pytest.raises(ValueError, match="duration must be"):
        build_schedule(Constant(1), 0, **FIXED)
    with pytest.raises(ValueError, match="duration must be"):
        build_schedule(Constant(1), math.inf, **FIXED)
    assert build_schedule(Constant(0), 10, **FIXED) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("128", Fixed(128)),
        ("fixed:64", Fixed(64)),
        ("uniform:10,20", Uniform(10, 20)),
        ("lognormal:512,0.8", Lognormal(512, 0.8)),
        ("lognormal:512,0.8,4096", Lognormal(512, 0.8, 4096)),
    ],
)
def test_length_distributions_parse(text: str, expected: object) -> None:
    assert parse_length(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "uniform:5", "lognormal:x,1", "fixed:0", "uniform:9,3"])
def test_bad_length_distributions_say_what_is_accepted(text: str) -> None:
    with pytest.raises(ValueError, match="length"):
        parse_length(text)


def test_length_samples_follow_their_distribution() -> None:
    rng = random.Random(1)
    uniform = [Uniform(10, 20).sample(rng) for _ in range(2000)]
    assert min(uniform) == 10 and max(uniform) == 20
    logn = [Lognormal(500, 0.8, 2000).sample(rng) for _ in range(4000)]
    assert statistics.median(logn) == pytest.approx(500, rel=0.08)
    assert max(logn) == 2000 and min(logn) >= 1


def test_bad_shapes_name_the_field() -> None:
    with pytest.raises(ValueError, match="rate"):
        Constant(-1)
    with pytest.raises(ValueError, match="until"):
        Step(1, 2, at=5, until=3)
    with pytest.raises(ValueError, match="burst_length"):
        Burst(1, 2, period=5, burst_length=6)


def test_synthetic_trace_takes_another_shape_from_the_command_line(tmp_path: Path) -> None:
    out = tmp_path / "step.csv"
    assert synthetic_trace.main([str(out), "--duration", "120", "--seed", "3", "--knots", "0:1,60:1,60.01:5"]) == 0
    times = [float(line.split(",")[0]) for line in out.read_text().splitlines()[1:]]
    before, after = sum(t < 60 for t in times), sum(t >= 60 for t in times)
    assert 30 <= before <= 95 and 200 <= after <= 400  # about 60 then 300 requests

    for knots, why in (("0:1,5", "expected SECONDS:REQ_PER_S"), ("5:1", "the first knot must be at time 0")):
        with pytest.raises(argparse.ArgumentTypeError, match=why):
            synthetic_trace.parse_knots(knots)


def test_bursty_arrivals_keep_the_rate_and_cluster_more_than_poisson() -> None:
    def gaps(cv: float) -> list[float]:
        schedule = build_schedule(Constant(10.0, poisson=True), 600.0, **FIXED, seed=4, cv=cv)
        return [b.send_time - a.send_time for a, b in itertools.pairwise(schedule)]

    poisson, bursty = gaps(1.0), gaps(3.0)
    for series in (poisson, bursty):
        assert statistics.mean(series) == pytest.approx(0.1, rel=0.15)  # 10 req/s either way
    cv = statistics.pstdev(bursty) / statistics.mean(bursty)
    assert 2.3 < cv < 3.7 and statistics.pstdev(poisson) / statistics.mean(poisson) < 1.2
    for bad in (0.0, -1.0, math.inf):
        with pytest.raises(ValueError, match="cv"):
            build_schedule(Constant(10.0), 10.0, **FIXED, poisson=True, cv=bad)


def test_bursty_arrivals_on_a_ramp_come_in_order() -> None:
    # Gamma gaps of a few ulps on a ramp used to step back by one (the root's rounding), in most of these
    # seeds, and the fleet simulator refuses an unsorted schedule.
    for seed in range(6):
        schedule = build_schedule(Ramp(5.2, 12.9, ramp_time=575.0), 575.0, **FIXED, seed=seed, cv=3.0)
        times = [a.send_time for a in schedule]
        assert times == sorted(times) and len(times) > 4000


def test_synthetic_trace_takes_lengths_and_burstiness_and_refuses_bad_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bursty.csv"
    argv = [str(out), "--duration", "60", "--cv", "2.5", "--prompt", "fixed:1100", "--output", "fixed:220"]
    assert synthetic_trace.main(argv) == 0
    rows = [line.split(",") for line in out.read_text().splitlines()[1:]]
    assert rows and all((r[1], r[2]) == ("1100", "220") for r in rows)
    with pytest.raises(SystemExit):
        synthetic_trace.main([str(out), "--cv", "0"])
    assert "--cv must be > 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        synthetic_trace.main([str(out), "--prompt", "lognormal:x"])
    assert "--prompt" in capsys.readouterr().err


def test_a_random_hour_is_the_same_for_a_seed_and_another_for_another() -> None:
    description, arrivals = synthetic_trace.random_hour(4)
    assert (description, arrivals) == synthetic_trace.random_hour(4)
    assert description.startswith("random hour 4: ") and "spikes=" in description
    assert arrivals != synthetic_trace.random_hour(5)[1]
    # An hour of chat-length requests, within the rates the docstring promises (12 req/s at most, bursty).
    times = [a.send_time for a in arrivals]
    assert times == sorted(times) and times[0] >= 0 and times[-1] < 3600
    per_minute = [sum(60 * m <= t < 60 * (m + 1) for t in times) / 60 for m in range(60)]
    assert max(per_minute) < 12 * 2 and statistics.mean(per_minute) > 0.5
    assert 700 < statistics.median(a.prompt_tokens for a in arrivals) < 1800


def test_a_code_hour_sends_long_prompts_for_short_answers_and_shares_no_shape_with_a_random_hour() -> None:
    description, arrivals = synthetic_trace.completion_hour(4)
    assert (description, arrivals) == synthetic_trace.completion_hour(4)
    assert description.startswith("code hour 4: ") and "output median" in description
    assert arrivals != synthetic_trace.completion_hour(5)[1]
    assert [a.send_time for a in arrivals[:50]] != [a.send_time for a in synthetic_trace.random_hour(4)[1][:50]]
    times = [a.send_time for a in arrivals]
    assert times == sorted(times) and times[0] >= 0 and times[-1] < 3600
    per_minute = [sum(60 * m <= t < 60 * (m + 1) for t in times) / 60 for m in range(60)]
    assert max(per_minute) < 20 * 2 and statistics.mean(per_minute) > 1.0
    # Prefill is most of each request: prompts of 1.5-3k tokens (median), answers of tens of tokens.
    assert 1200 < statistics.median(a.prompt_tokens for a in arrivals) < 3600
    assert statistics.median(a.max_tokens for a in arrivals) < 80


def test_a_wandering_hour_drifts_within_its_bounds_and_is_the_same_for_a_seed() -> None:
    description, arrivals = synthetic_trace.wandering_hour(3)
    assert (description, arrivals) == synthetic_trace.wandering_hour(3)
    assert description.startswith("wandering hour 3: level ") and arrivals != synthetic_trace.wandering_hour(4)[1]
    times = [a.send_time for a in arrivals]
    assert times == sorted(times) and times[0] >= 0 and times[-1] < 3600
    # The rate drifts: ten-minute means differ, and none leaves the 0.3-12 req/s band by more than the bursts do.
    per_ten = [sum(600 * m <= t < 600 * (m + 1) for t in times) / 600 for m in range(6)]
    assert max(per_ten) > 1.3 * min(per_ten) and min(per_ten) > 0.3 / 2 and max(per_ten) < 12
    assert 700 < statistics.median(a.prompt_tokens for a in arrivals) < 1800
