"""Reports of a run: the figures (JSON), a per-second time series, a PNG plot and a text summary.

``build_report`` is pure: records in, a JSON-ready dict out. What counts:

* Requests scheduled in the warm-up (``send_time < warmup``) are sent but left out of every figure,
  the cost included; the report says how many.
* The measurement window runs from the end of the warm-up to the end of the run (the last answer or the
  drain timeout). Throughput is successful measured requests (and their tokens) over the window.
* GPU-seconds integrate ``replicas(t) * gpus_per_replica`` over the window; the cost is that at the price
  per GPU-hour, also per million output tokens and per million tokens (prompt plus output).
* The time series has one row per second of the run: requests sent (the load), requests in flight at the
  end of the second, the p95 TTFT of requests sent in that second, completions, errors, output tokens/s
  (each request's tokens spread evenly from its first token to its end, so long answers do not make the
  curve jump), the mean inter-token time (TPOT) of requests that finished that second, and the replica
  count where known.
* With SLOs (``loadgen.client.slo``), goodput: requests (and tokens) per second that met all of them, and the
  attainment of each.
* CSV: one row per request (``write_requests_csv``) and the summary as ``metric,value`` rows with dotted
  names (``write_summary_csv``), for a spreadsheet or pandas.
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadgen.client.plots import pyplot, save
from loadgen.client.runner import ERROR_KINDS, RequestRecord, RunResult
from loadgen.client.slo import Slos, goodput, meets
from loadgen.client.stats import format_ms, percentile, summary

__all__ = [
    "CostModel",
    "ReplicaTimeline",
    "build_report",
    "format_summary",
    "static_replicas",
    "summary_path",
    "write_json",
    "write_png",
    "write_requests_csv",
    "write_summary_csv",
]

REPORT_VERSION = 1

ReplicaTimeline = Callable[[float], float | None]
"""Replicas serving the target at ``t`` seconds into the run (None where unknown)."""


def static_replicas(count: float) -> ReplicaTimeline:
    """A fixed replica count for the whole run."""

    def replicas(t: float) -> float | None:
        return count

    return replicas


@dataclass(frozen=True, slots=True)
class CostModel:
    """What the serving capacity costs: replicas over time, GPUs per replica, and the price of a GPU-hour."""

    replicas: ReplicaTimeline = field(default_factory=lambda: static_replicas(1))
    gpus_per_replica: float = 1.0
    price_per_gpu_hour: float | None = None


def _r(value: float | None, digits: int = 6) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


def _rsummary(values: Sequence[float] | list[float]) -> dict[str, Any]:
    return {k: (_r(v) if isinstance(v, float) else v) for k, v in summary(values).items()}


def gpu_seconds(cost: CostModel, start: float, end: float, step: float = 0.1) -> float | None:
    """The integral of ``replicas(t) * gpus_per_replica`` over ``[start, end]`` (None if replicas unknown)."""
    if end <= start:
        return 0.0
    total = 0.0
    t = start
    while t < end:
        dt = min(step, end - t)
        replicas = cost.replicas(t + dt / 2)
        if replicas is None:
            return None
        total += replicas * cost.gpus_per_replica * dt
        t += dt
    return total


def _timeseries(records: Sequence[RequestRecord], end: float, warmup: float, cost: CostModel) -> list[dict[str, Any]]:
    seconds = max(1, math.ceil(end))
    sent = [0] * seconds
    completed = [0] * seconds
    errors = [0] * seconds
    tokens = [0] * seconds
    spread = [0.0] * seconds
    tpots: list[list[float]] = [[] for _ in range(seconds)]
    ttfts: list[list[float]] = [[] for _ in range(seconds)]
    starts: list[float] = []
    ends: list[float] = []
    for rec in records:
        if rec.sent is None:
            continue
        s = min(int(rec.sent), seconds - 1)
        sent[s] += 1
        starts.append(rec.sent)
        if rec.finished is not None:
            ends.append(rec.finished)
            f = min(int(rec.finished), seconds - 1)
            if rec.ok:
                completed[f] += 1
                tokens[f] += rec.output_tokens
                _spread(spread, rec)
                tpot = rec.tpot
                if tpot is not None:
                    tpots[f].append(tpot)
            else:
                errors[f] += 1
        ttft = rec.ttft
        if ttft is not None and rec.ok:
            ttfts[s].append(ttft)
    starts.sort()
    ends.sort()
    rows = []
    i_start = i_end = 0
    for s in range(seconds):
        boundary = s + 1.0
        while i_start < len(starts) and starts[i_start] <= boundary:
            i_start += 1
        while i_end < len(ends) and ends[i_end] <= boundary:
            i_end += 1
        ordered = sorted(ttfts[s])
        tpot_s = sorted(tpots[s])
        rows.append(
            {
                "t": s,
                "sent": sent[s],
                "in_flight": i_start - i_end,
                "completed": completed[s],
                "errors": errors[s],
                "output_tokens": tokens[s],
                "output_tokens_per_s": _r(spread[s], 3),
                "ttft_p95_s": _r(percentile(ordered, 95)),
                "tpot_p50_s": _r(percentile(tpot_s, 50)),
                "tpot_p95_s": _r(percentile(tpot_s, 95)),
                "replicas": cost.replicas(s + 0.5),
                "warmup": s + 1 <= warmup,
            }
        )
    return rows


def _spread(per_second: list[float], rec: RequestRecord) -> None:
    """Add ``rec``'s output tokens to ``per_second``, evenly over its first token to its end."""
    first, last = rec.first_token, rec.finished
    if first is None or last is None:
        return
    n = len(per_second)
    if last - first <= 0:
        per_second[min(int(last), n - 1)] += rec.output_tokens
        return
    density = rec.output_tokens / (last - first)
    s = int(first)
    while s < n and s < last:
        overlap = min(last, s + 1.0) - max(first, float(s))
        if overlap > 0:
            per_second[s] += density * overlap
        s += 1


def _record(rec: RequestRecord) -> dict[str, Any]:
    row: dict[str, Any] = {
        "i": rec.index,
        "scheduled": _r(rec.scheduled),
        "sent": _r(rec.sent),
        "lag": _r(rec.lag),
        "ttft": _r(rec.ttft),
        "tpot": _r(rec.tpot),
        "itl_max": _r(rec.max_itl) if rec.ok and rec.chunks > 1 else None,
        "e2e": _r(rec.e2e),
        "prompt_tokens": rec.prompt_tokens,
        "max_tokens": rec.max_tokens,
        "output_tokens": rec.output_tokens,
    }
    if rec.warmup:
        row["warmup"] = True
    if rec.error is not None:
        row["error"] = rec.error
        row["detail"] = rec.detail
    return row


def build_report(
    result: RunResult,
    *,
    target: str,
    model: str | None,
    workload: dict[str, Any],
    cost: CostModel | None = None,
    slo_ttft: float | None = None,
    slos: Slos | None = None,
    notes: Sequence[str] = (),
    error: str | None = None,
    include_records: bool = True,
) -> dict[str, Any]:
    """All figures of ``result`` as a JSON-ready dict (see the module docstring for what counts).

    ``slo_ttft`` is ``slos`` with ``ttft`` only (kept for the callers that only have a TTFT SLO).
    """
    cost = cost or CostModel()
    slos = (slos or Slos()).merged(ttft=slo_ttft)
    slo_ttft = slos.get("ttft")
    m = result.measurement
    warmup = m.warmup
    records = m.records
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    failed = [r for r in measured if r.error is not None]
    end = max([result.elapsed, *(r.finished for r in records if r.finished is not None)], default=0.0)
    window = max(end - warmup, 0.0)
    output_tokens = sum(r.output_tokens for r in ok)
    prompt_tokens = sum(r.prompt_tokens for r in ok)
    kinds = Counter(r.error for r in failed if r.error is not None)
    examples: dict[str, str] = {}
    for r in failed:
        if r.error is not None and r.error not in examples and r.detail:
            examples[r.error] = r.detail
    gpu_s = gpu_seconds(cost, warmup, end)
    price = cost.price_per_gpu_hour
    spent = gpu_s * price / 3600 if gpu_s is not None and price is not None else None

    def per_million(tokens: int) -> float | None:
        return _r(spent / tokens * 1e6, 4) if spent is not None and tokens > 0 else None

    warm = len(records) - len(measured)
    all_notes = list(notes)
    if warmup > 0:
        all_notes.insert(
            0,
            f"Warm-up: requests scheduled in the first {warmup:g}s ({warm} requests) were sent but are excluded "
            "from every figure and from the cost.",
        )
    all_notes.append("ITL percentiles come from a log-bucketed histogram (within 1%); the others are exact.")
    lag_values = [r.lag for r in measured if r.lag is not None]
    report: dict[str, Any] = {
        "version": REPORT_VERSION,
        "target": target,
        "model": model,
        "status": result.status if error is None else "failed",
        "error": error,
        "started_at": result.started_at,
        "workload": workload,
        "warmup_s": warmup,
        "window": {"start_s": _r(warmup), "end_s": _r(end), "seconds": _r(window)},
        "requests": {
            "scheduled": result.scheduled,
            "sent": sum(1 for r in records if r.sent is not None),
            "warmup_excluded": warm,
            "measured": len(measured),
            "succeeded": len(ok),
            "failed": len(failed),
        },
        "ttft_s": _rsummary([t for r in ok if (t := r.ttft) is not None]),
        "itl_s": {k: (_r(v) if isinstance(v, float) else v) for k, v in m.itl.summary().items()},
        "tpot_s": _rsummary([t for r in ok if (t := r.tpot) is not None]),
        "e2e_s": _rsummary([t for r in ok if (t := r.e2e) is not None]),
        "schedule_lag_s": {
            k: v for k, v in _rsummary(lag_values).items() if k in ("count", "mean", "p50", "p99", "max")
        },
        "throughput": {
            "requests_per_s": _r(len(ok) / window, 3) if window > 0 else None,
            "output_tokens_per_s": _r(output_tokens / window, 3) if window > 0 else None,
            "total_tokens_per_s": _r((output_tokens + prompt_tokens) / window, 3) if window > 0 else None,
            "output_tokens": output_tokens,
            "prompt_tokens": prompt_tokens,
        },
        "errors": {
            "total": len(failed),
            "rate": _r(len(failed) / len(measured), 4) if measured else None,
            "by_kind": dict(sorted(kinds.items())),
            "examples": examples,
            "kinds_explained": ERROR_KINDS,
        },
        "cost": {
            "gpus_per_replica": cost.gpus_per_replica,
            "gpu_seconds": _r(gpu_s, 3),
            "price_per_gpu_hour": price,
            "cost": _r(spent, 6),
            "cost_per_million_output_tokens": per_million(output_tokens),
            "cost_per_million_tokens": per_million(output_tokens + prompt_tokens),
        },
        "slo_ttft_s": slo_ttft,
        "slo_attainment": (
            _r(sum(1 for r in ok if (t := r.ttft) is not None and t <= slo_ttft) / len(measured), 4)
            if slo_ttft is not None and measured
            else None
        ),
        "goodput": goodput(measured, slos, window) if slos else None,
        "ttft_cdf_s": _cdf([t for r in ok if (t := r.ttft) is not None]),
        "notes": all_notes,
        "timeseries": _timeseries(records, end, warmup, cost),
    }
    if include_records:
        report["records"] = [_record(r) for r in records]
    return report


def _cdf(values: list[float]) -> list[float | None]:
    """The 0th to 100th percentiles of ``values`` (101 points; empty when there are none)."""
    ordered = sorted(values)
    return [_r(percentile(ordered, q)) for q in range(101)] if ordered else []


REQUEST_COLUMNS = (
    "index", "status", "warmup", "scheduled_s", "sent_s", "lag_s", "first_token_s", "finished_s", "ttft_s",
    "tpot_s", "itl_max_s", "e2e_s", "prompt_tokens", "max_tokens", "output_tokens", "meets_slos", "detail",
)  # fmt: skip


def _request_rows(records: Sequence[RequestRecord], slos: Slos) -> Iterator[list[Any]]:
    for rec in records:
        ok = rec.ok
        good = all(meets(rec, slos).values()) if slos else None
        yield [
            rec.index, "ok" if ok else (rec.error or "incomplete"), int(rec.warmup), _r(rec.scheduled), _r(rec.sent),
            _r(rec.lag), _r(rec.first_token), _r(rec.finished), _r(rec.ttft), _r(rec.tpot),
            _r(rec.max_itl) if ok and rec.chunks > 1 else None, _r(rec.e2e), rec.prompt_tokens, rec.max_tokens,
            rec.output_tokens, "" if good is None else int(good), rec.detail or "",
        ]  # fmt: skip


def write_requests_csv(records: Sequence[RequestRecord], path: str | Path, slos: Slos | None = None) -> Path:
    """One row per request (``REQUEST_COLUMNS``; times in seconds from the run's start); returns the path.

    ``meets_slos`` is 1 or 0 when SLOs were given, else empty; ``warmup`` rows are left out of every figure.
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(REQUEST_COLUMNS)
        writer.writerows(["" if v is None else v for v in row] for row in _request_rows(records, slos or Slos()))
    return out


def _flatten(prefix: str, value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _flatten(f"{prefix}.{key}" if prefix else str(key), inner)
    elif isinstance(value, list | tuple):
        return  # series (time series, CDF, notes) have their own homes: the JSON and the plot
    else:
        yield prefix, value


_NOT_SUMMARY = {"records", "timeseries", "ttft_cdf_s", "notes", "errors.kinds_explained", "engine_metrics.series"}


def summary_rows(report: dict[str, Any]) -> list[tuple[str, Any]]:
    """The report's scalar figures as ``(dotted.name, value)`` rows, in the report's order."""
    rows = []
    for key, value in report.items():
        if key in _NOT_SUMMARY:
            continue
        rows += [(k, v) for k, v in _flatten(key, value) if not any(k.startswith(n + ".") for n in _NOT_SUMMARY)]
    return rows


def summary_path(requests_csv: str | Path) -> Path:
    """Where the summary CSV goes next to the per-request one: ``r.csv`` -> ``r-summary.csv``."""
    path = Path(requests_csv)
    return path.with_name(f"{path.stem}-summary{path.suffix or '.csv'}")


def write_summary_csv(report: dict[str, Any], path: str | Path) -> Path:
    """``metric,value`` rows of the report's scalar figures (``summary_rows``); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(("metric", "value"))
        writer.writerows((k, "" if v is None else v) for k, v in summary_rows(report))
    return out


def write_json(report: dict[str, Any], path: str | Path) -> Path:
    """Write ``report`` to ``path`` (parent folders created); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    return out


def replicas_informative(rows: Sequence[dict[str, Any]]) -> bool:
    """A replicas panel is worth drawing only when there is more than one engine or the count changes."""
    known = {r["replicas"] for r in rows if r["replicas"] is not None}
    return len(known) > 1 or any(v > 1 for v in known)


def write_png(report: dict[str, Any], path: str | Path, *, title: str | None = None) -> Path:
    """Plot the run (matplotlib, Agg backend); returns the path.

    Panels over time: load (sent/s, in flight), throughput (output tok/s and completed req/s), inter-token
    time (p50/p95 TPOT of requests finishing each second), p95 TTFT (with the SLO), replicas (only when there
    is more than one or the count changes), engine metrics when the report has them; then the TTFT CDF.
    """
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    rows = report["timeseries"]
    t = [r["t"] + 0.5 for r in rows]
    nan = math.nan

    def ms(key: str) -> list[float]:
        return [nan if r.get(key) is None else r[key] * 1e3 for r in rows]

    engine = report.get("engine_metrics") or {}
    series = engine.get("series") or {}
    show_replicas = replicas_informative(rows)
    names = ["load", "throughput", "itl", "ttft"] + (["replicas"] if show_replicas else []) + (
        ["engine"] if series else []
    )  # fmt: skip
    fig = plt.figure(figsize=(10, 2.3 * (len(names) + 1.3)), constrained_layout=True)
    grid = fig.add_gridspec(len(names) + 1, 1, height_ratios=[1.0] * len(names) + [1.3])
    axes: dict[str, Any] = {}
    for i, name in enumerate(names):
        axes[name] = fig.add_subplot(grid[i], sharex=axes.get("load"))
    ax = axes["load"]
    ax.step(t, [r["sent"] for r in rows], where="mid", color="tab:blue", label="load (requests sent/s)")
    ax.plot(t, [r["in_flight"] for r in rows], color="tab:orange", label="in flight")
    ax.set_ylabel("requests")
    ax.legend(loc="upper right", fontsize="small")
    ax = axes["throughput"]
    ax.plot(t, [r.get("output_tokens_per_s") or 0 for r in rows], color="tab:purple", label="output tok/s")
    ax.set_ylabel("tok/s")
    ax.set_ylim(bottom=0)
    ax2 = ax.twinx()
    ax2.step(t, [r["completed"] for r in rows], where="mid", color="tab:green", label="completed req/s")
    ax2.set_ylabel("req/s")
    ax2.set_ylim(bottom=0)
    ax.legend(handles=[*ax.get_legend_handles_labels()[0], *ax2.get_legend_handles_labels()[0]], loc="upper left",
              fontsize="small")  # fmt: skip
    ax = axes["itl"]
    ax.plot(t, ms("tpot_p50_s"), marker=".", color="tab:cyan", label="p50 TPOT (mean inter-token time)")
    ax.plot(t, ms("tpot_p95_s"), marker=".", color="tab:blue", label="p95 TPOT, requests ending that second")
    good = report.get("goodput") or {}
    for key, color in (("itl", "black"), ("tpot", "grey")):
        limit = (good.get("slos_s") or {}).get(key)
        if limit is not None:
            ax.axhline(limit * 1e3, color=color, linestyle="--", linewidth=1, label=f"{key} SLO {limit * 1e3:g} ms")
    ax.set_ylabel("inter-token (ms)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", fontsize="small")
    ax = axes["ttft"]
    ax.plot(t, ms("ttft_p95_s"), marker=".", color="tab:red", label="p95 TTFT of requests sent that second")
    slo = report.get("slo_ttft_s")
    if slo is not None:
        ax.axhline(slo * 1e3, color="black", linestyle="--", linewidth=1, label=f"SLO {slo * 1e3:g} ms")
    ax.set_ylabel("p95 TTFT (ms)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", fontsize="small")
    if show_replicas:
        ax = axes["replicas"]
        replicas = [r["replicas"] for r in rows]
        ax.step(t, [nan if v is None else v for v in replicas], where="mid", color="tab:green")
        ax.set_ylim(0, max(v for v in replicas if v is not None) * 1.25 + 0.5)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("replicas")
    if series:
        _plot_engine(axes["engine"], series, report)
    axes[names[-1]].set_xlabel("seconds since start")
    warmup = report.get("warmup_s") or 0
    for name in names:
        axes[name].grid(alpha=0.3)
        if warmup > 0:
            axes[name].axvspan(0, warmup, color="grey", alpha=0.15, label="_warm-up")
    if warmup > 0:
        axes["load"].text(warmup / 2, 0.95, "warm-up", ha="center", va="top", fontsize="small",
                          transform=axes["load"].get_xaxis_transform())  # fmt: skip
    ax = fig.add_subplot(grid[len(names)])
    cdf = report.get("ttft_cdf_s") or []
    if cdf:
        ax.plot([v * 1e3 for v in cdf], [q / 100 for q in range(len(cdf))], color="tab:red")
        if slo is not None:
            ax.axvline(slo * 1e3, color="black", linestyle="--", linewidth=1, label=f"SLO {slo * 1e3:g} ms")
            ax.legend(loc="lower right", fontsize="small")
    else:
        ax.text(0.5, 0.5, "no successful request", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("TTFT (ms), measured requests")
    ax.set_ylabel("share of requests")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ttft_p95 = report["ttft_s"].get("p95")
    headline = title or f"{report['target']}: {report['workload'].get('description', '')}"
    if ttft_p95 is not None:
        headline += f"\np95 TTFT {ttft_p95 * 1e3:.0f} ms, {report['throughput']['output_tokens_per_s'] or 0:.0f} tok/s"
        if not show_replicas and rows and rows[0]["replicas"] is not None:
            headline += f", {rows[0]['replicas']:g} replica"
    fig.suptitle(headline, fontsize="medium")
    return save(fig, path)


def _plot_engine(ax: Any, series: dict[str, list[list[float]]], report: dict[str, Any]) -> None:
    """The engine's own gauges over the run (``engine_metrics.series``: name -> [[t, value], ...])."""
    start = report.get("started_at") or 0.0
    right = None
    for name, points in series.items():
        xs = [p[0] - start for p in points]
        ys = [p[1] for p in points]
        if name.endswith(("_perc", "usage", "hit_rate")):  # shares 0..1 on their own axis
            right = right or ax.twinx()
            right.plot(xs, [y * 100 for y in ys], linestyle="--", label=f"{name} (%)")
            right.set_ylim(0, 105)
        else:
            ax.plot(xs, ys, label=name)
    ax.set_ylabel("engine (Prometheus)")
    handles = ax.get_legend_handles_labels()[0] + (right.get_legend_handles_labels()[0] if right else [])
    ax.legend(handles=handles, loc="upper left", fontsize="x-small")


def format_goodput(good: dict[str, Any]) -> list[str]:
    """The goodput lines of the summary: good req/s and tok/s, then attainment per SLO and of all."""
    slos = good["slos_s"]
    head = f"{'SLO':14}{'limit':>9}{'attained':>10}"
    lines = [head]
    for metric, limit in slos.items():
        att = good["attainment_by_slo"].get(metric)
        lines.append(f"{metric:14}{format_ms(limit):>6} ms{'-' if att is None else f'{att:.1%}':>10}")
    att = good["attainment"]
    lines.append(f"{'all of them':14}{'':>9}{'-' if att is None else f'{att:.1%}':>10}")
    if good["requests_per_s"] is not None:
        lines.append(
            f"Goodput (requests meeting every SLO): {good['requests_per_s']:.2f} req/s, "
            f"{good['output_tokens_per_s']:.1f} output tokens/s ({good['good_requests']} of "
            f"{good['measured_requests']} measured requests)"
        )
    return lines


def format_summary(report: dict[str, Any]) -> str:
    """A short human-readable summary of ``report``."""
    req = report["requests"]
    thr = report["throughput"]
    lines = [
        f"Target {report['target']} ({report['model'] or 'model not named'}): "
        f"{report['workload'].get('description', '')}",
        f"Status: {report['status']}" + (f" ({report['error']})" if report["error"] else ""),
        f"Requests: {req['sent']} sent of {req['scheduled']} scheduled; measured {req['measured']} "
        f"({req['warmup_excluded']} in warm-up excluded): {req['succeeded']} succeeded, {req['failed']} failed",
        f"{'':14}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}  (ms)",
    ]
    for name, key in (("TTFT", "ttft_s"), ("ITL", "itl_s"), ("TPOT", "tpot_s"), ("end-to-end", "e2e_s")):
        s = report[key]
        lines.append(
            f"{name:14}{format_ms(s['p50']):>9}{format_ms(s['p95']):>9}{format_ms(s['p99']):>9}{format_ms(s['max']):>9}"
        )
    lag = report["schedule_lag_s"]
    lines.append(
        f"{'schedule lag':14}{format_ms(lag['p50']):>9}{'':>9}{format_ms(lag['p99']):>9}{format_ms(lag['max']):>9}"
    )
    if thr["requests_per_s"] is not None:
        lines.append(
            f"Throughput: {thr['requests_per_s']:.2f} req/s, {thr['output_tokens_per_s']:.1f} output tokens/s "
            f"over {report['window']['seconds']:.1f}s"
        )
    errors = report["errors"]
    if errors["total"]:
        kinds = ", ".join(f"{k} {n}" for k, n in errors["by_kind"].items())
        lines.append(f"Errors: {errors['total']} ({kinds})")
        lines += [f"  {k}: {v}" for k, v in errors["examples"].items()]
    cost = report["cost"]
    if cost["gpu_seconds"] is not None:
        line = f"GPU-seconds: {cost['gpu_seconds']:.1f}"
        if cost["cost"] is not None:
            per_m = cost["cost_per_million_output_tokens"]
            line += f", cost {cost['cost']:.4f} at {cost['price_per_gpu_hour']:g}/GPU-hour"
            line += f", {per_m:.4f} per million output tokens" if per_m is not None else ""
        lines.append(line)
    good = report.get("goodput")
    if good:
        lines += format_goodput(good)
    engine = report.get("engine_metrics") or {}
    if engine.get("summary"):
        lines.append(f"Engine metrics from {engine['prometheus_url']} (mean / max over the run):")
        lines += [f"  {k}: {v['mean']:.3g} / {v['max']:.3g}" for k, v in engine["summary"].items()]
    lines += [f"Note: {n}" for n in report["notes"]]
    return "\n".join(lines)
