"""Pod Security admission, as a platform team's namespaces enforce it: the engine pods as rendered meet
`baseline`; under `restricted` Kubernetes refuses them and the InferenceService says so in Kubernetes' own
words (the Ready condition and a Warning Event), until `spec.securityContext` meets the profile."""

from __future__ import annotations

import json
import time
from typing import Any

from harness.processes import wait_for

from tests.e2e.conftest import Operator, condition, get_json, kubectl

RESTRICTED = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _apply(namespace: str, **spec: Any) -> None:
    isvc = {
        "apiVersion": "inferscale.io/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": "chat"},
        "spec": {"model": {"id": "test-model"}, "maxConcurrency": 16, "coldStartSeconds": 10, **spec},
    }
    kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(isvc))


def _enforce(namespace: str, level: str) -> None:
    kubectl("label", "namespace", namespace, f"pod-security.kubernetes.io/enforce={level}")


def _ready(namespace: str) -> dict[str, Any]:
    return condition(get_json("-n", namespace, "inferenceservice", "chat"), "Ready")


def test_the_rendered_engine_pods_meet_the_baseline_profile(operator: Operator, namespace: str) -> None:
    _enforce(namespace, "baseline")
    _apply(namespace)
    wait_for("Ready=True under baseline", lambda: _ready(namespace).get("status") == "True", timeout=90)


def test_pods_refused_by_the_restricted_profile_are_said_until_the_security_context_meets_it(
    operator: Operator, namespace: str
) -> None:
    _enforce(namespace, "restricted")
    _apply(namespace)
    refused = wait_for(
        "Ready=False ReplicaFailure",
        lambda: (ready := _ready(namespace)).get("reason") == "ReplicaFailure" and ready,
        timeout=60,
    )
    assert refused["status"] == "False"
    assert 'violates PodSecurity "restricted:latest"' in refused["message"]
    assert "allowPrivilegeEscalation" in refused["message"]  # Kubernetes' own list of what to set
    events = wait_for(
        "a ReplicaFailure Event on the InferenceService",
        lambda: _isvc_events(namespace, "ReplicaFailure"),
        timeout=10,
    )
    assert events[0]["type"] == "Warning" and "violates PodSecurity" in events[0]["message"]

    _apply(namespace, securityContext=RESTRICTED)
    wait_for("Ready=True once the pods meet restricted", lambda: _ready(namespace).get("status") == "True", timeout=90)
    [container] = get_json("-n", namespace, "deployment", "chat")["spec"]["template"]["spec"]["containers"]
    assert container["securityContext"] == RESTRICTED


def test_a_rollout_that_stops_progressing_is_said_in_kubernetes_words(operator: Operator, namespace: str) -> None:
    """The other refusal of the issue's row: pods that never become ready (here: no node matches) make
    the Deployment give up after progressDeadlineSeconds (2 x coldStartSeconds + 60 = 62 s), and the
    InferenceService says so instead of `RollingOut` for good."""
    _apply(namespace, coldStartSeconds=1, nodeSelector={"inferscale.io/no-such-pool": "true"})
    started = time.monotonic()
    stalled = wait_for(
        "Ready=False ProgressDeadlineExceeded",
        lambda: (ready := _ready(namespace)).get("reason") == "ProgressDeadlineExceeded" and ready,
        timeout=120,
        interval=1,
    )
    print(f"ProgressDeadlineExceeded said {time.monotonic() - started:.0f}s after the apply")
    assert stalled["status"] == "False"
    assert 'ReplicaSet "chat-' in stalled["message"] and "has timed out progressing" in stalled["message"]
    events = wait_for(
        "a ProgressDeadlineExceeded Event on the InferenceService",
        lambda: _isvc_events(namespace, "ProgressDeadlineExceeded"),
        timeout=10,
    )
    assert events[0]["type"] == "Warning" and "has timed out progressing" in events[0]["message"]


def _isvc_events(namespace: str, reason: str) -> list[dict[str, Any]]:
    """The Events with this reason whose object is the InferenceService (not its Deployment or pods)."""
    items = get_json("-n", namespace, "events", "--field-selector", f"reason={reason}")["items"]
    return [e for e in items if e["involvedObject"]["kind"] == "InferenceService"]
