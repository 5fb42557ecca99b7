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
    return assess(pod)[0]


def kubernetes_says(pod: Mapping[str, Any]) -> str | None:
    """Why Kubernetes does not run a Pending or failing pod, in its words (the scheduler's, the kubelet's)."""
    return assess(pod)[1]


def assess(pod: Mapping[str, Any]) -> tuple[str, str | None]:
    """What the pod is (`classify`) and, for a Pending or failing one, Kubernetes' words on why."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "terminating", None
    name = (pod.get("metadata") or {}).get("name", "?")
    status = pod.get("status") or {}
    scheduled = _condition(pod, "PodScheduled")
    if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        return "pending", f"pod {name}: {scheduled['message']}" if scheduled.get("message") else None
    phase = status.get("phase")
    if phase in ("Failed", "Succeeded"):
        words = f"pod {name}: Failed: {status.get('message') or status.get('reason') or 'no message'}"
        return "failing", words if phase == "Failed" else None
    if _condition(pod, "Ready").get("status") == "True":
        return "ready", None
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in FAILING_REASONS:
            return "failing", f"pod {name}: {waiting['reason']}: {waiting.get('message') or 'no message'}"
    return "starting", None


def count(pods: Iterable[Mapping[str, Any]]) -> ReplicaCounts:
    return tally(assess(pod) for pod in pods)


def tally(kinds: Iterable[tuple[str, str | None]]) -> ReplicaCounts:
    """Counts from each pod's `assess`; the first Pending or failing pod's words kept."""
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
