"""The README's Helm values file passes the chart's schema and installs what the README says."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.helm import ROOT, find, render, requires_helm

pytestmark = requires_helm()


def _values_block() -> str:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"```yaml\n(# values-prod\.yaml:.*?)```", readme, re.DOTALL)
    assert match is not None, "README.md lost its values-prod.yaml example"
    return match.group(1)


def test_the_readme_values_file_installs_what_it_promises(tmp_path: Path) -> None:
    values = tmp_path / "values-prod.yaml"
    values.write_text(_values_block())
    wanted = yaml.safe_load(values.read_text())
    manifests = render("-f", str(values))

    # Namespaces-limited RBAC: a Role in each listed namespace, and the operator told to watch only them.
    roles = {role["metadata"]["namespace"] for role in find(manifests, "Role")}
    assert set(wanted["watchNamespaces"]) <= roles
    [deployment] = find(manifests, "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert [arg for arg in container["args"] if arg.startswith("--namespace=")] == [
        f"--namespace={namespace}" for namespace in wanted["watchNamespaces"]
    ]
    # Prometheus URL, and credentials only as mounted files from the named Secrets.
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["INFERSCALE_PROMETHEUS_URL"] == wanted["prometheus"]["url"]
    assert env["INFERSCALE_PROMETHEUS_BEARER_TOKEN_FILE"].endswith("/token")
    assert env["INFERSCALE_PROMETHEUS_CA_FILE"].endswith("/ca.crt")
    secrets = {v["secret"]["secretName"] for v in deployment["spec"]["template"]["spec"]["volumes"] if "secret" in v}
    assert secrets == {"prometheus-token", "prometheus-ca"}
    # Two replicas with leader election, and the ServiceMonitor with the selector label.
    assert deployment["spec"]["replicas"] == 2
    assert "--lease=ops/inferscale-leader" in container["args"]
    [monitor] = find(manifests, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
