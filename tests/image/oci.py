"""The operator's image as `make image` (image/build.sh) leaves it in build/image: its OCI
layout read with the standard library (config, and every file of every layer), and the
podman command line that runs it on these machines."""

from __future__ import annotations

import functools
import json
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TAG = tomllib.loads((ROOT / "operator" / "pyproject.toml").read_text())["project"]["version"]
LAYOUT = ROOT / "build" / "image" / "oci"
ARCHIVE = ROOT / "build" / "image" / f"inferscale-{TAG}.oci.tar"

SMALL = 64 * 1024  # files kept in memory: scripts, /etc, anything a secret could be in

# crun refuses this machine's hybrid cgroups and podman's default rlimits exceed what the
# sandbox may set: runc with cgroupfs and the host's own limits run it (a real cluster's
# runtime needs none of this).
PODMAN = ["podman", "--runtime=runc", "--cgroup-manager=cgroupfs"]
PODMAN_RUN = [*PODMAN, "run", "--ulimit=nofile=20000:20000", "--ulimit=nproc=1024:1024"]


@dataclass(frozen=True)
class Image:
    config: dict[str, Any]  # the OCI image config's "config" (User, Entrypoint, Cmd, Env, ...)
    files: dict[str, tarfile.TarInfo]  # path without the leading "/", as the last layer leaves it
    layers: tuple[Path, ...]
    small: dict[str, bytes]  # the content of every regular file up to SMALL bytes

    def read(self, path: str) -> bytes:
        assert path in self.small, f"/{path} is not a small regular file of the image"
        return self.small[path]


def _blob(digest: str) -> Path:
    algorithm, _, value = digest.partition(":")
    return LAYOUT / "blobs" / algorithm / value


@functools.cache
def load() -> Image:
    """The built image; fails (does not skip) when it was not built."""
    if not (LAYOUT / "index.json").exists():
        pytest.fail(f"no image in {LAYOUT}: run `make image` (or `make test`, which builds it)")
    index = json.loads((LAYOUT / "index.json").read_text())
    [entry] = [m for m in index["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == TAG]
    manifest = json.loads(_blob(entry["digest"]).read_text())
    config = json.loads(_blob(manifest["config"]["digest"]).read_text())
    layers = tuple(_blob(layer["digest"]) for layer in manifest["layers"])
    files: dict[str, tarfile.TarInfo] = {}
    small: dict[str, bytes] = {}
    for layer in layers:
        with tarfile.open(layer) as tar:
            for member in tar:
                name = member.name.removeprefix("./").rstrip("/")
                base = name.rsplit("/", 1)[-1]
                if base.startswith(".wh."):  # an OCI whiteout: the file is deleted
                    deleted = name.rsplit("/", 1)[0] + "/" + base.removeprefix(".wh.")
                    files.pop(deleted, None)
                    small.pop(deleted, None)
                    continue
                files[name] = member
                small.pop(name, None)
                if member.isfile() and member.size <= SMALL:
                    handle = tar.extractfile(member)
                    assert handle is not None
                    small[name] = handle.read()
    return Image(config=config["config"], files=files, small=small, layers=layers)
