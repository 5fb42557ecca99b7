"""The scaling policy: a pure function from (spec, observation, memory, now) to a decision.

`handlers` calls `decide` once per service per tick, and the loadgen fleet simulator calls
it in simulated time, so it never reads the clock, the environment or a server. Whatever
it must remember between ticks leaves in `Decision.memory`, which the operator keeps in
the InferenceService status: a restart resumes from it instead of flapping.

It only ever sets the number of replicas. The per-replica batch ceiling
(`spec.maxConcurrency`) is pinned at the replica's latency knee and is an input, never an
output: capacity comes from replicas.

The rules, in the order `decide` applies them (docs/runbook.md has every reason):

1. Bounds: a Deployment outside [min, max] goes straight to the bound.
2. No data, no move: queue depth and running requests must be present, finite and fresh.
3. What replicas fix. p95 TTFT is waiting plus prefill; replicas shorten only the wait. A
   breach while requests hardly wait (mean queue time within its budget, `wait_budget`)
   adds nothing: `Decision.slo_unattainable` says why and what would fix it.
4. Up, fast, on waiting: the queue above its target at two ticks in a row or above twice
   it at one (`QueueGrowing`), or a breach with requests waiting (`SLOBreached`), once the
   p95 window reflects the current replicas and no drained backlog's waits are in it, and
   while the load is still there: a breach the window remembers from a burst already
   served adds nothing (`Stabilizing`). Neither does a queue that replicas just ready drain
   fast enough to be gone within a cold start; slower, they are at their limit: one more.
5. Up, ahead, on demand: the request rate, smoothed with Holt's linear trend and forecast
   one cold start ahead (at most FORECAST_MAX_RISE above the rate now), over the capacity
   learnt per replica (`_learn_capacity`), each replica run at RATE_FILL of it
   (`DemandRising`). The rate counts requests as they finish, so in a surge it reads what the
   replicas get through: the queue's growth between scrapes is added (`_queue_pace`).
   Learnt on one fleet, the capacity sizes another as a pool (`_Capacity`, POOL_BETA).
   Starting replicas count, so scale-ups never stack; a wrong forecast costs at most one
   step. Not while a drained backlog is in the rate's window: it would count the backlog as
   demand.
6. Stop what a burst started and no longer needs: replicas still starting (they serve
   nothing) beyond what the rate and its forecast need and the ready ones, while p95 TTFT is
   within the SLO and nothing waits beyond its target (`ScaledDown`, within the scale-down
   window: it holds replicas that served a burst, and these never did).
7. Down, with the load and headroom, whatever TTFT does where prefill breaks it: when the
   smoothed rate, concurrency and KV cache fit fewer replicas, requests do not wait beyond
   their share, and no higher count was recommended within the scale-down window. Never to
   one replica while it would run above LONE_REPLICA_SHARE of its rate (`_not_alone`).
8. Otherwise `Steady`, `SLOUnattainable` or `AtMinReplicas`.

Engines without the request-rate and queue-time signals fall back to what came before
them: TTFT breaches count as waiting, and the concurrency at which the SLO last broke
(`Memory.slo_knee_per_replica`) bounds scale-downs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated

from pydantic import AwareDatetime, ConfigDict, Field

from inferscale.api import GPU_RESOURCE, InferenceServiceSpec, LoadBalancing, Model
from inferscale.settings import SCALING

# Relative change below which the policy does nothing: gauges jitter from scrape to scrape.
TOLERANCE = 0.1
# Scale down only while p95 TTFT and the queue are at most this fraction of their targets.
HEADROOM = 0.8
# After a scale-down each replica should run at most this fraction of its concurrency
# ceiling and KV cache, so an ordinary burst does not queue at once.
FILL = 0.8
# Replicas added by a scale-up are waited for until this many times coldStartSeconds;
# past that they are presumed stuck (image pull, crash loop) and no longer block scaling.
STARTING_GRACE = 2
# Bound on each remembered window, so the status stays small whatever the spec says.
MAX_WINDOW_ENTRIES = 64
# Requests waiting beyond this many times the queue target add replicas at once; beyond the target, at the
# second tick in a row.
QUEUE_SURGE = 2.0
# A TTFT breach adds replicas only while requests wait or at least this share of the ready seats is busy.
BUSY_SEATS = 0.25
# Requests may wait this share of the SLO's slack (the SLO less the mean prefill) on average, vLLM's queue
# time, and at least MIN_QUEUE_SHARE of the SLO. Waiting is what replicas fix; a TTFT breach with less
# waiting than that is prefill, which no replica count shortens. Where the mean prefill leaves next to no
# slack, the requests an idle engine still serves within the SLO are those that barely fit, and a wait too
# short to move the mean much costs them the SLO: on code-completion hours at a10g 1 s, more cells kept
# their floor of feasible attainment with 3% than with 4% (bench/README, 2026-12-07, later).
QUEUE_SHARE = 0.1
MIN_QUEUE_SHARE = 0.03
# Size so each replica runs at most this share of the request rate it was seen to serve within the SLO.
RATE_FILL = 0.9
# How the learnt rate follows the pressure (``_pressure``): x pressure ** -gain per STEP_SECONDS, faster down
# than up and within the step bounds, and only while replicas serve at least CAPACITY_REACH of it.
CAPACITY_GAIN_DOWN = 0.3
CAPACITY_GAIN_UP = 0.1
CAPACITY_STEP_DOWN = 0.8
CAPACITY_STEP_UP = 1.1
CAPACITY_REACH = 0.6
# Below that reach, the learnt rate may still rise to the rate served x pressure ** -CAPACITY_EXTRAPOLATION
# (a replica under little pressure serves more than it does now), the pressure taken as at least
# PRESSURE_FLOOR: at most 1.8x the rate served, so a fleet that idles never claims a rate without bound.
# The same curve read backwards (pressure grows as rate ** (1 / CAPACITY_EXTRAPOLATION)) says whether one
# replica fewer would stay within the target; the first estimate, from a fleet sized for the peak, uses it too.
CAPACITY_EXTRAPOLATION = 0.2
PRESSURE_FLOOR = 0.05
# Where the SLO is within reach, the learnt rate aims p95 TTFT at this share of it.
TTFT_TARGET = 0.8
# Replicas behind one least-request balancer pool their seats: a request goes where a seat is free, so a
# pool of n serves more per replica than one alone, as much more as square-root staffing (Halfin and Whitt)
# says: n replicas carry the offered load a of n = a + POOL_BETA * sqrt(a), in replicas' worth of the rate
# per replica a large pool serves. The rate learnt on one fleet sizes another by it (``_Capacity``); sized
# per replica alone, a burst sized at the rate learnt on a small quiet fleet asked for twice the replicas a
# pool needs. Fitted to the pool capacities the fleet simulator measures (1 to 64 replicas, 75 cells), the
# beta of this form has medians of 1.4 (a10g at 3 s, h100 at 1 s) and 4.5 (a10g at 1 s, prefill-bound):
# 2 is at the low end, where pooling is assumed smaller than it is, so a wrong beta errs towards replicas.
# Behind a balancer that does not look at the load (spec.scaling.loadBalancing Random) replicas do not pool: 0.
POOL_BETA = 2.0
# Holt's linear trend on the request rate: smoothing of its level and of its trend, per STEP_SECONDS.
HOLT_ALPHA = 0.5
HOLT_BETA = 0.3
# The learnt rate's steps and Holt's smoothing are per this many seconds, the default tick they were measured at
# (settings.SCALING.tick_seconds). Counted in time, not ticks: an operator ticking every 5 s or every 60 s
# (INFERSCALE_TICK_SECONDS) learns and smooths as fast as one ticking every 15 s, not three times faster or
# four times slower. A tick moves the learnt rate at most one p95 window's worth: the evidence is one window.
STEP_SECONDS = 15.0
# The forecast one cold start ahead is at most this many times the rate now.
FORECAST_MAX_RISE = 1.2
# Replicas that became ready since the last tick have not taken their share of the queue it reads (scraped before
# they had): when they are at least this share of the ready fleet, that queue is given a tick to fall before it
# sizes a scale-up. In a small fleet one replica is that much: two held-out h100 hours read a queue of 88 and 126
# at the tick their second replica became ready, scaled 2 -> 4 and 2 -> 6, and the queue was gone 30 s later.
# One replica of 13 is not: a queue it cannot take is a surge, and waiting a tick cost an a10g hour 4 points.
ARRIVED_SHARE = 1 / 3
# Replicas still starting are stopped when the demand that asked for them has gone, only in a fleet of at least
# this many ready ones: in a smaller one a replica is a third or more of the capacity, and a burst that comes
# back within the scale-down window would find it short (two of the held-out hours lost attainment so).
STARTING_STOP_MIN_READY = 3
# A replica alone has no pool to absorb a burst, and the replica removed to leave it alone is half the fleet:
# two are kept while one would run above this share of its learnt rate, headroom for a burst of twice the load
# within a cold start (a held-out h100 hour scaled 2 -> 1 at 3.4 req/s, and missed 272 of 302 requests in the
# minute after as the rate rose to 5.1 req/s).
LONE_REPLICA_SHARE = 0.5
# A burst the replicas were short for (requests waiting beyond the queue target) comes back: the arrival rate it
# reached is remembered, fading towards the smoothed rate by half every BURST_HALF_LIFE, and a scale-down keeps
# the replicas that rate needs at the learnt capacity. Replicas started for a burst arrive a cold start after it
# began: a burst shorter than that is served by the replicas already up, or not at all. Only bursts that found the
# fleet short count: remembering every peak of the rate held replicas for the noise of hours that only drift, which
# the scale-down window already absorbs (bench/README, 2026-12-08, later). 20 minutes: spikes that recur within it
# (the spikes hour's, 14-18 minutes apart) meet the fleet the last one left; 40 minutes cut the shortfall by
# 0.1-1.3 points more on the three sets it ran on, and lost two of the 75 cells within 1.15x of the reactive bound.
BURST_HALF_LIFE = timedelta(minutes=20)
DEFAULT_STALE_AFTER = SCALING.stale_after
DEFAULT_TTFT_WINDOW = SCALING.ttft_window
# Largest replica count a formula may produce before clamping (keeps math.ceil finite).
_HUGE = 1_000_000.0


class Reason(StrEnum):
    """Why a decision was taken; stable words usable as Event and condition reasons."""

    SLO_BREACHED = "SLOBreached"
    SLO_UNATTAINABLE = "SLOUnattainable"
    DEMAND_RISING = "DemandRising"
    QUEUE_GROWING = "QueueGrowing"
    SCALED_DOWN = "ScaledDown"
    STEADY = "Steady"
    INSUFFICIENT_HEADROOM = "InsufficientHeadroom"
    STABILIZING = "Stabilizing"
    METRICS_MISSING = "MetricsMissing"
    METRICS_STALE = "MetricsStale"
    WAITING_FOR_STARTING_REPLICAS = "WaitingForStartingReplicas"
    GPU_CAPACITY_REACHED = "GPUCapacityReached"
    AT_MAX_REPLICAS = "AtMaxReplicas"
    AT_MIN_REPLICAS = "AtMinReplicas"
    BELOW_MIN_REPLICAS = "BelowMinReplicas"
    ABOVE_MAX_REPLICAS = "AboveMaxReplicas"


class Limit(StrEnum):
    """What stopped a needed scale-up (the ScalingLimited condition's reason)."""

    MAX_REPLICAS = "MaxReplicas"
    GPU_CAPACITY = "GPUCapacity"


class Direction(StrEnum):
    UP = "Up"
    DOWN = "Down"


class Observation(Model):
    """What one tick saw for one service.

    Replica counts come from the Deployment and its pods, the rest from Prometheus. A
    signal that is None, NaN, infinite or negative counts as missing.
    """

    current_replicas: Annotated[int, Field(ge=0, description="The Deployment's spec.replicas.")]
    ready_replicas: Annotated[int, Field(ge=0, description="Ready replicas: the only ones counted as capacity.")]
    starting_replicas: Annotated[int, Field(ge=0, description="Scheduled but not ready yet (loading the model).")] = 0
    pending_replicas: Annotated[int, Field(ge=0, description="Unschedulable pods: no node has a free GPU.")] = 0
    queue_depth: Annotated[float | None, Field(description="Requests waiting, summed over replicas.")] = None
    running_requests: Annotated[float | None, Field(description="Requests running, summed over replicas.")] = None
    ttft_p95_seconds: Annotated[float | None, Field(description="p95 time to first token over `ttft_window`.")] = None
    kv_cache_usage: Annotated[float | None, Field(description="Mean KV-cache usage of ready replicas, 0..1.")] = None
    gpu_utilization_percent: Annotated[float | None, Field(description="Mean DCGM GPU utilisation, 0..100.")] = None
    request_rate: Annotated[
        float | None, Field(description="Requests finished per second over the window, summed over replicas.")
    ] = None
    queue_time_seconds: Annotated[
        float | None,
        Field(description="Mean time a request waited before its prefill began, over the window (what replicas fix)."),
    ] = None
    prefill_time_seconds: Annotated[
        float | None,
        Field(description="Mean time from a request's scheduling to its first token, over the window."),
    ] = None
    prefill_p95_seconds: Annotated[
        float | None,
        Field(description="p95 of that prefill time over the window (what replicas do not fix)."),
    ] = None
    metrics_at: Annotated[
        AwareDatetime | None,
        Field(description="When the engine signals were sampled (the oldest of them); None if there were none."),
    ] = None
    gpu_metrics_at: Annotated[
        AwareDatetime | None,
        Field(description="When GPU utilisation was sampled (DCGM is a separate exporter); None means metrics_at."),
    ] = None
    ttft_exported: Annotated[
        bool,
        Field(
            description=(
                "False for an engine with no TTFT at all (llama.cpp): a missing TTFT is then no reason to hold, and "
                "the replicas follow queue depth and busy seats."
            )
        ),
    ] = True


class Recommendation(Model):
    time: AwareDatetime
    replicas: Annotated[int, Field(ge=0)]


class Memory(Model):
    """What the policy remembers between ticks; kept in the InferenceService status.

    Unknown fields are ignored so that status written by another operator version loads;
    `autoscaler.remembered` reads it back field by field.
    """

    model_config = ConfigDict(extra="ignore")

    scale_up_window: Annotated[
        tuple[Recommendation, ...],
        Field(description="Recommendations that may still be the lowest in the scale-up window, oldest first."),
    ] = ()
    scale_down_window: Annotated[
        tuple[Recommendation, ...],
        Field(description="Recommendations that may still be the highest in the scale-down window, oldest first."),
    ] = ()
    last_scale_time: AwareDatetime | None = None
    last_scale_direction: Direction | None = None
    ready_replicas: Annotated[int | None, Field(ge=0, description="Ready replicas at the last tick.")] = None
    ready_changed_at: Annotated[AwareDatetime | None, Field(description="When the ready count last changed.")] = None
    backlog_seen_at: Annotated[
        AwareDatetime | None,
        Field(description="When requests last waited beyond the queue target (their TTFT enters the p95 window)."),
    ] = None
    backlog_cleared_at: Annotated[
        AwareDatetime | None,
        Field(description="When that backlog was gone: nothing waiting, or one p95 window after it fell to target."),
    ] = None
    queue_depth: Annotated[
        float | None,
        Field(ge=0, description="Requests waiting at the last tick with metrics: whether the queue grows or drains."),
    ] = None
    queue_depth_at: Annotated[
        AwareDatetime | None,
        Field(description="When queue_depth was scraped: the queue grows over the time between scrapes, not ticks."),
    ] = None
    capacity_rps: Annotated[
        float | None,
        Field(
            gt=0,
            description=(
                "Requests per second one ready replica serves within the SLO, in a fleet of capacity_replicas: "
                "lowered when the part of TTFT replicas fix (or, where prefill breaks the SLO, the queue time) "
                "is above its target there while requests wait, raised when it is below."
            ),
        ),
    ] = None
    capacity_replicas: Annotated[
        int | None,
        Field(
            ge=1,
            le=1000,  # spec.replicas.max's own bound
            description=(
                "The ready replicas capacity_rps was learnt on: a larger pool serves more per replica, a "
                "smaller one less (square-root staffing). Unset: the ready replicas now."
            ),
        ),
    ] = None
    demand_level: Annotated[
        float | None, Field(ge=0, description="Holt's smoothed request rate (req/s) at demand_at.")
    ] = None
    demand_trend: Annotated[
        float | None, Field(description="Holt's smoothed trend of the request rate (req/s per s).")
    ] = None
    demand_at: Annotated[AwareDatetime | None, Field(description="When the request rate was last smoothed.")] = None
    rate_since: Annotated[
        AwareDatetime | None,
        Field(description="Since when the request rate has been seen without a gap (a younger rate() reads low)."),
    ] = None
    burst_rps: Annotated[
        float | None,
        Field(
            ge=0,
            description=(
                "The arrival rate (req/s: the request rate and the queue's growth) of the last burst the replicas "
                f"were short for, fading towards demand_level by half every {BURST_HALF_LIFE.total_seconds() / 60:.0f} "
                "minutes from burst_at: scale-downs keep the replicas it needs at the learnt rate. Unset: no such "
                "burst, or it has faded."
            ),
        ),
    ] = None
    burst_at: Annotated[AwareDatetime | None, Field(description="When burst_rps was last faded or raised.")] = None
    slo_knee_per_replica: Annotated[
        float | None,
        Field(
            gt=0,
            description=(
                "Requests in flight per ready replica at which p95 TTFT last exceeded the SLO; scale-down keeps "
                "below 80% of it. Raised when the SLO is seen to hold with headroom at a higher load."
            ),
        ),
    ] = None


class Decision(Model):
    """The replica count to run, why, and the memory to keep for the next tick."""

    replicas: int
    reason: Reason
    message: Annotated[str, Field(description="One sentence with the numbers behind the decision.")]
    held: Annotated[
        bool,
        Field(description="True when a guard (data, starting or Pending replicas, bounds, windows) kept the count."),
    ]
    limited_by: Annotated[Limit | None, Field(description="Set when a needed scale-up is capped.")] = None
    slo_unattainable: Annotated[
        str | None,
        Field(description="Set when p95 TTFT breaks the SLO for prefill, not waiting: why, the numbers and the fixes."),
    ] = None
    memory: Memory


def decide(
    spec: InferenceServiceSpec,
    observed: Observation,
    memory: Memory,
    now: datetime,
    *,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
    ttft_window: timedelta = DEFAULT_TTFT_WINDOW,
) -> Decision:
    """Decide the replica count for one service at `now` (timezone-aware).

    `stale_after` is how old engine samples may be; `ttft_window` is the range of the p95
    TTFT query, i.e. how long TTFT takes to reflect a change in capacity.
    """
    if now.utcoffset() is None:
        raise ValueError(f"now must be timezone-aware, got {now.isoformat()}: pass e.g. datetime.now(UTC)")
    tick = _Tick(
        spec,
        observed,
        _track_ready(memory, observed.ready_replicas, now),
        now,
        ttft_window,
        backlog_settled=_backlog_settled(memory, now, ttft_window),
    )
    bounds, current = spec.replicas, observed.current_replicas
    if memory.ready_replicas is None:
        # First tick for this service (or its status was lost): act as if the current count
        # had just been recommended, so nothing is removed before a full scale-down window.
        tick = replace(tick, memory=tick.remember(current))

    if current < bounds.min:
        why = f"the Deployment has {_replicas(current)}, below spec.replicas.min {bounds.min}"
        return tick.finish(bounds.min, Reason.BELOW_MIN_REPLICAS, why, tick.remember(bounds.min))
    if current > bounds.max:
        why = f"the Deployment has {_replicas(current)}, above spec.replicas.max {bounds.max}"
        return tick.finish(bounds.max, Reason.ABOVE_MAX_REPLICAS, why, tick.remember(bounds.max))

    load = _read(observed, now, stale_after)
    previous_waiting, previous_scrape = tick.memory.queue_depth, tick.memory.queue_depth_at
    queue_depth, scraped = (load.waiting, observed.metrics_at) if isinstance(load, _Load) else (None, None)
    tick = replace(tick, memory=tick.memory.model_copy(update={"queue_depth": queue_depth, "queue_depth_at": scraped}))
    if not isinstance(load, _Load):
        return _hold_without_data(tick, *load)

    slo = spec.scaling.ttft_p95_seconds
    queue_target = spec.scaling.queue_depth_per_replica * observed.ready_replicas
    # A queue over its target for one scrape is a burst the replicas absorb; one that stays over it, or a
    # surge to twice it, is not.
    over_target = load.waiting > queue_target * (1 + TOLERANCE)
    stayed = previous_waiting is not None and previous_waiting > queue_target
    queue_breach = over_target and (stayed or load.waiting > QUEUE_SURGE * queue_target)
    # Sized from the memory this tick starts with (what was learnt before it), so a tick's own
    # readings move the count one way only: more load, never fewer replicas.
    demand = _smooth_demand(tick.memory, load.rate, now, spec.cold_start_seconds, ttft_window)
    pace = _queue_pace(previous_waiting, previous_scrape, load.waiting, scraped)
    demand = replace(demand, surge=max(pace or 0.0, 0.0))
    capacity = _Capacity.remembered(tick.memory, spec, observed.ready_replicas)
    # Arrivals while requests wait beyond the target: a burst the replicas were short for.
    short_for = demand.arriving if over_target else 0.0
    burst = _remember_burst(tick.memory, short_for, demand.level, now)
    burst_at = None if burst is None else now
    tick = replace(tick, memory=tick.memory.model_copy(update={"burst_rps": burst, "burst_at": burst_at}))
    over_slo = load.ttft is not None and load.ttft > slo
    # Only waiting is fixed by replicas. Without the queue-time signal (older engines) a breach is
    # taken as waiting, as before it existed.
    unattainable = _unattainable(spec, load) if over_slo else None
    tick = replace(tick, unattainable=unattainable)
    learnt = _learn_capacity(tick, load, capacity, queue_target, demand) if demand.warm else capacity
    tick = replace(
        tick,
        memory=_track_backlog(tick.memory, load.waiting, queue_target, now, ttft_window).model_copy(
            update={**demand.memory_update(now), **_Capacity.memory_update(learnt)}
        ),
    )
    # Replicas that just became ready take their share of the backlog at once and then drain
    # it; sizing again from that backlog would add replicas that arrive after it is gone. Not when
    # it falls so slowly that it outlasts the cold start (at the pace since the last scrape read):
    # the fleet runs at its limit, and one replica more, added now, arrives while requests still
    # wait. A queue that has not moved is not shown to drain: two ticks may read the same scrape.
    shrinking = previous_waiting is not None and load.waiting < previous_waiting
    clears_in = load.waiting / -pace if pace is not None and pace < 0 else None
    crawling = clears_in is not None and clears_in > spec.cold_start_seconds
    arrived = observed.ready_replicas - (memory.ready_replicas or observed.ready_replicas)
    just_arrived = arrived > 0 and arrived >= ARRIVED_SHARE * observed.ready_replicas
    draining = queue_breach and not tick.ready_settled and ((shrinking and not crawling) or just_arrived)
    fixable_breach = over_slo and unattainable is None
    # The p95 window remembers a burst for its whole length: a breach adds replicas only while the load is
    # still there (requests wait, or the seats are busy), else they would arrive after the burst they were
    # meant for.
    busy = load.waiting > 0 or load.running >= BUSY_SEATS * spec.max_concurrency * observed.ready_replicas
    live_breach = fixable_breach and tick.settled and busy
    max_step = spec.scaling.scale_up.max_step_replicas
    # The request rate counts requests as they finish: while a backlog's drain is in its window it counts
    # the backlog again, not new demand. Sized from it only once that has passed (known before this tick,
    # so more load never yields fewer replicas).
    sized = demand.replicas(capacity, observed.ready_replicas, max_step) if tick.backlog_settled else None
    if live_breach or (queue_breach and not draining):
        crawl = clears_in if crawling and not tick.ready_settled else None
        return _scale_up(tick, load, slo_breach=live_breach, at_least=sized, crawling_for=crawl)
    if sized is not None and sized.replicas > current:
        return _scale_up(tick, load, slo_breach=False, demand=sized)
    if observed.starting_replicas > 0 and not over_slo and load.waiting <= queue_target and tick.backlog_settled:
        # Sized as a scale-down sizes (the tolerance below the fill), from the rate now and its forecast.
        still_needed = demand.replicas(capacity, observed.ready_replicas, max_step, fill=RATE_FILL * (1 - TOLERANCE))
        if still_needed is not None:
            stopped = _stop_starting(tick, still_needed)
            if stopped is not None:
                return stopped
    if draining:
        why = (
            f"{_num(load.waiting)} requests waiting on {observed.ready_replicas} ready replicas "
            f"(target {_num(spec.scaling.queue_depth_per_replica)} per replica)"
        )
        if shrinking:
            why += (
                f", down from {_num(previous_waiting or 0)} at the last tick: the replicas ready "
                f"{_dur(tick.since_ready_changed)} ago are draining it"
            )
            if clears_in is not None:
                gone_in = _dur(timedelta(seconds=clears_in))
                why += f" (gone in {gone_in} at that pace, within the {spec.cold_start_seconds}s cold start)"
        else:
            why += f", but {arrived} of them became ready since the last tick and have not taken their share yet"
        return tick.finish(current, Reason.STABILIZING, why, tick.remember(current))
    if fixable_breach and load.ttft is not None:
        because = (
            tick.unsettled_because()
            if not tick.settled
            else f"nothing waits and {_num(load.running)} requests run now: the window holds a burst already served"
        )
        why = f"p95 TTFT {_secs(load.ttft)} > SLO {_secs(slo)}, but {because}"
        return tick.finish(current, Reason.STABILIZING, why, tick.remember(current))
    if load.ttft is None and load.in_flight > 0 and observed.ttft_exported:
        why = f"p95 TTFT is missing or NaN with {_num(load.in_flight)} requests in flight"
        return tick.finish(current, Reason.METRICS_MISSING, why, tick.remember(current))
    # Removing replicas asks for the tolerance below the fill that adds them, so a rate that jitters
    # around a boundary does not remove a replica only to add it back a tick later.
    down = demand.replicas(capacity, observed.ready_replicas, max_step, fill=RATE_FILL * (1 - TOLERANCE), smooth=True)
    return _scale_down(tick, load, _kept_for_burst(_not_alone(down, demand, capacity), burst, capacity))


# --- reading the observation ------------------------------------------------------


@dataclass(frozen=True)
class _Load:
    """The usable signals of one tick; optional ones are None when missing."""

    waiting: float
    running: float
    ttft: float | None
    kv: float | None
    gpu: float | None
    rate: float | None = None
    queue_time: float | None = None
    prefill_mean: float | None = None
    prefill_p95: float | None = None

    @property
    def in_flight(self) -> float:
        return self.waiting + self.running

    def wait_budget(self, slo: float) -> float:
        """The mean queue time that still leaves the SLO to the prefill (see QUEUE_SHARE)."""
        slack = slo - (self.prefill_mean or 0.0)
        return max(QUEUE_SHARE * slack, MIN_QUEUE_SHARE * slo)


def _reading(value: float | None) -> float | None:
    # No gauge here can be negative; NaN and infinities come from empty or broken series.
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return value


def _read(observed: Observation, now: datetime, stale_after: timedelta) -> _Load | tuple[Reason, str]:
    if observed.metrics_at is None:
        return Reason.METRICS_MISSING, "no engine metrics were found"
    age = now - observed.metrics_at
    if age > stale_after:
        return Reason.METRICS_STALE, f"engine metrics are {_dur(age)} old (limit {_dur(stale_after)})"
    waiting, running = _reading(observed.queue_depth), _reading(observed.running_requests)
    missing = [name for name, value in (("queue depth", waiting), ("running requests", running)) if value is None]
    if waiting is None or running is None:
        return Reason.METRICS_MISSING, f"{' and '.join(missing)} missing or NaN"
    gpu = _reading(observed.gpu_utilization_percent)
    gpu_at = observed.gpu_metrics_at or observed.metrics_at
    if now - gpu_at > stale_after:
        gpu = None  # a secondary signal: stale, it is ignored rather than a reason to hold
    return _Load(
        waiting,
        running,
        _reading(observed.ttft_p95_seconds),
        _reading(observed.kv_cache_usage),
        gpu,
        rate=_reading(observed.request_rate),
        queue_time=_reading(observed.queue_time_seconds),
        prefill_mean=_reading(observed.prefill_time_seconds),
        prefill_p95=_reading(observed.prefill_p95_seconds),
    )


# --- what replicas can fix, demand and capacity -------------------------------------


def _unattainable(spec: InferenceServiceSpec, load: _Load) -> str | None:
    """Why a p95 TTFT breach is not one that replicas fix (requests hardly wait), or None if it may be."""
    slo = spec.scaling.ttft_p95_seconds
    if load.queue_time is None or load.ttft is None or load.queue_time > load.wait_budget(slo):
        return None
    prefill = "prefill takes"
    if load.prefill_p95 is not None:
        prefill += f" {_secs(load.prefill_p95)} at p95"
        if load.prefill_mean is not None:
            prefill += f" ({_secs(load.prefill_mean)} mean)"
    elif load.prefill_mean is not None:
        prefill += f" {_secs(load.prefill_mean)} on average"
    else:
        prefill += " the rest"
    looser = max(load.ttft, load.prefill_p95 or 0.0)
    return (
        f"p95 TTFT {_secs(load.ttft)} > SLO {_secs(slo)}, but requests wait only {_secs(load.queue_time)} on average "
        f"(replicas fix waiting beyond {_secs(load.wait_budget(slo))}): {prefill}, which no replica count shortens. "
        f"Fix: a looser SLO (spec.scaling.ttftP95Seconds of at least {_secs(looser)}), shorter prompts "
        f"(a lower spec.maxModelLen than {spec.max_model_len or 'the model default'}), more GPUs per replica "
        f"(spec.gpusPerReplica, for tensor parallelism) or a faster GPU"
    )


def _pool_beta(spec: InferenceServiceSpec) -> float:
    return POOL_BETA if spec.scaling.load_balancing is LoadBalancing.LEAST_REQUEST else 0.0


def _pooled_share(replicas: int, beta: float) -> float:
    """The share of a large pool's rate per replica that each of ``replicas`` serves (``POOL_BETA``)."""
    n = max(replicas, 1)
    offered = ((math.sqrt(beta**2 + 4 * n) - beta) / 2) ** 2  # n = a + beta * sqrt(a), solved for a
    return offered / n


@dataclass(frozen=True)
class _Capacity:
    """The request rate one replica serves within the SLO in a fleet of ``replicas``; other fleets by pooling."""

    per_replica: float
    replicas: int
    beta: float
    """Square-root staffing's beta (``POOL_BETA``), 0 where replicas do not pool."""

    @classmethod
    def remembered(cls, memory: Memory, spec: InferenceServiceSpec, ready: int) -> _Capacity | None:
        beta = _pool_beta(spec)
        if memory.capacity_rps is not None:
            # Status from before the fleet size was kept: taken as learnt on the replicas ready now.
            return cls(memory.capacity_rps, memory.capacity_replicas or max(ready, 1), beta)
        seed = spec.scaling.replica_requests_per_second
        return cls(seed, 1, beta) if seed is not None else None  # ``loadgen knee`` measures one replica

    @staticmethod
    def memory_update(capacity: _Capacity | None) -> dict[str, object]:
        if capacity is None:
            return {"capacity_rps": None, "capacity_replicas": None}
        return {"capacity_rps": capacity.per_replica, "capacity_replicas": capacity.replicas}

    def at(self, replicas: int) -> float:
        """The rate per replica in a fleet of ``replicas``."""
        return self.per_replica * _pooled_share(replicas, self.beta) / _pooled_share(self.replicas, self.beta)

    def replicas_for(self, rate: float, fill: float) -> int:
        """The fewest replicas that serve ``rate`` with each run at ``fill`` of its rate in that fleet."""
        large_pool = self.per_replica / _pooled_share(self.replicas, self.beta) * fill
        offered = min(rate / large_pool, _HUGE)
        return _ceil(offered + self.beta * math.sqrt(offered))


@dataclass(frozen=True)
class _Demand:
    """The request rate smoothed with Holt's linear trend, and its forecast one cold start ahead."""

    rate: float | None
    level: float | None
    trend: float
    horizon_s: float
    since: datetime | None = None
    warm: bool = False
    """Whether the rate has been seen for a whole window: before that, rate() counts a part of it."""
    steps: float = 0.0
    """STEP_SECONDS since the rate was last smoothed (0 when it starts afresh): how far this tick moves things."""
    surge: float = 0.0
    """Requests per second the queue grew by between scrapes (``_queue_pace``): arrivals not in ``rate``."""

    @property
    def arriving(self) -> float:
        """Requests per second arriving: those finished (``rate``) and those the queue grew by."""
        return (self.rate or 0.0) + self.surge

    def memory_update(self, now: datetime) -> dict[str, object]:
        if self.level is None:
            return {}
        return {"demand_level": self.level, "demand_trend": self.trend, "demand_at": now, "rate_since": self.since}

    @property
    def forecast(self) -> float | None:
        # Only a rising trend is projected: replicas are started ahead of a ramp, never removed ahead of a fall.
        # And only so far: a step or a burst also looks like a trend in a windowed rate, which then rises only
        # until the window is full of it, and a burst may be over before the replicas started for it are up.
        if self.level is None:
            return None
        ahead = self.level + max(0.0, self.trend) * self.horizon_s
        return min(ahead, max(self.level, self.rate or 0.0) * FORECAST_MAX_RISE)

    def replicas(
        self, capacity: _Capacity | None, ready: int, max_step: int, *, fill: float = RATE_FILL, smooth: bool = False
    ) -> _Sized | None:
        """Replicas for the rate now and its forecast; ``smooth`` sizes from the smoothed level alone (for
        removing replicas: a rate that jitters must not hold them), else from the higher of rate and level."""
        if capacity is None or self.level is None or self.rate is None or self.forecast is None or not self.warm:
            return None
        now = capacity.replicas_for(self.level if smooth else max(self.arriving, self.level), fill)
        ahead = capacity.replicas_for(self.forecast, fill)
        # A forecast that was wrong costs at most one step beyond what today's rate needs (or the replicas
        # ready now). Counted from the ready ones: counted from all, a forecast still above them while its
        # step starts added a second step on top, and a third on the next tick.
        replicas = min(max(now, ahead), max(now, ready) + max_step)
        surge = 0.0 if smooth else self.surge
        return _Sized(replicas, self.rate, self.forecast, capacity.at(replicas), self.horizon_s, surge)


@dataclass(frozen=True)
class _Sized:
    replicas: int
    rate: float
    forecast: float
    capacity: float
    """The rate per replica in a fleet of ``replicas``."""
    horizon_s: float
    surge: float = 0.0
    alone: float | None = None
    """Set when two replicas are kept (``_not_alone``): the share of its rate one alone would run at."""
    burst: float | None = None
    """Set when replicas are kept for a burst (``_kept_for_burst``): its remembered arrival rate."""

    def describe(self) -> str:
        ahead = (
            f" (Holt forecast {_num2(self.forecast)} req/s in {self.horizon_s:.0f}s)"
            if self.forecast > self.rate
            else ""
        )
        grew = f" + {_num2(self.surge)} req/s by which the queue grew" if self.surge > 0 else ""
        per_replica = f"{_num2(self.capacity)} req/s per replica (run at {RATE_FILL:.0%})"
        kept = (
            f" (2 kept: one alone would run at {self.alone:.0%} of its rate, with no pool to absorb a burst)"
            if self.alone is not None
            else ""
        )
        if self.burst is not None:
            fading = f"fading by half every {_dur(BURST_HALF_LIFE)}"
            kept += f" ({self.replicas} kept for a burst of {_num2(self.burst)} req/s, {fading})"
        return f"{_num2(self.rate)} req/s{grew}{ahead} at {per_replica}{kept}"


def _smooth_demand(memory: Memory, rate: float | None, now: datetime, horizon_s: float, window: timedelta) -> _Demand:
    if rate is None:
        return _Demand(None, None, 0.0, horizon_s)
    level, trend, at = memory.demand_level, memory.demand_trend or 0.0, memory.demand_at
    if level is None or at is None or not timedelta(0) < now - at <= 4 * window:
        return _Demand(rate, rate, 0.0, horizon_s, since=now)  # nothing recent to smooth with: start afresh
    since = memory.rate_since or now
    warm = now - since >= window
    dt = (now - at).total_seconds()
    steps = dt / STEP_SECONDS
    projected = level + trend * dt
    # What the past keeps after ``steps`` (1 - alpha a step): the same weight in time whatever the tick.
    level_kept, trend_kept = _compound(1 - HOLT_ALPHA, steps), _compound(1 - HOLT_BETA, steps)
    new_level = max(0.0, (1 - level_kept) * rate + level_kept * projected)
    # While the window fills, the rate rises for want of samples: that is no trend.
    new_trend = (1 - trend_kept) * (new_level - level) / dt + trend_kept * trend if warm else 0.0
    return _Demand(rate, new_level, new_trend, horizon_s, since=since, warm=warm, steps=steps)


def _not_alone(sized: _Sized | None, demand: _Demand, capacity: _Capacity | None) -> _Sized | None:
    """The size for removing replicas, no fewer than two while one alone would run above LONE_REPLICA_SHARE."""
    if sized is None or capacity is None or demand.level is None or sized.replicas != 1:
        return sized
    alone = demand.level / capacity.at(1)
    if alone <= LONE_REPLICA_SHARE:
        return sized
    return replace(sized, replicas=2, capacity=capacity.at(2), alone=alone)


def _remember_burst(memory: Memory, arriving: float, level: float | None, now: datetime) -> float | None:
    """The arrival rate of the last burst the replicas were short for (``BURST_HALF_LIFE``), faded towards the
    smoothed ``level`` since it was last kept; None once it has faded to the level, or without a level.

    ``arriving`` is this tick's arrival rate while requests wait beyond the target, else 0.
    """
    if level is None:
        return None
    remembered, at = memory.burst_rps, memory.burst_at
    faded = 0.0
    if remembered is not None and at is not None and at <= now:
        faded = level + (remembered - level) * 0.5 ** ((now - at) / BURST_HALF_LIFE)
    burst = max(arriving, faded)
    return burst if burst > level else None


def _kept_for_burst(sized: _Sized | None, burst: float | None, capacity: _Capacity | None) -> _Sized | None:
    """The size for removing replicas, no fewer than the remembered burst needs at the learnt rate."""
    if sized is None or burst is None or capacity is None:
        return sized
    needed = capacity.replicas_for(burst, fill=1.0)
    if needed <= sized.replicas:
        return sized
    return replace(sized, replicas=needed, capacity=capacity.at(needed), alone=None, burst=burst)


def _queue_pace(
    previous: float | None, previous_at: datetime | None, waiting: float, scraped: datetime | None
) -> float | None:
    """Requests per second by which the queue grew (falling: below 0) since the last scrape read; None
    without an earlier read, or when two ticks read the same scrape.

    Growth is arrivals the request rate misses. The rate counts requests as they finish. While they arrive
    faster than the replicas finish them (a surge, every seat busy), it reads the replicas' throughput, not
    the demand, and sized from it alone a fleet grows one replica at a time behind the surge. What arrives
    is what finishes plus what piles up.
    """
    if previous is None or previous_at is None or scraped is None:
        return None
    seconds = (scraped - previous_at).total_seconds()
    return (waiting - previous) / seconds if seconds > 0 else None


def _learn_capacity(
    tick: _Tick, load: _Load, capacity: _Capacity | None, queue_target: float, demand: _Demand
) -> _Capacity | None:
    """The learnt rate, as ``_learn_rate`` steers it on the replicas ready now (and kept with their count)."""
    ready, beta = tick.observed.ready_replicas, _pool_beta(tick.spec)
    if ready == 0:
        return capacity
    # What each of one replica fewer serves, over what each of these does.
    fewer_gain = _pooled_share(ready - 1, beta) / _pooled_share(ready, beta) if ready > 1 else 1.0
    here = None if capacity is None else capacity.at(ready)
    learnt = _learn_rate(tick, load, here, queue_target, demand, fewer_gain)
    return None if learnt is None else _Capacity(learnt, ready, beta)


def _learn_rate(
    tick: _Tick, load: _Load, capacity: float | None, queue_target: float, demand: _Demand, fewer_gain: float
) -> float | None:
    """The request rate per replica served within the SLO, steered by this tick's pressure.

    A controller on the operating point, not a model: the fleet is sized to run near the learnt rate,
    so the pressure measured there (``_pressure``) says whether that rate is too high (lower it, fast)
    or too low (raise it, slowly). The first estimate is the rate the replicas serve now. Only from a
    rate per replica within reach of the learnt one: a fleet far below it says nothing about where the
    SLO breaks. Lowered while the windowed signals reflect the current replicas (``tick.settled``, no
    scale under way), and right after a scale-down that broke the target (the replicas left cannot serve
    the rate they do: the learnt rate drops to it at once, or a fleet that probed too low would take it
    back up on the same evidence); raised also right after a scale-up, whose window held fewer replicas
    than now (low pressure then is evidence too): a fleet that grows with a ramp would otherwise never learn.
    """
    ready = tick.observed.ready_replicas
    if load.rate is None or ready == 0 or load.rate <= 0:
        return capacity
    steady = tick.ready_settled and tick.observed.current_replicas == ready
    grown = not tick.ready_settled and tick.memory.last_scale_direction is Direction.UP
    shrunk = (
        not tick.ready_settled
        and tick.memory.last_scale_direction is Direction.DOWN
        and tick.observed.current_replicas == ready
    )
    pressure = _pressure(load, tick.spec.scaling.ttft_p95_seconds, tick.unattainable)
    if pressure is None or not (steady or grown or shrunk):
        return capacity
    per_replica = load.rate / ready
    steps = min(demand.steps, tick.ttft_window.total_seconds() / STEP_SECONDS)
    # What the evidence says one replica serves at the target: the rate served, extrapolated by how far
    # below the target it runs (a fleet started for the peak runs far below it, and its bare rate per
    # replica would be learnt as the capacity: a third of the truth on an a10g at a 3 s SLO).
    extrapolated = per_replica / RATE_FILL * float(max(pressure, PRESSURE_FLOOR) ** -CAPACITY_EXTRAPOLATION)
    if capacity is None:
        return extrapolated if steady and tick.backlog_settled else None
    if pressure > 1 and not _waiting(tick, load):
        # Over the target, and yet nothing waits: no request queued, a seat free, the mean wait within its
        # budget. The tail read there is not waiting but the two histograms' buckets (p95 TTFT interpolated
        # in vLLM's 1.0-2.5 s bucket, the prefill's p95 in a finer one), which no replica count changes.
        # Lowered on it, the learnt rate fell tick after tick on a flat hour at a 2 s SLO, and the fleet grew
        # from 6 replicas to 16 where the oracle ran 4 (bench/README, 2026-12-08).
        return capacity
    if pressure > 1:
        if grown or per_replica > capacity:
            # A breach while the fleet grows is the lag of a cold start, and one above the learnt rate (a
            # burst the replicas were not sized for) is expected: neither says the rate is too high.
            return capacity
        lowered = capacity * _compound(max(CAPACITY_STEP_DOWN, float(pressure**-CAPACITY_GAIN_DOWN)), steps)
        busy = load.running >= BUSY_SEATS * tick.spec.max_concurrency * ready
        rising = demand.forecast is not None and demand.forecast > load.rate * (1 + TOLERANCE)
        if shrunk and busy and not rising and load.waiting <= queue_target:
            # A scale-down the learnt rate allowed, and the replicas left are over their target at a rate
            # below it, busy (not a burst the window remembers), with no queue and no rising demand to blame:
            # that rate is more than they serve. Lowered to it, by at most half.
            return min(per_replica, max(lowered, per_replica / 2))
        if not (steady and tick.backlog_settled) or per_replica < CAPACITY_REACH * capacity:
            # The rate counts requests as they finish, so it lags the arrivals of a burst: far below the learnt
            # rate, or with a backlog in the window, a breach does not say where the replicas break.
            return capacity
        # Lowered at most 20% a step and never below half the rate served now: the replicas serve it, if
        # too slowly, and a backlog's long waits must not collapse the estimate.
        return min(capacity, max(lowered, per_replica / 2))
    if shrunk or not tick.backlog_settled:
        # Raised only on a window that reflects these replicas, and while no drained backlog is in the rate.
        return capacity
    # Far below the learnt rate, the pressure says little about it: the rate may rise only as far as the
    # evidence reaches. A replica with little pressure at its rate serves more (``extrapolated``), and one
    # replica fewer would run at ``rate / (ready - 1)``: a rate up to that lets it go and be tried, if the
    # curve says those replicas would stay within the target (two replicas at 0.9 of it cannot become one).
    sized_on = max(load.rate, demand.forecast or 0.0)
    one_fewer = 0.0
    if ready > 1 and pressure * (ready / (ready - 1)) ** (1 / CAPACITY_EXTRAPOLATION) <= 1:
        # What one replica fewer would each serve, as the rate per replica of a fleet of ``ready``.
        one_fewer = sized_on / (ready - 1) / (RATE_FILL * (1 - TOLERANCE)) / fewer_gain
    reach = max(one_fewer, extrapolated)
    if per_replica < CAPACITY_REACH * capacity and capacity >= reach:
        return capacity
    if load.waiting <= queue_target:
        raised = capacity * _compound(min(CAPACITY_STEP_UP, float(max(pressure, 0.25) ** -CAPACITY_GAIN_UP)), steps)
        return max(capacity, min(raised, reach))
    return capacity


def _waiting(tick: _Tick, load: _Load) -> bool:
    """Whether requests wait for these replicas: some queued now, every seat busy, or a mean wait above its
    budget (``wait_budget``; taken as waiting where the engine has no queue-time signal)."""
    seats = tick.spec.max_concurrency * tick.observed.ready_replicas
    over_budget = load.queue_time is None or load.queue_time > load.wait_budget(tick.spec.scaling.ttft_p95_seconds)
    return load.waiting > 0 or load.running >= seats or over_budget


def _pressure(load: _Load, slo: float, unattainable: str | None) -> float | None:
    """How close the part of TTFT that replicas fix is to what it may be: 1 at the target, above 1 beyond.

    Where the SLO is within reach, the part of p95 TTFT above the prefill's p95 against what the
    target (TTFT_TARGET of the SLO) leaves it; where prefill alone breaks the SLO, the mean queue time
    against its budget (``wait_budget``).
    """
    budget = load.wait_budget(slo)
    floor = load.prefill_p95 or 0.0
    # Every request's TTFT holds its prefill, so a p95 TTFT below the prefill's p95 is a prefill quantile
    # interpolated inside a bucket wider than the prefills (vLLM's start at 0.3 s): the floor is unknown, and
    # the tail read against it says 0 whatever the waits. A fleet of two that learnt from that 0 how much
    # one replica serves learnt twice the truth (a held-out h100 hour, bench/README 2026-12-07, night).
    if unattainable is None and load.ttft is not None and load.ttft >= floor:
        allowed = TTFT_TARGET * slo - floor
        if allowed > budget:
            return (load.ttft - floor) / allowed
    if load.queue_time is None:
        return None
    return load.queue_time / budget


def _hold_without_data(tick: _Tick, reason: Reason, why: str) -> Decision:
    observed, limit = tick.observed, None
    # With nothing ready, no engine can report load: say what the replicas are doing instead.
    if observed.ready_replicas == 0 and observed.starting_replicas > 0:
        reason = Reason.WAITING_FOR_STARTING_REPLICAS
        why = f"{_replicas(observed.starting_replicas)} starting and none ready to report load ({why})"
    elif observed.ready_replicas == 0 and observed.pending_replicas > 0:
        reason, limit = Reason.GPU_CAPACITY_REACHED, Limit.GPU_CAPACITY
        why = f"{observed.pending_replicas} pods are Pending (no free {GPU_RESOURCE}) and none is ready ({why})"
    current = observed.current_replicas
    return tick.finish(current, reason, why, tick.remember(current), limited_by=limit)


# --- the two directions -----------------------------------------------------------


def _scale_up(
    tick: _Tick,
    load: _Load,
    *,
    slo_breach: bool,
    demand: _Sized | None = None,
    at_least: _Sized | None = None,
    crawling_for: float | None = None,
) -> Decision:
    """``crawling_for``: the seconds a backlog that replicas just became ready for takes to go at the pace
    it falls, when that is longer than a cold start."""
    spec, observed, memory = tick.spec, tick.observed, tick.memory
    scaling, bounds = spec.scaling, spec.replicas
    ready, current = observed.ready_replicas, observed.current_replicas
    slo = scaling.ttft_p95_seconds

    needed = max(ready + 1, _ceil(load.in_flight / (spec.max_concurrency + scaling.queue_depth_per_replica)))
    if demand is not None:
        # Sized from the request rate: starting replicas count, so this never stacks on a scale-up.
        needed = demand.replicas
        why = demand.describe() + f" need {_replicas(needed)}"
        reason = Reason.DEMAND_RISING
    elif slo_breach and load.ttft is not None:
        if load.rate is None:
            # Without the request rate (engines that lack it), the breach's size is all there is to go by. With
            # it, a breach adds a step and the rate sizes the rest (``at_least``): p95 TTFT over the SLO grows
            # with a backlog's age, not with the replicas missing, and a pool needs fewer than in proportion.
            needed = max(needed, _ceil(ready * load.ttft / slo))
        if ready > 0 and load.in_flight > 0:
            memory = memory.model_copy(update={"slo_knee_per_replica": _lower_knee(spec, memory, load, ready)})
        why = f"p95 TTFT {_secs(load.ttft)} > SLO {_secs(slo)} with {_num(load.waiting)} waiting"
        if load.queue_time is not None:
            why += f" (mean wait {_secs(load.queue_time)})"
        reason = Reason.SLO_BREACHED
    else:
        why = (
            f"{_num(load.waiting)} requests waiting on {ready} ready replicas "
            f"(target {_num(scaling.queue_depth_per_replica)} per replica)"
        )
        if crawling_for is not None:
            # The fleet is at its limit, not far below it: the backlog falls, only too slowly.
            needed = ready + 1
            why += (
                f", falling too slowly to be gone within the {spec.cold_start_seconds}s cold start "
                f"({_dur(timedelta(seconds=crawling_for))} at the pace since the last tick)"
            )
        reason = Reason.QUEUE_GROWING
    if at_least is not None and at_least.replicas > needed:
        # The reactive rules never ask for less than the request rate needs.
        needed = at_least.replicas
        why += f"; {at_least.describe()} need {_replicas(needed)}"
    wanted = min(needed, bounds.max)
    memory = tick.remember(wanted, memory)

    if observed.pending_replicas > 0:
        why += f", but {observed.pending_replicas} pods are Pending (no free {GPU_RESOURCE}), so none are added"
        return tick.finish(current, Reason.GPU_CAPACITY_REACHED, why, memory, limited_by=Limit.GPU_CAPACITY)
    if needed > current >= bounds.max:
        why += f"; {needed} replicas needed, but spec.replicas.max is {bounds.max}"
        return tick.finish(current, Reason.AT_MAX_REPLICAS, why, memory, limited_by=Limit.MAX_REPLICAS)
    if wanted <= current:
        why += f"; {current - ready} of {current} replicas are not ready yet and make up the {wanted} needed"
        return tick.finish(current, Reason.WAITING_FOR_STARTING_REPLICAS, why, memory)
    if observed.starting_replicas > 0 and tick.recently_scaled_up and demand is None:
        why += (
            f", but {_replicas(observed.starting_replicas)} added {_dur(tick.since_last_scale)} ago still starting "
            f"(cold start {spec.cold_start_seconds}s)"
        )
        return tick.finish(current, Reason.WAITING_FOR_STARTING_REPLICAS, why, memory)
    if observed.starting_replicas > 0 and memory.last_scale_direction is Direction.UP and demand is None:
        why += (
            f" (not waiting for {_replicas(observed.starting_replicas)} still starting {_dur(tick.since_last_scale)} "
            f"after the last scale-up, over {STARTING_GRACE}x the {spec.cold_start_seconds}s cold start)"
        )
    stable = _lowest(memory.scale_up_window, wanted)
    if stable <= current:
        window = scaling.scale_up.stabilization_seconds
        why += f", but the lowest recommendation within the {window}s scale-up window is {stable}"
        return tick.finish(current, Reason.STABILIZING, why, memory)

    target = min(stable, current + scaling.scale_up.max_step_replicas)
    if target < needed:
        cap = f"spec.replicas.max is {bounds.max}" if target == bounds.max else "the step limit"
        why += f" ({needed} needed; {cap})"
    limit = Limit.MAX_REPLICAS if needed > bounds.max and target == bounds.max else None
    return tick.finish(target, reason, why, memory, limited_by=limit)


def _stop_starting(tick: _Tick, sized: _Sized) -> Decision | None:
    """Stop replicas still starting that the demand no longer needs: a burst over before they are ready.

    They serve nothing yet, so stopping them drops no request, and a Deployment scaled down deletes its
    not-ready pods first (the ReplicaSet controller ranks not ready before ready, ahead of the deletion cost:
    ActivePodsWithRanks in kubernetes' pkg/controller/controller_utils.go). The scale-down window holds
    replicas that served the last burst, against one that comes back; these never served it, so they pay a
    cold start for nothing while the window holds them. Only replicas this policy started (it has scaled
    since the count was last set by someone else), never below the ready replicas or spec.replicas.min.
    """
    observed, bounds = tick.observed, tick.spec.replicas
    ready, current = observed.ready_replicas, observed.current_replicas
    if ready < STARTING_STOP_MIN_READY or tick.memory.last_scale_direction is None:
        return None  # a small fleet, or replicas someone else started (``adopt``) or the first count
    target = max(sized.replicas, ready, bounds.min)
    if target >= current:
        return None
    why = (
        f"{sized.describe()} need {_replicas(sized.replicas)} and {ready} are ready: "
        f"{_replicas(current - target)} still starting no longer needed"
    )
    return tick.finish(target, Reason.SCALED_DOWN, why, tick.remember(target))


def _scale_down(tick: _Tick, load: _Load, sized: _Sized | None = None) -> Decision:
    spec, observed, memory = tick.spec, tick.observed, tick.memory
    scaling, bounds = spec.scaling, spec.replicas
    ready, current = observed.ready_replicas, observed.current_replicas
    slo, queue_target = scaling.ttft_p95_seconds, scaling.queue_depth_per_replica

    # The fewest replicas that carry this load with headroom, by each measure; the largest wins.
    in_flight = _num(load.in_flight)
    # Sized from the request rate, the instantaneous counts only bound it: under bursty traffic they spike
    # from tick to tick, and the scale-down window would hold every spike for its whole length.
    seats = spec.max_concurrency * (FILL if sized is None else 1.0)
    fits = [(_ceil(load.in_flight / seats), f"{in_flight} requests in flight")]
    if load.waiting > 0 and sized is None:
        fits.append((_ceil(load.waiting / (queue_target * HEADROOM)), f"{_num(load.waiting)} requests waiting"))
    if load.kv is not None and ready > 0:
        fits.append((_ceil(load.kv * ready / FILL), f"KV cache {load.kv:.0%} full on {ready} replicas"))
    if sized is not None:
        fits.append((sized.replicas, sized.describe()))
    knee = memory.slo_knee_per_replica
    # The concurrency at which the SLO once broke is a fallback for engines without the request rate:
    # an instantaneous count, it is noisy under bursty traffic where the learnt rate is not.
    if knee is not None and sized is None:
        fits.append(
            (
                _ceil(load.in_flight / (knee * FILL)),
                f"{in_flight} requests in flight, the SLO having broken at {_num(knee)} per replica,",
            )
        )
    fit, measure = max(fits, key=lambda item: item[0])
    if load.in_flight > 0:
        fit = max(fit, 1)  # any request in flight needs a replica: scale to zero only when idle
    recommended = min(max(fit, bounds.min), bounds.max)
    fits_text = f"{measure} fit {_replicas(fit)}"
    if fit < bounds.min:
        fits_text += f" (spec.replicas.min is {bounds.min})"

    ttft_ok = load.ttft is None or load.ttft <= HEADROOM * slo  # None only while idle
    # Requests waiting beyond their share of the SLO veto a scale-down; a TTFT breach that replicas cannot
    # fix does not: the size follows the load, whatever TTFT does.
    waits = load.queue_time is not None and load.queue_time > HEADROOM * load.wait_budget(slo)
    # Healthy at a higher load than where the SLO once broke: that knee is out of date.
    if knee is not None and tick.settled and load.ttft is not None and ttft_ok and ready > 0:
        per_replica = load.in_flight / ready
        if per_replica > knee:
            raised = per_replica if per_replica < spec.max_concurrency else None
            memory = memory.model_copy(update={"slo_knee_per_replica": raised})

    if recommended >= current:
        memory = tick.remember(recommended, memory)
        if current == bounds.min and fit < bounds.min:
            return tick.finish(current, Reason.AT_MIN_REPLICAS, fits_text, memory)
        if tick.unattainable is not None:
            return tick.finish(current, Reason.SLO_UNATTAINABLE, f"{tick.unattainable}; {fits_text}", memory)
        return tick.finish(current, Reason.STEADY, f"{_health(load, slo, observed.ttft_exported)}; {fits_text}", memory)
    if current - recommended <= TOLERANCE * current:
        memory = tick.remember(recommended, memory)
        why = f"{fits_text}, within the {TOLERANCE:.0%} tolerance of {current}"
        return tick.finish(current, Reason.STEADY, why, memory)

    short = []
    # With the queue time known, waiting is what vetoes (TTFT above the target teaches the learnt rate
    # instead); without it, p95 TTFT near the SLO does, as it is all there is to go by.
    if not ttft_ok and load.ttft is not None and load.queue_time is None:
        short.append(f"p95 TTFT {_secs(load.ttft)} is above {HEADROOM:.0%} of SLO {_secs(slo)}")
    if waits and load.queue_time is not None:
        short.append(f"requests wait {_secs(load.queue_time)} on average")
    # GPU utilisation does not veto a scale-down: DCGM's utilisation is the share of time a
    # kernel runs, which a continuous-batching engine keeps near 100% at any load, so it
    # would block every scale-down (the fleet simulator showed exactly that). It is reported.
    if short:
        # No headroom to go lower: this tick counts as needing the current count.
        memory = tick.remember(current, memory)
        why = f"{fits_text}, but {' and '.join(short)}"
        return tick.finish(current, Reason.INSUFFICIENT_HEADROOM, why, memory)

    memory = tick.remember(recommended, memory)
    # p95 TTFT lags a change of replicas by its window; the request rate and the counts do not. With the
    # rate known, a scale-down need not wait for the window (the stabilisation window still bounds it),
    # whichever measure sizes it: were it only when the rate does, a higher rate would remove replicas a
    # lower one holds.
    if not tick.settled and not (sized is not None and tick.backlog_settled):
        why = f"{fits_text}, but {tick.unsettled_because()}"
        return tick.finish(current, Reason.STABILIZING, why, memory)
    stable = _highest(memory.scale_down_window, recommended)
    if stable >= current:
        window = scaling.scale_down.stabilization_seconds
        why = f"{fits_text}, but the highest recommendation within the {window}s scale-down window is {stable}"
        return tick.finish(current, Reason.STABILIZING, why, memory)

    target = max(stable, current - scaling.scale_down.max_step_replicas)
    why = f"{_health(load, slo, observed.ttft_exported)}; {fits_text}"
    if tick.unattainable is not None:
        why = f"the load fell ({fits_text}); the SLO stays out of replicas' reach: {tick.unattainable}"
    if target > stable:
        why += f" (at most {scaling.scale_down.max_step_replicas} removed per step)"
    elif target > recommended:
        why += f" (the highest recommendation within the {scaling.scale_down.stabilization_seconds}s window)"
    return tick.finish(target, Reason.SCALED_DOWN, why, memory)


def _lower_knee(spec: InferenceServiceSpec, memory: Memory, load: _Load, ready: int) -> float | None:
    # A breach at or past the concurrency ceiling is queueing, which the ceiling already
    # accounts for; only a breach below it teaches something about this engine and workload.
    per_replica = load.in_flight / ready
    if per_replica >= spec.max_concurrency:
        return memory.slo_knee_per_replica
    if memory.slo_knee_per_replica is None:
        return per_replica
    return min(memory.slo_knee_per_replica, per_replica)


def _health(load: _Load, slo: float, ttft_exported: bool = True) -> str:
    if not ttft_exported:
        return f"{_num(load.running)} running and {_num(load.waiting)} waiting (the engine exports no TTFT)"
    if load.ttft is None:
        return "idle"
    return f"p95 TTFT {_secs(load.ttft)} within SLO {_secs(slo)}"


# --- memory -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Tick:
    """One call's context, and the bookkeeping every decision shares."""

    spec: InferenceServiceSpec
    observed: Observation
    memory: Memory
    now: datetime
    ttft_window: timedelta
    # Decided from the memory this tick starts with: a backlog first seen now does not mute this
    # tick's SLO check (that would make more waiting requests yield fewer replicas).
    backlog_settled: bool = True
    unattainable: str | None = None
    """Set when this tick's p95 TTFT breach is prefill, not waiting (see ``_unattainable``)."""

    @property
    def since_ready_changed(self) -> timedelta:
        changed = self.memory.ready_changed_at
        return self.now - changed if changed is not None else timedelta.max

    @property
    def ready_settled(self) -> bool:
        """Whether the ready count has been the same for the p95 window."""
        return self.since_ready_changed >= self.ttft_window

    @property
    def settled(self) -> bool:
        """Whether p95 TTFT reflects the current ready replicas, not a drained backlog's waits."""
        return self.ready_settled and self.backlog_settled

    def unsettled_because(self) -> str:
        window = _dur(self.ttft_window)
        if not self.ready_settled:
            return (
                f"the ready replicas changed {_dur(self.since_ready_changed)} ago and "
                f"the {window} p95 TTFT window does not reflect them yet"
            )
        cleared = self.memory.backlog_cleared_at
        when = f"until {_dur(self.now - cleared)} ago" if cleared is not None else "until now"
        return f"requests waited beyond the queue target {when}, and the {window} p95 TTFT window holds their waits"

    @property
    def since_last_scale(self) -> timedelta:
        last = self.memory.last_scale_time
        return self.now - last if last is not None else timedelta.max

    @property
    def recently_scaled_up(self) -> bool:
        grace = timedelta(seconds=self.spec.cold_start_seconds * STARTING_GRACE)
        return self.memory.last_scale_direction is Direction.UP and self.since_last_scale < grace

    def remember(self, recommended: int, memory: Memory | None = None) -> Memory:
        """Memory with this tick's recommendation added to both stabilisation windows."""
        return _remember(self.spec, memory or self.memory, recommended, self.now)

    def finish(
        self, replicas: int, reason: Reason, why: str, memory: Memory, *, limited_by: Limit | None = None
    ) -> Decision:
        current = self.observed.current_replicas
        # Stopping replicas still starting leaves the ready ones as they were: the scale-up they were part of
        # stays the last move (a scale-down would tell `_learn_rate` that the replicas left are fewer).
        stops_starting = current > replicas >= self.observed.ready_replicas
        if replicas == current:
            message = f"{why}: holding {_replicas(current)}."
        else:
            message = f"{why}: scaling {current} -> {replicas}."
            if not stops_starting:
                direction = Direction.UP if replicas > current else Direction.DOWN
                memory = memory.model_copy(update={"last_scale_time": self.now, "last_scale_direction": direction})
        return Decision(
            replicas=replicas,
            reason=reason,
            message=message,
            held=replicas == current and reason is not Reason.STEADY,
            limited_by=limited_by,
            slo_unattainable=self.unattainable,
            memory=memory,
        )


def _remember(spec: InferenceServiceSpec, memory: Memory, recommended: int, now: datetime) -> Memory:
    entry = Recommendation(time=now, replicas=recommended)
    behaviour = spec.scaling
    return memory.model_copy(
        update={
            "scale_up_window": _slide(
                memory.scale_up_window, entry, behaviour.scale_up.stabilization_seconds, keep_higher=False
            ),
            "scale_down_window": _slide(
                memory.scale_down_window, entry, behaviour.scale_down.stabilization_seconds, keep_higher=True
            ),
        }
    )


def adopt(spec: InferenceServiceSpec, memory: Memory, replicas: int, now: datetime) -> Memory:
    """Memory for a replica count someone else set (kubectl scale, another controller).

    Kept as if recommended now, so nothing is removed before a whole scale-down window has passed, and
    not taken for a scale-up of the policy's own: replicas someone else started are not stopped while
    they start (``_stop_starting``). Scaling continues from that count; undoing it at once would fight them.
    """
    adopted = _remember(spec, memory, replicas, now)
    return adopted.model_copy(update={"last_scale_direction": None, "last_scale_time": now})


def _backlog_settled(memory: Memory, now: datetime, window: timedelta) -> bool:
    """Whether the p95 window is past the waits of the last backlog."""
    seen, cleared = memory.backlog_seen_at, memory.backlog_cleared_at
    return seen is None or (cleared is not None and now - cleared >= window)


def _track_backlog(memory: Memory, waiting: float, target: float, now: datetime, window: timedelta) -> Memory:
    """Follow a backlog from when requests wait beyond the target until it is gone.

    Requests caught in a backlog report their long TTFT when they finally start, so the p95
    window holds those waits for a while after the queue has drained: p95 TTFT says nothing
    about the current replicas until a window after the backlog cleared. Cleared means
    nothing waiting, or one window after the queue fell to its target (a small queue that
    never empties must not silence the SLO for good).
    """
    seen, cleared = memory.backlog_seen_at, memory.backlog_cleared_at
    if waiting > target:
        seen, cleared = now, None
    elif seen is not None and cleared is None and (waiting < 1 or now - seen >= window):
        cleared = now
    return memory.model_copy(update={"backlog_seen_at": seen, "backlog_cleared_at": cleared})


def _track_ready(memory: Memory, ready: int, now: datetime) -> Memory:
    changed = memory.ready_replicas is not None and memory.ready_replicas != ready
    return memory.model_copy(
        update={"ready_replicas": ready, "ready_changed_at": now if changed else memory.ready_changed_at}
    )


def _slide(
    window: tuple[Recommendation, ...], entry: Recommendation, seconds: int, *, keep_higher: bool
) -> tuple[Recommendation, ...]:
    """Add `entry` to a sliding-window extreme (the highest or the lowest recommendation).

    An older entry that the new one matches or beats can never be the window's extreme
    again, so it is dropped: the window stays as short as the number of distinct values.
    """
    if seconds == 0:
        return ()
    horizon = entry.time - timedelta(seconds=seconds)
    kept = [old for old in window if old.time > horizon]
    while kept and (kept[-1].replicas <= entry.replicas if keep_higher else kept[-1].replicas >= entry.replicas):
        kept.pop()
    kept.append(entry)
    while len(kept) > MAX_WINDOW_ENTRIES:
        # Merge the two oldest, keeping the older (more extreme) value for longer: errs on the slow side.
        kept[0:2] = [Recommendation(time=kept[1].time, replicas=kept[0].replicas)]
    return tuple(kept)


def _highest(window: tuple[Recommendation, ...], recommended: int) -> int:
    return max([recommended, *(entry.replicas for entry in window)])


def _lowest(window: tuple[Recommendation, ...], recommended: int) -> int:
    return min([recommended, *(entry.replicas for entry in window)])


# --- arithmetic and wording -------------------------------------------------------


def _compound(factor: float, steps: float) -> float:
    """A factor per STEP_SECONDS, over ``steps`` of them (a fraction for a tick shorter than one)."""
    return float(factor**steps)


def _ceil(value: float) -> int:
    # The epsilon stops 2.0000000001 (float noise) from becoming 3 replicas.
    return math.ceil(min(value, _HUGE) - 1e-9)


def _num(value: float) -> str:
    return f"{value:.0f}" if abs(value - round(value)) < 0.05 else f"{value:.1f}"


def _replicas(count: int) -> str:
    return f"{count} replica" if count == 1 else f"{count} replicas"


def _num2(value: float) -> str:
    return f"{value:.2g}" if value < 1 else f"{value:.1f}"


def _secs(value: float) -> str:
    return f"{value:.2f}s"


def _dur(value: timedelta) -> str:
    return f"{value.total_seconds():.0f}s"
