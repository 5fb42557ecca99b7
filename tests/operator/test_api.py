"""The InferenceService models: defaults that make a five-line manifest work, and bad
input that gets a message naming the field and the fix."""

import pytest
from inferscale.api import (
    DEFAULT_IMAGES,
    LLAMACPP_ALIASES,
    RESERVED_ARGS,
    SGLANG_ALIASES,
    Engine,
    InvalidSpec,
    parse_name,
    parse_spec,
)


def test_five_line_manifest_gets_documented_defaults() -> None:
    spec = parse_spec({"model": {"id": "meta-llama/Llama-3.1-8B-Instruct"}})

    assert spec.engine is Engine.VLLM
    assert spec.engine_image == DEFAULT_IMAGES[Engine.VLLM]
    assert spec.gpus_per_replica == 1
    assert spec.max_concurrency == 16
    assert (spec.replicas.min, spec.replicas.max) == (1, 4)
    assert spec.scaling.ttft_p95_seconds == 1.0
    assert spec.scaling.scale_up.stabilization_seconds == 0
    assert spec.scaling.scale_down.stabilization_seconds == 300
    assert spec.scaling.scale_down.max_step_replicas == 1


def test_camel_case_fields_from_a_manifest() -> None:
    spec = parse_spec(
        {
            "engine": "tgi",
            "model": {"id": "m", "tokenSecretRef": {"name": "hf"}},
            "gpusPerReplica": 2,
            "maxConcurrency": 8,
            "scaling": {"ttftP95Seconds": 0.5, "scaleDown": {"stabilizationSeconds": 600}},
        }
    )
    assert spec.engine is Engine.TGI
    assert spec.model.token_secret_ref is not None
    assert spec.model.token_secret_ref.key == "token"
    assert spec.gpus_per_replica == 2
    assert spec.scaling.scale_down.stabilization_seconds == 600
    assert spec.scaling.scale_down.max_step_replicas == 1  # nested default kept


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, "spec.model: Field required"),
        (
            {"model": {"id": "m"}, "engine": "triton"},
            "spec.engine: Input should be 'vllm', 'tgi', 'sglang' or 'llamacpp' (got 'triton')",
        ),
        (
            {"model": {"id": "m"}, "maxConcurrency": 0},
            "spec.maxConcurrency: Input should be greater than or equal to 1",
        ),
        ({"model": {"id": "m"}, "replicas": {"min": 5, "max": 2}}, "spec.replicas.min (5) must be less than or equal"),
        (
            {"model": {"id": "m"}, "scaling": {"ttftP95Seconds": 0}},
            "spec.scaling.ttftP95Seconds: Input should be greater than 0",
        ),
        ({"model": {"id": "m"}, "sharedMemory": "lots"}, "spec.sharedMemory: String should match pattern"),
        ({"model": {"id": "m"}, "gpus": 1}, "spec.gpus: Extra inputs are not permitted"),
        ({"model": {"id": "m"}, "tolerations": [{"effect": "Sometimes"}]}, "spec.tolerations[0].effect"),
        ({"model": {"id": "m"}, "securityContext": {"privileged": True}}, "spec.securityContext.privileged: Extra"),
        (
            {"model": {"id": "m"}, "securityContext": {"seccompProfile": {"type": "Custom"}}},
            "spec.securityContext.seccompProfile.type",
        ),
    ],
)
def test_bad_input_names_the_field(spec: dict[str, object], expected: str) -> None:
    with pytest.raises(InvalidSpec) as error:
        parse_spec(spec)
    assert expected in str(error.value)


def _vllm_spellings(flag: str) -> list[str]:
    """Every way vLLM's parser lets extraArgs say `flag`: underscores, `=value`, unambiguous prefixes."""
    names = {flag[:end] for end in range(3, len(flag) + 1)}  # "--m" up to the whole flag
    names |= {"--" + name[2:].replace("-", "_") for name in names}
    return sorted(names | {f"{name}=999" for name in names})


_SPELLINGS = [
    *[("vllm", flag, spelling) for flag in RESERVED_ARGS[Engine.VLLM] for spelling in _vllm_spellings(flag)],
    *[("vllm", "--tensor-parallel-size", spelling) for spelling in ["-tp", "-tp=2", "-t"]],
    *[("tgi", flag, spelling) for flag in RESERVED_ARGS[Engine.TGI] for spelling in [flag, f"{flag}=999"]],
    *[("tgi", "--port", spelling) for spelling in ["-p", "-p8080", "-p=8080", "-ep8080", "-ep"]],
    *[
        ("sglang", flag, spelling)
        for flag in RESERVED_ARGS[Engine.SGLANG]
        for spelling in [flag[:end] for end in range(len(flag) - 3, len(flag) + 1)] + [f"{flag}=999"]
    ],
    *[("sglang", flag, spelling) for spelling, flag in SGLANG_ALIASES.items()],
    *[("llamacpp", flag, spelling) for flag in RESERVED_ARGS[Engine.LLAMACPP] for spelling in [flag, f"{flag}=999"]],
    *[("llamacpp", flag, spelling) for spelling, flag in LLAMACPP_ALIASES.items()],
]


@pytest.mark.parametrize(("engine", "flag", "spelling"), _SPELLINGS)
def test_extra_args_cannot_set_a_reserved_flag_in_any_spelling_the_engine_accepts(
    engine: str, flag: str, spelling: str
) -> None:
    # A separate value ("--max-num-seqs", "999") is the same first entry as the bare flag.
    with pytest.raises(InvalidSpec) as error:
        parse_spec({"engine": engine, "model": {"id": "m"}, "extraArgs": ["--dtype", "bfloat16", spelling, "999"]})
    message = str(error.value)
    assert message.startswith("spec.extraArgs[2] sets ")
    assert flag in message
    assert (RESERVED_ARGS[Engine(engine)][flag] or "the operator") in message  # who owns the setting
    assert "remove it from spec.extraArgs" in message
    if spelling.split("=", 1)[0] != flag:
        assert repr(spelling) in message  # the user sees which entry was read as the flag


def test_the_issue_spellings_of_the_ceiling_are_refused() -> None:
    for spelling in ["--max_num_seqs=999", "--max-num-seq=999"]:
        with pytest.raises(InvalidSpec, match=r"spec\.extraArgs\[0\] sets --max-num-seqs .*set spec\.maxConcurrency"):
            parse_spec({"engine": "vllm", "model": {"id": "m"}, "extraArgs": [spelling]})


@pytest.mark.parametrize(
    ("engine", "arg"),
    [
        # Real flags that share a prefix with a reserved one, but are not a prefix of it.
        ("vllm", "--max-num-batched-tokens=8192"),
        ("vllm", "--max_num_batched_tokens=8192"),
        ("vllm", "--max-num-partial-prefills=2"),
        ("vllm", "--model-loader-extra-config={}"),
        ("vllm", "--model-impl=vllm"),
        ("vllm", "--tokenizer-revision=main"),
        ("vllm", "--pipeline-parallel-size=2"),
        ("vllm", "-pp"),
        ("vllm", "--max-num-seqs.x=4"),  # a dotted JSON key: vLLM fails on it, it does not raise the ceiling
        ("tgi", "--max-client-batch-size=8"),
        ("tgi", "--max-batch-total-tokens=100000"),
        ("tgi", "--master-port=29501"),
        ("tgi", "--sharded=false"),
        ("tgi", "-e"),
        # clap has no underscore rewriting and no prefix matching: TGI refuses these itself.
        ("tgi", "--max_concurrent_requests=999"),
        ("tgi", "--max-concurrent=999"),
        ("sglang", "--mem-fraction-static=0.85"),
        ("sglang", "--chunked-prefill-size=4096"),
        # llama.cpp's parser matches names exactly: these are its own, not reserved ones.
        ("llamacpp", "--threads=8"),
        ("llamacpp", "--parallel-x"),
        ("llamacpp", "-t"),
    ],
)
def test_flags_that_only_share_a_prefix_with_a_reserved_flag_are_passed_through(engine: str, arg: str) -> None:
    spec = parse_spec({"engine": engine, "model": {"id": "m"}, "extraArgs": [arg]})
    assert spec.extra_args == [arg]


def test_extra_args_of_the_other_engine_are_passed_through() -> None:
    # --max-num-seqs means nothing to TGI; only the flags each engine really owns are refused.
    spec = parse_spec({"engine": "tgi", "model": {"id": "m"}, "extraArgs": ["--max-num-seqs=4"]})
    assert spec.extra_args == ["--max-num-seqs=4"]


def test_only_llamacpp_runs_without_a_gpu() -> None:
    assert parse_spec({"engine": "llamacpp", "model": {"id": "org/m-GGUF"}, "gpusPerReplica": 0}).gpus_per_replica == 0
    with pytest.raises(InvalidSpec, match=r"spec\.gpusPerReplica is 0, but vllm needs a GPU: set it to 1 or more"):
        parse_spec({"engine": "vllm", "model": {"id": "m"}, "gpusPerReplica": 0})


def test_llamacpp_refuses_a_revision_it_has_no_flag_for() -> None:
    with pytest.raises(InvalidSpec, match=r"spec\.model\.revision is 'v2', but llama-server has no revision flag"):
        parse_spec({"engine": "llamacpp", "model": {"id": "org/m-GGUF", "revision": "v2"}})


@pytest.mark.parametrize("name", ["Llama", "7b", "a" * 64, "my_model", "x-"])
def test_names_that_cannot_name_a_service_are_refused(name: str) -> None:
    with pytest.raises(InvalidSpec, match=r"metadata\.name must be a DNS label"):
        parse_name(name)


def test_good_name() -> None:
    assert parse_name("llama-3-8b") == "llama-3-8b"
