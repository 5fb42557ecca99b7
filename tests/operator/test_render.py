"""Rendering: the Deployment, Service and PodDisruptionBudget a user relies on, for vLLM and TGI."""

from typing import Any

from inferscale import render
from inferscale.api import DEFAULT_IMAGES, Engine, InferenceService, ObjectMeta, parse_spec


def _isvc(**spec: Any) -> InferenceService:
    spec.setdefault("model", {"id": "meta-llama/Llama-3.1-8B-Instruct"})
    return InferenceService(
        metadata=ObjectMeta(name="llama", namespace="serving", uid="uid-1", generation=3),
        spec=parse_spec(spec),
    )


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_vllm_args_pin_the_batch_ceiling() -> None:
    isvc = _isvc(maxConcurrency=8, maxModelLen=4096, model={"id": "m/x", "revision": "abc"}, extraArgs=["--dtype=half"])
    container = _container(render.deployment(isvc, replicas=2))
    assert container["image"] == DEFAULT_IMAGES[Engine.VLLM]
    assert container["args"] == [
        "--model", "m/x", "--revision", "abc", "--port", "8000",
        "--max-num-seqs", "8", "--max-model-len", "4096", "--dtype=half",
    ]  # fmt: skip


def test_vllm_shards_across_gpus() -> None:
    container = _container(render.deployment(_isvc(gpusPerReplica=4), replicas=1))
    assert container["args"][-2:] == ["--tensor-parallel-size", "4"]
    assert container["resources"] == {"requests": {"nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}


def test_tgi_args_and_cache() -> None:
    isvc = _isvc(engine="tgi", maxConcurrency=32, maxModelLen=8192, gpusPerReplica=2, image="tgi:custom")
    container = _container(render.deployment(isvc, replicas=1))
    assert container["image"] == "tgi:custom"
    assert container["args"] == [
        "--model-id", "meta-llama/Llama-3.1-8B-Instruct", "--port", "8000",
        "--max-concurrent-requests", "32", "--max-input-tokens", "8191", "--max-total-tokens", "8192",
        "--num-shard", "2",
    ]  # fmt: skip
    assert {"name": "HUGGINGFACE_HUB_CACHE", "value": "/data"} in container["env"]
    assert {"name": "model-cache", "mountPath": "/data"} in container["volumeMounts"]


def test_sglang_runs_its_module_with_the_ceiling_and_metrics_on() -> None:
    isvc = _isvc(
        engine="sglang", maxConcurrency=24, maxModelLen=4096, gpusPerReplica=2, model={"id": "m/x", "revision": "r1"}
    )
    container = _container(render.deployment(isvc, replicas=1))
    assert container["image"] == DEFAULT_IMAGES[Engine.SGLANG]
    assert container["command"] == ["python3", "-m", "sglang.launch_server"]
    assert container["args"] == [
        "--model-path", "m/x", "--revision", "r1", "--host", "0.0.0.0", "--port", "8000",
        "--max-running-requests", "24", "--context-length", "4096", "--enable-metrics",
        "--tensor-parallel-size", "2",
    ]  # fmt: skip
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}


def test_llamacpp_pins_slots_and_runs_on_cpus_without_a_gpu_request() -> None:
    isvc = _isvc(engine="llamacpp", gpusPerReplica=0, maxConcurrency=4, maxModelLen=4096,
                 model={"id": "bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M"})  # fmt: skip
    deployment = render.deployment(isvc, replicas=1)
    container = _container(deployment)
    assert container["image"] == DEFAULT_IMAGES[Engine.LLAMACPP]
    assert "command" not in container  # the image's entrypoint is llama-server
    assert container["args"] == [
        "--hf-repo", "bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", "--host", "0.0.0.0", "--port", "8000",
        "--parallel", "4", "--ctx-size", "16384", "--cont-batching", "--metrics",
    ]  # fmt: skip
    assert container["resources"] == {}
    assert "nvidia.com/gpu" not in str(deployment)
    assert {"name": "LLAMA_CACHE", "value": "/root/.cache/llama.cpp"} in container["env"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}


def test_llamacpp_on_a_gpu_offloads_every_layer_and_takes_a_local_gguf_by_path() -> None:
    isvc = _isvc(engine="llamacpp", model={"id": "/models/llama-3.1-8b-q4_k_m.gguf"})
    container = _container(render.deployment(isvc, replicas=1))
    assert container["args"][:2] == ["--model", "/models/llama-3.1-8b-q4_k_m.gguf"]
    assert container["args"][-2:] == ["--n-gpu-layers", "999"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}


def test_gpu_requests_probes_ports_and_shm() -> None:
    deployment = render.deployment(_isvc(coldStartSeconds=120, sharedMemory="16Gi"), replicas=3)
    container = _container(deployment)
    pod = deployment["spec"]["template"]["spec"]

    assert deployment["spec"]["replicas"] == 3
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert container["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}
    # Twice the expected cold start before the kubelet gives up on a loading model.
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] == 240
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}} in pod["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    assert deployment["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == "8000"


def test_token_comes_from_the_secret_by_reference() -> None:
    isvc = _isvc(model={"id": "m", "tokenSecretRef": {"name": "hf", "key": "hf_token"}})
    container = _container(render.deployment(isvc, replicas=1))
    assert container["env"] == [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "hf_token"}}}]


def test_no_env_without_a_token() -> None:
    assert "env" not in _container(render.deployment(_isvc(), replicas=1))


def test_drain_on_termination() -> None:
    deployment = render.deployment(_isvc(drainSeconds=90), replicas=1)
    pod = deployment["spec"]["template"]["spec"]
    assert _container(deployment)["lifecycle"] == {"preStop": {"exec": {"command": ["sleep", "10"]}}}
    assert pod["terminationGracePeriodSeconds"] == 100
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}


def test_scheduling_constraints() -> None:
    isvc = _isvc(
        nodeSelector={"gpu": "h100"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    )
    pod = render.deployment(isvc, replicas=1)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"gpu": "h100"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_labels_owner_and_selector() -> None:
    isvc = _isvc(engine="tgi")
    for manifest in render.for_service(isvc, replicas=1):
        meta = manifest["metadata"]
        assert (meta["name"], meta["namespace"]) == ("llama", "serving")
        assert meta["labels"]["inferscale.io/service"] == "llama"
        assert meta["labels"]["app.kubernetes.io/name"] == "tgi"
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "inferscale"
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "inferscale.io/v1alpha1",
                "kind": "InferenceService",
                "name": "llama",
                "uid": "uid-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    deployment = render.deployment(isvc, replicas=1)
    assert deployment["spec"]["selector"] == {"matchLabels": {"inferscale.io/service": "llama"}}
    assert deployment["spec"]["template"]["metadata"]["labels"]["inferscale.io/service"] == "llama"


def test_service_and_pdb_select_the_engine_pods() -> None:
    isvc = _isvc()
    service = render.service(isvc)
    assert service["spec"]["selector"] == {"inferscale.io/service": "llama"}
    assert service["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}]
    assert render.pod_disruption_budget(isvc)["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": {"inferscale.io/service": "llama"}},
    }
    assert render.endpoint(isvc) == "http://llama.serving.svc:8000/v1"


def test_rendering_is_deterministic() -> None:
    assert render.for_service(_isvc(), replicas=2) == render.for_service(_isvc(), replicas=2)


def test_the_security_context_is_the_engine_containers_and_unset_by_default() -> None:
    assert "securityContext" not in _container(render.deployment(_isvc(), replicas=1))
    given = {"runAsUser": 1000, "readOnlyRootFilesystem": True, "seccompProfile": {"type": "RuntimeDefault"}}
    container = _container(render.deployment(_isvc(securityContext=given), replicas=1))
    assert container["securityContext"] == given  # as given: nothing added, nothing unset written
