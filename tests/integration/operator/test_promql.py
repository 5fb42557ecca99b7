"""The tick's queries against a real Prometheus scraping vLLM, TGI and DCGM exporters.

Each exporter is a target with `namespace`, `service` and `pod` labels, standing in for
the Kubernetes pod relabelling the cluster's Prometheus does. Prometheus scrapes every
second and the queries use a 5 s window, so rates settle once 5 s of samples are in.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from harness.processes import free_port, wait_for
from harness.testing import (
    TGI_DURATION_BUCKETS,
    DcgmExporter,
    Gpu,
    MetricsServer,
    Prometheus,
    TgiExporter,
    Traffic,
    VllmExporter,
)
from inferscale.prometheus import MetricsUnavailable, PrometheusConfig, PrometheusSignals, QueryFailed
from inferscale.promql import QueryOptions, ServiceSignals, Signal

from loadgen.engine.metrics import VLLM_REQUEST_LATENCY_BUCKETS, VLLM_TTFT_BUCKETS

WINDOW = 5
OPTIONS = QueryOptions(window_seconds=WINDOW, max_sample_age_seconds=5)
# dcgm-exporter scraped through a ServiceMonitor without honorLabels: its pod labels
# arrive as exported_namespace / exported_pod.
EXPORTED_OPTIONS = OPTIONS.model_copy(
    update={"dcgm_namespace_label": "exported_namespace", "dcgm_pod_label": "exported_pod"}
)


def p95_within_bucket(buckets: tuple[float, ...], value: float) -> float:
    """What histogram_quantile(0.95) answers when every observation equals `value`."""
    upper_index = bisect.bisect_left(buckets, value)
    lower = buckets[upper_index - 1] if upper_index else 0.0
    return lower + (buckets[upper_index] - lower) * 0.95


@dataclass
class Fleet:
    prometheus: Prometheus
    servers: dict[str, MetricsServer]
    signals: PrometheusSignals

    def fetch(self, **kwargs: Any) -> dict[tuple[str, str], ServiceSignals]:
        return self.signals.fetch_all(now=kwargs.pop("now", datetime.now(UTC)))


ENGINES: dict[str, tuple[dict[str, str], Any]] = {
    # name: (target labels, exporter)
    "chat-0": (
        {"namespace": "team-a", "service": "chat", "pod": "chat-0"},
        VllmExporter(waiting=3, running=5, kv_cache=0.4, traffic=Traffic(requests_per_second=4)),
    ),
    "chat-1": (
        {"namespace": "team-a", "service": "chat", "pod": "chat-1"},
        # Its requests wait longer than chat-0's (0.5 s against 0.2 s) and prefill longer (0.2 s).
        VllmExporter(
            waiting=1,
            running=2,
            kv_cache=0.6,
            traffic=Traffic(requests_per_second=2, queue_seconds=0.5, prefill_seconds=0.2),
        ),
    ),
    # vLLM before 0.9.2: only the old KV-cache name; and no traffic at all.
    "legacy-0": (
        {"namespace": "team-a", "service": "legacy", "pod": "legacy-0"},
        VllmExporter(waiting=0, running=0, kv_cache=0.3, kv_names=("old",)),
    ),
    # vLLM 0.9.2 - 0.10: both names; the new one must win.
    "upgrade-0": (
        {"namespace": "team-b", "service": "upgrade", "pod": "upgrade-0"},
        VllmExporter(kv_cache=0.7, old_kv_cache=0.1, kv_names=("new", "old"), traffic=Traffic(requests_per_second=1)),
    ),
    "tgi-0": (
        {"namespace": "team-b", "service": "tgi-svc", "pod": "tgi-0"},
        TgiExporter(
            queue_size=6,
            batch_size=8,
            traffic=Traffic(requests_per_second=3, prompt_tokens=200, generated_tokens=40),
        ),
    ),
    # Only the waiting gauge is exported: every other signal is missing.
    "partial-0": (
        {"namespace": "team-c", "service": "partial", "pod": "partial-0"},
        VllmExporter(waiting=2, only_waiting=True),
    ),
    # Stopped by a test: its signals must turn stale, then missing.
    "doomed-0": (
        {"namespace": "team-c", "service": "doomed", "pod": "doomed-0"},
        VllmExporter(waiting=9, running=4, kv_cache=0.5, traffic=Traffic(requests_per_second=2)),
    ),
    # A vLLM pod that is not an InferenceService's (no service label): never reported.
    "foreign-0": ({"namespace": "team-a", "pod": "foreign-0"}, VllmExporter(waiting=50, running=50)),
}

GPUS = [
    Gpu(60, "team-a", "chat-0", 0),
    Gpu(80, "team-a", "chat-1", 1),
    Gpu(50, "team-b", "tgi-0", 2),
    Gpu(70, "team-b", "tgi-0", 3),  # tensor parallel: two GPUs in one pod
    Gpu(10, "team-a", "foreign-0", 4),  # a pod that is no service's
    Gpu(99, "", "", 5),  # a GPU no pod holds
]
GPUS_VIA_SERVICE_MONITOR = [
    Gpu(20, "team-a", "chat-0", 0),
    Gpu(40, "team-a", "chat-1", 1),
    Gpu(10, "team-b", "tgi-0", 2),
    Gpu(30, "team-b", "tgi-0", 3),
]


@pytest.fixture(scope="module")
def fleet(start_prometheus: Any) -> Iterator[Fleet]:
    servers = {name: MetricsServer(exporter.render) for name, (_, exporter) in ENGINES.items()}
    servers["dcgm"] = MetricsServer(DcgmExporter(GPUS).render)
    servers["dcgm-sm"] = MetricsServer(DcgmExporter(GPUS_VIA_SERVICE_MONITOR).render)
    scrape_configs = [
        {
            "job_name": "engines",
            "static_configs": [
                {"targets": [servers[name].address], "labels": labels} for name, (labels, _) in ENGINES.items()
            ],
        },
        {"job_name": "dcgm", "honor_labels": True, "static_configs": [{"targets": [servers["dcgm"].address]}]},
        {
            "job_name": "dcgm-servicemonitor",
            "static_configs": [
                {
                    "targets": [servers["dcgm-sm"].address],
                    "labels": {"namespace": "gpu-operator", "pod": "dcgm-exporter-7x2kq", "service": "dcgm-exporter"},
                }
            ],
        },
    ]
    prometheus = start_prometheus(scrape_configs)
    signals = PrometheusSignals(PrometheusConfig(url=prometheus.url, timeout_seconds=10), options=OPTIONS)
    fleet = Fleet(prometheus, servers, signals)

    def settled() -> bool:
        got = fleet.fetch()
        chat, tgi = got.get(("team-a", "chat")), got.get(("team-b", "tgi-svc"))
        return bool(
            chat
            and tgi
            and chat.ttft_p95_seconds is not None
            and chat.gpu_utilization_percent is not None
            and tgi.ttft_p95_seconds is not None
            and tgi.request_rate
        )

    try:
        wait_for("the exporters' signals to reach Prometheus", settled, timeout=30, interval=0.25)
        # rate() extrapolates from the samples it has; let a whole window of them come in.
        time.sleep(WINDOW + 1)
        yield fleet
    finally:
        signals.close()
        for server in servers.values():
            server.stop()


def test_every_service_comes_out_of_one_fixed_set_of_queries(fleet: Fleet) -> None:
    before = fleet.prometheus.self_metric("prometheus_http_requests_total", handler="/api/v1/query")
    got = fleet.fetch()
    after = fleet.prometheus.self_metric("prometheus_http_requests_total", handler="/api/v1/query")

    assert set(got) == {
        ("team-a", "chat"),
        ("team-a", "legacy"),
        ("team-b", "upgrade"),
        ("team-b", "tgi-svc"),
        ("team-c", "partial"),
        ("team-c", "doomed"),
    }
    assert after - before == len(fleet.signals.queries) == 15


def test_vllm_signals_are_summed_over_replicas(fleet: Fleet) -> None:
    chat = fleet.fetch()[("team-a", "chat")]

    assert chat.missing == frozenset() and chat.stale == frozenset(), chat.problems()
    assert chat.queue_depth == 4
    assert chat.running_requests == 7
    assert chat.kv_cache_usage == pytest.approx(0.5)
    # Every TTFT observation is 0.3 s, inside vLLM's (0.25, 0.5] bucket.
    assert chat.ttft_p95_seconds == pytest.approx(p95_within_bucket(VLLM_TTFT_BUCKETS, 0.3))
    assert chat.ttft_derived is False
    assert chat.request_rate == pytest.approx(6, rel=0.15)
    assert chat.prompt_tokens_rate == pytest.approx(600, rel=0.15)
    assert chat.generation_tokens_rate == pytest.approx(300, rel=0.15)
    assert chat.gpu_utilization_percent == pytest.approx(70)
    for signal in Signal:
        age = chat.age_seconds(signal)
        assert age is not None and 0 <= age <= 3, (signal, age)


def test_tgi_signals_have_the_same_names_and_a_derived_ttft(fleet: Fleet) -> None:
    tgi = fleet.fetch()[("team-b", "tgi-svc")]

    assert tgi.queue_depth == 6
    assert tgi.running_requests == 8
    expected_ttft = p95_within_bucket(TGI_DURATION_BUCKETS, 0.2) + p95_within_bucket(TGI_DURATION_BUCKETS, 0.05)
    assert tgi.ttft_p95_seconds == pytest.approx(expected_ttft)
    assert tgi.ttft_derived is True
    assert tgi.request_rate == pytest.approx(3, rel=0.15)
    assert tgi.prompt_tokens_rate == pytest.approx(600, rel=0.15)
    assert tgi.generation_tokens_rate == pytest.approx(120, rel=0.15)
    assert tgi.gpu_utilization_percent == pytest.approx(60)
    # TGI exports no KV-cache gauge.
    assert tgi.kv_cache_usage is None
    assert tgi.missing == {Signal.KV_CACHE_USAGE}


def test_queue_wait_and_prefill_are_means_over_the_requests_of_every_replica(fleet: Fleet) -> None:
    chat, tgi = (fleet.fetch()[key] for key in (("team-a", "chat"), ("team-b", "tgi-svc")))

    # vLLM: 4 req/s waiting 0.2 s and 2 req/s waiting 0.5 s is 0.3 s per request (a mean of
    # the replicas' means would say 0.35); prefill 0.05 s and 0.2 s is 0.1 s (0.125). Exact
    # from _sum/_count though the values lie within the first bucket (0.3 s); the replicas'
    # weights are their measured rates (request_rate is within 15%), hence the tolerance.
    assert chat.queue_time_seconds == pytest.approx(0.3, rel=0.08)
    assert chat.prefill_time_seconds == pytest.approx(0.1, rel=0.08)
    # Its p95 is what the buckets allow: every prefill is in (0, 0.3].
    assert chat.prefill_p95_seconds == pytest.approx(p95_within_bucket(VLLM_REQUEST_LATENCY_BUCKETS, 0.2))
    # TGI: the request queue histogram and the prefill batches' one.
    assert tgi.queue_time_seconds == pytest.approx(0.2, rel=1e-6)
    assert tgi.prefill_time_seconds == pytest.approx(0.05, rel=1e-6)
    assert tgi.prefill_p95_seconds == pytest.approx(p95_within_bucket(TGI_DURATION_BUCKETS, 0.05))
    for signals in (chat, tgi):
        assert not {Signal.QUEUE_TIME_SECONDS, Signal.PREFILL_TIME_SECONDS, Signal.PREFILL_P95_SECONDS} & (
            signals.missing | signals.stale
        )


def test_kv_cache_is_read_under_either_name_and_the_new_one_wins(fleet: Fleet) -> None:
    got = fleet.fetch()

    assert got[("team-a", "legacy")].kv_cache_usage == pytest.approx(0.3)
    assert got[("team-b", "upgrade")].kv_cache_usage == pytest.approx(0.7)


def test_idle_service_has_zero_rates_and_no_ttft(fleet: Fleet) -> None:
    legacy = fleet.fetch()[("team-a", "legacy")]

    assert legacy.request_rate == 0
    assert legacy.queue_depth == 0
    # No request in the window: histogram_quantile answers NaN, which is not a value.
    assert legacy.ttft_p95_seconds is None and legacy.ttft_derived is None
    assert Signal.TTFT_P95_SECONDS in legacy.missing
    # No DCGM series for its pod either.
    assert Signal.GPU_UTILIZATION_PERCENT in legacy.missing
    # Nothing finished in the window: the means are 0/0, NaN, missing rather than an error.
    assert legacy.queue_time_seconds is None and legacy.prefill_time_seconds is None
    assert {Signal.QUEUE_TIME_SECONDS, Signal.PREFILL_TIME_SECONDS, Signal.PREFILL_P95_SECONDS} <= legacy.missing


def test_missing_series_give_missing_signals(fleet: Fleet) -> None:
    partial = fleet.fetch()[("team-c", "partial")]

    assert partial.queue_depth == 2
    assert partial.missing == set(Signal) - {Signal.QUEUE_DEPTH}
    assert partial.stale == frozenset()
    assert partial.problems([Signal.RUNNING_REQUESTS]) == ["running_requests is missing"]


def test_gpu_utilisation_joins_dcgm_labels_exported_through_a_service_monitor(fleet: Fleet) -> None:
    config = PrometheusConfig(url=fleet.prometheus.url)
    with PrometheusSignals(config, options=EXPORTED_OPTIONS) as signals:
        got = signals.fetch_all(now=datetime.now(UTC))

    assert got[("team-a", "chat")].gpu_utilization_percent == pytest.approx(30)
    assert got[("team-b", "tgi-svc")].gpu_utilization_percent == pytest.approx(20)


def test_samples_older_than_the_allowed_age_are_stale(fleet: Fleet) -> None:
    # Evaluated 30 s ahead, the gauges' last samples are 30 s old (Prometheus still finds
    # them within its 5 minute lookback) and the rates' window holds no samples.
    later = datetime.now(UTC) + timedelta(seconds=30)
    chat = fleet.fetch(now=later)[("team-a", "chat")]

    assert chat.queue_depth is None
    assert Signal.QUEUE_DEPTH in chat.stale
    age = chat.age_seconds(Signal.QUEUE_DEPTH)
    assert age is not None and 28 <= age <= 33
    assert Signal.REQUEST_RATE in chat.missing
    assert chat.problems([Signal.QUEUE_DEPTH])[0].startswith("queue_depth is stale (last sampled 3")


def test_a_stopped_exporter_turns_stale_then_missing(fleet: Fleet) -> None:
    key = ("team-c", "doomed")
    assert fleet.fetch()[key].queue_depth == 9
    fleet.servers["doomed-0"].stop()

    # Its next failed scrape marks its series stale: gauges vanish at once, while rate()
    # and histogram_quantile() still find samples in the window. Those must not be used.
    def gauges_gone() -> ServiceSignals | None:
        doomed = fleet.fetch()[key]
        return doomed if Signal.QUEUE_DEPTH in doomed.missing else None

    doomed = wait_for("the stopped exporter's gauges to go", gauges_gone, timeout=15, interval=0.25)
    assert doomed.request_rate is None
    assert Signal.REQUEST_RATE in doomed.stale
    assert "request_rate is stale (its series are gone)" in doomed.problems()
    assert doomed.ttft_p95_seconds is None

    # Once the window has passed, nothing is left of it.
    wait_for(
        "the stopped service to leave the results", lambda: key not in fleet.fetch(), timeout=WINDOW + 10, interval=0.25
    )


def test_prometheus_rejecting_a_query_raises_query_failed(fleet: Fleet) -> None:
    with pytest.raises(QueryFailed, match=r"rejected query broken: bad_data: .*parse error") as caught:
        fleet.signals.client.instant_query("sum(", at=datetime.now(UTC), timeout=5, name="broken")
    assert caught.value.query == "sum("


def test_an_unreachable_prometheus_raises_metrics_unavailable(fleet: Fleet) -> None:
    config = PrometheusConfig(url=f"http://127.0.0.1:{free_port()}", timeout_seconds=2)
    started = time.monotonic()
    with (
        PrometheusSignals(config) as signals,
        pytest.raises(MetricsUnavailable, match=r"Cannot connect to Prometheus at http://127\.0\.0\.1:\d+: .*refused"),
    ):
        signals.fetch_all(now=datetime.now(UTC))
    assert time.monotonic() - started < 2
