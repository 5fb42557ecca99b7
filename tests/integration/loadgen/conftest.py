"""Simengines in their own processes on loopback, so the client under test has its event loop to itself."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

StartEngine = Callable[..., tuple[subprocess.Popen[str], str]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def simengine() -> Iterator[StartEngine]:
    """``simengine("--profile", "test", ...)`` -> (process, base URL); all are stopped after the test."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> tuple[subprocess.Popen[str], str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "loadgen.engine.server", "--port", "0", "--cold-start", "0", *args],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
        )
        procs.append(proc)
        assert proc.stderr is not None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            match = re.search(r" on (http://127\.0\.0\.1:\d+) ", line)
            if match:
                return proc, match.group(1)
        raise AssertionError(f"simengine {' '.join(args)} did not start")

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()
