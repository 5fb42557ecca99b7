"""Pure: what an engine's pods say about its capacity.

Only ready pods are capacity. Pods still loading the model are `starting`; pods no node
can take (no free GPU) are `pending`; pods whose engine keeps crashing are `failing`
and count as neither capacity nor a scale-up in progress. Terminating pods are draining
and count for nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# Container waiting reasons that mean the engine will not come up by itself.
FAILING_REASONS = frozenset(
    {"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError", "InvalidImageName"}
)


@dataclass(frozen=True)
class ReplicaCounts:
    ready: int = 0
    starting: int = 0
    pending: int = 0
    failing: int = 0
    terminating: int = 0
    kubernetes_says: str | None = None
    """Kubernetes' own words on one Pending or failing pod (`kubernetes_says`), if any is."""


def _condition(pod: Mapping[str, Any], type_: str) -> Mapping[str, Any]:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == type_), {})


def classify(pod: Mapping[str, Any]) -> str:
    """One of: ready, starting, pending, failing, terminating."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "terminating"
    status = pod.get("status") or {}
    scheduled = _condition(pod, "PodScheduled")
    if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        return "pending"
    if status.get("phase") in ("Failed", "Succeeded"):
        return "failing"
    if _condition(pod, "Ready").get("status") == "True":
        return "ready"
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in FAILING_REASONS:
            return "failing"
    return "starting"


def kubernetes_says(pod: Mapping[str, Any]) -> str | None:
    """Why Kubernetes does not run a Pending or failing pod, in its words (the scheduler's, the kubelet's)."""
    scheduled = _condition(pod, "PodScheduled")
    if scheduled.get("status") == "False" and scheduled.get("message"):
        return f"pod {_name(pod)}: {scheduled['message']}"
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in FAILING_REASONS:
            return f"pod {_name(pod)}: {waiting['reason']}: {waiting.get('message') or 'no message'}"
    if status.get("phase") == "Failed":
        return f"pod {_name(pod)}: Failed: {status.get('message') or status.get('reason') or 'no message'}"
    return None


def _name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name", "?"))


def count(pods: Iterable[Mapping[str, Any]]) -> ReplicaCounts:
    return tally((classify(pod), kubernetes_says(pod)) for pod in pods)


def tally(kinds: Iterable[tuple[str, str | None]]) -> ReplicaCounts:
    """Counts from each pod's `classify` and `kubernetes_says`; the first Pending or failing pod's words kept."""
    counts = {"ready": 0, "starting": 0, "pending": 0, "failing": 0, "terminating": 0}
    said: str | None = None
    for kind, says in kinds:
        counts[kind] += 1
        if kind in ("pending", "failing"):
            said = said or says
    return ReplicaCounts(
        ready=counts["ready"],
        starting=counts["starting"],
        pending=counts["pending"],
        failing=counts["failing"],
        terminating=counts["terminating"],
        kubernetes_says=said,
    )
