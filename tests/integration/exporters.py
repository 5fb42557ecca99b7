"""Small HTTP servers that serve vLLM, TGI and DCGM metrics as the real ones do.

Names, types, labels and histogram buckets follow the engines' sources (see the notes at
the top of inferscale.promql); the text mimics each exporter's library: prometheus_client
for vLLM (counters as `_total` plus `_created`, float values), metrics-exporter-prometheus
for TGI (no HELP, counters without `_total`, request histograms only once observed), and
dcgm-exporter for GPUs. Values are set by the test; counters and histograms grow with
wall time at the rates the test sets, so Prometheus' rate() and histogram_quantile() see
steady traffic.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# vllm/v1/metrics/loggers.py, histogram_time_to_first_token.
VLLM_TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
# vllm/v1/metrics/loggers.py, request_latency_buckets (REQUEST_LATENCY_BUCKETS in
# vllm/v1/metrics/buckets.py on main): e2e, queue, inference, prefill and decode time.
VLLM_REQUEST_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip


def _tgi_duration_buckets() -> tuple[float, ...]:
    # router/src/server.rs: 35 geometric buckets for every metric ending in "duration".
    buckets, value = [], 0.0001
    for _ in range(35):
        value *= 1.5
        buckets.append(value)
    return tuple(buckets)


TGI_DURATION_BUCKETS = _tgi_duration_buckets()


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return "{" + inner + "}"


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


class Histogram:
    """Cumulative buckets fed by a steady stream of equal observations."""

    def __init__(self, buckets: Iterable[float]) -> None:
        self.bounds = (*buckets, float("inf"))
        self.counts = [0.0] * len(self.bounds)
        self.total = 0.0
        self.count = 0.0

    def observe(self, value: float, times: float) -> None:
        for index, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[index] += times
        self.total += value * times
        self.count += times

    def lines(self, name: str, labels: Mapping[str, str]) -> list[str]:
        out = [
            f"{name}_bucket{_labels({**labels, 'le': _le(b)})} {c!r}"
            for b, c in zip(self.bounds, self.counts, strict=True)
        ]
        out.append(f"{name}_sum{_labels(labels)} {self.total!r}")
        out.append(f"{name}_count{_labels(labels)} {self.count!r}")
        return out


@dataclass
class Traffic:
    """Requests per second and what each one looks like."""

    requests_per_second: float = 0.0
    prompt_tokens: float = 100.0
    generated_tokens: float = 50.0
    ttft_seconds: float = 0.3  # vLLM
    queue_seconds: float = 0.2  # both engines
    prefill_seconds: float = 0.05  # vLLM per request; TGI per prefill batch (one per request here)
    decode_seconds: float = 0.02  # TGI, per decode step


@dataclass
class VllmEngine:
    """One vLLM replica (v1 engine, one engine core)."""

    waiting: float = 0.0
    running: float = 0.0
    kv_cache: float = 0.0
    # Which KV-cache gauge names to export: "new" (0.9.2+), "old" (up to 0.10), or both.
    kv_names: tuple[str, ...] = ("new",)
    # Both names carry the same value in vLLM; a test that must tell them apart sets this.
    old_kv_cache: float | None = None
    # Export only the waiting gauge (a scrape that lost the other families).
    only_waiting: bool = False
    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    traffic: Traffic = field(default_factory=Traffic)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._created = time.time()
        self._last = time.monotonic()
        self._success = 0.0
        self._prompt = 0.0
        self._generated = 0.0
        self._ttft = Histogram(VLLM_TTFT_BUCKETS)
        self._queue = Histogram(VLLM_REQUEST_LATENCY_BUCKETS)
        self._prefill = Histogram(VLLM_REQUEST_LATENCY_BUCKETS)

    def _advance(self) -> None:
        now = time.monotonic()
        done = self.traffic.requests_per_second * (now - self._last)
        self._last = now
        self._success += done
        self._prompt += done * self.traffic.prompt_tokens
        self._generated += done * self.traffic.generated_tokens
        self._ttft.observe(self.traffic.ttft_seconds, done)
        # vLLM observes both when a request finishes, like the success counter.
        self._queue.observe(self.traffic.queue_seconds, done)
        self._prefill.observe(self.traffic.prefill_seconds, done)

    def render(self) -> str:
        with self._lock:
            self._advance()
            base = {"engine": "0", "model_name": self.model}
            lines: list[str] = []

            def family(name: str, kind: str, help_text: str, samples: list[str]) -> None:
                lines.extend([f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples])

            def counter(name: str, help_text: str, values: list[tuple[dict[str, str], float]]) -> None:
                family(f"{name}_total", "counter", help_text, [f"{name}_total{_labels(lb)} {v!r}" for lb, v in values])
                family(
                    f"{name}_created",
                    "gauge",
                    help_text,
                    [f"{name}_created{_labels(lb)} {self._created!r}" for lb, _ in values],
                )

            family(
                "vllm:num_requests_waiting",
                "gauge",
                "Number of requests waiting to be processed.",
                [f"vllm:num_requests_waiting{_labels(base)} {self.waiting!r}"],
            )
            if self.only_waiting:
                return "\n".join(lines) + "\n"
            family(
                "vllm:num_requests_running",
                "gauge",
                "Number of requests in model execution batches.",
                [f"vllm:num_requests_running{_labels(base)} {self.running!r}"],
            )
            if "old" in self.kv_names:
                family(
                    "vllm:gpu_cache_usage_perc",
                    "gauge",
                    "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead.",
                    [f"vllm:gpu_cache_usage_perc{_labels(base)} {self._old_kv()!r}"],
                )
            if "new" in self.kv_names:
                family(
                    "vllm:kv_cache_usage_perc",
                    "gauge",
                    "KV-cache usage. 1 means 100 percent usage.",
                    [f"vllm:kv_cache_usage_perc{_labels(base)} {self.kv_cache!r}"],
                )
            counter("vllm:prompt_tokens", "Number of prefill tokens processed.", [(base, self._prompt)])
            counter("vllm:generation_tokens", "Number of generation tokens processed.", [(base, self._generated)])
            counter(
                "vllm:request_success",
                "Count of successfully processed requests.",
                [
                    ({**base, "finished_reason": "stop"}, self._success * 0.75),
                    ({**base, "finished_reason": "length"}, self._success * 0.25),
                    ({**base, "finished_reason": "abort"}, 0.0),
                ],
            )
            family(
                "vllm:time_to_first_token_seconds",
                "histogram",
                "Histogram of time to first token in seconds.",
                self._ttft.lines("vllm:time_to_first_token_seconds", base),
            )
            family(
                "vllm:request_queue_time_seconds",
                "histogram",
                "Histogram of time spent in WAITING phase for request.",
                self._queue.lines("vllm:request_queue_time_seconds", base),
            )
            family(
                "vllm:request_prefill_time_seconds",
                "histogram",
                "Histogram of time spent in PREFILL phase for request.",
                self._prefill.lines("vllm:request_prefill_time_seconds", base),
            )
            return "\n".join(lines) + "\n"

    def _old_kv(self) -> float:
        return self.kv_cache if self.old_kv_cache is None else self.old_kv_cache


@dataclass
class TgiEngine:
    """One TGI replica (v3 backend)."""

    queue_size: float = 0.0
    batch_size: float = 0.0
    traffic: Traffic = field(default_factory=Traffic)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self._requests = 0.0
        self._queue = Histogram(TGI_DURATION_BUCKETS)
        self._prefill = Histogram(TGI_DURATION_BUCKETS)
        self._decode = Histogram(TGI_DURATION_BUCKETS)
        self._input = Histogram([4096 / 64 * (i + 1) for i in range(64)])
        self._generated = Histogram([1024 / 64 * (i + 1) for i in range(64)])

    def render(self) -> str:
        with self._lock:
            now = time.monotonic()
            done = self.traffic.requests_per_second * (now - self._last)
            self._last = now
            t = self.traffic
            self._requests += done
            self._queue.observe(t.queue_seconds, done)
            self._prefill.observe(t.prefill_seconds, done)  # one prefill batch per request here
            self._decode.observe(t.decode_seconds, done * t.generated_tokens)
            self._input.observe(t.prompt_tokens, done)
            self._generated.observe(t.generated_tokens, done)

            blocks = [
                ["# TYPE tgi_queue_size gauge", f"tgi_queue_size {self.queue_size!r}"],
                ["# TYPE tgi_batch_current_size gauge", f"tgi_batch_current_size {self.batch_size!r}"],
            ]
            if self._requests > 0:  # metrics-rs registers a series on its first record
                blocks += [
                    ["# TYPE tgi_request_count counter", f"tgi_request_count {self._requests!r}"],
                    ["# TYPE tgi_request_success counter", f"tgi_request_success {self._requests!r}"],
                    [
                        "# TYPE tgi_request_queue_duration histogram",
                        *self._queue.lines("tgi_request_queue_duration", {}),
                    ],
                    [
                        "# TYPE tgi_batch_inference_duration histogram",
                        *self._prefill.lines("tgi_batch_inference_duration", {"method": "prefill"}),
                        *self._decode.lines("tgi_batch_inference_duration", {"method": "decode"}),
                    ],
                    ["# TYPE tgi_request_input_length histogram", *self._input.lines("tgi_request_input_length", {})],
                    [
                        "# TYPE tgi_request_generated_tokens histogram",
                        *self._generated.lines("tgi_request_generated_tokens", {}),
                    ],
                ]
            return "\n\n".join("\n".join(block) for block in blocks) + "\n"


@dataclass
class Gpu:
    utilization: float
    namespace: str = ""
    pod: str = ""
    index: int = 0


@dataclass
class DcgmExporter:
    """dcgm-exporter with its Kubernetes pod mapping on."""

    gpus: list[Gpu]
    hostname: str = "gpu-node-1"

    def render(self) -> str:
        lines = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).", "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
        for gpu in self.gpus:
            labels = {
                "gpu": str(gpu.index),
                "UUID": f"GPU-{gpu.index:08d}-5f1e-4c3a-9d1b-000000000000",
                "pci_bus_id": f"00000000:{gpu.index + 7:02X}:00.0",
                "device": f"nvidia{gpu.index}",
                "modelName": "NVIDIA A100-SXM4-80GB",
                "Hostname": self.hostname,
                "DCGM_FI_DRIVER_VERSION": "535.129.03",
                "container": "engine" if gpu.pod else "",
                "namespace": gpu.namespace,
                "pod": gpu.pod,
            }
            lines.append(f"DCGM_FI_DEV_GPU_UTIL{_labels(labels)} {gpu.utilization!r}")
        return "\n".join(lines) + "\n"


class MetricsServer:
    """Serves one exporter's /metrics on 127.0.0.1 until stopped."""

    def __init__(self, render: Callable[[], str]) -> None:
        self.render = render

        class Handler(BaseHTTPRequestHandler):
            def do_GET(handler) -> None:
                if handler.path != "/metrics":
                    handler.send_error(404)
                    return
                body = render().encode()
                handler.send_response(200)
                handler.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                handler.send_header("Content-Length", str(len(body)))
                handler.end_headers()
                handler.wfile.write(body)

            def log_message(handler, *_: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        self.stopped = False

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
