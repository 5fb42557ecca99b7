"""``bench/demo_step.py``: the demo's step in simulated time, judged as ``make demo`` judges it. What a user
reading it relies on: the verdict is the demo's own (``validate.judge``), on the demo's schedule and spec, and
the watcher's end (the replicas fall, or a minute passes) is where the demo's is."""

from __future__ import annotations

import math

import demo_step
import pytest
from harness import validate

from loadgen.fleet.sim import FleetResult, TickRow

STEP = validate.build_parser().parse_args(["--name", "chat", "--url", "http://unused"])


def _row(t: float, replicas: int) -> TickRow:
    return TickRow(t, 0.0, replicas, replicas, 0.0, 0.0, None, None, "Steady")


def test_the_schedule_is_the_demos_moved_by_the_offset_and_watched_a_minute_after_it() -> None:
    arrivals = demo_step.step_arrivals(STEP, seed=0, offset=2.5)
    *load, watched_until = arrivals
    assert len(load) == 1242  # what the live demo's report counts (`requests = 1242`) for seed 0
    assert min(a.send_time for a in load) >= 2.5 and max(a.send_time for a in load) <= STEP.duration + 2.5
    peak = [a for a in load if STEP.step_at + 2.5 <= a.send_time < STEP.step_until + 2.5]
    assert len(peak) / (STEP.step_until - STEP.step_at) == pytest.approx(STEP.peak_rate, rel=0.1)
    assert {(a.prompt_tokens, a.max_tokens) for a in load} == {(STEP.prompt_tokens, STEP.output_tokens)}
    assert watched_until.send_time == STEP.duration + STEP.scale_down_wait + 2.5


def test_the_watcher_stops_once_the_replicas_fall_below_their_peak_after_the_load() -> None:
    arrivals = demo_step.step_arrivals(STEP, seed=0, offset=0.0)[:3] + demo_step.step_arrivals(STEP, 0, 0.0)[-1:]
    rows = [_row(100, 4), _row(130, 4), _row(135, 3), _row(140, 4), _row(190, 1)]
    ttft, served_by = [0.2, math.nan, 0.4, 0.0], [0, -1, 0, 0]
    result = FleetResult(
        "inferscale", ttft, served_by, 1, 0, 0, 0.0, 190.0, timeseries=rows, rejected_ids=frozenset({1})
    )
    records, samples = demo_step.as_seen_by_the_demo(arrivals, result, load_ends=STEP.duration)
    assert [s.replicas for s in samples] == [4, 4, 3]  # as the demo's watcher, which stops at the fall
    assert [(r.ttft, r.error) for r in records] == [
        (pytest.approx(0.2), None),
        (None, "refused"),
        (pytest.approx(0.4), None),
    ]


def test_the_demos_step_passes_the_demos_checks_in_simulated_time(capsys: pytest.CaptureFixture[str]) -> None:
    # 4 s past a tick, the first tick after the step reads a few requests waiting and adds one replica; the
    # two then run at their limit and the queue falls slowly. Held while it fell at all, the demo failed
    # its 45 s recovery there (recovered after 47 s) and scaled up after the load had dropped.
    assert demo_step.main(["--seeds", "1", "--every", "2"]) == 0
    *runs, last = capsys.readouterr().out.splitlines()
    assert [line.split()[:3] for line in runs] == [
        ["offset=0.0s", "seed=0", "PASS"],
        ["offset=2.0s", "seed=0", "PASS"],
        ["offset=4.0s", "seed=0", "PASS"],
    ]
    assert last.startswith("runs=3 passed=3 recovered_after_max=")


@pytest.mark.parametrize("args", [["--seeds", "0"], ["--every", "0"], ["--cold-start", "-1"]])
def test_a_bad_flag_is_refused_with_what_it_must_be(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        demo_step.main(args)
    assert exit_.value.code == 2
    assert "--seeds must be at least 1, --every more than 0 s and --cold-start at least 0 s" in capsys.readouterr().err
