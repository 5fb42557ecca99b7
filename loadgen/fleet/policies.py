"""The scaling policies the fleet simulator compares, and the measurements two of them are built from.

Each policy answers ``decide(view) -> Scale`` at every tick (see ``loadgen.fleet.sim``):

* ``inferscale``: the operator's own tick for one service (``inferscale.autoscaler.plan_service``, which
  asks ``inferscale.policy.decide``), with the operator's ``stale_after`` and ``ttft_window``, and the
  status it records carried from tick to tick through a JSON round trip, as the operator applies it to
  the InferenceService and reads it back.
* ``static-peak``: a fixed count, sized for the trace's peak: the fewest replicas whose pool holds the
  busiest ``interval_s`` window's rate (60 s; refused requests left out) at the SLO, read off the capacity
  curve ``measure_capacity`` measures for this engine and workload (the trace's own request lengths and
  burstiness, replayed to pools of 1, 2, 4, ... replicas). What a team that load-tested its fleet and
  provisioned for the peak would run.
* ``hpa-gpu-util``: the Kubernetes HPA algorithm on GPU utilisation (DCGM, through an adapter) with the
  spec's target (80%): ``desired = ceil(pods x mean utilisation / target)``, no change within the 10%
  tolerance, scale-up at most ``max(100%, 4 pods)`` per 15 s, scale-down to the highest recommendation
  of the last 300 s (the HPA's default behaviour). Replicas still loading their model report 0% (DCGM
  sees an idle GPU), which is how missing pods count when the HPA scales up.
* ``keda-queue``: KEDA's Prometheus scaler on ``sum(vllm:num_requests_waiting)`` with an ``AverageValue``
  target of 5 waiting requests per replica, run by the HPA: ``desired = ceil(waiting / 5)`` unless
  within 10% of the current count, the same rate limits and 300 s scale-down stabilisation, and an empty
  query answering 0 (KEDA's ``ignoreNullValues`` default).
* ``wva-saturation``, ``dynamo-planner``, ``knative-kpa``: llm-d's workload-variant-autoscaler, NVIDIA Dynamo's
  planner and Knative's KPA, each at its own loop interval (``loadgen.fleet.baselines``).
* ``raise-batch``: one replica whose batch ceiling is raised ``batch_factor`` times (4x ``max_num_seqs``):
  the "just use bigger batches" answer, more throughput per GPU and a worse tail.
* ``oracle``: the cheapest replica schedule planned with knowledge of the future that keeps the SLO,
  cold starts included (``plan_oracle``): an estimate of the lower bound on GPU-seconds.

Autoscaling policies start with the replicas the opening minute of the trace needs (as if the fleet had
been sized for it before the trace began), so none of them is judged on a cold start at time 0.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from inferscale.api import InferenceService, InferenceServiceSpec, ObjectMeta
from inferscale.autoscaler import ServiceView, memory_from, plan_service
from inferscale.policy import Memory
from inferscale.promql import ServiceSignals, Signal
from inferscale.replicas import ReplicaCounts
from inferscale.settings import SCALING

from loadgen.client.stats import percentile
from loadgen.engine.model import validate_request
from loadgen.engine.profiles import EngineProfile
from loadgen.fleet.sim import FleetConfig, FleetResult, FleetView, Scale, simulate
from loadgen.traffic.shapes import Arrival

__all__ = [
    "BOUNDS",
    "POLICY_NAMES",
    "Capacity",
    "HpaBehavior",
    "HpaGpuUtilization",
    "InferscalePolicy",
    "KedaQueueDepth",
    "OraclePlan",
    "SchedulePolicy",
    "StaticPolicy",
    "cheaper_static",
    "counted_requests",
    "feasible_attainment",
    "interval_rates",
    "keeps_slo",
    "measure_capacity",
    "plan_oracle",
    "plan_reactive",
    "raise_batch",
    "refused_requests",
    "unloaded_ttft",
    "workload_of",
]

POLICY_NAMES = (
    "inferscale",
    "static-peak",
    "hpa-gpu-util",
    "keda-queue",
    "wva-saturation",
    "dynamo-planner",
    "knative-kpa",
    "raise-batch",
    "oracle",
    "reactive",
)
"""Every policy ``loadgen.fleet.compare`` runs, in the order of its reports; ``wva-saturation``, ``dynamo-planner`` and
``knative-kpa`` live in ``loadgen.fleet.baselines``. ``oracle`` and ``reactive`` are bounds, not policies a team
could run: the first plans with the future, the second knows the past exactly (``plan_reactive``)."""
BOUNDS = ("oracle", "reactive")
"""The runs in ``POLICY_NAMES`` that measure what is possible: never a baseline to beat or be beaten by."""

# ``plan_reactive``: the multiples of the measured capacity's need it sizes for, and how long (in seconds) it
# keeps a size before it lets replicas go: not at all, and HPA's default scale-down window.
REACTIVE_SCALES = (0.8, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0)
REACTIVE_HOLDS_S = (0.0, 300.0)

# Simulated time 0 as a wall-clock instant, for the operator's policy (it wants aware datetimes).
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)


# --- the operator's policy ------------------------------------------------------------------------------


class InferscalePolicy:
    """The operator's own tick for one service (``inferscale.autoscaler.plan_service``) at every tick.

    The fleet's view becomes what the operator reads (the Deployment's replicas, the pods' counts and the
    Prometheus signals), and the status the plan records goes through JSON and back into the next tick's
    view, as the operator writes it to the InferenceService and reads it again: the policy's memory, the
    conditions and the last decision included.
    """

    name = "inferscale"

    def __init__(
        self,
        spec: InferenceServiceSpec,
        *,
        stale_after_s: float = SCALING.stale_after_seconds,
        ttft_window_s: float = float(SCALING.ttft_window_seconds),
        epoch: datetime = EPOCH,
    ) -> None:
        self.spec = spec
        self.isvc = InferenceService(metadata=ObjectMeta(name="simulated", namespace="fleet"), spec=spec)
        self.stale_after = timedelta(seconds=stale_after_s)
        self.ttft_window = timedelta(seconds=ttft_window_s)
        self.epoch = epoch
        self.status: dict[str, Any] = {}

    @property
    def memory(self) -> Memory:
        """The policy's memory as the last tick left it in the status."""
        return memory_from(self.status)

    def signals(self, view: FleetView, now: datetime) -> ServiceSignals | None:
        """What Prometheus would answer for the service: nothing without a ready engine to scrape."""
        if view.ready_replicas == 0:
            return None
        values = {
            Signal.QUEUE_DEPTH: view.queue_depth,
            Signal.RUNNING_REQUESTS: view.running_requests,
            Signal.KV_CACHE_USAGE: view.kv_cache_usage,
            Signal.TTFT_P95_SECONDS: view.ttft_p95,
            Signal.REQUEST_RATE: view.request_rate,
            Signal.QUEUE_TIME_SECONDS: view.queue_time,
            Signal.PREFILL_TIME_SECONDS: view.prefill_time,
            Signal.PREFILL_P95_SECONDS: view.prefill_p95,
            Signal.GPU_UTILIZATION_PERCENT: view.gpu_utilization,
        }
        present = {signal: value for signal, value in values.items() if value is not None}
        return ServiceSignals(
            namespace=self.isvc.metadata.namespace,
            service=self.isvc.metadata.name,
            sampled_at=now,
            **{signal.value: value for signal, value in present.items()},
            observed_at=dict.fromkeys(present, now),  # scraped at the tick: no scrape lag here
            missing=frozenset(values) - frozenset(present),
        )

    def decide(self, view: FleetView) -> Scale:
        now = self.epoch + timedelta(seconds=view.t)
        service = ServiceView(
            isvc=self.isvc,
            status=self.status,
            deployment_replicas=view.current_replicas,
            pods=ReplicaCounts(ready=view.ready_replicas, starting=view.starting_replicas),
        )
        plan = plan_service(
            service,
            self.signals(view, now),
            metrics_error=None,
            now=now,
            stale_after=self.stale_after,
            ttft_window=self.ttft_window,
        )
        # Through JSON, as the operator applies the status and reads it back at the next tick.
        self.status = json.loads(json.dumps({**self.status, **plan.status}))
        decision = plan.decision
        return Scale(decision.replicas, decision.reason.value, decision.message)


# --- fixed counts ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class StaticPolicy:
    """Always ``replicas`` (``static-peak``; ``raise-batch`` is one replica of a bigger-batch engine)."""

    name: str
    replicas: int
    why: str = ""

    def decide(self, view: FleetView) -> Scale:
        return Scale(self.replicas, "Static", self.why)


def raise_batch(profile: EngineProfile, factor: int = 4) -> tuple[StaticPolicy, EngineProfile]:
    """The ``raise-batch`` policy and its engine: one replica, ``max_num_seqs`` raised ``factor`` times."""
    raised = profile.with_overrides(max_num_seqs=profile.max_num_seqs * factor)
    why = f"one replica with max_num_seqs {raised.max_num_seqs} ({factor}x {profile.max_num_seqs})"
    return StaticPolicy("raise-batch", 1, why), raised


# --- the HPA and KEDA baselines ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HpaBehavior:
    """The HPA's defaults (autoscaling/v2): tolerance, stabilisation windows and scale-up rate."""

    tolerance: float = 0.1
    scale_up_stabilization_s: float = 0.0
    scale_down_stabilization_s: float = 300.0
    scale_up_percent: float = 100.0
    """Per 15 s period; the HPA takes the larger of the percent and the pods policy."""
    scale_up_pods: int = 4
    min_replicas: int = 1
    max_replicas: int = 100


class _Hpa:
    """The HPA controller's loop around one metric: recommend, stabilise, rate-limit, bound."""

    name = "hpa"

    def __init__(self, behavior: HpaBehavior, *, initial_replicas: int | None = None) -> None:
        self.behavior = behavior
        # A running HPA has history: seeded with the starting count, as if it had held it until time 0.
        self.recommendations: deque[tuple[float, int]] = deque(
            [(0.0, initial_replicas)] if initial_replicas is not None else []
        )

    def recommend(self, view: FleetView) -> tuple[int, str]:  # pragma: no cover - overridden
        raise NotImplementedError

    def decide(self, view: FleetView) -> Scale:
        b = self.behavior
        current = view.current_replicas
        raw, why = self.recommend(view)
        # stabilizeRecommendationWithBehaviors: the lowest recommendation of the scale-up window and the
        # highest of the scale-down window bound the move.
        self.recommendations.append((view.t, raw))
        longest = max(b.scale_up_stabilization_s, b.scale_down_stabilization_s)
        while self.recommendations and self.recommendations[0][0] < view.t - longest:
            self.recommendations.popleft()
        up = min((r for t, r in self.recommendations if t >= view.t - b.scale_up_stabilization_s), default=raw)
        down = max((r for t, r in self.recommendations if t >= view.t - b.scale_down_stabilization_s), default=raw)
        target = current
        if target < up:
            target = up
        if target > down:
            target = down
        # convertDesiredReplicasWithBehaviorRate: scale-up limited per period; scale-down 100% (no limit).
        limit = max(math.ceil(current * (1 + b.scale_up_percent / 100)), current + b.scale_up_pods)
        target = min(target, limit)
        target = min(max(target, b.min_replicas), b.max_replicas)
        if target > current:
            reason = "ScaleUp"
        elif target < current:
            reason = "ScaleDown"
        else:
            reason = "Hold"
        return Scale(target, reason, f"{why}; recommended {raw}, stabilised to {target}")


class HpaGpuUtilization(_Hpa):
    """``hpa-gpu-util``: the HPA on mean GPU utilisation (a Pods metric), target in percent."""

    name = "hpa-gpu-util"

    def __init__(
        self, target_percent: float = 80.0, behavior: HpaBehavior | None = None, *, initial_replicas: int | None = None
    ) -> None:
        super().__init__(behavior or HpaBehavior(), initial_replicas=initial_replicas)
        if not target_percent > 0:
            raise ValueError(f"target_percent must be > 0, got {target_percent}")
        self.target = target_percent

    def recommend(self, view: FleetView) -> tuple[int, str]:
        current = view.current_replicas
        if not view.replica_gpu_utilization:
            return current, "no GPU utilisation reported (no ready replica)"
        # Ready replicas report their busy share; replicas loading the model report an idle GPU.
        utils = list(view.replica_gpu_utilization) + [0.0] * view.starting_replicas
        mean = sum(utils) / len(utils)
        ratio = mean / self.target
        why = f"GPU utilisation {mean:.0f}% over {len(utils)} pods (target {self.target:g}%)"
        if abs(1 - ratio) <= self.behavior.tolerance:
            return current, why
        return math.ceil(ratio * len(utils) - 1e-9), why


class KedaQueueDepth(_Hpa):
    """``keda-queue``: KEDA's Prometheus scaler on waiting requests, ``AverageValue`` per replica."""

    name = "keda-queue"

    def __init__(
        self,
        waiting_per_replica: float = 5.0,
        behavior: HpaBehavior | None = None,
        *,
        initial_replicas: int | None = None,
    ) -> None:
        super().__init__(behavior or HpaBehavior(), initial_replicas=initial_replicas)
        if not waiting_per_replica > 0:
            raise ValueError(f"waiting_per_replica must be > 0, got {waiting_per_replica}")
        self.target = waiting_per_replica

    def recommend(self, view: FleetView) -> tuple[int, str]:
        current = view.current_replicas
        waiting = view.queue_depth or 0.0  # an empty answer is 0 (ignoreNullValues)
        why = f"{waiting:.0f} requests waiting (target {self.target:g} per replica)"
        # GetExternalPerPodMetricReplicas: keep the count within the tolerance, else ceil(usage / target).
        if current > 0 and abs(1 - waiting / (self.target * current)) <= self.behavior.tolerance:
            return current, why
        return math.ceil(waiting / self.target - 1e-9), why


# --- capacity at the SLO ----------------------------------------------------------------------------------


def unloaded_ttft(profile: EngineProfile, prompt_tokens: int) -> float:
    """TTFT of a request alone on an idle engine: the front end, then its prefill, chunk by chunk."""
    budget = profile.max_num_batched_tokens
    chunks = 1 if budget is None else max(1, math.ceil(prompt_tokens / budget))
    return profile.frontend_s + chunks * profile.prefill_overhead_s + prompt_tokens / profile.prefill_rate_tps


@dataclass(frozen=True, slots=True)
class Capacity:
    """How many requests per second a pool of replicas serves with p95 TTFT within the SLO, on this workload.

    ``pool_rps[k]`` is the highest rate (with the workload's own arrival pattern) that ``k`` warm replicas
    behind the balancer held, for the pool sizes measured (1, 2, 4, ...: pooled replicas carry more each
    than one alone, since a burst on one is absorbed by the others). Between and beyond them, the
    per-replica rate is interpolated and then held. A pool that could not keep the SLO at any rate tried
    is recorded as 0.
    """

    pool_rps: dict[int, float]
    slo_ttft_s: float
    profile: str
    trials: int
    infeasible_share: float
    """Share of the workload's requests whose TTFT on an idle engine already exceeds the SLO."""

    def curve(self) -> str:
        """The measured pools as ``size: req/s`` (the pool's rate, not each replica's), smallest first."""
        return ", ".join(f"{k}: {rps:.2f}" for k, rps in sorted(self.pool_rps.items()))

    @property
    def per_replica_rps(self) -> float:
        """What one replica alone holds (0: not even at a trickle of this workload)."""
        return self.pool_rps[min(self.pool_rps)]

    def per_replica_at(self, replicas: int) -> float:
        """Requests per second each replica of a pool of ``replicas`` holds (interpolated, never extrapolated up)."""
        sizes = sorted(self.pool_rps)
        if replicas <= sizes[0]:
            return self.pool_rps[sizes[0]] / sizes[0]
        for lo, hi in itertools.pairwise(sizes):
            if replicas <= hi:
                a, b = self.pool_rps[lo] / lo, self.pool_rps[hi] / hi
                if a <= 0 and replicas < hi:
                    return 0.0  # unknown between a pool that held nothing and one that held: assume nothing
                return a + (b - a) * (replicas - lo) / (hi - lo)
        return self.pool_rps[sizes[-1]] / sizes[-1]

    def replicas_for(self, rate: float) -> int:
        """The fewest replicas (at least 1) whose pool holds ``rate`` requests per second.

        Pools measured to hold nothing (``pool_rps`` 0) are never enough, whatever the rate; past the
        largest pool measured, the per-replica rate is held.
        """
        k = 1
        while k * self.per_replica_at(k) < rate - 1e-9 or self.per_replica_at(k) <= 0:
            k += 1
            if k > 100_000:
                raise ValueError(f"no pool measured holds the SLO (capacity {self.pool_rps})")
        return k


def workload_of(
    arrivals: Sequence[Arrival], interval_s: float = 60.0, *, skip: frozenset[int] = frozenset()
) -> list[tuple[float, int, int]]:
    """The trace as a rate-free workload: ``(gap, prompt, output)`` per accepted request, in order.

    Each gap (from the previous accepted request) is multiplied by the arrival rate of its ``interval_s``
    window, so the trace's slow swings of rate drop out while its bursts (several requests in the same
    instant, clusters) stay; gaps are then scaled to a mean of 1. Replaying the gaps divided by a rate
    gives that rate with the trace's own burstiness.
    """
    rates = interval_rates(arrivals, interval_s, skip=skip)
    rows: list[tuple[float, int, int]] = []
    previous: float | None = None
    for i, a in enumerate(arrivals):
        if i in skip:
            continue
        gap = 0.0 if previous is None else (a.send_time - previous) * rates[int(a.send_time // interval_s)]
        previous = a.send_time
        rows.append((gap, a.prompt_tokens, a.max_tokens))
    if len(rows) > 1:
        rows[0] = (sum(g for g, _, _ in rows[1:]) / (len(rows) - 1), rows[0][1], rows[0][2])
    mean = sum(g for g, _, _ in rows) / len(rows) if rows else 0.0
    # Every request at one instant leaves no pattern to keep: space them evenly.
    return [(g / mean if mean > 0 else 1.0, p, o) for g, p, o in rows]


def measure_capacity(
    workload: Sequence[tuple[float, int, int]],
    profile: EngineProfile,
    slo_ttft_s: float,
    *,
    up_to_rps: float = 0.0,
    requests: int = 3000,
    seed: int = 0,
    precision: float = 0.04,
) -> Capacity:
    """The capacity curve at the SLO, by bisection on simulated runs of pools of 1, 2, 4, ... replicas.

    ``workload`` is the trace's own requests as ``(gap, prompt, output)`` with gaps in units of the mean
    gap (``workload_of``). Each trial replays ``requests`` consecutive ones (more for big pools, so a trial
    lasts a few minutes; from a random place in the trace, wrapping around), gaps divided by the rate tried,
    to a pool of warm replicas of a fixed count: the trace's lengths and burstiness at that rate, the same
    requests at every rate. A rate holds when p95 TTFT stays within the SLO; requests that would miss it
    even on an idle engine are left out (no replica count helps them). Pools double until one holds
    ``up_to_rps`` (e.g. the trace's peak rate).
    """
    if not workload:
        raise ValueError("measure_capacity needs at least one (gap, prompt, output) request")
    rng = random.Random(f"{seed}:capacity")
    infeasible_share = 1 - sum(1 for _, p, _ in workload if unloaded_ttft(profile, p) <= slo_ttft_s) / len(workload)
    trials = 0
    pool: dict[int, float] = {}
    size = 1
    mean_out = sum(o for _, _, o in workload) / len(workload)
    # Decode alone with the batch full: no replica serves more than this.
    ceiling = profile.saturation_tokens_per_s() / mean_out
    while True:
        count = requests * max(1, int(math.sqrt(size)))
        start = rng.randrange(len(workload))
        sample = [workload[(start + k) % len(workload)] for k in range(count)]
        counted = [k for k, (_, p, _) in enumerate(sample) if unloaded_ttft(profile, p) <= slo_ttft_s]
        config = FleetConfig(profile=profile, initial_replicas=size, tick_s=1e9)
        fixed = StaticPolicy("capacity", size)

        def holds(rate: float) -> bool:
            nonlocal trials
            trials += 1
            t = 0.0
            arrivals = []
            for gap, prompt, output in sample:  # noqa: B023 - used at once
                t += gap / rate
                arrivals.append(Arrival(t, prompt, output))
            return keeps_slo(simulate(arrivals, fixed, config), counted, slo_ttft_s)  # noqa: B023

        # Per replica, a pool holds at least what half of it did and, in practice, well under 1.5 times that
        # (pooling gains shrink as pools grow); the decode ceiling bounds it in any case.
        lo, hi = 0.0, ceiling * size
        half = pool[size // 2] / (size // 2) if pool else 0.0
        if half > 0:
            lo, guess = half * size, min(ceiling, 1.5 * half) * size
            if not holds(guess):
                hi = guess
            else:
                lo = guess
        # A pool that misses the SLO even at 1% of its decode ceiling holds nothing (bursts of simultaneous
        # requests a pool this small cannot absorb, or prompts too long for the SLO): it counts as 0.
        floor = ceiling * size / 100
        while hi - lo > precision * hi and hi > floor:
            mid = (lo + hi) / 2
            if holds(mid):
                lo = mid
            else:
                hi = mid
        pool[size] = lo
        if (lo > 0 and lo >= up_to_rps) or size >= 1024:
            break
        size *= 2
    return Capacity(pool, slo_ttft_s, profile.name, trials, infeasible_share)


def interval_rates(
    arrivals: Sequence[Arrival], interval_s: float, *, skip: frozenset[int] = frozenset()
) -> list[float]:
    """Requests per second arriving in each ``interval_s`` window from 0 (``skip``: refused requests)."""
    if not arrivals:
        return []
    counts = [0] * (int(arrivals[-1].send_time // interval_s) + 1)
    for i, a in enumerate(arrivals):
        if i not in skip:
            counts[int(a.send_time // interval_s)] += 1
    return [c / interval_s for c in counts]


# --- the oracle ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class SchedulePolicy:
    """Runs a plan of ready replicas per interval, starting each replica ``lead_s`` before it is needed."""

    name: str
    plan: list[int]
    interval_s: float
    lead_s: float
    floor: int = 1

    def wanted(self, t: float, until: float) -> int:
        first = int(t // self.interval_s)
        last = int(max(t, until - 1e-9) // self.interval_s)
        return max([self.floor] + [self.plan[j] for j in range(first, last + 1) if j < len(self.plan)])

    def decide(self, view: FleetView) -> Scale:
        # Replicas asked for now are ready at t + cold start; the next tick can add more only for needs
        # after that, so this tick covers every need until then.
        wanted = self.wanted(view.t, view.t + self.lead_s)
        ahead = f" for the next {self.lead_s:g}s" if self.lead_s > 0 else ""
        return Scale(wanted, "Planned", f"{wanted} replicas planned{ahead}")


@dataclass(slots=True)
class OraclePlan:
    """The oracle's schedule, how it was found, and the simulation of it."""

    policy: SchedulePolicy
    result: FleetResult
    simulations: int
    met: bool
    """Whether the run kept the SLO (``keeps_slo``)."""
    scale: float = 1.0
    """The capacity scale the plan was built with (see ``plan_oracle``)."""
    source: str = "planned"
    """``planned``, ``static-peak`` when the flat peak schedule was the cheapest that kept the SLO, or
    ``reactive`` (``plan_reactive``)."""
    frontier: tuple[tuple[float, float], ...] = ()
    """``(gpu_seconds, feasible attainment)`` of every planned schedule run, cheapest first, each dearer one
    attaining more (see ``gpu_seconds_at``)."""

    def gpu_seconds_at(self, attainment: float) -> tuple[float, bool]:
        """What a schedule planned with the future costs at ``attainment`` (feasible requests within the SLO).

        Interpolated between the frontier's runs; below the cheapest run, that run's cost scaled down in
        proportion. The flag is False when no planned run reached ``attainment``: the answer is then the
        dearest run's cost, which flatters nothing (the policy attained more than any plan tried).
        """
        points = self.frontier or ((self.result.gpu_seconds, 1.0),)
        if attainment <= points[0][1]:
            cost, reached = points[0]
            return (cost * attainment / reached if reached > 0 else cost), True
        for (c0, a0), (c1, a1) in itertools.pairwise(points):
            if attainment <= a1:
                return c0 + (c1 - c0) * (attainment - a0) / (a1 - a0), True
        return points[-1][0], False


def feasible_attainment(result: FleetResult, counted: Sequence[int], slo_ttft_s: float) -> float | None:
    """Share of the ``counted`` requests (accepted, within the SLO on an idle engine) whose TTFT met the SLO."""
    if not counted:
        return None
    ttft = result.ttft
    return sum(1 for i in counted if ttft[i] <= slo_ttft_s) / len(counted)  # NaN (no first token) is a miss


def pareto_frontier(points: Iterable[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """The ``(gpu_seconds, attainment)`` points no other beats: by cost, each attaining more than every
    cheaper one (of equal costs, the one attaining most)."""
    kept: list[tuple[float, float]] = []
    for cost, attained in sorted(points, key=lambda p: (p[0], -p[1])):
        if not kept or attained > kept[-1][1]:
            kept.append((cost, attained))
    return tuple(kept)


def counted_requests(arrivals: Sequence[Arrival], profile: EngineProfile, slo_ttft_s: float) -> list[int]:
    """The requests the oracle's SLO check counts: accepted, and within the SLO on an idle engine."""
    refused = refused_requests(arrivals, profile)
    return [
        i for i, a in enumerate(arrivals) if i not in refused and unloaded_ttft(profile, a.prompt_tokens) <= slo_ttft_s
    ]


def keeps_slo(result: FleetResult, counted: Sequence[int], slo_ttft_s: float) -> bool:
    """p95 TTFT over the ``counted`` requests within the SLO (a request with no first token counts as a miss)."""
    ttft = result.ttft
    p95 = percentile(sorted(ttft[i] if ttft[i] == ttft[i] else math.inf for i in counted), 95)
    return p95 is None or p95 <= slo_ttft_s


def plan_oracle(
    arrivals: Sequence[Arrival],
    capacity: Capacity,
    config: FleetConfig,
    *,
    interval_s: float = 60.0,
    max_simulations: int = 4,
    frontier_scales: Sequence[float] = (0.6, 0.8, 1.3, 1.7),
) -> OraclePlan:
    """The fewest GPU-seconds schedule planned in advance that keeps the SLO: an estimate of the lower bound.

    "Keeps the SLO" is the bar every policy is judged by: p95 TTFT over the whole run within the SLO,
    counting the requests an idle engine could serve within it (no schedule helps the others).

    1. For every ``interval_s`` window, the replicas its future arrivals need: the fewest whose pool holds
       the window's rate at the SLO (``Capacity.replicas_for``), at least 1. Each replica is started a cold
       start plus one tick before its window and kept rather than restarted across a dip shorter than that.
    2. The measured capacity is an estimate, so the plan is built for ``scale`` x the future rates and
       simulated; ``scale`` starts at 1, doubles (or halves) until one plan keeps the SLO and one misses,
       then is bisected between them for the cheapest plan that keeps it, up to ``max_simulations`` runs
       (a plan already tried is not run again).
    3. The cheapest run that kept the SLO wins; if none did, the last one tried, marked unmet.
    4. Plans for ``frontier_scales`` x the winner's scale are run too (below 1 cheaper and attaining less,
       above 1 dearer and attaining more): with every run before, they trace what planning with the future
       costs at each attainment (``OraclePlan.gpu_seconds_at``), so a policy is judged against the oracle at
       the attainment it reached.

    It is an estimate of the lower bound, not a proof: the capacity is measured, the plan's shape follows
    the measured curve, the search is bounded, and plans move in whole replicas per window.
    """
    slo, profile = capacity.slo_ttft_s, config.profile
    rates = interval_rates(arrivals, interval_s, skip=refused_requests(arrivals, profile))
    counted = counted_requests(arrivals, profile, slo)
    lead = config.cold_start + config.tick_s

    tried: dict[tuple[int, ...], OraclePlan] = {}
    best: OraclePlan | None = None
    last: OraclePlan | None = None
    missed: float | None = None  # the largest scale known to miss the SLO
    kept: float | None = None  # the smallest scale known to keep it
    scale, runs = 1.0, 0
    # Scales that give a plan already run cost nothing, so the search is also bounded in steps.
    for _ in range(8 * max_simulations):
        if runs >= max_simulations:
            break
        plan = tuple(capacity.replicas_for(r * scale) for r in rates)
        outcome = tried.get(plan)
        if outcome is None:
            policy = SchedulePolicy("oracle", list(plan), interval_s, lead)
            result = simulate(arrivals, policy, replace(config, initial_replicas=policy.wanted(0.0, lead)))
            runs += 1
            outcome = OraclePlan(policy, result, runs, keeps_slo(result, counted, slo), scale)
            tried[plan] = outcome
            last = outcome
            if outcome.met and (best is None or result.gpu_seconds < best.result.gpu_seconds):
                best = outcome
        if outcome.met:
            kept = scale if kept is None else min(kept, scale)
        else:
            missed = scale if missed is None else max(missed, scale)
        if kept is None:
            scale *= 2  # nothing kept it yet: look higher, fast
        elif missed is None:
            scale /= 2
        elif kept - missed < 0.01:
            break
        else:
            scale = (missed + kept) / 2
    assert last is not None
    chosen = best or last
    for factor in frontier_scales:
        plan = tuple(capacity.replicas_for(r * chosen.scale * factor) for r in rates)
        if plan not in tried:
            policy = SchedulePolicy("oracle", list(plan), interval_s, lead)
            result = simulate(arrivals, policy, replace(config, initial_replicas=policy.wanted(0.0, lead)))
            runs += 1
            tried[plan] = OraclePlan(policy, result, runs, keeps_slo(result, counted, slo), chosen.scale * factor)
    chosen.simulations = runs
    chosen.frontier = pareto_frontier(
        (o.result.gpu_seconds, feasible_attainment(o.result, counted, slo) or 0.0) for o in tried.values()
    )
    return chosen


def plan_reactive(
    arrivals: Sequence[Arrival],
    capacity: Capacity,
    config: FleetConfig,
    *,
    interval_s: float = 60.0,
    scales: Sequence[float] = REACTIVE_SCALES,
    holds_s: Sequence[float] = REACTIVE_HOLDS_S,
) -> OraclePlan:
    """What a policy without foresight spends at best: the oracle's counterpart that knows only the past.

    At every tick it knows exactly what the oracle plans from, only late: the arrival rate of the last
    ``interval_s`` and the measured pool capacity (``Capacity.replicas_for``), and it sizes for that at once;
    its replicas are ready a cold start later, as anyone's are. It is run for each multiple in ``scales`` of
    what that rate needs and each ``holds_s`` (how long a size is kept before replicas are let go), and the
    runs trace what reacting costs at each attainment (``OraclePlan.gpu_seconds_at``). The run returned is the
    cheapest that kept the SLO, else the one that attained most.

    Where a policy is far above the oracle and close to this, the difference is foresight: bursts that come
    faster than a cold start, which no measurement of the past can meet without standing headroom. It is an
    estimate, not a bound in the strict sense: a policy that reacts to the queue within a tick can beat it.
    """
    slo, profile = capacity.slo_ttft_s, config.profile
    tick = config.tick_s
    per_tick = interval_rates(arrivals, tick, skip=refused_requests(arrivals, profile))
    span = max(1, round(interval_s / tick))
    # At tick k, the rate over the ``span`` ticks before it (the first tick knows its own).
    past = [per_tick[0]] + [sum(per_tick[max(0, k - span) : k]) / min(k, span) for k in range(1, len(per_tick))]
    counted = counted_requests(arrivals, profile, slo)
    tried: dict[tuple[int, ...], OraclePlan] = {}
    for hold_s, scale in itertools.product(holds_s, scales):
        need = [capacity.replicas_for(rate * scale) for rate in past]
        kept = max(1, round(hold_s / tick) + 1)
        plan = tuple(max(need[max(0, k - kept + 1) : k + 1]) for k in range(len(need)))
        if plan in tried:
            continue
        policy = SchedulePolicy("reactive", list(plan), tick, lead_s=0.0)
        result = simulate(arrivals, policy, replace(config, initial_replicas=plan[0]))
        tried[plan] = OraclePlan(policy, result, len(tried) + 1, keeps_slo(result, counted, slo), scale, "reactive")
    runs = list(tried.values())
    met = [run for run in runs if run.met]
    chosen = (
        min(met, key=lambda run: run.result.gpu_seconds)
        if met
        else max(runs, key=lambda run: feasible_attainment(run.result, counted, slo) or 0.0)
    )
    return replace(
        chosen,
        simulations=len(runs),
        frontier=pareto_frontier(
            (run.result.gpu_seconds, feasible_attainment(run.result, counted, slo) or 0.0) for run in runs
        ),
    )


def cheaper_static(
    oracle: OraclePlan, replicas: int, static_run: FleetResult, counted: Sequence[int], slo_ttft_s: float
) -> OraclePlan:
    """The flat schedule at ``replicas`` is also planned in advance: the oracle's answer when it is cheaper
    and keeps the SLO."""
    if not keeps_slo(static_run, counted, slo_ttft_s):
        return oracle
    if oracle.met and oracle.result.gpu_seconds <= static_run.gpu_seconds:
        return oracle
    old = oracle.policy
    flat = SchedulePolicy("oracle", [replicas] * len(old.plan), old.interval_s, old.lead_s)
    # The flat schedule joins the frontier of what planning ahead costs at each attainment.
    frontier = pareto_frontier(
        [*oracle.frontier, (static_run.gpu_seconds, feasible_attainment(static_run, counted, slo_ttft_s) or 0.0)]
    )
    return OraclePlan(
        flat, replace(static_run, policy="oracle"), oracle.simulations, True, 1.0, "static-peak", frontier
    )


def refused_requests(arrivals: Sequence[Arrival], profile: EngineProfile) -> frozenset[int]:
    """Indices of the requests the engine refuses (too long for ``max_model_len``, empty, no output)."""
    limit = profile.max_model_len
    return frozenset(
        i for i, a in enumerate(arrivals) if validate_request(a.prompt_tokens, a.max_tokens, limit) is not None
    )
