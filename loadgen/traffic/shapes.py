"""Synthetic traffic: arrival shapes and request-length distributions, turned into a request schedule.

Everything here is pure and deterministic given a seed. A shape is a request rate over time, ``rate(t)``
in requests per second, held as piecewise-linear segments; arrivals are the points where the integrated
rate ``R(t)`` crosses 0, 1, 2, ... (evenly spaced arrivals, as a constant-rate generator sends them) or the
points of a Poisson process with that rate (unit exponential gaps in ``R``, then mapped back through
``R``: the time-rescaling construction of a non-homogeneous Poisson process)::

    shape = Step(rate=10, peak_rate=50, at=30)
    schedule = build_schedule(shape, duration=120, prompt=Lognormal(512, 0.8), output=Fixed(128), seed=7)
    # [Arrival(send_time=0.013, prompt_tokens=433, max_tokens=128), ...]

The shapes, each from ``rate`` to ``peak_rate``:

* ``constant``: ``rate``, evenly spaced.            * ``poisson``: ``rate``, Poisson arrivals.
* ``step``: ``rate``, then ``peak_rate`` from ``at`` (until ``until``, if given, then ``rate`` again).
* ``ramp``: linear from ``rate`` to ``peak_rate`` over ``ramp_time`` (default: the whole run), then held.
* ``burst``: ``rate``, with ``peak_rate`` for ``burst_length`` seconds every ``period`` seconds from ``at``.
* ``diurnal``: a raised cosine from ``rate`` (the trough, at 0) to ``peak_rate`` (at half a period).

Shapes other than ``constant`` draw Poisson arrivals unless ``even=True``.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

__all__ = [
    "SHAPES",
    "Arrival",
    "Burst",
    "Constant",
    "Diurnal",
    "Fixed",
    "LengthDist",
    "Lognormal",
    "PromptContent",
    "Ramp",
    "RateShape",
    "Segment",
    "Step",
    "Uniform",
    "arrival_times",
    "build_schedule",
    "expected_requests",
    "parse_length",
]

DIURNAL_KNOTS_PER_PERIOD = 360
"""Piecewise-linear knots per diurnal period: the rate is exact at each knot and within 0.01% between."""


PromptContent = tuple[tuple[int, int], ...]
"""A prompt as ``(segment id, tokens)`` segments: what a prefix cache can share (``loadgen.traffic.prompts``)."""


class Arrival(NamedTuple):
    """One scheduled request: when to send it (seconds from the start), its sizes in tokens, and what its
    prompt shares with others (``None``: nothing, the prompt is its own)."""

    send_time: float
    prompt_tokens: int
    max_tokens: int
    content: PromptContent | None = None


@dataclass(frozen=True, slots=True)
class Segment:
    """The rate moves linearly from ``r0`` at ``t0`` to ``r1`` at ``t1`` (requests per second)."""

    t0: float
    t1: float
    r0: float
    r1: float

    @property
    def mass(self) -> float:
        """Expected requests in the segment."""
        return (self.r0 + self.r1) / 2 * (self.t1 - self.t0)

    def time_at(self, mass: float) -> float:
        """The time by which ``mass`` (0 <= mass <= self.mass) requests are expected since ``t0``."""
        if mass <= 0:
            return self.t0
        length = self.t1 - self.t0
        slope = (self.r1 - self.r0) / length if length > 0 else 0.0
        if abs(slope) < 1e-12:
            return self.t0 + mass / self.r0
        # r0*tau + slope*tau^2/2 = mass, in the numerically stable form of the quadratic root.
        disc = max(self.r0 * self.r0 + 2 * slope * mass, 0.0)
        tau = 2 * mass / (self.r0 + math.sqrt(disc))
        return self.t0 + min(tau, length)


class RateShape(Protocol):
    """A request rate over time."""

    @property
    def name(self) -> str: ...

    def segments(self, duration: float) -> list[Segment]:
        """The rate over ``[0, duration)`` as contiguous piecewise-linear segments."""
        ...

    def describe(self) -> str:
        """One line for reports."""
        ...


def _check_rate(field: str, value: float) -> None:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{field} must be a finite number of requests per second >= 0, got {value}")


def _piecewise(points: Sequence[tuple[float, float]], duration: float) -> list[Segment]:
    """Constant rates from each ``(start, rate)`` to the next start, cut to ``[0, duration)``."""
    segments = []
    for i, (start, rate) in enumerate(points):
        end = points[i + 1][0] if i + 1 < len(points) else duration
        start, end = max(start, 0.0), min(end, duration)
        if end > start:
            segments.append(Segment(start, end, rate, rate))
    return segments


@dataclass(frozen=True, slots=True)
class Constant:
    """A steady rate; ``poisson=False`` (the default for this shape) spaces arrivals evenly."""

    rate: float
    poisson: bool = False

    def __post_init__(self) -> None:
        _check_rate("rate", self.rate)

    @property
    def name(self) -> str:
        return "poisson" if self.poisson else "constant"

    def segments(self, duration: float) -> list[Segment]:
        return [Segment(0.0, duration, self.rate, self.rate)]

    def describe(self) -> str:
        return f"{self.name} {self.rate:g} req/s"


@dataclass(frozen=True, slots=True)
class Step:
    """``rate``, then ``peak_rate`` from ``at`` until ``until`` (or the end), then ``rate`` again."""

    rate: float
    peak_rate: float
    at: float
    until: float | None = None

    def __post_init__(self) -> None:
        _check_rate("rate", self.rate)
        _check_rate("peak_rate", self.peak_rate)
        if self.at < 0:
            raise ValueError(f"step: at must be >= 0 seconds, got {self.at}")
        if self.until is not None and self.until <= self.at:
            raise ValueError(f"step: until ({self.until}) must be later than at ({self.at})")

    @property
    def name(self) -> str:
        return "step"

    def segments(self, duration: float) -> list[Segment]:
        points = [(0.0, self.rate), (self.at, self.peak_rate)]
        if self.until is not None:
            points.append((self.until, self.rate))
        return _piecewise(points, duration)

    def describe(self) -> str:
        until = f" until {self.until:g}s" if self.until is not None else ""
        return f"step {self.rate:g} -> {self.peak_rate:g} req/s at {self.at:g}s{until}"


@dataclass(frozen=True, slots=True)
class Ramp:
    """Linear from ``rate`` to ``peak_rate`` over ``ramp_time`` seconds (``None``: the whole run), then held."""

    rate: float
    peak_rate: float
    ramp_time: float | None = None

    def __post_init__(self) -> None:
        _check_rate("rate", self.rate)
        _check_rate("peak_rate", self.peak_rate)
        if self.ramp_time is not None and self.ramp_time <= 0:
            raise ValueError(f"ramp: ramp_time must be > 0 seconds, got {self.ramp_time}")

    @property
    def name(self) -> str:
        return "ramp"

    def segments(self, duration: float) -> list[Segment]:
        ramp = duration if self.ramp_time is None else self.ramp_time
        if ramp >= duration:
            end_rate = self.rate + (self.peak_rate - self.rate) * duration / ramp
            return [Segment(0.0, duration, self.rate, end_rate)]
        return [Segment(0.0, ramp, self.rate, self.peak_rate), Segment(ramp, duration, self.peak_rate, self.peak_rate)]

    def describe(self) -> str:
        over = "the run" if self.ramp_time is None else f"{self.ramp_time:g}s"
        return f"ramp {self.rate:g} -> {self.peak_rate:g} req/s over {over}"


@dataclass(frozen=True, slots=True)
class Burst:
    """``rate``, with ``peak_rate`` for ``burst_length`` seconds every ``period`` seconds, the first at ``at``."""

    rate: float
    peak_rate: float
    period: float
    burst_length: float
    at: float = 0.0

    def __post_init__(self) -> None:
        _check_rate("rate", self.rate)
        _check_rate("peak_rate", self.peak_rate)
        if self.period <= 0:
            raise ValueError(f"burst: period must be > 0 seconds, got {self.period}")
        if not 0 < self.burst_length <= self.period:
            raise ValueError(f"burst: burst_length must be > 0 and <= period ({self.period}s), got {self.burst_length}")
        if self.at < 0:
            raise ValueError(f"burst: at must be >= 0 seconds, got {self.at}")

    @property
    def name(self) -> str:
        return "burst"

    def segments(self, duration: float) -> list[Segment]:
        points: list[tuple[float, float]] = [(0.0, self.rate)]
        start = self.at
        while start < duration:
            points += [(start, self.peak_rate), (start + self.burst_length, self.rate)]
            start += self.period
        return _piecewise(points, duration)

    def describe(self) -> str:
        return (
            f"burst {self.rate:g} req/s with {self.peak_rate:g} req/s for {self.burst_length:g}s "
            f"every {self.period:g}s from {self.at:g}s"
        )


@dataclass(frozen=True, slots=True)
class Diurnal:
    """A raised cosine: ``rate`` at 0, ``peak_rate`` at ``period / 2``, ``rate`` again at ``period``."""

    rate: float
    peak_rate: float
    period: float

    def __post_init__(self) -> None:
        _check_rate("rate", self.rate)
        _check_rate("peak_rate", self.peak_rate)
        if self.period <= 0:
            raise ValueError(f"diurnal: period must be > 0 seconds, got {self.period}")

    @property
    def name(self) -> str:
        return "diurnal"

    def rate_at(self, t: float) -> float:
        return self.rate + (self.peak_rate - self.rate) * (1 - math.cos(2 * math.pi * t / self.period)) / 2

    def segments(self, duration: float) -> list[Segment]:
        knot = self.period / DIURNAL_KNOTS_PER_PERIOD
        count = max(1, math.ceil(duration / knot))
        times = [min(i * knot, duration) for i in range(count + 1)]
        return [Segment(a, b, self.rate_at(a), self.rate_at(b)) for a, b in itertools.pairwise(times)]

    def describe(self) -> str:
        return f"diurnal {self.rate:g} -> {self.peak_rate:g} req/s, period {self.period:g}s"


SHAPES = ("constant", "poisson", "step", "ramp", "burst", "diurnal")


def expected_requests(shape: RateShape, duration: float) -> float:
    """The expected number of arrivals of ``shape`` in ``[0, duration)``."""
    return sum(s.mass for s in shape.segments(duration))


def arrival_times(
    shape: RateShape, duration: float, *, poisson: bool, rng: random.Random, cv: float = 1.0
) -> Iterator[float]:
    """Arrival times in ``[0, duration)``, ascending: evenly spaced in expected count, or random.

    Random gaps (in expected count) are Gamma-distributed with mean 1 and coefficient of variation ``cv``:
    1 is Poisson; above 1 arrivals cluster in bursts with quiet gaps between, as production LLM traces do
    (BurstGPT fits Gamma gaps with a CV well above 1), at the same mean rate.
    """
    _check_duration(duration)
    if not (math.isfinite(cv) and cv > 0):
        raise ValueError(f"cv (burstiness) must be a finite number > 0, got {cv}")
    if cv == 1.0:
        gap: Callable[[], float] = lambda: rng.expovariate(1.0)  # noqa: E731 - the Poisson stream as before
    else:
        k = 1 / cv**2  # Gamma(shape k, scale 1/k): mean 1, CV 1/sqrt(k)
        gap = lambda: rng.gammavariate(k, 1 / k)  # noqa: E731
    target = gap() if poisson else 0.0
    passed = 0.0  # expected arrivals before the current segment
    last = 0.0
    for seg in shape.segments(duration):
        mass = seg.mass
        while target < passed + mass:
            # Bursty gaps can be a few ulps of the expected count, and the rounding of a ramp's root can then
            # step back: an arrival never comes before the one drawn before it (simulate requires the order).
            t = max(seg.time_at(target - passed), last)
            if t >= duration:
                return
            yield t
            last = t
            target += gap() if poisson else 1.0
        passed += mass


def _check_duration(duration: float) -> None:
    if not math.isfinite(duration) or duration <= 0:
        raise ValueError(f"duration must be a finite number of seconds > 0, got {duration}")


# --- request lengths -------------------------------------------------------------------------------


class LengthDist(Protocol):
    """A distribution of token counts."""

    def sample(self, rng: random.Random) -> int: ...

    def describe(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Fixed:
    """Always ``tokens``."""

    tokens: int

    def __post_init__(self) -> None:
        if self.tokens < 1:
            raise ValueError(f"fixed length must be >= 1 token, got {self.tokens}")

    def sample(self, rng: random.Random) -> int:
        return self.tokens

    def describe(self) -> str:
        return f"{self.tokens}"


@dataclass(frozen=True, slots=True)
class Uniform:
    """Uniform on ``low..high`` tokens, both included."""

    low: int
    high: int

    def __post_init__(self) -> None:
        if not 1 <= self.low <= self.high:
            raise ValueError(f"uniform lengths need 1 <= low <= high, got {self.low}..{self.high}")

    def sample(self, rng: random.Random) -> int:
        return rng.randint(self.low, self.high)

    def describe(self) -> str:
        return f"uniform:{self.low},{self.high}"


@dataclass(frozen=True, slots=True)
class Lognormal:
    """Lognormal with the given median and shape ``sigma`` (of the log), rounded and clipped to ``1..max``."""

    median: float
    sigma: float
    max: int | None = None

    def __post_init__(self) -> None:
        if self.median < 1:
            raise ValueError(f"lognormal median must be >= 1 token, got {self.median}")
        if self.sigma < 0:
            raise ValueError(f"lognormal sigma must be >= 0, got {self.sigma}")
        if self.max is not None and self.max < 1:
            raise ValueError(f"lognormal max must be >= 1 token, got {self.max}")

    def sample(self, rng: random.Random) -> int:
        value = max(1, round(rng.lognormvariate(math.log(self.median), self.sigma)))
        return value if self.max is None else min(value, self.max)

    def describe(self) -> str:
        cap = f",{self.max}" if self.max is not None else ""
        return f"lognormal:{self.median:g},{self.sigma:g}{cap}"


_LENGTH_FORMS = "N (fixed), fixed:N, uniform:LOW,HIGH or lognormal:MEDIAN,SIGMA[,MAX]"


def parse_length(text: str) -> LengthDist:
    """Parse a length distribution: ``128``, ``fixed:128``, ``uniform:64,512``, ``lognormal:512,0.8[,4096]``."""
    kind, _, args = text.strip().partition(":")
    if not args and re.fullmatch(r"\d+", kind):
        kind, args = "fixed", kind
    parts = [p.strip() for p in args.split(",")] if args else []
    try:
        if kind == "fixed" and len(parts) == 1:
            return Fixed(int(parts[0]))
        if kind == "uniform" and len(parts) == 2:
            return Uniform(int(parts[0]), int(parts[1]))
        if kind == "lognormal" and len(parts) in (2, 3):
            cap = int(parts[2]) if len(parts) == 3 else None
            return Lognormal(float(parts[0]), float(parts[1]), cap)
    except ValueError as err:
        if "invalid literal" not in str(err) and "could not convert" not in str(err):
            raise ValueError(f"length distribution {text!r}: {err}") from None
    raise ValueError(f"length distribution {text!r} is not one of: {_LENGTH_FORMS}")


# --- the schedule ----------------------------------------------------------------------------------


def build_schedule(
    shape: RateShape,
    duration: float,
    *,
    prompt: LengthDist,
    output: LengthDist,
    seed: int = 0,
    poisson: bool | None = None,
    max_requests: int | None = None,
    cv: float = 1.0,
) -> list[Arrival]:
    """The requests of ``shape`` over ``[0, duration)``, at most ``max_requests`` of them.

    ``poisson`` defaults to False for ``Constant(poisson=False)`` and True for every other shape. The same
    arguments always give the same schedule; arrivals, prompt and output lengths draw from separate
    random streams, so changing the length distribution does not move the arrivals. ``cv`` > 1 makes the
    random arrivals burstier than Poisson (see ``arrival_times``).
    """
    _check_duration(duration)
    if max_requests is not None and max_requests < 0:
        raise ValueError(f"max_requests must be >= 0, got {max_requests}")
    if poisson is None:
        poisson = shape.poisson if isinstance(shape, Constant) else True
    times_rng = random.Random(f"{seed}:arrivals")
    prompt_rng = random.Random(f"{seed}:prompt")
    output_rng = random.Random(f"{seed}:output")
    schedule: list[Arrival] = []
    for t in arrival_times(shape, duration, poisson=poisson, rng=times_rng, cv=cv):
        if max_requests is not None and len(schedule) >= max_requests:
            break
        schedule.append(Arrival(t, prompt.sample(prompt_rng), output.sample(output_rng)))
    return schedule
