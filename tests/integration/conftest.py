"""Integration fixtures: a real Prometheus (Debian's package), started by the tests on loopback.

Each Prometheus here is harness.testing's: its own config file and temporary storage on a
free 127.0.0.1 port, never the packaged systemd service or /etc/prometheus. Every one is
stopped when the tests end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.testing import PROMETHEUS, Prometheus


@pytest.fixture(scope="session")
def prometheus_binary() -> Path:
    if not PROMETHEUS.is_file():
        pytest.fail(
            f"{PROMETHEUS} is missing: the integration tests need Debian's prometheus package; "
            "run `make test`, which installs it (or `apt-get install -y prometheus`)",
            pytrace=False,
        )
    return PROMETHEUS


@pytest.fixture(scope="module")
def start_prometheus(
    prometheus_binary: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[list[dict[str, Any]]], Prometheus]]:
    """Start a Prometheus with these scrape configs, scraping every second; every one started is stopped afterwards."""
    started: list[Prometheus] = []

    def start(scrape_configs: list[dict[str, Any]]) -> Prometheus:
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "scrape_configs": scrape_configs,
        }
        prometheus = Prometheus(tmp_path_factory.mktemp("prometheus"), config, binary=prometheus_binary)
        started.append(prometheus)
        return prometheus

    yield start
    for prometheus in started:
        prometheus.stop()
