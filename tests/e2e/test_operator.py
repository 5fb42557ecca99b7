"""The operator on a real control plane: apply, roll out, refuse, recover, restart, delete."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml
from harness.processes import wait_for

from tests.e2e.conftest import ROOT, Operator, condition, get_json, kubectl


def _apply_file(namespace: str, path: Path) -> None:
    kubectl("-n", namespace, "apply", "-f", str(path))


def _apply(namespace: str, manifest: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(manifest), check=False)


def _ready(namespace: str, name: str, timeout: float = 90) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        isvc = get_json("-n", namespace, "inferenceservice", name)
        return isvc if condition(isvc, "Ready").get("status") == "True" else None

    return wait_for(f"InferenceService {namespace}/{name} Ready", probe, timeout=timeout)


def _engine_pods(namespace: str, name: str) -> list[dict[str, Any]]:
    return get_json("-n", namespace, "pods", "-l", f"inferscale.io/service={name}")["items"]


def test_vllm_example_becomes_a_running_gpu_deployment(operator: Operator, namespace: str) -> None:
    _apply_file(namespace, ROOT / "examples" / "llama-vllm.yaml")
    isvc = _ready(namespace, "llama")

    deployment = get_json("-n", namespace, "deployment", "llama")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert container["args"][:2] == ["--model", "meta-llama/Llama-3.1-8B-Instruct"]
    assert container["args"][container["args"].index("--max-num-seqs") + 1] == "16"
    assert deployment["metadata"]["ownerReferences"][0]["uid"] == isvc["metadata"]["uid"]

    pods = _engine_pods(namespace, "llama")
    assert [p["status"]["phase"] for p in pods] == ["Running"]
    assert pods[0]["spec"]["nodeName"].startswith("gpu-node-")

    status = isvc["status"]
    assert status["readyReplicas"] == 1
    assert status["desiredReplicas"] == 1
    assert status["observedGeneration"] == isvc["metadata"]["generation"]
    assert status["endpoint"] == f"http://llama.{namespace}.svc:8000/v1"
    assert condition(isvc, "Reconciled")["reason"] == "Applied"

    service = get_json("-n", namespace, "service", "llama")
    assert service["spec"]["selector"] == {"inferscale.io/service": "llama"}
    get_json("-n", namespace, "poddisruptionbudget", "llama")

    table = kubectl("-n", namespace, "get", "infsvc").stdout
    assert re.search(r"^NAME\s+ENGINE\s+MODEL\s+READY\s+DESIRED\s+TTFT-P95\s+QUEUE\s+AGE", table), table
    assert re.search(r"^llama\s+vllm\s+meta-llama/Llama-3.1-8B-Instruct\s+1\s+1\s", table, re.M), table


def test_tgi_with_token_secret_and_more_replicas(operator: Operator, namespace: str) -> None:
    _apply_file(namespace, ROOT / "examples" / "hf-token-secret.yaml")
    manifest = yaml.safe_load((ROOT / "examples" / "mistral-tgi.yaml").read_text())
    manifest["spec"]["replicas"]["min"] = 2
    assert _apply(namespace, manifest).returncode == 0
    isvc = _ready(namespace, "mistral")

    deployment = get_json("-n", namespace, "deployment", "mistral")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"][container["args"].index("--max-concurrent-requests") + 1] == "8"
    assert container["env"][0] == {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}},
    }
    assert [p["status"]["phase"] for p in _engine_pods(namespace, "mistral")] == ["Running", "Running"]
    assert isvc["status"]["readyReplicas"] == 2
    # The token's value never reaches status or the operator's log.
    assert "hf_replace_me" not in json.dumps(isvc)
    assert "hf_replace_me" not in operator.log_text()


def test_spec_change_rolls_out(operator: Operator, namespace: str) -> None:
    _apply_file(namespace, ROOT / "examples" / "llama-vllm.yaml")
    _ready(namespace, "llama")
    before = get_json("-n", namespace, "deployment", "llama")

    kubectl("-n", namespace, "patch", "infsvc", "llama", "--type=merge", "-p", '{"spec":{"maxConcurrency":8}}')

    def rolled() -> bool:
        deployment = get_json("-n", namespace, "deployment", "llama")
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        return args[args.index("--max-num-seqs") + 1] == "8"

    wait_for("the Deployment to carry --max-num-seqs 8", rolled, timeout=30)
    isvc = wait_for(
        "status to report generation 2",
        lambda: (i := get_json("-n", namespace, "infsvc", "llama"))["status"].get("observedGeneration") == 2 and i,
        timeout=30,
    )
    after = get_json("-n", namespace, "deployment", "llama")
    assert after["metadata"]["generation"] > before["metadata"]["generation"]
    assert isvc["metadata"]["generation"] == 2
    _ready(namespace, "llama")
    pods = _engine_pods(namespace, "llama")
    running = [p for p in pods if p["status"]["phase"] == "Running" and "deletionTimestamp" not in p["metadata"]]
    assert running, pods
    assert all(
        p["spec"]["containers"][0]["args"][p["spec"]["containers"][0]["args"].index("--max-num-seqs") + 1] == "8"
        for p in running
    )


def test_delete_removes_children(operator: Operator, namespace: str) -> None:
    _apply_file(namespace, ROOT / "examples" / "llama-vllm.yaml")
    _ready(namespace, "llama")

    kubectl("-n", namespace, "delete", "infsvc", "llama", "--timeout=30s")

    for kind in ("deployment", "service", "poddisruptionbudget"):
        wait_for(
            f"{kind} llama to be garbage-collected",
            lambda kind=kind: kubectl("-n", namespace, "get", kind, "llama", check=False).returncode != 0,
            timeout=60,
        )
    wait_for("engine pods to go", lambda: not _engine_pods(namespace, "llama"), timeout=60)


def _invalid(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inferscale.io/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": spec.pop("name", "bad")},
        "spec": {"model": {"id": "m"}, **spec},
    }


def test_api_server_refuses_invalid_manifests_with_the_schema_message(cluster: Path, namespace: str) -> None:
    cases = [
        (_invalid(engine="triton"), 'spec.engine: Unsupported value: "triton"'),
        (_invalid(replicas={"min": 5, "max": 2}), "spec.replicas.min must be less than or equal to spec.replicas.max"),
        (_invalid(replicas={"min": 6}), "spec.replicas.min must be less than or equal to spec.replicas.max"),
        (_invalid(maxConcurrency=0), "spec.maxConcurrency: Invalid value: 0"),
        (_invalid(scaling={"ttftP95Seconds": 0}), "spec.scaling.ttftP95Seconds"),
        (
            _invalid(scaling={"loadBalancing": "RoundRobin"}),
            'spec.scaling.loadBalancing: Unsupported value: "RoundRobin"',
        ),
        (_invalid(name="Big_Name"), "metadata.name must be a DNS label"),
        ({**_invalid(), "spec": {"engine": "vllm"}}, "spec.model: Required value"),
    ]
    for manifest, message in cases:
        result = _apply(namespace, manifest)
        assert result.returncode != 0, f"accepted: {manifest}"
        assert message in result.stderr, result.stderr
    assert get_json("-n", namespace, "infsvc")["items"] == []


def test_a_spec_that_cannot_work_gets_a_condition_and_others_keep_being_served(
    operator: Operator, namespace: str
) -> None:
    broken_secret = _invalid(name="needs-secret", model={"id": "m", "tokenSecretRef": {"name": "missing"}})
    reserved_arg = _invalid(name="reserved-arg", extraArgs=["--max-num-seqs=512"])
    assert _apply(namespace, broken_secret).returncode == 0
    assert _apply(namespace, reserved_arg).returncode == 0
    _apply_file(namespace, ROOT / "examples" / "llama-vllm.yaml")

    _ready(namespace, "llama")
    secret_condition = wait_for(
        "a SecretNotFound condition",
        lambda: (
            (c := condition(get_json("-n", namespace, "infsvc", "needs-secret"), "Reconciled")).get("reason")
            == "SecretNotFound"
            and c
        ),
    )
    assert secret_condition["status"] == "False"
    assert secret_condition["message"].startswith("spec.model.tokenSecretRef.name: Secret")
    assert (
        "kubectl -n" in secret_condition["message"] and "create secret generic missing" in secret_condition["message"]
    )
    arg_condition = wait_for(
        "an InvalidSpec condition",
        lambda: (
            (c := condition(get_json("-n", namespace, "infsvc", "reserved-arg"), "Reconciled")).get("reason")
            == "InvalidSpec"
            and c
        ),
    )
    assert "spec.extraArgs[0] sets --max-num-seqs" in arg_condition["message"]
    for name in ("needs-secret", "reserved-arg"):
        assert kubectl("-n", namespace, "get", "deployment", name, check=False).returncode != 0
    events = kubectl("-n", namespace, "get", "events", "--field-selector", "involvedObject.name=reserved-arg").stdout
    assert "InvalidSpec" in events

    # Fixing the cause heals it without touching the InferenceService.
    kubectl("-n", namespace, "create", "secret", "generic", "missing", "--from-literal=token=hf_secret_value")
    _ready(namespace, "needs-secret", timeout=120)
    assert "hf_secret_value" not in operator.log_text()


def _versions(namespace: str) -> dict[str, str]:
    kinds = ("deployment", "service", "pdb", "infsvc")
    return {kind: get_json("-n", namespace, kind, "llama")["metadata"]["resourceVersion"] for kind in kinds}


def test_operator_restart_changes_nothing(operator: Operator, namespace: str) -> None:
    _apply_file(namespace, ROOT / "examples" / "llama-vllm.yaml")
    _ready(namespace, "llama")

    # Let the last writes land (the Deployment controller's own status updates included).
    def settled() -> dict[str, str] | None:
        first = _versions(namespace)
        time.sleep(2)
        return first if _versions(namespace) == first else None

    before = wait_for("the objects to stop changing", settled, timeout=60)
    log_count = len(operator.logs)
    operator.restart()
    wait_for(
        "the restarted operator to resume llama",
        lambda: f"Reconciled InferenceService {namespace}/llama" in operator.logs[log_count].read_text(),
        timeout=60,
    )
    time.sleep(2)
    assert _versions(namespace) == before
