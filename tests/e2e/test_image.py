"""The operator's image (`make image`) run by podman against the local cluster, as the chart
runs it: the image's own user and entry point, the chart's args and environment, a
read-only root filesystem with only /tmp writable, no capabilities, and nothing but a token
of the chart's ServiceAccount to authenticate with. It takes the Lease, serves its liveness
probe, and turns the vLLM example into a Deployment."""

from __future__ import annotations

import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.processes import free_port, wait_for

from tests.e2e.conftest import KUBECONFIG, ROOT, get_json, kubectl, service_account_kubeconfig, session_operator_paused
from tests.helm import CHART, helm, requires_helm
from tests.image.oci import ARCHIVE, PODMAN, PODMAN_RUN, load

pytestmark = requires_helm()


def _podman(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed: {result.stderr.strip()}")
    return result


@pytest.fixture
def release(cluster: Path) -> Iterator[tuple[str, str]]:
    """The chart installed in a namespace of its own: (release namespace, release name)."""
    namespace, name = f"e2e-img-{uuid.uuid4().hex[:6]}", f"inferscale-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", namespace)
    kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    yield namespace, name
    helm("uninstall", name, "-n", namespace, "--wait", "--kubeconfig", str(KUBECONFIG), check=False)
    kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def _healthz(port: int) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return int(response.status)
    except OSError:
        return None


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_the_image_runs_the_operator_on_a_read_only_root(
    release: tuple[str, str], namespace: str, tmp_path: Path
) -> None:
    load()  # fails clearly when `make image` did not run
    release_namespace, name = release
    helm("install", name, str(CHART), "-n", release_namespace, "--kubeconfig", str(KUBECONFIG),
         "--set", f"watchNamespaces={{{namespace}}}", "--set", "metrics.enabled=false")  # fmt: skip
    container = _container(get_json("-n", release_namespace, "deployment", name))
    # Mounted at run time like the kubelet mounts a Secret: never part of the image.
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    service_account_kubeconfig(release_namespace, name, secrets / "kubeconfig").chmod(0o644)

    liveness = free_port()
    args = [f"--liveness=http://127.0.0.1:{liveness}/healthz" if a.startswith("--liveness=") else a
            for a in container["args"]]  # fmt: skip
    env = [f"--env={item['name']}={item.get('value', 'inferscale-image-test')}" for item in container["env"]]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] and security["capabilities"]["drop"] == ["ALL"]
    run = [
        *PODMAN_RUN, "--detach", f"--name=inferscale-{uuid.uuid4().hex[:8]}",
        "--network=host",  # the local cluster listens on the host's loopback
        "--read-only", "--read-only-tmpfs=false", "--tmpfs=/tmp:size=64m",  # the chart's emptyDir
        "--cap-drop=ALL", "--security-opt=no-new-privileges",
        f"--volume={secrets}:/var/run/secrets/inferscale/kube:ro",
        "--env=KUBECONFIG=/var/run/secrets/inferscale/kube/kubeconfig", *env,
        f"oci-archive:{ARCHIVE}", *args,
    ]  # fmt: skip
    # No --user and no --entrypoint: the image's own are what is being tested.
    assert args[:2] == ["operator", "run"]
    started = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert started.returncode == 0, started.stderr
    container_id = started.stdout.strip().splitlines()[-1]

    def logs() -> str:
        result = _podman("logs", container_id, check=False)
        return result.stdout + result.stderr

    try:
        with session_operator_paused():
            wait_for("the operator in the image to take the Lease", lambda: "Acquired Lease" in logs(), timeout=60)
            # Between the Lease and kopf's own probe server the port is briefly closed.
            wait_for("its liveness probe to pass", lambda: _healthz(liveness) == 200, timeout=30)
            # It runs as the image's user, not root: the kernel's view of its process.
            status = _podman("exec", container_id, "cat", "/proc/1/status").stdout
            uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
            assert set(uids) == {"10001"}
            assert _podman("exec", container_id, "touch", "/opt/x", check=False).returncode != 0  # read-only

            kubectl("-n", namespace, "apply", "-f", str(ROOT / "examples" / "llama-vllm.yaml"))
            wait_for(
                "the Deployment of the vLLM example",
                lambda: kubectl("-n", namespace, "get", "deployment", "llama", check=False).returncode == 0,
                timeout=60,
            )
            isvc = get_json("-n", namespace, "inferenceservice", "llama")
            owner = get_json("-n", namespace, "deployment", "llama")["metadata"]["ownerReferences"][0]
            assert owner["uid"] == isvc["metadata"]["uid"]
            wait_for(
                "the operator to report the Deployment in status",
                lambda: f"Reconciled InferenceService {namespace}/llama" in logs(),
                timeout=30,
            )
            kubectl("-n", namespace, "delete", "inferenceservice", "llama", "--timeout=60s")
    finally:
        text = logs()
        image_id = _podman("inspect", "--format={{.Image}}", container_id, check=False).stdout.strip()
        _podman("rm", "--force", "--time=10", container_id, check=False)
        # Each build is a new image: drop this one from podman's store rather than pile them up.
        if image_id:
            _podman("rmi", "--force", image_id, check=False)
    assert "Traceback" not in text, text[-5000:]
    assert "Read-only file system" not in text, text[-5000:]
