"""End-to-end fixtures: the real local control plane (cluster/up.sh) and the operator
running for real as a subprocess, driven with kubectl as a user would."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.processes import wait_for

ROOT = Path(__file__).resolve().parents[2]
STATE = Path(os.environ.get("INFERSCALE_CLUSTER_DIR", Path.home() / ".cache/inferscale/cluster"))
KUBECONFIG = Path(os.environ.get("KUBECONFIG", STATE / "kubeconfig"))
KUBECTL = str(STATE / "bin" / "kubectl")
# Every operator here resyncs its children often, so a repair loop (a child repaired over and
# over though nobody touched it) shows up within any test; test_repair asserts there is none.
RESYNC_SECONDS = 3


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.e2e)


def kubectl(*args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [KUBECTL, f"--kubeconfig={KUBECONFIG}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
    return result


def get_json(*args: str) -> dict[str, Any]:
    return dict(json.loads(kubectl("get", *args, "-o", "json").stdout))


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == type_), {})


@pytest.fixture(scope="session")
def cluster() -> Path:
    result = subprocess.run(
        [KUBECTL, f"--kubeconfig={KUBECONFIG}", "get", "--raw=/readyz"], capture_output=True, text=True
    )
    if result.returncode != 0:
        pytest.fail(f"the local cluster is not up ({result.stderr.strip()}): run `make cluster-up` or `make test`")
    demo = demo_operator_pid()
    if demo is not None:
        # Two operators on one cluster fight over every InferenceService, and the tests' own loses.
        pytest.fail(
            f"the demo's operator is still running (pid {demo}, cluster/operator.sh): stop it with `make operator-down`"
        )
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    kubectl("wait", "--for=condition=Established", "crd/inferenceservices.inferscale.io", "--timeout=60s")
    return KUBECONFIG


def demo_operator_pid() -> int | None:
    """The pid of the operator `make demo` left running (cluster/operator.sh), if it is alive."""
    try:
        pid = int((STATE / "pids" / "operator.pid").read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def service_account_kubeconfig(namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig that authenticates with a fresh token of the ServiceAccount, nothing else."""
    token = kubectl("-n", namespace, "create", "token", account, "--duration=10m").stdout.strip()
    admin = yaml.safe_load(KUBECONFIG.read_text())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": admin["clusters"][0]["name"], "user": account}}],
        "current-context": "sa",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


class Operator:
    """The operator as a user runs it: `inferscale operator run`, in its own process
    (by default as cluster-admin; `kubeconfig` and `args` run it as someone else, with flags)."""

    def __init__(
        self, log_dir: Path, *, kubeconfig: Path = KUBECONFIG, args: tuple[str, ...] = (), verbose: bool = True
    ) -> None:
        self.log_dir = log_dir
        self.kubeconfig = kubeconfig
        self.args = (*args, "--verbose") if verbose else args
        self.process: subprocess.Popen[bytes] | None = None
        self.logs: list[Path] = []

    def start(self, **settings: str) -> None:
        """Start it; `settings` become INFERSCALE_* variables (e.g. prometheus_url=...)."""
        log = self.log_dir / f"operator-{len(self.logs)}.log"
        self.logs.append(log)
        env = {key: value for key, value in os.environ.items() if not key.startswith("INFERSCALE_")}
        settings = {"resync_seconds": str(RESYNC_SECONDS), **settings}
        env.update({f"INFERSCALE_{key.upper()}": value for key, value in settings.items()})
        env["KUBECONFIG"] = str(self.kubeconfig)
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "inferscale", "operator", "run", *self.args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self, **settings: str) -> None:
        self.stop()
        self.start(**settings)

    def log_text(self) -> str:
        return "\n".join(path.read_text(errors="replace") for path in self.logs)


# The session's operator while it exists (see session_operator_paused).
_SESSION_OPERATOR: list[Operator] = []


@pytest.fixture(scope="session")
def operator(cluster: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    running = Operator(tmp_path_factory.mktemp("operator"))
    running.start()
    _SESSION_OPERATOR.append(running)
    yield running
    _SESSION_OPERATOR.remove(running)
    running.stop()
    text = running.log_text()
    assert "Traceback" not in text, f"the operator logged a traceback:\n{text[-5000:]}"


@contextlib.contextmanager
def session_operator_paused() -> Iterator[None]:
    """Stop the session's operator, if a test started it, for the block (it watches every
    namespace as cluster-admin, so a test can see what another operator does on its own)."""
    running = next((op for op in _SESSION_OPERATOR if op.process is not None), None)
    if running is None:
        yield
        return
    running.stop()
    try:
        yield
    finally:
        running.start()


@pytest.fixture
def namespace(cluster: Path) -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", name)
    wait_for(
        f"ServiceAccount default in {name}",
        lambda: kubectl("-n", name, "get", "sa", "default", check=False).returncode == 0,
    )
    yield name
    kubectl("delete", "namespace", name, "--wait=false", check=False)
