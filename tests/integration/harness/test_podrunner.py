"""The pod runner heals the pods' Ready as a kubelet's status sync does, and claims a Pending pod's
Ready before kwok sets it: a real simengine behind a Runner, and a stand-in for the API server that
can be down (the pod runner's only client calls are the pod status read and patch and the claim's
pod patch; the watch is driven by hand, as its list and events would)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from harness.podrunner import READINESS_CLAIM, Runner, Settings

from tests.harness.test_podrunner import pod_json


class ApiServer:
    """One pod's status as the API server holds it; `down` makes every call fail as a refused connection does."""

    def __init__(self, pod: dict[str, Any]) -> None:
        self.pod = copy.deepcopy(pod)
        self.down = False
        self.patches = 0

    def _check(self) -> None:
        if self.down:
            raise ConnectionRefusedError("[Errno 111] Connection refused")

    def read_namespaced_pod_status(self, name: str, namespace: str, **_: Any) -> SimpleNamespace:
        self._check()
        return SimpleNamespace(data=json.dumps(self.pod).encode())

    def patch_namespaced_pod_status(self, name: str, namespace: str, patch: dict[str, Any], **_: Any) -> None:
        self._check()
        self.patches += 1
        status = self.pod["status"]
        kept = [
            c
            for c in status.get("conditions", [])
            if c["type"] not in {c["type"] for c in patch["status"]["conditions"]}
        ]
        status["conditions"] = kept + patch["status"]["conditions"]
        status["containerStatuses"] = patch["status"]["containerStatuses"]

    def patch_namespaced_pod(self, name: str, namespace: str, patch: dict[str, Any], **_: Any) -> None:
        self._check()
        self.patches += 1
        annotations = self.pod["metadata"].setdefault("annotations", {})
        annotations.update(patch["metadata"]["annotations"])

    def ready(self) -> str | None:
        return next((c["status"] for c in self.pod["status"].get("conditions", []) if c["type"] == "Ready"), None)

    def set_ready(self, value: str) -> None:
        """What the node-lifecycle controller does to every pod of a node whose heartbeats stopped."""
        self.pod["status"]["conditions"] = [
            c for c in self.pod["status"].get("conditions", []) if c["type"] != "Ready"
        ] + [{"type": "Ready", "status": value}]


@contextlib.asynccontextmanager
async def running(api: ApiServer, settings: Settings) -> AsyncIterator[Runner]:
    """A Runner on ``api``, shut down (its engines drained) afterwards."""
    async with aiohttp.ClientSession() as http:
        runner = Runner(settings, api, http)
        try:
            yield runner
        finally:
            await runner.shutdown()


async def _until(what: str, probe: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def _writes_nothing_more(runner: Runner, api: ApiServer) -> None:
    """Events of a pod the runner has nothing to change in cause no writes."""
    patches = api.patches
    for _ in range(5):
        runner.on_event("MODIFIED", api.pod)
    await asyncio.sleep(0.3)
    assert api.patches == patches


@pytest.mark.anyio
async def test_after_an_api_server_outage_the_runner_sets_the_pods_ready_again(tmp_path: Path) -> None:
    pod = pod_json("vllm")
    pod["status"]["containerStatuses"] = [{"name": "engine", "ready": True, "restartCount": 0}]
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]  # kwok's, once Running
    api = ApiServer(pod)
    api.down = True  # the engine starts and becomes ready while the API server is away
    settings = Settings(state_dir=tmp_path, cold_start_s=0, probe_period_s=0.1, shutdown_timeout_s=2)
    async with running(api, settings) as runner:
        runner.on_event("SYNC", [pod])
        [engine] = runner.engines.values()
        await _until("the engine ready", lambda: engine.ready)
        await asyncio.sleep(0.3)  # its reports of False then True both failed
        # Meanwhile the node-lifecycle controller marked the pod NotReady (as after a 50 s outage).
        api.set_ready("False")
        api.down = False
        assert api.ready() == "False"

        # The watch relists after the restart: the pod as listed disagrees with the probe.
        runner.on_event("SYNC", [api.pod])
        await _until("the pod Ready=True again", lambda: api.ready() == "True", timeout=5)

        # And any later write of Ready=False by someone else is undone by its watch event.
        api.set_ready("False")
        runner.on_event("MODIFIED", api.pod)
        await _until("the pod Ready=True once more", lambda: api.ready() == "True", timeout=5)
        await _writes_nothing_more(runner, api)  # in agreement


@pytest.mark.anyio
async def test_a_pending_pod_is_claimed_once_and_a_failed_claim_is_tried_again(tmp_path: Path) -> None:
    pod = pod_json("vllm", phase="Pending")
    api = ApiServer(pod)
    api.down = True
    async with running(api, Settings(state_dir=tmp_path, shutdown_timeout_s=2)) as runner:
        runner.on_event("SYNC", [pod])
        await _until("the claim to fail", lambda: not runner.background)
        assert READINESS_CLAIM not in api.pod["metadata"].get("annotations", {})
        assert not runner.engines, "no engine before the pod runs"

        api.down = False
        runner.on_event("MODIFIED", api.pod)  # the pod's next event: claimed this time
        await _until("the claim", lambda: READINESS_CLAIM in api.pod["metadata"].get("annotations", {}))
        await _until("the claim to finish", lambda: not runner.background)
        await _writes_nothing_more(runner, api)  # claimed


@pytest.mark.anyio
async def test_without_readiness_reflected_no_pod_is_claimed(tmp_path: Path) -> None:
    pod = pod_json("vllm", phase="Pending")
    api = ApiServer(pod)
    async with running(api, Settings(state_dir=tmp_path, reflect_readiness=False, shutdown_timeout_s=2)) as runner:
        runner.on_event("SYNC", [pod])
        await asyncio.sleep(0.3)
        assert (api.patches, runner.background) == (0, set())
