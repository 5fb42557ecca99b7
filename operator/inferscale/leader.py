"""Leader election on a coordination.k8s.io Lease: of several operator replicas, one runs.

`inferscale operator run --lease NAMESPACE/NAME` takes the Lease before it starts kopf and
gives it back when it stops. A replica that does not hold it stands by, answering only its
liveness probe (and serving its metrics), and takes over once the holder releases the Lease
or leaves it unrenewed for the Lease's duration. The holder renews every RETRY_SECONDS; when
it cannot renew for RENEW_DEADLINE_SECONDS it stops itself (SIGTERM), before any other replica
may take over, so two replicas never act at once. The timings are client-go's defaults, and
as in client-go a Lease counts as expired by how long this replica has seen it unchanged,
not by the holder's clock.

kopf's own peering does not fit here: operators of the same priority all pause, and a pause
stops kopf's watches but not the operator's scaling loop.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from inferscale.kube import Kube, KubeError, NotFound

LEASE_API = "coordination.k8s.io/v1"
LEASE_SECONDS = 15
RENEW_DEADLINE_SECONDS = 10
RETRY_SECONDS = 2.0
# After SIGTERM on a lost Lease, the time kopf gets to stop before the process exits hard.
STOP_GRACE_SECONDS = 3.0

logger = logging.getLogger("inferscale.leader")


@dataclass(frozen=True)
class LeaseView:
    """What a replica needs to know of a Lease to decide whether it may take it."""

    holder: str | None
    duration_seconds: float
    unchanged_for_seconds: float


def may_take(lease: LeaseView, identity: str) -> bool:
    """Free, already ours, or not renewed (unchanged) for its whole duration."""
    return not lease.holder or lease.holder == identity or lease.unchanged_for_seconds >= lease.duration_seconds


def new_identity() -> str:
    """The pod's name (its hostname) plus a random suffix: unique even for two processes on one host."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _micro_time(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Elector:
    """Takes, renews and releases one Lease for this process (synchronous: run it in a thread)."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        *,
        identity: str,
        lease_seconds: int = LEASE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.clock = clock
        self.lost = False
        self.holder: str | None = None  # as last seen
        self._seen: tuple[str, float] | None = None  # (resourceVersion, when first seen)
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    @property
    def where(self) -> str:
        return f"Lease {self.namespace}/{self.name}"

    def _manifest(self, spec: dict[str, Any], resource_version: str | None = None) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version
        return {"apiVersion": LEASE_API, "kind": "Lease", "metadata": metadata, "spec": spec}

    def try_once(self) -> bool:
        """One round: create, take over or renew the Lease where allowed. True if this process holds it."""
        stamp = _micro_time(datetime.now(UTC))
        try:
            current = self.kube.get(LEASE_API, "Lease", self.namespace, self.name)
        except NotFound:
            spec: dict[str, Any] = {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self.lease_seconds,
                "acquireTime": stamp,
                "renewTime": stamp,
                "leaseTransitions": 0,
            }
            return self._write(self.kube.create, self._manifest(spec))
        spec = dict(current.get("spec") or {})
        version = str(current["metadata"]["resourceVersion"])
        if self._seen is None or self._seen[0] != version:
            self._seen = (version, self.clock())
        self.holder = spec.get("holderIdentity") or None
        view = LeaseView(
            holder=self.holder,
            duration_seconds=float(spec.get("leaseDurationSeconds") or self.lease_seconds),
            unchanged_for_seconds=self.clock() - self._seen[1],
        )
        if not may_take(view, self.identity):
            return False
        if self.holder != self.identity:
            spec["acquireTime"] = stamp
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=self.lease_seconds, renewTime=stamp)
        return self._write(self.kube.replace, self._manifest(spec, version))

    def _write(self, call: Callable[[dict[str, Any]], dict[str, Any]], manifest: dict[str, Any]) -> bool:
        try:
            call(manifest)
        except KubeError as error:
            if error.status == 409:  # another replica wrote it first
                return False
            raise
        self.holder = self.identity
        return True

    def acquire(self) -> None:
        """Block until this process holds the Lease."""
        reported: str | None = None
        while True:
            try:
                if self.try_once():
                    logger.info(f"Acquired {self.where} as {self.identity}: this replica runs the operator")
                    return
                if self.holder != reported:
                    reported = self.holder
                    logger.info(
                        f"Standing by: {self.where} is held by {self.holder}; this replica takes over "
                        f"when it is released or not renewed for {self.lease_seconds}s"
                    )
            except KubeError as error:
                logger.warning(f"Taking {self.where} failed, retrying in {RETRY_SECONDS:g}s: {error}")
            time.sleep(RETRY_SECONDS)

    def keep(self, on_lost: Callable[[], None]) -> None:
        """Renew the Lease in a background thread; call `on_lost` once if it cannot be renewed in time."""

        def renew() -> None:
            renewed = self.clock()
            while not self._stop.wait(RETRY_SECONDS):
                problem = ""
                try:
                    if self.try_once():
                        renewed = self.clock()
                        continue
                    if self.holder not in (None, self.identity):
                        problem = f"it is now held by {self.holder}"
                except KubeError as error:
                    logger.warning(f"Renewing {self.where} failed: {error}")
                overdue = self.clock() - renewed
                if not problem and overdue >= RENEW_DEADLINE_SECONDS:
                    problem = f"it was not renewed for {overdue:.0f}s"
                if problem:
                    self.lost = True
                    logger.error(f"Lost {self.where}: {problem}; stopping so that only one replica acts")
                    on_lost()
                    return

        self._renewer = threading.Thread(target=renew, name="lease-renewer", daemon=True)
        self._renewer.start()

    def release(self) -> None:
        """Stop renewing and hand the Lease over at once (rather than letting it expire)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=RETRY_SECONDS + 20)
        if self.lost:
            return
        try:
            current = self.kube.get(LEASE_API, "Lease", self.namespace, self.name)
            spec: dict[str, Any] = dict(current.get("spec") or {})
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update(holderIdentity=None, leaseDurationSeconds=1, renewTime=_micro_time(datetime.now(UTC)))
            self.kube.replace(self._manifest(spec, str(current["metadata"]["resourceVersion"])))
            logger.info(f"Released {self.where}")
        except KubeError as error:
            logger.warning(f"Releasing {self.where} failed (it expires in {self.lease_seconds}s): {error}")


def stop_self() -> None:
    """SIGTERM to this process (kopf stops gracefully), and a hard exit if that takes too long."""
    os.kill(os.getpid(), signal.SIGTERM)
    timer = threading.Timer(STOP_GRACE_SECONDS, os._exit, args=(1,))
    timer.daemon = True
    timer.start()


@contextmanager
def standby_probe(url: str | None) -> Iterator[None]:
    """Answer the liveness probe at `url` while standing by (kopf serves it once it runs)."""
    if not url:
        yield
        return
    parts = urlsplit(url)
    path = parts.path or "/"

    class Probe(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path.split("?", 1)[0] == path
            body = b'{"standby": true}' if ok else b"{}"
            self.send_response(200 if ok else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # probes every few seconds would flood the log

    server = ThreadingHTTPServer((parts.hostname or "0.0.0.0", parts.port or 80), Probe)
    thread = threading.Thread(target=server.serve_forever, name="standby-probe", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
