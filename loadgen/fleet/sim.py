"""A discrete-event simulator of a fleet of engine replicas, in simulated time, with a scaling policy.

Replicas are ``EngineModel`` instances (the simengine's own model, without per-token events) behind a
balancer that sends each request to the serving replica with the fewest outstanding requests, as the
local cluster's service proxy does. A scaling policy is asked every ``tick_s`` (15 s, the operator's
default tick) for a replica count, given a ``FleetView``: the same signals the operator reads from
Prometheus, computed from the simulated engines. Time jumps from event to event (the next arrival, the
next engine event, the next cold-start or drain deadline, the next tick), never in small fixed steps,
so an hour of traffic at 20 req/s takes seconds::

    result = simulate(arrivals, policy, FleetConfig(profile=get_profile("a10g-llama3-8b-awq")))
    result.summary(slo_ttft_s=1.0)  # slo_attainment, ttft_p95, ttft_p99, gpu_seconds, scale_events, ...

How the fleet behaves:

* Replicas present at time 0 (``initial_replicas``) are warm: they serve at once. A replica added later
  serves only after ``cold_start_s`` (the profile's, unless overridden). Requests that arrive while no
  replica is ready wait at the balancer and count towards their TTFT.
* A replica removed by a scale-down takes no new requests, finishes those it has (a drain) and is gone
  when the last one finishes; at ``drain_timeout_s`` (the pod's termination grace period) it is killed
  and what it still had fails. Like a ReplicaSet, a scale-down removes replicas still starting first,
  then the most recently started ready ones.
* GPU-seconds: for every replica, the time from its start (cold start included) to its removal, or to
  the end of the run (the last request finished), times ``gpus_per_replica``.
* Requests the engine would refuse (too long for ``max_model_len``) are refused at arrival, as the
  engine answers them with HTTP 400: they take no capacity and have no TTFT.
* Each replica has its own prefix cache. Arrivals that carry content (a Mooncake trace's ``hash_ids``, a
  ``loadgen.traffic.prompts`` mix) hit it as they would a vLLM replica's; arrivals without share nothing, which
  is every CSV trace. The balancer does not route by prefix.

What the policy sees (``FleetView``), mirroring how ``inferscale.autoscaler`` builds an ``Observation``:
queue depth and running requests summed over the replicas that serve HTTP (ready and draining), KV-cache
usage and GPU utilisation averaged over them (utilisation is the share of the last tick the engine spent
stepping, which is what DCGM's GPU utilisation shows for an engine), and the p95 TTFT over the last
``ttft_window_s`` as Prometheus' ``histogram_quantile`` computes it from vLLM's TTFT buckets (so the same
interpolation error the operator lives with). Without a ready replica there are no engine metrics.
Signals are read at the tick itself: no scrape interval, no Prometheus lag, no Pending pods (GPUs are
unlimited).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from inferscale.settings import SCALING

from loadgen.client.stats import percentile
from loadgen.engine.metrics import VLLM_REQUEST_LATENCY_BUCKETS, VLLM_TTFT_BUCKETS
from loadgen.engine.model import EngineModel, Finished, FirstToken, Scheduled, validate_request
from loadgen.engine.profiles import EngineProfile
from loadgen.traffic.prompts import block_keys
from loadgen.traffic.shapes import Arrival

__all__ = [
    "TTFT_BUCKETS",
    "FleetConfig",
    "FleetResult",
    "FleetView",
    "Policy",
    "Scale",
    "ScaleEvent",
    "TickRow",
    "histogram_quantile",
    "simulate",
]

# vLLM's vllm:time_to_first_token_seconds buckets, the ones the simengine exports.
TTFT_BUCKETS: tuple[float, ...] = tuple(VLLM_TTFT_BUCKETS)

_INF = math.inf


def histogram_quantile(q: float, counts: Sequence[int], bounds: Sequence[float] = TTFT_BUCKETS) -> float | None:
    """Prometheus' ``histogram_quantile`` over per-bucket (not cumulative) ``counts``; the last is +Inf.

    Linear interpolation inside the bucket holding the rank, from 0 for the first bucket; a rank in the
    +Inf bucket answers the highest finite bound. ``None`` (Prometheus: NaN) when there are no samples.
    """
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for i, count in enumerate(counts):
        if seen + count >= rank and count > 0:
            if i >= len(bounds):
                return bounds[-1]
            lower = bounds[i - 1] if i > 0 else 0.0
            return lower + (bounds[i] - lower) * (rank - seen) / count
        seen += count
    return bounds[-1]


@dataclass(frozen=True, slots=True)
class FleetView:
    """What a policy sees at one tick: replica counts and the engines' signals (see the module docstring)."""

    t: float
    current_replicas: int
    """Replicas asked for (the Deployment's spec.replicas): starting plus ready, draining ones excluded."""
    ready_replicas: int
    starting_replicas: int
    draining_replicas: int
    queue_depth: float | None
    """Requests waiting in the engines, summed; None without a ready replica (no engine metrics)."""
    running_requests: float | None
    ttft_p95: float | None
    """p95 TTFT over the window, from the TTFT histogram; None when no request got a first token in it."""
    kv_cache_usage: float | None
    gpu_utilization: float | None
    """Mean GPU utilisation over the replicas serving HTTP, in percent (0..100)."""
    replica_gpu_utilization: tuple[float, ...]
    """GPU utilisation of each ready replica, in percent (what an HPA averages)."""
    arrival_rate: float
    """Requests per second that arrived since the previous tick."""
    request_rate: float | None = None
    """Requests finished per second over the window (``rate(vllm:request_success_total)``); None without
    a ready replica."""
    queue_time: float | None = None
    """Mean seconds the requests finished in the window waited in an engine before their prefill began
    (``vllm:request_queue_time_seconds`` _sum over _count); None when none finished."""
    prefill_time: float | None = None
    """Mean seconds from scheduling to first token of those requests (``vllm:request_prefill_time_seconds``)."""
    prefill_p95: float | None = None
    """p95 of that prefill time, from vLLM's histogram buckets as Prometheus interpolates them."""
    replica_queue_depth: tuple[float, ...] = ()
    """Requests waiting in each ready replica (vLLM's per-pod ``num_requests_waiting``), in the order of
    ``replica_gpu_utilization``: the order the replicas became ready; a scale-down removes the last ones."""
    replica_running_requests: tuple[float, ...] = ()
    """Requests running in each ready replica (per-pod ``num_requests_running``), same order."""
    replica_kv_cache_usage: tuple[float, ...] = ()
    """KV-cache usage (0..1) of each ready replica (per-pod ``kv_cache_usage_perc``), same order."""


class Scale(NamedTuple):
    """A policy's answer: the replica count to run, and why (a stable word and a sentence)."""

    replicas: int
    reason: str = ""
    message: str = ""


class Policy(Protocol):
    """A scaling policy: called at every tick with the fleet's view, answers a replica count."""

    @property
    def name(self) -> str: ...

    def decide(self, view: FleetView) -> Scale: ...


@dataclass(frozen=True, slots=True)
class FleetConfig:
    """The fleet's engine and timings."""

    profile: EngineProfile
    initial_replicas: int = 1
    """Warm replicas at time 0."""
    tick_s: float = SCALING.tick_seconds
    ttft_window_s: float = float(SCALING.ttft_window_seconds)
    """Range of the p95 TTFT signal; both default to the operator's (``inferscale.settings``)."""
    drain_timeout_s: float = 120.0
    """A removed replica is killed this long after it stopped taking requests (spec.drainSeconds)."""
    cold_start_s: float | None = None
    """Start to ready for added replicas; None means the profile's ``cold_start_s``."""
    gpus_per_replica: int = 1

    def __post_init__(self) -> None:
        if self.initial_replicas < 0:
            raise ValueError(f"initial_replicas must be >= 0, got {self.initial_replicas}")
        if not self.tick_s > 0:
            raise ValueError(f"tick_s must be > 0 seconds, got {self.tick_s}")
        if not self.ttft_window_s > 0:
            raise ValueError(f"ttft_window_s must be > 0 seconds, got {self.ttft_window_s}")
        if self.drain_timeout_s < 0:
            raise ValueError(f"drain_timeout_s must be >= 0 seconds, got {self.drain_timeout_s}")
        if self.cold_start_s is not None and self.cold_start_s < 0:
            raise ValueError(f"cold_start_s must be >= 0 seconds, got {self.cold_start_s}")
        if self.gpus_per_replica < 1:
            raise ValueError(f"gpus_per_replica must be >= 1, got {self.gpus_per_replica}")

    @property
    def cold_start(self) -> float:
        return self.profile.cold_start_s if self.cold_start_s is None else self.cold_start_s


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    """The policy changed the replica count at ``t``."""

    t: float
    from_replicas: int
    to_replicas: int
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class TickRow:
    """One tick of the time series."""

    t: float
    arrival_rate: float
    replicas: int
    ready: int
    queue: float
    running: float
    ttft_p95: float | None
    gpu_utilization: float | None
    reason: str
    message: str = ""
    """The decision's one sentence (the policy's own words; empty for baselines that give none)."""


@dataclass(slots=True)
class FleetResult:
    """What one simulated run produced.

    ``ttft[i]`` is NaN for a request that never got a first token; ``served_by[i]`` is the index of the
    replica (in order of creation) the balancer sent it to, -1 if none (refused, or never dispatched).
    """

    policy: str
    ttft: list[float]
    served_by: list[int]
    rejected: int
    failed: int
    """Accepted requests that never got a first token (killed at the end of a drain while waiting)."""
    killed: int
    """Requests cut off by a drain timeout, with or without a first token: errors a client would see."""
    gpu_seconds: float
    end_time: float
    scale_events: list[ScaleEvent] = field(default_factory=list)
    timeseries: list[TickRow] = field(default_factory=list)
    rejected_ids: frozenset[int] = frozenset()

    def summary(self, slo_ttft_s: float) -> dict[str, Any]:
        """The per-policy figures of a comparison (JSON-ready).

        ``slo_attainment`` is the share of the requests the engine accepted whose TTFT was at most the SLO;
        accepted requests that failed (killed at the end of a drain) count as misses. Refused requests are
        left out of it (no replica count can serve them) and counted in ``rejected``;
        ``slo_attainment_all`` counts them as misses too. ``ttft_p95`` and ``ttft_p99`` are over the requests
        that got a first token (exact percentiles, not the histogram the policy sees).
        """
        served = sorted(x for x in self.ttft if x == x)  # NaN != NaN
        accepted = len(self.ttft) - self.rejected
        met = sum(1 for x in served if x <= slo_ttft_s)
        p95, p99 = percentile(served, 95), percentile(served, 99)
        replicas = [row.replicas for row in self.timeseries]
        return {
            "slo_attainment": met / accepted if accepted else None,
            "gpu_seconds": self.gpu_seconds,
            "ttft_p95": p95,
            "ttft_p99": p99,
            "scale_events": len(self.scale_events),
            "requests": len(self.ttft),
            "rejected": self.rejected,
            "failed": self.failed,
            "killed": self.killed,
            "slo_attainment_all": met / len(self.ttft) if self.ttft else None,
            "ttft_p50": percentile(served, 50),
            "max_replicas": max(replicas, default=0),
            "mean_replicas": sum(replicas) / len(replicas) if replicas else 0.0,
            "duration_s": self.end_time,
        }


# --- the simulator ----------------------------------------------------------------------------------


class _Replica:
    __slots__ = (
        "busy_mark",
        "created",
        "draining",
        "gone",
        "index",
        "mark_t",
        "model",
        "outstanding",
        "ready",
        "removed_at",
        "version",
    )

    def __init__(self, index: int, model: EngineModel, created: float, ready: bool) -> None:
        self.index = index
        self.model = model
        self.created = created
        self.ready = ready
        self.draining = False
        self.gone = False
        self.removed_at: float | None = None
        self.outstanding = 0
        self.version = 0
        self.busy_mark = 0.0  # engine busy seconds at the previous tick
        self.mark_t = created  # when busy_mark was taken (or when it became ready)


_READY, _KILL = 0, 1


class _Fleet:
    def __init__(self, arrivals: Sequence[Arrival], policy: Policy, config: FleetConfig) -> None:
        self.arrivals = arrivals
        self.policy = policy
        self.config = config
        self.profile = config.profile
        self.cold_start = config.cold_start
        n = len(arrivals)
        self.ttft = [math.nan] * n
        self.served_by = [-1] * n
        self.replicas: list[_Replica] = []
        self.serving: list[_Replica] = []  # ready and not draining: the balancer's targets
        self.starting: list[_Replica] = []
        self.draining: list[_Replica] = []
        self.held: deque[int] = deque()  # requests waiting at the balancer for a ready replica
        self.events: list[tuple[float, int, int, _Replica]] = []  # (time, seq, version, replica)
        self.timers: list[tuple[float, int, int, _Replica]] = []  # (time, seq, kind, replica)
        self.dirty: set[_Replica] = set()
        self.seq = 0
        self.outstanding = 0
        self.failed = 0
        self.killed = 0
        self.window: deque[tuple[float, int]] = deque()  # (first-token time, bucket) in the TTFT window
        self.buckets = [0] * (len(TTFT_BUCKETS) + 1)
        # Per request: when a replica took it and when it was first scheduled there (vLLM's queue time is
        # the difference, its prefill time runs from scheduling to the first token).
        self.dispatched_at = [math.nan] * n
        self.scheduled_at = [math.nan] * n
        # Requests finished within the window: (finish time, queue s, prefill s, prefill bucket), as vLLM
        # records both histograms when a request finishes.
        self.finished: deque[tuple[float, float, float, int]] = deque()
        self.finished_sums = [0.0, 0.0]
        self.prefill_buckets = [0] * (len(VLLM_REQUEST_LATENCY_BUCKETS) + 1)
        self.arrived_since_tick = 0
        self.last_tick = 0.0
        self.done_arriving = False
        self.scale_events: list[ScaleEvent] = []
        self.timeseries: list[TickRow] = []

    # --- replicas ---

    def add_replica(self, t: float, *, warm: bool) -> None:
        model = EngineModel(self.profile, token_events=False, start=t)
        ready = warm or self.cold_start <= 0
        replica = _Replica(len(self.replicas), model, t, ready)
        self.replicas.append(replica)
        if ready:
            self.serving.append(replica)
        else:
            self.starting.append(replica)
            self.push_timer(t + self.cold_start, _READY, replica)

    def push_timer(self, t: float, kind: int, replica: _Replica) -> None:
        self.seq += 1
        heapq.heappush(self.timers, (t, self.seq, kind, replica))

    def remove(self, replica: _Replica, t: float) -> None:
        replica.gone = True
        replica.removed_at = t
        if replica in self.draining:
            self.draining.remove(replica)

    def scale_to(self, target: int, t: float) -> None:
        current = len(self.serving) + len(self.starting)
        for _ in range(target - current):
            self.add_replica(t, warm=False)
        for _ in range(current - target):
            if self.starting:
                # A ReplicaSet deletes pods that are not ready first, the youngest first.
                replica = self.starting.pop()
                self.remove(replica, t)
                continue
            replica = self.serving.pop()  # the most recently started ready replica
            replica.draining = True
            if replica.outstanding == 0:
                self.remove(replica, t)
            else:
                self.draining.append(replica)
                self.push_timer(t + self.config.drain_timeout_s, _KILL, replica)

    # --- requests ---

    def dispatch(self, rid: int, t: float) -> None:
        serving = self.serving
        if not serving:
            self.held.append(rid)
            return
        best = serving[0]
        if len(serving) > 1:
            low = best.outstanding
            for replica in serving:
                if replica.outstanding < low:
                    best, low = replica, replica.outstanding
        arrival = self.arrivals[rid]
        content = arrival.content
        # Each replica has a prefix cache of its own; the balancer does not route by prefix (see README).
        keys = None if content is None else block_keys(content, best.model.profile.block_size)
        best.model.submit(rid, arrival.prompt_tokens, arrival.max_tokens, at=t, block_keys=keys)
        self.dispatched_at[rid] = t
        self.served_by[rid] = best.index
        best.outstanding += 1
        self.dirty.add(best)

    def collect(self, replica: _Replica, t: float) -> None:
        """Advance one replica to ``t`` and account for its events."""
        arrivals, ttft, window, buckets = self.arrivals, self.ttft, self.window, self.buckets
        for event in replica.model.advance(t):
            kind = type(event)
            if kind is FirstToken:
                assert isinstance(event, FirstToken)
                rid = event.request_id
                assert isinstance(rid, int)
                value = event.t - arrivals[rid].send_time
                ttft[rid] = value
                b = bisect.bisect_left(TTFT_BUCKETS, value)
                buckets[b] += 1
                window.append((event.t, b))
            elif kind is Finished:
                assert isinstance(event, Finished)
                replica.outstanding -= 1
                self.outstanding -= 1
                self.record_finished(event.request_id, event.t)
            elif kind is Scheduled:
                assert isinstance(event, Scheduled)
                rid = event.request_id
                if not event.resumed and isinstance(rid, int):
                    self.scheduled_at[rid] = event.t
        self.dirty.add(replica)
        if replica.draining and replica.outstanding == 0 and not replica.gone:
            self.remove(replica, t)

    def record_finished(self, rid: object, t: float) -> None:
        assert isinstance(rid, int)
        scheduled, first = self.scheduled_at[rid], self.arrivals[rid].send_time + self.ttft[rid]
        if scheduled != scheduled or first != first:
            return  # aborted before it was scheduled or produced a token: vLLM records neither
        queue, prefill = scheduled - self.dispatched_at[rid], first - scheduled
        b = bisect.bisect_left(VLLM_REQUEST_LATENCY_BUCKETS, prefill)
        self.finished.append((t, queue, prefill, b))
        self.finished_sums[0] += queue
        self.finished_sums[1] += prefill
        self.prefill_buckets[b] += 1

    def kill(self, replica: _Replica, t: float) -> None:
        """The drain deadline passed: the pod is killed and its requests fail."""
        self.collect(replica, t)
        if replica.gone:
            return
        for rid in replica.model.in_flight():
            assert isinstance(rid, int)
            self.killed += 1
            if self.ttft[rid] != self.ttft[rid]:
                self.failed += 1  # never got a first token; one that did keeps its TTFT, its stream breaks
        self.outstanding -= replica.outstanding
        replica.outstanding = 0
        self.remove(replica, t)

    # --- ticks ---

    def view(self, t: float) -> FleetView:
        live = self.serving + self.draining
        window, buckets = self.window, self.buckets
        horizon = t - self.config.ttft_window_s
        while window and window[0][0] <= horizon:
            buckets[window.popleft()[1]] -= 1
        finished, sums = self.finished, self.finished_sums
        while finished and finished[0][0] <= horizon:
            _, queue, prefill, b = finished.popleft()
            sums[0] -= queue
            sums[1] -= prefill
            self.prefill_buckets[b] -= 1
        elapsed = t - self.last_tick
        rate = self.arrived_since_tick / elapsed if elapsed > 0 else 0.0
        if not self.serving:
            return FleetView(
                t=t,
                current_replicas=len(self.starting),
                ready_replicas=0,
                starting_replicas=len(self.starting),
                draining_replicas=len(self.draining),
                queue_depth=None,
                running_requests=None,
                ttft_p95=None,
                kv_cache_usage=None,
                gpu_utilization=None,
                replica_gpu_utilization=(),
                arrival_rate=rate,
            )
        waiting = running = 0
        kv = 0.0
        utils: list[float] = []
        queues: list[float] = []
        runs: list[float] = []
        kvs: list[float] = []
        for replica in live:
            model = replica.model
            waiting += model.num_waiting
            running += model.num_running
            usage = model.snapshot().kv_usage
            kv += usage
            busy = model.counters.busy_s
            span = t - replica.mark_t
            utils.append(min(1.0, (busy - replica.busy_mark) / span) * 100 if span > 0 else 0.0)
            queues.append(float(model.num_waiting))
            runs.append(float(model.num_running))
            kvs.append(usage)
        ready_utils = tuple(u for replica, u in zip(live, utils, strict=True) if not replica.draining)
        n = len(self.serving)  # live lists the serving replicas first
        return FleetView(
            t=t,
            current_replicas=len(self.serving) + len(self.starting),
            ready_replicas=len(self.serving),
            starting_replicas=len(self.starting),
            draining_replicas=len(self.draining),
            queue_depth=float(waiting),
            running_requests=float(running),
            ttft_p95=histogram_quantile(0.95, buckets),
            kv_cache_usage=kv / len(live),
            gpu_utilization=sum(utils) / len(utils),
            replica_gpu_utilization=ready_utils,
            arrival_rate=rate,
            request_rate=len(finished) / self.config.ttft_window_s,
            queue_time=max(0.0, sums[0]) / len(finished) if finished else None,
            prefill_time=max(0.0, sums[1]) / len(finished) if finished else None,
            prefill_p95=histogram_quantile(0.95, self.prefill_buckets, VLLM_REQUEST_LATENCY_BUCKETS),
            replica_queue_depth=tuple(queues[:n]),
            replica_running_requests=tuple(runs[:n]),
            replica_kv_cache_usage=tuple(kvs[:n]),
        )

    def tick(self, t: float) -> None:
        for replica in self.serving + self.draining:
            self.collect(replica, t)
        view = self.view(t)
        for replica in self.serving + self.draining:
            replica.busy_mark = replica.model.counters.busy_s
            replica.mark_t = t
        decision = self.policy.decide(view)
        target = max(0, decision.replicas)
        current = view.current_replicas
        if target != current:
            self.scale_events.append(ScaleEvent(t, current, target, decision.reason, decision.message))
            self.scale_to(target, t)
        self.timeseries.append(
            TickRow(
                t=t,
                arrival_rate=view.arrival_rate,
                replicas=target,
                ready=view.ready_replicas,
                queue=view.queue_depth or 0.0,
                running=view.running_requests or 0.0,
                ttft_p95=view.ttft_p95,
                gpu_utilization=view.gpu_utilization,
                reason=decision.reason,
                message=decision.message,
            )
        )
        self.arrived_since_tick = 0
        self.last_tick = t
        if self.held and not (self.serving or self.starting or self.draining) and self.done_arriving:
            # Nothing will ever serve them: the policy keeps no replica after the last arrival.
            self.failed += len(self.held)
            self.killed += len(self.held)
            self.outstanding -= len(self.held)
            self.held.clear()

    def became_ready(self, replica: _Replica, t: float) -> None:
        if replica.gone:
            return
        self.starting.remove(replica)
        replica.ready = True
        replica.mark_t = t
        self.serving.append(replica)
        held = self.held
        while held:
            self.dispatch(held.popleft(), t)

    # --- the loop ---

    def run(self) -> FleetResult:
        config, arrivals = self.config, self.arrivals
        for _ in range(config.initial_replicas):
            self.add_replica(0.0, warm=True)
        max_len = self.profile.max_model_len
        refused = frozenset(
            i for i, a in enumerate(arrivals) if validate_request(a.prompt_tokens, a.max_tokens, max_len) is not None
        )
        n = len(arrivals)
        i = 0
        next_tick = config.tick_s
        events, timers, dirty = self.events, self.timers, self.dirty
        now = 0.0
        while True:
            if dirty:
                for replica in dirty:
                    replica.version += 1
                    if replica.gone:
                        continue
                    nt = replica.model.next_event_time()
                    if nt is not None:
                        self.seq += 1
                        heapq.heappush(events, (nt, self.seq, replica.version, replica))
                dirty.clear()
            while events and events[0][2] != events[0][3].version:
                heapq.heappop(events)
            t_event = events[0][0] if events else _INF
            t_arrival = arrivals[i].send_time if i < n else _INF
            t_timer = timers[0][0] if timers else _INF
            if i >= n and self.outstanding == 0 and not self.held:
                break
            t = min(t_event, t_arrival, t_timer, next_tick)
            now = max(now, t)
            if t_event <= t:
                replica = heapq.heappop(events)[3]
                if not replica.gone:
                    self.collect(replica, max(t, replica.model.now))
            elif t_timer <= t:
                _, _, kind, replica = heapq.heappop(timers)
                if kind == _READY:
                    self.became_ready(replica, t)
                elif not replica.gone:
                    self.kill(replica, t)
            elif t_arrival <= t:
                while i < n and arrivals[i].send_time <= t:
                    self.arrived_since_tick += 1
                    if i in refused:
                        i += 1
                        continue
                    self.outstanding += 1
                    self.dispatch(i, t)
                    i += 1
                self.done_arriving = i >= n
            else:
                self.tick(t)
                next_tick += config.tick_s
        end = max(now, arrivals[-1].send_time if arrivals else 0.0)
        replica_seconds = sum((r.removed_at if r.removed_at is not None else end) - r.created for r in self.replicas)
        return FleetResult(
            policy=self.policy.name,
            ttft=self.ttft,
            served_by=self.served_by,
            rejected=len(refused),
            failed=self.failed,
            killed=self.killed,
            gpu_seconds=replica_seconds * config.gpus_per_replica,
            end_time=end,
            scale_events=self.scale_events,
            timeseries=self.timeseries,
            rejected_ids=refused,
        )


def simulate(arrivals: Sequence[Arrival], policy: Policy, config: FleetConfig) -> FleetResult:
    """Replay ``arrivals`` (sorted by send time) through a fleet scaled by ``policy``; see the module docstring.

    The run ends when the last request has finished; the policy keeps ticking until then.
    """
    if any(arrivals[k].send_time > arrivals[k + 1].send_time for k in range(len(arrivals) - 1)):
        raise ValueError("arrivals must be sorted by send_time")
    if arrivals and arrivals[0].send_time < 0:
        raise ValueError(f"arrivals must start at time >= 0, got {arrivals[0].send_time}")
    return _Fleet(arrivals, policy, config).run()
