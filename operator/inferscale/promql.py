"""Pure PromQL for the scaling tick: the fixed query set, and its answers turned into signals.

One tick sends the same fifteen queries whatever the number of InferenceServices: one per
signal, with three for p95 TTFT (measured for vLLM, derived for TGI, measured for SGLang:
their histograms have different buckets, which one histogram_quantile cannot mix) and two for
p95 prefill time (vLLM's and TGI's), and one for freshness, each aggregated
`by (namespace, service)`, so one answer covers every service. vLLM, TGI, SGLang, llama.cpp
and DCGM feed the same signal names; an engine without a signal leaves it missing. Nothing here talks to a
server; `prometheus` sends the queries and hands the answers back to `parse_signals`.

Freshness: every sample of one scrape carries the scrape's time, so one timestamp per
source (the engine's waiting gauge, DCGM's utilisation) dates all the signals from it;
per service it is the oldest replica's. A signal older than `max_sample_age_seconds`, or
whose source has no timestamp (its target died: gauges vanish at once, but rate() and
histogram_quantile() keep answering from the window), is stale and not used. A mean or a
quantile over a window in which nothing finished is 0/0 (NaN): missing, not an error.

Queue wait versus prefill: only the time a request waits for a free batch slot is cut by
adding replicas; prefill time (prompt length, model, GPU) is not. Both are means over the
window, `sum(rate(X_sum)) / sum(rate(X_count))` per service, which a histogram gives exactly
whatever its buckets; prefill also has its p95 (QueryOptions.ttft_quantile, like TTFT). A
service running both engines (while it moves between them) gets one mean over both.

Metric names, read in the engines' sources (bump these notes with DEFAULT_IMAGES in api):

vLLM, `vllm/v1/metrics/loggers.py` (PrometheusStatLogger; the V0 `vllm/engine/metrics.py`
uses the same names). Read at v0.8 (V1 engine), v0.10, v0.11 (our default image, v0.11.0)
and main (0.12 development). Every series carries `model_name` and `engine` labels.
  vllm:num_requests_waiting          gauge
  vllm:num_requests_running          gauge
  vllm:kv_cache_usage_perc           gauge, 0..1; new in 0.9.2
  vllm:gpu_cache_usage_perc          gauge, 0..1; the same value under its old name, deprecated
                                     in 0.9.2, hidden from 0.11 (--show-hidden-metrics-for-version
                                     =0.10 brings it back) and gone after; both are read
  vllm:time_to_first_token_seconds   histogram, buckets 0.001 .. 2560 s
  vllm:request_success_total         counter, one series per `finished_reason`
  vllm:prompt_tokens_total           counter
  vllm:generation_tokens_total       counter
  vllm:request_queue_time_seconds    histogram, buckets 0.3 .. 7680 s (see below)
  vllm:request_prefill_time_seconds  histogram, the same buckets
The last two came to V1 with vllm-project/vllm PR #12644 ("[V1][Metrics] Add several request
timing histograms", February 2025; V0 had the same names), so from 0.8 on, and are unchanged in
name, type and buckets in the 0.8-, 0.10- and main-era loggers.py read: the 21 buckets of
`request_latency_buckets` [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120,
240, 480, 960, 1920, 7680], shared with e2e, inference and decode time (on main the list is
REQUEST_LATENCY_BUCKETS in `vllm/v1/metrics/buckets.py`). Both are observed once per request
when it finishes, from the engine core's timestamps (`vllm/v1/metrics/stats.py`,
update_from_finished_request): queue time = first SCHEDULED - QUEUED, the wait in the engine
core's scheduler queue (time spent before the engine core, e.g. tokenising in the API server,
is in TTFT only); prefill time = first token - first SCHEDULED, including chunked-prefill steps
shared with other requests and any preemption during prefill. Being recorded at the finish,
both describe requests that finished in the window and lag a backlog still waiting (as TGI's
queue histogram does; queue_depth shows that backlog). As the first bucket is 0.3 s,
quantiles below it are interpolated in (0, 0.3] and say little; the means are exact.

TGI, `router/src/server.rs` and `backends/v3/src/{queue,backend}.rs`, read at 2.x and 3.x
(our default image is 3.3.4). TGI exports through the Rust metrics-exporter-prometheus:
counters have no `_total` suffix, and every `*_duration` histogram has 35 geometric buckets
0.0001 s x 1.5^k (k = 1..35). Request histograms are recorded when a request finishes.
  tgi_queue_size                     gauge, requests waiting
  tgi_batch_current_size             gauge, requests in the running batch
  tgi_request_queue_duration         histogram, seconds from entering the queue (after
                                     validation) to joining a batch, i.e. before its prefill
                                     (server.rs: `start - queued`); successful requests only
  tgi_batch_inference_duration       histogram per batch, label method="prefill"|"decode"
  tgi_request_success                counter
  tgi_request_input_length           histogram of prompt tokens per request
  tgi_request_generated_tokens       histogram of generated tokens per request
TGI exports no time-to-first-token histogram and no KV-cache gauge. p95 TTFT is derived as
p95(queue duration) + p95(prefill batch duration), the same sum TGI's own Grafana
dashboard (assets/tgi_grafana.json, "Time to first token") shows. It is an approximation:
it leaves out validation and tokenisation, the queue histogram lags (requests record it
when they finish), and a sum of two p95s is not the p95 of the sum (it is usually a little
higher, so it errs towards scaling up). Signals built from it say `ttft_derived=True`.

TGI has no per-request prefill time either. Its prefill signals come from
`tgi_batch_inference_duration{method="prefill"}`: one observation per prefill call
(backends/v3/src/backend.rs, prefill()), the router's wall time from sending a batch of newly
admitted requests to the shards until their first tokens are sent on and finished requests
filtered out, recorded when the call ends. That is what each request of the batch waited
from joining it to its first token, so it is the right quantity, but counted per batch, not
per request: the mean and p95 weight a prefill of one request the same as one of thirty;
with 3.x's chunked prefill, a long prompt split over several calls counts as several shorter
prefills (understating its own), and a call may also carry the running batch's decode step
(overstating a little). `tgi_batch_forward_duration{method="prefill"}` (the shards' forward
pass alone, `timings.forward`) leaves out sampling and the gRPC round trip, which a request
waits for as well, so it is not used. A service's TGI prefill signals say
`ttft_derived=True` too, when it has a TTFT: read them as per batch.

SGLang, `python/sglang/srt/metrics/collector.py`, read at main (commit 00ae9c1, 0.5.x era; the
names, types and TTFT buckets below are the same back to 0.4.x; our default image is v0.5.4).
Exported only with `--enable-metrics` (render passes it), through prometheus_client: counters
gain `_total`. Scheduler series carry `model_name`, `engine_type`, `tp_rank`, `pp_rank` and
`moe_ep_rank` labels (only the first scheduler exports, unless
--enable-metrics-for-all-schedulers); tokenizer-side series carry `model_name`.
  sglang:num_queue_reqs              gauge, requests in the waiting queue
  sglang:num_running_reqs            gauge, requests in the running batch
  sglang:token_usage                 gauge, 0..1, share of the KV pool's tokens in use
  sglang:time_to_first_token_seconds histogram, buckets 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6,
                                     8, 10, 20, 40, 60, 80, 100, 200, 400 s (a p95 below 0.1 s is
                                     interpolated in (0, 0.1] and says little)
  sglang:queue_time_seconds          histogram, the wait from entering the scheduler's waiting
                                     queue to joining a forward batch (TimeStats
                                     get_queueing_time), observed when the request is scheduled;
                                     buckets 0, 0.1, 0.2, 0.5, 1, 2, ... 3000 s
  sglang:num_requests_total          counter, requests finished
  sglang:prompt_tokens_total         counter
  sglang:generation_tokens_total     counter
SGLang has no per-request prefill histogram, so its prefill signals are missing.

llama.cpp, `tools/server/server.cpp` (the /metrics handler), read at a late-2025 master (our
default image is server-b7100). Exported only with `--metrics` (render passes it), as plain
lines with no labels and no histograms at all:
  llamacpp:requests_deferred         gauge, requests waiting for a free slot
  llamacpp:requests_processing       gauge, slots busy
  llamacpp:prompt_tokens_total       counter
  llamacpp:tokens_predicted_total    counter
  llamacpp:n_decode_total            counter, llama_decode() calls
  (and prompt_seconds_total, tokens_predicted_seconds_total, n_tokens_max,
  n_busy_slots_per_decode, prompt_tokens_seconds, predicted_tokens_seconds)
With no latency histogram and no request counter, a llama.cpp service has no TTFT, queue
time, prefill time or request rate: those signals are missing by design, and the policy is
told so (policy.Observation.ttft_exported) and sizes it on queue depth and busy slots.

DCGM exporter, `internal/pkg/transformation/const.go` (3.x, 4.x): DCGM_FI_DEV_GPU_UTIL is a
gauge in percent (0..100) per GPU with `gpu`, `UUID`, `device`, `modelName`, `Hostname`, and
with its Kubernetes mapping on, the `pod`, `namespace` and `container` using the GPU
(`pod_name`/`pod_namespace` with --use-old-namespace; `exported_pod`/`exported_namespace`
when scraped without honor_labels). It is joined to a service through the engine pods'
own series, so the engine scrape must carry the pod name in a `pod` label as well as
`namespace` and `service` (see QueryOptions).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator

from inferscale.settings import SCALING

# --- metric names -------------------------------------------------------------------

VLLM_WAITING = "vllm:num_requests_waiting"
VLLM_RUNNING = "vllm:num_requests_running"
VLLM_KV_CACHE = "vllm:kv_cache_usage_perc"
VLLM_KV_CACHE_OLD = "vllm:gpu_cache_usage_perc"
VLLM_TTFT = "vllm:time_to_first_token_seconds"
VLLM_REQUEST_SUCCESS = "vllm:request_success_total"
VLLM_PROMPT_TOKENS = "vllm:prompt_tokens_total"
VLLM_GENERATION_TOKENS = "vllm:generation_tokens_total"
VLLM_QUEUE_TIME = "vllm:request_queue_time_seconds"
VLLM_PREFILL_TIME = "vllm:request_prefill_time_seconds"

TGI_QUEUE_SIZE = "tgi_queue_size"
TGI_BATCH_SIZE = "tgi_batch_current_size"
TGI_QUEUE_DURATION = "tgi_request_queue_duration"
TGI_BATCH_INFERENCE_DURATION = "tgi_batch_inference_duration"
TGI_REQUEST_SUCCESS = "tgi_request_success"
TGI_INPUT_LENGTH = "tgi_request_input_length"
TGI_GENERATED_TOKENS = "tgi_request_generated_tokens"

SGLANG_QUEUE = "sglang:num_queue_reqs"
SGLANG_RUNNING = "sglang:num_running_reqs"
SGLANG_TOKEN_USAGE = "sglang:token_usage"
SGLANG_TTFT = "sglang:time_to_first_token_seconds"
SGLANG_QUEUE_TIME = "sglang:queue_time_seconds"
SGLANG_REQUESTS = "sglang:num_requests_total"
SGLANG_PROMPT_TOKENS = "sglang:prompt_tokens_total"
SGLANG_GENERATION_TOKENS = "sglang:generation_tokens_total"

LLAMACPP_DEFERRED = "llamacpp:requests_deferred"
LLAMACPP_PROCESSING = "llamacpp:requests_processing"
LLAMACPP_PROMPT_TOKENS = "llamacpp:prompt_tokens_total"
LLAMACPP_PREDICTED_TOKENS = "llamacpp:tokens_predicted_total"

# Each engine's waiting and running gauges, in one order: what every engine has.
WAITING_GAUGES = (VLLM_WAITING, TGI_QUEUE_SIZE, SGLANG_QUEUE, LLAMACPP_DEFERRED)
RUNNING_GAUGES = (VLLM_RUNNING, TGI_BATCH_SIZE, SGLANG_RUNNING, LLAMACPP_PROCESSING)
KV_CACHE_GAUGES = (VLLM_KV_CACHE, VLLM_KV_CACHE_OLD, SGLANG_TOKEN_USAGE)

DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"

PREFILL = '{method="prefill"}'

# The label the freshness query adds to say which scrape a timestamp is of.
SOURCE_LABEL = "source"


_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class Signal(StrEnum):
    """A per-service signal; the value is the ServiceSignals field that holds it."""

    QUEUE_DEPTH = "queue_depth"
    RUNNING_REQUESTS = "running_requests"
    KV_CACHE_USAGE = "kv_cache_usage"
    TTFT_P95_SECONDS = "ttft_p95_seconds"
    REQUEST_RATE = "request_rate"
    PROMPT_TOKENS_RATE = "prompt_tokens_rate"
    GENERATION_TOKENS_RATE = "generation_tokens_rate"
    QUEUE_TIME_SECONDS = "queue_time_seconds"
    PREFILL_TIME_SECONDS = "prefill_time_seconds"
    PREFILL_P95_SECONDS = "prefill_p95_seconds"
    GPU_UTILIZATION_PERCENT = "gpu_utilization_percent"


class Source(StrEnum):
    """Where a signal's samples are scraped from; all of one pod's samples share a scrape time."""

    ENGINE = "engine"
    DCGM = "dcgm"


ServiceKey = tuple[str, str]
"""(namespace, InferenceService name)."""


class QueryOptions(BaseModel):
    """What the queries look at: the window, the quantile, and the label names Prometheus uses."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    window_seconds: Annotated[
        int, Field(ge=2, le=3600, description="Range of rate() and of the TTFT histogram; a few scrape intervals.")
    ] = SCALING.ttft_window_seconds
    ttft_quantile: Annotated[
        float, Field(gt=0, lt=1, description="Quantile of TTFT reported, and of prefill time (to compare them).")
    ] = 0.95
    max_sample_age_seconds: Annotated[
        float, Field(gt=0, le=3600, description="A signal whose oldest sample is older than this is stale.")
    ] = SCALING.stale_after_seconds
    namespace_label: str = "namespace"
    service_label: str = "service"
    pod_label: str = "pod"
    dcgm_namespace_label: str = "namespace"
    dcgm_pod_label: str = "pod"

    @field_validator("namespace_label", "service_label", "pod_label", "dcgm_namespace_label", "dcgm_pod_label")
    @classmethod
    def _label_name(cls, value: str) -> str:
        if not _LABEL_NAME.match(value) or value.startswith("__"):
            raise ValueError(
                f"{value!r} is not a Prometheus label name: use letters, digits and '_', "
                "not starting with a digit or '__'"
            )
        return value


@dataclass(frozen=True)
class SignalQuery:
    """One PromQL instant query of the tick. `signal` is None for the freshness query."""

    name: str
    signal: Signal | None
    promql: str


# Query names besides the signals' own.
TTFT_DERIVED = "ttft_p95_seconds_derived"
TTFT_SGLANG = "ttft_p95_seconds_sglang"
PREFILL_P95_TGI = "prefill_p95_seconds_tgi"
FRESHNESS = "freshness"

# Signals with more than one query (one per histogram layout): the answer is the worst,
# since several exist only while a service moves between engines.
_SECOND_QUERIES: dict[str, Signal] = {
    TTFT_DERIVED: Signal.TTFT_P95_SECONDS,
    TTFT_SGLANG: Signal.TTFT_P95_SECONDS,
    PREFILL_P95_TGI: Signal.PREFILL_P95_SECONDS,
}


class _PromQL:
    """Builds the query text for one set of options."""

    def __init__(self, options: QueryOptions) -> None:
        self.o = options
        self.window = f"{options.window_seconds}s"
        self.by = f"{options.namespace_label}, {options.service_label}"

    # Selectors carry no `service!=""` matcher: in Prometheus that matcher merges the
    # postings of every service, for every selector, which costs more than it saves.
    # Series without the label fall into a group with no service and are dropped when
    # parsed.

    def rate(self, metric: str) -> str:
        return f"rate({metric}[{self.window}])"

    def quantile(self, histogram: str, matcher: str = "") -> str:
        buckets = self.rate(f"{histogram}_bucket{matcher}")
        return f"histogram_quantile({self.o.ttft_quantile}, sum by ({self.by}, le) ({buckets}))"

    def sum_by(self, expr: str) -> str:
        return f"sum by ({self.by}) ({expr})"

    def rates(self, *counters: str) -> str:
        """The per-service rate of whichever engine's counter a pod exports."""
        return self.sum_by(" or ".join(self.rate(counter) for counter in counters))

    def mean(self, *histograms: str) -> str:
        """Mean of an observation over the window, from any engine's histogram (0/0 = NaN when none).

        Each histogram is a name, with a matcher where it needs one (`name{method="prefill"}`).
        """

        def part(suffix: str) -> str:
            rates = []
            for histogram in histograms:
                name, brace, matcher = histogram.partition("{")
                rates.append(self.rate(f"{name}_{suffix}{brace}{matcher}"))
            return self.sum_by(" or ".join(rates))

        return f"{part('sum')} / {part('count')}"

    def engine_pods(self) -> str:
        """One series (value 1) per engine pod, carrying its namespace, pod and service."""
        o = self.o
        return f"group by ({o.namespace_label}, {o.pod_label}, {o.service_label}) ({' or '.join(RUNNING_GAUGES)})"

    def to_service(self, dcgm: str) -> str:
        """DCGM per-GPU series (values kept) labelled with the service of the pod using the GPU."""
        o = self.o
        if o.dcgm_pod_label != o.pod_label:
            dcgm = f'label_replace({dcgm}, "{o.pod_label}", "$1", "{o.dcgm_pod_label}", "(.+)")'
        if o.dcgm_namespace_label != o.namespace_label:
            dcgm = f'label_replace({dcgm}, "{o.namespace_label}", "$1", "{o.dcgm_namespace_label}", "(.+)")'
        # group_left copies the service label from the engine pod (replacing, e.g., the
        # `service` a ServiceMonitor puts on the exporter's own series).
        return f"{dcgm} * on ({o.namespace_label}, {o.pod_label}) group_left ({o.service_label}) {self.engine_pods()}"

    def dcgm_selector(self) -> str:
        return f'{DCGM_GPU_UTIL}{{{self.o.dcgm_pod_label}!=""}}'

    # -- the queries ------------------------------------------------------------------

    def queries(self) -> list[SignalQuery]:
        o = self.o
        # Within one pod, `a or b` keeps a: series are matched on all labels but the name.
        # Across pods nothing matches, so vLLM and TGI replicas of a service add up.
        rates = self.rates
        values = {
            Signal.QUEUE_DEPTH: self.sum_by(" or ".join(WAITING_GAUGES)),
            Signal.RUNNING_REQUESTS: self.sum_by(" or ".join(RUNNING_GAUGES)),
            # Prefer the new name where a pod exports both (vLLM 0.9.2 - 0.10). llama.cpp has none.
            Signal.KV_CACHE_USAGE: f"avg by ({self.by}) ({' or '.join(KV_CACHE_GAUGES)})",
            Signal.TTFT_P95_SECONDS: self.quantile(VLLM_TTFT),
            Signal.REQUEST_RATE: rates(VLLM_REQUEST_SUCCESS, TGI_REQUEST_SUCCESS, SGLANG_REQUESTS),
            Signal.PROMPT_TOKENS_RATE: rates(
                VLLM_PROMPT_TOKENS, f"{TGI_INPUT_LENGTH}_sum", SGLANG_PROMPT_TOKENS, LLAMACPP_PROMPT_TOKENS
            ),
            Signal.GENERATION_TOKENS_RATE: rates(
                VLLM_GENERATION_TOKENS,
                f"{TGI_GENERATED_TOKENS}_sum",
                SGLANG_GENERATION_TOKENS,
                LLAMACPP_PREDICTED_TOKENS,
            ),
            # Means from _sum/_count: exact whatever the buckets (vLLM's start at 0.3 s).
            Signal.QUEUE_TIME_SECONDS: self.mean(VLLM_QUEUE_TIME, TGI_QUEUE_DURATION, SGLANG_QUEUE_TIME),
            Signal.PREFILL_TIME_SECONDS: self.mean(VLLM_PREFILL_TIME, TGI_BATCH_INFERENCE_DURATION + PREFILL),
            Signal.PREFILL_P95_SECONDS: self.quantile(VLLM_PREFILL_TIME),
            Signal.GPU_UTILIZATION_PERCENT: (
                f"avg by ({o.namespace_label}, {o.service_label}) ({self.to_service(self.dcgm_selector())})"
            ),
        }
        queries = [SignalQuery(signal.value, signal, promql) for signal, promql in values.items()]
        # TGI's TTFT is its own query, so Prometheus can evaluate it alongside vLLM's.
        derived = f"{self.quantile(TGI_QUEUE_DURATION)} + {self.quantile(TGI_BATCH_INFERENCE_DURATION, PREFILL)}"
        queries.insert(4, SignalQuery(TTFT_DERIVED, Signal.TTFT_P95_SECONDS, derived))
        queries.insert(5, SignalQuery(TTFT_SGLANG, Signal.TTFT_P95_SECONDS, self.quantile(SGLANG_TTFT)))
        # So is TGI's prefill p95: one histogram_quantile over both engines' buckets would
        # mix two bucket layouts into nonsense for a service running both.
        tgi_prefill = self.quantile(TGI_BATCH_INFERENCE_DURATION, PREFILL)
        after = next(i for i, q in enumerate(queries) if q.signal is Signal.PREFILL_P95_SECONDS) + 1
        queries.insert(after, SignalQuery(PREFILL_P95_TGI, Signal.PREFILL_P95_SECONDS, tgi_prefill))
        queries.append(SignalQuery(FRESHNESS, None, self.freshness()))
        return queries

    def freshness(self) -> str:
        """Per service and source, the timestamp of the oldest replica's latest scrape.

        Every sample of one scrape carries the scrape's time, so one gauge per engine
        stands for all of that engine's series (and DCGM's for GPU utilisation). When a
        target dies its gauges go at once, while rate() and histogram_quantile() keep
        answering from the window; the missing timestamp is what marks those stale.
        timestamp() gives a sample's own time only when applied straight to a selector.
        """
        stamps = " or ".join(f"timestamp({gauge})" for gauge in WAITING_GAUGES)
        engine = f"min by ({self.by}) ({stamps})"
        dcgm = f"min by ({self.by}) ({self.to_service(f'timestamp({self.dcgm_selector()})')})"
        return (
            f'label_replace({engine}, "{SOURCE_LABEL}", "{Source.ENGINE}", "", "") or '
            f'label_replace({dcgm}, "{SOURCE_LABEL}", "{Source.DCGM}", "", "")'
        )


SIGNAL_SOURCES: dict[Signal, Source] = {
    signal: Source.DCGM if signal is Signal.GPU_UTILIZATION_PERCENT else Source.ENGINE for signal in Signal
}


def build_queries(options: QueryOptions | None = None) -> tuple[SignalQuery, ...]:
    """The tick's fixed query set for all services: the signals' queries plus one for freshness."""
    return tuple(_PromQL(options or QueryOptions()).queries())


# --- results ------------------------------------------------------------------------


class ServiceSignals(BaseModel):
    """What Prometheus says about one InferenceService at one tick.

    A value is set only when it can be used: a signal with no series, a NaN or an
    infinite value is None and listed in `missing`; one whose samples are older than the
    allowed age (or gone, leaving only a rate over an old window) is None and listed in
    `stale`. `observed_at` holds, per signal, when its source was scraped, for the
    service's least recently scraped replica.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str
    service: str
    sampled_at: Annotated[datetime, Field(description="Evaluation time of the tick's queries.")]
    queue_depth: Annotated[float | None, Field(description="Requests waiting, summed over replicas.")] = None
    running_requests: Annotated[float | None, Field(description="Requests running, summed over replicas.")] = None
    kv_cache_usage: Annotated[float | None, Field(description="KV-cache usage 0..1, mean over replicas (vLLM).")] = None
    ttft_p95_seconds: Annotated[
        float | None, Field(description="p95 (QueryOptions.ttft_quantile) time to first token over the window.")
    ] = None
    ttft_derived: Annotated[
        bool | None, Field(description="True when TTFT is derived (TGI: queue + prefill), None without TTFT.")
    ] = None
    request_rate: Annotated[float | None, Field(description="Requests finished per second.")] = None
    prompt_tokens_rate: Annotated[float | None, Field(description="Prompt tokens per second.")] = None
    generation_tokens_rate: Annotated[float | None, Field(description="Generated tokens per second.")] = None
    queue_time_seconds: Annotated[
        float | None,
        Field(description="Mean wait in the engine's queue before prefill, of the requests finished in the window."),
    ] = None
    prefill_time_seconds: Annotated[
        float | None,
        Field(description="Mean prefill time over the window: per request for vLLM, per prefill batch for TGI."),
    ] = None
    prefill_p95_seconds: Annotated[
        float | None, Field(description="p95 (QueryOptions.ttft_quantile) of that prefill time over the window.")
    ] = None
    gpu_utilization_percent: Annotated[
        float | None, Field(description="DCGM GPU utilisation 0..100, mean over the service's GPUs.")
    ] = None
    observed_at: dict[Signal, datetime] = Field(default_factory=dict)
    missing: frozenset[Signal] = frozenset()
    stale: frozenset[Signal] = frozenset()

    @property
    def key(self) -> ServiceKey:
        return (self.namespace, self.service)

    def value(self, signal: Signal) -> float | None:
        result = getattr(self, signal.value)
        return None if result is None else float(result)

    def scraped_at(self, source: Source) -> datetime | None:
        """When the service's least recently scraped replica was scraped from `source`, if known."""
        for signal, from_source in SIGNAL_SOURCES.items():
            if from_source is source and signal in self.observed_at:
                return self.observed_at[signal]
        return None

    def age_seconds(self, signal: Signal) -> float | None:
        """Seconds between the oldest sample behind the signal and the tick, if known."""
        observed = self.observed_at.get(signal)
        return None if observed is None else (self.sampled_at - observed).total_seconds()

    def problems(self, signals: Iterable[Signal] | None = None) -> list[str]:
        """One phrase per unusable signal (of those asked about), for reasons and messages."""
        phrases = []
        for signal in signals if signals is not None else Signal:
            if signal in self.stale:
                age = self.age_seconds(signal)
                when = f"last sampled {age:.0f}s ago" if age is not None else "its series are gone"
                phrases.append(f"{signal.value} is stale ({when})")
            elif signal in self.missing:
                phrases.append(f"{signal.value} is missing")
        return phrases

    @classmethod
    def nothing_observed(cls, namespace: str, service: str, *, sampled_at: datetime) -> ServiceSignals:
        """Signals for a service Prometheus has no series for: every signal missing."""
        return cls(namespace=namespace, service=service, sampled_at=sampled_at, missing=frozenset(Signal))


def _shown(value: object) -> str:
    """A value out of an answer, as JSON and cut short, for a message about what was wrong with it."""
    text = json.dumps(value, default=repr)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _sample_problem(sample: object) -> str | None:
    """What makes `sample` not an instant-vector sample ({"metric": {...}, "value": [t, "v"]}), if anything."""
    if not isinstance(sample, dict):
        return f"it is {_shown(sample)}, not an object"
    metric, value = sample.get("metric"), sample.get("value")
    if not isinstance(metric, dict):
        return f"its metric is {_shown(metric)}, not an object of labels"
    for name, label in metric.items():
        if not isinstance(label, str):
            return f"its label {name} is {_shown(label)}, not a string"
    if not isinstance(value, list) or len(value) != 2:
        return f'its value is {_shown(value)}, not a [timestamp, "number"] pair'
    timestamp, number = value
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float):
        return f"its timestamp is {_shown(timestamp)}, not a number"
    if not isinstance(number, str) or not _is_number(number):
        return f"its value is {_shown(number)}, not a number in a string"
    return None


def _is_number(text: str) -> bool:
    """Whether Prometheus' text for a sample value reads as a float ("NaN" and "+Inf" do)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def answer_problem(result: object) -> str | None:
    """What makes `result` not the `data.result` of an instant-vector answer, in words; None if nothing.

    The first malformed sample is described, with how many others there are: enough to find it.
    """
    if not isinstance(result, list):
        return f"{_shown(result)} where a list of samples belongs"
    problems = [(index, problem) for index, sample in enumerate(result) if (problem := _sample_problem(sample))]
    if not problems:
        return None
    (index, problem), others = problems[0], len(problems) - 1
    more = f" ({others} more malformed)" if others else ""
    return f"sample {index + 1} of {len(result)}: {problem}{more}"


def _samples(result: list[Any], options: QueryOptions) -> Iterable[tuple[ServiceKey, dict[str, str], float]]:
    """(key, labels, value) for each sample of a checked instant-vector result that names a service."""
    for sample in result:
        labels, value = sample["metric"], sample["value"]
        namespace = labels.get(options.namespace_label)
        service = labels.get(options.service_label)
        if namespace and service:
            yield (namespace, service), labels, float(value[1])


def _checked(results: Mapping[str, object]) -> dict[str, list[Any]]:
    """The answers by query name, each an instant vector; ValueError naming the query and what is wrong."""
    for name, result in results.items():
        if (problem := answer_problem(result)) is not None:
            raise ValueError(f"query {name} answered {problem}")
    return {name: cast(list[Any], result) for name, result in results.items()}


def _scrape_time(seconds: float, sampled_at: datetime) -> datetime:
    """A freshness sample as a time; ValueError when it is no time Prometheus could have scraped at.

    A sample is never newer than the evaluation time; one from the future would keep the
    service's signals fresh for good.
    """
    try:
        scraped = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"query {FRESHNESS} answered {seconds:g}, which is not a Unix time") from None
    if scraped > sampled_at + timedelta(seconds=1):
        raise ValueError(f"query {FRESHNESS} answered a scrape at {scraped.isoformat()}, after the query's own time")
    return scraped


def parse_signals(
    results: Mapping[str, object],
    *,
    sampled_at: datetime,
    options: QueryOptions | None = None,
) -> dict[ServiceKey, ServiceSignals]:
    """Turn the answers to build_queries() (by query name) into signals per (namespace, service).

    `results[name]` is the `data.result` list of Prometheus' instant-query answer. Series
    without a namespace or service label are ignored. Services that appear in no answer
    are not in the returned dict (see ServiceSignals.nothing_observed). An answer that is
    not an instant vector, or has a malformed sample, is a ValueError that names the query
    and what is wrong: a tick must not act on part of an answer it cannot read.
    """
    options = options or QueryOptions()
    if sampled_at.tzinfo is None:
        raise ValueError("sampled_at must be timezone-aware (e.g. datetime.now(UTC))")
    answers = _checked(results)

    values: dict[ServiceKey, dict[Signal, float]] = {}
    derived: dict[ServiceKey, bool] = {}
    scraped: dict[ServiceKey, dict[Source, datetime]] = {}
    seen: set[ServiceKey] = set()

    for name, result in answers.items():
        if name == FRESHNESS:
            continue
        signal = _SECOND_QUERIES.get(name) or Signal(name)
        for key, _, number in _samples(result, options):
            seen.add(key)
            if not math.isfinite(number):
                continue
            current = values.setdefault(key, {})
            if signal in _SECOND_QUERIES.values():
                # Both answers exist only while a service moves between engines: report the worse.
                if signal not in current or number > current[signal]:
                    current[signal] = number
                    if signal is Signal.TTFT_P95_SECONDS:
                        derived[key] = name == TTFT_DERIVED
            else:
                current[signal] = number

    for key, labels, number in _samples(answers.get(FRESHNESS, []), options):
        seen.add(key)
        try:
            source = Source(labels.get(SOURCE_LABEL, ""))
        except ValueError:
            continue
        if math.isfinite(number):
            scraped.setdefault(key, {})[source] = _scrape_time(number, sampled_at)

    signals = {}
    for key in sorted(seen):
        fields: dict[str, Any] = {}
        missing: set[Signal] = set()
        stale: set[Signal] = set()
        times = scraped.get(key, {})
        observed = {signal: times[source] for signal, source in SIGNAL_SOURCES.items() if source in times}
        for signal in Signal:
            found = values.get(key, {}).get(signal)
            when = observed.get(signal)
            if found is None:
                missing.add(signal)
            elif when is None or (sampled_at - when).total_seconds() > options.max_sample_age_seconds:
                stale.add(signal)
            else:
                fields[signal.value] = found
        if Signal.TTFT_P95_SECONDS.value in fields:
            fields["ttft_derived"] = derived[key]
        signals[key] = ServiceSignals(
            namespace=key[0],
            service=key[1],
            sampled_at=sampled_at,
            observed_at=observed,
            missing=frozenset(missing),
            stale=frozenset(stale),
            **fields,
        )
    return signals


# --- per-pod load, asked only when some service scales down -----------------------


def pod_load_query(options: QueryOptions | None = None) -> str:
    """Requests in flight (running + waiting) per engine pod, for every service at once.

    Asked at most once per tick, and only when a service scales down: the pods with the
    least in flight get the lowest deletion cost, so they go first and drain fastest.
    """
    o = options or QueryOptions()
    by = f"{o.namespace_label}, {o.service_label}, {o.pod_label}"
    running, waiting = " or ".join(RUNNING_GAUGES), " or ".join(WAITING_GAUGES)
    return f"sum by ({by}) ({running}) + sum by ({by}) ({waiting})"


def parse_pod_load(result: object, options: QueryOptions | None = None) -> dict[ServiceKey, dict[str, float]]:
    """{(namespace, service): {pod: requests in flight}}; pods with a NaN value are left out.

    A malformed answer is a ValueError, as in parse_signals.
    """
    o = options or QueryOptions()
    loads: dict[ServiceKey, dict[str, float]] = {}
    for key, labels, value in _samples(_checked({"pod_load": result})["pod_load"], o):
        pod = labels.get(o.pod_label)
        if pod and math.isfinite(value):
            loads.setdefault(key, {})[pod] = value
    return loads
