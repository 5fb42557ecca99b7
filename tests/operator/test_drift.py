"""Drift between a rendered child and the API server's copy: what counts, what does not."""

import copy
from typing import Any

from inferscale import render
from inferscale.api import InferenceService, ObjectMeta, parse_spec
from inferscale.drift import differences, drift


def _isvc(**spec: Any) -> InferenceService:
    spec.setdefault("model", {"id": "meta-llama/Llama-3.1-8B-Instruct"})
    return InferenceService(
        metadata=ObjectMeta(name="llama", namespace="serving", uid="uid-1", generation=3), spec=parse_spec(spec)
    )


def _served(manifest: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server hands it back: defaults and bookkeeping added, quantities canonical."""
    served = copy.deepcopy(manifest)
    served["metadata"].update(uid="d-1", resourceVersion="42", generation=1, managedFields=[{"manager": "x"}])
    served["status"] = {"replicas": 1}
    if manifest["kind"] == "Deployment":
        pod = served["spec"]["template"]["spec"]
        pod.update(restartPolicy="Always", dnsPolicy="ClusterFirst", schedulerName="default-scheduler")
        container = pod["containers"][0]
        container.update(imagePullPolicy="IfNotPresent", terminationMessagePath="/dev/termination-log")
        container["readinessProbe"].update(successThreshold=1)
        shm = pod["volumes"][0]["emptyDir"]
        shm["sizeLimit"] = {"1024Mi": "1Gi"}.get(shm["sizeLimit"], shm["sizeLimit"])
        served["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"] = "now"
    if manifest["kind"] == "Service":
        served["spec"].update(clusterIP="10.0.0.7", clusterIPs=["10.0.0.7"], sessionAffinity="None")
    return served


def test_a_child_as_served_has_not_drifted() -> None:
    isvc = _isvc(sharedMemory="1024Mi")
    for manifest in render.for_service(isvc, replicas=2):
        assert drift(manifest, _served(manifest)) is None, manifest["kind"]


def test_replicas_are_the_autoscalers_not_drift() -> None:
    manifest = render.deployment(_isvc(), replicas=2)
    served = _served(manifest)
    served["spec"]["replicas"] = 7
    assert drift(manifest, served) is None


def test_edited_args_are_named() -> None:
    manifest = render.deployment(_isvc(), replicas=1)
    served = _served(manifest)
    args = served["spec"]["template"]["spec"]["containers"][0]["args"]
    args[args.index("--max-num-seqs") + 1] = "999"
    found = drift(manifest, served)
    assert found is not None and not found.missing
    assert found.paths == ("spec.template.spec.containers[0].args",)
    assert found.message == "Deployment serving/llama: spec.template.spec.containers[0].args changed; restored"


def test_a_removed_label_a_changed_image_and_a_dropped_volume_are_each_named() -> None:
    manifest = render.deployment(_isvc(), replicas=1)
    served = _served(manifest)
    del served["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    served["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:latest"
    served["spec"]["template"]["spec"]["volumes"].pop(0)
    found = drift(manifest, served)
    assert found is not None
    assert set(found.paths) == {
        "metadata.labels.app.kubernetes.io/managed-by",
        "spec.template.spec.containers[0].image",
        "spec.template.spec.volumes[0]",
    }


def test_a_different_quantity_is_drift_and_an_equal_one_is_not() -> None:
    manifest = render.deployment(_isvc(gpusPerReplica=2), replicas=1)
    served = _served(manifest)
    resources = served["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["limits"]["nvidia.com/gpu"] = "2.0"
    assert drift(manifest, served) is None
    resources["limits"]["nvidia.com/gpu"] = "8"
    found = drift(manifest, served)
    assert found is not None and found.paths == ("spec.template.spec.containers[0].resources.limits.nvidia.com/gpu",)


def test_a_service_port_and_a_pdb_budget_are_drift() -> None:
    isvc = _isvc()
    service = _served(render.service(isvc))
    service["spec"]["ports"][0]["port"] = 9000
    found = drift(render.service(isvc), service)
    assert found is not None and found.paths == ("spec.ports[0].port",)
    pdb = _served(render.pod_disruption_budget(isvc))
    pdb["spec"]["maxUnavailable"] = 3
    found = drift(render.pod_disruption_budget(isvc), pdb)
    assert (
        found is not None
        and found.message == "PodDisruptionBudget serving/llama: spec.maxUnavailable changed; restored"
    )


def test_a_missing_child_is_recreated() -> None:
    found = drift(render.service(_isvc()), None)
    assert found is not None and found.missing
    assert found.message == "Service serving/llama was deleted; recreated"


def test_differences_compare_what_is_desired_only() -> None:
    assert differences({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}, "d": 3}) == []
    assert differences({"a": [1, 2]}, {"a": [2, 1]}) == [("a",)]
    assert differences({"a": [{"x": 1}]}, {"a": []}) == [("a[0]",)]
    assert differences({"a": {"b": 1}}, {"a": "text"}) == [("a",)]
    assert differences({"empty": {}}, {}) == []
