"""Bad input through the real API server: hypothesis mutates a valid InferenceService many ways
(wrong types, out-of-range numbers, unknown fields, odd strings, names that are not DNS names)
and sends each one. Every object is either refused with a message naming the field, or accepted
and handled by the operator (Reconciled, True or False with the reason). The operator never
crashes, and a service applied before the storm keeps being served throughout.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from typing import Any

from harness.processes import wait_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client, config

from tests.e2e.conftest import Operator, condition, get_json, kubectl

GROUP, VERSION, PLURAL = "inferscale.io", "v1alpha1", "inferenceservices"

VALID = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "InferenceService",
    "metadata": {"name": "fuzz"},
    "spec": {
        "model": {"id": "test-model"},
        "maxConcurrency": 4,
        "replicas": {"min": 1, "max": 2},
        "scaling": {"ttftP95Seconds": 2.0, "scaleDown": {"stabilizationSeconds": 30}},
    },
}

# Every field of the spec (docs/reference.md) and a few that do not exist.
PATHS = [
    "spec",
    "spec.engine",
    "spec.model",
    "spec.model.id",
    "spec.model.revision",
    "spec.model.tokenSecretRef",
    "spec.model.tokenSecretRef.key",
    "spec.image",
    "spec.gpusPerReplica",
    "spec.nodeSelector",
    "spec.tolerations",
    "spec.maxConcurrency",
    "spec.maxModelLen",
    "spec.extraArgs",
    "spec.sharedMemory",
    "spec.replicas",
    "spec.replicas.min",
    "spec.replicas.max",
    "spec.scaling",
    "spec.scaling.mode",
    "spec.scaling.ttftP95Seconds",
    "spec.scaling.queueDepthPerReplica",
    "spec.scaling.gpuUtilizationPercent",
    "spec.scaling.scaleUp.stabilizationSeconds",
    "spec.scaling.scaleUp.maxStepReplicas",
    "spec.scaling.scaleDown.stabilizationSeconds",
    "spec.scaling.scaleDown.maxStepReplicas",
    "spec.coldStartSeconds",
    "spec.drainSeconds",
    "spec.unknownField",
    "spec.scaling.bogus",
]

# Values near the edges of what the schema allows, and the kinds of thing people mistype.
NUMBERS = [0, -1, 1, 8, 9, 1000, 1001, 2**31, 2**62, 0.0, 1e-9, 0.5, 1e308, -0.0]
STRINGS = ["", "x", "A_B", "a" * 300, "Auto", "Manual", "manual", "vllm", "tgi", "TGI", "1Gi", "-1Gi", "ümlaut", "a b"]
STRUCTURES = [
    ["--port", "1"],
    ["--max-num-seqs", "9"],
    ["--dtype", "half"],
    [1, 2],
    {"min": 3, "max": 1},
    {"a/b": "c"},
    {"bad key!": "v"},
    {"nvidia.com/gpu.present": "true"},
    [{"key": "k", "operator": "Nope"}],
    {},
    [],
]
EDGES = st.sampled_from([*NUMBERS, *STRINGS, *STRUCTURES, None, True, False])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**62), 2**62) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=6,
)  # fmt: skip
# The name is a string in any manifest (a number there is kubectl's error, not ours): odd strings only.
NAMES = st.tuples(st.just("metadata.name"), st.sampled_from(STRINGS) | st.text(max_size=70))
MUTATIONS = st.lists(st.tuples(st.sampled_from(PATHS), EDGES | JSON) | NAMES, min_size=1, max_size=3)

# A field path as the API server writes it in a message: spec.scaling.scaleDown.maxStepReplicas,
# spec.tolerations[0].operator, metadata.name.
FIELD_IN_MESSAGE = re.compile(r"\b(?:spec|metadata)(?:\.[A-Za-z0-9_]+|\[\d+\])*")


def mutated(name: str, mutations: list[tuple[str, Any]]) -> dict[str, Any]:
    manifest = copy.deepcopy(VALID)
    manifest["metadata"]["name"] = name
    for path, value in mutations:
        *parents, leaf = path.split(".")
        node = manifest
        for key in parents:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        node[leaf] = copy.deepcopy(value)  # sampled values are shared between examples
    return manifest


def names_a_mutated_field(message: str, mutations: list[tuple[str, Any]]) -> bool:
    """The refusal names a field we touched, one inside or above it (spec.model: {} -> spec.model.id),
    or a sibling the change left out (tokenSecretRef.key alone -> spec.model.tokenSecretRef.name)."""
    roots = ("spec", "metadata")
    named = {re.sub(r"\[\d+\]", "", found) for found in FIELD_IN_MESSAGE.findall(message)}

    def related(name: str, touched: str) -> bool:
        parent = touched.rpartition(".")[0]
        return (
            name.startswith(touched)
            or (touched.startswith(name) and name not in roots)
            or (parent not in roots and name.startswith(f"{parent}."))
        )

    return any(related(name, touched) for name in named for touched, _ in mutations)


def test_generated_inference_services_are_refused_clearly_or_handled_and_nothing_else_suffers(
    operator: Operator, namespace: str
) -> None:
    kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(mutated("canary", [])))
    wait_for("the canary's Deployment", lambda: get_json("-n", namespace, "deployment", "canary"), timeout=60)

    api = client.CustomObjectsApi(config.new_client_from_config())
    counter = itertools.count()
    refused: list[tuple[list[tuple[str, Any]], str]] = []
    accepted: dict[str, list[tuple[str, Any]]] = {}

    @settings(
        max_examples=200,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(MUTATIONS)
    def send(mutations: list[tuple[str, Any]]) -> None:
        manifest = mutated(f"fuzz-{next(counter)}", mutations)
        try:
            created = api.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, manifest, field_validation="Strict"
            )
        except client.ApiException as error:
            message = json.loads(error.body)["message"]
            if error.status == 409:  # a generated name met an earlier one
                assert "already exists" in message, message
                return
            assert error.status in (400, 422), f"unexpected {error.status} for {manifest}: {error.body}"
            assert names_a_mutated_field(message, mutations), f"{message!r} does not name a field of {mutations}"
            refused.append((mutations, message))
        else:
            accepted[created["metadata"]["name"]] = mutations

    send()
    assert refused and accepted, f"{len(refused)} refused, {len(accepted)} accepted: the generator is too narrow"

    # Every accepted object is handled: a Reconciled condition for its generation, True or False.
    def unhandled() -> list[str]:
        items = get_json("-n", namespace, "inferenceservices")["items"]
        pending = []
        for item in items:
            reconciled = condition(item, "Reconciled")
            if item["metadata"]["name"] in accepted and reconciled.get("observedGeneration") != 1:
                pending.append(item["metadata"]["name"])
        return pending

    wait_for("the operator to handle every accepted object", lambda: not unhandled(), timeout=120, interval=2)
    outcomes: dict[str, list[str]] = {}
    for item in get_json("-n", namespace, "inferenceservices")["items"]:
        if item["metadata"]["name"] in accepted:
            reconciled = condition(item, "Reconciled")
            outcomes.setdefault(f"{reconciled['status']}/{reconciled['reason']}", []).append(item["metadata"]["name"])
            if reconciled["status"] == "False":
                assert reconciled["message"], item
    summary = {"refused": len(refused), "accepted": {key: len(names) for key, names in outcomes.items()}}
    print(f"bad input: {json.dumps(summary)}")  # shown with -s: what the generator reached

    # The operator is alive and the canary is still served: a change to it still rolls out.
    assert operator.process is not None and operator.process.poll() is None, "the operator died"
    kubectl(
        "-n", namespace, "patch", "inferenceservice", "canary", "--type=merge", "-p", '{"spec":{"maxConcurrency":6}}'
    )

    def rolled_out() -> bool:
        args = get_json("-n", namespace, "deployment", "canary")["spec"]["template"]["spec"]["containers"][0]["args"]
        return args[args.index("--max-num-seqs") + 1] == "6"

    wait_for("the canary's change to roll out", rolled_out, timeout=60)
    assert "Traceback" not in operator.log_text()
