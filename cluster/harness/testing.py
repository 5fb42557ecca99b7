"""What tests and benches share to run the operator's queries against a real Prometheus, no cluster needed.

* ``Prometheus``: Debian's Prometheus on loopback. Each server runs from its own config file and storage in a
  directory the caller gives, on a free 127.0.0.1 port; never the packaged systemd service or
  /etc/prometheus. The caller stops it.
* ``VllmExporter``, ``TgiExporter``, ``DcgmExporter`` behind a ``MetricsServer``: small HTTP servers that
  serve vLLM, TGI and DCGM metrics as the real ones do, with the values a test sets. Names, types, labels
  and histogram buckets follow the engines' sources (the names are ``inferscale.promql``'s, the buckets
  ``loadgen.engine.metrics``'); the text mimics each exporter's library: prometheus_client for vLLM
  (counters as ``_total`` plus ``_created``, float values), metrics-exporter-prometheus for TGI (no HELP,
  counters without ``_total``, request histograms only once observed), and dcgm-exporter for GPUs.
  Counters and histograms grow with wall time at the rates the test sets, so Prometheus' rate() and
  histogram_quantile() see steady traffic. (``loadgen.engine.server`` is the engine that also serves requests.)

Used by tests/integration and bench/tick.py; nothing here imports the tests.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from inferscale.promql import (
    DCGM_GPU_UTIL,
    TGI_BATCH_INFERENCE_DURATION,
    TGI_BATCH_SIZE,
    TGI_GENERATED_TOKENS,
    TGI_INPUT_LENGTH,
    TGI_QUEUE_DURATION,
    TGI_QUEUE_SIZE,
    TGI_REQUEST_SUCCESS,
    VLLM_GENERATION_TOKENS,
    VLLM_KV_CACHE,
    VLLM_KV_CACHE_OLD,
    VLLM_PREFILL_TIME,
    VLLM_PROMPT_TOKENS,
    VLLM_QUEUE_TIME,
    VLLM_REQUEST_SUCCESS,
    VLLM_RUNNING,
    VLLM_TTFT,
    VLLM_WAITING,
)

from harness.processes import free_port, stop_process
from loadgen.engine.metrics import (
    TGI_REQUEST_COUNT,
    VLLM_HELP,
    VLLM_REQUEST_LATENCY_BUCKETS,
    VLLM_TTFT_BUCKETS,
    tgi_duration_buckets,
)

__all__ = [
    "PROMETHEUS",
    "TGI_DURATION_BUCKETS",
    "TGI_GENERATED_BUCKETS",
    "TGI_INPUT_BUCKETS",
    "DcgmExporter",
    "Gpu",
    "MetricsServer",
    "Prometheus",
    "PrometheusFailed",
    "SteadyHistogram",
    "TgiExporter",
    "Traffic",
    "VllmExporter",
    "dcgm_labels",
]

TGI_DURATION_BUCKETS = tuple(tgi_duration_buckets())
# The token-count histograms' buckets: 64 even steps to 4096 prompt and 1024 generated tokens. TGI's own are
# limit / 100 * k (loadgen.engine.metrics); the operator reads only these histograms' _sum, not their buckets.
TGI_INPUT_BUCKETS = tuple(4096 / 64 * (i + 1) for i in range(64))
TGI_GENERATED_BUCKETS = tuple(1024 / 64 * (i + 1) for i in range(64))


# --- Prometheus ------------------------------------------------------------------------------------

PROMETHEUS = Path("/usr/bin/prometheus")


class PrometheusFailed(RuntimeError):
    """Prometheus exited, or did not become ready in time; the message ends with its log."""


class Prometheus:
    """One Prometheus server with this config (the contents of prometheus.yml), ready once constructed.

    Config, storage (`data/`) and log (`prometheus.log`) are in `workdir`. Raises PrometheusFailed,
    having stopped the process, if it exits or is not ready within `ready_timeout` seconds.
    """

    def __init__(
        self,
        workdir: Path,
        config: dict[str, Any],
        *,
        binary: Path = PROMETHEUS,
        ready_timeout: float = 30.0,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config))
        self.log = workdir / "prometheus.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    str(binary),
                    f"--config.file={self.config}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1h",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=preexec_fn,
            )
        deadline = time.monotonic() + ready_timeout
        while not self._ready():
            if time.monotonic() >= deadline:
                self.stop()
                raise PrometheusFailed(
                    f"Prometheus on {self.url} was not ready after {ready_timeout:g}s; its log:\n{self.log_tail()}"
                )
            time.sleep(0.25)

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise PrometheusFailed(f"Prometheus exited with {self.process.returncode}; its log:\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The result of an instant query, as Prometheus' HTTP API returns it."""
        data = urllib.parse.urlencode({"query": promql}).encode()
        with urllib.request.urlopen(f"{self.url}/api/v1/query", data=data, timeout=30) as response:
            answer = json.load(response)
        return list(answer["data"]["result"])

    def scalar(self, promql: str) -> float | None:
        """The first value of an instant query, or None if it found nothing."""
        result = self.query(promql)
        return float(result[0]["value"][1]) if result else None

    def self_metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of one of Prometheus' own metrics (its /metrics) that carry these labels."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as response:
            text = response.read().decode()
        wanted = [f'{key}="{value}"' for key, value in labels.items()]
        total = 0.0
        for line in text.splitlines():
            if (line.startswith(name + "{") or line.startswith(name + " ")) and all(w in line for w in wanted):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def stop(self) -> None:
        stop_process(self.process)


# --- exporters -------------------------------------------------------------------------------------


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return "{" + inner + "}"


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


class SteadyHistogram:
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
class VllmExporter:
    """The /metrics of one vLLM replica (v1 engine, one engine core)."""

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
        self._ttft = SteadyHistogram(VLLM_TTFT_BUCKETS)
        self._queue = SteadyHistogram(VLLM_REQUEST_LATENCY_BUCKETS)
        self._prefill = SteadyHistogram(VLLM_REQUEST_LATENCY_BUCKETS)

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

            def family(name: str, kind: str, samples: list[str], help_of: str = "") -> None:
                help_text = VLLM_HELP[help_of or name]
                lines.extend([f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples])

            def gauge(name: str, value: float) -> None:
                family(name, "gauge", [f"{name}{_labels(base)} {value!r}"])

            def counter(total: str, values: list[tuple[dict[str, str], float]]) -> None:
                family(total, "counter", [f"{total}{_labels(lb)} {v!r}" for lb, v in values])
                created = total.removesuffix("_total") + "_created"
                samples = [f"{created}{_labels(lb)} {self._created!r}" for lb, _ in values]
                family(created, "gauge", samples, help_of=total)

            gauge(VLLM_WAITING, self.waiting)
            if self.only_waiting:
                return "\n".join(lines) + "\n"
            gauge(VLLM_RUNNING, self.running)
            if "old" in self.kv_names:
                gauge(VLLM_KV_CACHE_OLD, self._old_kv())
            if "new" in self.kv_names:
                gauge(VLLM_KV_CACHE, self.kv_cache)
            counter(VLLM_PROMPT_TOKENS, [(base, self._prompt)])
            counter(VLLM_GENERATION_TOKENS, [(base, self._generated)])
            counter(
                VLLM_REQUEST_SUCCESS,
                [
                    ({**base, "finished_reason": "stop"}, self._success * 0.75),
                    ({**base, "finished_reason": "length"}, self._success * 0.25),
                    ({**base, "finished_reason": "abort"}, 0.0),
                ],
            )
            for name, histogram in (
                (VLLM_TTFT, self._ttft),
                (VLLM_QUEUE_TIME, self._queue),
                (VLLM_PREFILL_TIME, self._prefill),
            ):
                family(name, "histogram", histogram.lines(name, base))
            return "\n".join(lines) + "\n"

    def _old_kv(self) -> float:
        return self.kv_cache if self.old_kv_cache is None else self.old_kv_cache


@dataclass
class TgiExporter:
    """The /metrics of one TGI replica (v3 backend)."""

    queue_size: float = 0.0
    batch_size: float = 0.0
    traffic: Traffic = field(default_factory=Traffic)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self._requests = 0.0
        self._queue = SteadyHistogram(TGI_DURATION_BUCKETS)
        self._prefill = SteadyHistogram(TGI_DURATION_BUCKETS)
        self._decode = SteadyHistogram(TGI_DURATION_BUCKETS)
        self._input = SteadyHistogram(TGI_INPUT_BUCKETS)
        self._generated = SteadyHistogram(TGI_GENERATED_BUCKETS)

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
                [f"# TYPE {TGI_QUEUE_SIZE} gauge", f"{TGI_QUEUE_SIZE} {self.queue_size!r}"],
                [f"# TYPE {TGI_BATCH_SIZE} gauge", f"{TGI_BATCH_SIZE} {self.batch_size!r}"],
            ]
            if self._requests > 0:  # metrics-rs registers a series on its first record
                blocks += [
                    [f"# TYPE {TGI_REQUEST_COUNT} counter", f"{TGI_REQUEST_COUNT} {self._requests!r}"],
                    [f"# TYPE {TGI_REQUEST_SUCCESS} counter", f"{TGI_REQUEST_SUCCESS} {self._requests!r}"],
                    [f"# TYPE {TGI_QUEUE_DURATION} histogram", *self._queue.lines(TGI_QUEUE_DURATION, {})],
                    [
                        f"# TYPE {TGI_BATCH_INFERENCE_DURATION} histogram",
                        *self._prefill.lines(TGI_BATCH_INFERENCE_DURATION, {"method": "prefill"}),
                        *self._decode.lines(TGI_BATCH_INFERENCE_DURATION, {"method": "decode"}),
                    ],
                    [f"# TYPE {TGI_INPUT_LENGTH} histogram", *self._input.lines(TGI_INPUT_LENGTH, {})],
                    [f"# TYPE {TGI_GENERATED_TOKENS} histogram", *self._generated.lines(TGI_GENERATED_TOKENS, {})],
                ]
            return "\n\n".join("\n".join(block) for block in blocks) + "\n"


DCGM_HEADER = f"# HELP {DCGM_GPU_UTIL} GPU utilization (in %).\n# TYPE {DCGM_GPU_UTIL} gauge\n"


def dcgm_labels(index: int, serial: str, hostname: str, namespace: str, pod: str) -> dict[str, str]:
    """dcgm-exporter's labels of GPU `index` on a node, with its Kubernetes mapping on (namespace and pod of
    the container holding it; empty when none does). `serial` makes the UUID unique among the fakes."""
    return {
        "gpu": str(index),
        "UUID": f"GPU-{serial}-5f1e-4c3a-9d1b-000000000000",
        "pci_bus_id": f"00000000:{index + 7:02X}:00.0",
        "device": f"nvidia{index}",
        "modelName": "NVIDIA A100-SXM4-80GB",
        "Hostname": hostname,
        "DCGM_FI_DRIVER_VERSION": "535.129.03",
        "container": "engine" if pod else "",
        "namespace": namespace,
        "pod": pod,
    }


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
        lines = [DCGM_HEADER.rstrip("\n")]
        for gpu in self.gpus:
            labels = dcgm_labels(gpu.index, f"{gpu.index:08d}", self.hostname, gpu.namespace, gpu.pod)
            lines.append(f"{DCGM_GPU_UTIL}{_labels(labels)} {gpu.utilization!r}")
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
