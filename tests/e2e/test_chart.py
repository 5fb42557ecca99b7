"""The Helm chart on the local cluster: lint, render, refuse bad values, install, and the
operator doing its whole job with nothing but the chart's ServiceAccount and RBAC.

The cluster runs no containers, so the chart's pods are only scheduled (kwok marks them
Running). The operator runs here instead, with the chart's own arguments and environment,
authenticated by a token of the chart's ServiceAccount, so RBAC decides what it may do.
"""

from __future__ import annotations

import base64
import json
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.processes import free_port, wait_for

from tests.e2e.conftest import (
    KUBECONFIG,
    Operator,
    condition,
    get_json,
    kubectl,
    service_account_kubeconfig,
    session_operator_paused,
)
from tests.helm import CHART, helm, requires_helm

pytestmark = requires_helm()

HF_TOKEN = "hf_chart_test_secret_value_93f1"
PROMETHEUS_TOKEN = "prom_chart_test_secret_value_5c2e"

ISVC = {
    "apiVersion": "inferscale.io/v1alpha1",
    "kind": "InferenceService",
    "metadata": {"name": "llama"},
    "spec": {"model": {"id": "meta-llama/Llama-3.1-8B-Instruct", "tokenSecretRef": {"name": "hf-token"}}},
}

BROKEN = {
    "reserved-arg": {"model": {"id": "m"}, "extraArgs": ["--max-num-seqs=512"]},
    "needs-secret": {"model": {"id": "m", "tokenSecretRef": {"name": "missing"}}},
}


def _helm(*args: str, check: bool = True) -> Any:
    return helm(*args, "--kubeconfig", str(KUBECONFIG), check=check)


@pytest.fixture
def release_namespace(cluster: Path) -> Iterator[str]:
    """Where the chart goes, enforcing the "restricted" Pod Security profile."""
    name = f"e2e-ops-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    kubectl("label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted")
    yield name
    kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def release(release_namespace: str) -> Iterator[str]:
    """A unique release name (its ClusterRoles are cluster-wide); uninstalled whatever happens."""
    name = f"inferscale-{uuid.uuid4().hex[:6]}"
    yield name
    _helm("uninstall", name, "-n", release_namespace, "--wait", check=False)


def _can_i(account: str, *args: str) -> bool:
    result = kubectl("auth", "can-i", f"--as={account}", *args, check=False)
    return result.stdout.strip() == "yes"


def _local_operator(
    deployment: dict[str, Any], kubeconfig: Path, log_dir: Path, token_file: Path
) -> tuple[Operator, dict[str, str], int, int]:
    """The chart's container as a local process: its args (local ports) and INFERSCALE_* env."""
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    liveness, metrics = free_port(), free_port()
    args = [
        f"--liveness=http://127.0.0.1:{liveness}/healthz" if arg.startswith("--liveness=") else arg
        for arg in container["args"]
    ]
    assert args[:2] == ["operator", "run"]
    settings = {
        item["name"].removeprefix("INFERSCALE_").lower(): item["value"]
        for item in container["env"]
        if item["name"].startswith("INFERSCALE_")
    }
    # What the kubelet would mount from the Secret, at a local path.
    assert settings["prometheus_bearer_token_file"].startswith("/var/run/secrets/inferscale/")
    settings["prometheus_bearer_token_file"] = str(token_file)
    settings["metrics_port"] = str(metrics)
    log_dir.mkdir()
    return Operator(log_dir, kubeconfig=kubeconfig, args=tuple(args[2:])), settings, liveness, metrics


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return int(response.status), response.read().decode()


def test_lint_template_and_bad_values_refused_at_install(release_namespace: str) -> None:
    lint = _helm("lint", str(CHART), "--strict")
    assert "0 chart(s) failed" in lint.stdout
    rendered = _helm("template", "inferscale", str(CHART), "-n", release_namespace).stdout
    kinds = [doc["kind"] for doc in yaml.safe_load_all(rendered) if doc]
    assert sorted(set(kinds)) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]

    refused = {
        "replicas=0": "at '/replicas': minimum: got 0, want 1",
        "image.tag=": "at '/image/tag'",
        "prometheus.url=prometheus:9090": "at '/prometheus/url'",
        "prometheus.url=http://admin:hunter2@prometheus:9090": "at '/prometheus/url'",
        "prometheus.bearerToken=abc": "additional properties 'bearerToken' not allowed",
    }
    for value, message in refused.items():
        result = _helm("install", "bad", str(CHART), "-n", release_namespace, "--set", value, check=False)
        assert result.returncode != 0, f"--set {value} was accepted"
        assert "values don't meet the specifications of the schema" in result.stderr, result.stderr
        assert message in result.stderr, result.stderr
    assert "bad" not in _helm("list", "-n", release_namespace, "-q").stdout.split()


def test_installed_chart_runs_the_operator_with_only_its_own_rights(
    release_namespace: str, release: str, namespace: str, tmp_path: Path
) -> None:
    account = release  # the release's full name, as it contains the chart's name
    lease_name = f"{release}-leader"
    subject = f"system:serviceaccount:{release_namespace}:{account}"
    kubectl("-n", release_namespace, "create", "secret", "generic", "prometheus-token",
            f"--from-literal=token={PROMETHEUS_TOKEN}")  # fmt: skip
    kubectl("-n", namespace, "create", "secret", "generic", "hf-token", f"--from-literal=token={HF_TOKEN}")
    _helm(
        "install", release, str(CHART), "-n", release_namespace,
        "--set", f"watchNamespaces={{{namespace}}}",
        # Nothing listens there: the scaling loop runs, holds replicas and says why.
        "--set", "prometheus.url=http://127.0.0.1:9",
        "--set", "prometheus.bearerTokenSecret.name=prometheus-token",
        "--set", "tickSeconds=2",
    )  # fmt: skip

    # Both replicas' pods pass the namespace's "restricted" Pod Security admission.
    wait_for(
        "the chart's 2 operator pods to be admitted and scheduled",
        lambda: (
            len(get_json("-n", release_namespace, "pods", "-l", f"app.kubernetes.io/instance={release}")["items"]) == 2
        ),
        timeout=30,
    )

    # What the ServiceAccount may and may not do, as the API server answers it.
    allowed = [
        ("watch", "inferenceservices.inferscale.io", "-n", namespace),
        ("patch", "inferenceservices.inferscale.io", "--subresource=status", "-n", namespace),
        ("create", "deployments.apps", "-n", namespace),
        ("patch", "pods", "-n", namespace),
        ("get", "secrets/hf-token", "-n", namespace),
        ("create", "events", "-n", namespace),
        ("update", f"leases.coordination.k8s.io/{lease_name}", "-n", release_namespace),
    ]
    denied = [
        ("list", "secrets", "-n", namespace),
        ("watch", "secrets", "-n", namespace),
        ("get", "secrets/prometheus-token", "-n", release_namespace),
        ("get", "secrets", "-n", "kube-system"),
        ("list", "pods", "-n", "kube-system"),
        ("create", "pods", "-n", namespace),
        ("delete", "pods", "-n", namespace),
        ("delete", "deployments.apps", "-n", namespace),
        ("update", "inferenceservices.inferscale.io", "-n", namespace),
        ("delete", "namespaces"),
        ("create", "clusterrolebindings.rbac.authorization.k8s.io"),
        ("update", "leases.coordination.k8s.io/kube-scheduler", "-n", release_namespace),
    ]
    assert [check for check in allowed if not _can_i(subject, *check)] == []
    assert [check for check in denied if _can_i(subject, *check)] == []

    deployment = get_json("-n", release_namespace, "deployment", release)
    kubeconfig = service_account_kubeconfig(release_namespace, account, tmp_path / "kubeconfig")
    token_file = tmp_path / "prometheus-token"
    secret = get_json("-n", release_namespace, "secret", "prometheus-token")
    token_file.write_bytes(base64.b64decode(secret["data"]["token"]))
    first, first_settings, _, first_metrics = _local_operator(deployment, kubeconfig, tmp_path / "a", token_file)
    second, second_settings, second_liveness, second_metrics = _local_operator(
        deployment, kubeconfig, tmp_path / "b", token_file
    )

    with session_operator_paused():
        try:
            first.start(**first_settings)
            wait_for("the first replica to take the Lease", lambda: "Acquired Lease" in first.log_text(), timeout=20)
            second.start(**second_settings)
            wait_for("the second replica to stand by", lambda: "Standing by" in second.log_text(), timeout=20)
            assert _get(f"http://127.0.0.1:{second_liveness}/healthz")[0] == 200  # its probe passes meanwhile
            assert "inferscale_leader 0.0" in _get(f"http://127.0.0.1:{second_metrics}/metrics")[1]
            assert "inferscale_leader 1.0" in _get(f"http://127.0.0.1:{first_metrics}/metrics")[1]

            kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(ISVC))
            # Two that cannot work: a condition and a Warning Event each, and llama unaffected.
            for name, spec in BROKEN.items():
                broken = {**ISVC, "metadata": {"name": name}, "spec": spec}
                kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(broken))

            def served() -> dict[str, Any] | None:
                isvc = get_json("-n", namespace, "inferenceservice", "llama")
                ready = condition(isvc, "Ready").get("status") == "True"
                held = condition(isvc, "MetricsAvailable").get("reason") == "PrometheusUnavailable"
                return isvc if ready and held else None

            isvc = wait_for("llama Ready, its replicas held for want of Prometheus", served, timeout=60)
            assert f"Reconciled InferenceService {namespace}/llama" in first.log_text()
            assert condition(isvc, "Reconciled")["reason"] == "Applied"
            deployment_of_isvc = get_json("-n", namespace, "deployment", "llama")
            assert deployment_of_isvc["metadata"]["ownerReferences"][0]["uid"] == isvc["metadata"]["uid"]
            for name, reason in (("reserved-arg", "InvalidSpec"), ("needs-secret", "SecretNotFound")):
                wait_for(
                    f"{name}: Reconciled=False {reason}",
                    lambda name=name, reason=reason: (
                        condition(get_json("-n", namespace, "infsvc", name), "Reconciled").get("reason") == reason
                    ),
                    timeout=30,
                )
            assert "Standing by" in second.log_text() and "Reconciled" not in second.log_text()

            # The active replica stops cleanly: the other takes over at once and resumes the service.
            holder = get_json("-n", release_namespace, "lease", lease_name)["spec"]["holderIdentity"]
            first.stop()
            wait_for(
                "the second replica to take over and resume llama",
                lambda: f"Reconciled InferenceService {namespace}/llama" in second.log_text(),
                timeout=30,
            )
            lease = get_json("-n", release_namespace, "lease", lease_name)["spec"]
            assert lease["holderIdentity"] not in (None, holder)
            assert "inferscale_leader 1.0" in _get(f"http://127.0.0.1:{second_metrics}/metrics")[1]
        finally:
            first.stop()
            second.stop()

    logs = first.log_text() + second.log_text()
    assert "Traceback" not in logs, logs[-5000:]
    for denied in ("Forbidden", " 403", "Not enough permissions"):
        assert denied not in logs, logs[-5000:]
    # No secret value in logs, status, Events, or anything Helm keeps.
    events = kubectl("-n", namespace, "get", "events", "-o", "json").stdout
    posted = {
        (event["involvedObject"]["name"], event["reason"])
        for event in json.loads(events)["items"]
        if event["involvedObject"]["kind"] == "InferenceService"
    }
    assert {("reserved-arg", "InvalidSpec"), ("needs-secret", "SecretNotFound")} <= posted, posted
    status = json.dumps([isvc.get("status") for isvc in get_json("-n", namespace, "infsvc")["items"]])
    kept = _helm("get", "all", release, "-n", release_namespace).stdout
    for secret_value in (HF_TOKEN, PROMETHEUS_TOKEN):
        for where, text in (("logs", logs), ("Events", events), ("status", status), ("the Helm release", kept)):
            assert secret_value not in text, f"a secret value leaked into {where}"

    _helm("uninstall", release, "-n", release_namespace, "--wait")
    for where in ("-n", release_namespace), ("-n", namespace), ():
        kinds = "deployment,serviceaccount,role,rolebinding,service,clusterrole,clusterrolebinding"
        left = kubectl(*where, "get", kinds, "-l", f"app.kubernetes.io/instance={release}", "-o", "name").stdout
        assert left == "", f"helm uninstall left {left}"
    assert not _can_i(subject, "get", "secrets/hf-token", "-n", namespace)
    # The CRD stays (Helm never deletes CRDs, so InferenceServices survive an uninstall).
    assert get_json("-n", namespace, "inferenceservice", "llama")["metadata"]["name"] == "llama"


def test_cluster_wide_install_grants_the_same_verbs_everywhere_and_nothing_more(
    release_namespace: str, release: str
) -> None:
    _helm("install", release, str(CHART), "-n", release_namespace)
    subject = f"system:serviceaccount:{release_namespace}:{release}"
    try:
        assert _can_i(subject, "watch", "inferenceservices.inferscale.io", "--all-namespaces")
        assert _can_i(subject, "list", "pods", "--all-namespaces")
        assert _can_i(subject, "list", "customresourcedefinitions.apiextensions.k8s.io")
        assert not _can_i(subject, "list", "namespaces")  # only needed when limited to namespaces
        assert not _can_i(subject, "list", "secrets", "--all-namespaces")
        assert not _can_i(subject, "create", "pods", "-n", "default")
        assert not _can_i(subject, "delete", "namespaces")
        assert not _can_i(subject, "patch", "nodes")
        assert not _can_i(subject, "update", "customresourcedefinitions.apiextensions.k8s.io")
    finally:
        _helm("uninstall", release, "-n", release_namespace, "--wait")
    assert not _can_i(subject, "watch", "inferenceservices.inferscale.io", "--all-namespaces")
