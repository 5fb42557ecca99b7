"""Small helpers every test suite (and bench/tick.py) shares: a free loopback port, and polling."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any


def free_port() -> int:
    """A loopback port with nothing listening on it (bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
