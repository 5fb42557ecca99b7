"""Pure: what drifted between a child as rendered and the child as the API server has it.

Only what the operator renders is compared: fields the API server defaults (a container's
imagePullPolicy, a Service's clusterIP) and fields others add (an annotation from
`kubectl rollout restart`, a label) are not the operator's, and server-side apply would not
remove them, so counting them would repair forever. A Deployment's replicas belong to the
autoscaler (or the user in Manual mode), never to drift.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity as _parse_quantity

# Paths (from the object's root) never compared.
IGNORED: dict[str, frozenset[tuple[str, ...]]] = {"Deployment": frozenset({("spec", "replicas")})}
# Keys whose values are resource quantities: the API server canonicalises them ("1024Mi" -> "1Gi").
_QUANTITY_KEYS = {"sizeLimit"}
_QUANTITY_PARENTS = {"requests", "limits"}
parse_quantity: Callable[[str], Decimal] = _parse_quantity  # typed: the client's is not


@dataclass(frozen=True)
class Drift:
    """A child that is missing or differs from its rendering, and what to say about it."""

    kind: str
    namespace: str
    name: str
    missing: bool
    paths: tuple[str, ...]

    @property
    def message(self) -> str:
        what = f"{self.kind} {self.namespace}/{self.name}"
        if self.missing:
            return f"{what} was deleted; recreated"
        return f"{what}: {', '.join(self.paths)} changed; restored"


def differences(desired: Any, actual: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths where `actual` does not carry `desired`'s value (extra content in `actual` is fine)."""
    if isinstance(desired, Mapping):
        if not isinstance(actual, Mapping):
            return [path]
        found: list[tuple[str, ...]] = []
        for key, value in desired.items():
            if key in actual:
                found += differences(value, actual[key], (*path, key))
            elif value not in ({}, [], None):  # the API server drops empty values
                found.append((*path, key))
        return found
    if isinstance(desired, list):
        if not isinstance(actual, list):
            return [path]
        if not all(isinstance(item, Mapping) for item in desired):
            # Lists of scalars (args, command) are atomic: order and length matter.
            return [] if desired == actual else [path]
        return _list_differences(desired, actual, path)
    if desired == actual or _same_quantity(desired, actual, path):
        return []
    return [path]


def _list_differences(desired: list[Any], actual: list[Any], path: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Lists of objects: matched by name where they have one (containers, ports, env), else by position."""
    by_name = {item.get("name"): item for item in actual if isinstance(item, Mapping) and "name" in item}
    found: list[tuple[str, ...]] = []
    for index, item in enumerate(desired):
        by_position = actual[index] if index < len(actual) else None
        other = by_name.get(item["name"]) if "name" in item else by_position
        where = (*path[:-1], f"{path[-1]}[{index}]") if path else (f"[{index}]",)
        found += [where] if other is None else differences(item, other, where)
    return found


def _same_quantity(desired: Any, actual: Any, path: tuple[str, ...]) -> bool:
    if not (isinstance(desired, str) and isinstance(actual, str) and path):
        return False
    if path[-1] not in _QUANTITY_KEYS and (len(path) < 2 or path[-2] not in _QUANTITY_PARENTS):
        return False
    try:
        return bool(parse_quantity(desired) == parse_quantity(actual))
    except ValueError:
        return False


def drift(desired: Mapping[str, Any], actual: Mapping[str, Any] | None) -> Drift | None:
    """How `actual` (None: it does not exist) strays from `desired`, or None if it does not."""
    meta = desired["metadata"]
    kind = desired["kind"]
    if actual is None:
        return Drift(kind=kind, namespace=meta["namespace"], name=meta["name"], missing=True, paths=())
    ignored = IGNORED.get(kind, frozenset())
    paths = [p for p in differences(desired, actual) if p not in ignored]
    if not paths:
        return None
    return Drift(
        kind=kind, namespace=meta["namespace"], name=meta["name"], missing=False, paths=tuple(map(_dotted, paths))
    )


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(path).replace(".[", "[")
