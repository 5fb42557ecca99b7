"""Local processes: a free loopback port, a child that dies with its parent, stopping one, and waiting.

Used by podrunner (an engine per pod), harness.testing's Prometheus launcher, bench/tick.py and the tests.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from typing import Any

__all__ = ["die_with_parent", "free_port", "stop_process", "wait_for"]

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def free_port() -> int:
    """A loopback port with nothing listening on it (bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def die_with_parent() -> None:
    """A Popen `preexec_fn`: the child gets SIGTERM when its parent dies, however it dies, even from SIGKILL
    (Linux; elsewhere a no-op), so no process outlives the one that started it."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_process(process: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL after 10 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def wait_for(what: str, probe: Callable[[], Any], *, timeout: float = 60, interval: float = 0.5) -> Any:
    """Poll until probe() returns something truthy; fail naming what never happened.

    A probe may raise AssertionError while the thing is not there yet (e.g. kubectl get of an
    object not created yet); that counts as "not yet" and is what the failure shows last.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except AssertionError as error:
            last = error
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last seen: {last!r}")
