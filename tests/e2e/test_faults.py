"""Faults on the local cluster, each as a platform team would meet it: Prometheus going away, the
active operator killed mid-scale, engines crash-looping, GPUs running out, and users editing
the same objects as the operator. What is asserted is what a user would notice: the replica
count, the conditions and Events that say why, and that things heal when the fault is gone.

(A scale-down losing no request is asserted by test_scaling's closed-loop validation: loadgen
counts every failed request across the scale-down.)
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.processes import wait_for

from tests.e2e.conftest import (
    KUBECONFIG,
    KUBECTL,
    STATE,
    Operator,
    condition,
    get_json,
    kubectl,
    session_operator_paused,
)
from tests.e2e.test_engines import PROMETHEUS, endpoints, hold_streams, prometheus, runner, script  # noqa: F401
from tests.e2e.test_scaling import ISVC, SETTINGS, scaling_operator  # noqa: F401


def _isvc(namespace: str, name: str = "chat") -> dict[str, Any]:
    return get_json("-n", namespace, "inferenceservice", name)


def _status_of(namespace: str, condition_type: str) -> str | None:
    return condition(_isvc(namespace), condition_type).get("status")


def _replicas(namespace: str, name: str = "chat") -> int:
    return int(get_json("-n", namespace, "deployment", name)["spec"]["replicas"])


def _apply(namespace: str, spec_changes: dict[str, Any], name: str = "chat") -> None:
    manifest = copy.deepcopy(ISVC)
    manifest["metadata"]["name"] = name
    for path, value in spec_changes.items():
        *parents, leaf = path.split(".")
        node = manifest["spec"]
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(manifest))


class ReplicaRecorder:
    """Samples a Deployment's spec.replicas every half second in a thread: the whole history a
    flap would show up in, not just the end state."""

    def __init__(self, namespace: str, name: str = "chat") -> None:
        self.namespace, self.name = namespace, name
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            with contextlib.suppress(AssertionError):
                self.samples.append((time.monotonic(), _replicas(self.namespace, self.name)))

    def __enter__(self) -> ReplicaRecorder:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def between(self, start: float, end: float) -> list[int]:
        return [n for t, n in self.samples if start <= t <= end]


def _held(namespace: str, replicas: int, seconds: float) -> None:
    """The Deployment keeps `replicas` for `seconds` (several operator ticks)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert _replicas(namespace) == replicas
        time.sleep(1)


def _two_ready_engines_with_metrics(namespace: str) -> None:
    _apply(namespace, {"replicas": {"min": 2, "max": 3}})
    wait_for("two ready engines", lambda: endpoints(namespace, "chat", 2), timeout=90)
    wait_for("MetricsAvailable=True", lambda: _status_of(namespace, "MetricsAvailable") == "True")


def test_prometheus_outage_holds_replicas_says_why_and_scaling_resumes_when_it_returns(
    scaling_operator: Operator,  # noqa: F811
    namespace: str,
) -> None:
    _two_ready_engines_with_metrics(namespace)

    stopped = script("prometheus.sh", "stop")
    assert stopped.returncode == 0, stopped.stderr
    try:
        # Idle engines and min lowered to 1: with metrics, this would scale down after the 10 s window.
        _apply(namespace, {"replicas": {"min": 1, "max": 3}})
        unavailable = wait_for(
            "MetricsAvailable=False naming Prometheus",
            lambda: (c := condition(_isvc(namespace), "MetricsAvailable")).get("status") == "False" and c,
            timeout=30,
        )
        assert unavailable["reason"] == "PrometheusUnavailable"
        assert "replicas are held" in unavailable["message"]
        _held(namespace, 2, seconds=20)
        decision = _isvc(namespace)["status"]["lastDecision"]
        assert decision["reason"] == "MetricsMissing", decision
    finally:
        started = script("prometheus.sh", "start")
        assert started.returncode == 0, started.stderr

    wait_for(
        "MetricsAvailable=True again",
        lambda: _status_of(namespace, "MetricsAvailable") == "True",
        timeout=60,
    )
    wait_for("the idle Deployment to scale down to 1", lambda: _replicas(namespace) == 1, timeout=90, interval=1)
    assert "Traceback" not in scaling_operator.log_text()


def _lease_holder(namespace: str, name: str) -> str | None:
    result = kubectl("-n", namespace, "get", "lease", name, "-o", "json", check=False)
    return json.loads(result.stdout)["spec"].get("holderIdentity") if result.returncode == 0 else None


def _holder_of(operators: list[Operator], lease: str, identity: str) -> Operator | None:
    """Which of our operator processes took the Lease as `identity` (the standby's log names the
    holder too, so match the line only the holder writes)."""
    acquired = f"Acquired Lease {lease} as {identity}:"
    return next((op for op in operators if acquired in op.log_text()), None)


def test_active_operator_killed_mid_scale_the_standby_takes_over_without_a_flap(
    prometheus: str,  # noqa: F811
    runner: dict[str, Any],  # noqa: F811
    namespace: str,
    tmp_path: Path,
) -> None:
    lease = "inferscale-leader"
    settings = {"prometheus_url": prometheus, **SETTINGS}
    with session_operator_paused():
        # Each in its own directory: their logs must not overwrite each other's.
        log_dirs = [tmp_path / f"operator-{i}" for i in range(2)]
        operators = [Operator(d, args=("--lease", f"{namespace}/{lease}")) for d in log_dirs]
        for d in log_dirs:
            d.mkdir()
        for op in operators:
            op.start(**settings)
        try:
            first = wait_for("one operator to hold the Lease", lambda: _lease_holder(namespace, lease), timeout=30)
            holder = functools.partial(_holder_of, operators, f"{namespace}/{lease}", first)
            active = wait_for("the holder's log", holder, timeout=10)
            standby = next(op for op in operators if op is not active)

            _apply(namespace, {})
            proxy, _ = wait_for("one ready engine", lambda: endpoints(namespace, "chat", 1), timeout=60)
            wait_for("metrics", lambda: _status_of(namespace, "MetricsAvailable") == "True")

            killed: dict[str, Any] = {}

            def kill_mid_scale_then_wait_for_takeover() -> dict[str, Any] | None:
                if not killed:
                    if _replicas(namespace) == 1:
                        return None
                    # The scale-up is decided and its pods are starting: kill -9, no Lease release.
                    assert active.process is not None
                    active.process.send_signal(signal.SIGKILL)
                    killed.update(at=time.monotonic(), status=_isvc(namespace)["status"])
                    return None
                holder = _lease_holder(namespace, lease)
                decision = _isvc(namespace)["status"]["lastDecision"]
                fresh = decision["time"] > killed["status"]["lastDecision"]["time"]
                return {"holder": holder, "status": _isvc(namespace)["status"]} if holder != first and fresh else None

            with ReplicaRecorder(namespace) as recorder:
                # 16 streams against a ceiling of 4 on one replica: the queue calls for 3.
                took_over = asyncio.run(hold_streams(proxy, 16, kill_mid_scale_then_wait_for_takeover, timeout=90))
                load_gone = time.monotonic()
                wait_for("the new holder to scale the idle service back to 1", lambda: _replicas(namespace) == 1,
                         timeout=120, interval=1)  # fmt: skip

            assert took_over["holder"] is not None and took_over["holder"] in standby.log_text()
            # No flap: while the load was on, the count never went down, across the kill and the takeover.
            under_load = recorder.between(0, load_gone)
            assert under_load == sorted(under_load), under_load
            assert max(under_load) > 1
            # No lost decision: the survivor resumed from the remembered state, not from scratch.
            assert took_over["status"]["lastScaleTime"] >= killed["status"]["lastScaleTime"]
            assert took_over["status"]["desiredReplicas"] >= killed["status"]["desiredReplicas"]
            assert "Traceback" not in standby.log_text()
        finally:
            for op in operators:
                op.stop()


def test_crash_looping_engines_are_not_capacity_and_nothing_runs_away(
    scaling_operator: Operator,  # noqa: F811
    namespace: str,
) -> None:
    # A typo in extraArgs: the engine refuses it at start-up and exits, as vLLM's argument parser does.
    _apply(namespace, {"extraArgs": ["--max-num-batched-tokens", "lots"]})

    def crash_looping() -> dict[str, Any] | None:
        pods = get_json("-n", namespace, "pods", "-l", "inferscale.io/service=chat")["items"]
        for pod in pods:
            for status in pod["status"].get("containerStatuses") or []:
                waiting = status.get("state", {}).get("waiting", {})
                if waiting.get("reason") == "CrashLoopBackOff" and status.get("restartCount", 0) >= 2:
                    return status
        return None

    status = wait_for("the engine pod in CrashLoopBackOff", crash_looping, timeout=60)
    assert status["lastState"]["terminated"]["exitCode"] == 2

    decision = wait_for(
        "the operator to report the failing replica",
        lambda: "failing" in (d := _isvc(namespace)["status"].get("lastDecision", {})).get("message", "") and d,
        timeout=30,
    )
    assert decision["replicas"] == 1, decision
    _held(namespace, 1, seconds=15)
    isvc = _isvc(namespace)
    assert isvc["status"].get("readyReplicas", 0) == 0
    assert condition(isvc, "Ready")["status"] == "False"

    # The fix rolls out and the service heals.
    kubectl("-n", namespace, "patch", "inferenceservice", "chat", "--type=json",
            "-p", '[{"op": "remove", "path": "/spec/extraArgs"}]')  # fmt: skip
    wait_for("Ready=True after the fix", lambda: _status_of(namespace, "Ready") == "True",
             timeout=90, interval=1)  # fmt: skip
    assert "Traceback" not in scaling_operator.log_text()


def test_gpu_capacity_exhausted_is_reported_and_replicas_do_not_run_away(
    scaling_operator: Operator,  # noqa: F811
    namespace: str,
) -> None:
    # Two kwok nodes of 8 GPUs: at 8 GPUs per replica at most two replicas ever fit.
    _apply(namespace, {"gpusPerReplica": 8, "replicas": {"min": 1, "max": 8}})
    proxy, _ = wait_for("one ready engine", lambda: endpoints(namespace, "chat", 1), timeout=60)
    wait_for("metrics", lambda: _status_of(namespace, "MetricsAvailable") == "True")

    def limited() -> dict[str, Any] | None:
        found = condition(_isvc(namespace), "ScalingLimited")
        return found if found.get("status") == "True" and found.get("reason") == "GPUCapacityReached" else None

    def limited_for_a_while() -> dict[str, Any] | None:
        found = limited()
        if found is None:
            return None
        # Held for several ticks under the same load: the count stays where it is.
        before = _replicas(namespace)
        time.sleep(8)
        return {"condition": found, "before": before, "after": _replicas(namespace)}

    # 30 streams against a ceiling of 4 call for 5 replicas of which at most 2 can be scheduled.
    seen = asyncio.run(hold_streams(proxy, 30, limited_for_a_while, timeout=120))
    assert seen["before"] == seen["after"] < 8, seen
    assert "Pending" in seen["condition"]["message"]
    # And in the scheduler's own words, e.g. "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    assert "Kubernetes says: pod chat-" in seen["condition"]["message"]
    assert "Insufficient nvidia.com/gpu" in seen["condition"]["message"]
    pods = get_json("-n", namespace, "pods", "-l", "inferscale.io/service=chat")["items"]
    unschedulable = [p for p in pods if condition(p, "PodScheduled").get("reason") == "Unschedulable"]
    assert unschedulable, [p["status"] for p in pods]

    # The load is gone: back to 1, the Pending pods go with the scale-down, the limit lifts.
    wait_for("scale-down to 1", lambda: _replicas(namespace) == 1, timeout=120, interval=1)
    wait_for("ScalingLimited=False", lambda: _status_of(namespace, "ScalingLimited") == "False")
    assert "Traceback" not in scaling_operator.log_text()


def test_concurrent_edits_by_users_converge_and_an_outside_scale_is_reported_not_fought(
    scaling_operator: Operator,  # noqa: F811
    namespace: str,
) -> None:
    _apply(namespace, {"replicas": {"min": 1, "max": 5}})
    wait_for("one ready engine", lambda: endpoints(namespace, "chat", 1), timeout=60)

    # Eight writers at once change the ceiling while the operator reconciles each change.
    writers = [
        subprocess.Popen(
            [
                KUBECTL,
                f"--kubeconfig={KUBECONFIG}",
                "-n",
                namespace,
                "patch",
                "inferenceservice",
                "chat",
                "--type=merge",
                "-p",
                json.dumps({"spec": {"maxConcurrency": 4 + i}}),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(8)
    ]
    for writer in writers:
        assert writer.wait(timeout=60) == 0, writer.stderr.read() if writer.stderr else ""
    final = _isvc(namespace)
    ceiling, generation = final["spec"]["maxConcurrency"], final["metadata"]["generation"]

    def converged() -> bool:
        isvc = _isvc(namespace)
        args = get_json("-n", namespace, "deployment", "chat")["spec"]["template"]["spec"]["containers"][0]["args"]
        reconciled = condition(isvc, "Reconciled")
        return (
            args[args.index("--max-num-seqs") + 1] == str(ceiling)
            and reconciled.get("status") == "True"
            and reconciled.get("observedGeneration") == generation
        )

    wait_for(f"the Deployment to carry the last ceiling ({ceiling}) at generation {generation}", converged, timeout=60)

    # Someone scales the Deployment by hand: the operator says so and carries on from their count.
    kubectl("-n", namespace, "scale", "deployment", "chat", "--replicas=2")
    overridden = wait_for(
        "ReplicasOverridden=True",
        lambda: (c := condition(_isvc(namespace), "ReplicasOverridden")).get("status") == "True" and c,
        timeout=30,
    )
    assert "by someone other than inferscale" in overridden["message"]
    events = kubectl("-n", namespace, "get", "events", "--field-selector", "reason=ReplicasChangedExternally").stdout
    assert "chat" in events
    assert "Traceback" not in scaling_operator.log_text()


def test_corrupt_remembered_state_is_reported_dropped_and_scaling_converges(
    scaling_operator: Operator,  # noqa: F811
    namespace: str,
) -> None:
    _two_ready_engines_with_metrics(namespace)

    # Another writer leaves a time far in the future and a field of the wrong type in the memory;
    # before, the first held scale-down for good ("ready replicas changed -30675855708s ago").
    corrupt = {"readyChangedAt": "3000-01-01T00:00:00Z", "readyReplicas": "two", "capacityRps": "fast"}
    kubectl("-n", namespace, "patch", "inferenceservice", "chat", "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"autoscaler": corrupt}}))  # fmt: skip
    _apply(namespace, {"replicas": {"min": 1, "max": 3}})

    def reported() -> list[str]:
        events = get_json("-n", namespace, "events", "--field-selector", "reason=RememberedStateInvalid")["items"]
        return [e["message"] for e in events]

    [message] = wait_for("a RememberedStateInvalid Event", reported, timeout=30)
    for field in ("readyChangedAt", "readyReplicas", "capacityRps"):
        assert f"status.autoscaler.{field}" in message, message
    wait_for("the idle Deployment to scale down to 1", lambda: _replicas(namespace) == 1, timeout=90, interval=1)
    memory = _isvc(namespace)["status"]["autoscaler"]
    assert memory.get("readyChangedAt", "") < "3000" and memory.get("capacityRps") != "fast", memory
    assert len(reported()) == 1  # said once: the bad fields were rewritten or cleared
    assert "Traceback" not in scaling_operator.log_text()


@contextlib.contextmanager
def api_server_stopped() -> Iterator[None]:
    """Kill the local cluster's kube-apiserver for the block (a crash: its graceful shutdown waits out
    its clients' watches for minutes), then start it again as up.sh did (same command line, same
    log, its pid file updated for cluster/down.sh); etcd keeps the state."""
    pid_file = STATE / "pids" / "kube-apiserver.pid"
    pid = int(pid_file.read_text())
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    os.kill(pid, signal.SIGKILL)
    wait_for("kube-apiserver to exit", lambda: _exited(pid), timeout=30, interval=0.2)
    try:
        yield
    finally:
        with (STATE / "logs" / "kube-apiserver.log").open("ab") as log:
            process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        pid_file.write_text(f"{process.pid}\n")
        wait_for(
            "kube-apiserver ready again",
            lambda: kubectl("get", "--raw=/readyz", check=False).returncode == 0,
            timeout=60,
            interval=0.5,
        )


def _exited(pid: int) -> bool:
    """Gone, or a zombie (up.sh's shell is gone, so whoever adopted it may not reap it at once)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


# The kinds the operator watches: InferenceServices, Deployments, Services, PodDisruptionBudgets,
# pods, and kopf's own watch of the CRDs.
WATCHED_KINDS = 6


def test_an_api_server_restart_with_many_services_logs_a_line_a_tick_and_everything_recovers(
    namespace: str,
    prometheus: str,  # noqa: F811
    runner: dict[str, Any],  # noqa: F811
    tmp_path: Path,
) -> None:
    names = [f"svc-{i}" for i in range(6)]
    with session_operator_paused():
        # At the default level, as a user runs it: every line it writes is one they read.
        quiet = Operator(tmp_path, verbose=False)
        quiet.start(prometheus_url=PROMETHEUS, **SETTINGS)
        try:
            for name in names:
                _apply(namespace, {}, name=name)
            for name in names:
                wait_for(f"{name} Ready", lambda n=name: _status_of_named(namespace, n, "Ready") == "True", timeout=90)
            wait_for("signals for all", lambda: all(_status_of_named(namespace, n, "MetricsAvailable") for n in names))
            log = quiet.logs[-1]
            offset = log.stat().st_size
            outage = 15.0
            with api_server_stopped():
                time.sleep(outage)
                lines = log.read_bytes()[offset:].decode(errors="replace").splitlines()
            ticks = outage / float(SETTINGS["tick_seconds"])
            print(f"{len(lines)} log lines in a {outage:.0f}s outage ({ticks:.0f} ticks, {len(names)} services):")
            print("\n".join(line[:200] for line in lines))
            # Per tick one summary for all services; besides, kopf's retries of its watches, one line per
            # watched kind and attempt (its backoffs: at most 9 attempts). Nothing per service.
            # The operator watches every namespace: a service of an earlier test whose namespace is still being
            # deleted counts in the summary too ("7 of 7"), so at least these six, all failed.
            summaries = [
                line
                for line in lines
                if (m := re.match(r"Scaling failed for (\d+) of (\d+) ", line))
                and m[1] == m[2]
                and int(m[1]) >= len(names)
            ]
            per_service = [line for line in lines if "/svc-" in line and line not in summaries]
            others = [line for line in lines if line not in summaries and line not in per_service]
            assert 1 <= len(summaries) <= ticks + 1, summaries
            assert per_service == [], per_service
            assert all(line.startswith("Request attempt #") and "watch=true" in line for line in others), others
            assert len(others) <= WATCHED_KINDS * 9, others

            # It all comes back: every service Ready, the pods Ready (the pod runner), nothing moved.
            restarted = time.monotonic()
            for name in names:
                wait_for(f"{name} Ready again", lambda n=name: _status_of_named(namespace, n, "Ready") == "True")
            print(f"all {len(names)} services Ready {time.monotonic() - restarted:.1f}s after the API server was back")
            pods = get_json("-n", namespace, "pods")["items"]
            assert all(condition(p, "Ready").get("status") == "True" for p in pods), [p["status"] for p in pods]
            assert all(_replicas(namespace, name) == 1 for name in names)
            assert "Traceback" not in quiet.log_text()
        finally:
            quiet.stop()


def _status_of_named(namespace: str, name: str, condition_type: str) -> str | None:
    return condition(_isvc(namespace, name), condition_type).get("status")


@pytest.fixture(autouse=True)
def _prometheus_left_running() -> Iterator[None]:
    """A test that stopped Prometheus must have started it again, for the tests after it."""
    yield
    assert script("prometheus.sh", "status").returncode == 0, "Prometheus was left stopped"
