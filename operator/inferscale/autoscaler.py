"""Pure: one scaling tick for one service, from what the operator knows to a plan.

`handlers` gathers, once per tick and for every InferenceService at once, the parsed
object, its Deployment's replica count, its pods (counted by `replicas`) and its
Prometheus signals; `plan_service` turns them into a `Plan`: the policy's decision, the
replica change to make (if any) and the status to record. Nothing here talks to a
server, so the whole tick is tested with plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from inferscale.api import ENGINES_WITHOUT_TTFT, ConditionStatus, Engine, InferenceService, ScalingMode
from inferscale.policy import Decision, Limit, Memory, Observation, Recommendation, adopt, decide
from inferscale.promql import ServiceSignals, Signal, Source
from inferscale.render import SERVICE_LABEL
from inferscale.replicas import ReplicaCounts
from inferscale.status import condition_json, set_condition

# Condition types the autoscaler owns.
METRICS_AVAILABLE = "MetricsAvailable"
SCALING_LIMITED = "ScalingLimited"
SLO_UNATTAINABLE = "SLOUnattainable"
REPLICAS_OVERRIDDEN = "ReplicasOverridden"

# Status field holding the policy's memory, so a restart resumes without a flap.
MEMORY_FIELD = "autoscaler"

_LOAD_SIGNALS = (Signal.QUEUE_DEPTH, Signal.RUNNING_REQUESTS)


@dataclass(frozen=True)
class ServiceView:
    """What the operator knows of one service at the start of a tick."""

    isvc: InferenceService
    status: Mapping[str, Any]
    deployment_replicas: int
    pods: ReplicaCounts


@dataclass(frozen=True)
class Event:
    type: str  # Normal or Warning
    reason: str
    message: str


@dataclass(frozen=True)
class Plan:
    decision: Decision
    current_replicas: int
    scale_to: int | None
    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    clear: dict[str, Any] = field(default_factory=dict)
    """A status merge patch of nulls: the fields this tick no longer holds (see `released`)."""


def memory_from(status: Mapping[str, Any], now: datetime | None = None) -> Memory:
    """The remembered state in status, with what does not validate left out (see `remembered`)."""
    return remembered(status.get(MEMORY_FIELD), now).memory


@dataclass(frozen=True)
class Remembered:
    """The memory read back from status, and what had to be dropped or corrected on the way."""

    memory: Memory
    problems: list[str]


def remembered(raw: Any, now: datetime | None, *, created: datetime | None = None) -> Remembered:
    """Parse `status.autoscaler` field by field: it is input like any other (another field manager,
    or a person, may have written it). A field that fails validation is dropped alone, not the
    whole memory. A time later than `now` (beyond a clock-skew allowance) or earlier than the
    object's creation (`created`, its creationTimestamp) is taken as `now`: the policy would
    wait on a future time for good, and act at once on an old one as if a window had passed."""
    if raw is None:
        return Remembered(Memory(), [])
    if not isinstance(raw, Mapping):
        return Remembered(Memory(), [f"status.{MEMORY_FIELD} is a {type(raw).__name__}, not an object; ignored"])
    kept: dict[str, Any] = {}
    problems: list[str] = []
    for alias, value in raw.items():
        name = _MEMORY_ALIASES.get(alias)
        if name is None:
            continue  # another operator version's field: not ours to judge
        try:
            parsed = getattr(Memory.model_validate({alias: value}), name)
        except ValidationError as error:
            why = error.errors()[0]["msg"]
            problems.append(f"status.{MEMORY_FIELD}.{alias} ({_short(value)}) is invalid: {why}; dropped")
            continue
        if now is not None:
            parsed, wrong = _within(parsed, now, created)
            if wrong:
                problems.append(f"status.{MEMORY_FIELD}.{alias} holds {wrong}; taken as now")
        kept[name] = parsed
    return Remembered(Memory(**kept), problems)


_MEMORY_ALIASES = {(field.alias or name): name for name, field in Memory.model_fields.items()}
# Clocks of the operator's replicas and of whoever wrote the status may differ this much.
CLOCK_SKEW = timedelta(seconds=60)


def _within(value: Any, now: datetime, created: datetime | None) -> tuple[Any, str | None]:
    """The value with every time outside [created, now + CLOCK_SKEW] replaced by now, and what the
    first such time was. The operator writes this memory only while the object exists, so a time
    before its creationTimestamp is not this object's memory (garbage such as 1970-01-01, or a status
    restored from a backup of an older object); acting on it would skip every stabilisation window.
    creationTimestamp has whole seconds: the first tick's times are never before it."""
    latest = now + CLOCK_SKEW

    def wrong(time: datetime) -> str | None:
        if time > latest:
            return f"a time in the future ({time.isoformat()})"
        if created is not None and time < created:
            return f"a time before the InferenceService was created ({time.isoformat()} < {created.isoformat()})"
        return None

    if isinstance(value, datetime):
        why = wrong(value)
        return (now, why) if why else (value, None)
    if isinstance(value, tuple) and value and isinstance(value[0], Recommendation):
        whys = [wrong(entry.time) for entry in value]
        if not any(whys):
            return value, None
        fixed = [
            entry.model_copy(update={"time": now}) if why else entry for entry, why in zip(value, whys, strict=True)
        ]
        return tuple(sorted(fixed, key=lambda entry: entry.time)), next(why for why in whys if why)  # oldest first
    return value, None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def observation(view: ServiceView, signals: ServiceSignals | None) -> Observation:
    counts = view.pods
    ttft_exported = view.isvc.spec.engine not in ENGINES_WITHOUT_TTFT
    if signals is None:
        return Observation(
            current_replicas=view.deployment_replicas,
            ready_replicas=counts.ready,
            starting_replicas=counts.starting,
            pending_replicas=counts.pending,
            ttft_exported=ttft_exported,
        )
    return Observation(
        current_replicas=view.deployment_replicas,
        ready_replicas=counts.ready,
        starting_replicas=counts.starting,
        pending_replicas=counts.pending,
        ttft_exported=ttft_exported,
        queue_depth=signals.queue_depth,
        running_requests=signals.running_requests,
        ttft_p95_seconds=signals.ttft_p95_seconds,
        kv_cache_usage=signals.kv_cache_usage,
        gpu_utilization_percent=signals.gpu_utilization_percent,
        request_rate=signals.request_rate,
        queue_time_seconds=signals.queue_time_seconds,
        prefill_time_seconds=signals.prefill_time_seconds,
        prefill_p95_seconds=signals.prefill_p95_seconds,
        metrics_at=signals.scraped_at(Source.ENGINE),
        gpu_metrics_at=signals.scraped_at(Source.DCGM),
    )


def _metrics_condition(
    signals: ServiceSignals | None,
    metrics_error: str | None,
    existing: list[Mapping[str, Any]],
    now: datetime,
    engine: Engine = Engine.VLLM,
) -> dict[str, Any]:
    if metrics_error is not None:
        state, reason, message = ConditionStatus.FALSE, "PrometheusUnavailable", f"{metrics_error}; replicas are held"
    elif signals is None:
        state, reason = ConditionStatus.FALSE, "NoSeries"
        message = "Prometheus has no engine series for this service (not scraped yet, or no ready replica)"
    elif problems := _problems(signals, ttft_exported=engine not in ENGINES_WITHOUT_TTFT):
        state, reason, message = ConditionStatus.FALSE, "SignalsIncomplete", "; ".join(problems)
    elif engine in ENGINES_WITHOUT_TTFT:
        state, reason = ConditionStatus.TRUE, "SignalsFresh"
        message = (
            f"Queue depth and running requests are fresh; {engine.value} exports no TTFT (no latency histogram), "
            "so replicas follow queue depth and busy slots and the TTFT SLO is not checked"
        )
    else:
        state, reason, message = (
            ConditionStatus.TRUE,
            "SignalsFresh",
            "Queue depth, running requests and TTFT are fresh"
            + (" (TTFT derived from queue and prefill durations)" if signals.ttft_derived else ""),
        )
    return condition_json(
        set_condition(existing, type=METRICS_AVAILABLE, status=state, reason=reason, message=message, now=now)
    )


def _problems(signals: ServiceSignals, *, ttft_exported: bool = True) -> list[str]:
    # An idle engine's TTFT histogram has no samples, so its p95 is NaN: only a problem
    # while requests are in flight, and never for an engine that exports none.
    in_flight = (signals.queue_depth or 0) + (signals.running_requests or 0)
    wanted = _LOAD_SIGNALS + ((Signal.TTFT_P95_SECONDS,) if in_flight > 0 and ttft_exported else ())
    return signals.problems(wanted)


def _limited_condition(decision: Decision, existing: list[Mapping[str, Any]], now: datetime) -> dict[str, Any]:
    if decision.limited_by is None:
        state, reason, message = ConditionStatus.FALSE, "WithinLimits", "The replica count is not capped"
    else:
        state = ConditionStatus.TRUE
        reason = "GPUCapacityReached" if decision.limited_by is Limit.GPU_CAPACITY else "AtMaxReplicas"
        message = decision.message
    return condition_json(
        set_condition(existing, type=SCALING_LIMITED, status=state, reason=reason, message=message, now=now)
    )


def _unattainable_condition(decision: Decision, existing: list[Mapping[str, Any]], now: datetime) -> dict[str, Any]:
    if decision.slo_unattainable is None:
        state, reason, message = ConditionStatus.FALSE, "WithinReach", "No SLO breach that replicas cannot fix"
    else:
        # Held at the size the load needs: say what would fix it instead of climbing to max.
        state, reason, message = ConditionStatus.TRUE, "PrefillBound", decision.slo_unattainable
    return condition_json(
        set_condition(existing, type=SLO_UNATTAINABLE, status=state, reason=reason, message=message, now=now)
    )


def _signals_status(signals: ServiceSignals | None, engine: Engine = Engine.VLLM) -> dict[str, Any] | None:
    if signals is None:
        return None
    values = {
        "ttftP95Seconds": signals.ttft_p95_seconds,
        "ttftDerived": signals.ttft_derived,
        "ttftExported": False if engine in ENGINES_WITHOUT_TTFT else None,
        "queueDepth": signals.queue_depth,
        "runningRequests": signals.running_requests,
        "kvCacheUsage": signals.kv_cache_usage,
        "gpuUtilizationPercent": signals.gpu_utilization_percent,
        "requestRate": signals.request_rate,
        "queueTimeSeconds": signals.queue_time_seconds,
        "prefillTimeSeconds": signals.prefill_time_seconds,
        "prefillP95Seconds": signals.prefill_p95_seconds,
    }
    # Three significant digits: enough to read, and a status write only when it matters.
    out: dict[str, Any] = {k: (float(f"{v:.3g}") if isinstance(v, float) else v) for k, v in values.items()}
    out = {k: v for k, v in out.items() if v is not None}
    out["observedAt"] = signals.sampled_at.isoformat()
    return out


def plan_service(
    view: ServiceView,
    signals: ServiceSignals | None,
    *,
    metrics_error: str | None,
    now: datetime,
    stale_after: timedelta,
    ttft_window: timedelta,
) -> Plan:
    """Decide one service's replicas for this tick and the status that records it."""
    status, name = view.status, f"{view.isvc.metadata.namespace}/{view.isvc.metadata.name}"
    existing = list(status.get("conditions") or [])
    events: list[Event] = []
    current = view.deployment_replicas

    manual = view.isvc.spec.scaling.mode is ScalingMode.MANUAL
    overridden = next((c for c in existing if c.get("type") == REPLICAS_OVERRIDDEN), None)
    last_desired = status.get("desiredReplicas")
    changed_externally = not manual and last_desired is not None and int(last_desired) != current
    if changed_externally:
        # Someone else (kubectl scale, another controller) changed the Deployment: say so
        # and carry on from their count instead of silently undoing it.
        message = (
            f"Deployment {name} was scaled to {current} by someone other than inferscale "
            f"(it wanted {last_desired}); scaling continues from {current}"
        )
        events.append(Event("Warning", "ReplicasChangedExternally", message))
        overridden = condition_json(
            set_condition(
                existing,
                type=REPLICAS_OVERRIDDEN,
                status=ConditionStatus.TRUE,
                reason="ChangedExternally",
                message=message,
                now=now,
            )
        )

    memory = remembered(status.get(MEMORY_FIELD), now, created=view.isvc.metadata.creation_timestamp)
    if memory.problems:
        events.append(Event("Warning", "RememberedStateInvalid", "; ".join(memory.problems)))
    # Their count is where scaling continues from: held like a recommendation of our own for the scale-down
    # window, not undone at this tick.
    policy_memory = adopt(view.isvc.spec, memory.memory, current, now) if changed_externally else memory.memory
    decision = decide(
        view.isvc.spec,
        observation(view, None if metrics_error else signals),
        policy_memory,
        now,
        stale_after=stale_after,
        ttft_window=ttft_window,
    )
    if view.pods.failing:
        # Crash-looping pods are neither capacity nor a scale-up in progress; say so, since a
        # hold for missing metrics alone would not tell the user where to look.
        failing = (
            f" {view.pods.failing} replica(s) failing (crash loop or image error) are not counted as capacity: "
            f"see `kubectl describe pod -l {SERVICE_LABEL}={view.isvc.metadata.name}`."
        )
        decision = decision.model_copy(update={"message": decision.message + failing})
    if (view.pods.failing or view.pods.pending) and view.pods.kubernetes_says:
        # In Kubernetes' own words: the scheduler's for a Pending pod, the kubelet's for a failing one.
        said = f" Kubernetes says: {view.pods.kubernetes_says}"
        decision = decision.model_copy(update={"message": decision.message + said})
    if manual:
        # Report what Auto would do, change nothing: the user owns the count.
        would = f"Auto would run {decision.replicas} ({decision.reason.value}: {decision.message})"
        decision = decision.model_copy(
            update={"replicas": current, "message": f"Manual mode keeps {current} replicas; {would}"}
        )
    scale_to = decision.replicas if decision.replicas != current else None
    if scale_to is not None:
        events.append(
            Event(
                "Normal",
                decision.reason.value,
                f"Scaled Deployment {name} from {current} to {scale_to}: {decision.message}",
            )
        )
        if overridden is not None:
            overridden = condition_json(
                set_condition(
                    existing,
                    type=REPLICAS_OVERRIDDEN,
                    status=ConditionStatus.FALSE,
                    reason="SetByInferscale",
                    message=f"inferscale set the replicas to {scale_to}",
                    now=now,
                )
            )

    conditions = [
        _metrics_condition(signals, metrics_error, existing, now, view.isvc.spec.engine),
        _limited_condition(decision, existing, now),
        _unattainable_condition(decision, existing, now),
    ]
    if overridden is not None:
        conditions.append(dict(overridden))
    last_decision = status.get("lastDecision") or {}
    if (
        last_decision.get("reason") != decision.reason.value
        or scale_to is not None
        or last_decision.get("message") != decision.message
    ):
        last_decision = {
            "replicas": decision.replicas,
            "reason": decision.reason.value,
            "message": decision.message,
            "time": now.isoformat(),
        }
    kept = decision.memory.model_dump(mode="json", by_alias=True, exclude_none=True)
    new_status: dict[str, Any] = {
        "desiredReplicas": decision.replicas,
        "lastDecision": last_decision,
        MEMORY_FIELD: kept,
        "conditions": conditions,
    }
    if decision.memory.last_scale_time is not None:
        new_status["lastScaleTime"] = decision.memory.last_scale_time.isoformat()
    signals_status = _signals_status(signals, view.isvc.spec.engine)
    if signals_status is not None:
        new_status["signals"] = signals_status
    return Plan(
        decision=decision,
        current_replicas=current,
        scale_to=scale_to,
        status=new_status,
        events=events,
        clear=released(status, new_status),
    )


# Status fields the autoscaler writes only while it holds a value.
_OPTIONAL_FIELDS = ("lastScaleTime", "signals")
# Objects in status the autoscaler writes whole (of the memory, only the fields it knows: another
# operator version's are not its to clear).
_OWNED_OBJECTS: dict[str, Mapping[str, str] | None] = {MEMORY_FIELD: _MEMORY_ALIASES, "signals": None}


def released(status: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """What the autoscaler held in `status` and no longer holds in `new`, as nulls for a JSON merge patch.

    Server-side apply removes a field its manager leaves out only if no other manager owns it too;
    one that another writer (kubectl, a GitOps tool, a restored backup) also set would survive
    whole scale cycles with a stale or corrupt value. So every field dropped is cleared explicitly.
    """
    nulls: dict[str, Any] = {key: None for key in _OPTIONAL_FIELDS if key not in new and status.get(key) is not None}
    for key, known in _OWNED_OBJECTS.items():
        old, kept = status.get(key), new.get(key)
        if isinstance(old, Mapping) and isinstance(kept, Mapping):
            gone = {name: None for name in old if name not in kept and (known is None or name in known)}
            if gone:
                nulls[key] = gone
    return nulls
