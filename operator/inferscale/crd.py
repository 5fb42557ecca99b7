"""Generate the InferenceService CustomResourceDefinition from the pydantic models.

`inferscale crd generate` writes `crds/inferenceservice.yaml` and the Helm chart's copy;
a test fails when either is stale. The pydantic JSON Schema is turned into a Kubernetes
*structural* schema: references inlined, optional fields unwrapped from `anyOf [.., null]`,
numeric bounds in OpenAPI v3.0 form, and no titles.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from inferscale import api

CRD_FILE = Path("crds") / "inferenceservice.yaml"
CHART_CRD_FILE = Path("charts") / "inferscale" / "crds" / "inferenceservice.yaml"
CRD_FILES = (CRD_FILE, CHART_CRD_FILE)

_KEPT_KEYS = {
    "type",
    "format",
    "description",
    "default",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "pattern",
    "x-kubernetes-validations",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-preserve-unknown-fields",
}


def _structural(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _structural(merged, defs)
    if "anyOf" in node:
        # Optional[X] comes out as anyOf [X, {type: null}]: an optional field is simply
        # not required in a structural schema.
        choices = [c for c in node["anyOf"] if c.get("type") != "null"]
        if len(choices) != 1:
            raise ValueError(f"cannot express a union in a structural schema: {node}")
        outer = {k: v for k, v in node.items() if k not in ("anyOf", "default") or (k == "default" and v is not None)}
        return _structural({**choices[0], **outer}, defs)

    out: dict[str, Any] = {k: v for k, v in node.items() if k in _KEPT_KEYS}
    if "exclusiveMinimum" in node:
        out["minimum"] = node["exclusiveMinimum"]
        out["exclusiveMinimum"] = True
    if "exclusiveMaximum" in node:
        out["maximum"] = node["exclusiveMaximum"]
        out["exclusiveMaximum"] = True
    if node.get("format") == "date-time":
        out["type"] = "string"
    if "enum" in node and "type" not in out:
        out["type"] = "string"

    if out.get("type") == "object" or "properties" in node:
        out["type"] = "object"
        properties = node.get("properties", {})
        if properties:
            out["properties"] = {name: _structural(prop, defs) for name, prop in properties.items()}
        if node.get("required"):
            out["required"] = list(node["required"])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            out["additionalProperties"] = _structural(extra, defs)
    if out.get("type") == "array":
        out["items"] = _structural(node["items"], defs)
    return out


def _schema_of(model: type[api.Model]) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True, mode="validation")
    return _structural(schema, schema.get("$defs", {}))


def crd_manifest() -> dict[str, Any]:
    spec_schema = _schema_of(api.InferenceServiceSpec)
    status_schema = _schema_of(api.InferenceServiceStatus)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{api.PLURAL}.{api.GROUP}",
            "labels": {"app.kubernetes.io/part-of": "inferscale"},
        },
        "spec": {
            "group": api.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": api.KIND,
                "listKind": f"{api.KIND}List",
                "plural": api.PLURAL,
                "singular": api.SINGULAR,
                "shortNames": api.SHORT_NAMES,
                "categories": ["inferscale"],
            },
            "versions": [
                {
                    "name": api.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": _printer_columns(),
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "An LLM served by vLLM or TGI, scaled in replicas to hold a TTFT SLO.",
                            "required": ["spec"],
                            "x-kubernetes-validations": [{"rule": api.NAME_RULE, "message": api.NAME_RULE_MESSAGE}],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema,
                                "status": status_schema,
                            },
                        }
                    },
                }
            ],
        },
    }


def _printer_columns() -> list[dict[str, Any]]:
    return [
        {"name": "Engine", "type": "string", "jsonPath": ".spec.engine"},
        {"name": "Model", "type": "string", "jsonPath": ".spec.model.id"},
        {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
        {"name": "Desired", "type": "integer", "jsonPath": ".status.desiredReplicas"},
        {"name": "TTFT-P95", "type": "number", "jsonPath": ".status.signals.ttftP95Seconds"},
        {"name": "Queue", "type": "number", "jsonPath": ".status.signals.queueDepth"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def render_yaml() -> str:
    header = "# Generated by `inferscale crd generate` from operator/inferscale/api.py. Do not edit.\n"
    return header + yaml.safe_dump(crd_manifest(), sort_keys=False, width=120)
