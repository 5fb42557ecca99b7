"""The Deployment event handler when the API server fails it: one line where it says something new."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf
import pytest
from inferscale.handlers import deployment_changed
from inferscale.kube import KubeError

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "chat",
        "namespace": "ml",
        "ownerReferences": [{"kind": "InferenceService", "name": "chat", "uid": "u1", "controller": True}],
    },
    "spec": {"replicas": 2},
    "status": {"replicas": 2, "readyReplicas": 2},
}


class Unanswered:
    """A Kube whose GET fails as the client does when the API server goes away mid-answer (no status)."""

    def __init__(self, status: int | None) -> None:
        self.status = status

    def get(self, *_: Any) -> dict[str, Any]:
        raise KubeError("GET InferenceService ml/chat failed: Connection broken", status=self.status)


def _handle(kube: Any) -> None:
    memo = kopf.Memo()
    memo.kube = kube
    logger = logging.getLogger("test.readiness")
    asyncio.run(deployment_changed(body=kopf.Body(DEPLOYMENT), type="MODIFIED", memo=memo, logger=logger))


def test_an_api_server_that_did_not_answer_adds_no_warning_per_service(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="test.readiness")
    _handle(Unanswered(status=None))
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]
    assert "Recording readiness of InferenceService ml/chat failed, the API server did not answer" in caplog.text


def test_an_api_server_that_refused_is_a_warning_naming_the_service(caplog: pytest.LogCaptureFixture) -> None:
    _handle(Unanswered(status=403))
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "Recording readiness of InferenceService ml/chat failed" in caplog.text
