"""Only ready pods are capacity; the others are told apart by what a user would see."""

from typing import Any

from inferscale.replicas import ReplicaCounts, classify, count, kubernetes_says


def _pod(
    phase: str = "Running",
    *,
    ready: bool = False,
    unschedulable: bool = False,
    waiting: str | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    conditions = [{"type": "PodScheduled", "status": "False" if unschedulable else "True"}]
    if unschedulable:
        conditions[0]["reason"] = "Unschedulable"
    conditions.append({"type": "Ready", "status": "True" if ready else "False"})
    containers = [{"name": "engine", "state": {"waiting": {"reason": waiting}} if waiting else {"running": {}}}]
    metadata: dict[str, Any] = {"name": "p"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata, "status": {"phase": phase, "conditions": conditions, "containerStatuses": containers}}


def test_each_kind_of_pod() -> None:
    assert classify(_pod(ready=True)) == "ready"
    assert classify(_pod()) == "starting"  # loading the model: not ready yet
    assert classify(_pod("Pending", unschedulable=True)) == "pending"  # no free GPU anywhere
    assert classify(_pod(waiting="CrashLoopBackOff")) == "failing"
    assert classify(_pod("Pending", waiting="ImagePullBackOff")) == "failing"
    assert classify(_pod("Failed")) == "failing"
    assert classify(_pod(ready=True, deleting=True)) == "terminating"  # draining, not capacity


def test_count() -> None:
    pods = [_pod(ready=True), _pod(ready=True), _pod(), _pod("Pending", unschedulable=True), _pod(deleting=True)]
    assert count(pods) == ReplicaCounts(ready=2, starting=1, pending=1, failing=0, terminating=1)
    assert count([]) == ReplicaCounts()


def test_kubernetes_own_words_on_a_pod_it_does_not_run() -> None:
    unschedulable = _pod("Pending", unschedulable=True)
    unschedulable["status"]["conditions"][0]["message"] = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    crashing = _pod(waiting="CrashLoopBackOff")
    crashing["status"]["containerStatuses"][0]["state"]["waiting"]["message"] = "back-off 5m0s restarting engine"
    assert kubernetes_says(unschedulable) == "pod p: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    assert kubernetes_says(crashing) == "pod p: CrashLoopBackOff: back-off 5m0s restarting engine"
    assert kubernetes_says(_pod(ready=True)) is None
    # The counts keep the first such pod's words; a ready or starting pod has none to give.
    assert count([_pod(ready=True), unschedulable, crashing]).kubernetes_says == kubernetes_says(unschedulable)
    assert count([_pod(ready=True), _pod()]).kubernetes_says is None
