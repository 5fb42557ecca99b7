"""The InferenceService models: defaults that make a five-line manifest work, and bad
input that gets a message naming the field and the fix."""

import pytest
from inferscale.api import DEFAULT_IMAGES, Engine, InvalidSpec, parse_name, parse_spec


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
        ({"model": {"id": "m"}, "engine": "triton"}, "spec.engine: Input should be 'vllm' or 'tgi' (got 'triton')"),
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
    ],
)
def test_bad_input_names_the_field(spec: dict[str, object], expected: str) -> None:
    with pytest.raises(InvalidSpec) as error:
        parse_spec(spec)
    assert expected in str(error.value)


@pytest.mark.parametrize(
    ("engine", "arg", "owner"),
    [
        ("vllm", "--max-num-seqs=256", "spec.maxConcurrency"),
        ("vllm", "--max-model-len", "spec.maxModelLen"),
        ("tgi", "--max-concurrent-requests=512", "spec.maxConcurrency"),
        ("tgi", "--num-shard", "spec.gpusPerReplica"),
    ],
)
def test_extra_args_cannot_override_the_pinned_ceiling(engine: str, arg: str, owner: str) -> None:
    with pytest.raises(InvalidSpec) as error:
        parse_spec({"engine": engine, "model": {"id": "m"}, "extraArgs": ["--dtype", "bfloat16", arg]})
    message = str(error.value)
    assert message.startswith("spec.extraArgs[2] sets ")
    assert f"set {owner} instead" in message


def test_extra_args_of_the_other_engine_are_passed_through() -> None:
    # --max-num-seqs means nothing to TGI; only the flags each engine really owns are refused.
    spec = parse_spec({"engine": "tgi", "model": {"id": "m"}, "extraArgs": ["--max-num-seqs=4"]})
    assert spec.extra_args == ["--max-num-seqs=4"]


@pytest.mark.parametrize("name", ["Llama", "7b", "a" * 64, "my_model", "x-"])
def test_names_that_cannot_name_a_service_are_refused(name: str) -> None:
    with pytest.raises(InvalidSpec, match=r"metadata\.name must be a DNS label"):
        parse_name(name)


def test_good_name() -> None:
    assert parse_name("llama-3-8b") == "llama-3-8b"
