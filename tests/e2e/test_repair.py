"""Level-triggered children: what a user or a tool deletes or edits in the Deployment, Service or
PodDisruptionBudget is put back from the spec within seconds, with a Warning Event that names what
drifted; the replicas stay the autoscaler's (or the user's), and a child nobody touched is never
"repaired" however many resyncs pass (conftest runs the operator with a 3 s resync)."""

from __future__ import annotations

import json
import time
from typing import Any

from harness.processes import wait_for

from tests.e2e.conftest import RESYNC_SECONDS, Operator, condition, get_json, kubectl

ISVC = {
    "apiVersion": "inferscale.io/v1alpha1",
    "kind": "InferenceService",
    "metadata": {"name": "chat"},
    "spec": {"model": {"id": "test-model"}, "maxConcurrency": 16, "coldStartSeconds": 10},
}
# A repair is expected within this many seconds (the watch, not the resync, should catch it).
PROMPT = 10


def _ready(namespace: str) -> dict[str, Any]:
    kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(ISVC))
    return wait_for(
        "InferenceService chat Ready",
        lambda: (i := get_json("-n", namespace, "inferenceservice", "chat")) and
        condition(i, "Ready").get("status") == "True" and i,
        timeout=90,
    )  # fmt: skip


def _repairs(namespace: str) -> list[str]:
    events = get_json("-n", namespace, "events", "--field-selector", "reason=DriftRepaired")["items"]
    return sorted(e["message"] for e in events if e["involvedObject"]["kind"] == "InferenceService")


def _reported(namespace: str, messages: list[str]) -> None:
    """Exactly these repairs were reported (the Event follows the repair by a moment)."""
    wait_for(f"the DriftRepaired Events {messages}", lambda: _repairs(namespace) == sorted(messages), timeout=5)


def _uid(namespace: str, kind: str) -> str | None:
    result = kubectl("-n", namespace, "get", kind, "chat", "-o", "jsonpath={.metadata.uid}", check=False)
    return result.stdout or None if result.returncode == 0 else None


def _ceiling(namespace: str) -> str:
    args = get_json("-n", namespace, "deployment", "chat")["spec"]["template"]["spec"]["containers"][0]["args"]
    return str(args[args.index("--max-num-seqs") + 1])


def test_a_deleted_deployment_is_recreated_and_status_stops_claiming_its_replicas(
    operator: Operator, namespace: str
) -> None:
    before = _ready(namespace)
    was_ready = condition(before, "Ready")
    old = _uid(namespace, "deployment")

    kubectl("-n", namespace, "delete", "deployment", "chat", "--wait=false")
    started = time.monotonic()
    wait_for("the Deployment recreated", lambda: _uid(namespace, "deployment") not in (None, old), timeout=PROMPT)
    print(f"Deployment recreated {time.monotonic() - started:.1f}s after its deletion")
    _reported(namespace, [f"Deployment {namespace}/chat was deleted; recreated"])

    # Ready went False when the Deployment went (lastTransitionTime moves only on a flip), and
    # comes back once the new Deployment's replica is ready.
    after = _ready(namespace)
    assert condition(after, "Ready")["lastTransitionTime"] > was_ready["lastTransitionTime"]
    assert after["status"]["readyReplicas"] == 1
    assert "Repaired Deployment" in operator.log_text()


def test_edited_engine_args_are_restored_and_the_replicas_are_left_alone(operator: Operator, namespace: str) -> None:
    _ready(namespace)
    args = get_json("-n", namespace, "deployment", "chat")["spec"]["template"]["spec"]["containers"][0]["args"]
    seat = args.index("--max-num-seqs") + 1
    patch = [{"op": "replace", "path": f"/spec/template/spec/containers/0/args/{seat}", "value": "999"}]
    kubectl("-n", namespace, "patch", "deployment", "chat", "--type=json", "-p", json.dumps(patch))
    started = time.monotonic()
    wait_for("the ceiling restored to 16", lambda: _ceiling(namespace) == "16", timeout=PROMPT)
    print(f"args restored {time.monotonic() - started:.1f}s after the edit")
    _reported(namespace, [f"Deployment {namespace}/chat: spec.template.spec.containers[0].args changed; restored"])

    # The replicas are not the operator's to restore: a scale by hand stays, with no repair.
    kubectl("-n", namespace, "scale", "deployment", "chat", "--replicas=2")
    time.sleep(2 * RESYNC_SECONDS + 1)
    assert get_json("-n", namespace, "deployment", "chat")["spec"]["replicas"] == 2
    assert len(_repairs(namespace)) == 1


def test_a_deleted_service_and_pdb_come_back_and_untouched_children_are_never_repaired(
    operator: Operator, namespace: str
) -> None:
    _ready(namespace)
    # Several resyncs over children nobody touched: nothing to repair.
    time.sleep(3 * RESYNC_SECONDS + 1)
    assert _repairs(namespace) == []

    old = {kind: _uid(namespace, kind) for kind in ("service", "poddisruptionbudget")}
    kubectl("-n", namespace, "delete", "service,poddisruptionbudget", "chat", "--wait=false")
    started = time.monotonic()
    for kind in old:
        wait_for(f"the {kind} recreated", lambda k=kind: _uid(namespace, k) not in (None, old[k]), timeout=PROMPT)
    print(f"Service and PodDisruptionBudget recreated {time.monotonic() - started:.1f}s after their deletion")
    _reported(
        namespace,
        [
            f"PodDisruptionBudget {namespace}/chat was deleted; recreated",
            f"Service {namespace}/chat was deleted; recreated",
        ],
    )
    service = get_json("-n", namespace, "service", "chat")
    assert service["spec"]["selector"] == {"inferscale.io/service": "chat"}
    # And once repaired, they stay quiet too: exactly one Event per repair.
    time.sleep(2 * RESYNC_SECONDS + 1)
    assert len(_repairs(namespace)) == 2


def test_a_spec_edit_keeps_an_outside_scale_and_new_bounds_still_apply(operator: Operator, namespace: str) -> None:
    """Auto mode: the replicas are the autoscaler's, and an outside `kubectl scale` is the tick's to
    report (desiredReplicas keeps what the operator wanted), never reconcile's to undo when an
    unrelated field of the spec changes. A change of the bounds does move them."""
    _ready(namespace)
    kubectl("-n", namespace, "scale", "deployment", "chat", "--replicas=3")
    edited = {**ISVC, "spec": {**ISVC["spec"], "maxConcurrency": 12, "replicas": {"min": 1, "max": 5}}}
    kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(edited))
    wait_for("the new ceiling rolled out", lambda: _ceiling(namespace) == "12", timeout=PROMPT)
    generation = get_json("-n", namespace, "inferenceservice", "chat")["metadata"]["generation"]
    wait_for(
        "Reconciled at the new generation",
        lambda: condition(get_json("-n", namespace, "inferenceservice", "chat"), "Reconciled").get(
            "observedGeneration"
        ) == generation,
        timeout=PROMPT,
    )  # fmt: skip
    assert get_json("-n", namespace, "deployment", "chat")["spec"]["replicas"] == 3
    assert get_json("-n", namespace, "inferenceservice", "chat")["status"]["desiredReplicas"] == 1

    lowered = {**edited, "spec": {**edited["spec"], "replicas": {"min": 1, "max": 2}}}
    kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(lowered))
    wait_for(
        "replicas lowered to the new maximum",
        lambda: get_json("-n", namespace, "deployment", "chat")["spec"]["replicas"] == 2,
        timeout=PROMPT,
    )
    assert _repairs(namespace) == []


def test_an_edited_image_a_removed_label_and_a_pdb_budget_are_each_restored_and_named(
    operator: Operator, namespace: str
) -> None:
    _ready(namespace)
    image = get_json("-n", namespace, "deployment", "chat")["spec"]["template"]["spec"]["containers"][0]["image"]
    edits = [
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "evil.example/vllm:latest"},
        # Without it the Deployment leaves the operator's label-selected watch: seen as a deletion there.
        {"op": "remove", "path": "/metadata/labels/app.kubernetes.io~1managed-by"},
    ]
    started = time.monotonic()
    kubectl("-n", namespace, "patch", "deployment", "chat", "--type=json", "-p", json.dumps(edits))
    kubectl("-n", namespace, "patch", "poddisruptionbudget", "chat", "--type=merge",
            "-p", json.dumps({"spec": {"maxUnavailable": 0}}))  # fmt: skip

    def restored() -> bool:
        deployment = get_json("-n", namespace, "deployment", "chat")
        pdb = get_json("-n", namespace, "poddisruptionbudget", "chat")
        return (
            deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image
            and deployment["metadata"]["labels"].get("app.kubernetes.io/managed-by") == "inferscale"
            and pdb["spec"]["maxUnavailable"] == 1
        )

    wait_for("the image, the label and the budget restored", restored, timeout=PROMPT, interval=0.2)
    print(f"restored {time.monotonic() - started:.1f}s after the edits")
    repairs = wait_for("two DriftRepaired Events", lambda: len(_repairs(namespace)) == 2 and _repairs(namespace))
    deployment_repair, pdb_repair = sorted(repairs)
    assert "spec.template.spec.containers[0].image" in deployment_repair, deployment_repair
    assert "metadata.labels.app.kubernetes.io/managed-by" in deployment_repair, deployment_repair
    assert pdb_repair == f"PodDisruptionBudget {namespace}/chat: spec.maxUnavailable changed; restored"
