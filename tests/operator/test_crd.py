"""The CRD in crds/ (and the Helm chart's copy) is generated from the models and must be current."""

from pathlib import Path

from inferscale import crd

ROOT = Path(__file__).resolve().parents[2]


def test_committed_crd_is_current() -> None:
    committed = (ROOT / crd.CRD_FILE).read_text()
    assert committed == crd.render_yaml(), "crds/ is stale: run `inferscale crd generate` and commit it"


def test_the_chart_ships_the_same_crd() -> None:
    shipped = (ROOT / crd.CHART_CRD_FILE).read_text()
    assert shipped == crd.render_yaml(), f"{crd.CHART_CRD_FILE} is stale: run `inferscale crd generate` and commit it"


def _walk(node: object, path: str = ""):  # type: ignore[no-untyped-def]
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            if key != "default":  # a default is a value, not a schema
                yield from _walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{path}[{index}]")


def test_schema_is_structural() -> None:
    schema = crd.crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _walk(schema):
        assert "$ref" not in node and "anyOf" not in node and "title" not in node, path
        if path.endswith(("/properties", "/x-kubernetes-validations")) or "/x-kubernetes-validations[" in path:
            continue
        assert "type" in node, f"{path} has no type"


def test_user_facing_bits() -> None:
    manifest = crd.crd_manifest()
    version = manifest["spec"]["versions"][0]
    assert manifest["spec"]["names"]["shortNames"] == ["infsvc"]  # not KServe's isvc
    assert version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == ["Engine", "Model", "Ready", "Desired", "TTFT-P95", "Queue", "Age"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["engine"]["enum"] == ["vllm", "tgi", "sglang", "llamacpp"]
    assert spec["properties"]["replicas"]["x-kubernetes-validations"][0]["rule"] == "self.min <= self.max"
    assert spec["properties"]["scaling"]["properties"]["ttftP95Seconds"]["exclusiveMinimum"] is True
