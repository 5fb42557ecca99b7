"""The tick's PromQL and the parsing of Prometheus' answers, with fixed answers and no server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inferscale.promql import (
    FRESHNESS,
    PREFILL_P95_TGI,
    TTFT_DERIVED,
    TTFT_SGLANG,
    QueryOptions,
    ServiceSignals,
    Signal,
    Source,
    answer_problem,
    build_queries,
    parse_signals,
)
from pydantic import ValidationError

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
T = NOW.timestamp()


def sample(value: str, **labels: str) -> dict[str, Any]:
    """One element of an instant-vector `data.result`, as Prometheus' JSON has it."""
    return {"metric": labels, "value": [T, value]}


def fresh(namespace: str, service: str, *, age: float = 1.0, sources: Any = Source) -> list[dict[str, Any]]:
    """The freshness query's answer: when each source was last scraped for the service."""
    return [sample(f"{T - age:.3f}", namespace=namespace, service=service, source=s.value) for s in sources]


VLLM_CHAT: dict[str, list[dict[str, Any]]] = {
    "queue_depth": [sample("4", namespace="team-a", service="chat")],
    "running_requests": [sample("7", namespace="team-a", service="chat")],
    "kv_cache_usage": [sample("0.5", namespace="team-a", service="chat")],
    "ttft_p95_seconds": [sample("0.4875", namespace="team-a", service="chat")],
    TTFT_DERIVED: [],
    "request_rate": [sample("6.02", namespace="team-a", service="chat")],
    "prompt_tokens_rate": [sample("601.5", namespace="team-a", service="chat")],
    "generation_tokens_rate": [sample("300.7", namespace="team-a", service="chat")],
    "queue_time_seconds": [sample("0.2", namespace="team-a", service="chat")],
    "prefill_time_seconds": [sample("0.05", namespace="team-a", service="chat")],
    "prefill_p95_seconds": [sample("0.285", namespace="team-a", service="chat")],
    PREFILL_P95_TGI: [],
    "gpu_utilization_percent": [sample("70", namespace="team-a", service="chat")],
    FRESHNESS: fresh("team-a", "chat"),
}


def parse(results: dict[str, list[dict[str, Any]]], **options: Any) -> dict[tuple[str, str], ServiceSignals]:
    return parse_signals(results, sampled_at=NOW, options=QueryOptions(**options))


def queries(**options: Any) -> dict[str, str]:
    return {q.name: q.promql for q in build_queries(QueryOptions(**options))}


# --- queries ------------------------------------------------------------------------


def test_a_fixed_set_of_queries_each_covering_all_services() -> None:
    built = build_queries()

    assert [q.name for q in built] == [
        "queue_depth",
        "running_requests",
        "kv_cache_usage",
        "ttft_p95_seconds",
        "ttft_p95_seconds_derived",
        "ttft_p95_seconds_sglang",
        "request_rate",
        "prompt_tokens_rate",
        "generation_tokens_rate",
        "queue_time_seconds",
        "prefill_time_seconds",
        "prefill_p95_seconds",
        "prefill_p95_seconds_tgi",
        "gpu_utilization_percent",
        "freshness",
    ]
    assert {q.signal for q in built} == {*Signal, None}
    for query in built:
        assert "by (namespace, service" in query.promql, query.name


def test_every_engine_feeds_the_same_signals() -> None:
    by_name = queries()

    assert by_name["queue_depth"] == (
        "sum by (namespace, service) "
        "(vllm:num_requests_waiting or tgi_queue_size or sglang:num_queue_reqs or llamacpp:requests_deferred)"
    )
    assert by_name["running_requests"] == (
        "sum by (namespace, service) (vllm:num_requests_running or tgi_batch_current_size "
        "or sglang:num_running_reqs or llamacpp:requests_processing)"
    )
    # llama.cpp counts no requests: its services have no request rate.
    assert by_name["request_rate"] == (
        "sum by (namespace, service) (rate(vllm:request_success_total[120s]) or rate(tgi_request_success[120s]) "
        "or rate(sglang:num_requests_total[120s]))"
    )
    assert by_name["prompt_tokens_rate"] == (
        "sum by (namespace, service) (rate(vllm:prompt_tokens_total[120s]) or rate(tgi_request_input_length_sum[120s])"
        " or rate(sglang:prompt_tokens_total[120s]) or rate(llamacpp:prompt_tokens_total[120s]))"
    )
    assert by_name["generation_tokens_rate"] == (
        "sum by (namespace, service) "
        "(rate(vllm:generation_tokens_total[120s]) or rate(tgi_request_generated_tokens_sum[120s]) "
        "or rate(sglang:generation_tokens_total[120s]) or rate(llamacpp:tokens_predicted_total[120s]))"
    )


def test_ttft_is_measured_for_vllm_and_derived_for_tgi() -> None:
    by_name = queries()

    assert by_name["ttft_p95_seconds"] == (
        "histogram_quantile(0.95, sum by (namespace, service, le) "
        "(rate(vllm:time_to_first_token_seconds_bucket[120s])))"
    )
    assert by_name["ttft_p95_seconds_derived"] == (
        "histogram_quantile(0.95, sum by (namespace, service, le) (rate(tgi_request_queue_duration_bucket[120s])))"
        " + histogram_quantile(0.95, sum by (namespace, service, le) "
        '(rate(tgi_batch_inference_duration_bucket{method="prefill"}[120s])))'
    )
    # SGLang's histogram has buckets of its own (0.1 .. 400 s), so its p95 is a query of its own.
    assert by_name["ttft_p95_seconds_sglang"] == (
        "histogram_quantile(0.95, sum by (namespace, service, le) "
        "(rate(sglang:time_to_first_token_seconds_bucket[120s])))"
    )


def test_queue_and_prefill_time_are_means_over_the_window_for_both_engines() -> None:
    by_name = queries()

    # sum(rate(_sum)) / sum(rate(_count)) per service: exact whatever the buckets, and the
    # replicas' requests are pooled (not a mean of per-replica means).
    assert by_name["queue_time_seconds"] == (
        "sum by (namespace, service) "
        "(rate(vllm:request_queue_time_seconds_sum[120s]) or rate(tgi_request_queue_duration_sum[120s]) "
        "or rate(sglang:queue_time_seconds_sum[120s]))"
        " / sum by (namespace, service) "
        "(rate(vllm:request_queue_time_seconds_count[120s]) or rate(tgi_request_queue_duration_count[120s]) "
        "or rate(sglang:queue_time_seconds_count[120s]))"
    )
    assert by_name["prefill_time_seconds"] == (
        "sum by (namespace, service) (rate(vllm:request_prefill_time_seconds_sum[120s]) "
        'or rate(tgi_batch_inference_duration_sum{method="prefill"}[120s]))'
        " / sum by (namespace, service) (rate(vllm:request_prefill_time_seconds_count[120s]) "
        'or rate(tgi_batch_inference_duration_count{method="prefill"}[120s]))'
    )


def test_prefill_p95_has_one_query_per_engine() -> None:
    by_name = queries()

    assert by_name["prefill_p95_seconds"] == (
        "histogram_quantile(0.95, sum by (namespace, service, le) "
        "(rate(vllm:request_prefill_time_seconds_bucket[120s])))"
    )
    # TGI's is the same term its derived TTFT adds to the queue's p95.
    assert by_name["prefill_p95_seconds_tgi"] == (
        "histogram_quantile(0.95, sum by (namespace, service, le) "
        '(rate(tgi_batch_inference_duration_bucket{method="prefill"}[120s])))'
    )
    assert by_name["prefill_p95_seconds_tgi"] in by_name["ttft_p95_seconds_derived"]
    # Never decode batches, whose many short steps would drag the figures down.
    assert 'method="decode"' not in by_name["prefill_time_seconds"] + by_name["prefill_p95_seconds_tgi"]


def test_kv_cache_query_reads_both_vllm_names_preferring_the_new_one() -> None:
    assert queries()["kv_cache_usage"] == (
        "avg by (namespace, service) (vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc or sglang:token_usage)"
    )


def test_queries_follow_the_window_quantile_and_label_names() -> None:
    by_name = queries(window_seconds=30, ttft_quantile=0.99, service_label="inferscale_io_service")

    assert "[30s]" in by_name["request_rate"] and "[120s]" not in by_name["request_rate"]
    assert by_name["ttft_p95_seconds"].startswith("histogram_quantile(0.99, ")
    assert by_name["prefill_p95_seconds"].startswith("histogram_quantile(0.99, ")
    assert by_name["prefill_p95_seconds_tgi"].startswith("histogram_quantile(0.99, ")
    assert "[30s]" in by_name["queue_time_seconds"] and "[120s]" not in by_name["prefill_time_seconds"]
    assert "sum by (namespace, inferscale_io_service)" in by_name["prefill_time_seconds"]
    assert "by (namespace, inferscale_io_service)" in by_name["queue_depth"]
    assert "min by (namespace, inferscale_io_service)" in by_name["freshness"]


def test_gpu_query_joins_dcgm_to_engine_pods() -> None:
    assert queries()["gpu_utilization_percent"] == (
        'avg by (namespace, service) (DCGM_FI_DEV_GPU_UTIL{pod!=""} * on (namespace, pod) group_left (service) '
        "group by (namespace, pod, service) (vllm:num_requests_running or tgi_batch_current_size "
        "or sglang:num_running_reqs or llamacpp:requests_processing))"
    )


def test_gpu_query_maps_dcgm_labels_exported_through_a_service_monitor() -> None:
    gpu = queries(dcgm_namespace_label="exported_namespace", dcgm_pod_label="exported_pod")["gpu_utilization_percent"]

    assert 'label_replace(DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}, "pod", "$1", "exported_pod", "(.+)")' in gpu
    assert '"namespace", "$1", "exported_namespace", "(.+)"' in gpu


def test_freshness_takes_the_samples_own_timestamps_per_source() -> None:
    freshness = queries()["freshness"]

    # timestamp() of anything but a plain selector is the evaluation time, not the sample's.
    assert (
        "min by (namespace, service) (timestamp(vllm:num_requests_waiting) or timestamp(tgi_queue_size) "
        "or timestamp(sglang:num_queue_reqs) or timestamp(llamacpp:requests_deferred))" in freshness
    )
    assert "timestamp(vllm:num_requests_waiting or" not in freshness
    assert 'timestamp(DCGM_FI_DEV_GPU_UTIL{pod!=""}) * on (namespace, pod) group_left (service)' in freshness
    assert '"source", "engine"' in freshness and '"source", "dcgm"' in freshness


@pytest.mark.parametrize("field", ["service_label", "namespace_label", "pod_label", "dcgm_pod_label"])
@pytest.mark.parametrize("bad", ["inferscale.io/service", "9lives", "__name__", 'a"b'])
def test_label_names_that_would_break_the_query_are_refused(field: str, bad: str) -> None:
    with pytest.raises(ValidationError, match="is not a Prometheus label name"):
        QueryOptions(**{field: bad})


# --- parsing ------------------------------------------------------------------------


def test_vllm_answers_become_signals() -> None:
    chat = parse(VLLM_CHAT)[("team-a", "chat")]

    assert chat == ServiceSignals(
        namespace="team-a",
        service="chat",
        sampled_at=NOW,
        queue_depth=4,
        running_requests=7,
        kv_cache_usage=0.5,
        ttft_p95_seconds=0.4875,
        ttft_derived=False,
        request_rate=6.02,
        prompt_tokens_rate=601.5,
        generation_tokens_rate=300.7,
        queue_time_seconds=0.2,
        prefill_time_seconds=0.05,
        prefill_p95_seconds=0.285,
        gpu_utilization_percent=70,
        observed_at={signal: NOW - timedelta(seconds=1) for signal in Signal},
    )
    assert chat.key == ("team-a", "chat")
    assert chat.age_seconds(Signal.QUEUE_DEPTH) == pytest.approx(1.0)
    assert chat.problems() == []


def test_tgi_ttft_is_marked_derived_and_its_missing_kv_cache_is_missing() -> None:
    results = {
        "queue_depth": [sample("6", namespace="b", service="tgi")],
        "ttft_p95_seconds": [],
        TTFT_DERIVED: [sample("0.61", namespace="b", service="tgi")],
        FRESHNESS: fresh("b", "tgi", sources=[Source.ENGINE]),
    }
    tgi = parse(results)[("b", "tgi")]

    assert tgi.ttft_p95_seconds == 0.61
    assert tgi.ttft_derived is True
    assert tgi.kv_cache_usage is None
    assert Signal.KV_CACHE_USAGE in tgi.missing


def test_sglang_ttft_is_measured_and_llamacpp_has_none() -> None:
    results = {
        "queue_depth": [sample("3", namespace="b", service="sgl"), sample("5", namespace="b", service="cpp")],
        "running_requests": [sample("8", namespace="b", service="sgl"), sample("4", namespace="b", service="cpp")],
        "ttft_p95_seconds": [],
        TTFT_DERIVED: [],
        TTFT_SGLANG: [sample("0.35", namespace="b", service="sgl")],
        FRESHNESS: fresh("b", "sgl", sources=[Source.ENGINE]) + fresh("b", "cpp", sources=[Source.ENGINE]),
    }
    got = parse(results)
    sgl, cpp = got[("b", "sgl")], got[("b", "cpp")]

    assert (sgl.ttft_p95_seconds, sgl.ttft_derived) == (0.35, False)
    assert (cpp.queue_depth, cpp.running_requests) == (5, 4)
    assert (cpp.ttft_p95_seconds, cpp.ttft_derived) == (None, None)
    assert Signal.TTFT_P95_SECONDS in cpp.missing


def test_tgi_queue_and_prefill_times_come_from_the_same_signal_names() -> None:
    results = {
        "queue_time_seconds": [sample("0.31", namespace="b", service="tgi")],
        "prefill_time_seconds": [sample("0.048", namespace="b", service="tgi")],
        "prefill_p95_seconds": [],
        PREFILL_P95_TGI: [sample("0.0569", namespace="b", service="tgi")],
        TTFT_DERIVED: [sample("0.61", namespace="b", service="tgi")],
        FRESHNESS: fresh("b", "tgi", sources=[Source.ENGINE]),
    }
    tgi = parse(results)[("b", "tgi")]

    assert (tgi.queue_time_seconds, tgi.prefill_time_seconds, tgi.prefill_p95_seconds) == (0.31, 0.048, 0.0569)
    assert tgi.ttft_derived is True
    assert not {Signal.QUEUE_TIME_SECONDS, Signal.PREFILL_TIME_SECONDS, Signal.PREFILL_P95_SECONDS} & tgi.missing


def test_a_service_moving_between_engines_reports_the_worse_prefill_p95() -> None:
    results = {
        "prefill_p95_seconds": [sample("0.285", namespace="b", service="s")],
        PREFILL_P95_TGI: [sample("0.09", namespace="b", service="s"), sample("0.7", namespace="b", service="t")],
        FRESHNESS: fresh("b", "s") + fresh("b", "t"),
    }
    got = parse(results)

    assert got[("b", "s")].prefill_p95_seconds == 0.285
    assert got[("b", "t")].prefill_p95_seconds == 0.7
    # The prefill answers say nothing about TTFT.
    assert got[("b", "t")].ttft_derived is None


def test_nothing_finished_in_the_window_leaves_the_means_missing_not_failed() -> None:
    # An idle engine: rate(_sum) / rate(_count) is 0/0, which Prometheus sends as "NaN";
    # its p95s are NaN too. The load signals still count.
    idle = {
        "queue_time_seconds": "NaN",
        "prefill_time_seconds": "NaN",
        "prefill_p95_seconds": "NaN",
        "ttft_p95_seconds": "NaN",
        "request_rate": "0",
    }
    results = {**VLLM_CHAT, **{name: [sample(v, namespace="team-a", service="chat")] for name, v in idle.items()}}
    results[PREFILL_P95_TGI] = [sample("NaN", namespace="team-a", service="chat")]
    chat = parse(results)[("team-a", "chat")]

    assert chat.queue_time_seconds is None and chat.prefill_time_seconds is None and chat.prefill_p95_seconds is None
    assert chat.missing == {
        Signal.QUEUE_TIME_SECONDS,
        Signal.PREFILL_TIME_SECONDS,
        Signal.PREFILL_P95_SECONDS,
        Signal.TTFT_P95_SECONDS,
    }
    assert chat.request_rate == 0 and chat.queue_depth == 4
    assert "queue_time_seconds is missing" in chat.problems()


def test_queue_and_prefill_times_go_stale_with_their_engine() -> None:
    results = {**VLLM_CHAT, FRESHNESS: fresh("team-a", "chat", sources=[Source.DCGM])}
    chat = parse(results)[("team-a", "chat")]

    assert {Signal.QUEUE_TIME_SECONDS, Signal.PREFILL_TIME_SECONDS, Signal.PREFILL_P95_SECONDS} <= chat.stale
    assert chat.queue_time_seconds is None and chat.prefill_p95_seconds is None
    assert "prefill_time_seconds is stale (its series are gone)" in chat.problems()


def test_a_service_moving_between_engines_reports_the_worse_ttft() -> None:
    results = {
        "ttft_p95_seconds": [sample("0.4", namespace="b", service="s")],
        TTFT_DERIVED: [sample("0.9", namespace="b", service="s")],
        FRESHNESS: fresh("b", "s"),
    }
    signals = parse(results)[("b", "s")]

    assert (signals.ttft_p95_seconds, signals.ttft_derived) == (0.9, True)


@pytest.mark.parametrize("raw", ["NaN", "+Inf", "-Inf"])
def test_nan_and_infinite_values_are_missing(raw: str) -> None:
    results = {**VLLM_CHAT, "ttft_p95_seconds": [sample(raw, namespace="team-a", service="chat")]}
    chat = parse(results)[("team-a", "chat")]

    assert chat.ttft_p95_seconds is None and chat.ttft_derived is None
    assert chat.missing == {Signal.TTFT_P95_SECONDS}
    assert chat.problems() == ["ttft_p95_seconds is missing"]


def test_absent_series_are_missing() -> None:
    results = {
        "queue_depth": [sample("2", namespace="c", service="partial")],
        FRESHNESS: fresh("c", "partial", sources=[Source.ENGINE]),
    }
    partial = parse(results)[("c", "partial")]

    assert partial.queue_depth == 2
    assert partial.missing == set(Signal) - {Signal.QUEUE_DEPTH}
    assert partial.stale == frozenset()


def test_samples_older_than_the_allowed_age_are_stale_and_not_used() -> None:
    results = {**VLLM_CHAT, FRESHNESS: fresh("team-a", "chat", age=95)}
    chat = parse(results, max_sample_age_seconds=60)[("team-a", "chat")]

    assert chat.stale == set(Signal)
    assert chat.queue_depth is None and chat.ttft_p95_seconds is None and chat.ttft_derived is None
    assert chat.age_seconds(Signal.QUEUE_DEPTH) == pytest.approx(95)
    assert chat.problems([Signal.QUEUE_DEPTH]) == ["queue_depth is stale (last sampled 95s ago)"]


def test_each_source_has_its_own_age() -> None:
    results = {
        **VLLM_CHAT,
        FRESHNESS: fresh("team-a", "chat", sources=[Source.ENGINE])
        + fresh("team-a", "chat", age=300, sources=[Source.DCGM]),
    }
    chat = parse(results)[("team-a", "chat")]

    assert chat.stale == {Signal.GPU_UTILIZATION_PERCENT}
    assert chat.gpu_utilization_percent is None
    assert chat.queue_depth == 4
    assert chat.scraped_at(Source.ENGINE) == NOW - timedelta(seconds=1)
    assert chat.scraped_at(Source.DCGM) == NOW - timedelta(seconds=300)


def test_values_whose_scrapes_are_gone_are_stale() -> None:
    # After a target dies, rate() still answers for a window, but timestamp() finds nothing.
    results = {**VLLM_CHAT, FRESHNESS: fresh("team-a", "chat", sources=[Source.DCGM])}
    chat = parse(results)[("team-a", "chat")]

    assert chat.request_rate is None
    assert Signal.REQUEST_RATE in chat.stale
    assert "request_rate is stale (its series are gone)" in chat.problems()
    assert chat.gpu_utilization_percent == 70


def test_series_without_namespace_or_service_are_ignored() -> None:
    results = {
        "queue_depth": [
            sample("50", namespace="team-a"),
            sample("50", service="orphan"),
            sample("50", namespace="team-a", service=""),
            sample("3", namespace="team-a", service="chat"),
        ],
    }

    assert list(parse(results)) == [("team-a", "chat")]


def test_a_service_seen_only_in_freshness_is_reported_with_everything_missing() -> None:
    signals = parse({FRESHNESS: fresh("a", "s", sources=[Source.ENGINE])})[("a", "s")]

    assert signals.missing == set(Signal)
    assert signals.observed_at[Signal.QUEUE_DEPTH] == NOW - timedelta(seconds=1)
    assert Signal.GPU_UTILIZATION_PERCENT not in signals.observed_at


def test_nothing_observed_marks_every_signal_missing() -> None:
    signals = ServiceSignals.nothing_observed("a", "s", sampled_at=NOW)

    assert signals.missing == set(Signal)
    assert all(signals.value(signal) is None for signal in Signal)
    assert signals.scraped_at(Source.ENGINE) is None
    assert len(signals.problems()) == len(Signal)


def test_labels_are_read_under_the_configured_names() -> None:
    results = {"queue_depth": [sample("3", ns="team-a", isvc="chat")]}

    assert list(parse(results, namespace_label="ns", service_label="isvc")) == [("team-a", "chat")]


def test_sampled_at_must_carry_a_timezone() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        parse_signals(VLLM_CHAT, sampled_at=NOW.replace(tzinfo=None))


GOOD = {"metric": {"namespace": "team-a", "service": "chat"}, "value": [T, "1"]}


@pytest.mark.parametrize(
    ("answer", "what"),
    [
        ({"resultType": "vector"}, '{"resultType": "vector"} where a list of samples belongs'),
        ("1", '"1" where a list of samples belongs'),
        ([T, "1"], f"sample 1 of 2: it is {T}, not an object"),  # a scalar's shape
        ([GOOD, {**GOOD, "metric": "team-a/chat"}], 'sample 2 of 2: its metric is "team-a/chat", not an object'),
        ([{"value": [T, "1"]}], "sample 1 of 1: its metric is null, not an object"),
        ([{**GOOD, "metric": {"namespace": "team-a", "service": 7}}], "its label service is 7, not a string"),
        ([{**GOOD, "value": "1"}], 'its value is "1", not a [timestamp, "number"] pair'),
        ([{**GOOD, "value": [T]}], f'its value is [{T}], not a [timestamp, "number"] pair'),
        ([{**GOOD, "value": [T, "1", "2"]}], "not a [timestamp, "),
        ([{**GOOD, "value": ["now", "1"]}], 'its timestamp is "now", not a number'),
        ([{**GOOD, "value": [True, "1"]}], "its timestamp is true, not a number"),
        ([{**GOOD, "value": [T, "lots"]}], 'its value is "lots", not a number in a string'),
        ([{**GOOD, "value": [T, 3]}], "its value is 3, not a number in a string"),
        ([{**GOOD, "value": [T, None]}], "its value is null, not a number in a string"),
        ([{**GOOD, "value": [T, "x" * 100]}], 'its value is "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..., not'),
        ([GOOD, "a", GOOD, 5], 'sample 2 of 4: it is "a", not an object (1 more malformed)'),
    ],
)
def test_a_malformed_answer_is_refused_naming_the_query_and_what_is_wrong(answer: Any, what: str) -> None:
    # Every other answer is well formed: the one bad answer alone spoils the tick.
    with pytest.raises(ValueError) as refused:
        parse({**VLLM_CHAT, "ttft_p95_seconds": answer})
    message = str(refused.value)
    assert message.startswith("query ttft_p95_seconds answered ")
    assert what in message


@pytest.mark.parametrize(
    ("scraped", "what"),
    [
        ("1e300", "answered 1e+300, which is not a Unix time"),
        (f"{T + 3600:.3f}", "answered a scrape at 2026-"),
        (f"{T + 3600:.3f}", "after the query's own time"),
    ],
)
def test_a_freshness_answer_that_is_no_scrape_time_is_refused(scraped: str, what: str) -> None:
    # Stale would be a lie (the engine may be fine), and a time in the future would keep it fresh for good.
    results = {**VLLM_CHAT, "freshness": [sample(scraped, namespace="team-a", service="chat", source="engine")]}
    with pytest.raises(ValueError, match="query freshness ") as refused:
        parse(results)
    assert what in str(refused.value)


def test_a_malformed_pod_load_answer_is_refused() -> None:
    from inferscale.promql import parse_pod_load

    with pytest.raises(ValueError, match=r"query pod_load answered sample 1 of 1: its metric is \[\], not an object"):
        parse_pod_load([{"metric": [], "value": [T, "2"]}])


def test_well_formed_answers_have_no_problem() -> None:
    assert all(answer_problem(answer) is None for answer in VLLM_CHAT.values())
    assert answer_problem([]) is None


def test_pod_load_query_covers_every_service_in_one_query() -> None:
    from inferscale.promql import parse_pod_load, pod_load_query

    query = pod_load_query()
    assert "sum by (namespace, service, pod)" in query
    assert "vllm:num_requests_running" in query and "tgi_queue_size" in query
    result = [
        {"metric": {"namespace": "a", "service": "s", "pod": "p1"}, "value": [0, "3"]},
        {"metric": {"namespace": "a", "service": "s", "pod": "p2"}, "value": [0, "0"]},
        {"metric": {"namespace": "a", "service": "s", "pod": "p3"}, "value": [0, "NaN"]},
        {"metric": {"namespace": "b", "service": "t", "pod": "q"}, "value": [0, "1.5"]},
        {"metric": {"namespace": "b", "pod": "orphan"}, "value": [0, "9"]},
    ]
    assert parse_pod_load(result) == {("a", "s"): {"p1": 3.0, "p2": 0.0}, ("b", "t"): {"q": 1.5}}


_JSON = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
# Near misses as well as noise: samples whose parts are each right or any JSON at all.
_SAMPLE = st.fixed_dictionaries(
    {},
    optional={
        "metric": st.just({"namespace": "team-a", "service": "chat"}) | _JSON,
        "value": st.tuples(st.just(T) | _JSON, st.sampled_from(["1", "NaN", "+Inf"]) | _JSON).map(list) | _JSON,
    },
)


@settings(deadline=None)  # a shared CI machine can stall one example past hypothesis' 200 ms
@given(answer=st.lists(_SAMPLE | _JSON, max_size=4) | _JSON, query=st.sampled_from(sorted(VLLM_CHAT)))
def test_any_answer_either_parses_or_is_refused_with_its_query_named(answer: Any, query: str) -> None:
    try:
        signals = parse({**VLLM_CHAT, query: answer})
    except ValueError as refused:
        assert str(refused).startswith(f"query {query} answered ")
    else:
        assert answer_problem(answer) is None and ("team-a", "chat") in signals
