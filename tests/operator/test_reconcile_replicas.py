"""The replicas reconcile applies on a spec change (handlers.replicas_to_render) and the
desiredReplicas it records: a spec edit that does not touch the replicas never moves them, in
either mode; in Auto mode new bounds still apply; an outside scale stays visible to the tick."""

from __future__ import annotations

from typing import Any

import pytest
from inferscale.api import InferenceService, ObjectMeta, parse_spec
from inferscale.handlers import desired_to_record, replicas_to_render


def _isvc(mode: str = "Auto", low: int = 1, high: int = 5) -> InferenceService:
    spec = {"model": {"id": "m"}, "replicas": {"min": low, "max": high}, "scaling": {"mode": mode}}
    return InferenceService(metadata=ObjectMeta(name="chat", namespace="serving"), spec=parse_spec(spec))


@pytest.mark.parametrize("mode", ["Auto", "Manual"])
def test_an_outside_scale_survives_a_spec_edit_and_stays_visible_to_the_tick(mode: str) -> None:
    # The operator last wanted 1; someone ran `kubectl scale --replicas=3`; then the ceiling was edited.
    status: dict[str, Any] = {"desiredReplicas": 1}
    replicas = replicas_to_render(_isvc(mode), status, deployed=3)
    assert replicas == 3
    # Auto: desiredReplicas stays 1, so the tick still sees 3 != 1 and reports ReplicasOverridden.
    assert desired_to_record(status, 3, replicas) == 1


def test_new_bounds_move_the_replicas_in_auto_mode_only() -> None:
    status: dict[str, Any] = {"desiredReplicas": 3}
    assert replicas_to_render(_isvc(low=4, high=6), status, deployed=3) == 4
    assert desired_to_record(status, 3, 4) == 4  # reconcile set it: its own count
    assert replicas_to_render(_isvc(high=2), status, deployed=3) == 2
    assert replicas_to_render(_isvc("Manual", low=4, high=6), status, deployed=3) == 3


def test_a_missing_deployment_starts_where_the_operator_last_wanted_it() -> None:
    assert replicas_to_render(_isvc(), {"desiredReplicas": 4}, deployed=None) == 4
    assert replicas_to_render(_isvc(high=2), {"desiredReplicas": 4}, deployed=None) == 2
    assert replicas_to_render(_isvc(low=2), {}, deployed=None) == 2
    assert replicas_to_render(_isvc("Manual"), {"desiredReplicas": 3}, deployed=None) == 3
    assert desired_to_record({}, None, 2) == 2
    assert desired_to_record({}, 3, 3) == 3  # nothing recorded yet: the count as found
