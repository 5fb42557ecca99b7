"""docs/reference.md is generated from the models, must be current, and documents every field."""

from pathlib import Path
from typing import Any

import pytest
from inferscale import api, cli, crd, reference

ROOT = Path(__file__).resolve().parents[2]


def _root_schema() -> dict[str, Any]:
    schema: dict[str, Any] = crd.crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _schema(part: str) -> dict[str, Any]:
    schema: dict[str, Any] = _root_schema()["properties"][part]
    return schema


def test_committed_reference_is_current() -> None:
    committed = (ROOT / reference.REFERENCE_FILE).read_text()
    assert committed == reference.render_markdown(), (
        "docs/reference.md is stale: run `inferscale docs generate` (or `make crd`) and commit it"
    )


@pytest.mark.parametrize("part", ["spec", "status"])
def test_every_field_has_a_description(part: str) -> None:
    undocumented = [doc.path for doc in reference.fields(_schema(part), part) if not doc.description]
    assert undocumented == [], f"add a Field(description=...) in operator/inferscale/api.py for {undocumented}"


def test_a_nested_field_row_carries_its_default_bounds_and_description() -> None:
    rows = {doc.path: doc for doc in reference.fields(_schema("spec"), "spec")}
    row = rows["spec.scaling.scaleDown.stabilizationSeconds"]
    assert (row.type, row.default, row.allowed) == ("integer", "`300`", "≥ 0; ≤ 3600")
    assert "highest recommendation" in row.description
    assert rows["spec.scaling.ttftP95Seconds"].allowed == "> 0; ≤ 600"
    assert rows["spec.engine"].allowed == "`vllm`, `tgi`, `sglang`, `llamacpp`"
    assert rows["spec.model.id"].default == "required"
    assert rows["spec.tolerations[].effect"].type == "string"


def test_the_reference_lists_every_cel_rule_and_reserved_flag() -> None:
    text = reference.render_markdown()
    for rule in reference.rules(_root_schema(), ""):
        assert rule.message.replace("|", "\\|") in text
    assert api.NAME_RULE_MESSAGE in text
    for flags in api.RESERVED_ARGS.values():
        for flag in flags:
            assert f"`{flag}`" in text


def test_a_pipe_in_a_pattern_does_not_split_the_table_cell() -> None:
    line = next(line for line in reference.render_markdown().splitlines() if "`spec.sharedMemory`" in line)
    assert line.count(" | ") == 4  # five cells; the pattern's alternatives are escaped
    assert "Ki\\|Mi" in line


def test_check_fails_on_a_stale_file_and_passes_after_generate(tmp_path: Path) -> None:
    target = tmp_path / "docs" / "reference.md"
    assert cli.main(["docs", "generate", "--check", "-o", str(target)]) == 1  # missing
    assert cli.main(["docs", "generate", "-o", str(target)]) == 0
    assert cli.main(["docs", "generate", "--check", "-o", str(target)]) == 0
    target.write_text(target.read_text().replace("| `spec.engine` |", "| `spec.engineX` |"))
    assert cli.main(["docs", "generate", "--check", "-o", str(target)]) == 1
