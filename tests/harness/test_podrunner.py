"""The pod runner's pure parts, against what the operator renders: what it reads off an engine pod,
the simengine command it starts for it (read back with simengine's own parser), and the targets
it gives Prometheus."""

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.podrunner import (
    READINESS_CLAIM,
    ContainerLife,
    Pod,
    Settings,
    container_status,
    file_sd_targets,
    simengine_command,
)
from inferscale import render
from inferscale.api import InferenceService, ObjectMeta, parse_spec

from loadgen.engine import server as simengine

STAGES = Path(__file__).parents[2] / "cluster" / "kwok"


def pod_json(engine: str, *, phase: str = "Running", deleting: bool = False) -> dict[str, Any]:
    """A pod as the ReplicaSet would create it from the operator's Deployment."""
    isvc = InferenceService(
        metadata=ObjectMeta(name="llama", namespace="serving", uid="uid-1", generation=1),
        spec=parse_spec({"engine": engine, "model": {"id": "m/x"}, "maxConcurrency": 6, "maxModelLen": 4096}),
    )
    template = render.deployment(isvc, replicas=1)["spec"]["template"]
    metadata = {**template["metadata"], "name": "llama-7d9f-abcde", "namespace": "serving", "uid": "pod-uid"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata, "spec": template["spec"], "status": {"phase": phase, "podIP": "10.244.0.7"}}


@pytest.mark.parametrize("engine", ["vllm", "tgi", "sglang", "llamacpp"])
def test_the_engine_runs_with_the_pods_own_args(engine: str) -> None:
    pod = Pod.from_json(pod_json(engine))
    assert (pod.namespace, pod.service, pod.engine, pod.running, pod.deleting) == (
        "serving",
        "llama",
        engine,
        True,
        False,
    )
    assert pod.grace_seconds == render.ENDPOINT_DRAIN_SECONDS + 120

    command = simengine_command(pod, 43210, Settings(state_dir=Path("/unused"), cold_start_s=3))
    assert command[1:3] == ["-m", "loadgen.engine.server"]
    args, unknown = simengine.build_parser().parse_known_args(command[3:])
    config = simengine.config_from_args(args)
    assert config.engine.value == engine
    assert config.model_name == "m/x"
    assert config.profile.name == "test"
    # vLLM --max-num-seqs; TGI --max-concurrent-requests; SGLang --max-running-requests; llama.cpp --parallel
    assert config.profile.max_num_seqs == 6
    # vLLM --max-model-len; TGI --max-total-tokens; SGLang --context-length; llama.cpp --ctx-size / --parallel
    assert config.profile.max_model_len == 4096
    assert (config.cold_start_s, config.drain_timeout_s) == (3, pod.grace_seconds)
    assert (args.host, args.port) == ("127.0.0.1", 43210)  # ours, not the pod's --port 8000
    assert (
        unknown
        == {
            "vllm": [],
            "tgi": ["--max-input-tokens", "4095"],
            "sglang": ["--enable-metrics"],
            "llamacpp": ["--cont-batching", "--metrics", "--n-gpu-layers", "999"],
        }[engine]
    )


@pytest.mark.parametrize(
    ("phase", "deleting", "running"), [("Pending", False, False), ("Running", True, True), ("Succeeded", False, False)]
)
def test_phase_and_deletion(phase: str, deleting: bool, running: bool) -> None:
    pod = Pod.from_json(pod_json("vllm", phase=phase, deleting=deleting))
    assert (pod.running, pod.deleting) == (running, deleting)


@pytest.mark.parametrize(("phase", "claimed"), [("Pending", True), ("Pending", False), ("Running", False)])
def test_a_pod_reads_as_claimed_once_annotated(phase: str, claimed: bool) -> None:
    obj = pod_json("vllm", phase=phase)
    if claimed:
        obj["metadata"]["annotations"] = {READINESS_CLAIM: "podrunner"}
    pod = Pod.from_json(obj)
    assert (pod.pending, pod.claimed) == (phase == "Pending", claimed)


def test_kwok_leaves_a_claimed_pods_ready_to_the_runner_and_makes_the_others_ready() -> None:
    """kwok's stages (cluster/kwok/) select on the annotation the runner writes: a claimed pod goes
    Running but not Ready, an unclaimed one Ready, a second late so that the runner can claim it first."""
    files = sorted(STAGES.glob("*.yaml"))
    stages = {stage["metadata"]["name"]: stage["spec"] for stage in (yaml.safe_load(f.read_text()) for f in files)}
    claim_key = f'.metadata.annotations["{READINESS_CLAIM}"]'

    def on_claim(stage: dict[str, Any]) -> str:
        (operator,) = [e["operator"] for e in stage["selector"]["matchExpressions"] if e["key"] == claim_key]
        return str(operator)

    ready, unready = stages["pod-ready"], stages["pod-running-unready"]
    assert (on_claim(ready), on_claim(unready)) == ("DoesNotExist", "Exists")
    assert ready["delay"]["durationMilliseconds"] >= 1000 and "delay" not in unready
    for stage, status in ((ready, "True"), (unready, "False")):
        template = stage["next"]["statusTemplate"]
        assert "phase: Running" in template
        for condition in ("Ready", "ContainersReady"):
            assert re.search(rf'status: "{status}"\s+type: {condition}\n', template), (condition, template)


def test_targets_carry_the_pods_identity() -> None:
    assert file_sd_targets([(Pod.from_json(pod_json("tgi")), 4001)]) == [
        {
            "targets": ["127.0.0.1:4001"],
            "labels": {
                "namespace": "serving",
                "service": "llama",
                "pod": "llama-7d9f-abcde",
                "inference_engine": "tgi",
            },
        }
    ]


def test_a_crashed_engine_waits_in_crash_loop_back_off_as_the_kubelet_reports_it() -> None:
    pod = Pod.from_json(pod_json("vllm"))
    kwok = {"name": "engine", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": "t0"}}}
    crashed = ContainerLife(
        restart_count=3,
        started_at="t1",
        last_exit={"exitCode": 2, "reason": "Error", "startedAt": "t1", "finishedAt": "t2"},
        backoff_s=8,
    )
    status = container_status(kwok, pod=pod, ready=False, life=crashed)
    assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff"  # what replicas.classify calls failing
    assert "back-off 8s" in status["state"]["waiting"]["message"]
    assert status["lastState"]["terminated"]["exitCode"] == 2
    assert (status["ready"], status["restartCount"], status["started"]) == (False, 3, False)

    restarted = container_status(status, pod=pod, ready=False, life=replace(crashed, started_at="t3", backoff_s=None))
    assert restarted["state"] == {"running": {"startedAt": "t3"}}
    assert restarted["lastState"]["terminated"]["finishedAt"] == "t2"  # kept until the next crash
    assert restarted["restartCount"] == 3
