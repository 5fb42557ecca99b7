"""Render docs/reference.md, the InferenceService field reference, from the generated CRD.

It reads the same OpenAPI schema the API server enforces (`crd.crd_manifest()`, itself
generated from the pydantic models in `api`), so a field's type, default, bounds and
description cannot disagree with what the cluster accepts. `inferscale docs generate`
writes it; `--check` and a unit test fail when the committed file is stale.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferscale import api, crd

REFERENCE_FILE = Path("docs") / "reference.md"


@dataclass(frozen=True)
class FieldDoc:
    """One row of the reference: a field's path and what the schema says of it."""

    path: str
    type: str
    default: str
    allowed: str
    description: str


@dataclass(frozen=True)
class RuleDoc:
    """A CEL validation rule (x-kubernetes-validations) and where in the object it applies."""

    path: str
    rule: str
    message: str


def _type(node: Mapping[str, Any]) -> str:
    kind = str(node.get("type", "object"))
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return "object (free-form)"
    if kind == "array":
        return f"[]{_type(node['items'])}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map[string]{_type(node['additionalProperties'])}"
    if "format" in node:
        return f"{kind} ({node['format']})"
    return kind


def _value(value: Any) -> str:
    # Strings bare (`vllm`), except the empty one, which an empty code span would hide.
    return f"`{value if isinstance(value, str) and value else json.dumps(value)}`"


def _default(node: Mapping[str, Any], required: bool) -> str:
    if required:
        return "required"
    if "default" not in node:
        return ""
    if isinstance(node["default"], dict) and node["default"]:
        # The API server fills in the whole object; each field's row shows its own value.
        return "its fields' defaults"
    return _value(node["default"])


def _allowed(node: Mapping[str, Any]) -> str:
    parts = []
    if "enum" in node:
        parts.append(", ".join(_value(choice) for choice in node["enum"]))
    if "minimum" in node:
        parts.append(f"{'>' if node.get('exclusiveMinimum') else '≥'} {json.dumps(node['minimum'])}")
    if "maximum" in node:
        parts.append(f"{'<' if node.get('exclusiveMaximum') else '≤'} {json.dumps(node['maximum'])}")
    if "minLength" in node:
        parts.append(f"length ≥ {node['minLength']}")
    if "maxLength" in node:
        parts.append(f"length ≤ {node['maxLength']}")
    if "pattern" in node:
        parts.append(f"matches `{node['pattern']}`")
    if "x-kubernetes-list-map-keys" in node:
        keys = ", ".join(f"`{key}`" for key in node["x-kubernetes-list-map-keys"])
        parts.append(f"one entry per {keys}")
    return "; ".join(parts)


def fields(node: Mapping[str, Any], path: str) -> Iterator[FieldDoc]:
    """Every field below `node`, depth first in declaration order (array items as `path[]`)."""
    if node.get("type") == "array":
        yield from fields(node["items"], f"{path}[]")
        return
    required = set(node.get("required", []))
    for name, child in node.get("properties", {}).items():
        child_path = f"{path}.{name}"
        yield FieldDoc(
            path=child_path,
            type=_type(child),
            default=_default(child, name in required),
            allowed=_allowed(child),
            description=" ".join(str(child.get("description", "")).split()),
        )
        yield from fields(child, child_path)


def rules(node: Mapping[str, Any], path: str) -> Iterator[RuleDoc]:
    """Every CEL rule at or below `node`."""
    for rule in node.get("x-kubernetes-validations", []):
        yield RuleDoc(path=path, rule=rule["rule"], message=rule["message"])
    if node.get("type") == "array":
        yield from rules(node["items"], f"{path}[]")
    for name, child in node.get("properties", {}).items():
        yield from rules(child, f"{path}.{name}" if path else name)


def _cell(text: str) -> str:
    # A pipe ends a table cell even inside backticks (GitHub Flavored Markdown).
    return text.replace("|", "\\|")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return lines


def _field_table(docs: Iterator[FieldDoc]) -> list[str]:
    rows = [[f"`{doc.path}`", doc.type, doc.default, doc.allowed, doc.description] for doc in docs]
    return _table(["field", "type", "default", "allowed", "description"], rows)


def render_markdown() -> str:
    manifest = crd.crd_manifest()
    version = manifest["spec"]["versions"][0]
    schema = version["schema"]["openAPIV3Schema"]
    names = manifest["spec"]["names"]
    lines = [
        "<!-- Generated by `inferscale docs generate` from operator/inferscale/api.py. Do not edit. -->",
        f"# {api.KIND} reference",
        "",
        f"`apiVersion: {api.GROUP}/{version['name']}`, `kind: {api.KIND}`, namespaced; short name "
        f"`{', '.join(names['shortNames'])}`. {schema['description']}",
        "",
        "Every field below, with its type, default, bounds and description, comes from the CRD's OpenAPI "
        "schema, which is generated from the pydantic models in `operator/inferscale/api.py`; the API server "
        "enforces it. An omitted field gets its default, and an omitted object gets each of its fields' "
        "defaults, so `kubectl get infsvc NAME -o yaml` shows the values in force. What the conditions and "
        "decision reasons in `status` mean, and what to do about them: [runbook.md](runbook.md).",
        "",
        "## Validation rules",
        "",
        "Checked by the API server (CEL, `x-kubernetes-validations`); a violating object is refused with the message.",
        "",
        *_table(
            ["on", "rule", "message"],
            [[f"`{r.path}`" if r.path else "the object", f"`{r.rule}`", r.message] for r in rules(schema, "")],
        ),
        "",
        "Checked by the operator (a schema cannot): `spec.extraArgs` must not set a flag the operator sets "
        "itself, or the pinned batch ceiling could be overridden. Every spelling the engine's own parser reads "
        "as that flag is refused: for vLLM, underscores for dashes (`--max_num_seqs`), argparse's abbreviations "
        "(`--max-num-seq`) and `-tp`; for TGI, the exact flag and `-p` for `--port` (clap matches nothing "
        "else). Such a spec gets the condition `Reconciled=False` with reason `InvalidSpec` and a message "
        "naming the entry and the fix.",
        "",
        *_table(
            ["engine", "refused flag in spec.extraArgs", "set instead"],
            [
                [f"`{engine.value}`", f"`{flag}`", f"`{owner}`" if owner else "(the operator)"]
                for engine, flags in api.RESERVED_ARGS.items()
                for flag, owner in flags.items()
            ],
        ),
        "",
        "## spec",
        "",
        *_field_table(fields(schema["properties"]["spec"], "spec")),
        "",
        "## status",
        "",
        "Written by the operator only, through the status subresource; each writer (reconcile, readiness, "
        "the scaling tick) applies its own fields with its own server-side-apply field manager.",
        "",
        *_field_table(fields(schema["properties"]["status"], "status")),
        "",
        "## kubectl get columns",
        "",
        *_table(
            ["column", "type", "from"],
            [[c["name"], c["type"], f"`{c['jsonPath']}`"] for c in version["additionalPrinterColumns"]],
        ),
    ]
    return "\n".join(lines) + "\n"
