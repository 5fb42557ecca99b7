"""What is inside the image `make image` built: the operator and its pinned dependencies,
run as the chart's non-root user, and nothing else (no loadgen, no compiler, no secrets,
nothing the operator would have to write on its read-only root filesystem)."""

from __future__ import annotations

import re
import stat
from pathlib import PurePosixPath

import pytest

from tests.image.oci import ROOT, Image, load

SITE = "opt/inferscale/lib/python3.11/site-packages"
UID = 10001  # charts/inferscale/templates/deployment.yaml: runAsUser and runAsGroup


@pytest.fixture(scope="module")
def image() -> Image:
    return load()


def _chart_user() -> tuple[int, int]:
    text = (ROOT / "charts" / "inferscale" / "templates" / "deployment.yaml").read_text()
    return int(re.search(r"runAsUser: (\d+)", text)[1]), int(re.search(r"runAsGroup: (\d+)", text)[1])  # type: ignore[index]


def test_runs_as_the_charts_non_root_user(image: Image) -> None:
    assert _chart_user() == (UID, UID)
    assert image.config["User"] == f"{UID}:{UID}"
    # A named user with /tmp as home (kopf asks the OS for the user's name when POD_ID is unset).
    passwd = [line.split(":") for line in image.read("etc/passwd").decode().splitlines()]
    [entry] = [e for e in passwd if e[2] == str(UID)]
    assert entry[0] == "inferscale" and entry[3] == str(UID) and entry[5] == "/tmp"
    assert entry[6] == "/usr/sbin/nologin"
    assert f"inferscale:x:{UID}:" in image.read("etc/group").decode().splitlines()


def test_entry_point_is_the_operator_console_script(image: Image) -> None:
    config = image.config
    assert config["Entrypoint"] == ["inferscale"]
    assert config["Cmd"] == ["operator", "run", "--liveness=http://0.0.0.0:8080/healthz"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["PATH"].split(":")[0] == "/opt/inferscale/bin"
    assert env["HOME"] == "/tmp"
    # The console script runs the venv's python, which is Debian's /usr/bin/python3.
    script = image.read("opt/inferscale/bin/inferscale").decode()
    assert script.startswith("#!/opt/inferscale/bin/python\n")
    assert "from inferscale.cli import main" in script
    python = image.files["opt/inferscale/bin/python"]
    assert python.issym() and python.linkname in ("python3", "/usr/bin/python3")
    assert image.files["usr/bin/python3"].issym() or image.files["usr/bin/python3"].isfile()
    assert f"{SITE}/inferscale/cli.py" in image.files


def test_the_dockerfile_declares_the_same_user_and_entry_point(image: Image) -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"USER {image.config['User']}" in dockerfile
    assert 'ENTRYPOINT ["inferscale"]' in dockerfile
    assert 'CMD ["operator", "run", "--liveness=http://0.0.0.0:8080/healthz"]' in dockerfile


def test_no_loadgen_and_none_of_its_dependencies(image: Image) -> None:
    names = set(image.files)
    leaked = sorted(
        name
        for name in names
        if re.match(rf"{SITE}/(loadgen|httptools|matplotlib)(/|-|$)", name)
        or name in ("opt/inferscale/bin/loadgen", "opt/inferscale/bin/simengine")
    )
    assert leaked == []
    # Nor does anything the image runs import it.
    sources = [name for name in image.small if name.startswith(f"{SITE}/inferscale/") and name.endswith(".py")]
    assert sources, "the inferscale package is missing"
    assert [n for n in sources if re.search(rb"^\s*(import|from) loadgen\b", image.read(n), re.M)] == []


def test_the_pinned_lock_is_what_is_installed(image: Image) -> None:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[re.sub(r"[-_.]+", "_", name).lower()] = version
    installed = {}
    for name in image.files:
        match = re.fullmatch(rf"{SITE}/([^/]+)-([^-/]+)\.dist-info", name)
        if match:
            installed[re.sub(r"[-_.]+", "_", match[1]).lower()] = match[2]
    assert installed.pop("inferscale") == "0.1.0"
    assert installed == pins


def test_no_compiler_and_no_installer(image: Image) -> None:
    compilers = re.compile(r"(.*-)?(gcc|g\+\+|cc|c\+\+|cpp|clang|cc1|ld|as|rustc|go)(-[\d.]+)?")
    found = [
        name
        for name in image.files
        if re.match(r"(usr/(local/)?)?s?bin/|usr/lib/gcc", name) and compilers.fullmatch(PurePosixPath(name).name)
    ]
    assert found == []
    assert not any(name.startswith("usr/lib/gcc/") for name in image.files)
    assert not any(name.endswith("/Python.h") for name in image.files), "C headers: a build could happen in here"
    # pip ran from its wheel at build time and is not in the image.
    assert not any(re.match(rf"{SITE}/(pip|setuptools)(/|-)", name) for name in image.files)


SECRET_NAMES = re.compile(r"(\.env|kubeconfig|\.netrc|\.pypirc|\.git-credentials|id_(rsa|ecdsa|ed25519)|.*\.key)")


def test_no_secrets(image: Image) -> None:
    assert [name for name in image.files if SECRET_NAMES.fullmatch(PurePosixPath(name).name)] == []
    # Dotfiles in a home, but Debian's own shell profiles (base-files' /root/.bashrc, .profile).
    dotfiles = [name for name in image.files if re.match(r"(root|home/[^/]+)/\.", name)]
    assert sorted(dotfiles) == ["root/.bashrc", "root/.profile"]
    assert [name for name in image.files if name.startswith(("var/run/secrets/", "run/secrets/"))] == []
    assert not any(name.endswith("/.kube") or "/.kube/" in name for name in image.files)
    # Not in any file's content either: private keys, service-account tokens (JWTs), Hugging
    # Face tokens. The operator gets its credentials at run time, from mounted Secrets.
    patterns = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----|eyJhbGciOi[A-Za-z0-9_-]{20,}|\bhf_[A-Za-z0-9]{30,}")
    assert [name for name, data in image.small.items() if patterns.search(data)] == []


def test_nothing_to_write_on_a_read_only_root(image: Image) -> None:
    # Every module was compiled at build time: Python never needs to write a .pyc at run time.
    missing = []
    for name in image.files:
        if name.startswith(f"{SITE}/") and name.endswith(".py"):
            path = PurePosixPath(name)
            if f"{path.parent}/__pycache__/{path.stem}.cpython-311.pyc" not in image.files:
                missing.append(name)
    assert missing == []
    # The operator's files belong to root and are not writable by its user.
    writable = [
        name
        for name in image.files
        if name.startswith("opt/inferscale")
        and (image.files[name].uid != 0 or image.files[name].mode & (stat.S_IWGRP | stat.S_IWOTH))
        and not image.files[name].issym()
    ]
    assert writable == []
    # /tmp, the chart's emptyDir, is where HOME and the working directory point; it ships empty.
    assert image.config["WorkingDir"] == "/tmp"
    assert [name for name in image.files if name.startswith("tmp/")] == []
