"""Pure rendering: an InferenceService in, the child manifests (plain dicts) out.

Nothing here talks to a server, so the output can be compared with `==` in tests and
applied as-is with server-side apply. Child names are deterministic (the
InferenceService's own name), so a retry or a resume renders the same objects.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from inferscale.api import GPU_RESOURCE, GROUP, KIND, VERSION, Engine, InferenceService, InferenceServiceSpec

PORT = 8000
PORT_NAME = "http"
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"
# The label Prometheus series are joined on (relabelled to `service` when scraping).
SERVICE_LABEL = f"{GROUP}/service"
# The engine's name (vllm, tgi, ...), as Kubernetes' recommended labels have it.
ENGINE_LABEL = "app.kubernetes.io/name"
MANAGED_BY = "inferscale"
# Time for the Service's endpoints to drop a terminating pod before the engine gets
# SIGTERM; without it, new requests still arrive at a server that is shutting down.
ENDPOINT_DRAIN_SECONDS = 10
# Where each engine keeps downloaded weights inside its image.
MODEL_CACHE_DIR = {
    Engine.VLLM: "/root/.cache/huggingface",
    Engine.TGI: "/data",
    Engine.SGLANG: "/root/.cache/huggingface",
    # llama-server's -hf downloads into LLAMA_CACHE (common/arg.cpp, fs_get_cache_directory).
    Engine.LLAMACPP: "/root/.cache/llama.cpp",
}
# The image's own entrypoint where it has one that takes the engine's flags (vLLM's
# `vllm serve`-style api_server, TGI's launcher, llama.cpp's `llama-server`); SGLang's image
# has none, so the module is the command.
ENGINE_COMMAND: dict[Engine, list[str]] = {Engine.SGLANG: ["python3", "-m", "sglang.launch_server"]}
# llama.cpp: offload every layer to the GPU(s) when the replica has any (a count above the
# model's layers means all of them).
LLAMACPP_ALL_LAYERS = 999


def selector_labels(isvc: InferenceService) -> dict[str, str]:
    return {SERVICE_LABEL: isvc.metadata.name}


def labels(isvc: InferenceService) -> dict[str, str]:
    return {
        ENGINE_LABEL: isvc.spec.engine.value,
        "app.kubernetes.io/instance": isvc.metadata.name,
        "app.kubernetes.io/component": "inference-engine",
        "app.kubernetes.io/part-of": "inferscale",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        **selector_labels(isvc),
    }


def owner_reference(isvc: InferenceService) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "name": isvc.metadata.name,
        "uid": isvc.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(isvc: InferenceService) -> dict[str, Any]:
    return {
        "name": isvc.metadata.name,
        "namespace": isvc.metadata.namespace,
        "labels": labels(isvc),
        "ownerReferences": [owner_reference(isvc)],
    }


def engine_args(spec: InferenceServiceSpec) -> list[str]:
    """Engine command-line arguments, with the per-replica batch ceiling pinned."""
    return _ENGINE_ARGS[spec.engine](spec) + list(spec.extra_args)


@dataclass(frozen=True)
class _Flags:
    """How an engine that loads a Hugging Face repo spells the settings the operator pins."""

    model: str
    ceiling: str
    shards: str
    listen: tuple[str, ...] = ()

    def args(self, spec: InferenceServiceSpec, lengths: list[str]) -> list[str]:
        model = spec.model
        args = [self.model, model.id]
        if model.revision:
            args += ["--revision", model.revision]
        args += [*self.listen, "--port", str(PORT), self.ceiling, str(spec.max_concurrency), *lengths]
        if spec.gpus_per_replica > 1:
            args += [self.shards, str(spec.gpus_per_replica)]
        return args


_VLLM = _Flags("--model", "--max-num-seqs", "--tensor-parallel-size")
_TGI = _Flags("--model-id", "--max-concurrent-requests", "--num-shard")
# launch_server listens on 127.0.0.1 unless told otherwise.
_SGLANG = _Flags("--model-path", "--max-running-requests", "--tensor-parallel-size", ("--host", "0.0.0.0"))


def _vllm_args(spec: InferenceServiceSpec) -> list[str]:
    return _VLLM.args(spec, ["--max-model-len", str(spec.max_model_len)])


def _tgi_args(spec: InferenceServiceSpec) -> list[str]:
    # TGI requires input < total; leave room for at least one generated token.
    lengths = ["--max-input-tokens", str(spec.max_model_len - 1), "--max-total-tokens", str(spec.max_model_len)]
    return _TGI.args(spec, lengths)


def _sglang_args(spec: InferenceServiceSpec) -> list[str]:
    # /metrics exists only with --enable-metrics (docs/references/production_metrics.md).
    return _SGLANG.args(spec, ["--context-length", str(spec.max_model_len), "--enable-metrics"])


def _llamacpp_args(spec: InferenceServiceSpec) -> list[str]:
    model = spec.model
    # A local GGUF by path, else a Hugging Face repo (`org/name[:quant]`) that -hf downloads.
    args = ["--model", model.id] if model.id.endswith(".gguf") else ["--hf-repo", model.id]
    args += [
        "--host",
        "0.0.0.0",
        "--port",
        str(PORT),
        # --parallel slots is the concurrency ceiling; requests beyond it are deferred
        # (llamacpp:requests_deferred, the queue depth).
        "--parallel",
        str(spec.max_concurrency),
        # The context is split evenly between the slots, so each slot gets maxModelLen.
        "--ctx-size",
        str(spec.max_model_len * spec.max_concurrency),
        "--cont-batching",
        "--metrics",
    ]
    if spec.gpus_per_replica > 0:
        args += ["--n-gpu-layers", str(LLAMACPP_ALL_LAYERS)]
    return args


_ENGINE_ARGS = {
    Engine.VLLM: _vllm_args,
    Engine.TGI: _tgi_args,
    Engine.SGLANG: _sglang_args,
    Engine.LLAMACPP: _llamacpp_args,
}


def _env(spec: InferenceServiceSpec) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = []
    ref = spec.model.token_secret_ref
    if ref is not None:
        # By reference only: the token's value never passes through the operator.
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}})
    if spec.engine is Engine.TGI:
        env.append({"name": "HUGGINGFACE_HUB_CACHE", "value": MODEL_CACHE_DIR[Engine.TGI]})
    if spec.engine is Engine.LLAMACPP:
        env.append({"name": "LLAMA_CACHE", "value": MODEL_CACHE_DIR[Engine.LLAMACPP]})
    return env


def _probes(spec: InferenceServiceSpec) -> dict[str, Any]:
    health = {"httpGet": {"path": HEALTH_PATH, "port": PORT_NAME}}
    startup_period = 10
    return {
        # /health answers only once the weights are loaded; allow twice the expected
        # cold start before the kubelet gives up and restarts the container.
        "startupProbe": {
            **health,
            "periodSeconds": startup_period,
            "failureThreshold": max(3, math.ceil(2 * spec.cold_start_seconds / startup_period)),
            "timeoutSeconds": 5,
        },
        "readinessProbe": {**health, "periodSeconds": 5, "failureThreshold": 3, "timeoutSeconds": 5},
        "livenessProbe": {**health, "periodSeconds": 15, "failureThreshold": 4, "timeoutSeconds": 10},
    }


def _container(spec: InferenceServiceSpec) -> dict[str, Any]:
    # A CPU-only replica (llama.cpp, gpusPerReplica 0) asks for no GPU at all.
    gpus = {GPU_RESOURCE: str(spec.gpus_per_replica)} if spec.gpus_per_replica > 0 else {}
    container: dict[str, Any] = {
        "name": "engine",
        "image": spec.engine_image,
        **({"command": ENGINE_COMMAND[spec.engine]} if spec.engine in ENGINE_COMMAND else {}),
        "args": engine_args(spec),
        "ports": [{"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"}],
        "resources": {"requests": dict(gpus), "limits": dict(gpus)} if gpus else {},
        **_probes(spec),
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", str(ENDPOINT_DRAIN_SECONDS)]}}},
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "model-cache", "mountPath": MODEL_CACHE_DIR[spec.engine]},
        ],
    }
    env = _env(spec)
    if env:
        container["env"] = env
    if spec.security_context is not None:
        container["securityContext"] = spec.security_context.model_dump(by_alias=True, exclude_none=True)
    return container


def deployment(isvc: InferenceService, *, replicas: int) -> dict[str, Any]:
    spec = isvc.spec
    pod_spec: dict[str, Any] = {
        "containers": [_container(spec)],
        # preStop sleep first, then the engine's own graceful shutdown finishes the
        # requests already in flight.
        "terminationGracePeriodSeconds": ENDPOINT_DRAIN_SECONDS + spec.drain_seconds,
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": spec.shared_memory}},
            {"name": "model-cache", "emptyDir": {}},
        ],
    }
    if spec.node_selector:
        pod_spec["nodeSelector"] = dict(spec.node_selector)
    if spec.tolerations:
        pod_spec["tolerations"] = [t.model_dump(by_alias=True, exclude_none=True) for t in spec.tolerations]

    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(isvc),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector_labels(isvc)},
            # Keep serving capacity during a rollout: surge one new replica before an old
            # one goes (needs one spare GPU's worth of room).
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "revisionHistoryLimit": 3,
            "progressDeadlineSeconds": 2 * spec.cold_start_seconds + 60,
            "template": {
                "metadata": {
                    "labels": labels(isvc),
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(PORT),
                        "prometheus.io/path": METRICS_PATH,
                    },
                },
                "spec": pod_spec,
            },
        },
    }


def service(isvc: InferenceService) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(isvc),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(isvc),
            "ports": [{"name": PORT_NAME, "port": PORT, "targetPort": PORT_NAME, "protocol": "TCP"}],
        },
    }


def pod_disruption_budget(isvc: InferenceService) -> dict[str, Any]:
    # Voluntary disruptions (node drains) take one replica at a time.
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(isvc),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector_labels(isvc)}},
    }


def endpoint(isvc: InferenceService) -> str:
    return f"http://{isvc.metadata.name}.{isvc.metadata.namespace}.svc:{PORT}/v1"


# The children's kinds, in the order they should be applied.
KINDS = ("Service", "PodDisruptionBudget", "Deployment")


def child(isvc: InferenceService, kind: str, *, replicas: int) -> dict[str, Any]:
    """One child object of the InferenceService, by kind (one of KINDS)."""
    if kind == "Deployment":
        return deployment(isvc, replicas=replicas)
    if kind == "Service":
        return service(isvc)
    if kind == "PodDisruptionBudget":
        return pod_disruption_budget(isvc)
    raise ValueError(f"no child of kind {kind!r}; one of {KINDS}")


def for_service(isvc: InferenceService, *, replicas: int) -> list[dict[str, Any]]:
    """Every child object of the InferenceService, in the order they should be applied."""
    return [child(isvc, kind, replicas=replicas) for kind in KINDS]
