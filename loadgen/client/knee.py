"""The knee finder: sweep concurrency against one replica and find where p95 TTFT degrades.

Each level runs the closed-loop client (``run_closed_loop``: N requests always in flight) with the same
request code and measurement as ``loadgen run``. The verdict is pure (``find_knee``), so the criterion is
tested without a server. The criterion, level by level in increasing concurrency:

* **baseline**: the p95 TTFT of the lowest level;
* a level **degrades** when its p95 TTFT exceeds ``ttft_factor`` times the baseline (default 3x) and the
  baseline plus ``ttft_floor`` (default 20 ms: smaller rises are jitter, not queueing), or exceeds the SLO
  when ``slo_ttft`` is given, or when more than 1% of its requests fail;
* a level is **saturated** when it adds less than ``min_scaling`` (default 20%) of the throughput perfect
  scaling would add: output tokens/s below ``prev * (1 + min_scaling * (c / c_prev - 1))``.

The knee is the last level before the first one that degrades or saturates: the per-replica concurrency
ceiling to pin as ``spec.maxConcurrency`` (vLLM ``--max-num-seqs``, TGI ``--max-concurrent-requests``).
Beyond it, more concurrency only queues requests (TTFT climbs) or buys no throughput; capacity should come
from replicas instead.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loadgen.client.runner import LiveProgress, RequestRecord, StreamingClient, run_closed_loop
from loadgen.client.stats import format_ms, percentile
from loadgen.engine.model import EngineModel, Finished, FirstToken
from loadgen.engine.profiles import EngineProfile
from loadgen.traffic.prompts import PromptMaker, PromptMix, block_keys
from loadgen.traffic.shapes import LengthDist

__all__ = ["KneeVerdict", "LevelResult", "find_knee", "format_table", "parse_levels", "sweep", "sweep_simulated"]

DEFAULT_LEVELS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)
MAX_ERROR_RATE = 0.01


@dataclass(frozen=True, slots=True)
class LevelResult:
    """The figures of one concurrency level."""

    concurrency: int
    requests: int
    errors: int
    ttft_p50: float | None
    ttft_p95: float | None
    tpot_p50: float | None
    e2e_p95: float | None
    output_tokens_per_s: float
    requests_per_s: float

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "requests": self.requests,
            "errors": self.errors,
            "ttft_p50_s": self.ttft_p50,
            "ttft_p95_s": self.ttft_p95,
            "tpot_p50_s": self.tpot_p50,
            "e2e_p95_s": self.e2e_p95,
            "output_tokens_per_s": round(self.output_tokens_per_s, 3),
            "requests_per_s": round(self.requests_per_s, 3),
        }


@dataclass(frozen=True, slots=True)
class KneeVerdict:
    """The recommended ceiling and why, with a note per level."""

    concurrency: int | None
    reason: str
    baseline_ttft_p95: float | None
    notes: dict[int, str]
    found: bool
    """False when no level degraded (the knee is at or above the highest level tried)."""


def parse_levels(text: str) -> list[int]:
    """``"1,2,4,8"`` -> ``[1, 2, 4, 8]`` (ascending, no repeats); raises ``ValueError`` naming a bad entry."""
    levels = set()
    for part in text.split(","):
        item = part.strip()
        if not item.isdigit() or int(item) < 1:
            raise ValueError(f"concurrency level {item!r} is not a whole number >= 1 (expected e.g. 1,2,4,8,16)")
        levels.add(int(item))
    if not levels:
        raise ValueError("no concurrency levels given (expected e.g. 1,2,4,8,16)")
    return sorted(levels)


def find_knee(
    levels: Sequence[LevelResult],
    *,
    ttft_factor: float = 3.0,
    ttft_floor: float = 0.02,
    min_scaling: float = 0.2,
    slo_ttft: float | None = None,
) -> KneeVerdict:
    """Apply the module's criterion to ``levels`` (in any order)."""
    ordered = sorted(levels, key=lambda r: r.concurrency)
    if not ordered:
        return KneeVerdict(None, "no levels were measured", None, {}, False)
    notes: dict[int, str] = {}
    base = ordered[0]
    if base.ttft_p95 is None or base.error_rate > MAX_ERROR_RATE:
        reason = (
            f"the lowest level (concurrency {base.concurrency}) has "
            f"{'no successful request' if base.ttft_p95 is None else f'{base.error_rate:.0%} errors'}; "
            "check the target before sweeping"
        )
        return KneeVerdict(None, reason, None, {base.concurrency: "failed"}, False)
    baseline = base.ttft_p95
    limit = max(baseline * ttft_factor, baseline + ttft_floor)
    if slo_ttft is not None:
        limit = min(limit, slo_ttft)
    notes[base.concurrency] = "baseline"
    prev = base
    for level in ordered[1:]:
        c = level.concurrency
        problem = None
        if level.error_rate > MAX_ERROR_RATE or level.ttft_p95 is None:
            problem = f"{level.error_rate:.1%} of requests failed (more than {MAX_ERROR_RATE:.0%})"
        elif level.ttft_p95 > limit:
            bound = (
                f"the SLO {slo_ttft * 1e3:.0f} ms"
                if slo_ttft is not None and limit == slo_ttft
                else f"{limit * 1e3:.1f} ms ({ttft_factor:g}x the baseline {baseline * 1e3:.1f} ms, at least "
                f"+{ttft_floor * 1e3:g} ms)"
            )
            problem = f"p95 TTFT {level.ttft_p95 * 1e3:.1f} ms exceeds {bound}"
        else:
            wanted = prev.output_tokens_per_s * (1 + min_scaling * (c / prev.concurrency - 1))
            if level.output_tokens_per_s < wanted:
                gain = level.output_tokens_per_s / prev.output_tokens_per_s - 1 if prev.output_tokens_per_s else 0.0
                problem = (
                    f"throughput saturated: {level.output_tokens_per_s:.0f} tok/s is {gain:+.0%} over concurrency "
                    f"{prev.concurrency} for {c / prev.concurrency - 1:+.0%} concurrency (needs "
                    f">= {min_scaling:.0%} of linear scaling)"
                )
        if problem is not None:
            notes[c] = "degraded"
            for later in ordered:
                if later.concurrency > c:
                    notes[later.concurrency] = "beyond the knee"
            reason = f"concurrency {c}: {problem}"
            return KneeVerdict(prev.concurrency, reason, baseline, notes, True)
        notes[c] = "ok"
        prev = level
    reason = (
        f"no level degraded up to concurrency {prev.concurrency}: the knee is at or above it; "
        "extend --levels to find it"
    )
    return KneeVerdict(prev.concurrency, reason, baseline, notes, False)


def format_table(levels: Sequence[LevelResult], verdict: KneeVerdict) -> str:
    """A table of the levels with the verdict column, then the recommendation."""
    head = (
        f"{'concurrency':>11} {'requests':>8} {'errors':>6} {'TTFT p50':>9} {'TTFT p95':>9} "
        f"{'TPOT p50':>9} {'e2e p95':>9} {'tok/s':>9} {'req/s':>7}  verdict"
    )
    lines = [head, f"{'':>11} {'':>8} {'':>6} {'(ms)':>9} {'(ms)':>9} {'(ms)':>9} {'(ms)':>9}"]
    for r in sorted(levels, key=lambda x: x.concurrency):
        mark = " <- knee" if r.concurrency == verdict.concurrency else ""
        lines.append(
            f"{r.concurrency:>11} {r.requests:>8} {r.errors:>6} {format_ms(r.ttft_p50):>9} "
            f"{format_ms(r.ttft_p95):>9} {format_ms(r.tpot_p50):>9} {format_ms(r.e2e_p95):>9} "
            f"{r.output_tokens_per_s:>9.0f} {r.requests_per_s:>7.1f}  "
            f"{verdict.notes.get(r.concurrency, '')}{mark}"
        )
    lines.append("")
    if verdict.concurrency is None:
        lines.append(f"No recommendation: {verdict.reason}")
    else:
        lines.append(f"Knee: {verdict.reason}.")
        lines.append(
            f"Recommendation: pin spec.maxConcurrency: {verdict.concurrency} in the InferenceService "
            "(vLLM --max-num-seqs, TGI --max-concurrent-requests, SGLang --max-running-requests, llama.cpp "
            "--parallel) and add replicas for more load."
        )
    return "\n".join(lines)


def level_result(concurrency: int, result_records: Sequence[RequestRecord], window: tuple[float, float]) -> LevelResult:
    """Figures of one closed-loop run: latency over the requests sent after the warm-up; throughput from the
    tokens that arrived inside ``window`` = (start, end) seconds, each request's tokens spread evenly between
    its first token and its end (decode is steady), so long requests do not make the figure jump."""
    start, end = window
    measured = [r for r in result_records if not r.warmup]
    ok = [r for r in measured if r.ok]
    ttfts = sorted(t for r in ok if (t := r.ttft) is not None)
    tpots = sorted(t for r in ok if (t := r.tpot) is not None)
    e2es = sorted(t for r in ok if (t := r.e2e) is not None)
    tokens = 0.0
    completed = 0
    for r in result_records:
        if not r.ok or r.first_token is None or r.finished is None:
            continue
        if start <= r.finished < end:
            completed += 1
        first, last = r.first_token, r.finished
        if last <= first:
            tokens += r.output_tokens if start <= last < end else 0
            continue
        overlap = min(last, end) - max(first, start)
        if overlap > 0:
            tokens += r.output_tokens * overlap / (last - first)
    span = end - start
    return LevelResult(
        concurrency=concurrency,
        requests=len(measured),
        errors=sum(1 for r in measured if r.error is not None),
        ttft_p50=percentile(ttfts, 50),
        ttft_p95=percentile(ttfts, 95),
        tpot_p50=percentile(tpots, 50),
        e2e_p95=percentile(e2es, 95),
        output_tokens_per_s=tokens / span if span > 0 else 0.0,
        requests_per_s=completed / span if span > 0 else 0.0,
    )


async def sweep(
    client: StreamingClient,
    levels: Sequence[int],
    *,
    duration: float,
    warmup: float,
    prompt: LengthDist,
    output: LengthDist,
    seed: int = 0,
    prompts: PromptMix | None = None,
    progress: bool = True,
    stop: asyncio.Event | None = None,
) -> list[LevelResult]:
    """Run each level in turn (each drains before the next starts); stops early when ``stop`` is set.

    ``prompts`` says what the prompts share (default: nothing, every prompt distinct). The engine keeps its
    prefix cache from level to level, as a server under a real sweep does.
    """
    results = []
    for c in levels:
        if stop is not None and stop.is_set():
            break
        run = await run_closed_loop(
            client,
            concurrency=c,
            duration=duration,
            warmup=warmup,
            prompt=prompt,
            output=output,
            seed=seed,
            prompts=PromptMaker(prompts, seed) if prompts is not None else None,
            progress=LiveProgress(label=f"concurrency {c:>4} ") if progress else None,
            stop=stop,
        )
        if run.status == "interrupted":
            break
        results.append(level_result(c, run.measurement.records, (warmup, warmup + duration)))
    return results


def sweep_simulated(
    profile: EngineProfile,
    requests: Sequence[tuple[int, int]],
    levels: Sequence[int] = DEFAULT_LEVELS,
    *,
    per_level: int = 400,
    seed: int = 0,
    prompts: PromptMix | None = None,
) -> list[LevelResult]:
    """The same sweep as ``sweep``, in simulated time against the simulated engine's model.

    Each level keeps ``concurrency`` requests in flight on one ``EngineModel`` (a new one as each finishes,
    drawn from ``requests``: ``(prompt, output)`` tokens, e.g. a trace's own) until ``per_level`` have
    finished: what ``loadgen knee`` would measure against a simengine of this profile, in milliseconds.
    ``prompts`` says what the prompts share (each in-flight slot keeps its conversation); each level
    starts with a cold cache.
    """
    if not requests:
        raise ValueError("sweep_simulated needs at least one (prompt, output) request")
    return [
        _simulated_level(profile, requests, c, per_level, random.Random(f"{seed}:{c}"), prompts, seed) for c in levels
    ]


def _simulated_level(
    profile: EngineProfile,
    requests: Sequence[tuple[int, int]],
    concurrency: int,
    per_level: int,
    rng: random.Random,
    prompts: PromptMix | None = None,
    seed: int = 0,
) -> LevelResult:
    model = EngineModel(profile, token_events=False)
    maker = PromptMaker(prompts, seed) if prompts is not None else None
    sent: list[tuple[float, int]] = []  # per request id: (sent at, output tokens)
    slot_of: list[int] = []
    first: dict[int, float] = {}
    finished: dict[int, float] = {}
    tokens = 0

    def submit(at: float, slot: int) -> None:
        prompt, output = requests[rng.randrange(len(requests))]
        keys = None
        if maker is not None:
            prompt, content = maker.make(prompt, output, conversation=slot)
            keys = None if content is None else block_keys(content, profile.block_size)
        model.submit(len(sent), prompt, output, at=at, block_keys=keys)
        sent.append((at, output))
        slot_of.append(slot)

    for slot in range(concurrency):
        submit(0.0, slot)
    while len(finished) < per_level and (at := model.next_event_time()) is not None:
        for event in model.advance(at):
            if isinstance(event, FirstToken):
                first[int(event.request_id)] = event.t  # type: ignore[call-overload]
            elif isinstance(event, Finished):
                rid = int(event.request_id)  # type: ignore[call-overload]
                finished[rid] = event.t
                tokens += event.generated
                submit(event.t, slot_of[rid])
    done = [rid for rid in finished if rid in first]
    ttfts = sorted(first[rid] - sent[rid][0] for rid in done)
    tpots = sorted((finished[rid] - first[rid]) / (sent[rid][1] - 1) for rid in done if sent[rid][1] > 1)
    e2es = sorted(finished[rid] - sent[rid][0] for rid in done)
    span = max(finished.values(), default=0.0)
    return LevelResult(
        concurrency=concurrency,
        requests=len(done),
        errors=0,
        ttft_p50=percentile(ttfts, 50),
        ttft_p95=percentile(ttfts, 95),
        tpot_p50=percentile(tpots, 50),
        e2e_p95=percentile(e2es, 95),
        output_tokens_per_s=tokens / span if span > 0 else 0.0,
        requests_per_s=len(done) / span if span > 0 else 0.0,
    )
