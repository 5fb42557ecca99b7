"""podrunner: a simengine process for every Running engine pod of the local cluster.

The local cluster's pods run no containers (kwok only writes their status), so this process plays the
kubelet, kube-proxy and Prometheus' Kubernetes discovery for the engine pods:

* It watches pods labelled ``inferscale.io/service`` and, for each Running one, starts
  ``python -m loadgen.engine.server`` on 127.0.0.1 (a free port) with the pod's own container args, so
  ``--max-num-seqs`` and the like apply, ``--engine`` from the ``app.kubernetes.io/name`` label, a fast
  profile and a short cold start. When the pod goes (deleted, or given a deletionTimestamp) the engine gets
  SIGTERM: it drains the requests in flight and exits, as a real engine does after its preStop hook; it is
  killed after the pod's ``terminationGracePeriodSeconds``. An engine that exits on its own is restarted
  with a growing back-off, like a crash-looping container.
* It probes every engine's ``/health`` like a readiness probe and (unless ``--no-reflect-readiness``) sets
  the pod's Ready condition to match, so a Deployment's ready count means something. A pod still
  Pending is claimed first (annotated ``harness.inferscale.io/readiness``): kwok then makes it Running
  but not Ready (cluster/kwok/pod-running-unready.yaml), as a kubelet does before the probe passes,
  where an unclaimed pod goes Ready at once (cluster/kwok/pod-ready.yaml). The match is
  level-triggered: every event and relist of a pod (the watch relists after each timeout and after an
  API-server restart) compares its Ready with the probe's and writes it again if they differ.
* It writes ``targets.json``, a Prometheus file_sd file: one target per engine, labelled ``namespace``,
  ``service``, ``pod`` and ``inference_engine`` (not ``engine``: vLLM's own series carry an ``engine``
  label, the engine core's index, which a target label would rename to ``exported_engine``).
* It serves one HTTP proxy per service on 127.0.0.1, the local stand-in for the Service: each request
  goes, streamed both ways, to the ready engine with the fewest requests in flight (round robin among
  equals); 503 when no engine is ready. ``services.json`` maps ``namespace/service`` to the proxy's URL
  and the engines behind it. A proxy lives while its service has engines and keeps its port across
  restarts when it can (``ports.json``). The response header ``x-inferscale-pod`` names the pod that
  answered.
* ``runner.json`` (pid and settings) appears once the first pod list is handled.

Run it with ``cluster/engines.sh start`` (which runs ``python -m harness.podrunner run``);
``python -m harness.podrunner url NAMESPACE/SERVICE`` prints a service's proxy URL.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import itertools
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from inferscale.api import Engine
from inferscale.promql import QueryOptions
from inferscale.render import ENGINE_LABEL, SERVICE_LABEL
from kubernetes import client, config, watch

from harness.processes import die_with_parent, free_port
from loadgen.engine.profiles import get_profile

__all__ = ["Pod", "Settings", "file_sd_targets", "main", "simengine_command"]

log = logging.getLogger("harness.podrunner")

ENGINES = tuple(engine.value for engine in Engine)
# The target labels the operator's queries join on (its defaults), written into the file_sd targets.
SERIES_LABELS = QueryOptions()
CONTAINER = "engine"
DEFAULT_GRACE_SECONDS = 30  # Kubernetes' default terminationGracePeriodSeconds
# Headers that belong to one connection, not to the request (RFC 9110 section 7.6.1), plus the ones the
# proxy sets itself.
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer"}
    | {"transfer-encoding", "upgrade", "host", "content-length"}
)
# Set in every engine's environment to namespace/pod: tells our engines from any other simengine.
POD_ENV = "INFERSCALE_POD"
# On a Pending pod: its Ready is the runner's to set. cluster/kwok/*.yaml select on it by this name.
READINESS_CLAIM = "harness.inferscale.io/readiness"


def default_state_dir() -> Path:
    cluster = os.environ.get("INFERSCALE_CLUSTER_DIR") or Path.home() / ".cache/inferscale/cluster"
    return Path(cluster) / "engines"


@dataclass(frozen=True, slots=True)
class Settings:
    state_dir: Path
    profile: str = "test"
    cold_start_s: float = 5.0
    probe_period_s: float = 0.5
    reflect_readiness: bool = True
    shutdown_timeout_s: float = 10.0


@dataclass(frozen=True, slots=True)
class Pod:
    """What the runner needs of a pod, read off its JSON."""

    namespace: str
    name: str
    uid: str
    service: str
    engine: str
    args: tuple[str, ...]
    running: bool
    pending: bool
    deleting: bool
    claimed: bool  # annotated READINESS_CLAIM
    grace_seconds: int
    ready: bool | None = None  # the pod's Ready condition as the API server has it (None: not set)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Pod:
        meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
        labels = meta.get("labels") or {}
        containers = spec.get("containers") or [{}]
        container = next((c for c in containers if c.get("name") == CONTAINER), containers[0])
        grace = spec.get("terminationGracePeriodSeconds")
        ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        return cls(
            namespace=meta["namespace"],
            name=meta["name"],
            uid=meta["uid"],
            service=labels.get(SERVICE_LABEL, ""),
            engine=labels.get(ENGINE_LABEL, ""),
            args=tuple(str(a) for a in container.get("args") or ()),
            running=status.get("phase") == "Running",
            pending=status.get("phase", "Pending") == "Pending",
            deleting=meta.get("deletionTimestamp") is not None,
            claimed=READINESS_CLAIM in (meta.get("annotations") or {}),
            grace_seconds=DEFAULT_GRACE_SECONDS if grace is None else int(grace),
            ready=None if ready is None else ready == "True",
        )

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def service_key(self) -> str:
        return f"{self.namespace}/{self.service}"


def simengine_command(pod: Pod, port: int, settings: Settings) -> list[str]:
    """The simengine command line for ``pod``: its container args first, so that ours win where they overlap."""
    return [
        sys.executable,
        "-m",
        "loadgen.engine.server",
        *pod.args,
        f"--engine={pod.engine}",
        f"--profile={settings.profile}",
        f"--cold-start={settings.cold_start_s:g}",
        f"--drain-timeout={pod.grace_seconds}",
        "--host=127.0.0.1",
        f"--port={port}",
    ]


def file_sd_targets(pods_ports: Sequence[tuple[Pod, int]]) -> list[dict[str, Any]]:
    """Prometheus file_sd entries, one per engine, with the pod's identity as target labels."""
    return [
        {
            "targets": [f"127.0.0.1:{port}"],
            "labels": {
                SERIES_LABELS.namespace_label: pod.namespace,
                SERIES_LABELS.service_label: pod.service,
                SERIES_LABELS.pod_label: pod.name,
                "inference_engine": pod.engine,
            },
        }
        for pod, port in sorted(pods_ports, key=lambda pp: pp[0].key)
    ]


def write_json(path: Path, data: Any) -> None:
    """Replace ``path`` atomically, so readers (Prometheus, clients) never see half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


# --- Kubernetes -------------------------------------------------------------------------------------


def watch_pods(core: Any, emit: Callable[[str, Any], None], stopped: threading.Event) -> None:
    """List then watch the engine pods, forever: ``emit("SYNC", [pod JSON])`` after every list, then
    ``emit(event type, pod JSON)``. Relists after each watch timeout and on any error (a 410 Gone, the
    apiserver restarting), so the runner's view heals on its own."""
    while not stopped.is_set():
        try:
            response = core.list_pod_for_all_namespaces(
                label_selector=SERVICE_LABEL, _preload_content=False, _request_timeout=15
            )
            listing = json.loads(response.data)
            emit("SYNC", listing["items"])
            stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                core.list_pod_for_all_namespaces,
                label_selector=SERVICE_LABEL,
                resource_version=listing["metadata"]["resourceVersion"],
                timeout_seconds=60,
                _request_timeout=75,
            )
            for event in stream:
                if stopped.is_set():
                    return
                if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                    emit(event["type"], event["raw_object"])
        except Exception as err:
            if stopped.is_set():
                return
            log.warning("Pod watch failed (%s: %s); listing again in 1s", type(err).__name__, err)
            stopped.wait(1)


@dataclass(frozen=True, slots=True)
class ContainerLife:
    """What the kubelet would say about the engine container: how often it restarted, how it last ended,
    and whether it is running now or waiting out a crash back-off."""

    restart_count: int = 0
    started_at: str | None = None
    last_exit: Mapping[str, Any] | None = None  # the container's lastState.terminated
    backoff_s: float | None = None  # set while waiting to restart after a crash


def _stamp(at: datetime | None = None) -> str:
    return (at or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def container_status(current: Mapping[str, Any], *, pod: Pod, ready: bool, life: ContainerLife) -> dict[str, Any]:
    """``current`` (one entry of a pod's containerStatuses) as the kubelet would write it for ``life``:
    a crashed engine waits in CrashLoopBackOff with its exit in lastState, as `kubectl get pods` shows."""
    status = {**current, "ready": ready, "restartCount": life.restart_count, "started": life.backoff_s is None}
    if life.backoff_s is not None:
        message = f"back-off {life.backoff_s:.0f}s restarting failed container={CONTAINER} pod={pod.name}"
        status["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
    elif life.started_at is not None:
        status["state"] = {"running": {"startedAt": life.started_at}}
    if life.last_exit is not None:
        status["lastState"] = {"terminated": dict(life.last_exit)}
    return status


def claim_readiness(core: Any, pod: Pod) -> None:
    """Annotate the Pending ``pod`` READINESS_CLAIM, so that kwok makes it Running but not Ready and
    leaves Ready to this runner's probe (a pod already Running keeps what kwok gave it until then)."""
    patch = {"metadata": {"annotations": {READINESS_CLAIM: "podrunner"}}}
    try:
        core.patch_namespaced_pod(pod.name, pod.namespace, patch, _request_timeout=5)
    except client.ApiException as err:
        if err.status != 404:
            log.warning("Could not claim pod %s's readiness: %s %s", pod.key, err.status, err.reason)
    except Exception as err:  # the apiserver is unreachable: the pod's next event or relist tries again
        log.warning("Could not claim pod %s's readiness: %s", pod.key, err)


def set_pod_status(core: Any, pod: Pod, ready: bool, life: ContainerLife) -> None:
    """Set the Ready and ContainersReady conditions and the containers' ready flags of ``pod``, and the
    engine container's state and restart count."""
    try:
        response = core.read_namespaced_pod_status(pod.name, pod.namespace, _preload_content=False, _request_timeout=5)
        current = json.loads(response.data)
        if current["metadata"]["uid"] != pod.uid or current["metadata"].get("deletionTimestamp"):
            return
        status = current.get("status") or {}
        value = "True" if ready else "False"
        conditions = {c["type"]: c for c in status.get("conditions") or []}
        containers = [
            container_status(c, pod=pod, ready=ready, life=life)
            if c.get("name") == CONTAINER
            else {**c, "ready": ready}
            for c in status.get("containerStatuses") or []
        ]
        if containers == status.get("containerStatuses") and all(
            conditions.get(t, {}).get("status") == value for t in ("Ready", "ContainersReady")
        ):
            return
        reason, message = (None, None) if ready else ("EngineNotReady", "the simengine's /health is not 200")
        patch = {
            "status": {
                "conditions": [
                    {"type": t, "status": value, "lastTransitionTime": _stamp(), "reason": reason, "message": message}
                    for t in ("Ready", "ContainersReady")
                ],
                # A list without a merge key: patched whole, so every entry is sent back complete.
                "containerStatuses": containers,
            }
        }
        core.patch_namespaced_pod_status(pod.name, pod.namespace, patch, _request_timeout=5)
    except client.ApiException as err:
        if err.status != 404:
            log.warning("Could not set pod %s Ready=%s: %s %s", pod.key, ready, err.status, err.reason)
    except Exception as err:  # the apiserver is unreachable: the next transition tries again
        log.warning("Could not set pod %s Ready=%s: %s", pod.key, ready, err)


# --- engines ----------------------------------------------------------------------------------------


class EngineProcess:
    """The simengine of one pod: started, probed, restarted if it dies, drained when the pod goes."""

    def __init__(self, pod: Pod, runner: Runner) -> None:
        self.pod = pod
        self.runner = runner
        self.port = 0
        self.process: asyncio.subprocess.Process | None = None
        self.ready = False
        self.in_flight = 0
        self.grace_s = float(pod.grace_seconds)
        self.life = ContainerLife()
        self.stopping = asyncio.Event()
        self._reporting = asyncio.Lock()
        self.log_path = runner.settings.state_dir / "logs" / f"{pod.namespace}_{pod.name}.log"
        self.task = asyncio.create_task(self._run(), name=f"engine {pod.key}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    async def stop(self, grace_s: float | None = None) -> None:
        """SIGTERM (drain), then SIGKILL after the grace period; returns when the process is gone."""
        if grace_s is not None:
            self.grace_s = grace_s
        self.stopping.set()
        self._set_ready(False, report=False)
        await self.task

    async def _run(self) -> None:
        settings = self.runner.settings
        backoff = 1.0
        try:
            await self.report(False)
            while not self.stopping.is_set():
                self.port = free_port()
                started = time.monotonic()
                with self.log_path.open("ab") as out:
                    self.process = await asyncio.create_subprocess_exec(
                        *simengine_command(self.pod, self.port, settings),
                        stdin=asyncio.subprocess.DEVNULL,
                        stdout=out,
                        stderr=asyncio.subprocess.STDOUT,
                        start_new_session=True,  # a Ctrl-C on the runner's terminal is the runner's to handle
                        preexec_fn=die_with_parent,  # no orphan engines when the runner dies
                        env={**os.environ, POD_ENV: self.pod.key},
                    )
                log.info("Started engine for pod %s: pid %d on %s", self.pod.key, self.process.pid, self.url)
                self.life = replace(self.life, started_at=_stamp(), backoff_s=None)
                self.runner.spawn(self.report(False))
                self.runner.changed()
                while self.process.returncode is None and not self.stopping.is_set():
                    self._set_ready(await self._healthy())
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.stopping.wait(), settings.probe_period_s)
                if self.stopping.is_set():
                    break
                self._set_ready(False, report=False)
                if time.monotonic() - started > 60:
                    backoff = 1.0
                # The kubelet's view of a crash: the exit in lastState, CrashLoopBackOff until the restart.
                code = self.process.returncode
                exit_ = {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}
                self.life = ContainerLife(
                    restart_count=self.life.restart_count + 1,
                    last_exit={**exit_, "startedAt": self.life.started_at, "finishedAt": _stamp()},
                    backoff_s=backoff,
                )
                self.runner.spawn(self.report(False))
                log.warning(
                    "Engine for pod %s exited with status %s; restarting in %.0fs (log: %s)",
                    self.pod.key,
                    self.process.returncode,
                    backoff,
                    self.log_path,
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), backoff)
                backoff = min(2 * backoff, 30.0)
        finally:
            await self._terminate()

    async def _terminate(self) -> None:
        process = self.process
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), self.grace_s + 2)
        except TimeoutError:
            log.warning("Engine for pod %s did not drain in %.0fs: SIGKILL", self.pod.key, self.grace_s)
            process.kill()
            await process.wait()
        log.info("Engine for pod %s (pid %d) exited with status %s", self.pod.key, process.pid, process.returncode)

    async def _healthy(self) -> bool:
        try:
            timeout = aiohttp.ClientTimeout(total=1)
            async with self.runner.http.get(f"{self.url}/health", timeout=timeout) as response:
                return response.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    def _set_ready(self, ready: bool, *, report: bool = True) -> None:
        if ready == self.ready:
            return
        self.ready = ready
        log.info("Engine for pod %s is %s", self.pod.key, "ready" if ready else "not ready")
        self.runner.changed()
        if report:
            self.runner.spawn(self.report(ready))

    def heal(self) -> None:
        """Level-triggered, like a kubelet's status sync: whenever the pod's Ready (as last listed or
        watched) differs from the probe's, write the probe's again. A report that failed while the API
        server was down, or a Ready=False written by someone else (the node-lifecycle controller marks
        every pod of a node NotReady when the node's heartbeats stop during an API-server outage),
        is put right by the next event or relist of the pod, not left until the engine's next change."""
        if self.pod.ready is not None and self.pod.ready != self.ready:
            self.runner.spawn(self.report(self.ready))

    async def report(self, ready: bool) -> None:
        """Reflect ``ready`` into the pod's status (in order: one report at a time)."""
        if self.runner.settings.reflect_readiness:
            async with self._reporting:
                await asyncio.to_thread(set_pod_status, self.runner.core, self.pod, ready, self.life)


# --- the Service stand-in ---------------------------------------------------------------------------


class ServiceProxy:
    """A loopback HTTP proxy in front of the ready engines of one service."""

    def __init__(self, key: str, runner: Runner) -> None:
        self.key = key
        self.runner = runner
        self.port = 0
        self._turn = itertools.count()
        self._site_runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, preferred_port: int = 0) -> None:
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A proxy closes once its engines are gone: nothing to wait for but the odd idle connection.
        self._site_runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=2)
        await self._site_runner.setup()
        for port in dict.fromkeys((preferred_port, 0)):
            try:
                await web.TCPSite(self._site_runner, "127.0.0.1", port).start()
                break
            except OSError:
                log.info("Port %d is taken; service %s gets another", port, self.key)
        self.port = int(self._site_runner.addresses[0][1])
        log.info("Service %s: proxy on %s", self.key, self.url)

    async def close(self) -> None:
        if self._site_runner is not None:
            await self._site_runner.cleanup()
        log.info("Service %s: proxy on %s closed (no engines left)", self.key, self.url)

    def _pick(self, tried: set[EngineProcess]) -> EngineProcess | None:
        ready = [e for e in self.runner.engines_of(self.key) if e.ready and e not in tried]
        if not ready:
            return None
        start = next(self._turn) % len(ready)
        return min(ready[start:] + ready[:start], key=lambda e: e.in_flight)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        tried: set[EngineProcess] = set()
        while (engine := self._pick(tried)) is not None:
            tried.add(engine)
            engine.in_flight += 1
            try:
                try:
                    upstream = await self.runner.http.request(
                        request.method, engine.url + request.path_qs, headers=headers, data=body
                    )
                except aiohttp.ClientConnectorError as err:  # never connected: safe to try another engine
                    log.info("Service %s: %s refused a connection (%s)", self.key, engine.pod.key, err)
                    continue
                except aiohttp.ClientError as err:
                    return web.json_response({"error": f"engine {engine.pod.key} failed: {err}"}, status=502)
                async with upstream:  # released on the way out: a client that hung up aborts the request
                    return await self._relay(request, upstream, engine)
            finally:
                engine.in_flight -= 1
        return web.json_response({"error": f"no ready engine behind service {self.key}"}, status=503)

    async def _relay(
        self, request: web.Request, upstream: aiohttp.ClientResponse, engine: EngineProcess
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for name, value in upstream.headers.items():
            if name.lower() not in HOP_BY_HOP or name.lower() == "content-length":
                response.headers.add(name, value)
        response.headers["x-inferscale-pod"] = engine.pod.name
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
        except aiohttp.ClientError as err:  # the engine went away mid-answer: so does the client's connection
            log.warning("Service %s: %s broke off a response: %s", self.key, engine.pod.key, err)
            if request.transport is not None:
                request.transport.close()
            return response
        await response.write_eof()
        return response


# --- the runner -------------------------------------------------------------------------------------


class Runner:
    """Keeps one engine per Running engine pod and one proxy per service that has engines."""

    def __init__(self, settings: Settings, core: Any, http: aiohttp.ClientSession) -> None:
        self.settings = settings
        self.core = core
        self.http = http
        self.engines: dict[str, EngineProcess] = {}  # by pod uid
        self.draining: set[EngineProcess] = set()
        self.proxies: dict[str, ServiceProxy] = {}
        self.background: set[asyncio.Task[None]] = set()
        self._skipped: set[str] = set()
        self._claiming: set[str] = set()  # pod uids with a READINESS_CLAIM patch in flight
        self._dirty = asyncio.Event()
        self._publishing = asyncio.Lock()
        self.ports = self._previous_ports()
        (settings.state_dir / "logs").mkdir(parents=True, exist_ok=True)

    def _previous_ports(self) -> dict[str, int]:
        try:
            return {str(key): int(port) for key, port in json.loads(self._ports_file.read_text()).items()}
        except (OSError, ValueError, AttributeError):
            return {}

    @property
    def _ports_file(self) -> Path:
        return self.settings.state_dir / "ports.json"

    def engines_of(self, service_key: str) -> Iterator[EngineProcess]:
        return (e for e in self.engines.values() if e.pod.service_key == service_key)

    def changed(self) -> None:
        self._dirty.set()

    def spawn(self, coro: Coroutine[Any, Any, None], then: Callable[[], None] | None = None) -> None:
        """Run ``coro`` in the background, holding a reference until it is done."""
        task = asyncio.create_task(coro)
        self.background.add(task)

        def done(_: asyncio.Task[None]) -> None:
            self.background.discard(task)
            if then is not None:
                then()

        task.add_done_callback(done)

    # Pod events -----------------------------------------------------------------------------------

    def on_event(self, kind: str, payload: Any) -> None:
        if kind == "SYNC":
            pods = [Pod.from_json(obj) for obj in payload]
            seen = {pod.uid for pod in pods}
            for uid in [uid for uid in self.engines if uid not in seen]:
                self._retire(self.engines[uid])
            for pod in pods:
                self._apply(pod)
        else:
            pod = Pod.from_json(payload)
            self._apply(pod, gone=kind == "DELETED")
        self.changed()

    def _apply(self, pod: Pod, *, gone: bool = False) -> None:
        if self.settings.reflect_readiness and not gone:
            self._claim(pod)
        engine = self.engines.get(pod.uid)
        wanted = not gone and pod.running and not pod.deleting and bool(pod.service)
        if wanted and pod.engine not in ENGINES:
            if pod.uid not in self._skipped:
                self._skipped.add(pod.uid)
                log.warning(
                    "Pod %s: label %s=%r is not one of %s; no engine", pod.key, ENGINE_LABEL, pod.engine, ENGINES
                )
            wanted = False
        if engine is not None and not wanted:
            engine.grace_s = float(pod.grace_seconds)
            self._retire(engine)
        elif engine is not None:
            engine.pod = pod
            engine.heal()
        elif wanted:
            self.engines[pod.uid] = EngineProcess(pod, self)

    def _claim(self, pod: Pod) -> None:
        """Claim an engine pod's readiness while it is Pending (level-triggered: a claim that failed is
        tried again on the pod's next event or relist)."""
        if not pod.pending or pod.claimed or pod.deleting or not pod.service or pod.uid in self._claiming:
            return
        self._claiming.add(pod.uid)
        self.spawn(asyncio.to_thread(claim_readiness, self.core, pod), then=lambda: self._claiming.discard(pod.uid))

    def _retire(self, engine: EngineProcess) -> None:
        log.info("Pod %s is gone or going: draining its engine", engine.pod.key)
        del self.engines[engine.pod.uid]
        self.draining.add(engine)

        def drained() -> None:
            self.draining.discard(engine)
            self.changed()

        self.spawn(engine.stop(), then=drained)

    # State ----------------------------------------------------------------------------------------

    async def publish_forever(self) -> None:
        """Bring the proxies and the state files up to date after every change."""
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            await self.publish()

    async def publish(self) -> None:
        async with self._publishing:
            await self._publish()

    async def _publish(self) -> None:
        live = {e.pod.service_key for e in self.engines.values()} | {e.pod.service_key for e in self.draining}
        for key in sorted(live - self.proxies.keys()):
            proxy = self.proxies[key] = ServiceProxy(key, self)
            await proxy.start(self.ports.get(key, 0))
            self.ports[key] = proxy.port
            write_json(self._ports_file, self.ports)
        for key in sorted(self.proxies.keys() - live):
            await self.proxies.pop(key).close()
        started = [e for e in self.engines.values() if e.process is not None]
        write_json(self.settings.state_dir / "targets.json", file_sd_targets([(e.pod, e.port) for e in started]))
        services = {
            key: {
                "url": proxy.url,
                "endpoints": [
                    {"pod": e.pod.name, "engine": e.pod.engine, "url": e.url, "pid": e.pid, "ready": e.ready}
                    for e in sorted(started, key=lambda e: e.pod.name)
                    if e.pod.service_key == key
                ],
            }
            for key, proxy in sorted(self.proxies.items())
        }
        write_json(self.settings.state_dir / "services.json", services)

    async def shutdown(self) -> None:
        """Drain every engine (bounded by ``shutdown_timeout_s``) and give kwok's Ready back to live pods."""
        engines = list(self.engines.values())
        grace = self.settings.shutdown_timeout_s
        await asyncio.gather(*(e.stop(min(grace, e.grace_s)) for e in [*engines, *self.draining]))
        await asyncio.gather(*(e.report(True) for e in engines))
        for proxy in self.proxies.values():
            await proxy.close()
        self.proxies.clear()
        self.engines.clear()
        await self.publish()


async def run(settings: Settings, kubeconfig: Path) -> int:
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    lock = (settings.state_dir / "runner.lock").open("w")  # held until the process exits
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log.error("Another pod runner holds %s; stop it first (cluster/engines.sh stop)", lock.name)
        return 1
    config.load_kube_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    core = client.CoreV1Api()
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def emit(kind: str, payload: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed while the thread was watching
            loop.call_soon_threadsafe(events.put_nowait, (kind, payload))

    stopped = threading.Event()
    threading.Thread(target=watch_pods, args=(core, emit, stopped), name="pod-watch", daemon=True).start()
    connector = aiohttp.TCPConnector(limit=0)  # no cap on concurrent requests through the proxies
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=5)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False) as http:
        runner = Runner(settings, core, http)
        publisher = asyncio.create_task(runner.publish_forever())
        synced = False
        stopping = asyncio.ensure_future(stop.wait())
        log.info(
            "Watching pods labelled %s (profile %s, cold start %gs, readiness %s); state in %s",
            SERVICE_LABEL,
            settings.profile,
            settings.cold_start_s,
            "reflected into the pods" if settings.reflect_readiness else "not reflected",
            settings.state_dir,
        )
        while not stop.is_set():
            get = asyncio.ensure_future(events.get())
            await asyncio.wait([get, stopping], return_when=asyncio.FIRST_COMPLETED)
            if not get.done():
                get.cancel()
                break
            kind, payload = get.result()
            runner.on_event(kind, payload)
            if kind == "SYNC" and not synced:
                synced = True
                await runner.publish()
                runner_json = {
                    "pid": os.getpid(),
                    "profile": settings.profile,
                    "cold_start_s": settings.cold_start_s,
                    "reflect_readiness": settings.reflect_readiness,
                }
                write_json(settings.state_dir / "runner.json", runner_json)
        log.info("Stopping: draining %d engine(s)", len(runner.engines) + len(runner.draining))
        stopped.set()
        publisher.cancel()
        await runner.shutdown()
    (settings.state_dir / "runner.json").unlink(missing_ok=True)
    log.info("Stopped")
    return 0


def print_url(state_dir: Path, service: str, wait_s: float) -> int:
    deadline = time.monotonic() + wait_s
    while True:
        with contextlib.suppress(OSError, ValueError):
            entry = json.loads((state_dir / "services.json").read_text()).get(service)
            if entry is not None:
                print(entry["url"])
                return 0
        if time.monotonic() >= deadline:
            print(f"podrunner: no service {service!r} in {state_dir / 'services.json'}", file=sys.stderr)
            return 1
        time.sleep(0.2)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness.podrunner", description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", type=Path, default=default_state_dir(), help="default: %(default)s")
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run", help="watch the engine pods and run their simengines (foreground)")
    run_parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=os.environ.get("KUBECONFIG") or default_state_dir().parent / "kubeconfig",
        help="default: $KUBECONFIG, else the local cluster's",
    )
    run_parser.add_argument("--profile", default="test", help="simengine profile (default %(default)s)")
    run_parser.add_argument("--cold-start", type=float, default=5.0, metavar="SECONDS", help="default %(default)s")
    run_parser.add_argument("--probe-period", type=float, default=0.5, metavar="SECONDS", help="default %(default)s")
    run_parser.add_argument(
        "--no-reflect-readiness", action="store_true", help="leave the pods' Ready condition to kwok (always True)"
    )
    run_parser.add_argument("--shutdown-timeout", type=float, default=10.0, metavar="SECONDS")
    url_parser = sub.add_parser("url", help="print the proxy URL of a service")
    url_parser.add_argument("service", metavar="NAMESPACE/SERVICE")
    url_parser.add_argument("--wait", type=float, default=0.0, metavar="SECONDS", help="wait for it to appear")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "url":
        return print_url(args.state_dir, args.service, args.wait)
    try:
        get_profile(args.profile)
    except ValueError as err:
        print(f"podrunner: {err}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = Settings(
        state_dir=args.state_dir,
        profile=args.profile,
        cold_start_s=args.cold_start,
        probe_period_s=args.probe_period,
        reflect_readiness=not args.no_reflect_readiness,
        shutdown_timeout_s=args.shutdown_timeout,
    )
    return asyncio.run(run(settings, args.kubeconfig))


if __name__ == "__main__":
    sys.exit(main())
