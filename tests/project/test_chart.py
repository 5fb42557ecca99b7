"""The Helm chart as rendered by `helm template`: pod security, leader election, credentials, RBAC."""

from __future__ import annotations

import re
from typing import Any

from tests.helm import ROOT, find, render, requires_helm

pytestmark = requires_helm()

# Volume types the "restricted" Pod Security profile allows.
RESTRICTED_VOLUMES = {
    *("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret")
}
FORBIDDEN_VERBS = {"*", "delete", "deletecollection", "escalate", "bind", "impersonate", "update"}


def _pod(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    [deployment] = find(manifests, "Deployment")
    return dict(deployment["spec"]["template"]["spec"])


def _rules(manifests: list[dict[str, Any]], kind: str, name: str) -> dict[str, set[str]]:
    """resource -> verbs of one Role or ClusterRole."""
    [role] = find(manifests, kind, name)
    rules: dict[str, set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                rules.setdefault(f"{group}/{resource}".lstrip("/"), set()).update(rule["verbs"])
    return rules


def test_the_pod_meets_the_restricted_pod_security_profile() -> None:
    pod = _pod(render())
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    [container] = pod["containers"]
    context = container["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["readOnlyRootFilesystem"] is True
    assert context["runAsNonRoot"] is True
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not context.get("privileged")
    assert "ports" not in container or all("hostPort" not in port for port in container["ports"])
    # Only /tmp is writable, and every volume is of a kind the profile allows.
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert all(set(volume) - {"name"} <= RESTRICTED_VOLUMES for volume in volumes.values())
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]


def test_the_pod_runs_as_the_images_user() -> None:
    user = re.search(r"^USER (\d+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert user is not None
    assert _pod(render())["securityContext"]["runAsUser"] == int(user.group(1))


def test_two_replicas_elect_one_leader_and_kopf_answers_the_liveness_probe() -> None:
    manifests = render()
    [deployment] = find(manifests, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    [container] = _pod(manifests)["containers"]
    assert container["args"][:2] == ["operator", "run"]
    assert "--lease=ops/inferscale-leader" in container["args"]
    assert "--liveness=http://0.0.0.0:8080/healthz" in container["args"]
    probe = container["livenessProbe"]["httpGet"]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert probe["path"] == "/healthz" and ports[probe["port"]] == 8080
    # The Lease the replicas share is the one the chart lets them write, and no other.
    [role] = find(manifests, "Role", "inferscale-leader")
    assert role["metadata"]["namespace"] == "ops"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["inferscale-leader"],
            "verbs": ["get", "update"],
        },
    ]


def test_prometheus_credentials_are_mounted_from_secrets_never_inlined() -> None:
    manifests = render(
        "--set", "prometheus.url=https://prometheus.monitoring:9090",
        "--set", "prometheus.bearerTokenSecret.name=prom-token",
        "--set", "prometheus.caSecret.name=prom-ca",
    )  # fmt: skip
    pod = _pod(manifests)
    [container] = pod["containers"]
    env = {item["name"]: item for item in container["env"]}
    assert env["INFERSCALE_PROMETHEUS_URL"]["value"] == "https://prometheus.monitoring:9090"
    token_file = env["INFERSCALE_PROMETHEUS_BEARER_TOKEN_FILE"]["value"]
    ca_file = env["INFERSCALE_PROMETHEUS_CA_FILE"]["value"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    for path, secret in ((token_file, "prom-token"), (ca_file, "prom-ca")):
        [mount] = [m for m in container["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
        assert mount["readOnly"] is True
        assert volumes[mount["name"]]["secret"]["secretName"] == secret
    # No Secret, ConfigMap or env value carries a credential: the chart only names Secrets.
    assert not find(manifests, "Secret") and not find(manifests, "ConfigMap")
    assert [name for name in env if re.search("TOKEN|_CA_|PASSWORD|SECRET", name)] == [
        "INFERSCALE_PROMETHEUS_BEARER_TOKEN_FILE",
        "INFERSCALE_PROMETHEUS_CA_FILE",
    ]


def test_all_namespaces_get_one_cluster_role_without_dangerous_verbs() -> None:
    manifests = render()
    rules = _rules(manifests, "ClusterRole", "inferscale")
    assert rules == {
        "inferscale.io/inferenceservices": {"get", "list", "watch", "patch"},
        "inferscale.io/inferenceservices/status": {"patch"},
        "apps/deployments": {"get", "list", "watch", "create", "patch"},
        "services": {"get", "list", "watch", "create", "patch"},
        "policy/poddisruptionbudgets": {"get", "list", "watch", "create", "patch"},
        "pods": {"list", "watch", "patch"},
        "secrets": {"get"},
        "events": {"create"},
    }
    assert not any(verbs & FORBIDDEN_VERBS for verbs in rules.values())
    assert _rules(manifests, "ClusterRole", "inferscale-discovery") == {
        "apiextensions.k8s.io/customresourcedefinitions": {"list", "watch"}
    }
    [binding] = find(manifests, "ClusterRoleBinding", "inferscale")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "inferscale", "namespace": "ops"}]
    assert not find(manifests, "RoleBinding", "inferscale")


def test_listed_namespaces_get_a_role_each_and_nothing_cluster_wide_but_discovery() -> None:
    manifests = render("--set", "watchNamespaces={serving,staging}")
    roles = {role["metadata"]["namespace"] for role in find(manifests, "Role", "inferscale")}
    bindings = {binding["metadata"]["namespace"] for binding in find(manifests, "RoleBinding", "inferscale")}
    assert roles == bindings == {"serving", "staging"}
    assert [role["metadata"]["name"] for role in find(manifests, "ClusterRole")] == ["inferscale-discovery"]
    assert _rules(manifests, "ClusterRole", "inferscale-discovery") == {
        "apiextensions.k8s.io/customresourcedefinitions": {"list", "watch"},
        "namespaces": {"list", "watch"},
    }
    [container] = _pod(manifests)["containers"]
    assert [arg for arg in container["args"] if arg.startswith("--namespace")] == [
        "--namespace=serving",
        "--namespace=staging",
    ]


def test_metrics_service_always_and_service_monitor_on_request() -> None:
    manifests = render()
    [service] = find(manifests, "Service")
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 8081, "targetPort": "metrics"}]
    assert not find(manifests, "ServiceMonitor")
    [monitor] = find(render("--set", "metrics.serviceMonitor.enabled=true"), "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"


def test_chart_and_app_versions_follow_the_package() -> None:
    import tomllib

    import yaml

    version = tomllib.loads((ROOT / "operator" / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((ROOT / "charts" / "inferscale" / "Chart.yaml").read_text())
    values = yaml.safe_load((ROOT / "charts" / "inferscale" / "values.yaml").read_text())
    assert chart["appVersion"] == values["image"]["tag"] == version
