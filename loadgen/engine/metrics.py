"""The simulated engine's Prometheus metrics, named, typed, labelled and bucketed as each engine does.

SGLang (``SglangMetrics``) and llama.cpp (``LlamacppMetrics``) are described at their classes. The names the
operator reads are ``inferscale.promql``'s constants (one spelling for the reader and this writer); the
histograms' buckets are defined here and only here (the fleet simulator and ``harness.testing`` use them).

vLLM (``VllmMetrics``) follows ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``) and, like vLLM,
renders through ``prometheus_client`` (so counters gain ``_total`` and series carry ``model_name`` and
``engine`` labels). Three layouts are selectable, by the vLLM release they match:

* ``0.10``: ``vllm:gpu_cache_usage_perc`` (deprecated in 0.9) beside ``vllm:kv_cache_usage_perc``, the
  ``vllm:gpu_prefix_cache_*`` counters, and ``vllm:time_per_output_token_seconds`` for inter-token latency.
* ``0.11`` (default): ``vllm:inter_token_latency_seconds`` and ``vllm:request_time_per_output_token_seconds``
  added; ``vllm:time_per_output_token_seconds`` still shown, marked deprecated (vllm-project/vllm PR #24110,
  "Deprecate TPOT in favor of ITL", deprecated from 0.11); ``gpu_cache_usage_perc`` gone.
* ``0.12``: as 0.11 without ``vllm:time_per_output_token_seconds`` (hidden in 0.12, removed in 0.13 by
  PR #32661).

TGI (``TgiMetrics``) follows the router of text-generation-inference v3 (``router/src/server.rs``, the
``metrics::`` calls and ``PrometheusBuilder`` bucket set-up, commit 003eaec0fbe0; metric list in
``docs/source/reference/metrics.md``). TGI renders with the Rust ``metrics-exporter-prometheus`` crate:
no ``_total`` suffix on counters, no model label, and histogram buckets of

* every metric ending in ``duration``: 35 buckets, ``0.0001 * 1.5**k`` for k = 1..35,
* ``tgi_request_input_length``: ``max_input_tokens / 100 * k`` for k = 1..100,
* ``tgi_request_generated_tokens`` and ``tgi_request_max_new_tokens``: ``max_total_tokens / 100 * k``,
* ``tgi_batch_next_size``: 1..1024.

TGI has no time-to-first-token histogram; queue and inference durations are what it offers. Real TGI only
exposes a series after its first update; the simulator exposes every series from the start, at zero.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import prometheus_client
from inferscale import promql
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from loadgen.engine.model import EngineSnapshot, FinishReason, Step

__all__ = [
    "TGI_REQUEST_COUNT",
    "VLLM_HELP",
    "VLLM_METRICS_VERSIONS",
    "EngineMetrics",
    "LlamacppMetrics",
    "RequestTimeline",
    "SglangMetrics",
    "TgiMetrics",
    "VllmMetrics",
    "tgi_duration_buckets",
    "vllm_1_2_5_buckets",
]

VLLM_METRICS_VERSIONS = ("0.10", "0.11", "0.12")


@dataclass(slots=True, eq=False)
class RequestTimeline:
    """What happened to one request, in engine seconds; the engine metrics are computed from it."""

    request_id: str
    prompt_tokens: int
    max_tokens: int
    arrival: float
    scheduled: float | None = None
    """First time the request entered the running batch."""
    first_token: float | None = None
    last_token: float | None = None
    finished: float | None = None
    generated: int = 0
    finish_reason: FinishReason | None = None
    preemptions: int = 0
    cached_tokens: int = 0
    """Prompt tokens the prefix cache served at its first scheduling."""


class EngineMetrics(Protocol):
    """Sink for engine activity that renders the ``/metrics`` page."""

    def request_received(self) -> None: ...

    def request_accepted(self, timeline: RequestTimeline) -> None: ...

    def request_rejected(self, error_kind: str) -> None: ...

    def step(self, step: Step) -> None: ...

    def first_token(self, timeline: RequestTimeline) -> None: ...

    def token(self, timeline: RequestTimeline, gap_s: float | None) -> None:
        """An output token; ``gap_s`` is the time since the previous one (``None`` for the first)."""

    def preempted(self, timeline: RequestTimeline) -> None: ...

    def finished(self, timeline: RequestTimeline) -> None: ...

    def render(self, snapshot: EngineSnapshot) -> tuple[bytes, str]: ...


# --- vLLM ----------------------------------------------------------------------------------------------

# vLLM's HELP text of the families the operator reads (vllm/v1/metrics/loggers.py), which the fakes in
# harness.testing and bench/tick.py serve too.
VLLM_HELP = {
    promql.VLLM_WAITING: "Number of requests waiting to be processed.",
    promql.VLLM_RUNNING: "Number of requests in model execution batches.",
    promql.VLLM_KV_CACHE_OLD: (
        "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead."
    ),
    promql.VLLM_KV_CACHE: "KV-cache usage. 1 means 100 percent usage.",
    promql.VLLM_PROMPT_TOKENS: "Number of prefill tokens processed.",
    promql.VLLM_GENERATION_TOKENS: "Number of generation tokens processed.",
    promql.VLLM_REQUEST_SUCCESS: "Count of successfully processed requests.",
    promql.VLLM_TTFT: "Histogram of time to first token in seconds.",
    promql.VLLM_QUEUE_TIME: "Histogram of time spent in WAITING phase for request.",
    promql.VLLM_PREFILL_TIME: "Histogram of time spent in PREFILL phase for request.",
}
# vllm/v1/metrics/loggers.py
VLLM_TTFT_BUCKETS = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
    80.0, 160.0, 640.0, 2560.0,
]  # fmt: skip
_VLLM_TOKEN_LATENCY_BUCKETS = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
]  # fmt: skip
VLLM_REQUEST_LATENCY_BUCKETS = [
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
    960.0, 1920.0, 7680.0,
]  # fmt: skip
_VLLM_ITERATION_TOKEN_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]


def vllm_1_2_5_buckets(max_value: int) -> list[int]:
    """vLLM's ``build_1_2_5_buckets``: 1, 2, 5, 10, 20, 50, ... up to ``max_value``."""
    buckets: list[int] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return buckets
            buckets.append(value)
        exponent += 1


class _Quiet:
    """No-op defaults for the EngineMetrics events an engine's metrics do not count."""

    def request_received(self) -> None:
        return None

    def request_accepted(self, timeline: RequestTimeline) -> None:
        return None

    def request_rejected(self, error_kind: str) -> None:
        return None

    def step(self, step: Step) -> None:
        return None

    def preempted(self, timeline: RequestTimeline) -> None:
        return None


class VllmMetrics(_Quiet):
    """vLLM V1's ``/metrics`` for one engine (``engine="0"``) serving ``model_name``."""

    def __init__(
        self,
        *,
        model_name: str,
        max_model_len: int,
        block_size: int,
        num_gpu_blocks: int,
        version: str = "0.11",
        prefix_caching: bool = True,
    ) -> None:
        if version not in VLLM_METRICS_VERSIONS:
            raise ValueError(
                f"unknown vLLM metrics version {version!r}; choose one of {', '.join(VLLM_METRICS_VERSIONS)}"
            )
        self.version = version
        self.prefix_caching = prefix_caching
        self.registry = CollectorRegistry(auto_describe=True)
        names = ["model_name", "engine"]
        values = (model_name, "0")
        reg = self.registry
        legacy = version == "0.10"

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, names, registry=reg).labels(*values)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, names, registry=reg).labels(*values)

        def histogram(name: str, doc: str, buckets: Sequence[float]) -> Histogram:
            return Histogram(name, doc, names, buckets=buckets, registry=reg).labels(*values)

        self.running = gauge(promql.VLLM_RUNNING, VLLM_HELP[promql.VLLM_RUNNING])
        self.waiting = gauge(promql.VLLM_WAITING, VLLM_HELP[promql.VLLM_WAITING])
        self.gpu_cache_usage: Gauge | None = None
        if legacy:
            self.gpu_cache_usage = gauge(
                promql.VLLM_KV_CACHE_OLD,
                VLLM_HELP[promql.VLLM_KV_CACHE_OLD],
            )
            self.gpu_prefix_queries = counter(
                "vllm:gpu_prefix_cache_queries",
                "GPU prefix cache queries, in terms of number of queriedtokens. "
                "DEPRECATED: Use vllm:prefix_cache_queries instead.",
            )
            self.gpu_prefix_hits = counter(
                "vllm:gpu_prefix_cache_hits",
                "GPU prefix cache hits, in terms of number of cached tokens. "
                "DEPRECATED: Use vllm:prefix_cache_hits instead.",
            )
        self.kv_cache_usage = gauge(promql.VLLM_KV_CACHE, VLLM_HELP[promql.VLLM_KV_CACHE])
        self.prefix_queries = counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."
        )
        self.prefix_hits = counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
        self.preemptions = counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter(promql.VLLM_PROMPT_TOKENS, VLLM_HELP[promql.VLLM_PROMPT_TOKENS])
        self.generation_tokens = counter(promql.VLLM_GENERATION_TOKENS, VLLM_HELP[promql.VLLM_GENERATION_TOKENS])
        success = Counter(
            promql.VLLM_REQUEST_SUCCESS,
            VLLM_HELP[promql.VLLM_REQUEST_SUCCESS],
            [*names, "finished_reason"],
            registry=reg,
        )
        self.success = {reason: success.labels(*values, reason) for reason in ("stop", "length", "abort")}

        token_buckets = vllm_1_2_5_buckets(max_model_len)
        self.request_prompt_tokens = histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", token_buckets
        )
        self.request_generation_tokens = histogram(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", token_buckets
        )
        self.iteration_tokens = histogram(
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            _VLLM_ITERATION_TOKEN_BUCKETS,
        )
        self.max_num_generation_tokens = histogram(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            token_buckets,
        )
        self.params_n = histogram("vllm:request_params_n", "Histogram of the n request parameter.", [1, 2, 5, 10, 20])
        self.params_max_tokens = histogram(
            "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", token_buckets
        )
        self.ttft = histogram(promql.VLLM_TTFT, VLLM_HELP[promql.VLLM_TTFT], VLLM_TTFT_BUCKETS)
        self.itl: Histogram | None = None
        self.tpot: Histogram | None = None
        self.request_tpot: Histogram | None = None
        if version != "0.10":
            self.itl = histogram(
                "vllm:inter_token_latency_seconds",
                "Histogram of inter-token latency in seconds.",
                _VLLM_TOKEN_LATENCY_BUCKETS,
            )
        if version in ("0.10", "0.11"):
            doc = "Histogram of time per output token in seconds."
            if version == "0.11":
                doc += "DEPRECATED: Use vllm:inter_token_latency_seconds instead."
            self.tpot = histogram("vllm:time_per_output_token_seconds", doc, _VLLM_TOKEN_LATENCY_BUCKETS)
        if version != "0.10":
            self.request_tpot = histogram(
                "vllm:request_time_per_output_token_seconds",
                "Histogram of time_per_output_token_seconds per request.",
                _VLLM_TOKEN_LATENCY_BUCKETS,
            )
        self.e2e = histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            VLLM_REQUEST_LATENCY_BUCKETS,
        )
        self.queue_time = histogram(
            promql.VLLM_QUEUE_TIME,
            VLLM_HELP[promql.VLLM_QUEUE_TIME],
            VLLM_REQUEST_LATENCY_BUCKETS,
        )
        self.inference_time = histogram(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            VLLM_REQUEST_LATENCY_BUCKETS,
        )
        self.prefill_time = histogram(
            promql.VLLM_PREFILL_TIME,
            VLLM_HELP[promql.VLLM_PREFILL_TIME],
            VLLM_REQUEST_LATENCY_BUCKETS,
        )
        self.decode_time = histogram(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            VLLM_REQUEST_LATENCY_BUCKETS,
        )
        info = Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            ["block_size", "cache_dtype", "enable_prefix_caching", "num_gpu_blocks", "engine"],
            registry=reg,
        )
        info.labels(str(block_size), "auto", str(prefix_caching), str(num_gpu_blocks), "0").set(1)

    def step(self, step: Step) -> None:
        tokens = step.prefill_tokens + step.sampled
        for _ in range(step.count):
            self.iteration_tokens.observe(tokens)

    def first_token(self, timeline: RequestTimeline) -> None:
        assert timeline.first_token is not None
        self.ttft.observe(timeline.first_token - timeline.arrival)
        self.prompt_tokens.inc(timeline.prompt_tokens)
        # Counted as vLLM's PrefixCacheStats counts a request's first lookup (kv_cache_manager.py
        # get_computed_blocks): queries are its tokens, hits those found cached; 0 with caching off.
        if self.prefix_caching:
            self.prefix_queries.inc(timeline.prompt_tokens)
            self.prefix_hits.inc(timeline.cached_tokens)
            if self.gpu_cache_usage is not None:
                self.gpu_prefix_queries.inc(timeline.prompt_tokens)
                self.gpu_prefix_hits.inc(timeline.cached_tokens)

    def token(self, timeline: RequestTimeline, gap_s: float | None) -> None:
        self.generation_tokens.inc()
        if gap_s is None:
            return
        if self.itl is not None:
            self.itl.observe(gap_s)
        if self.tpot is not None:
            self.tpot.observe(gap_s)

    def preempted(self, timeline: RequestTimeline) -> None:
        self.preemptions.inc()

    def finished(self, timeline: RequestTimeline) -> None:
        assert timeline.finished is not None and timeline.finish_reason is not None
        self.success[timeline.finish_reason.value].inc()
        self.e2e.observe(timeline.finished - timeline.arrival)
        scheduled = timeline.scheduled if timeline.scheduled is not None else timeline.finished
        self.queue_time.observe(scheduled - timeline.arrival)
        last = timeline.last_token if timeline.last_token is not None else timeline.finished
        first = timeline.first_token if timeline.first_token is not None else last
        self.prefill_time.observe(first - scheduled)
        self.inference_time.observe(last - scheduled)
        self.decode_time.observe(last - first)
        self.request_prompt_tokens.observe(timeline.prompt_tokens)
        self.request_generation_tokens.observe(timeline.generated)
        self.max_num_generation_tokens.observe(timeline.generated)
        self.params_n.observe(1)
        self.params_max_tokens.observe(timeline.max_tokens)
        if self.request_tpot is not None and timeline.generated > 1:
            self.request_tpot.observe((last - first) / (timeline.generated - 1))

    def render(self, snapshot: EngineSnapshot) -> tuple[bytes, str]:
        self.running.set(snapshot.running)
        self.waiting.set(snapshot.waiting)
        self.kv_cache_usage.set(snapshot.kv_usage)
        if self.gpu_cache_usage is not None:
            self.gpu_cache_usage.set(snapshot.kv_usage)
        return prometheus_client.generate_latest(self.registry), prometheus_client.CONTENT_TYPE_LATEST


# --- TGI -----------------------------------------------------------------------------------------------


# Every request TGI received (the operator reads tgi_request_success; the fakes serve both).
TGI_REQUEST_COUNT = "tgi_request_count"


def tgi_duration_buckets() -> list[float]:
    """TGI's buckets for every ``*duration`` histogram: 35 steps of x1.5 from 0.0001 s (first is 0.00015)."""
    buckets: list[float] = []
    value = 0.0001
    for _ in range(35):
        value *= 1.5
        buckets.append(value)
    return buckets


def _rust_number(value: float) -> str:
    """Format a number as Rust's ``f64`` Display does (``1`` not ``1.0``; no exponent)."""
    if value == float("inf"):
        return "+Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        text = f"{value:.20f}".rstrip("0")
    return text


class _Kind(enum.StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


@dataclass(slots=True)
class _Family:
    name: str
    help: str
    kind: _Kind
    label_name: str | None = None
    buckets: list[float] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)
    bucket_counts: dict[str, list[int]] = field(default_factory=dict)
    sums: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def ensure(self, label: str = "") -> None:
        if self.kind is _Kind.HISTOGRAM:
            if label not in self.bucket_counts:
                self.bucket_counts[label] = [0] * len(self.buckets)
                self.sums[label] = 0.0
                self.counts[label] = 0
        else:
            self.values.setdefault(label, 0.0)

    def inc(self, amount: float = 1.0, label: str = "") -> None:
        self.ensure(label)
        self.values[label] += amount

    def set(self, value: float, label: str = "") -> None:
        self.values[label] = value

    def observe(self, value: float, label: str = "", count: int = 1) -> None:
        self.ensure(label)
        counts = self.bucket_counts[label]
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                counts[i] += count
        self.sums[label] += value * count
        self.counts[label] += count

    def render(self, out: list[str]) -> None:
        out.append(f"# HELP {self.name} {self.help}")
        out.append(f"# TYPE {self.name} {self.kind.value}")
        for label in sorted(self.values if self.kind is not _Kind.HISTOGRAM else self.bucket_counts):
            sel = f'{self.label_name}="{label}"' if self.label_name else ""
            if self.kind is _Kind.HISTOGRAM:
                prefix = sel + "," if sel else ""
                for bound, cnt in zip(self.buckets, self.bucket_counts[label], strict=True):
                    out.append(f'{self.name}_bucket{{{prefix}le="{_rust_number(bound)}"}} {cnt}')
                out.append(f'{self.name}_bucket{{{prefix}le="+Inf"}} {self.counts[label]}')
                braces = f"{{{sel}}}" if sel else ""
                out.append(f"{self.name}_sum{braces} {_rust_number(self.sums[label])}")
                out.append(f"{self.name}_count{braces} {self.counts[label]}")
            else:
                braces = f"{{{sel}}}" if sel else ""
                out.append(f"{self.name}{braces} {_rust_number(self.values[label])}")
        out.append("")


class TgiMetrics:
    """TGI v3 router's ``/metrics`` for a server with the given token limits."""

    CONTENT_TYPE = "text/plain; charset=utf-8"

    def __init__(self, *, max_input_tokens: int, max_total_tokens: int, max_batch_total_tokens: int) -> None:
        self.max_batch_total_tokens = max_batch_total_tokens
        self._families: dict[str, _Family] = {}
        dur = tgi_duration_buckets()
        inputs = [max_input_tokens / 100 * (k + 1) for k in range(100)]
        totals = [max_total_tokens / 100 * (k + 1) for k in range(100)]
        batch_sizes = [float(k + 1) for k in range(1024)]
        c, g, h = _Kind.COUNTER, _Kind.GAUGE, _Kind.HISTOGRAM
        self._add(TGI_REQUEST_COUNT, "Total number of requests", c)
        self._add(promql.TGI_REQUEST_SUCCESS, "Number of successful requests", c)
        self._add("tgi_request_failure", "Failed requests per error type", c, label_name="err")
        self._add("tgi_batch_inference_count", "Inference calls per method (prefill or decode)", c, "method")
        self._add(
            "tgi_batch_inference_success",
            "Number of successful inference calls per method (prefill or decode)",
            c,
            "method",
        )
        self._add(promql.TGI_QUEUE_SIZE, "Current queue size", g)
        self._add(promql.TGI_BATCH_SIZE, "Current batch size", g)
        self._add("tgi_batch_current_max_tokens", "Maximum tokens for the current batch", g)
        self._add("tgi_batch_total_tokens", "Maximum amount of tokens in total.", g)
        self._add("tgi_request_duration", "Total time spent processing the request", h, buckets=dur)
        self._add("tgi_request_validation_duration", "Time spent validating the request", h, buckets=dur)
        self._add(promql.TGI_QUEUE_DURATION, "Time spent in the queue per request", h, buckets=dur)
        self._add("tgi_request_inference_duration", "Request inference duration", h, buckets=dur)
        self._add("tgi_request_mean_time_per_token_duration", "Mean time per token per request", h, buckets=dur)
        self._add(promql.TGI_INPUT_LENGTH, "Input token length per request", h, buckets=inputs)
        self._add("tgi_request_max_new_tokens", "Maximum new tokens per request", h, buckets=totals)
        self._add(promql.TGI_GENERATED_TOKENS, "Generated tokens per request", h, buckets=totals)
        self._add(promql.TGI_BATCH_INFERENCE_DURATION, "Batch inference duration", h, "method", dur)
        self._add(
            "tgi_batch_forward_duration", "Batch forward duration per method (prefill or decode)", h, "method", dur
        )
        self._add("tgi_batch_next_size", "Batch size of the next batch", h, buckets=batch_sizes)
        for name in ("tgi_batch_inference_count", "tgi_batch_inference_success"):
            for method in ("prefill", "decode"):
                self._families[name].ensure(method)
        for name in (promql.TGI_BATCH_INFERENCE_DURATION, "tgi_batch_forward_duration"):
            for method in ("prefill", "decode"):
                self._families[name].ensure(method)
        self._families["tgi_batch_total_tokens"].set(max_batch_total_tokens)

    def _add(
        self,
        name: str,
        doc: str,
        kind: _Kind,
        label_name: str | None = None,
        buckets: list[float] | None = None,
    ) -> None:
        family = _Family(name=name, help=doc, kind=kind, label_name=label_name, buckets=buckets or [])
        if label_name is None:
            family.ensure()
        self._families[name] = family

    def family(self, name: str) -> _Family:
        """The family called ``name`` (for tests)."""
        return self._families[name]

    def request_received(self) -> None:
        self._families[TGI_REQUEST_COUNT].inc()

    def request_accepted(self, timeline: RequestTimeline) -> None:
        self._families[promql.TGI_INPUT_LENGTH].observe(timeline.prompt_tokens)
        self._families["tgi_request_max_new_tokens"].observe(timeline.max_tokens)

    def request_rejected(self, error_kind: str) -> None:
        self._families["tgi_request_failure"].inc(label=error_kind)

    def step(self, step: Step) -> None:
        f = self._families
        if step.prefill_tokens:
            for _ in range(step.count):
                f["tgi_batch_next_size"].observe(step.prefill_seqs)
            self._batch_call("prefill", step.prefill_s, step.count)
        if step.decode_seqs:
            self._batch_call("decode", step.decode_s, step.count)

    def _batch_call(self, method: str, seconds: float, count: int) -> None:
        f = self._families
        f["tgi_batch_inference_count"].inc(count, method)
        f["tgi_batch_inference_success"].inc(count, method)
        f[promql.TGI_BATCH_INFERENCE_DURATION].observe(seconds, method, count)
        f["tgi_batch_forward_duration"].observe(seconds, method, count)

    def first_token(self, timeline: RequestTimeline) -> None:
        return None

    def token(self, timeline: RequestTimeline, gap_s: float | None) -> None:
        return None

    def preempted(self, timeline: RequestTimeline) -> None:
        return None

    def finished(self, timeline: RequestTimeline) -> None:
        if timeline.finish_reason is not FinishReason.LENGTH or timeline.finished is None:
            return  # TGI records nothing for a request whose client went away
        f = self._families
        start = timeline.scheduled if timeline.scheduled is not None else timeline.arrival
        inference = timeline.finished - start
        f[promql.TGI_REQUEST_SUCCESS].inc()
        f["tgi_request_duration"].observe(timeline.finished - timeline.arrival)
        f["tgi_request_validation_duration"].observe(0.0)
        f[promql.TGI_QUEUE_DURATION].observe(start - timeline.arrival)
        f["tgi_request_inference_duration"].observe(inference)
        f["tgi_request_mean_time_per_token_duration"].observe(inference / max(1, timeline.generated))
        f[promql.TGI_GENERATED_TOKENS].observe(timeline.generated)

    def render(self, snapshot: EngineSnapshot) -> tuple[bytes, str]:
        f = self._families
        f[promql.TGI_QUEUE_SIZE].set(snapshot.waiting)
        f[promql.TGI_BATCH_SIZE].set(snapshot.running)
        f["tgi_batch_current_max_tokens"].set(snapshot.batch_max_tokens)
        out: list[str] = []
        for kind in (_Kind.COUNTER, _Kind.GAUGE, _Kind.HISTOGRAM):
            for name in sorted(f):
                if f[name].kind is kind:
                    f[name].render(out)
        return "\n".join(out).encode(), self.CONTENT_TYPE


# --- SGLang --------------------------------------------------------------------------------------------

# python/sglang/srt/metrics/collector.py (TokenizerMetricsCollector and SchedulerMetricsCollector defaults),
# read at main commit 00ae9c1; the same names and buckets back to the 0.4 series.
SGLANG_TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
SGLANG_E2E_BUCKETS = [
    0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400,
]  # fmt: skip
SGLANG_ITL_BUCKETS = [
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200,
    0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
]  # fmt: skip
SGLANG_QUEUE_TIME_BUCKETS = [
    0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600,
    700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000,
]  # fmt: skip


class SglangMetrics(_Quiet):
    """SGLang's ``/metrics`` (``--enable-metrics``) for one unified (not disaggregated) server, TP rank 0.

    Two collectors write it, as in SGLang: the scheduler's gauges and queue-time histogram carry
    ``model_name``, ``engine_type``, ``tp_rank``, ``pp_rank`` and ``moe_ep_rank``; the tokenizer manager's
    request counters and latency histograms carry ``model_name``. Token and request counters move when a
    request finishes (``observe_one_finished_request``); the queue time is observed when a request is
    scheduled. Real SGLang shows a labelled series only once it is first updated; the simulator shows every
    series from the start, at zero.
    """

    def __init__(self, *, model_name: str, max_total_num_tokens: int, block_size: int) -> None:
        self.block_size = block_size
        self.registry = CollectorRegistry(auto_describe=True)
        reg = self.registry
        sched = {"model_name": model_name, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
        tok = {"model_name": model_name}

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, list(sched), registry=reg).labels(**sched)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, list(tok), registry=reg).labels(**tok)

        def histogram(name: str, doc: str, buckets: Sequence[float], labels: dict[str, str]) -> Histogram:
            return Histogram(name, doc, list(labels), buckets=buckets, registry=reg).labels(**labels)

        self.num_running_reqs = gauge(promql.SGLANG_RUNNING, "The number of running requests.")
        self.num_used_tokens = gauge("sglang:num_used_tokens", "The number of used tokens.")
        self.token_usage = gauge(promql.SGLANG_TOKEN_USAGE, "The token usage.")
        self.gen_throughput = gauge("sglang:gen_throughput", "The generation throughput (token/s).")
        self.num_queue_reqs = gauge(promql.SGLANG_QUEUE, "The number of requests in the waiting queue.")
        self.cache_hit_rate = gauge("sglang:cache_hit_rate", "The prefix cache hit rate.")
        self.max_total_num_tokens = gauge(
            "sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."
        )
        self.max_total_num_tokens.set(max_total_num_tokens)
        self.queue_time = histogram(
            promql.SGLANG_QUEUE_TIME, "Histogram of queueing time in seconds.", SGLANG_QUEUE_TIME_BUCKETS, sched
        )
        self.prompt_tokens = counter(promql.SGLANG_PROMPT_TOKENS, "Number of prefill tokens processed.")
        self.generation_tokens = counter(promql.SGLANG_GENERATION_TOKENS, "Number of generation tokens processed.")
        self.cached_tokens = counter("sglang:cached_tokens", "Number of cached prompt tokens.")
        self.num_requests = counter(promql.SGLANG_REQUESTS, "Number of requests processed.")
        self.num_aborted = counter("sglang:num_aborted_requests", "Number of requests aborted.")
        self.ttft = histogram(
            promql.SGLANG_TTFT,
            "Histogram of time to first token in seconds.",
            SGLANG_TTFT_BUCKETS,
            tok,
        )
        self.itl = histogram(
            "sglang:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            SGLANG_ITL_BUCKETS,
            tok,
        )
        self.e2e = histogram(
            "sglang:e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            SGLANG_E2E_BUCKETS,
            tok,
        )
        self._prompt_seen = 0
        self._cached_seen = 0
        self._generated = 0
        self._generated_at = 0.0

    def first_token(self, timeline: RequestTimeline) -> None:
        assert timeline.first_token is not None
        self.ttft.observe(timeline.first_token - timeline.arrival)
        scheduled = timeline.scheduled if timeline.scheduled is not None else timeline.first_token
        self.queue_time.observe(scheduled - timeline.arrival)
        self._prompt_seen += timeline.prompt_tokens
        self._cached_seen += timeline.cached_tokens

    def token(self, timeline: RequestTimeline, gap_s: float | None) -> None:
        self._generated += 1
        if gap_s is not None:
            self.itl.observe(gap_s)

    def finished(self, timeline: RequestTimeline) -> None:
        assert timeline.finished is not None
        if timeline.finish_reason is FinishReason.ABORT:
            self.num_aborted.inc()
            return
        self.prompt_tokens.inc(timeline.prompt_tokens)
        self.generation_tokens.inc(timeline.generated)
        if timeline.cached_tokens > 0:
            self.cached_tokens.inc(timeline.cached_tokens)
        self.num_requests.inc()
        self.e2e.observe(timeline.finished - timeline.arrival)

    def render(self, snapshot: EngineSnapshot) -> tuple[bytes, str]:
        self.num_running_reqs.set(snapshot.running)
        self.num_queue_reqs.set(snapshot.waiting)
        self.token_usage.set(round(snapshot.kv_usage, 2))  # the scheduler logs it rounded to 2 places
        self.num_used_tokens.set(snapshot.kv_used_blocks * self.block_size)
        self.cache_hit_rate.set(self._cached_seen / self._prompt_seen if self._prompt_seen else 0.0)
        elapsed = snapshot.t - self._generated_at
        if elapsed > 0:
            self.gen_throughput.set(self._generated / elapsed)
            self._generated, self._generated_at = 0, snapshot.t
        return prometheus_client.generate_latest(self.registry), prometheus_client.CONTENT_TYPE_LATEST


# --- llama.cpp -----------------------------------------------------------------------------------------


def _cpp_number(value: float) -> str:
    """A value as llama-server writes it: a double through a C++ ostream (6 significant digits, ``%g``)."""
    return f"{value:g}"


class LlamacppMetrics(_Quiet):
    """llama-server's ``/metrics`` (``--metrics``), from ``tools/server/server.cpp`` at a late-2025 master.

    Plain text, no labels, no histograms: seven counters and four gauges, each line written as
    ``llamacpp:<name> <value>`` with ``# HELP``/``# TYPE`` before it, counters first. The throughput gauges
    cover the time since the previous scrape (the server resets its per-interval bucket when it answers).
    ``n_busy_slots_per_decode`` is declared a counter, as the server declares it, though it is a mean.
    """

    CONTENT_TYPE = "text/plain; version=0.0.4"

    def __init__(self) -> None:
        self.prompt_tokens_total = 0
        self.prompt_ms_total = 0.0
        self.predicted_total = 0
        self.predicted_ms_total = 0.0
        self.decode_total = 0
        self.busy_slots_total = 0
        self.tokens_max = 0
        # Since the last scrape.
        self._prompt_tokens = 0
        self._prompt_ms = 0.0
        self._predicted = 0
        self._predicted_ms = 0.0

    def step(self, step: Step) -> None:
        # One llama_decode() per step; every slot in the batch is busy for it.
        self.decode_total += step.count
        self.busy_slots_total += (step.decode_seqs + step.prefill_seqs) * step.count

    def first_token(self, timeline: RequestTimeline) -> None:
        assert timeline.first_token is not None
        scheduled = timeline.scheduled if timeline.scheduled is not None else timeline.first_token
        # The slot evaluates the prompt tokens not already in its cache.
        evaluated = timeline.prompt_tokens - timeline.cached_tokens
        ms = (timeline.first_token - scheduled) * 1e3
        self.prompt_tokens_total += evaluated
        self.prompt_ms_total += ms
        self._prompt_tokens += evaluated
        self._prompt_ms += ms

    def token(self, timeline: RequestTimeline, gap_s: float | None) -> None:
        self.predicted_total += 1
        self._predicted += 1
        self.tokens_max = max(self.tokens_max, timeline.prompt_tokens + timeline.generated)

    def finished(self, timeline: RequestTimeline) -> None:
        if timeline.first_token is None or timeline.last_token is None:
            return
        ms = (timeline.last_token - timeline.first_token) * 1e3
        self.predicted_ms_total += ms
        self._predicted_ms += ms

    def render(self, snapshot: EngineSnapshot) -> tuple[bytes, str]:
        counters = [
            ("prompt_tokens_total", "Number of prompt tokens processed.", self.prompt_tokens_total),
            # The server truncates milliseconds to an integer before dividing by 1e3.
            ("prompt_seconds_total", "Prompt process time", int(self.prompt_ms_total) / 1e3),
            ("tokens_predicted_total", "Number of generation tokens processed.", self.predicted_total),
            ("tokens_predicted_seconds_total", "Predict process time", int(self.predicted_ms_total) / 1e3),
            ("n_decode_total", "Total number of llama_decode() calls", self.decode_total),
            ("n_tokens_max", "Largest observed n_tokens.", self.tokens_max),
            (
                "n_busy_slots_per_decode",
                "Average number of busy slots per llama_decode() call",
                self.busy_slots_total / max(self.decode_total, 1),
            ),
        ]
        gauges = [
            (
                "prompt_tokens_seconds",
                "Average prompt throughput in tokens/s.",
                1e3 / self._prompt_ms * self._prompt_tokens if self._prompt_tokens and self._prompt_ms else 0.0,
            ),
            (
                "predicted_tokens_seconds",
                "Average generation throughput in tokens/s.",
                1e3 / self._predicted_ms * self._predicted if self._predicted and self._predicted_ms else 0.0,
            ),
            ("requests_processing", "Number of requests processing.", snapshot.running),
            ("requests_deferred", "Number of requests deferred.", snapshot.waiting),
        ]
        self._prompt_tokens, self._prompt_ms, self._predicted, self._predicted_ms = 0, 0.0, 0, 0.0
        lines = []
        for kind, metrics in (("counter", counters), ("gauge", gauges)):
            for name, doc, value in metrics:
                lines += [
                    f"# HELP llamacpp:{name} {doc}",
                    f"# TYPE llamacpp:{name} {kind}",
                    f"llamacpp:{name} {_cpp_number(float(value))}",
                ]
        return ("\n".join(lines) + "\n").encode(), self.CONTENT_TYPE
