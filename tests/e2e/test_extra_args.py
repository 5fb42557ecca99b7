"""The pinned ceiling cannot be raised from the spec, through the real API server: each spelling the
engine's own parser reads as a reserved flag (vLLM: `_` for `-`, `=value`, unambiguous prefixes; TGI:
clap's `--flag=value` and `--flag value`) makes the InferenceService Reconciled=False InvalidSpec,
with a Warning Event, both naming `spec.extraArgs[i]` and the fix; no Deployment ever carries it,
and an edited service keeps the Deployment it had."""

from __future__ import annotations

import json
from typing import Any

from harness.processes import wait_for

from tests.e2e.conftest import Operator, condition, get_json, kubectl

# (engine, extraArgs, the entry refused, the reserved flag, the spec field to set instead)
SPELLINGS = [
    ("vllm", ["--max_num_seqs=999"], 0, "--max-num-seqs", "spec.maxConcurrency"),
    ("vllm", ["--dtype", "half", "--max-num-seq", "999"], 2, "--max-num-seqs", "spec.maxConcurrency"),
    ("vllm", ["--max-num-s=999"], 0, "--max-num-seqs", "spec.maxConcurrency"),
    ("vllm", ["--max_model_len", "999999"], 0, "--max-model-len", "spec.maxModelLen"),
    ("tgi", ["--max-concurrent-requests=999"], 0, "--max-concurrent-requests", "spec.maxConcurrency"),
    ("tgi", ["--max-concurrent-requests", "999"], 0, "--max-concurrent-requests", "spec.maxConcurrency"),
]


def _manifest(name: str, engine: str, extra_args: list[str] | None = None) -> str:
    spec: dict[str, Any] = {"engine": engine, "model": {"id": "test-model"}, "maxConcurrency": 16}
    if extra_args is not None:
        spec["extraArgs"] = extra_args
    isvc = {
        "apiVersion": "inferscale.io/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": spec,
    }
    return json.dumps(isvc)


def _refused(namespace: str, name: str) -> dict[str, Any]:
    return wait_for(
        f"{name} Reconciled=False InvalidSpec",
        lambda: (c := condition(get_json("-n", namespace, "inferenceservice", name), "Reconciled"))
        and c.get("reason") == "InvalidSpec" and c,
        timeout=30,
    )  # fmt: skip


def _events(namespace: str, name: str) -> list[str]:
    items = get_json("-n", namespace, "events", "--field-selector", f"involvedObject.name={name},reason=InvalidSpec")
    return [e["message"] for e in items["items"]]


def test_every_spelling_of_a_reserved_flag_is_refused_naming_the_entry_and_the_fix(
    operator: Operator, namespace: str
) -> None:
    names = [f"args-{i}" for i in range(len(SPELLINGS))]
    for name, (engine, args, *_) in zip(names, SPELLINGS, strict=True):
        kubectl("-n", namespace, "apply", "-f", "-", stdin=_manifest(name, engine, args))
    for name, (_, args, index, flag, field) in zip(names, SPELLINGS, strict=True):
        refused = _refused(namespace, name)
        assert refused["status"] == "False"
        message = refused["message"]
        assert message.startswith(f"spec.extraArgs[{index}] sets "), message
        assert flag in message and f"set {field}" in message and "remove it from spec.extraArgs" in message, message
        if not args[index].startswith(f"{flag}=") and args[index] != flag:
            assert repr(args[index]) in message, message  # which entry was read as the flag
        events = wait_for(f"an InvalidSpec Event on {name}", lambda n=name: _events(namespace, n), timeout=10)
        assert any(f"spec.extraArgs[{index}]" in e for e in events), events
    assert get_json("-n", namespace, "deployments")["items"] == []


def test_an_edit_that_raises_the_ceiling_is_refused_and_the_deployment_keeps_its_args(
    operator: Operator, namespace: str
) -> None:
    kubectl("-n", namespace, "apply", "-f", "-", stdin=_manifest("chat", "vllm"))
    wait_for(
        "Reconciled=True",
        lambda: condition(get_json("-n", namespace, "inferenceservice", "chat"), "Reconciled").get("status") == "True",
        timeout=30,
    )
    before = get_json("-n", namespace, "deployment", "chat")
    kubectl("-n", namespace, "apply", "-f", "-", stdin=_manifest("chat", "vllm", ["--max_num_seqs", "999"]))
    assert "spec.extraArgs[0] sets --max-num-seqs" in _refused(namespace, "chat")["message"]
    after = get_json("-n", namespace, "deployment", "chat")
    [container] = after["spec"]["template"]["spec"]["containers"]
    assert not any("999" in arg or "max_num_seqs" in arg for arg in container["args"]), container["args"]
    assert container["args"][container["args"].index("--max-num-seqs") + 1] == "16"
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
