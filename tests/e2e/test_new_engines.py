"""SGLang and llama.cpp InferenceServices scale on the local cluster as vLLM's do: each engine's pods get a
simengine in that engine's mode (the pod runner reads the rendered args: --max-running-requests, --parallel
and --ctx-size), Prometheus scrapes its own metric names (sglang:num_queue_reqs, llamacpp:requests_deferred),
the operator's fixed query set turns them into a queue, and the tick scales up under load and back down after.
llama.cpp runs CPU-only (gpusPerReplica 0, no nvidia.com/gpu request) and exports no TTFT: status says so."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from harness.processes import wait_for

from tests.e2e.conftest import Operator, condition, get_json, kubectl
from tests.e2e.test_engines import endpoints, hold_streams, prometheus, promql, runner  # noqa: F401
from tests.e2e.test_scaling import ISVC, scaled_down, scaling_operator  # noqa: F401

ENGINES = {
    "sglang": {"queue": "sglang:num_queue_reqs", "spec": {}},
    "llamacpp": {"queue": "llamacpp:requests_deferred", "spec": {"gpusPerReplica": 0}},
}


def _isvc(namespace: str) -> dict[str, Any]:
    return get_json("-n", namespace, "inferenceservice", "chat")


@pytest.mark.parametrize("engine", list(ENGINES))
def test_the_engine_scales_up_on_its_queue_and_back_down(
    engine: str,
    scaling_operator: Operator,  # noqa: F811
    namespace: str,
) -> None:
    manifest = json.loads(json.dumps(ISVC))
    manifest["spec"] |= {"engine": engine, **ENGINES[engine]["spec"]}
    kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(manifest))
    proxy, _ = wait_for("one ready engine behind the proxy", lambda: endpoints(namespace, "chat", 1), timeout=60)
    pod_spec = get_json("-n", namespace, "deployment", "chat")["spec"]["template"]["spec"]
    resources = pod_spec["containers"][0]["resources"]
    assert ("nvidia.com/gpu" in json.dumps(resources)) is (engine != "llamacpp")

    def fresh() -> dict[str, Any] | None:
        isvc = _isvc(namespace)
        return isvc if condition(isvc, "MetricsAvailable").get("status") == "True" else None

    isvc = wait_for("MetricsAvailable=True", fresh, timeout=60)
    if engine == "llamacpp":
        assert "exports no TTFT" in condition(isvc, "MetricsAvailable")["message"]
    (series,) = wait_for(
        "the engine's own queue gauge in Prometheus",
        lambda: promql(f'{ENGINES[engine]["queue"]}{{namespace="{namespace}",service="chat"}}'),
        timeout=30,
    )
    assert series["metric"]["inference_engine"] == engine

    def scaled_up() -> dict[str, Any] | None:
        deployment = get_json("-n", namespace, "deployment", "chat")
        isvc = _isvc(namespace)
        return isvc if deployment["spec"]["replicas"] > 1 and isvc["status"].get("desiredReplicas", 1) > 1 else None

    # 16 long streams against a ceiling of 4: 12 wait in the only replica's queue.
    isvc = asyncio.run(hold_streams(proxy, 16, scaled_up, timeout=60))
    assert isvc["status"]["lastDecision"]["reason"] in ("QueueGrowing", "SLOBreached"), isvc["status"]["lastDecision"]
    assert isvc["status"]["signals"]["queueDepth"] > 2
    if engine == "llamacpp":
        assert isvc["status"]["signals"]["ttftExported"] is False
        assert "ttftP95Seconds" not in isvc["status"]["signals"]

    isvc = wait_for("the Deployment to scale back to 1", lambda: scaled_down(namespace), timeout=150, interval=2)
    assert isvc["status"]["lastDecision"]["reason"] in ("ScaledDown", "AtMinReplicas", "Steady")
    assert "Traceback" not in scaling_operator.log_text()
