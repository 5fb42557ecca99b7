"""Three autoscalers platform teams deploy for LLM serving today, as fleet-simulator policies.

Each follows its project's own rule and documented defaults (the sources are cited on each class) and runs
at its own loop interval: ``tick_s`` is how often the simulator must show it the fleet (``loadgen.fleet.compare``
sets ``FleetConfig.tick_s`` from it), which may be shorter than the loop that decides, when the rule reads
a window of samples (WVA's ``max_over_time[1m]``, KPA's 60 s and 6 s averages):

* ``wva-saturation``: llm-d's workload-variant-autoscaler, its default V1 saturation analyzer: per-replica
  peak KV-cache usage and queue length over the last minute; one replica more when the spare capacity of the
  non-saturated replicas runs low, one fewer when the load spread over one replica fewer would still leave
  enough; nothing while replicas are starting. Every 60 s, sampling the engines every 15 s (Prometheus).
* ``dynamo-planner``: NVIDIA Dynamo's planner in throughput-based (SLA) mode, aggregated engines: every
  180 s, ``ceil(predicted request rate / profiled per-engine rate at the SLO)``, the request count of the
  next interval predicted by its default load predictor (auto-ARIMA, implemented here in pure Python).
* ``knative-kpa``: Knative's KPA (which AIBrix's KPA ports): a concurrency target per pod, the 60 s stable
  and 6 s panic windows, panic at twice the ready pods, no scale-down while panicking, scale-up and
  scale-down rate limits; every 2 s.

Each is bounded by the InferenceService's replica bounds, as a user would configure the tool (WVA's
VariantAutoscaling min/max, Dynamo's GPU budget, Knative's min-scale/max-scale annotations).
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from loadgen.fleet.policies import Capacity
from loadgen.fleet.sim import FleetView, Scale

__all__ = [
    "ArimaPredictor",
    "DynamoPlanner",
    "KnativeKpa",
    "WvaAnalysis",
    "WvaSaturation",
    "WvaThresholds",
    "kpss_level",
    "ndiffs",
    "profiled_engine_rps",
    "wva_analyze",
]


def _bounded(replicas: int, low: int, high: int) -> int:
    return min(max(replicas, low), high)


# --- wva-saturation -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WvaThresholds:
    """WVA's V1 saturation thresholds, at their defaults.

    llm-d-incubation/workload-variant-autoscaler ``internal/config/saturation_scaling.go``
    (``DefaultKvCacheThreshold = 0.80``, ``DefaultQueueLengthThreshold = 5.0``, ``DefaultKvSpareTrigger =
    0.10``, ``DefaultQueueSpareTrigger = 3.0``; the same in the chart's ``values.yaml`` ``capacityScaling``)
    and ``internal/saturation/constants.go`` (``MinNonSaturatedReplicasForScaleDown = 2``; read in the fork
    vishakha-ramani/inferno-autoscaler, the same constant as llm-d's earlier ``internal/capacity`` package).
    """

    kv_cache_threshold: float = 0.80
    """A replica is saturated when its KV-cache usage is at least this."""
    queue_length_threshold: float = 5.0
    """... or when at least this many requests wait in it."""
    kv_spare_trigger: float = 0.10
    """Scale up when the non-saturated replicas' mean spare KV capacity is below this."""
    queue_spare_trigger: float = 3.0
    """... or their mean spare queue capacity is below this."""
    min_non_saturated_for_scale_down: int = 2


@dataclass(frozen=True, slots=True)
class WvaAnalysis:
    """What the analyzer concluded from the replicas' metrics (``ModelSaturationAnalysis``)."""

    replicas: int
    non_saturated: int
    spare_kv: float
    """Mean of ``kv_cache_threshold - usage`` over the non-saturated replicas (0 when there are none)."""
    spare_queue: float
    """Mean of ``queue_length_threshold - waiting`` over the non-saturated replicas (0 when there are none)."""
    scale_up: bool
    scale_down_safe: bool


def wva_analyze(kv_usage: Sequence[float], queue_length: Sequence[float], th: WvaThresholds) -> WvaAnalysis:
    """WVA's V1 ``AnalyzeModelSaturation`` for one variant: saturation, spare capacity, the two verdicts.

    llm-d-incubation/workload-variant-autoscaler ``internal/saturation/analyzer.go``: ``analyzeVariant``
    (saturated: ``kv >= kvCacheThreshold || queue >= queueLengthThreshold``; spare capacity averaged over the
    others), ``shouldScaleUp`` (``spareKv < kvSpareTrigger || spareQueue < queueSpareTrigger``; with no
    non-saturated replica both spares are 0, so it fires) and ``isScaleDownSafe`` (at least 2 non-saturated;
    their mean load times ``N / (N - 1)`` must leave both spares at or above the triggers).
    """
    spare_kv_sum = spare_queue_sum = 0.0
    non_saturated = 0
    for kv, queue in zip(kv_usage, queue_length, strict=True):
        if kv >= th.kv_cache_threshold or queue >= th.queue_length_threshold:
            continue
        spare_kv_sum += th.kv_cache_threshold - kv
        spare_queue_sum += th.queue_length_threshold - queue
        non_saturated += 1
    spare_kv = spare_kv_sum / non_saturated if non_saturated else 0.0
    spare_queue = spare_queue_sum / non_saturated if non_saturated else 0.0
    scale_up = spare_kv < th.kv_spare_trigger or spare_queue < th.queue_spare_trigger
    safe = False
    if non_saturated >= th.min_non_saturated_for_scale_down:
        factor = non_saturated / (non_saturated - 1)
        kv_after = th.kv_cache_threshold - (th.kv_cache_threshold - spare_kv) * factor
        queue_after = th.queue_length_threshold - (th.queue_length_threshold - spare_queue) * factor
        safe = kv_after >= th.kv_spare_trigger and queue_after >= th.queue_spare_trigger
    return WvaAnalysis(len(kv_usage), non_saturated, spare_kv, spare_queue, scale_up, safe)


class WvaSaturation:
    """``wva-saturation``: llm-d's workload-variant-autoscaler with its default V1 saturation analyzer.

    The rule (llm-d-incubation/workload-variant-autoscaler; ``analyzer.go`` read at commit 36587f8,
    ``engine.go`` at 6d152fa):

    * Signals: per pod, ``max_over_time(vllm:kv_cache_usage_perc[1m])`` and
      ``max_over_time(vllm:num_requests_waiting[1m])`` (``internal/collector/registration`` saturation
      queries; llm-d/llm-d-workload-variant-autoscaler ``internal/collector/prometheus/saturation_metrics.go``
      explains the peak: "safety-first"). Here: the peak of the samples taken every ``scrape_s`` (15 s, the
      chart's vLLM ServiceMonitor interval) in the last ``window_s``, per ready replica.
    * Analysis: ``wva_analyze`` (``internal/saturation/analyzer.go``, thresholds ``WvaThresholds``).
    * Targets (``CalculateSaturationTargets``): while the model is in transition (replicas reporting metrics
      differ from the Deployment's replicas, i.e. some are starting) nothing changes; else scale-up gives the
      replicas reporting metrics + 1, a safe scale-down gives them - 1 (never below 1), otherwise they stay.
    * Loop: ``loop_s`` = 60 s. The saturation engine's polling executor runs at the configured
      ``GLOBAL_OPT_INTERVAL`` (``internal/engines/saturation/engine.go``: ``Interval:
      cfg.OptimizationInterval()``), whose default is ``"60s"`` (``internal/config/loader.go``; the chart's
      ``wva.reconcileInterval: 60s``). Earlier versions hard-coded the executor to 30 s and ignored the
      setting (``Interval: 30 * time.Second``, ``_ = interval``), which is where a "30 s loop" comes from.

    Left out: the scale-to-zero enforcer (off by default), the GPU limiter (``enableLimiter`` false by
    default), cost-based choice between variants (one variant here), and the HPA or KEDA object that
    actuates WVA's desired replicas in a cluster: its target is applied directly, as if that HPA had no
    stabilisation window (the chart's sample HPA has 240 s; the HPA's own behaviour is what ``hpa-gpu-util``
    and ``keda-queue`` show). Replicas removed by a scale-down stop counting at once (their pod leaves the
    Service endpoints and is no longer scraped).
    """

    name = "wva-saturation"

    def __init__(
        self,
        thresholds: WvaThresholds | None = None,
        *,
        loop_s: float = 60.0,
        scrape_s: float = 15.0,
        window_s: float = 60.0,
        min_replicas: int = 1,
        max_replicas: int = 1_000_000,
    ) -> None:
        if not loop_s > 0 or not scrape_s > 0 or not window_s > 0:
            raise ValueError(f"loop_s, scrape_s and window_s must be > 0, got {loop_s}, {scrape_s}, {window_s}")
        self.thresholds = thresholds or WvaThresholds()
        self.loop_s = loop_s
        self.tick_s = min(scrape_s, loop_s)
        self.window_s = window_s
        self.min_replicas = min_replicas
        self.max_replicas = max_replicas
        self.next_loop = loop_s
        # Per ready replica, by position (the order replicas became ready; a scale-down removes the last):
        # the (time, kv, waiting) samples of the window.
        self.samples: list[deque[tuple[float, float, float]]] = []

    def observe(self, view: FleetView) -> None:
        """Take this tick's scrape of every ready replica."""
        n = len(view.replica_kv_cache_usage)
        del self.samples[n:]  # replicas gone since the last scrape are always the last ones
        while len(self.samples) < n:
            self.samples.append(deque())
        horizon = view.t - self.window_s
        for series, kv, queue in zip(self.samples, view.replica_kv_cache_usage, view.replica_queue_depth, strict=True):
            series.append((view.t, kv, queue))
            while series[0][0] <= horizon:
                series.popleft()

    def peaks(self) -> tuple[list[float], list[float]]:
        """Each ready replica's peak KV-cache usage and queue length over the window."""
        kv = [max(s[1] for s in series) for series in self.samples]
        queue = [max(s[2] for s in series) for series in self.samples]
        return kv, queue

    def decide(self, view: FleetView) -> Scale:
        self.observe(view)
        current = view.current_replicas
        if view.t + 1e-9 < self.next_loop:
            return Scale(current, "Hold", f"between WVA's {self.loop_s:g}s optimization loops")
        while self.next_loop <= view.t + 1e-9:
            self.next_loop += self.loop_s
        ready = view.ready_replicas
        if ready == 0 or not self.samples:
            return Scale(current, "MetricsUnavailable", "no replica reports metrics: WVA skips the model")
        if ready != current:
            return Scale(
                current,
                "InTransition",
                f"{ready} replicas report metrics of {current}: WVA makes no decision until they are ready",
            )
        a = wva_analyze(*self.peaks(), self.thresholds)
        th = self.thresholds
        spares = (
            f"{a.non_saturated}/{ready} replicas non-saturated, mean spare KV {a.spare_kv:.2f} "
            f"(trigger {th.kv_spare_trigger:g}), spare queue {a.spare_queue:.1f} (trigger {th.queue_spare_trigger:g})"
        )
        if a.scale_up:
            target, reason = ready + 1, "ScaleUp"
        elif a.scale_down_safe and ready > 1:
            target, reason = ready - 1, "ScaleDown"
        else:
            target, reason = ready, "Hold"
        bounded = _bounded(target, self.min_replicas, self.max_replicas)
        if bounded != target:
            reason = "Hold" if bounded == current else reason
        return Scale(bounded, reason, f"{spares}; target {bounded}")


# --- dynamo-planner -----------------------------------------------------------------------------------

_KPSS_CRITICAL_5PCT = 0.463
"""KPSS level-stationarity critical value at 5% (Kwiatkowski et al. 1992, table 1; pmdarima's ``KPSSTest``)."""


def kpss_level(x: Sequence[float]) -> float:
    """The KPSS statistic for level stationarity, with pmdarima's short lag truncation ``4 (n/100)^(1/4)``."""
    n = len(x)
    mean = sum(x) / n
    e = [v - mean for v in x]
    partial = 0.0
    eta = 0.0
    for v in e:
        partial += v
        eta += partial * partial
    eta /= n * n
    lags = int(4 * (n / 100) ** 0.25)
    s2 = sum(v * v for v in e) / n
    for lag in range(1, lags + 1):
        cov = sum(e[t] * e[t - lag] for t in range(lag, n)) / n
        s2 += 2 * (1 - lag / (lags + 1)) * cov
    return eta / s2 if s2 > 0 else 0.0


def _constant(x: Sequence[float]) -> bool:
    return all(v == x[0] for v in x)


def _diff(x: Sequence[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(x)]


def ndiffs(x: Sequence[float], max_d: int = 2) -> int:
    """How many differences make ``x`` level-stationary by the KPSS test at 5% (pmdarima's ``ndiffs``)."""
    if len(x) < 3 or _constant(x):
        return 0
    d = 0
    series = list(x)
    while d < max_d and len(series) >= 3 and kpss_level(series) > _KPSS_CRITICAL_5PCT:
        d += 1
        series = _diff(series)
        if _constant(series):
            break
    return d


@dataclass(frozen=True, slots=True)
class _Order:
    p: int
    d: int
    q: int
    intercept: bool


def _one_step(w: Sequence[float], e: Sequence[float], t: int, order: _Order, params: Sequence[float]) -> float:
    """ARMA(p, q)'s prediction of ``w[t]``; the intercept is held as the mean ``mu`` (``c = mu (1 - sum(phi))``,
    the same model, better conditioned for the optimiser)."""
    p, q = order.p, order.q
    mu = params[p + q] if order.intercept else 0.0
    pred = mu
    for i in range(p):
        pred += params[i] * (w[t - 1 - i] - mu)
    for j in range(q):
        pred += params[p + j] * e[t - 1 - j]
    return pred


def _css(w: Sequence[float], order: _Order, params: Sequence[float], start: int) -> tuple[float, list[float]]:
    """Sum of squared one-step errors of ARMA(p, q) (+ intercept) on ``w``, conditioned on its first ``start``."""
    e = [0.0] * len(w)
    sse = 0.0
    for t in range(start, len(w)):
        e[t] = w[t] - _one_step(w, e, t, order, params)
        sse += e[t] * e[t]
    return sse, e


def _inside_unit_circle(coef: Sequence[float]) -> bool:
    """Stationarity (AR) or, with the signs flipped, invertibility (MA) for orders up to 2."""
    if len(coef) == 1:
        return abs(coef[0]) < 1
    if len(coef) == 2:
        a, b = coef
        return a + b < 1 and b - a < 1 and abs(b) < 1
    return True


def _nelder_mead(f: Callable[[list[float]], float], x0: list[float], iterations: int) -> list[float]:
    """Minimise ``f`` from ``x0`` (the plain simplex method; a few parameters only)."""
    n = len(x0)
    simplex = [list(x0)] + [
        [v + (max(0.1, 0.1 * abs(v)) if k == i else 0.0) for k, v in enumerate(x0)] for i in range(n)
    ]
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = sorted(range(n + 1), key=lambda i: values[i])
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if abs(values[-1] - values[0]) <= 1e-10 * (abs(values[0]) + 1e-10):
            break
        centroid = [sum(x[k] for x in simplex[:-1]) / n for k in range(n)]
        worst = simplex[-1]
        reflected = [c + (c - w) for c, w in zip(centroid, worst, strict=True)]
        fr = f(reflected)
        if fr < values[0]:
            expanded = [c + 2 * (c - w) for c, w in zip(centroid, worst, strict=True)]
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = [c + 0.5 * (w - c) for c, w in zip(centroid, worst, strict=True)]
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                best = simplex[0]
                simplex = [best] + [[b + 0.5 * (v - b) for b, v in zip(best, x, strict=True)] for x in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
    return simplex[min(range(n + 1), key=lambda i: values[i])]


def _fit(w: Sequence[float], order: _Order, start: int, x0: list[float] | None = None) -> tuple[list[float], float]:
    """CSS estimates of ``order`` on ``w`` (stationary and invertible only) and their sum of squared errors."""
    k = order.p + order.q + int(order.intercept)
    if k == 0:
        return [], _css(w, order, [], start)[0]
    if order.p == 0 and order.q == 0:  # the intercept alone: the mean
        c = sum(w[start:]) / (len(w) - start)
        return [c], _css(w, order, [c], start)[0]

    def objective(x: list[float]) -> float:
        phi, theta = x[: order.p], x[order.p : order.p + order.q]
        if not _inside_unit_circle(phi) or not _inside_unit_circle([-v for v in theta]):
            return math.inf
        return _css(w, order, x, start)[0]

    if x0 is None:
        x0 = [0.0] * (order.p + order.q) + ([sum(w) / len(w)] if order.intercept else [])
    params = _nelder_mead(objective, x0, 200 * k)
    return params, objective(params)


class ArimaPredictor:
    """Dynamo's default load predictor, ``ARIMAPredictor`` (auto-ARIMA), in pure Python.

    As in ai-dynamo/dynamo ``components/src/dynamo/planner/core/load/predictors.py``: leading zeros (the
    idle period after deployment) are skipped; with fewer than 5 points the last value is the prediction,
    and with all points equal that value; the first time there are enough, ``pmdarima.auto_arima`` picks the
    order, and if it collapses to (0, d, 0) on the raw series it is picked again on ``log1p`` of the series
    (predictions are then ``expm1``); later predictions refit that order's parameters on all the points
    (``model.update``) and never below 0.

    ``auto_arima`` is approximated: ``d`` by the KPSS test at 5% (its default ``test='kpss'``, ``max_d=2``);
    an intercept when ``d`` is 0 or 1 (``with_intercept='auto'``); a series constant after differencing gets
    (0, d, 0) at once; otherwise every ``p, q <= min(2, n // 3)`` is fitted (pmdarima searches stepwise up to
    5, rarely reached on a few dozen points) by conditional sum of squares (pmdarima: exact likelihood), and
    the lowest AIC wins.
    """

    minimum_data_points = 5
    max_order = 2

    def __init__(self) -> None:
        self.raw: list[float] = []
        self.seen_nonzero = False
        self.order: _Order | None = None
        self.log = False
        self.params: list[float] = []

    def add_data_point(self, value: float) -> None:
        if not math.isfinite(value):
            value = 0.0
        if value == 0 and not self.seen_nonzero:
            return
        self.seen_nonzero = self.seen_nonzero or value != 0
        self.raw.append(max(0.0, value))

    def series(self) -> list[float]:
        return [math.log1p(v) for v in self.raw] if self.log else list(self.raw)

    @staticmethod
    def select(y: Sequence[float]) -> _Order:
        d = ndiffs(y)
        w = list(y)
        for _ in range(d):
            w = _diff(w)
        intercept = d < 2
        if _constant(w):
            return _Order(0, d, 0, intercept)
        top = min(ArimaPredictor.max_order, len(y) // 3)
        start = top
        best: tuple[float, _Order] | None = None
        for p in range(top + 1):
            for q in range(top + 1):
                order = _Order(p, d, q, intercept)
                k = p + q + int(intercept)
                n_eff = len(w) - start
                if n_eff < k + 2:
                    continue
                _, sse = _fit(w, order, start)
                if not math.isfinite(sse):
                    continue
                aic = n_eff * math.log(max(sse / n_eff, 1e-300)) + 2 * (k + 1)
                if best is None or aic < best[0] - 1e-12:
                    best = (aic, order)
        return best[1] if best is not None else _Order(0, d, 0, intercept)

    def forecast(self) -> float:
        assert self.order is not None
        order = self.order
        levels = [self.series()]
        for _ in range(order.d):
            levels.append(_diff(levels[-1]))
        w = levels[-1]
        if len(w) <= order.p:
            return self.raw[-1]
        k = order.p + order.q + int(order.intercept)
        # Condition on the first p points only; start from the last estimates (pmdarima's update).
        self.params, _ = _fit(w, order, order.p, self.params if len(self.params) == k else None)
        e = _css(w, order, self.params, order.p)[1]
        nxt = _one_step([*w, 0.0], [*e, 0.0], len(w), order, self.params)
        for level in reversed(levels[:-1]):  # undo the differencing
            nxt += level[-1]
        return max(0.0, math.expm1(nxt)) if self.log else max(0.0, nxt)

    def predict_next(self) -> float:
        if len(self.raw) < self.minimum_data_points:
            return self.raw[-1] if self.raw else 0.0
        if len(set(self.raw)) == 1:
            return self.raw[0]
        if self.order is None:
            self.order = self.select(self.raw)
            if self.order.p == 0 and self.order.q == 0:
                self.log = True
                self.order = self.select(self.series())
        return self.forecast()


def profiled_engine_rps(capacity: Capacity) -> float:
    """Requests per second one engine serves within the SLO, as Dynamo's pre-deployment profiling measures it
    (one engine alone): ``capacity``'s one-replica rate, or if one replica alone missed the SLO at every rate
    tried, the per-replica rate of the smallest pool that held it (0: none did)."""
    for size in sorted(capacity.pool_rps):
        if capacity.pool_rps[size] > 0:
            return capacity.pool_rps[size] / size
    return 0.0


class DynamoPlanner:
    """``dynamo-planner``: NVIDIA Dynamo's planner, throughput-based (SLA) scaling of aggregated engines.

    The rule (ai-dynamo/dynamo ``components/src/dynamo/planner/core/throughput_scaling.py``,
    ``_throughput_agg``): every ``throughput_adjustment_interval`` (180 s,
    ``components/src/dynamo/planner/config/defaults.py``), observe the requests of the last interval, feed
    the load predictor, and ask for ``max(ceil(predicted requests / interval / engine_rps), min_endpoint)``
    replicas, ``engine_rps`` being what one engine serves within the TTFT and ITL SLO according to the
    pre-deployment profiling; then clamp to the GPU budget. The predictor is the default ``load_predictor =
    "arima"`` (same file; ``ArimaPredictor``). ``min_endpoint`` is 1; the default ``max_gpu_budget`` is 8
    GPUs, which a user sizes to the fleet: here the InferenceService's maximum replicas.

    ``engine_rps`` is the measured capacity at the SLO for this engine and workload (``profiled_engine_rps``),
    the rate the profiling sweep would find; Dynamo interpolates it at the predicted input and output lengths,
    which here are the trace's own throughout. Throughput scaling does not wait for earlier scale-ups to
    finish, and load-based scaling (``enable_load_scaling``) is off by default: neither is modelled.
    """

    name = "dynamo-planner"

    def __init__(
        self,
        engine_rps: float,
        *,
        interval_s: float = 180.0,
        min_endpoint: int = 1,
        max_replicas: int = 1_000_000,
        predictor: ArimaPredictor | None = None,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0 seconds, got {interval_s}")
        self.engine_rps = engine_rps
        self.interval_s = interval_s
        self.tick_s = interval_s
        self.min_endpoint = min_endpoint
        self.max_replicas = max_replicas
        self.predictor = predictor or ArimaPredictor()

    def decide(self, view: FleetView) -> Scale:
        current = view.current_replicas
        observed = view.arrival_rate * self.interval_s  # requests in the last interval
        self.predictor.add_data_point(observed)
        predicted = self.predictor.predict_next()
        if self.engine_rps <= 0:
            return Scale(current, "ModelNotReady", "the profiling found no rate one engine serves within the SLO")
        demand = predicted / self.interval_s
        wanted = max(math.ceil(demand / self.engine_rps - 1e-9), self.min_endpoint)
        target = _bounded(wanted, self.min_endpoint, self.max_replicas)
        reason = "ScaleUp" if target > current else "ScaleDown" if target < current else "Hold"
        return Scale(
            target,
            reason,
            f"{observed:.0f} requests in the last {self.interval_s:g}s, {predicted:.0f} predicted: "
            f"{demand:.2f} req/s / {self.engine_rps:.2f} per engine = {wanted}",
        )


# --- knative-kpa --------------------------------------------------------------------------------------


class KnativeKpa:
    """``knative-kpa``: Knative's KPA on request concurrency, as AIBrix's KPA ports it.

    The rule is knative/serving ``pkg/autoscaler/scaling/autoscaler.go`` ``Scale`` (AIBrix:
    vllm-project/aibrix ``pkg/controller/podautoscaler/algorithm/kpa.go`` and ``scaler/kpa.go``, "based on
    both the Knative KpaAutoscaler code and its documentation"):

    * stable and panic values: the mean total concurrency over the last ``stable_window_s`` and the last
      ``stable_window_s x panic_window_pct / 100`` (6 s); here the mean of the samples taken every tick;
    * ``dspc = ceil(stable / target)``, ``dppc = ceil(panic / target)``, both kept within
      ``[floor(ready / max_scale_down_rate), ceil(max_scale_up_rate x ready)]`` (``ready`` at least 1);
    * panic starts, or is extended, while ``dppc / ready >= panic_threshold_pct / 100``, and ends a stable
      window after the last time it held; in panic the pod count only rises (``maxPanicPods``) and is at least
      the stable one; a new autoscaler with more than one ready pod starts in panic (``newAutoscaler``);
    * with ``scale_down_delay_s`` > 0, the highest count of that window is used (``max.TimeWindow``).

    Defaults are Knative's ``config-autoscaler`` (knative/serving ``pkg/autoscaler/config/config.go``
    ``defaultConfig``): stable window 60 s, panic window 10% (6 s), panic threshold 200%, max scale-up rate
    1000, max scale-down rate 2, scale-down delay 0; the decider ticks every 2 s (``tickInterval`` in
    ``pkg/autoscaler/scaling/multiscaler.go``). AIBrix's KPA keeps the rule but not all of these defaults
    (``NewKpaScalingContext``: panic window 10 s, scale-down delay 30 min; max scale-up rate 2 or 10 by
    version),
    and its sample (``samples/autoscaling/kpa.yaml``) scales on ``gpu_cache_usage_perc`` rather than
    concurrency; Knative's are used here, as the policy is named.

    The target: Knative's ``ResolveMetricTarget`` (``pkg/reconciler/autoscaling/resources/target.go``) makes
    it ``containerConcurrency x container-concurrency-target-percentage`` (0.7) when the revision sets a
    hard ``containerConcurrency``, which for an LLM engine is its batch ceiling (the spec's maxConcurrency:
    more requests only queue inside the engine). Concurrency is what each ready pod's queue-proxy counts in
    flight, here the requests running and waiting in each ready engine; min-scale/max-scale are the spec's
    replica bounds (``min-scale: 1``: no scale to zero for a GPU engine).
    """

    name = "knative-kpa"

    def __init__(
        self,
        target: float,
        *,
        tick_s: float = 2.0,
        stable_window_s: float = 60.0,
        panic_window_pct: float = 10.0,
        panic_threshold_pct: float = 200.0,
        max_scale_up_rate: float = 1000.0,
        max_scale_down_rate: float = 2.0,
        scale_down_delay_s: float = 0.0,
        min_replicas: int = 1,
        max_replicas: int = 1_000_000,
    ) -> None:
        if not target > 0:
            raise ValueError(f"target must be > 0 concurrent requests per pod, got {target}")
        if not tick_s > 0 or not stable_window_s > 0 or not 0 < panic_window_pct <= 100:
            raise ValueError("tick_s and stable_window_s must be > 0 and panic_window_pct in (0, 100]")
        if max_scale_up_rate <= 1 or max_scale_down_rate <= 1:
            raise ValueError("max_scale_up_rate and max_scale_down_rate must be > 1 (Knative's validation)")
        self.target = target
        self.tick_s = tick_s
        self.stable_window_s = stable_window_s
        self.panic_window_s = stable_window_s * panic_window_pct / 100
        self.panic_threshold = panic_threshold_pct / 100
        self.max_scale_up_rate = max_scale_up_rate
        self.max_scale_down_rate = max_scale_down_rate
        self.scale_down_delay_s = scale_down_delay_s
        self.min_replicas = min_replicas
        self.max_replicas = max_replicas
        self.samples: deque[tuple[float, float]] = deque()
        self.delay: deque[tuple[float, int]] = deque()
        self.panic_time: float | None = None
        self.max_panic_pods = 0
        self.started = False

    def in_panic(self) -> bool:
        return self.panic_time is not None

    def decide(self, view: FleetView) -> Scale:
        t, current = view.t, view.current_replicas
        if not self.started:
            # newAutoscaler: created with more than one ready pod, it starts in panic at that scale.
            self.started = True
            if view.ready_replicas > 1:
                self.panic_time = 0.0
            self.max_panic_pods = view.ready_replicas
        if view.ready_replicas > 0:
            self.samples.append((t, sum(view.replica_queue_depth) + sum(view.replica_running_requests)))
        while self.samples and self.samples[0][0] <= t - self.stable_window_s:
            self.samples.popleft()
        if not self.samples:
            return Scale(current, "NoData", "no concurrency observed yet")
        stable = sum(c for _, c in self.samples) / len(self.samples)
        recent = [c for s, c in self.samples if s > t - self.panic_window_s]
        panic = sum(recent) / len(recent) if recent else 0.0

        ready = max(1.0, float(view.ready_replicas))
        max_up = math.ceil(self.max_scale_up_rate * ready)
        max_down = math.floor(ready / self.max_scale_down_rate)
        dspc = math.ceil(stable / self.target)
        dppc = math.ceil(panic / self.target)
        desired_stable = min(max(dspc, max_down), max_up)
        desired_panic = min(max(dppc, max_down), max_up)

        over = dppc / ready >= self.panic_threshold
        if over:
            self.panic_time = t  # begin, or extend, the panic
        elif self.panic_time is not None and self.panic_time + self.stable_window_s < t:
            self.panic_time = None
            self.max_panic_pods = 0

        desired = desired_stable
        if self.panic_time is not None:
            desired = max(desired, desired_panic)
            self.max_panic_pods = max(self.max_panic_pods, desired)  # no scale-down while panicking
            desired = self.max_panic_pods
        if self.scale_down_delay_s > 0:
            self.delay.append((t, desired))
            while self.delay[0][0] <= t - self.scale_down_delay_s:
                self.delay.popleft()
            desired = max(n for _, n in self.delay)

        target = _bounded(desired, self.min_replicas, self.max_replicas)
        mode = "panic" if self.panic_time is not None else "stable"
        reason = "ScaleUp" if target > current else "ScaleDown" if target < current else "Hold"
        return Scale(
            target,
            reason,
            f"{mode} mode: concurrency {stable:.1f} over {self.stable_window_s:g}s, {panic:.1f} over "
            f"{self.panic_window_s:g}s, target {self.target:g} per pod, {view.ready_replicas} ready -> {target}",
        )
