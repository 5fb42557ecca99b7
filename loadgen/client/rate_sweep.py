"""``loadgen sweep``: open-loop Poisson steps at rising request rates until the target saturates.

Modelled on guidellm's ``sweep`` (a series of constant-rate benchmarks, each bounded by ``--max-seconds``)
and inference-perf's ``load.sweep`` (rates rising until the server saturates, judged by the rate it
achieves against the rate asked for), but stepping up geometrically from a low rate and stopping at the
first saturated step instead of probing the maximum first. Each step is ``run_open_loop`` on a Poisson
schedule (no coordinated omission): a warm-up, then ``duration`` measured seconds, then a bounded drain.

A step is **saturated** (``saturation``, pure) when, over its measured window:

* the achieved rate (successful completions per second) is below ``min_achieved`` (90%) of the rate
  that arrived (the Poisson draw of the offered rate): the server finishes fewer requests than arrive
  (and by more than two standard deviations of Poisson counting noise, so a short step's few requests
  do not read as saturation);
* or the queue grows: the p50 TTFT of requests sent in the window's last third is more than
  ``ttft_growth`` (2x) that of the first third and at least ``ttft_floor`` (50 ms) higher;
* or more than 1% of requests fail;
* or, with SLOs, fewer than ``min_attainment`` (90%, DistServe's goodput definition) meet them all.

A step whose schedule lag p99 exceeds 10 ms measured the client, not the server: the sweep stops and says
so. The knee is the highest rate before the first saturated step, in req/s, with the concurrency seen
there (requests in flight, time-averaged over the window, and its peak). Bounded by ``max_steps`` and a
time ``budget``; one bisection between the knee and the saturated rate refines it when time allows.
"""

from __future__ import annotations

import asyncio
import csv
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from loadgen.client.plots import pyplot, save
from loadgen.client.runner import LiveProgress, RequestRecord, StreamingClient, run_open_loop
from loadgen.client.slo import Slos, meets
from loadgen.client.stats import format_ms, percentile
from loadgen.traffic.prompts import PromptMix, apply_mix
from loadgen.traffic.shapes import Constant, LengthDist, build_schedule

__all__ = [
    "Criteria",
    "StepResult",
    "SweepVerdict",
    "find_knee_rate",
    "rates",
    "saturation",
    "step_result",
    "sweep",
    "write_steps_csv",
    "write_steps_png",
]

MAX_LAG_P99_S = 0.010
MAX_ERROR_RATE = 0.01


@dataclass(frozen=True, slots=True)
class Criteria:
    min_achieved: float = 0.9
    ttft_growth: float = 2.0
    ttft_floor: float = 0.05
    min_attainment: float = 0.9


@dataclass(frozen=True, slots=True)
class StepResult:
    """The figures of one rate step's measured window."""

    offered_rps: float
    arrived_rps: float
    """Requests the Poisson schedule actually put in the window, per second (the offered rate, drawn)."""
    requests: int
    errors: int
    achieved_rps: float
    output_tokens_per_s: float
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    e2e_p95_s: float | None
    ttft_p50_first_third_s: float | None
    ttft_p50_last_third_s: float | None
    lag_p99_s: float | None
    concurrency_mean: float
    concurrency_max: int
    slo_attainment: float | None = None
    goodput_rps: float | None = None

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in asdict(self).items()}


def step_result(
    offered: float, records: Sequence[RequestRecord], window: tuple[float, float], slos: Slos
) -> StepResult:
    """Figures of one step: requests scheduled in ``window`` = (start, end) seconds, completions in it."""
    start, end = window
    span = end - start
    measured = [r for r in records if not r.warmup and r.scheduled < end]
    ok = [r for r in measured if r.ok]
    done = [r for r in records if r.ok and r.finished is not None and start <= r.finished < end]
    ttfts = sorted(t for r in ok if (t := r.ttft) is not None)
    third = span / 3
    first = sorted(t for r in ok if r.scheduled < start + third and (t := r.ttft) is not None)
    last = sorted(t for r in ok if r.scheduled >= end - third and (t := r.ttft) is not None)
    # Requests in flight: time-averaged over the window (Little's law: rate x latency), and the peak.
    busy = 0.0
    events: list[tuple[float, int]] = []
    for r in records:
        if r.sent is None:
            continue
        stop = r.finished if r.finished is not None else end
        overlap = min(stop, end) - max(r.sent, start)
        if overlap > 0:
            busy += overlap
            events += [(max(r.sent, start), 1), (min(stop, end), -1)]
    peak = level = 0
    for _, delta in sorted(events):
        level += delta
        peak = max(peak, level)
    good = [r for r in measured if all(meets(r, slos).values())] if slos else None
    return StepResult(
        offered_rps=offered,
        arrived_rps=len(measured) / span if span > 0 else 0.0,
        requests=len(measured),
        errors=sum(1 for r in measured if r.error is not None),
        achieved_rps=len(done) / span if span > 0 else 0.0,
        output_tokens_per_s=sum(r.output_tokens for r in done) / span if span > 0 else 0.0,
        ttft_p50_s=percentile(ttfts, 50),
        ttft_p95_s=percentile(ttfts, 95),
        e2e_p95_s=percentile(sorted(t for r in ok if (t := r.e2e) is not None), 95),
        ttft_p50_first_third_s=percentile(first, 50),
        ttft_p50_last_third_s=percentile(last, 50),
        lag_p99_s=percentile(sorted(lag for r in measured if (lag := r.lag) is not None), 99),
        concurrency_mean=busy / span if span > 0 else 0.0,
        concurrency_max=peak,
        slo_attainment=len(good) / len(measured) if good is not None and measured else None,
        goodput_rps=len(good) / span if good is not None and span > 0 else None,
    )


def saturation(step: StepResult, criteria: Criteria = Criteria()) -> str | None:
    """Why ``step`` is saturated (a sentence with the numbers), or None when the target kept up."""
    c = criteria
    if step.requests == 0:
        return "no request was measured"
    if step.error_rate > MAX_ERROR_RATE:
        return f"{step.error_rate:.1%} of requests failed (more than {MAX_ERROR_RATE:.0%})"
    deficit = step.arrived_rps - step.achieved_rps  # per second; x span = requests
    span = step.requests / step.arrived_rps if step.arrived_rps else 0.0
    if deficit > (1 - c.min_achieved) * step.arrived_rps and deficit * span > 2 * math.sqrt(step.requests):
        return (
            f"achieved {step.achieved_rps:.2f} req/s of {step.arrived_rps:.2f} arrived "
            f"({step.achieved_rps / step.arrived_rps:.0%}, below {c.min_achieved:.0%}): requests queue"
        )
    a, b = step.ttft_p50_first_third_s, step.ttft_p50_last_third_s
    if a is not None and b is not None and b > c.ttft_growth * a and b > a + c.ttft_floor:
        return (
            f"the queue grew through the step: p50 TTFT rose from {a * 1e3:.0f} ms (first third) to "
            f"{b * 1e3:.0f} ms (last third)"
        )
    if step.slo_attainment is not None and step.slo_attainment < c.min_attainment:
        return f"SLO attainment {step.slo_attainment:.1%} is below {c.min_attainment:.0%}"
    return None


@dataclass(frozen=True, slots=True)
class SweepVerdict:
    knee_rps: float | None
    knee_concurrency: float | None
    knee_concurrency_max: int | None
    reason: str
    found: bool
    """False when no step saturated (the knee is at or above the highest rate tried) or none kept up."""


def find_knee_rate(steps: Sequence[StepResult], criteria: Criteria = Criteria()) -> SweepVerdict:
    """The highest rate that kept up below the lowest saturated one (steps in any order)."""
    ordered = sorted(steps, key=lambda s: s.offered_rps)
    saturated = [(s, why) for s in ordered if (why := saturation(s, criteria)) is not None]
    limit = saturated[0][0].offered_rps if saturated else math.inf
    kept = [s for s in ordered if s.offered_rps < limit]
    if not kept:
        why = saturated[0][1] if saturated else "no step ran"
        return SweepVerdict(None, None, None, f"the lowest rate already saturated: {why}; start lower", False)
    knee = kept[-1]
    if not saturated:
        return SweepVerdict(
            knee.offered_rps, knee.concurrency_mean, knee.concurrency_max,
            f"no step saturated up to {knee.offered_rps:g} req/s: the knee is at or above it; raise --max-rate",
            False,
        )  # fmt: skip
    step, why = saturated[0]
    return SweepVerdict(
        knee.offered_rps, knee.concurrency_mean, knee.concurrency_max, f"{step.offered_rps:g} req/s: {why}", True
    )


def rates(start: float, factor: float, max_rate: float, max_steps: int) -> list[float]:
    """``start``, ``start * factor``, ... up to ``max_rate`` and at most ``max_steps`` of them."""
    if start <= 0 or factor <= 1:
        raise ValueError(f"--start-rate must be > 0 and --factor > 1, got {start:g} and {factor:g}")
    out: list[float] = []
    rate = start
    while rate <= max_rate * (1 + 1e-9) and len(out) < max_steps:
        out.append(round(rate, 3))
        rate *= factor
    return out


async def sweep(
    client: StreamingClient,
    planned: Sequence[float],
    *,
    duration: float,
    warmup: float,
    prompt: LengthDist,
    output: LengthDist,
    slos: Slos,
    criteria: Criteria = Criteria(),
    budget: float = 600.0,
    refine: bool = True,
    seed: int = 0,
    prompts: PromptMix | None = None,
    progress: bool = True,
    stop: asyncio.Event | None = None,
) -> tuple[list[StepResult], list[str]]:
    """Run the planned rates in turn until one saturates (then bisect once), within ``budget`` seconds.

    Returns the steps and notes (why the sweep stopped where it did).
    """
    started = time.monotonic()
    steps: list[StepResult] = []
    notes: list[str] = []
    drain = max(duration, 5.0)

    async def run(rate: float) -> StepResult | None:
        schedule = build_schedule(
            Constant(rate, poisson=True), warmup + duration, prompt=prompt, output=output, seed=seed
        )
        if prompts is not None:
            schedule = apply_mix(schedule, prompts, seed=seed)
        label = f"{rate:>8.2f} req/s "
        result = await run_open_loop(
            client, schedule, warmup=warmup, drain_timeout=drain, stop=stop,
            progress=LiveProgress(label=label) if progress else None,
        )  # fmt: skip
        if result.status == "interrupted":
            notes.append("Interrupted: the steps so far are reported.")
            return None
        return step_result(rate, result.measurement.records, (warmup, warmup + duration), slos)

    def time_left() -> bool:
        if time.monotonic() - started + warmup + duration + drain <= budget:
            return True
        notes.append(f"Stopped: the next step would overrun the {budget:g}s budget.")
        return False

    saturated_at: float | None = None
    for rate in planned:
        if not time_left():
            break
        step = await run(rate)
        if step is None:
            return steps, notes
        steps.append(step)
        if step.lag_p99_s is not None and step.lag_p99_s > MAX_LAG_P99_S:
            notes.append(
                f"Stopped at {rate:g} req/s: the client's schedule lag p99 was {step.lag_p99_s * 1e3:.1f} ms "
                f"(over {MAX_LAG_P99_S * 1e3:g} ms), so this step measured the client, not the target."
            )
            return steps, notes
        if saturation(step, criteria) is not None:
            saturated_at = rate
            break
    if refine and saturated_at is not None and len(steps) >= 2 and time_left():
        below = steps[-2].offered_rps
        mid = round(math.sqrt(below * saturated_at), 3)
        if below < mid < saturated_at:
            notes.append(f"Refined: one more step at {mid:g} req/s, between {below:g} and {saturated_at:g}.")
            step = await run(mid)
            if step is not None:
                steps.append(step)
    return steps, notes


def format_table(steps: Sequence[StepResult], verdict: SweepVerdict, criteria: Criteria = Criteria()) -> str:
    head = (
        f"{'offered':>8} {'achieved':>8} {'tok/s':>8} {'TTFT p50':>9} {'TTFT p95':>9} {'e2e p95':>9} "
        f"{'in flight':>9} {'lag p99':>8} {'errors':>6} {'SLOs met':>8}  verdict"
    )
    lines = [
        head,
        f"{'(req/s)':>8} {'(req/s)':>8} {'':>8} {'(ms)':>9} {'(ms)':>9} {'(ms)':>9} {'(mean)':>9} {'(ms)':>8}",
    ]

    for s in sorted(steps, key=lambda x: x.offered_rps):
        why = saturation(s, criteria)
        mark = "saturated" if why else ("ok <- knee" if s.offered_rps == verdict.knee_rps else "ok")
        att = "-" if s.slo_attainment is None else f"{s.slo_attainment:.0%}"
        lines.append(
            f"{s.offered_rps:>8.2f} {s.achieved_rps:>8.2f} {s.output_tokens_per_s:>8.0f} "
            f"{format_ms(s.ttft_p50_s):>9} {format_ms(s.ttft_p95_s):>9} {format_ms(s.e2e_p95_s):>9} "
            f"{s.concurrency_mean:>9.1f} {format_ms(s.lag_p99_s):>8} "
            f"{s.errors:>6} {att:>8}  {mark}"
        )
    lines.append("")
    if verdict.knee_rps is None:
        lines.append(f"No knee: {verdict.reason}")
    else:
        lines.append(
            f"Knee: {verdict.knee_rps:g} req/s at {verdict.knee_concurrency:.1f} requests in flight on average "
            f"(peak {verdict.knee_concurrency_max}); "
            + (f"saturated at {verdict.reason}" if verdict.found else verdict.reason)
        )
    return "\n".join(lines)


def write_steps_csv(steps: Sequence[StepResult], path: str | Path, criteria: Criteria = Criteria()) -> Path:
    """One row per step, by offered rate: its figures (seconds, req/s) and why it saturated (empty if not)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    columns = [f.name for f in fields(StepResult)]
    with out.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*columns, "saturated"])
        for step in sorted(steps, key=lambda x: x.offered_rps):
            row = step.as_dict()
            writer.writerow([*("" if row[c] is None else row[c] for c in columns), saturation(step, criteria) or ""])
    return out


def write_steps_png(
    steps: Sequence[StepResult], verdict: SweepVerdict, path: str | Path, *, title: str | None = None
) -> Path:
    """Achieved against offered rate (the diagonal is keeping up) and TTFT p50/p95 per step, the knee marked."""
    plt = pyplot()

    ordered = sorted(steps, key=lambda x: x.offered_rps)
    offered = [s.offered_rps for s in ordered]
    fig, (rate_ax, ttft_ax) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    rate_ax.plot(offered, offered, color="grey", linestyle=":", label="offered (keeping up)")
    rate_ax.plot(offered, [s.achieved_rps for s in ordered], marker="o", label="achieved")
    if any(s.goodput_rps is not None for s in ordered):
        rate_ax.plot(offered, [s.goodput_rps for s in ordered], marker="s", label="goodput (all SLOs met)")
    rate_ax.set_ylabel("req/s")
    # Shaded from halfway between the last step that kept up and the first saturated one, to the right edge.
    first = next((i for i, s in enumerate(ordered) if saturation(s) is not None), None)
    right = offered[-1] * 1.05
    for ax in (rate_ax, ttft_ax):
        if verdict.knee_rps is not None:
            ax.axvline(verdict.knee_rps, color="tab:green", linestyle="--", label=f"knee {verdict.knee_rps:g} req/s")
        if first is not None:
            left = (offered[first - 1] + offered[first]) / 2 if first else offered[first] * 0.95
            ax.axvspan(left, right, color="tab:red", alpha=0.08)
        ax.set_xlim(right=right)
    for label, values in (("p50", [s.ttft_p50_s for s in ordered]), ("p95", [s.ttft_p95_s for s in ordered])):
        ttft_ax.plot(offered, [None if v is None else v * 1e3 for v in values], marker="o", label=f"TTFT {label}")
    ttft_ax.set_ylabel("TTFT (ms)")
    ttft_ax.set_xlabel("offered rate (req/s); shaded: saturated")
    rate_ax.legend(loc="upper left", fontsize="small")
    ttft_ax.legend(loc="upper left", fontsize="small")
    fig.suptitle(title or "loadgen sweep")
    fig.tight_layout()
    return save(fig, path)
