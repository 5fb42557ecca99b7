"""One scaling tick of the operator against a real Prometheus holding series for N InferenceServices.

What is measured is ``handlers.plan_tick``, the half of the operator's tick (``handlers.run_tick``) that reads
and decides, for every service at once, called in this process on its own event loop: it sends
``PrometheusSignals.fetch_all`` (the fixed query set) to a thread and meanwhile builds the ServiceViews
from the (here synthetic) kopf indexes (``handlers.service_views``, every spec parsed, as each tick does), runs
``plan_service`` per service, and sends the per-pod load query (once, to a thread, at the first service
that scales down) while it plans the rest. It uses the operator's own configuration objects
(``OperatorConfig``, so ``parallel_queries`` and the timeouts are the operator's defaults). To time the
parts, ``handlers.service_views``, ``handlers.plan_service``, ``fetch_all``, ``pod_load`` and the client's
``instant_query`` are wrapped (a few microseconds each). The other half of the tick, the Kubernetes
writes (Deployment patches, status writes, Events, deletion costs: ``handlers._act``), is out of scope:
it goes to the API server, not to Prometheus, and its cost depends on the cluster, not on this code.

The fleet: N services (``--services``, default 1000) of ``--replicas-per-service`` engine pods each (2),
a ``--tgi-share`` of them TGI (0.25), the rest vLLM (mixing the KV-cache gauge names of vLLM <0.9.2,
0.9.2-0.10 and 0.11+), each pod with one GPU in DCGM's series. Loads are drawn per service (seeded):
most steady within the SLO, some over it with a queue, some nearly idle and due a scale-down (so the
tick also sends its per-pod load query), some idle, a few in Manual mode. A few exporter processes
(``--exporters``, 4; separate processes, so neither their CPU time in Python nor their memory is the
bench's) each serve a shard of the pods on one 127.0.0.1 endpoint, with the engines' real metric names,
label sets and histogram buckets (the layouts of harness.testing's exporters) and the pod's
``namespace``, ``service`` and ``pod`` labels in every sample, plus DCGM's GPU series on a second path.
Prometheus (Debian's /usr/bin/prometheus, 127.0.0.1, a free port, storage in a temporary directory)
scrapes them with ``honor_labels``. The exporters serve only the families the queries read (and their
siblings in the same histograms); a real engine exports more, which costs Prometheus memory and ingestion
but not query time, since every query selects by metric name.

Timing, chosen to keep the run near a minute at N=1000 (well under 3): Prometheus scrapes every
``--scrape-seconds`` (5 s) for the whole run, and the queries' rate() and p95 window (``--window-seconds``)
is 8 scrape intervals (40 s), so each series has as many samples in the window as with the operator's
defaults in a cluster (a 120 s window at a 15 s scrape; ``--scrape-seconds 15`` runs exactly that, in
about 2.5 minutes). The ticks start once a whole window of samples is in (checked: every gauge series
has at least 7 samples in it) and, if other work keeps the machine's CPUs busy, after waiting up to
``--quiet-wait`` (60 s) for three seconds in a row of CPU pressure below 10%: one unmeasured warm-up
tick, then ``--ticks`` (3) measured ones, back to back. What a query costs Prometheus here follows the
number of series it selects; the samples per series in the window hardly matter.

Scraping goes on during the ticks, as it does in production, but three times as often as at 15 s; the
bench prints what it costs (Prometheus' ingestion and the exporters' rendering, which in a cluster run on
other machines). It is not stopped or slowed for the ticks: reloading this Prometheus (2.42) with a longer
scrape interval made every series go stale a few seconds later (seen here; the targets are replaced), and
a scrape that fails or times out does the same. Per tick the bench reports Prometheus' and its own CPU
seconds next to the wall time, Prometheus' allocations and garbage collections during the ticks, and the
machine's CPU pressure during them (Linux PSI: the share of time some runnable task waited for a CPU;
the ticks themselves keep both CPUs busy, so it is never zero): on a shared machine other work inflates
wall times, and CPU seconds are the steadier figure.

Reported: per tick its parts and CPU seconds, per query its latency within the ticks (median; four run at
once, so these include waiting for each other and for the CPU) and alone (sequential, median of 3, after
the measured ticks), and the decisions taken (a check that signals came through). The last line is
``services=N queries=Q tick_seconds=T rss_mb=M``: T the median of the measured ticks; Q the PromQL
queries per tick as Prometheus counted them (``prometheus_http_requests_total{handler="/api/v1/query"}``
over the measured ticks, divided by their number; nothing else queries Prometheus meanwhile); M this
process's peak resident set (``getrusage(RUSAGE_SELF).ru_maxrss``, i.e. VmHWM, over the whole run: the
operator's imports, the N parsed objects, the answers, the plans; the exporter and Prometheus processes
are children and not counted).

Every process started here is stopped on the way out (also on Ctrl-C, SIGTERM and errors), and dies
with this one if it is killed (PR_SET_PDEATHSIG); the temporary directory is removed unless ``--keep``.

    .venv/bin/python bench/tick.py [--services 1000] [--replicas-per-service 2] [--tgi-share 0.25]
                                   [--scrape-seconds 5] [--ticks 3] [--quiet-wait 60] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import os
import random
import resource
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inferscale.handlers import Indexes

from harness import processes
from harness.processes import die_with_parent, stop_process
from harness.testing import (
    DCGM_HEADER,
    PROMETHEUS,
    TGI_DURATION_BUCKETS,
    TGI_GENERATED_BUCKETS,
    TGI_INPUT_BUCKETS,
    Prometheus,
    PrometheusFailed,
    dcgm_labels,
)
from inferscale import promql
from inferscale.settings import SCALING

from loadgen.engine.metrics import TGI_REQUEST_COUNT, VLLM_HELP, VLLM_REQUEST_LATENCY_BUCKETS, VLLM_TTFT_BUCKETS

SEED = 20261202
NAMESPACES = 25
GPUS_PER_NODE = 8
VLLM_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
MAX_CONCURRENCY = 16
SLO_SECONDS = 1.0
# Per replica, by kind of service: (running, waiting, TTFT s, KV-cache use, GPU %, requests/s), low and high.
LOADS = {
    "steady": ((4, 0, 0.2, 0.3, 40, 1), (10, 2, 0.7, 0.6, 75, 4)),  # within the SLO
    "hot": ((MAX_CONCURRENCY, 10, 1.5, 0.85, 90, 4), (MAX_CONCURRENCY, 40, 4.0, 0.98, 100, 8)),  # over it, queueing
    "low": ((0.3, 0, 0.1, 0.02, 5, 0.1), (1.2, 0, 0.3, 0.1, 20, 0.5)),  # due a scale-down
    "idle": ((0, 0, 0.2, 0, 0, 0), (0, 0, 0.2, 0, 0, 0)),
}


# --- the fleet: the same for the bench and every exporter process (seeded) -------------------------


@dataclass(frozen=True)
class Service:
    """One InferenceService and the load on each of its replicas (all replicas alike)."""

    index: int
    namespace: str
    name: str
    engine: str  # vllm | tgi
    kind: str  # steady | hot | low | idle
    manual: bool
    replicas: int
    kv_names: tuple[str, ...]  # vLLM's KV-cache gauge name(s): new, old or both
    waiting: float
    running: float
    kv_cache: float
    gpu_percent: float
    requests_per_second: float
    prompt_tokens: float
    generated_tokens: float
    ttft_seconds: float  # vLLM
    queue_seconds: float  # both engines
    prefill_seconds: float  # vLLM per request, TGI per prefill batch (one per request here)
    decode_seconds: float  # TGI
    age_seconds: float  # how long the engines have run: counters start at rate x age

    def pods(self) -> list[str]:
        return [f"{self.name}-{self.index * 7919 % 99991:05x}-{j}" for j in range(self.replicas)]


def fleet(services: int, replicas: int, tgi_share: float) -> list[Service]:
    out = []
    for i in range(services):
        rng = random.Random(SEED * 1_000_003 + i)
        engine = "tgi" if rng.random() < tgi_share else "vllm"
        kind = rng.choices(("steady", "hot", "low", "idle"), weights=(55, 20, 15, 10))[0]
        low, high = LOADS[kind]
        running, waiting, ttft, kv, gpu, rps = (rng.uniform(lo, hi) for lo, hi in zip(low, high, strict=True))
        queue = ttft * rng.uniform(0.5, 0.8)
        out.append(
            Service(
                index=i,
                namespace=f"team-{i % NAMESPACES:02d}",
                name=f"{engine}-svc-{i:05d}",
                engine=engine,
                kind=kind,
                manual=rng.random() < 0.02,
                replicas=replicas,
                kv_names=rng.choices((("new",), ("new", "old"), ("old",)), weights=(70, 20, 10))[0],
                waiting=waiting,
                running=running,
                kv_cache=kv,
                gpu_percent=gpu,
                requests_per_second=rps,
                prompt_tokens=rng.uniform(100, 1500),
                generated_tokens=rng.uniform(50, 400),
                ttft_seconds=ttft,
                queue_seconds=queue,
                prefill_seconds=ttft - queue,
                decode_seconds=rng.uniform(0.015, 0.04),
                age_seconds=rng.uniform(3600, 3 * 86400),
            )
        )
    return out


# --- exporter processes ----------------------------------------------------------------------------


def _le(bound: float) -> str:
    return "+Inf" if bound == math.inf else repr(bound)


class Family:
    """One metric family of many pods: each sample's value is base + slope * seconds since start."""

    def __init__(self, header: str) -> None:
        self.header = header
        self.prefixes: list[str] = []
        self.base: list[float] = []
        self.slope: list[float] = []

    def add(self, name: str, labels: str, base: float, slope: float = 0.0) -> None:
        self.prefixes.append(f"{name}{{{labels}}} ")
        self.base.append(base)
        self.slope.append(slope)

    def histogram(
        self, name: str, labels: str, buckets: Sequence[float], value: float, per_second: float, age: float
    ) -> None:
        """Every observation equals `value`, `per_second` of them, for `age` seconds so far."""
        count = per_second * age
        for bound in (*buckets, math.inf):
            inside = value <= bound
            self.add(f"{name}_bucket", f'{labels},le="{_le(bound)}"', count if inside else 0.0, per_second * inside)
        self.add(f"{name}_sum", labels, value * count, value * per_second)
        self.add(f"{name}_count", labels, count, per_second)

    def render(self, elapsed: float) -> str:
        lines = [f"{p}{b + s * elapsed!r}\n" for p, b, s in zip(self.prefixes, self.base, self.slope, strict=True)]
        return self.header + "".join(lines)


# The vLLM families the exporters serve: the ones the operator's queries read.
VLLM_FAMILIES = (
    (promql.VLLM_WAITING, "gauge"),
    (promql.VLLM_RUNNING, "gauge"),
    (promql.VLLM_KV_CACHE_OLD, "gauge"),
    (promql.VLLM_KV_CACHE, "gauge"),
    (promql.VLLM_PROMPT_TOKENS, "counter"),
    (promql.VLLM_GENERATION_TOKENS, "counter"),
    (promql.VLLM_REQUEST_SUCCESS, "counter"),
    (promql.VLLM_TTFT, "histogram"),
    (promql.VLLM_QUEUE_TIME, "histogram"),
    (promql.VLLM_PREFILL_TIME, "histogram"),
)


def _created(counter: str) -> str:
    """prometheus_client's creation-time series of a counter: `x_total` has `x_created`."""
    return counter.removesuffix("_total") + "_created"


def _families(kind: str, names: Sequence[tuple[str, str, str]]) -> dict[str, Family]:
    """Families by name; vLLM's (prometheus_client) have HELP, TGI's (metrics-exporter-prometheus) do not."""
    out = {}
    for name, type_, help_text in names:
        header = f"# HELP {name} {help_text}\n" if kind == "vllm" else ""
        out[name] = Family(f"{header}# TYPE {name} {type_}\n")
    return out


def shard_families(services: Sequence[Service], shard: int, shards: int) -> tuple[list[Family], list[Family]]:
    """The engine families and the DCGM family of one exporter process's share of the fleet."""
    vllm = _families("vllm", [(name, kind, VLLM_HELP[name]) for name, kind in VLLM_FAMILIES])
    tgi = _families(
        "tgi",
        [
            (promql.TGI_QUEUE_SIZE, "gauge", ""),
            (promql.TGI_BATCH_SIZE, "gauge", ""),
            (TGI_REQUEST_COUNT, "counter", ""),
            (promql.TGI_REQUEST_SUCCESS, "counter", ""),
            (promql.TGI_QUEUE_DURATION, "histogram", ""),
            (promql.TGI_BATCH_INFERENCE_DURATION, "histogram", ""),
            (promql.TGI_INPUT_LENGTH, "histogram", ""),
            (promql.TGI_GENERATED_TOKENS, "histogram", ""),
        ],
    )
    dcgm = Family(DCGM_HEADER)
    gpu = 0

    def add_gpu(namespace: str, pod: str, utilization: float) -> None:
        nonlocal gpu
        node, index = divmod(gpu, GPUS_PER_NODE)
        labels = dcgm_labels(index, f"{shard:04d}{gpu:04d}", f"gpu-node-{shard}-{node}", namespace, pod)
        dcgm.add(promql.DCGM_GPU_UTIL, ",".join(f'{key}="{value}"' for key, value in labels.items()), utilization)
        gpu += 1

    for svc in services:
        if svc.index % shards != shard:
            continue
        rps, age = svc.requests_per_second, svc.age_seconds
        # Idle services served traffic before: their counters and histograms exist, flat.
        past = 0.5 if rps == 0 else rps
        count = past * age
        for pod in svc.pods():
            add_gpu(svc.namespace, pod, svc.gpu_percent)
            where = f'namespace="{svc.namespace}",service="{svc.name}",pod="{pod}"'
            if svc.engine == "vllm":
                base = f'{where},engine="0",model_name="{VLLM_MODEL}"'
                vllm[promql.VLLM_WAITING].add(promql.VLLM_WAITING, base, svc.waiting)
                vllm[promql.VLLM_RUNNING].add(promql.VLLM_RUNNING, base, svc.running)
                if "old" in svc.kv_names:
                    vllm[promql.VLLM_KV_CACHE_OLD].add(promql.VLLM_KV_CACHE_OLD, base, svc.kv_cache)
                if "new" in svc.kv_names:
                    vllm[promql.VLLM_KV_CACHE].add(promql.VLLM_KV_CACHE, base, svc.kv_cache)
                created = time.time() - age
                for name, per_request in (
                    (promql.VLLM_PROMPT_TOKENS, svc.prompt_tokens),
                    (promql.VLLM_GENERATION_TOKENS, svc.generated_tokens),
                ):
                    vllm[name].add(name, base, count * per_request, rps * per_request)
                    vllm[name].add(_created(name), base, created)
                for reason, share in (("stop", 0.75), ("length", 0.25), ("abort", 0.0)):
                    labels = f'{base},finished_reason="{reason}"'
                    vllm[promql.VLLM_REQUEST_SUCCESS].add(
                        promql.VLLM_REQUEST_SUCCESS, labels, count * share, rps * share
                    )
                for reason in ("stop", "length", "abort"):
                    vllm[promql.VLLM_REQUEST_SUCCESS].add(
                        _created(promql.VLLM_REQUEST_SUCCESS), f'{base},finished_reason="{reason}"', created
                    )
                vllm[promql.VLLM_TTFT].histogram(promql.VLLM_TTFT, base, VLLM_TTFT_BUCKETS, svc.ttft_seconds, rps, age)
                for name, seconds in (
                    (promql.VLLM_QUEUE_TIME, svc.queue_seconds),
                    (promql.VLLM_PREFILL_TIME, svc.prefill_seconds),
                ):
                    vllm[name].histogram(name, base, VLLM_REQUEST_LATENCY_BUCKETS, seconds, rps, age)
            else:
                tgi[promql.TGI_QUEUE_SIZE].add(promql.TGI_QUEUE_SIZE, where, svc.waiting)
                tgi[promql.TGI_BATCH_SIZE].add(promql.TGI_BATCH_SIZE, where, svc.running)
                tgi[TGI_REQUEST_COUNT].add(TGI_REQUEST_COUNT, where, count, rps)
                tgi[promql.TGI_REQUEST_SUCCESS].add(promql.TGI_REQUEST_SUCCESS, where, count, rps)
                tgi[promql.TGI_QUEUE_DURATION].histogram(
                    promql.TGI_QUEUE_DURATION, where, TGI_DURATION_BUCKETS, svc.queue_seconds, rps, age
                )
                inference = tgi[promql.TGI_BATCH_INFERENCE_DURATION]
                # One prefill batch per request, one decode step per generated token.
                prefill, decode = f'{where},method="prefill"', f'{where},method="decode"'
                inference.histogram(
                    promql.TGI_BATCH_INFERENCE_DURATION, prefill, TGI_DURATION_BUCKETS, svc.prefill_seconds, rps, age
                )
                per_token = rps * svc.generated_tokens
                inference.histogram(
                    promql.TGI_BATCH_INFERENCE_DURATION,
                    decode,
                    TGI_DURATION_BUCKETS,
                    svc.decode_seconds,
                    per_token,
                    age,
                )
                tgi[promql.TGI_INPUT_LENGTH].histogram(
                    promql.TGI_INPUT_LENGTH, where, TGI_INPUT_BUCKETS, svc.prompt_tokens, rps, age
                )
                tgi[promql.TGI_GENERATED_TOKENS].histogram(
                    promql.TGI_GENERATED_TOKENS, where, TGI_GENERATED_BUCKETS, svc.generated_tokens, rps, age
                )
    for _ in range(GPUS_PER_NODE // 2):  # GPUs no pod holds
        add_gpu("", "", 0.0)
    engines = [f for f in (*vllm.values(), *tgi.values()) if f.prefixes]
    return engines, [dcgm]


def serve_shard(args: argparse.Namespace) -> int:
    """Child process: serve one shard's engine series on /metrics and its GPUs on /dcgm until stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the bench stops its children
    services = fleet(args.services, args.replicas_per_service, args.tgi_share)
    engines, dcgm = shard_families(services, args.shard, args.exporters)
    started = time.monotonic()

    def render(families: list[Family]) -> bytes:
        elapsed = time.monotonic() - started
        return "".join(f.render(elapsed) for f in families).encode()

    paths: dict[str, Callable[[], bytes]] = {"/metrics": lambda: render(engines), "/dcgm": lambda: render(dcgm)}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            make = paths.get(self.path)
            if make is None:
                self.send_error(404)
                return
            body = make()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.1,), daemon=True).start()
    samples = sum(len(f.prefixes) for f in (*engines, *dcgm))
    print(f"port={server.server_address[1]} samples={samples}", flush=True)
    sys.stdin.read()  # returns when the bench closes the pipe or dies
    server.shutdown()
    return 0


# --- processes ---------------------------------------------------------------------------------------


def start_exporter(args: argparse.Namespace, shard: int) -> tuple[subprocess.Popen[str], int, int]:
    command = [
        sys.executable,
        __file__,
        "--serve-shard",
        str(shard),
        f"--exporters={args.exporters}",
        f"--services={args.services}",
        f"--replicas-per-service={args.replicas_per_service}",
        f"--tgi-share={args.tgi_share}",
    ]
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent
    )
    return process, *_read_port(process)


def _read_port(process: subprocess.Popen[str], timeout: float = 60.0) -> tuple[int, int]:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    line = process.stdout.readline() if ready else ""
    if not line.startswith("port="):
        stop_process(process)
        raise SystemExit(f"bench: an exporter process did not start (exit {process.poll()}, said {line!r})")
    fields = dict(part.split("=", 1) for part in line.split())
    return int(fields["port"]), int(fields["samples"])


def start_prometheus(workdir: Path, engines: list[str], dcgm: list[str], interval: float) -> Prometheus:
    """Prometheus scraping the exporters' engine series and GPUs every `interval` seconds, with `honor_labels`."""
    seconds = f"{interval:g}s"
    job = {"honor_labels": True, "scrape_interval": seconds, "scrape_timeout": seconds}
    config = {
        "global": {"scrape_interval": seconds, "evaluation_interval": "1m"},
        "scrape_configs": [
            {"job_name": "engines", **job, "static_configs": [{"targets": engines}]},
            {"job_name": "dcgm", **job, "metrics_path": "/dcgm", "static_configs": [{"targets": dcgm}]},
        ],
    }
    try:
        return Prometheus(workdir, config, ready_timeout=60, preexec_fn=die_with_parent)
    except PrometheusFailed as error:
        raise SystemExit(f"bench: {error}") from None


def wait_for(what: str, probe: Callable[[], Any], *, timeout: float, interval: float = 0.25) -> Any:
    """harness.processes.wait_for, ending the bench with a message instead of an AssertionError."""
    try:
        return processes.wait_for(what, probe, timeout=timeout, interval=interval)
    except AssertionError as error:
        raise SystemExit(f"bench: {error}") from None


# --- the operator's side -----------------------------------------------------------------------------


def kopf_indexes(services: Sequence[Service], now: datetime) -> Indexes:
    """What kopf's three indexes would hold: the objects as the API server returns them, Deployment
    replicas, and classified pods. Status is that of a fleet the operator has run for an hour: the policy's
    memory (settled; no recent recommendations, so a service that needs fewer replicas scales down now),
    its conditions and last decision."""
    from inferscale.handlers import Indexes
    from inferscale.policy import Memory

    isvcs: dict[Any, list[Any]] = {}
    deployments: dict[Any, list[int]] = {}
    pods: dict[Any, list[tuple[str, str, str | None]]] = {}
    earlier = (now - timedelta(hours=1)).isoformat()
    for svc in services:
        key = (svc.namespace, svc.name)
        spec: dict[str, Any] = {
            "engine": svc.engine,
            "model": {"id": VLLM_MODEL if svc.engine == "vllm" else "mistralai/Mistral-7B-Instruct-v0.3"},
            "maxConcurrency": MAX_CONCURRENCY,
            "replicas": {"min": 1, "max": 8},
            "scaling": {"ttftP95Seconds": SLO_SECONDS, "mode": "Manual" if svc.manual else "Auto"},
        }
        memory = Memory.model_validate({"readyReplicas": svc.replicas, "readyChangedAt": earlier})
        conditions = [
            {"type": t, "status": s, "reason": r, "message": m, "lastTransitionTime": earlier}
            for t, s, r, m in (
                ("Reconciled", "True", "Applied", "Deployment, Service and PodDisruptionBudget are applied."),
                ("Ready", "True", "ReplicasReady", f"{svc.replicas}/{svc.replicas} replicas ready."),
                ("MetricsAvailable", "True", "SignalsFresh", "Queue depth, running requests and TTFT are fresh"),
                ("ScalingLimited", "False", "WithinLimits", "The replica count is not capped"),
            )
        ]
        status = {
            "observedGeneration": 1,
            "replicas": svc.replicas,
            "readyReplicas": svc.replicas,
            "desiredReplicas": svc.replicas,
            "deploymentName": svc.name,
            "lastDecision": {"replicas": svc.replicas, "reason": "Steady", "message": "steady", "time": earlier},
            "autoscaler": memory.model_dump(mode="json", by_alias=True, exclude_none=True),
            "conditions": conditions,
        }
        metadata = {"name": svc.name, "namespace": svc.namespace, "uid": f"uid-{svc.index}", "generation": 1}
        isvcs[key] = [{"metadata": metadata, "spec": spec, "status": status}]
        deployments[key] = [svc.replicas]
        pods[key] = [(pod, "ready", None) for pod in svc.pods()]  # (name, kind, what Kubernetes says)
    return Indexes(isvcs=isvcs, deployments=deployments, pods=pods)  # type: ignore[arg-type]  # plain dicts stand in for kopf.Index


class Spans:
    """Wraps a callable to record how long each call took (bench instrumentation; a few microseconds)."""

    def __init__(self, inner: Callable[..., Any]) -> None:
        self.inner = inner
        self.spans: list[tuple[float, float]] = []
        self.last: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        started, self.last = time.perf_counter(), None
        try:
            self.last = self.inner(*args, **kwargs)
            return self.last
        finally:
            self.spans.append((started, time.perf_counter()))

    def total(self, since: float) -> float:
        return sum(end - start for start, end in self.spans if start >= since)


class QueryTimer:
    """Wraps the client's instant_query to time each query by name."""

    def __init__(self, client: Any) -> None:
        self.inner = client.instant_query
        self.times: dict[str, list[float]] = {}
        self.recording = True
        client.instant_query = self

    def __call__(self, promql: str, *, at: datetime, timeout: float, name: str = "query") -> list[Any]:
        started = time.perf_counter()
        try:
            return list(self.inner(promql, at=at, timeout=timeout, name=name))
        finally:
            if self.recording:
                self.times.setdefault(name, []).append(time.perf_counter() - started)


@dataclass
class TickResult:
    seconds: float
    views: float  # building the ServiceViews (parsing every spec), while the queries run
    fetch: float  # fetch_all, from the start of the tick to its answer (parsed into signals)
    plan: float  # plan_service for every service
    pod_load: float  # the per-pod load query, sent at the first scale-down, while the rest are planned
    services: int
    with_signals: int
    plans: list[Any] = field(repr=False)


class Ticker:
    """Runs the operator's own `handlers.plan_tick` (the tick up to its writes) on one event loop, timing its parts."""

    def __init__(self, signals: Any, config: Any, indexes: Indexes) -> None:
        from inferscale import handlers
        from inferscale.autoscaler import plan_service

        self.handlers, self.signals, self.config, self.indexes = handlers, signals, config, indexes
        self.loop = asyncio.new_event_loop()
        self.fetch_all = signals.fetch_all = Spans(signals.fetch_all)
        self.pod_load = signals.pod_load = Spans(signals.pod_load)
        self.plan_service = Spans(plan_service)
        real_views = handlers.service_views
        self.views = Spans(lambda indexes: iter(list(real_views(indexes))))
        setattr(handlers, "plan_service", self.plan_service)  # noqa: B010 (the name plan_tick calls)
        handlers.service_views = self.views
        self.logger = logging.getLogger("bench.tick")

    def tick(self) -> TickResult:
        started = time.perf_counter()
        planned = self.loop.run_until_complete(
            self.handlers.plan_tick(self.signals, self.config, self.indexes, self.logger)
        )
        done = time.perf_counter()
        if planned is None:
            raise SystemExit("bench: plan_tick found no service to plan")
        found = self.fetch_all.last
        if not isinstance(found, dict):
            raise SystemExit("bench: fetch_all failed (see the warning above); the figures would mean nothing")
        fetched = max(end for start, end in self.fetch_all.spans if start >= started)
        keys = [(view.isvc.metadata.namespace, view.isvc.metadata.name) for _, view, _ in planned.plans]
        return TickResult(
            seconds=done - started,
            views=self.views.total(started),
            fetch=fetched - started,
            plan=self.plan_service.total(started),
            pod_load=self.pod_load.total(started),
            services=len(planned.plans),
            with_signals=sum(1 for key in keys if key in found),
            plans=[plan for _, _, plan in planned.plans],
        )

    def close(self) -> None:
        self.loop.run_until_complete(self.loop.shutdown_default_executor())
        self.loop.close()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# --- main --------------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process `pid` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_pressure_us() -> float | None:
    """Microseconds some runnable task waited for a CPU, machine-wide (Linux PSI), or None if unknown."""
    try:
        some = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    return float(some.rsplit("total=", 1)[1])


def wait_for_quiet(limit: float, seconds: float) -> str:
    """Wait up to `seconds` for three 1 s spells in a row with CPU pressure below `limit`; say how it went."""
    started, calm = time.monotonic(), 0
    last = cpu_pressure_us()
    if last is None:
        return "CPU pressure unknown (no /proc/pressure/cpu)"
    while time.monotonic() - started < seconds:
        time.sleep(1.0)
        now = cpu_pressure_us() or last
        calm = calm + 1 if (now - last) / 1e6 < limit else 0
        last = now
        if calm >= 3:
            return f"machine quiet (CPU pressure < {limit:.0%}) after {time.monotonic() - started:.0f}s"
    return f"machine still busy after {seconds:.0f}s (CPU pressure >= {limit:.0%}); measuring anyway"


def run(args: argparse.Namespace, workdir: Path, started_at: float) -> str:
    from inferscale.config import OperatorConfig
    from inferscale.prometheus import PrometheusSignals

    services = fleet(args.services, args.replicas_per_service, args.tgi_share)
    tgi = sum(1 for s in services if s.engine == "tgi")
    kinds = ", ".join(f"{count} {kind}" for kind, count in Counter(s.kind for s in services).most_common())
    print(
        f"fleet: {len(services)} services ({len(services) - tgi} vLLM, {tgi} TGI; {kinds}) "
        f"x {args.replicas_per_service} replicas; {os.cpu_count()} CPUs",
        flush=True,
    )
    exporters: list[subprocess.Popen[str]] = []
    prometheus: Prometheus | None = None
    try:
        ports = []
        total_samples = 0
        for shard in range(args.exporters):
            process, port, samples = start_exporter(args, shard)
            exporters.append(process)
            ports.append(port)
            total_samples += samples
        targets = [f"127.0.0.1:{port}" for port in ports]
        print(f"exporters: {args.exporters} processes serving {total_samples} series", flush=True)

        prometheus = start_prometheus(workdir, targets, targets, args.scrape_seconds)
        print(
            f"prometheus: {prometheus.url}, scraping every {args.scrape_seconds:g}s; "
            f"query window {args.window_seconds}s",
            flush=True,
        )
        wanted_targets = 2 * len(targets)
        wait_for(
            "every target to be scraped",
            lambda: (prometheus.scalar("sum(up)") or 0) >= wanted_targets,
            timeout=60 + 3 * args.scrape_seconds,
            interval=0.5,
        )
        # A window of samples for rate() and the p95s; checked on the gauges (every pod has one).
        needed = max(2, int(args.window_seconds / args.scrape_seconds) - 1)
        selector = f'{{__name__=~"{promql.VLLM_WAITING}|{promql.TGI_QUEUE_SIZE}"}}'
        probe = f"min(count_over_time({selector}[{args.window_seconds}s]))"
        filling = time.monotonic()
        scrapers: list[subprocess.Popen[Any]] = [prometheus.process, *exporters]
        scraping = [cpu_seconds(p.pid) for p in scrapers]
        time.sleep(args.window_seconds - args.scrape_seconds)
        wait_for(
            f"{needed} samples of every series within the {args.window_seconds}s window",
            lambda: (prometheus.scalar(probe) or 0) >= needed,
            timeout=4 * args.scrape_seconds + 30,
            interval=0.5,
        )
        head = prometheus.self_metric("prometheus_tsdb_head_series")
        print(f"filled: {head:.0f} series in Prometheus after {time.monotonic() - started_at:.0f}s", flush=True)
        seconds = time.monotonic() - filling
        used = [cpu_seconds(p.pid) - b for p, b in zip(scrapers, scraping, strict=True)]
        print(
            f"scraping alone took {used[0] / seconds:.2f} CPUs in Prometheus and {sum(used[1:]) / seconds:.2f} "
            f"in the exporters (the last {seconds:.0f}s of filling)",
            flush=True,
        )

        config = OperatorConfig(
            prometheus_url=prometheus.url,
            ttft_window_seconds=args.window_seconds,
            stale_after_seconds=SCALING.stale_after_seconds,
        )
        prometheus_config = config.prometheus()
        assert prometheus_config is not None
        indexes = kopf_indexes(services, datetime.now(UTC))
        if args.quiet_wait > 0:
            print(wait_for_quiet(0.1, args.quiet_wait), flush=True)
        with PrometheusSignals(prometheus_config, options=config.query_options()) as signals:
            timer = QueryTimer(signals.client)
            timer.recording = False
            ticker = Ticker(signals, config, indexes)
            warm = ticker.tick()
            print(f"warm-up tick: {warm.seconds:.3f}s", flush=True)
            timer.recording = True
            before = prometheus.self_metric("prometheus_http_requests_total", handler="/api/v1/query")
            gc_before = prometheus.self_metric("go_gc_duration_seconds_count")
            allocated_before = prometheus.self_metric("go_memstats_alloc_bytes_total")
            pressure_before, wall_before = cpu_pressure_us(), time.monotonic()
            results, cpu = [], []
            for _ in range(args.ticks):
                own, theirs = time.process_time(), cpu_seconds(prometheus.process.pid)
                results.append(ticker.tick())
                cpu.append((time.process_time() - own, cpu_seconds(prometheus.process.pid) - theirs))
            pressure_after, wall_after = cpu_pressure_us(), time.monotonic()
            ticker.close()
            time.sleep(0.2)  # Prometheus counts a request once its handler has returned
            after = prometheus.self_metric("prometheus_http_requests_total", handler="/api/v1/query")
            gc_cycles = prometheus.self_metric("go_gc_duration_seconds_count") - gc_before
            allocated = prometheus.self_metric("go_memstats_alloc_bytes_total") - allocated_before
            timer.recording = False
            queries = (after - before) / args.ticks
            client_queries = sum(len(v) for v in timer.times.values()) / args.ticks

            for number, (result, (own_cpu, prom_cpu)) in enumerate(zip(results, cpu, strict=True), 1):
                print(
                    f"tick {number}: {result.seconds:.3f}s: fetch_all {result.fetch:.3f} (views {result.views:.3f} "
                    f"meanwhile), then plan_service x{result.services} {result.plan:.3f} (pod_load "
                    f"{result.pod_load:.3f} meanwhile); CPU: this process {own_cpu:.2f}s, Prometheus {prom_cpu:.2f}s",
                    flush=True,
                )
            print(
                f"Prometheus during the ticks: {allocated / args.ticks / 1e6:.0f} MB allocated per tick, "
                f"{gc_cycles:.0f} garbage collections in {args.ticks} ticks",
                flush=True,
            )
            if pressure_before is not None and pressure_after is not None:
                share = (pressure_after - pressure_before) / 1e6 / (wall_after - wall_before)
                print(f"CPU pressure during the ticks: {share:.0%} (some task waiting for a CPU)", flush=True)
            last = results[-1]
            if last.with_signals < last.services:
                print(f"WARNING: only {last.with_signals} of {last.services} services had signals", flush=True)
            reasons = Counter(plan.decision.reason.value for plan in last.plans)
            print(f"decisions: {', '.join(f'{n} {reason}' for reason, n in reasons.most_common())}", flush=True)

            print("per query: within the ticks (median; 4 at once) | alone (sequential, median of 3)", flush=True)
            alone: dict[str, list[float]] = {}
            now = datetime.now(UTC)
            for query in signals.queries:
                for _ in range(3):
                    t0 = time.perf_counter()
                    signals.client.instant_query(query.promql, at=now, timeout=30, name=query.name)
                    alone.setdefault(query.name, []).append(time.perf_counter() - t0)
            for name, times in sorted(timer.times.items(), key=lambda item: -statistics.median(item[1])):
                solo = f"{statistics.median(alone[name]):6.3f}s" if name in alone else "      -"
                print(f"  {name:26s} {statistics.median(times):6.3f}s | {solo}", flush=True)

        tick_seconds = statistics.median(r.seconds for r in results)
        print(
            f"queries per tick: {queries:g} counted by Prometheus ({client_queries:g} sent by the client); "
            f"tick_seconds: median of {args.ticks}; rss_mb: this process's peak RSS (ru_maxrss)",
            flush=True,
        )
        rss = peak_rss_mb()
        return f"services={args.services} queries={queries:g} tick_seconds={tick_seconds:.3f} rss_mb={rss:.0f}"
    except BaseException:
        if prometheus is not None and prometheus.process.poll() is not None:
            print(f"Prometheus' log:\n{prometheus.log_tail()}", file=sys.stderr)
        raise
    finally:
        if prometheus is not None:
            prometheus.stop()
        for process in exporters:
            if process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.close()
        for process in exporters:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
            stop_process(process)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--services", type=int, default=1000, help="InferenceServices (1000)")
    parser.add_argument("--replicas-per-service", type=int, default=2, help="engine pods per service (2)")
    parser.add_argument("--tgi-share", type=float, default=0.25, help="share of services on TGI (0.25)")
    parser.add_argument("--scrape-seconds", type=float, default=5.0, help="Prometheus' scrape interval (5)")
    parser.add_argument(
        "--window-seconds", type=int, default=None, help="rate() and p95 window of the queries (8 scrape intervals)"
    )
    parser.add_argument("--ticks", type=int, default=3, help="measured ticks; the median is reported (3)")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=60.0,
        help="before the ticks, wait up to this long for other work on the machine to calm down (60; 0: no)",
    )
    parser.add_argument("--exporters", type=int, default=4, help="exporter processes sharing the fleet (4)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (Prometheus' data, log)")
    parser.add_argument("--serve-shard", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_shard is not None:
        args.shard = args.serve_shard
        return serve_shard(args)
    if not 1 <= args.services <= 100_000 or args.replicas_per_service < 1 or not 0 <= args.tgi_share <= 1:
        parser.error("--services 1..100000, --replicas-per-service >= 1, --tgi-share 0..1")
    if args.window_seconds is None:
        args.window_seconds = round(8 * args.scrape_seconds)
    if not 1 <= args.scrape_seconds <= 60 or args.window_seconds < 3 * args.scrape_seconds:
        parser.error("--scrape-seconds 1..60, and --window-seconds must cover at least 3 scrapes")
    if args.ticks < 1 or args.exporters < 1:
        parser.error("--ticks and --exporters must be at least 1")
    if not PROMETHEUS.is_file():
        parser.error(f"{PROMETHEUS} is missing: apt-get install -y prometheus (or `make deps`)")

    def terminate(signum: int, _: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, terminate)
    started_at = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="inferscale-bench-tick-"))
    try:
        line = run(args, workdir, started_at)
    except KeyboardInterrupt:
        print("bench: interrupted; processes stopped", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"total {time.monotonic() - started_at:.0f}s")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
