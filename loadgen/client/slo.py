"""Latency SLOs per request, and goodput: the rate of requests that meet all of them.

Names follow the two tools platform teams already use. inference-perf (kubernetes-sigs, ``docs/goodput.md``)
takes ``report.goodput.constraints`` keyed ``ttft``, ``tpot``, ``itl``, ``ntpot``, ``request_latency`` in
seconds; vLLM's ``benchmark_serving.py --goodput`` takes ``KEY:VALUE`` pairs ``ttft``, ``tpot``, ``e2el`` in
milliseconds (the definition is DistServe's, arXiv 2401.09670). ``--slo`` accepts both spellings:

    --slo ttft=0.5,itl=0.05,e2e=10        seconds, as inference-perf
    --slo ttft:500ms tpot:50ms e2el:10s   vLLM's keys and separator, with the unit written out

A value without a unit is seconds (a bare ``500`` would be read as 500 s, and ``--slo`` refuses a TTFT or
ITL that long, naming the ``ms`` suffix). Per request:

* ``ttft``: sent to first token;
* ``tpot``: mean time per output token after the first (vLLM's TPOT);
* ``itl``: the request's longest gap between two tokens, so every gap is within the SLO (a stall the user
  sees counts even when the mean is fine);
* ``e2e`` (``e2el``, ``request_latency``): sent to the end of the stream.

A request is **good** when it succeeded and meets every SLO given (a request with one token has no ITL or
TPOT and meets those). Goodput is good requests (and their tokens) per second of the measured window, as
inference-perf reports it; attainment is the share of measured requests (failed ones included, as not
met) that meet one SLO, or all of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loadgen.client.runner import RequestRecord

__all__ = ["METRICS", "Slos", "goodput", "parse_slos"]

METRICS = {
    "ttft": "time to first token",
    "tpot": "mean time per output token after the first",
    "itl": "longest gap between two tokens of the request",
    "e2e": "end-to-end latency",
}
_ALIASES = {"e2el": "e2e", "request_latency": "e2e", "ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2e"}
_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}
_PAIR = re.compile(r"^\s*([a-z_][a-z0-9_]*)\s*[=:]\s*([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)\s*(ms|us|s)?\s*$")
_IMPLAUSIBLE_S = {"ttft": 120.0, "tpot": 10.0, "itl": 10.0}


@dataclass(frozen=True, slots=True)
class Slos:
    """Thresholds in seconds per metric (``METRICS`` keys); an empty one asks for nothing."""

    limits: tuple[tuple[str, float], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.limits)

    def get(self, metric: str) -> float | None:
        return dict(self.limits).get(metric)

    def merged(self, **more: float | None) -> Slos:
        """These SLOs plus ``more`` (e.g. ``ttft=``) where this one has none for that metric."""
        limits = dict(self.limits)
        for key, value in more.items():
            if value is not None:
                limits.setdefault(key, value)
        return Slos(tuple(sorted(limits.items(), key=lambda kv: list(METRICS).index(kv[0]))))

    def describe(self) -> str:
        return ", ".join(f"{k} <= {_fmt(v)}" for k, v in self.limits)


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e3:g} ms" if seconds < 1 else f"{seconds:g} s"


def parse_slos(text: str) -> Slos:
    """``"ttft=0.5,itl=50ms"`` -> ``Slos``; raises ``ValueError`` naming the bad entry and the accepted forms."""
    limits: dict[str, float] = {}
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        match = _PAIR.match(part.lower())
        if match is None:
            raise ValueError(
                f"SLO {part!r} is not METRIC=SECONDS (e.g. ttft=0.5,itl=50ms,e2e=10; metrics: "
                f"{', '.join(METRICS)}; e2el and request_latency mean e2e)"
            )
        name, number, unit = match.group(1), float(match.group(2)), match.group(3) or ""
        metric = _ALIASES.get(name)
        if metric is None:
            raise ValueError(f"SLO metric {name!r} is unknown; use one of {', '.join(METRICS)} (or e2el)")
        value = number * _UNITS[unit]
        if value <= 0:
            raise ValueError(f"SLO {part!r} must be above 0")
        if not unit and value > _IMPLAUSIBLE_S.get(metric, float("inf")):
            raise ValueError(f"SLO {part!r} reads as {value:g} seconds; write {number:g}ms for milliseconds")
        limits[metric] = value
    if not limits:
        raise ValueError("no SLO given (expected e.g. ttft=0.5,itl=0.05,e2e=10)")
    return Slos().merged(**limits)


def request_value(rec: RequestRecord, metric: str) -> float | None:
    """``rec``'s value of ``metric`` (None when it has none, e.g. ITL of a one-token answer)."""
    if metric == "ttft":
        return rec.ttft
    if metric == "tpot":
        return rec.tpot
    if metric == "itl":
        return rec.max_itl if rec.ok and rec.chunks > 1 else None
    return rec.e2e


def meets(rec: RequestRecord, slos: Slos) -> dict[str, bool]:
    """Per metric of ``slos``: whether ``rec`` succeeded within it."""
    out = {}
    for metric, limit in slos.limits:
        value = request_value(rec, metric)
        # A value the request cannot have (no second token: no ITL) is met, if the request succeeded.
        within = metric in ("tpot", "itl") if value is None else value <= limit
        out[metric] = rec.ok and within
    return out


def goodput(measured: Iterable[RequestRecord], slos: Slos, window: float) -> dict[str, Any]:
    """The goodput section of a report: good requests and tokens per second, and attainment per SLO."""
    records = list(measured)
    met = {metric: 0 for metric, _ in slos.limits}
    good = good_output = good_prompt = 0
    for rec in records:
        ok = meets(rec, slos)
        for metric, hit in ok.items():
            met[metric] += hit
        if all(ok.values()):
            good += 1
            good_output += rec.output_tokens
            good_prompt += rec.prompt_tokens
    n = len(records)

    def rate(count: float) -> float | None:
        return round(count / window, 3) if window > 0 else None

    return {
        "slos_s": dict(slos.limits),
        "good_requests": good,
        "measured_requests": n,
        "requests_per_s": rate(good),
        "output_tokens_per_s": rate(good_output),
        "total_tokens_per_s": rate(good_output + good_prompt),
        "attainment": round(good / n, 4) if n else None,
        "attainment_by_slo": {m: round(k / n, 4) if n else None for m, k in met.items()},
    }


def from_report(section: Mapping[str, Any] | None) -> Slos:
    """The ``Slos`` a report's goodput section was computed with."""
    if not section:
        return Slos()
    return Slos().merged(**{k: float(v) for k, v in section.get("slos_s", {}).items()})
