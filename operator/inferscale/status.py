"""Pure status helpers: conditions (Kubernetes conventions) and readiness from a Deployment."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from inferscale.api import Condition, ConditionStatus

# Condition types the operator sets.
RECONCILED = "Reconciled"
READY = "Ready"


def set_condition(
    existing: Iterable[Mapping[str, Any]],
    *,
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
    generation: int | None = None,
) -> Condition:
    """The condition to write, keeping lastTransitionTime unless its status flips."""
    previous = next((c for c in existing if c.get("type") == type), None)
    transition = now
    if previous is not None and previous.get("status") == status.value and previous.get("lastTransitionTime"):
        transition = Condition.model_validate(previous).last_transition_time
    return Condition(
        type=type,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=transition,
        observed_generation=generation,
    )


def readiness(
    deployment: Mapping[str, Any], *, now: datetime, existing: Iterable[Mapping[str, Any]]
) -> tuple[dict[str, int], Condition]:
    """Replica counts and the Ready condition, read off a Deployment object."""
    spec = deployment.get("spec") or {}
    observed = deployment.get("status") or {}
    wanted = int(spec.get("replicas") or 0)
    total = int(observed.get("replicas") or 0)
    ready = int(observed.get("readyReplicas") or 0)
    updated = int(observed.get("updatedReplicas") or 0)
    caught_up = int(observed.get("observedGeneration") or 0) >= int(deployment["metadata"].get("generation") or 0)

    refused = _refusal(observed.get("conditions") or [])
    if wanted > 0 and ready < wanted and refused is not None:
        # Kubernetes' own words: why pods are not created (admission, quota) or the rollout gave up.
        state, (reason, message) = ConditionStatus.FALSE, refused
        message = f"{ready}/{wanted} replicas ready; {message}"
    elif wanted == 0:
        state, reason, message = (
            ConditionStatus.FALSE,
            "ScaledToZero",
            "The Deployment has 0 replicas; requests are not served.",
        )
    elif not caught_up or updated < wanted or total > wanted:
        state, reason = ConditionStatus.FALSE, "RollingOut"
        message = f"Rolling out: {updated}/{wanted} replicas updated, {ready} ready."
    elif ready < wanted:
        state, reason = ConditionStatus.FALSE, "ReplicasStarting"
        message = f"{ready}/{wanted} replicas ready; the rest are starting, Pending or failing (see lastDecision)."
    else:
        state, reason, message = ConditionStatus.TRUE, "ReplicasReady", f"{ready}/{wanted} replicas ready."
    counts = {"replicas": total, "readyReplicas": ready}
    return counts, set_condition(existing, type=READY, status=state, reason=reason, message=message, now=now)


# Deployment conditions that say Kubernetes refused or gave up, as Ready's reason when replicas are missing.
REFUSALS = ("ReplicaFailure", "ProgressDeadlineExceeded")


def _refusal(conditions: Iterable[Mapping[str, Any]]) -> tuple[str, str] | None:
    """The reason and message of a Deployment condition saying its pods cannot be made, or None."""
    for condition in conditions:
        kind, status, reason = condition.get("type"), condition.get("status"), condition.get("reason")
        if kind == "ReplicaFailure" and status == "True":
            # The ReplicaSet's FailedCreate: admission (Pod Security, quota, webhooks) refused the pods.
            return "ReplicaFailure", f"Kubernetes refused the pods ({reason}): {condition.get('message', '')}"
        if kind == "Progressing" and status == "False" and reason == "ProgressDeadlineExceeded":
            return "ProgressDeadlineExceeded", f"the rollout stopped progressing: {condition.get('message', '')}"
    return None


def missing_deployment(
    namespace: str, name: str, *, now: datetime, existing: Iterable[Mapping[str, Any]]
) -> tuple[dict[str, int], Condition]:
    """Counts and Ready while the Deployment does not exist: nothing runs, whatever it last said."""
    message = f"Deployment {namespace}/{name} does not exist; the operator recreates it."
    condition = set_condition(
        existing, type=READY, status=ConditionStatus.FALSE, reason="DeploymentMissing", message=message, now=now
    )
    return {"replicas": 0, "readyReplicas": 0}, condition


def condition_json(condition: Condition) -> dict[str, Any]:
    return condition.model_dump(mode="json", by_alias=True, exclude_none=True)
