"""The closed loop on the local cluster: engines under load report a growing queue to a real
Prometheus, the operator's tick scales the Deployment up, and once the load is gone it scales
back down after the scale-down window."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness.processes import wait_for

from tests.e2e.conftest import KUBECONFIG, KUBECTL, ROOT, Operator, condition, get_json, kubectl
from tests.e2e.test_engines import PROMETHEUS, endpoints, hold_streams, prometheus, runner  # noqa: F401

# Fast enough for a test: 2 s ticks against a 2 s scrape, windows of tens of seconds.
SETTINGS = {"tick_seconds": "2", "ttft_window_seconds": "20", "stale_after_seconds": "15"}

ISVC = {
    "apiVersion": "inferscale.io/v1alpha1",
    "kind": "InferenceService",
    "metadata": {"name": "chat"},
    "spec": {
        "model": {"id": "test-model"},
        "maxConcurrency": 4,
        "replicas": {"min": 1, "max": 3},
        "scaling": {
            "ttftP95Seconds": 30,  # the queue, not the SLO, drives this test
            "queueDepthPerReplica": 2,
            "scaleDown": {"stabilizationSeconds": 10, "maxStepReplicas": 1},
        },
        "coldStartSeconds": 10,
    },
}


@pytest.fixture
def scaling_operator(operator: Operator, prometheus: str, runner: dict[str, Any]) -> Iterator[Operator]:  # noqa: F811
    operator.restart(prometheus_url=PROMETHEUS, **SETTINGS)
    yield operator
    operator.restart()


def _isvc(namespace: str) -> dict[str, Any]:
    return get_json("-n", namespace, "inferenceservice", "chat")


def scaled_down(namespace: str) -> dict[str, Any] | None:
    """The InferenceService once both its Deployment and its status are back at 1 replica."""
    deployment = get_json("-n", namespace, "deployment", "chat")
    isvc = _isvc(namespace)
    return isvc if deployment["spec"]["replicas"] == 1 and isvc["status"]["desiredReplicas"] == 1 else None


def test_rising_queue_scales_up_and_falling_load_scales_down(scaling_operator: Operator, namespace: str) -> None:
    kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(ISVC))
    proxy, _ = wait_for("one ready engine behind the proxy", lambda: endpoints(namespace, "chat", 1), timeout=60)
    wait_for(
        "MetricsAvailable=True",
        lambda: condition(_isvc(namespace), "MetricsAvailable").get("status") == "True",
        timeout=60,
    )

    def scaled_up() -> dict[str, Any] | None:
        # The tick patches the Deployment, then writes status: wait for both.
        deployment = get_json("-n", namespace, "deployment", "chat")
        isvc = _isvc(namespace)
        return isvc if deployment["spec"]["replicas"] > 1 and isvc["status"].get("desiredReplicas", 1) > 1 else None

    # 16 long streams against a ceiling of 4: 12 wait in the queue of the only replica.
    isvc = asyncio.run(hold_streams(proxy, 16, scaled_up, timeout=60))
    decision = isvc["status"]["lastDecision"]
    assert decision["reason"] in ("QueueGrowing", "SLOBreached"), decision
    assert isvc["status"]["desiredReplicas"] > 1
    assert isvc["status"]["signals"]["queueDepth"] > 2
    events = kubectl("-n", namespace, "get", "events", "--field-selector", "involvedObject.name=chat").stdout
    assert "Scaled Deployment" in events, events

    # The load is gone (the streams hung up): back to min after the 10 s window.
    isvc = wait_for("the Deployment to scale back to 1", lambda: scaled_down(namespace), timeout=150, interval=2)
    assert isvc["status"]["lastDecision"]["reason"] in ("ScaledDown", "AtMinReplicas", "Steady")
    assert condition(isvc, "ScalingLimited").get("status") in ("True", "False")
    assert "Traceback" not in scaling_operator.log_text()


def test_closed_loop_validation_passes_on_a_step_in_load(
    scaling_operator: Operator, namespace: str, tmp_path: Path
) -> None:
    """The short form of the demo (`make demo`): loadgen's validation of a step in load."""
    from harness import validate

    kubectl("-n", namespace, "apply", "-f", str(ROOT / "examples" / "demo-chat.yaml"))
    proxy, _ = wait_for("one ready engine behind the proxy", lambda: endpoints(namespace, "chat", 1), timeout=60)
    report = tmp_path / "validate.json"
    code = validate.main(
        [
            "--namespace", namespace, "--name", "chat", "--url", proxy,
            "--kubectl", f"{KUBECTL} --kubeconfig={KUBECONFIG}",
            "--base-rate", "2", "--peak-rate", "16", "--step-at", "10", "--step-until", "50", "--duration", "70",
            "--recover-within", "35", "--scale-down-wait", "60",
            "--json", str(report), "--png", str(tmp_path / "validate.png"),
        ]
    )  # fmt: skip
    verdict = json.loads(report.read_text())["validation"]
    assert code == 0, verdict
    assert verdict["passed"] and verdict["failed"] == 0
    assert verdict["replicas_peak"] > verdict["replicas_before_step"]
    assert (tmp_path / "validate.png").stat().st_size > 0


def test_an_slo_that_prefill_breaks_is_reported_not_chased(scaling_operator: Operator, namespace: str) -> None:
    """Long prompts against a 5 ms p95 TTFT SLO: their prefill alone (~10 ms on the test profile) breaks it,
    and requests never wait, so the operator holds the size the load needs and says why instead of climbing."""
    isvc = json.loads(json.dumps(ISVC))
    isvc["spec"]["scaling"]["ttftP95Seconds"] = 0.005
    kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(isvc))
    proxy, _ = wait_for("one ready engine behind the proxy", lambda: endpoints(namespace, "chat", 1), timeout=60)
    # One request at a time, each of 1,900 prompt tokens (token ids): the engine is idle when each arrives.
    # Each prompt starts with a token of its own, so the prefix cache holds none of it: all of it is prefilled.
    stop, replicas_seen = threading.Event(), []

    def send() -> None:
        with httpx.Client(timeout=10) as client:
            for n in itertools.count(2):
                if stop.is_set():
                    return
                body = {"model": "test-model", "prompt": [n, *[1] * 1899], "max_tokens": 2}
                assert client.post(f"{proxy}/v1/completions", json=body).status_code == 200

    def reported() -> dict[str, Any] | None:
        replicas_seen.append(get_json("-n", namespace, "deployment", "chat")["spec"]["replicas"])
        isvc = _isvc(namespace)
        return isvc if condition(isvc, "SLOUnattainable").get("status") == "True" else None

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        status = wait_for("SLOUnattainable=True", reported, timeout=90, interval=2)
        # A few more ticks at this load: still no replica added for it.
        for _ in range(5):
            time.sleep(2)
            replicas_seen.append(get_json("-n", namespace, "deployment", "chat")["spec"]["replicas"])
    finally:
        stop.set()
        sender.join(timeout=15)
    unattainable = condition(status, "SLOUnattainable")
    assert unattainable["reason"] == "PrefillBound"
    assert "prefill takes" in unattainable["message"] and "spec.scaling.ttftP95Seconds" in unattainable["message"]
    assert set(replicas_seen) == {1}, replicas_seen
    assert "Traceback" not in scaling_operator.log_text()
