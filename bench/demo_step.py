"""``make demo``'s step in simulated time, judged by the demo's own checks, wherever it falls between two ticks.

``make demo`` sends one step in load to ``examples/demo-chat.yaml`` on the local cluster (``python -m
harness.validate``: 2 -> 16 req/s from 20 s to 90 s) and judges it (``harness.validate.judge``: the replicas
rise, p95 TTFT is back under the SLO within 45 s, the replicas fall, no request fails). Where the step falls
between two of the operator's ticks (every 5 s there: ``cluster/operator.sh``) is chance, and it decides what
the first tick after it reads: a few waiting requests and a step of one replica, or a queue that asks for all
four. This runs the same step through the fleet simulator with the operator's own policy, on the engines'
``test`` profile the pod runner gives them (``cluster/engines.sh``), offset by every half second of a tick, for
a few seeds, and judges each run as the demo does: from each request's TTFT and the replica counts at every
tick, watched after the load ends until they fall (at most 60 s: the demo's ``--scale-down-wait``).

One line per run: the offset of the step past a tick, the seed, ``PASS`` or the checks that failed, when p95
TTFT was back under the SLO, the replicas before, at the peak and at the end, and each scale event as
``from->to@seconds``. A last line ``runs=N passed=K recovered_after_max=S``.

    .venv/bin/python bench/demo_step.py [--seeds 3] [--cold-start 7] [--every 0.5]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml
from harness import validate
from inferscale.api import parse_spec

from loadgen.client.runner import RequestRecord
from loadgen.engine.profiles import get_profile
from loadgen.fleet.compare import Settings, engine_for, inferscale_policy
from loadgen.fleet.sim import FleetResult, simulate
from loadgen.traffic.shapes import Arrival, Fixed, Step, build_schedule

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "examples" / "demo-chat.yaml"
# What cluster/operator.sh gives the demo's operator (INFERSCALE_TICK_SECONDS, _TTFT_WINDOW_SECONDS,
# _STALE_AFTER_SECONDS).
TICK_SECONDS, TTFT_WINDOW_SECONDS, STALE_AFTER_SECONDS = 5.0, 30.0, 20.0
# A replica added is ready 6-9 s later on the local cluster (two `make demo` runs, read off the
# InferenceService status every 2 s): the engines' 5 s cold start (cluster/engines.sh), then the pod's
# scheduling, the engine process's start and the first probe.
COLD_START_SECONDS = 7.0


def demo_settings(cold_start_s: float) -> Settings:
    spec = parse_spec(yaml.safe_load(MANIFEST.read_text())["spec"])
    return Settings(
        profile=engine_for(get_profile("test"), spec),
        spec=spec,
        slo_ttft_s=spec.scaling.ttft_p95_seconds,
        tick_s=TICK_SECONDS,
        ttft_window_s=TTFT_WINDOW_SECONDS,
        stale_after_s=STALE_AFTER_SECONDS,
        cold_start_s=cold_start_s,
        policies=("inferscale",),
    )


def step_arrivals(step: argparse.Namespace, seed: int, offset: float) -> list[Arrival]:
    """The demo's schedule (``validate.run_validation``'s), every request ``offset`` seconds later, and
    last a one-token request as the watcher's wait for the replicas to fall ends: the simulator ticks
    while requests remain, and the demo watches that long after its load has ended."""
    shape = Step(rate=step.base_rate, peak_rate=step.peak_rate, at=step.step_at, until=step.step_until)
    schedule = build_schedule(
        shape, step.duration, prompt=Fixed(step.prompt_tokens), output=Fixed(step.output_tokens), seed=seed
    )
    watched_until = Arrival(step.duration + step.scale_down_wait, prompt_tokens=1, max_tokens=1)
    return [a._replace(send_time=a.send_time + offset) for a in [*schedule, watched_until]]


def as_seen_by_the_demo(
    arrivals: Sequence[Arrival], result: FleetResult, load_ends: float
) -> tuple[list[RequestRecord], list[validate.Sample]]:
    """The run as ``validate.judge`` reads a live one: the client's records (the last request is the
    watcher's end, not the client's) and the watcher's samples, which end once the replicas fall below
    their peak after ``load_ends``."""
    samples = []
    for row in result.timeseries:
        samples.append(validate.Sample(row.t, row.replicas, row.ready, row.ttft_p95, row.queue))
        if row.t > load_ends and row.replicas < max(s.replicas for s in samples if s.t <= load_ends):
            break
    records = []
    for i, (arrival, ttft) in enumerate(zip(arrivals[:-1], result.ttft[:-1], strict=True)):
        sent = arrival.send_time
        record = RequestRecord(i, sent, arrival.prompt_tokens, arrival.max_tokens, sent=sent)
        if math.isnan(ttft):
            record.error = "refused" if i in result.rejected_ids else "no first token"
        else:
            record.first_token = record.finished = sent + ttft
        records.append(record)
    return records, samples


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 of the step's arrivals (default 3)")
    parser.add_argument(
        "--cold-start", type=float, default=COLD_START_SECONDS, help="seconds to a new replica's ready (default 7)"
    )
    parser.add_argument("--every", type=float, default=0.5, help="offsets of the step past a tick (default 0.5 s)")
    args = parser.parse_args(argv)
    if args.seeds < 1 or not args.every > 0 or not args.cold_start >= 0:
        parser.error("--seeds must be at least 1, --every more than 0 s and --cold-start at least 0 s")
    step = validate.build_parser().parse_args(["--name", "chat", "--url", "http://unused"])  # the demo's defaults
    settings = demo_settings(args.cold_start)
    offsets = [k * args.every for k in range(math.ceil(TICK_SECONDS / args.every))]
    runs, passed, slowest = 0, 0, 0.0
    for seed in range(args.seeds):
        for offset in offsets:
            arrivals = step_arrivals(step, seed, offset)
            result = simulate(arrivals, inferscale_policy(settings), settings.fleet(settings.spec.replicas.min))
            records, samples = as_seen_by_the_demo(arrivals, result, load_ends=step.duration + offset)
            verdict = validate.judge(
                records,
                samples,
                slo=settings.slo_ttft_s,
                step_at=step.step_at + offset,
                step_until=step.step_until + offset,
                recover_within=step.recover_within,
            )
            figures = verdict.figures
            failed = [name for name, ok in verdict.checks.items() if not ok]
            recovered = figures["ttft_recovered_after_s"]
            runs, passed = runs + 1, passed + verdict.passed
            slowest = max(slowest, math.inf if recovered is None else recovered)
            events = " ".join(f"{e.from_replicas}->{e.to_replicas}@{e.t:g}" for e in result.scale_events)
            print(
                f"offset={offset:.1f}s seed={seed} {'PASS' if verdict.passed else 'FAIL: ' + '; '.join(failed)} "
                f"recovered_after={recovered}s replicas={figures['replicas_before_step']}->"
                f"{figures['replicas_peak']}->{figures['replicas_final']} events={events}",
                flush=True,
            )
    print(f"runs={runs} passed={passed} recovered_after_max={slowest:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
