"""One cell of ``bench/policy_matrix.py`` minute by minute: where the operator's policy spends or loses, and why.

The matrix gives a cell's totals (GPU-seconds and attainment against the oracle, the reactive bound and the
baselines). This prints the cell's hour in spans of ``--every`` seconds, so that the minutes in which the
policy ran more replicas than the oracle, or lost requests the oracle served, can be read beside what the
policy had learnt then. It gets the cell as the matrix does (``matrix_cells.run_cell`` on the matrix's
traces and cells). With ``--reuse DIR``, a comparison the matrix kept in DIR is found under the same name
(``matrix_cells.kept_name``), and only the operator's policy runs again. A cell not kept yet is run in full
and kept there.

The first line names the cell and ends with ``pools_rps``: the rate that pools of each size were measured to
hold at the SLO on this hour (``Comparison.capacity``; the pool's rate, divide by its size for each replica's).

One line per span, between ``--from`` and ``--to`` (seconds; by default the whole trace, up to the end of the
span that holds the last request):

* ``req/s``: the requests sent in the span per second (requests the engine refuses included);
* ``replicas``, ``ready``: inferscale's replicas asked for, and those ready, time-weighted over the span (a
  tick's count holds until the next tick; ready is counted as each tick saw it);
* ``oracle``, ``reactive``: the replicas of the two bounds' runs, weighted the same way;
* ``missed``, ``oracle_missed``: the requests sent in the span that count (``Comparison.feasible``: the
  accepted ones an idle engine serves within the SLO) whose TTFT was above the SLO, or who never got a
  first token, as missed/counted, for inferscale's run and for the oracle's;
* ``learnt``: the capacity the policy learnt, as it stood after the last tick before the span's end:
  ``Memory.capacity_rps`` (req/s a ready replica serves within the SLO) @ ``capacity_replicas`` (in a fleet
  of that many; no @ when unset);
* ``reason``: the most frequent reason among inferscale's decisions in the span.

``--ticks`` prints one line per inferscale tick in the span instead: replicas asked for and ready, the
requests waiting and running, the p95 TTFT the policy read, the prefill's p95 (``prefill_p95``, the floor
the policy reads the tail of TTFT above) and the mean wait before prefill (``waited``) it read, the
finished-request rate it read, the learnt capacity, the reason, and the decision's message in full.

The learnt capacity is not in the run's time series. To get it, the policy is run once more as the
comparison ran it (``loadgen.fleet.compare.inferscale_policy``), and its memory is read after each
decision. If that run's ticks differ from the comparison's own, the bench stops.

The last line covers the whole span: ``span=A..B requests=N counted=C missed=M oracle_missed=K gpu_seconds=G
oracle_gpu_seconds=O``. ``requests`` is every request sent in the span, and ``counted`` those that count.
The GPU-seconds are the replicas asked for, held from tick to tick (the count ``policy_matrix`` uses for the
excess over the oracle), times the GPUs per replica.

    .venv/bin/python bench/timeline.py --trace spikes --cell a10g-3s [--reuse DIR] [--ceiling knee|profile]
                                       [--every 60] [--from 840 --to 1200] [--ticks]
"""

from __future__ import annotations

import argparse
import bisect
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matrix_cells import (
    CELLS,
    chosen_policies,
    kept_name,
    parse_cell,
    requests_key,
    reuse_key,
    run_cell,
    traces,
)

from loadgen.fleet.compare import Comparison, inferscale_policy
from loadgen.fleet.policies import POLICY_NAMES, InferscalePolicy
from loadgen.fleet.sim import FleetResult, FleetView, Scale, simulate
from loadgen.traffic.shapes import Arrival


@dataclass(frozen=True, slots=True)
class Learnt:
    """What the policy held after one tick's decision, and what it read at that tick: the request rate, the
    prefill's p95 and the mean wait."""

    t: float
    capacity_rps: float | None
    """Requests per second one ready replica serves within the SLO (``Memory.capacity_rps``)."""
    capacity_replicas: int | None
    """The fleet size that rate was learnt on (``Memory.capacity_replicas``; None: the ready replicas then)."""
    request_rate: float | None
    """Requests finished per second over the TTFT window (``FleetView.request_rate``; None: no ready replica)."""
    prefill_p95: float | None = None
    """The prefill's p95 the policy read (``FleetView.prefill_p95``): the floor it reads the TTFT tail above."""
    queue_time: float | None = None
    """The mean wait before prefill the policy read (``FleetView.queue_time``): what replicas fix."""


class Recording:
    """The operator's policy, unchanged, with its memory noted after every decision."""

    def __init__(self, policy: InferscalePolicy) -> None:
        self.policy = policy
        self.name = policy.name
        self.ticks: list[Learnt] = []

    def decide(self, view: FleetView) -> Scale:
        scale = self.policy.decide(view)
        memory = self.policy.memory
        self.ticks.append(
            Learnt(
                view.t,
                memory.capacity_rps,
                memory.capacity_replicas,
                view.request_rate,
                prefill_p95=view.prefill_p95,
                queue_time=view.queue_time,
            )
        )
        return scale


def learnt(comparison: Comparison, arrivals: Sequence[Arrival]) -> list[Learnt]:
    """The comparison's inferscale run once more, with the policy's memory after each tick (one per tick).

    Raises RuntimeError when this run's ticks are not the comparison's: its figures would be another run's.
    """
    settings = comparison.settings
    recording = Recording(inferscale_policy(settings))
    result = simulate(arrivals, recording, settings.fleet(comparison.initial_replicas))
    if result.timeseries != comparison.results["inferscale"].timeseries:
        raise RuntimeError(
            "inferscale run again does not give the comparison's ticks: was the cell run with other arrivals "
            "or another policy than this process has?"
        )
    return recording.ticks


@dataclass(frozen=True, slots=True)
class Held:
    """A run's replica count as a step in time. Each tick's count holds until the next tick. Before the
    first tick, the count is the one the run started with, and after the run's end it is zero."""

    times: tuple[float, ...]
    """Where each count starts, and last the run's end."""
    counts: tuple[int, ...]
    areas: tuple[float, ...]
    """Replica-seconds from 0 to each of ``times``."""

    @classmethod
    def of(cls, result: FleetResult, *, ready: bool = False) -> Held:
        """The replicas asked for (or with ``ready``, those ready as each tick saw them) in ``result``."""
        rows = result.timeseries
        if not rows:
            return cls((0.0, result.end_time), (0,), (0.0, 0.0))
        first = rows[0]
        if ready:
            # Nothing starts or stops before the first tick: the replicas it saw ready were there from 0.
            opening, counts = first.ready, [row.ready for row in rows]
        else:
            # What the first tick scaled from, if it scaled: the replicas the run started with.
            events = result.scale_events
            opening = events[0].from_replicas if events and events[0].t == first.t else first.replicas
            counts = [row.replicas for row in rows]
        times = [0.0, *(row.t for row in rows), max(result.end_time, rows[-1].t)]
        values = [opening, *counts]
        areas = [0.0]
        for k, value in enumerate(values):
            areas.append(areas[-1] + value * (times[k + 1] - times[k]))
        return cls(tuple(times), tuple(values), tuple(areas))

    def area(self, t: float) -> float:
        """Replica-seconds from 0 to ``t``."""
        k = bisect.bisect_right(self.times, t) - 1
        if k < 0:
            return 0.0
        if k >= len(self.counts):
            return self.areas[-1]
        return self.areas[k] + self.counts[k] * (t - self.times[k])

    def seconds(self, start: float, end: float) -> float:
        return self.area(end) - self.area(start)

    def mean(self, start: float, end: float) -> float:
        return self.seconds(start, end) / (end - start)


@dataclass(frozen=True, slots=True)
class Row:
    """One span of the timeline (see the module docstring)."""

    start: float
    end: float
    requests: int
    """Requests sent in the span, refused ones included."""
    replicas: float
    ready: float
    oracle: float | None
    reactive: float | None
    counted: int
    missed: int
    oracle_missed: int | None
    reason: str
    learnt: Learnt | None

    @property
    def rate(self) -> float:
        return self.requests / (self.end - self.start)


@dataclass(frozen=True, slots=True)
class Totals:
    """The last line: the whole span."""

    start: float
    end: float
    requests: int
    counted: int
    missed: int
    oracle_missed: int | None
    gpu_seconds: float
    oracle_gpu_seconds: float | None


class _Cell:
    """A comparison indexed by time: the requests sent, those that count, the runs' replica steps."""

    def __init__(self, comparison: Comparison, arrivals: Sequence[Arrival]) -> None:
        results = comparison.results
        self.slo = comparison.settings.slo_ttft_s
        self.gpus = comparison.settings.spec.gpus_per_replica
        self.ours, self.oracle = results["inferscale"], results.get("oracle")
        self.sent = [a.send_time for a in arrivals]
        self.feasible = sorted(comparison.feasible)
        self.feasible_sent = [self.sent[i] for i in self.feasible]
        self.asked, self.ready = Held.of(self.ours), Held.of(self.ours, ready=True)
        self.bounds = {name: Held.of(results[name]) for name in ("oracle", "reactive") if name in results}
        self.tick_times = [row.t for row in self.ours.timeseries]

    def requests(self, start: float, end: float) -> int:
        return bisect.bisect_left(self.sent, end) - bisect.bisect_left(self.sent, start)

    def counted(self, start: float, end: float) -> list[int]:
        lo, hi = bisect.bisect_left(self.feasible_sent, start), bisect.bisect_left(self.feasible_sent, end)
        return self.feasible[lo:hi]

    def missed(self, result: FleetResult, counted: Sequence[int]) -> int:
        ttft = result.ttft
        return sum(1 for i in counted if not ttft[i] <= self.slo)  # NaN: never served, a miss

    def reason(self, start: float, end: float) -> str:
        lo, hi = bisect.bisect_left(self.tick_times, start), bisect.bisect_left(self.tick_times, end)
        reasons = Counter(row.reason for row in self.ours.timeseries[lo:hi])
        return reasons.most_common(1)[0][0] if reasons else "-"


def spans(start: float, end: float, every: float) -> list[tuple[float, float]]:
    """``[start, end)`` cut into spans of ``every`` seconds, the last one shorter if it must be."""
    count = math.ceil((end - start) / every - 1e-9)
    return [(start + k * every, min(start + (k + 1) * every, end)) for k in range(count)]


def rows(
    comparison: Comparison,
    arrivals: Sequence[Arrival],
    every: float,
    start: float,
    end: float,
    capacities: Sequence[Learnt],
) -> list[Row]:
    """The timeline's spans of ``every`` seconds from ``start`` to ``end`` (``capacities`` from ``learnt``)."""
    cell = _Cell(comparison, arrivals)
    learnt_times = [c.t for c in capacities]
    out = []
    for a, b in spans(start, end, every):
        counted = cell.counted(a, b)
        last = bisect.bisect_left(learnt_times, b) - 1
        oracle, reactive = cell.bounds.get("oracle"), cell.bounds.get("reactive")
        out.append(
            Row(
                start=a,
                end=b,
                requests=cell.requests(a, b),
                replicas=cell.asked.mean(a, b),
                ready=cell.ready.mean(a, b),
                oracle=None if oracle is None else oracle.mean(a, b),
                reactive=None if reactive is None else reactive.mean(a, b),
                counted=len(counted),
                missed=cell.missed(cell.ours, counted),
                oracle_missed=None if cell.oracle is None else cell.missed(cell.oracle, counted),
                reason=cell.reason(a, b),
                learnt=capacities[last] if last >= 0 else None,
            )
        )
    return out


def totals(comparison: Comparison, arrivals: Sequence[Arrival], start: float, end: float) -> Totals:
    """The figures of the last line, over ``[start, end)``."""
    cell = _Cell(comparison, arrivals)
    counted = cell.counted(start, end)
    oracle = cell.bounds.get("oracle")
    return Totals(
        start=start,
        end=end,
        requests=cell.requests(start, end),
        counted=len(counted),
        missed=cell.missed(cell.ours, counted),
        oracle_missed=None if cell.oracle is None else cell.missed(cell.oracle, counted),
        gpu_seconds=cell.asked.seconds(start, end) * cell.gpus,
        oracle_gpu_seconds=None if oracle is None else oracle.seconds(start, end) * cell.gpus,
    )


# --- output ---------------------------------------------------------------------------------------------


def clock(t: float) -> str:
    """Seconds as mm:ss (minutes past 59 go on counting)."""
    s = round(t)
    return f"{s // 60:02d}:{s % 60:02d}"


def capacity(learnt: Learnt | None) -> str:
    """The learnt rate as ``req/s@replicas``, ``-`` before the policy learnt one."""
    if learnt is None or learnt.capacity_rps is None:
        return "-"
    at = "" if learnt.capacity_replicas is None else f"@{learnt.capacity_replicas}"
    return f"{learnt.capacity_rps:.2f}{at}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_rows(timeline: Sequence[Row]) -> list[str]:
    """A header and one fixed-width line per span."""
    header = ("time", "req/s", "replicas", "ready", "oracle", "reactive", "missed", "oracle_missed", "learnt")
    table = [header] + [
        (
            clock(row.start),
            f"{row.rate:.2f}",
            _count(row.replicas),
            _count(row.ready),
            _count(row.oracle),
            _count(row.reactive),
            f"{row.missed}/{row.counted}",
            "-" if row.oracle_missed is None else f"{row.oracle_missed}/{row.counted}",
            capacity(row.learnt),
        )
        for row in timeline
    ]
    widths = [max(len(line[k]) for line in table) for k in range(len(header))]
    reasons = ["reason", *(row.reason for row in timeline)]
    return [
        "  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True)) + "  " + reason
        for line, reason in zip(table, reasons, strict=True)
    ]


def format_ticks(comparison: Comparison, capacities: Sequence[Learnt], start: float, end: float) -> list[str]:
    """One line per inferscale tick in ``[start, end)``, the decision's message in full."""
    lines = []
    for row, held in zip(comparison.results["inferscale"].timeseries, capacities, strict=True):
        if not start <= row.t < end:
            continue
        rate = "-" if held.request_rate is None else f"{held.request_rate:.2f}/s"
        lines.append(
            f"{clock(row.t)} replicas={row.replicas}/{row.ready} queue={row.queue:g} running={row.running:g} "
            f"p95={_seconds(row.ttft_p95)} prefill_p95={_seconds(held.prefill_p95)} "
            f"waited={_seconds(held.queue_time)} finished={rate} learnt={capacity(held)} {row.reason}: {row.message}"
        )
    return lines


def format_totals(figures: Totals) -> str:
    oracle_missed = "-" if figures.oracle_missed is None else str(figures.oracle_missed)
    oracle_gpu = "-" if figures.oracle_gpu_seconds is None else f"{figures.oracle_gpu_seconds:.0f}"
    return (
        f"span={figures.start:g}..{figures.end:g} requests={figures.requests} counted={figures.counted} "
        f"missed={figures.missed} oracle_missed={oracle_missed} gpu_seconds={figures.gpu_seconds:.0f} "
        f"oracle_gpu_seconds={oracle_gpu}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", required=True, help="one of policy_matrix.py's: spikes, burst-day, random-SEED ...")
    parser.add_argument(
        "--cell", required=True, help=f"one of policy_matrix.py's: {', '.join(c.name for c in CELLS)}, or <gpu>-<SLO>s"
    )
    parser.add_argument("--ceiling", choices=("knee", "profile"), default="knee", help="as policy_matrix.py's")
    parser.add_argument(
        "--policies",
        default=",".join(POLICY_NAMES),
        help="as policy_matrix.py's: a kept cell is found only under the policies it was run with",
    )
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument(
        "--reuse",
        metavar="DIR",
        type=Path,
        help="where policy_matrix.py --reuse keeps the cells: a cell kept there runs only inferscale again",
    )
    parser.add_argument("--every", type=float, default=60.0, help="seconds a line (default 60)")
    parser.add_argument("--from", dest="start", type=float, default=0.0, help="seconds into the trace (default 0)")
    parser.add_argument("--to", dest="end", type=float, help="seconds into the trace (default: past its last request)")
    parser.add_argument("--ticks", action="store_true", help="one line per tick of the policy instead")
    args = parser.parse_args()
    if not args.every > 0:
        parser.error("--every must be > 0 seconds")
    found = traces([args.trace])
    if len(found) != 1:
        parser.error(f"--trace names one trace that is here; {args.trace!r} gives {len(found)}")
    [(trace_name, arrivals)] = found.items()
    try:
        cell = parse_cell(args.cell)
    except ValueError as error:
        parser.error(str(error))
    start = args.start
    last = arrivals[-1].send_time
    if args.end is None and start > last:
        parser.error(f"--from ({start:g}) is after the trace's last request ({last:.0f}s)")
    # By default, to the end of the span that holds the last request.
    end = start + args.every * (math.floor((last - start) / args.every) + 1) if args.end is None else args.end
    if not end > start:
        parser.error(f"--to ({end:g}) must be after --from ({start:g})")
    policies = chosen_policies(args.policies.split(","))
    kept = None
    if args.reuse:
        kept = args.reuse / kept_name(trace_name, cell, args.ceiling, reuse_key(policies), requests_key(arrivals))
    started = time.perf_counter()
    comparison, reused = run_cell(
        arrivals, cell, ceiling=args.ceiling, policies=policies, workers=args.workers, kept=kept
    )
    capacities = learnt(comparison, arrivals)
    settings = comparison.settings
    print(
        f"# {trace_name} {cell.name} ceiling={settings.spec.max_concurrency} slo={settings.slo_ttft_s:g}s "
        f"engine={settings.profile.name} pools_rps={{{comparison.capacity.curve()}}} "
        f"({time.perf_counter() - started:.0f}s{', baselines kept' if reused else ''})",
        flush=True,
    )
    if args.ticks:
        lines = format_ticks(comparison, capacities, start, end)
    else:
        lines = format_rows(rows(comparison, arrivals, args.every, start, end, capacities))
    print("\n".join(lines))
    print(format_totals(totals(comparison, arrivals, start, end)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
