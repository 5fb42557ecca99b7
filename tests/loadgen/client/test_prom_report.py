"""The engine-metrics queries and the reading of Prometheus' answers, without a server."""

from __future__ import annotations

import pytest

from loadgen.client.prom_report import PrometheusError, parse_range, queries, summarize


def test_queries_use_the_engines_names_and_the_selector() -> None:
    q = queries('namespace="ml"')
    assert q["vllm:num_requests_waiting"] == 'sum(vllm:num_requests_waiting{namespace="ml"})'
    assert "vllm:gpu_cache_usage_perc" in q["vllm:kv_cache_usage_perc"]  # before vLLM 0.9.2
    assert q["vllm:prefix_cache_hit_rate"] == (
        'sum(rate(vllm:prefix_cache_hits_total{namespace="ml"}[1m])) / '
        'sum(rate(vllm:prefix_cache_queries_total{namespace="ml"}[1m]))'
    )
    assert queries()["tgi_queue_size"] == "sum(tgi_queue_size)"
    # SGLang's and llama.cpp's queue and running requests, under their own names.
    assert queries('job="x"')["sglang:num_queue_reqs"] == 'sum(sglang:num_queue_reqs{job="x"})'
    assert queries()["sglang:token_usage"] == "avg(sglang:token_usage)"
    assert queries()["llamacpp:requests_deferred"] == "sum(llamacpp:requests_deferred)"
    assert queries()["llamacpp:requests_processing"] == "sum(llamacpp:requests_processing)"


def test_answers_are_read_with_nan_points_dropped_and_errors_named() -> None:
    answer = {"status": "success", "data": {"result": [{"values": [[10, "1"], [12, "NaN"], [14, "3"]]}]}}
    points = parse_range(answer)
    assert points == [[10.0, 1.0], [14.0, 3.0]]
    assert parse_range({"status": "success", "data": {"result": []}}) == []
    assert summarize({"w": points, "empty": []}) == {"w": {"mean": 2.0, "max": 3.0, "last": 3.0}}
    with pytest.raises(PrometheusError, match="bad_data: parse error"):
        parse_range({"status": "error", "errorType": "bad_data", "error": "parse error"})
