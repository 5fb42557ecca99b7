"""The pinned helm that `make helm` builds (cluster/build.sh helm; version in cluster/versions.env), for the
chart's tests. `make test` builds it first; the demo never needs it, so a machine may not have it yet."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "inferscale"


def helm_path() -> Path:
    versions = dict(
        line.split("=", 1) for line in (ROOT / "cluster" / "versions.env").read_text().splitlines() if "=" in line
    )
    cache = Path(os.environ.get("INFERSCALE_CACHE", Path.home() / ".cache" / "inferscale"))
    return cache / "bin" / f"helm-{versions['HELM_VERSION']}" / "helm"


def requires_helm() -> pytest.MarkDecorator:
    """Skip, saying how to build it, where helm is not built (`make test` builds it, so there it runs)."""
    path = helm_path()
    return pytest.mark.skipif(not path.exists(), reason=f"helm is not built ({path}): `make helm` builds it")


def helm(*args: str, check: bool = True, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    result = subprocess.run([str(helm_path()), *args], capture_output=True, text=True, timeout=120, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed: {result.stderr.strip()}")
    return result


def render(*args: str, release: str = "inferscale", namespace: str = "ops") -> list[dict[str, Any]]:
    """`helm template` of the chart with extra arguments (e.g. "--set", "replicas=3"): the manifests."""
    out = helm("template", release, str(CHART), "--namespace", namespace, *args).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def find(manifests: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)]
