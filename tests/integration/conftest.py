"""Integration fixtures: a real Prometheus (Debian's package), started by the tests on loopback.

The tests never use the packaged systemd service or /etc/prometheus: each Prometheus here
runs from its own config file and temporary storage on a free 127.0.0.1 port, and is
stopped when the tests end.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

PROMETHEUS = Path("/usr/bin/prometheus")
READY_TIMEOUT = 30.0


@pytest.fixture(scope="session")
def prometheus_binary() -> Path:
    if not PROMETHEUS.is_file():
        pytest.fail(
            f"{PROMETHEUS} is missing: the integration tests need Debian's prometheus package; "
            "run `make test`, which installs it (or `apt-get install -y prometheus`)",
            pytrace=False,
        )
    return PROMETHEUS


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(what: str, probe: Callable[[], Any], *, timeout: float = 30.0, interval: float = 0.25) -> Any:
    """Poll until probe() returns something truthy; fail naming what never happened."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last seen: {last!r}")


class PrometheusProcess:
    """One Prometheus server with the given scrape configs, scraping every second."""

    def __init__(self, binary: Path, workdir: Path, scrape_configs: list[dict[str, Any]]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "prometheus.yml"
        config.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                    "scrape_configs": scrape_configs,
                }
            )
        )
        self.log = workdir / "prometheus.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    str(binary),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1h",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for(f"Prometheus on {self.url} to be ready", self._ready, timeout=READY_TIMEOUT)
        except AssertionError:
            self.stop()
            raise AssertionError(f"Prometheus did not become ready; its log:\n{self.log.read_text()[-3000:]}") from None

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"Prometheus exited with {self.process.returncode}:\n{self.log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def self_metric(self, name: str, **labels: str) -> float:
        """A sample of Prometheus' own /metrics (e.g. its count of API requests)."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=5) as response:
            text = response.read().decode()
        wanted = [f'{key}="{value}"' for key, value in labels.items()]
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name + "{") and all(w in line for w in wanted):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


@pytest.fixture(scope="module")
def start_prometheus(
    prometheus_binary: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[list[dict[str, Any]]], PrometheusProcess]]:
    """Start a Prometheus with these scrape configs; every one started is stopped afterwards."""
    started: list[PrometheusProcess] = []

    def start(scrape_configs: list[dict[str, Any]]) -> PrometheusProcess:
        prometheus = PrometheusProcess(prometheus_binary, tmp_path_factory.mktemp("prometheus"), scrape_configs)
        started.append(prometheus)
        return prometheus

    yield start
    for prometheus in started:
        prometheus.stop()
