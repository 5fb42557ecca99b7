"""A small, deterministic synthetic request trace in the Azure layout, for tests and demos.

The default is half an hour shaped like a working day compressed: a quiet night at 1.5 req/s for five
minutes, a fifteen-minute morning ramp to 5 req/s, a 30-second burst at 6.5 req/s at the peak, then an
afternoon decline to 4 req/s. The ramp is slow next to a 90 s cold start (an autoscaler can follow it)
and the burst is shorter than one (it cannot). Arrivals are Poisson; prompt and output lengths are
lognormal (median 512 and 128 tokens). The same seed always gives the same file::

    python -m loadgen.traffic.synthetic tests/data/synthetic_trace.csv

writes the file the fleet-simulator tests replay (``TIMESTAMP`` in seconds from the start, three decimals,
as in the Mooncake conversion, then ``ContextTokens,GeneratedTokens``).
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loadgen.traffic.shapes import Arrival, LengthDist, Lognormal, Segment, build_schedule, parse_length

__all__ = [
    "DEFAULT_KNOTS",
    "Piecewise",
    "completion_hour",
    "random_hour",
    "synthetic_arrivals",
    "wandering_hour",
    "write_trace",
]

DEFAULT_KNOTS: tuple[tuple[float, float], ...] = (
    (0.0, 1.5),  # night
    (300.0, 1.5),
    (1200.0, 5.0),  # the morning ramp
    (1260.0, 5.0),
    (1261.0, 6.5),  # a 30-second burst at the peak
    (1290.0, 6.5),
    (1291.0, 5.0),
    (1800.0, 4.0),  # the afternoon decline
)
"""``(seconds, requests per second)`` knots of the default shape, joined linearly."""

PROMPT = Lognormal(median=512, sigma=0.6, max=4096)
OUTPUT = Lognormal(median=128, sigma=0.5, max=1024)


@dataclass(frozen=True, slots=True)
class Piecewise:
    """A rate joined linearly between ``(time, rate)`` knots; held at the last knot's rate after it."""

    knots: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        if not self.knots or self.knots[0][0] != 0.0:
            raise ValueError("piecewise rate: the first knot must be at time 0")
        for (t0, _), (t1, _) in itertools.pairwise(self.knots):
            if t1 < t0:
                raise ValueError(f"piecewise rate: knot times must not decrease ({t0} then {t1})")
        if any(rate < 0 for _, rate in self.knots):
            raise ValueError("piecewise rate: rates must be >= 0")

    @property
    def name(self) -> str:
        return "piecewise"

    def segments(self, duration: float) -> list[Segment]:
        out = []
        for (t0, r0), (t1, r1) in itertools.pairwise(self.knots):
            if t1 <= t0 or t0 >= duration:
                continue
            end = min(t1, duration)
            out.append(Segment(t0, end, r0, r0 + (r1 - r0) * (end - t0) / (t1 - t0)))
        last_t, last_rate = self.knots[-1]
        if duration > last_t:
            out.append(Segment(last_t, duration, last_rate, last_rate))
        return out

    def describe(self) -> str:
        return "piecewise " + ", ".join(f"{r:g} req/s at {t:g}s" for t, r in self.knots)


def synthetic_arrivals(
    *,
    duration: float = 1800.0,
    knots: Sequence[tuple[float, float]] = DEFAULT_KNOTS,
    seed: int = 7,
    prompt: LengthDist = PROMPT,
    output: LengthDist = OUTPUT,
    cv: float = 1.0,
) -> list[Arrival]:
    """The synthetic schedule: random arrivals of the piecewise rate (Poisson at ``cv`` 1, burstier above),
    lognormal 512/128-token requests unless other lengths are given."""
    return build_schedule(
        Piecewise(tuple(knots)), duration, prompt=prompt, output=output, seed=seed, poisson=True, cv=cv
    )


def random_hour(seed: int, *, duration: float = 3600.0) -> tuple[str, list[Arrival]]:
    """A shape nobody tuned for: ``(description, arrivals)`` of an hour drawn from ``seed``.

    Chat-length requests (prompt median 0.9-1.6k tokens) arriving in bursts (Gamma gaps, CV 1.5-3.5) at a
    rate that moves every 2-10 minutes by a ramp, a step, or a spike of 1.5-3x lasting 20 s to 4 minutes
    (shorter than a cold start or longer): 0.5-8 req/s outside the spikes, at most 12 in them. For checking
    a policy on traffic it was not tuned on (``bench/policy_matrix.py --traces random-SEED``).
    """
    rng = random.Random(seed)
    knots, events = _stepping_rate(rng, duration, start=(1.0, 5.0), low=0.5, high=8.0, peak=12.0)
    prompt, output, cv = _chat_requests(rng)
    description = f"random hour {seed}: {_counts(events)}, peak {max(rate for _, rate in knots):.1f} req/s, CV {cv}"
    arrivals = synthetic_arrivals(duration=duration, knots=knots, seed=seed, prompt=prompt, output=output, cv=cv)
    return description, arrivals


def completion_hour(seed: int, *, duration: float = 3600.0) -> tuple[str, list[Arrival]]:
    """A third shape nobody tuned for: ``(description, arrivals)`` of an hour of code completions.

    Completion traffic (Azure's LLM inference traces, code) sends longer prompts for short answers: prompt
    median 1.5-3k tokens, output median 15-60, so prefill is most of a request's time and, on a slow GPU,
    of its p95 TTFT. Burstier than chat (Gamma gaps, CV 2-4), at a rate that steps, ramps and spikes as in
    ``random_hour``: 1-14 req/s outside the spikes, at most 20 in them. Drawn from its own stream, so
    ``code-N`` and ``random-N`` share no shape.
    """
    rng = random.Random(f"code-{seed}")
    knots, events = _stepping_rate(rng, duration, start=(1.5, 8.0), low=1.0, high=14.0, peak=20.0)
    prompt = Lognormal(median=round(rng.uniform(1500, 3000)), sigma=round(rng.uniform(0.7, 1.0), 2), max=16384)
    output = Lognormal(median=round(rng.uniform(15, 60)), sigma=round(rng.uniform(0.8, 1.2), 2), max=512)
    cv = round(rng.uniform(2.0, 4.0), 2)
    description = (
        f"code hour {seed}: {_counts(events)}, peak {max(rate for _, rate in knots):.1f} req/s, CV {cv}, "
        f"prompt median {prompt.median}, output median {output.median}"
    )
    arrivals = synthetic_arrivals(duration=duration, knots=knots, seed=seed, prompt=prompt, output=output, cv=cv)
    return description, arrivals


def _stepping_rate(
    rng: random.Random, duration: float, *, start: tuple[float, float], low: float, high: float, peak: float
) -> tuple[tuple[tuple[float, float], ...], list[str]]:
    """Rate knots that move every 2-10 minutes by a ramp or a step (x0.4-2.5, kept within ``low``-``high``)
    or a spike (x1.5-3, at most ``peak``, for 20 s to 4 minutes), from a level drawn in ``start``; and the
    moves, in order."""
    level = rng.uniform(*start)
    knots, t, events = [(0.0, level)], 0.0, []
    while True:
        t += rng.uniform(120.0, 600.0)
        if t >= duration:
            break
        kind = rng.choice(("ramp", "step", "spike", "spike"))
        events.append(kind)
        if kind == "spike":
            width = rng.uniform(20.0, 240.0)
            top = min(peak, level * rng.uniform(1.5, 3.0))
            knots += [(t, level), (t + 0.01, top), (t + width, top), (t + width + 0.01, level)]
            t += width + 0.01
            continue
        new = min(high, max(low, level * rng.uniform(0.4, 2.5)))
        knots += [(t, level), (t + 0.01, new)] if kind == "step" else [(t, new)]
        level = new
    return tuple((at, rate) for at, rate in knots if at < duration), events


def _counts(events: list[str]) -> str:
    return " ".join(f"{kind}s={events.count(kind)}" for kind in ("ramp", "step", "spike"))


def wandering_hour(seed: int, *, duration: float = 3600.0) -> tuple[str, list[Arrival]]:
    """Another shape nobody tuned for: ``(description, arrivals)`` of an hour whose rate wanders.

    Where ``random_hour`` moves by ramps, steps and spikes, production traffic mostly drifts: the rate here
    is a mean-reverting random walk of its logarithm (Ornstein-Uhlenbeck, reverting to a level of 1-6 req/s
    over 5-20 minutes, with a spread of 25-60%), sampled every 30 s and joined linearly, within 0.3-12
    req/s. Requests and burstiness are drawn as in ``random_hour``.
    """
    rng = random.Random(seed)
    level = math.log(rng.uniform(1.0, 6.0))
    revert_s = rng.uniform(300.0, 1200.0)
    spread = rng.uniform(0.25, 0.6)
    step = 30.0
    keep = math.exp(-step / revert_s)
    log_rate, knots = level + rng.gauss(0.0, spread), []
    for i in range(int(duration // step) + 1):
        knots.append((i * step, min(12.0, max(0.3, math.exp(log_rate)))))
        log_rate = level + (log_rate - level) * keep + rng.gauss(0.0, spread * math.sqrt(1.0 - keep * keep))
    prompt, output, cv = _chat_requests(rng)
    rates = [rate for _, rate in knots]
    description = (
        f"wandering hour {seed}: level {math.exp(level):.1f} req/s, spread {spread:.0%} over {revert_s / 60:.0f} min,"
        f" {min(rates):.1f}-{max(rates):.1f} req/s, CV {cv}"
    )
    arrivals = synthetic_arrivals(duration=duration, knots=knots, seed=seed, prompt=prompt, output=output, cv=cv)
    return description, arrivals


def _chat_requests(rng: random.Random) -> tuple[Lognormal, Lognormal, float]:
    """Prompt and output lengths of chat-length requests (prompt median 0.9-1.6k tokens), and a burstiness."""
    prompt = Lognormal(median=round(rng.uniform(900, 1600)), sigma=round(rng.uniform(0.8, 1.1), 2), max=16384)
    output = Lognormal(median=round(rng.uniform(120, 300)), sigma=round(rng.uniform(0.7, 1.0), 2), max=2048)
    return prompt, output, round(rng.uniform(1.5, 3.5), 2)


def write_trace(arrivals: Sequence[Arrival], path: str | Path) -> Path:
    """Write arrivals as an Azure-layout CSV (seconds with millisecond resolution); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    lines += [f"{a.send_time:.3f},{a.prompt_tokens},{a.max_tokens}" for a in arrivals]
    path.write_text("\n".join(lines) + "\n")
    return path


def parse_knots(text: str) -> tuple[tuple[float, float], ...]:
    """``"0:1.5,600:1.5,600.01:6"`` -> ``((0.0, 1.5), (600.0, 1.5), (600.01, 6.0))``, checked by Piecewise."""
    try:
        knots = tuple((float(t), float(r)) for t, r in (knot.split(":") for knot in text.split(",")))
        Piecewise(knots)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"--knots {text!r}: expected SECONDS:REQ_PER_S,... ({error})") from None
    return knots


def _length(text: str) -> LengthDist:
    try:
        return parse_length(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the synthetic fleet-simulator trace (Azure CSV layout).")
    parser.add_argument("out", help="CSV file to write, e.g. tests/data/synthetic_trace.csv")
    parser.add_argument("--duration", type=float, default=1800.0, help="seconds of traffic (default 1800)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--knots",
        type=parse_knots,
        default=DEFAULT_KNOTS,
        metavar="T:RATE,...",
        help="another shape: (seconds, req/s) knots joined linearly, e.g. a step 0:1.5,600:1.5,600.01:6",
    )
    parser.add_argument(
        "--prompt", type=_length, default=PROMPT, metavar="DIST", help="prompt tokens, e.g. lognormal:1200,0.9,8192"
    )
    parser.add_argument(
        "--output", type=_length, default=OUTPUT, metavar="DIST", help="output tokens, e.g. lognormal:250,0.8,2048"
    )
    parser.add_argument(
        "--cv", type=float, default=1.0, help="burstiness: CV of the gaps between arrivals (1 Poisson, 2-4 bursty)"
    )
    args = parser.parse_args(argv)
    if not args.cv > 0:
        parser.error(f"--cv must be > 0, got {args.cv}")
    arrivals = synthetic_arrivals(
        duration=args.duration, knots=args.knots, seed=args.seed, prompt=args.prompt, output=args.output, cv=args.cv
    )
    path = write_trace(arrivals, args.out)
    print(f"wrote {len(arrivals)} requests over {args.duration:g}s to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
