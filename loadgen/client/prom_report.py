"""The engine's own view of a run, from Prometheus: requests running and waiting, KV-cache use, prefix hits.

``loadgen run --prometheus-url URL`` asks Prometheus, once the run is over, for these series over the run's
span (``query_range``, a point every ``step`` seconds) and puts them in the report (``engine_metrics``: the
queries, a summary per series and the series themselves, which the PNG draws), for whichever of vLLM, TGI,
SGLang and llama.cpp exported them. The names are the
engines' own (``inferscale.promql`` cites where each is read; the prefix-cache counters are vLLM V1's
``vllm:prefix_cache_queries``/``hits``, in tokens, ``vllm/v1/metrics/loggers.py``). A series no engine
exported (TGI has no prefix-cache counter; an old vLLM has ``vllm:gpu_cache_usage_perc``; llama.cpp's
``requests_deferred`` are its queue) is left out.

Building the queries and reading the answers is pure (``queries``, ``parse_range``, ``summarize``);
``fetch`` is the one function that talks to Prometheus.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import httpx
from inferscale.promql import (
    LLAMACPP_DEFERRED,
    LLAMACPP_PROCESSING,
    SGLANG_QUEUE,
    SGLANG_RUNNING,
    SGLANG_TOKEN_USAGE,
    TGI_BATCH_SIZE,
    TGI_QUEUE_SIZE,
    VLLM_KV_CACHE,
    VLLM_KV_CACHE_OLD,
    VLLM_RUNNING,
    VLLM_WAITING,
)

__all__ = ["PrometheusError", "fetch", "parse_range", "queries", "summarize"]

VLLM_PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
VLLM_PREFIX_HITS = "vllm:prefix_cache_hits_total"


class PrometheusError(Exception):
    """Prometheus could not be reached or refused a query; the message names the URL and the query."""


def queries(selector: str = "", rate_window: str = "1m") -> dict[str, str]:
    """Report name -> PromQL, summed (or averaged, for shares) over the engines ``selector`` matches."""
    sel = selector.strip()
    if sel and not sel.startswith("{"):
        sel = "{" + sel + "}"

    def rate(metric: str) -> str:
        return f"sum(rate({metric}{sel}[{rate_window}]))"

    return {
        "vllm:num_requests_running": f"sum({VLLM_RUNNING}{sel})",
        "vllm:num_requests_waiting": f"sum({VLLM_WAITING}{sel})",
        "vllm:kv_cache_usage_perc": f"avg({VLLM_KV_CACHE}{sel}) or avg({VLLM_KV_CACHE_OLD}{sel})",
        "vllm:prefix_cache_hit_rate": f"{rate(VLLM_PREFIX_HITS)} / {rate(VLLM_PREFIX_QUERIES)}",
        "tgi_batch_current_size": f"sum({TGI_BATCH_SIZE}{sel})",
        "tgi_queue_size": f"sum({TGI_QUEUE_SIZE}{sel})",
        "sglang:num_running_reqs": f"sum({SGLANG_RUNNING}{sel})",
        "sglang:num_queue_reqs": f"sum({SGLANG_QUEUE}{sel})",
        "sglang:token_usage": f"avg({SGLANG_TOKEN_USAGE}{sel})",
        "llamacpp:requests_processing": f"sum({LLAMACPP_PROCESSING}{sel})",
        "llamacpp:requests_deferred": f"sum({LLAMACPP_DEFERRED}{sel})",
    }


def parse_range(answer: Mapping[str, Any]) -> list[list[float]]:
    """``[[t, value], ...]`` of a ``query_range`` answer's one series (NaN points, as 0/0 rates, dropped)."""
    if answer.get("status") != "success":
        raise PrometheusError(f"Prometheus answered {answer.get('errorType')}: {answer.get('error')}")
    result = answer.get("data", {}).get("result", [])
    if not result:
        return []
    points = []
    for t, value in result[0].get("values", []):
        v = float(value)
        if math.isfinite(v):
            points.append([float(t), v])
    return points


def summarize(series: Mapping[str, list[list[float]]]) -> dict[str, dict[str, float]]:
    """Mean, max and last value per series."""
    out = {}
    for name, points in series.items():
        values = [v for _, v in points]
        if values:
            out[name] = {"mean": round(sum(values) / len(values), 6), "max": max(values), "last": values[-1]}
    return out


def fetch(
    url: str, start: float, end: float, *, selector: str = "", step: float = 2.0, timeout: float = 10.0
) -> dict[str, Any]:
    """The report's ``engine_metrics`` for ``[start, end]`` (epoch seconds); raises ``PrometheusError``."""
    asked = queries(selector)
    series: dict[str, list[list[float]]] = {}
    with httpx.Client(base_url=url.rstrip("/"), timeout=timeout) as client:
        for name, promql in asked.items():
            params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
            try:
                response = client.get("/api/v1/query_range", params=params)
                answer = response.json()
            except (httpx.HTTPError, ValueError) as err:
                raise PrometheusError(f"cannot query Prometheus at {url} for {promql}: {err}") from None
            try:
                points = parse_range(answer)
            except PrometheusError as err:
                raise PrometheusError(f"{err} (query {promql})") from None
            if points:
                series[name] = points
    return {
        "prometheus_url": url,
        "selector": selector,
        "queries": asked,
        "summary": summarize(series),
        "series": series,
    }
