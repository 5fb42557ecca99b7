"""Debian's Prometheus on loopback, for the integration tests and bench/tick.py.

Each server runs from its own config file and storage in a directory the caller gives, on a free
127.0.0.1 port; never the packaged systemd service or /etc/prometheus. The caller stops it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.support import free_port

PROMETHEUS = Path("/usr/bin/prometheus")
_PR_SET_PDEATHSIG = 1


class PrometheusFailed(RuntimeError):
    """Prometheus exited, or did not become ready in time; the message ends with its log."""


def die_with_parent() -> None:
    """A Popen `preexec_fn`: the child gets SIGTERM when its parent dies, however it dies (Linux)."""
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


class Prometheus:
    """One Prometheus server with this config (the contents of prometheus.yml), ready once constructed.

    Config, storage (`data/`) and log (`prometheus.log`) are in `workdir`. Raises PrometheusFailed,
    having stopped the process, if it exits or is not ready within `ready_timeout` seconds.
    """

    def __init__(
        self,
        workdir: Path,
        config: dict[str, Any],
        *,
        binary: Path = PROMETHEUS,
        ready_timeout: float = 30.0,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config))
        self.log = workdir / "prometheus.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    str(binary),
                    f"--config.file={self.config}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1h",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=preexec_fn,
            )
        deadline = time.monotonic() + ready_timeout
        while not self._ready():
            if time.monotonic() >= deadline:
                self.stop()
                raise PrometheusFailed(
                    f"Prometheus on {self.url} was not ready after {ready_timeout:g}s; its log:\n{self.log_tail()}"
                )
            time.sleep(0.25)

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise PrometheusFailed(f"Prometheus exited with {self.process.returncode}; its log:\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The result of an instant query, as Prometheus' HTTP API returns it."""
        data = urllib.parse.urlencode({"query": promql}).encode()
        with urllib.request.urlopen(f"{self.url}/api/v1/query", data=data, timeout=30) as response:
            answer = json.load(response)
        return list(answer["data"]["result"])

    def scalar(self, promql: str) -> float | None:
        """The first value of an instant query, or None if it found nothing."""
        result = self.query(promql)
        return float(result[0]["value"][1]) if result else None

    def self_metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of one of Prometheus' own metrics (its /metrics) that carry these labels."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as response:
            text = response.read().decode()
        wanted = [f'{key}="{value}"' for key, value in labels.items()]
        total = 0.0
        for line in text.splitlines():
            if (line.startswith(name + "{") or line.startswith(name + " ")) and all(w in line for w in wanted):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def stop(self) -> None:
        stop_process(self.process)
