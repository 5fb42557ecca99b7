"""The InferenceService API: pydantic models of its spec and status.

These models are the one source of truth: the CRD's OpenAPI schema in `crds/` is
generated from them (`inferscale crd generate`), and the operator validates every object
with them before acting. They do no I/O and import nothing else of ours.

Field names are camelCase on the wire (Kubernetes convention) and snake_case in Python.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

GROUP = "inferscale.io"
VERSION = "v1alpha1"
KIND = "InferenceService"
PLURAL = "inferenceservices"
SINGULAR = "inferenceservice"
# KServe owns `isvc`; ours must not clash with it.
SHORT_NAMES = ["infsvc"]

GPU_RESOURCE = "nvidia.com/gpu"


class Engine(StrEnum):
    VLLM = "vllm"
    TGI = "tgi"
    SGLANG = "sglang"
    LLAMACPP = "llamacpp"


# Images pinned per engine (overridable with spec.image). Bump deliberately: engine flags
# and metric names are checked against these versions (docs/engines.md).
DEFAULT_IMAGES: dict[Engine, str] = {
    Engine.VLLM: "vllm/vllm-openai:v0.11.0",
    Engine.TGI: "ghcr.io/huggingface/text-generation-inference:3.3.4",
    Engine.SGLANG: "lmsysorg/sglang:v0.5.4",
    Engine.LLAMACPP: "ghcr.io/ggml-org/llama.cpp:server-b7100",
}

# llama.cpp's server exports no latency histogram at all (tools/server: its /metrics is a
# handful of counters and gauges), so there is no TTFT to hold an SLO against: the policy
# sizes it on queue depth and busy slots alone (policy.Observation.ttft_exported).
ENGINES_WITHOUT_TTFT = frozenset({Engine.LLAMACPP})
# Engines that can run with no GPU at all (spec.gpusPerReplica: 0): llama.cpp on CPUs.
CPU_ENGINES = frozenset({Engine.LLAMACPP})

# Flags that the spec (or, where None, the operator itself) owns. Passing them through
# extraArgs would silently override the pinned batch ceiling or the wiring the operator
# relies on, so they are refused.
RESERVED_ARGS: dict[Engine, dict[str, str | None]] = {
    Engine.VLLM: {
        "--max-num-seqs": "spec.maxConcurrency",
        "--max-model-len": "spec.maxModelLen",
        "--model": "spec.model.id",
        "--revision": "spec.model.revision",
        "--port": None,
        "--tensor-parallel-size": "spec.gpusPerReplica",
    },
    Engine.TGI: {
        "--max-concurrent-requests": "spec.maxConcurrency",
        "--max-total-tokens": "spec.maxModelLen",
        "--max-input-tokens": "spec.maxModelLen",
        "--model-id": "spec.model.id",
        "--revision": "spec.model.revision",
        "--port": None,
        "--num-shard": "spec.gpusPerReplica",
    },
    # python/sglang/srt/server_args.py (ServerArgs.add_cli_args).
    Engine.SGLANG: {
        "--max-running-requests": "spec.maxConcurrency",
        "--context-length": "spec.maxModelLen",
        "--model-path": "spec.model.id",
        "--revision": "spec.model.revision",
        "--port": None,
        "--host": None,
        "--enable-metrics": None,
        "--tensor-parallel-size": "spec.gpusPerReplica",
    },
    # common/arg.cpp (common_params_parser_init), long names; short aliases in LLAMACPP_ALIASES.
    Engine.LLAMACPP: {
        "--parallel": "spec.maxConcurrency",
        "--ctx-size": "spec.maxModelLen",
        "--model": "spec.model.id",
        "--hf-repo": "spec.model.id",
        "--port": None,
        "--host": None,
        "--metrics": None,
        "--cont-batching": None,
        "--no-cont-batching": None,
        "--n-gpu-layers": "spec.gpusPerReplica",
    },
}

# Other spellings of reserved flags. SGLang: `--model` and `--tp-size`/`--tp` (argparse
# aliases in server_args.py). llama.cpp: each option's short and alternative names in
# common/arg.cpp.
SGLANG_ALIASES = {"--model": "--model-path", "--tp-size": "--tensor-parallel-size", "--tp": "--tensor-parallel-size"}
LLAMACPP_ALIASES = {
    "-np": "--parallel",
    "-c": "--ctx-size",
    "-m": "--model",
    "-hf": "--hf-repo",
    "-hfr": "--hf-repo",
    "-cb": "--cont-batching",
    "-nocb": "--no-cont-batching",
    "-ngl": "--n-gpu-layers",
    "--gpu-layers": "--n-gpu-layers",
}


def vllm_reads_as(arg: str) -> tuple[str, ...]:
    """The reserved long flags vLLM's parser may read `arg` as (none if it is another flag).

    vLLM's FlexibleArgumentParser (vllm/utils/argparse_utils.py) rewrites `_` to `-` in a
    `--name` before `=` and leaves argparse's allow_abbrev on, so an unambiguous prefix of a
    long flag selects it. `-tp` is the one short alias of a reserved flag (engine/arg_utils.py);
    argparse accepts it as `-tp`, `-tp=N` and, by prefix, `-t`.
    """
    reserved = RESERVED_ARGS[Engine.VLLM]
    if arg.startswith("--"):
        name = "--" + arg[2:].split("=", 1)[0].replace("_", "-")
        if name in reserved:
            return (name,)
        # A prefix of several flags is an error in argparse, but refusing every prefix of a
        # reserved flag is still right: no vLLM flag is itself a proper prefix of a reserved one.
        return tuple(flag for flag in reserved if flag.startswith(name)) if len(name) > 2 else ()
    return ("--tensor-parallel-size",) if arg.split("=", 1)[0] in ("-tp", "-t") else ()


def tgi_reads_as(arg: str) -> tuple[str, ...]:
    """The reserved long flag TGI's launcher reads `arg` as (none if it is another flag).

    The launcher is clap (launcher/src/main.rs) without infer_long_args: a long flag matches only
    exactly, with dashes (`--num_shard` is an error), as `--flag=value` or `--flag value`. Its one
    reserved short is `-p` (port), which clap also reads as `-p8080`, `-p=8080` and after the
    switches `-e`, `-h`, `-V` in one cluster (`-ep8080`).
    """
    reserved = RESERVED_ARGS[Engine.TGI]
    if arg.startswith("--"):
        name = arg.split("=", 1)[0]
        return (name,) if name in reserved else ()
    cluster = arg[1:] if arg.startswith("-") else ""
    return ("--port",) if cluster.lstrip("ehV").startswith("p") else ()


def sglang_reads_as(arg: str) -> tuple[str, ...]:
    """The reserved long flags SGLang's parser may read `arg` as (none if it is another flag).

    `sglang.launch_server` builds a plain argparse parser (allow_abbrev on, no `_` rewriting):
    a long flag or alias matches exactly, or as an unambiguous prefix, with `=value` or not.
    """
    reserved = RESERVED_ARGS[Engine.SGLANG]
    if not arg.startswith("--"):
        return ()
    name = arg.split("=", 1)[0]
    name = SGLANG_ALIASES.get(name, name)
    if name in reserved:
        return (name,)
    if len(name) <= 2:
        return ()
    spellings = {**{flag: flag for flag in reserved}, **SGLANG_ALIASES}
    return tuple(sorted({flag for spelled, flag in spellings.items() if spelled.startswith(name)}))


def llamacpp_reads_as(arg: str) -> tuple[str, ...]:
    """The reserved flag llama-server's parser reads `arg` as (none if it is another flag).

    common/arg.cpp matches an argument only exactly against each option's names (no prefixes),
    and splits `--flag=value` at the `=`.
    """
    name = arg.split("=", 1)[0]
    name = LLAMACPP_ALIASES.get(name, name)
    return (name,) if name in RESERVED_ARGS[Engine.LLAMACPP] else ()


# How each engine's parser reads a flag: what extraArgs are checked against.
ENGINE_READS_AS = {
    Engine.VLLM: vllm_reads_as,
    Engine.TGI: tgi_reads_as,
    Engine.SGLANG: sglang_reads_as,
    Engine.LLAMACPP: llamacpp_reads_as,
}


class Model(BaseModel):
    """Shared configuration: camelCase on the wire, strict about unknown fields."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )


class SecretKeyRef(Model):
    name: Annotated[
        str, Field(min_length=1, max_length=253, description="Secret name, in the InferenceService's namespace.")
    ]
    key: Annotated[str, Field(min_length=1, description="Key within the Secret.")] = "token"


class ModelSource(Model):
    id: Annotated[
        str,
        Field(
            min_length=1,
            max_length=256,
            description="Model to serve: a Hugging Face repository id (org/name) or a path inside the image.",
            examples=["meta-llama/Llama-3.1-8B-Instruct"],
        ),
    ]
    revision: Annotated[
        str | None,
        Field(default=None, description="Model revision (branch, tag or commit). Unset means the repository default."),
    ] = None
    token_secret_ref: Annotated[
        SecretKeyRef | None,
        Field(
            default=None,
            description="Secret holding a Hugging Face token, passed to the engine as HF_TOKEN. Never inlined.",
        ),
    ] = None


class Toleration(Model):
    """A core/v1 Toleration, copied to the engine pods as given."""

    key: Annotated[str | None, Field(description="Taint key to tolerate; unset with Exists tolerates every taint.")] = (
        None
    )
    operator: Annotated[
        Literal["Exists", "Equal"] | None, Field(description="Exists, or Equal to `value` (Kubernetes default: Equal).")
    ] = None
    value: Annotated[str | None, Field(description="Taint value to match with Equal.")] = None
    effect: Annotated[
        Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None,
        Field(description="Taint effect to match; unset matches every effect."),
    ] = None
    toleration_seconds: Annotated[
        int | None, Field(description="With NoExecute: how long the pod stays bound after the taint appears.")
    ] = None


class Capabilities(Model):
    """Linux capabilities to add or drop (core/v1 Capabilities)."""

    add: Annotated[list[str] | None, Field(description="Capabilities to add.")] = None
    drop: Annotated[list[str] | None, Field(description='Capabilities to drop, e.g. ["ALL"].')] = None


class SeccompProfile(Model):
    """core/v1 SeccompProfile."""

    type: Annotated[
        Literal["RuntimeDefault", "Localhost", "Unconfined"],
        Field(description="RuntimeDefault (the container runtime's profile), Localhost or Unconfined."),
    ]
    localhost_profile: Annotated[
        str | None, Field(description="With Localhost: the profile's path relative to the kubelet's seccomp root.")
    ] = None


class SecurityContext(Model):
    """The engine container's security context (the core/v1 SecurityContext fields Pod Security checks).

    Unset, the pods meet Pod Security `baseline`. `restricted` also asks for runAsNonRoot,
    allowPrivilegeEscalation false, capabilities drop ALL and a RuntimeDefault seccomp profile;
    set them here where the engine image runs as a non-root user (docs/runbook.md, "Pod Security").
    """

    run_as_non_root: Annotated[
        bool | None, Field(description="Refuse to start the container as root (the image's user must not be 0).")
    ] = None
    run_as_user: Annotated[int | None, Field(ge=0, description="UID to run the engine as.")] = None
    run_as_group: Annotated[int | None, Field(ge=0, description="GID to run the engine as.")] = None
    allow_privilege_escalation: Annotated[
        bool | None, Field(description="Whether a process may gain more privileges than its parent (setuid).")
    ] = None
    read_only_root_filesystem: Annotated[
        bool | None, Field(description="Mount the root filesystem read-only (the engine must write only to volumes).")
    ] = None
    capabilities: Annotated[Capabilities | None, Field(description="Linux capabilities to add or drop.")] = None
    seccomp_profile: Annotated[SeccompProfile | None, Field(description="The seccomp profile to run under.")] = None


class ReplicaBounds(Model):
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "self.min <= self.max",
                    "message": "spec.replicas.min must be less than or equal to spec.replicas.max",
                }
            ]
        }
    )

    min: Annotated[
        int, Field(ge=0, le=1000, description="Fewest replicas, also while idle. 0 allows scale to zero.")
    ] = 1
    max: Annotated[int, Field(ge=1, le=1000, description="Most replicas the operator may run.")] = 4

    @model_validator(mode="after")
    def _min_not_above_max(self) -> ReplicaBounds:
        if self.min > self.max:
            raise ValueError(
                f"spec.replicas.min ({self.min}) must be less than or equal to spec.replicas.max "
                f"({self.max}): raise max or lower min"
            )
        return self


class ScaleUpBehavior(Model):
    stabilization_seconds: Annotated[
        int, Field(ge=0, le=3600, description="How long a higher recommendation must persist before scaling up.")
    ] = 0
    max_step_replicas: Annotated[int, Field(ge=1, le=100, description="Most replicas added in one step.")] = 4


class ScaleDownBehavior(Model):
    stabilization_seconds: Annotated[
        int,
        Field(
            ge=0,
            le=3600,
            description=(
                "Scale down only to the highest recommendation seen in this window. Replicas still starting that the"
                " demand no longer needs are stopped at once: they have served nothing."
            ),
        ),
    ] = 300
    max_step_replicas: Annotated[int, Field(ge=1, le=100, description="Most replicas removed in one step.")] = 1


# An object default of {} lets the API server fill in the nested defaults, so
# `kubectl get -o yaml` shows the values in force.
def _object_default(model: type[Model]) -> dict[str, Any]:
    # The full default object, not {}: the API server checks CEL rules against defaults
    # before filling in nested ones.
    return {"default": model().model_dump(mode="json", by_alias=True, exclude_none=True)}


class ScalingMode(StrEnum):
    AUTO = "Auto"
    MANUAL = "Manual"


class LoadBalancing(StrEnum):
    """How requests reach the replicas: it sets how much more a larger fleet serves per replica."""

    LEAST_REQUEST = "LeastRequest"
    RANDOM = "Random"


class ScalingTargets(Model):
    mode: Annotated[
        ScalingMode,
        Field(
            description=(
                "Auto: the operator sets the replicas. Manual: it keeps whatever count the Deployment has "
                "(set it with `kubectl scale deployment/<name> --replicas=N`) and only reports what it would do."
            )
        ),
    ] = ScalingMode.AUTO
    ttft_p95_seconds: Annotated[
        float,
        Field(gt=0, le=600, description="SLO: p95 time to first token, in seconds. Breaching it scales up."),
    ] = 1.0
    queue_depth_per_replica: Annotated[
        float,
        Field(gt=0, le=10000, description="Target number of waiting requests per ready replica."),
    ] = 4.0
    gpu_utilization_percent: Annotated[
        int,
        Field(
            ge=1,
            le=100,
            description=(
                "GPU utilisation (DCGM) in percent that the `hpa-gpu-util` baseline of `loadgen simulate` aims for. "
                "The operator's policy does not use it: a continuous-batching engine keeps a GPU near 100% busy at "
                "any load. Utilisation is reported in status.signals."
            ),
        ),
    ] = 80
    load_balancing: Annotated[
        LoadBalancing,
        Field(
            description=(
                "How requests reach the replicas. LeastRequest: each goes to the replica with the fewest in flight "
                "(an LLM gateway such as llm-d's inference gateway, Envoy's least_request, KubeAI's proxy, IPVS "
                "`lc`): replicas pool their seats, so a larger fleet serves more per replica, and the operator sizes "
                "it so (square-root staffing). Random: kube-proxy's iptables mode or round robin: each replica "
                "queues alone and serves the same per replica in any fleet."
            )
        ),
    ] = LoadBalancing.LEAST_REQUEST
    replica_requests_per_second: Annotated[
        float | None,
        Field(
            gt=0,
            le=100000,
            description=(
                "Requests per second one replica serves within the SLO on this service's traffic, e.g. the "
                "throughput at the knee `loadgen knee` reports. A starting point: the operator refines it from the "
                "service's own signals and keeps what it learnt in status.autoscaler. Unset: learnt from scratch."
            ),
        ),
    ] = None
    scale_up: Annotated[
        ScaleUpBehavior,
        Field(
            default_factory=ScaleUpBehavior,
            description="Scale-up behaviour: fast.",
            json_schema_extra=_object_default(ScaleUpBehavior),
        ),
    ]
    scale_down: Annotated[
        ScaleDownBehavior,
        Field(
            default_factory=ScaleDownBehavior,
            description="Scale-down behaviour: slow.",
            json_schema_extra=_object_default(ScaleDownBehavior),
        ),
    ]


_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$")


class InferenceServiceSpec(Model):
    engine: Annotated[
        Engine, Field(description="Serving engine: vllm, tgi, sglang or llamacpp (llama.cpp's llama-server).")
    ] = Engine.VLLM
    model: Annotated[ModelSource, Field(description="What to serve.")]
    image: Annotated[
        str | None, Field(default=None, description="Engine image. Unset means the pinned default for the engine.")
    ] = None
    gpus_per_replica: Annotated[
        int,
        Field(
            ge=0,
            le=8,
            description=(
                "GPUs per replica (nvidia.com/gpu); the model is sharded across them. 0 (llamacpp only) runs on "
                "CPUs with no GPU request."
            ),
        ),
    ] = 1
    node_selector: Annotated[dict[str, str], Field(default_factory=dict, description="Node selector for engine pods.")]
    tolerations: Annotated[list[Toleration], Field(default_factory=list, description="Tolerations for engine pods.")]
    security_context: Annotated[
        SecurityContext | None,
        Field(description="The engine container's security context; unset meets Pod Security baseline."),
    ] = None
    max_concurrency: Annotated[
        int,
        Field(
            ge=1,
            le=4096,
            description=(
                "Per-replica concurrency ceiling, pinned at the replica's latency knee (vLLM --max-num-seqs, "
                "TGI --max-concurrent-requests, SGLang --max-running-requests, llama.cpp --parallel). The operator "
                "never raises it: capacity comes from replicas."
            ),
        ),
    ] = 16
    max_model_len: Annotated[
        int,
        Field(
            ge=128,
            le=1_048_576,
            description=(
                "Longest prompt plus output, in tokens (vLLM --max-model-len, TGI --max-total-tokens, SGLang "
                "--context-length, llama.cpp --ctx-size per slot)."
            ),
        ),
    ] = 8192
    extra_args: Annotated[
        list[str], Field(default_factory=list, description="Further engine arguments, appended verbatim.")
    ]
    shared_memory: Annotated[
        str,
        Field(pattern=_QUANTITY.pattern, description="Size of the /dev/shm volume (tensor-parallel workers share it)."),
    ] = "8Gi"
    replicas: Annotated[
        ReplicaBounds,
        Field(
            default_factory=ReplicaBounds,
            description="Replica bounds.",
            json_schema_extra=_object_default(ReplicaBounds),
        ),
    ]
    scaling: Annotated[
        ScalingTargets,
        Field(
            default_factory=ScalingTargets,
            description="Scaling targets and behaviour.",
            json_schema_extra=_object_default(ScalingTargets),
        ),
    ]
    cold_start_seconds: Annotated[
        int,
        Field(
            ge=1, le=3600, description="Expected time from pod start to ready (model load). Sizes the startup probe."
        ),
    ] = 300
    drain_seconds: Annotated[
        int,
        Field(ge=0, le=3600, description="Time a terminating replica gets to finish in-flight requests."),
    ] = 120

    @model_validator(mode="after")
    def _no_reserved_args(self) -> InferenceServiceSpec:
        reserved = RESERVED_ARGS[self.engine]
        for index, arg in enumerate(self.extra_args):
            flags = ENGINE_READS_AS[self.engine](arg)
            if not flags:
                continue
            if len(flags) > 1:
                owners = ", ".join(f"{flag} (from {reserved[flag] or 'the operator itself'})" for flag in flags)
                raise ValueError(
                    f"spec.extraArgs[{index}] sets {arg!r}, an abbreviation of {owners}, which the operator sets: "
                    "remove it from spec.extraArgs and set the field of the flag you meant instead"
                )
            (flag,) = flags
            owner = reserved[flag]
            written = arg.split("=", 1)[0]
            spelled = "" if written == flag else f" (as {arg!r}, which {self.engine.value} reads as {flag})"
            fix = f"remove it from spec.extraArgs and set {owner} instead" if owner else "remove it from spec.extraArgs"
            where = f"the operator sets it from {owner}" if owner else "the operator sets it itself"
            raise ValueError(f"spec.extraArgs[{index}] sets {flag}{spelled}, but {where}: {fix}")
        return self

    @model_validator(mode="after")
    def _engine_fits(self) -> InferenceServiceSpec:
        if self.gpus_per_replica == 0 and self.engine not in CPU_ENGINES:
            cpu = ", ".join(sorted(e.value for e in CPU_ENGINES))
            raise ValueError(
                f"spec.gpusPerReplica is 0, but {self.engine.value} needs a GPU: set it to 1 or more, or use an "
                f"engine that runs on CPUs ({cpu})"
            )
        if self.engine is Engine.LLAMACPP and self.model.revision:
            raise ValueError(
                f"spec.model.revision is {self.model.revision!r}, but llama-server has no revision flag: remove it "
                "and name the GGUF in spec.model.id (a Hugging Face repo, optionally with :quant, or a .gguf path)"
            )
        return self

    @property
    def engine_image(self) -> str:
        return self.image or DEFAULT_IMAGES[self.engine]


class ObjectMeta(BaseModel):
    """The part of metadata the operator reads."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    name: str
    namespace: str = "default"
    uid: str = ""
    generation: int = 0
    creation_timestamp: Annotated[AwareDatetime | None, Field(alias="creationTimestamp")] = None


class InferenceService(BaseModel):
    """A whole InferenceService object, as the API server returns it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    metadata: ObjectMeta
    spec: InferenceServiceSpec


# --- status -------------------------------------------------------------------------


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(Model):
    """A Kubernetes-style condition (type, status, reason, message, lastTransitionTime)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    type: Annotated[str, Field(description="What the condition is about, e.g. Ready (docs/runbook.md lists them).")]
    status: Annotated[ConditionStatus, Field(description="True, False or Unknown.")]
    reason: Annotated[
        str,
        Field(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$", description="Why, as one CamelCase word."),
    ]
    message: Annotated[str, Field(description="Why, in a sentence with the numbers and, on failure, the fix.")] = ""
    last_transition_time: Annotated[datetime, Field(description="When the status last changed (not the reason).")]
    observed_generation: Annotated[
        int | None, Field(description="The metadata.generation the condition was set for (Reconciled only).")
    ] = None


class Signals(Model):
    """What the operator last observed for the service (filled by the scaling tick)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    ttft_p95_seconds: Annotated[
        float | None, Field(description="p95 time to first token over the operator's TTFT window, in seconds.")
    ] = None
    ttft_derived: Annotated[
        bool | None, Field(description="True when TTFT is derived (TGI exports no TTFT histogram).")
    ] = None
    ttft_exported: Annotated[
        bool | None,
        Field(
            description=(
                "False when the engine exports no TTFT at all (llama.cpp): replicas then follow queue depth and "
                "busy slots, and the TTFT SLO is not checked."
            )
        ),
    ] = None
    queue_depth: Annotated[float | None, Field(description="Requests waiting, summed over replicas.")] = None
    running_requests: Annotated[float | None, Field(description="Requests running, summed over replicas.")] = None
    kv_cache_usage: Annotated[float | None, Field(description="KV-cache usage, 0..1, mean over replicas (vLLM).")] = (
        None
    )
    gpu_utilization_percent: Annotated[
        float | None, Field(description="DCGM GPU utilisation, 0..100, mean over the service's GPUs.")
    ] = None
    request_rate: Annotated[float | None, Field(description="Requests finished per second.")] = None
    queue_time_seconds: Annotated[
        float | None,
        Field(description="Mean time a request waited in the engine's queue before its prefill, in seconds."),
    ] = None
    prefill_time_seconds: Annotated[
        float | None,
        Field(description="Mean prefill time (scheduling to first token), in seconds; per prefill batch on TGI."),
    ] = None
    prefill_p95_seconds: Annotated[
        float | None, Field(description="p95 prefill time over the operator's TTFT window, in seconds.")
    ] = None
    observed_at: Annotated[datetime | None, Field(description="When the tick's queries were evaluated.")] = None


class LastDecision(Model):
    """The scaling policy's latest decision (in Manual mode: what Auto would do, in the message)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    replicas: Annotated[int, Field(description="Replicas decided on.")]
    reason: Annotated[str, Field(description="The policy's reason, e.g. SLOBreached (docs/runbook.md lists them).")]
    message: Annotated[str, Field(description="The numbers behind the decision, in one sentence.")]
    time: Annotated[
        datetime, Field(description="When it was recorded: its reason or message changed, or the operator scaled.")
    ]


class InferenceServiceStatus(Model):
    model_config = ConfigDict(frozen=True, extra="ignore")

    observed_generation: Annotated[
        int | None, Field(description="The metadata.generation last applied to the children.")
    ] = None
    replicas: Annotated[int | None, Field(description="Replicas the Deployment has.")] = None
    ready_replicas: Annotated[int | None, Field(description="Replicas ready to serve.")] = None
    desired_replicas: Annotated[int | None, Field(description="Replicas the operator wants.")] = None
    deployment_name: Annotated[str | None, Field(description="The engine Deployment (and Service) name.")] = None
    endpoint: Annotated[str | None, Field(description="In-cluster OpenAI-compatible base URL.")] = None
    signals: Annotated[
        Signals | None, Field(description="What the scaling tick last read from Prometheus for this service.")
    ] = None
    last_decision: LastDecision | None = None
    last_scale_time: Annotated[datetime | None, Field(description="When the operator last changed the replicas.")] = (
        None
    )
    autoscaler: Annotated[
        dict[str, Any] | None,
        Field(
            description="The scaling policy's memory (recommendation windows), so a restart resumes without a flap.",
            json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
        ),
    ] = None
    conditions: Annotated[
        list[Condition],
        Field(
            default_factory=list,
            description="Reconciled, Ready, MetricsAvailable, ScalingLimited, ReplicasOverridden: see docs/runbook.md.",
            json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
        ),
    ]


def field_path(loc: tuple[int | str, ...], root: str = "spec") -> str:
    """Turn a pydantic error location into a manifest path, e.g. spec.replicas.min."""
    path = root
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def describe_validation_error(error: ValidationError, root: str = "spec") -> str:
    """One line per problem, each naming the field and the value seen."""
    lines = []
    for problem in error.errors():
        where = field_path(tuple(problem["loc"]), root)
        message = problem["msg"].removeprefix("Value error, ")
        if message.startswith("spec."):
            lines.append(message)
        elif "input" in problem and problem["type"] not in ("missing",):
            lines.append(f"{where}: {message} (got {problem['input']!r})")
        else:
            lines.append(f"{where}: {message}")
    return "; ".join(lines)


_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
NAME_RULE = "self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')"
NAME_RULE_MESSAGE = (
    "metadata.name must be a DNS label (lowercase letters, digits and '-', starting with a letter, "
    "at most 63 characters): it names the engine's Service"
)


def parse_name(name: str) -> str:
    """The name becomes the Service's name, so it must be a DNS-1035 label."""
    if len(name) > 63 or not _DNS_LABEL.match(name):
        raise InvalidSpec(f"{NAME_RULE_MESSAGE}; got {name!r}")
    return name


def parse_spec(spec: dict[str, Any]) -> InferenceServiceSpec:
    """Validate a raw spec; raises InvalidSpec with a message naming each bad field."""
    try:
        return InferenceServiceSpec.model_validate(spec)
    except ValidationError as error:
        raise InvalidSpec(describe_validation_error(error)) from error


class InvalidSpec(ValueError):
    """The InferenceService spec cannot work; the message names the field and the fix."""
