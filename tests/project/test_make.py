"""The two commands on a bare machine: what `make demo` and `make test` install and build
(read from `make -n`, so nothing is installed or built), the Debian package a Python without
ensurepip gets, the long steps' progress with the time each took last time, and which tests
`make test-unit` runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _dry_run(target: str, tmp_path: Path) -> list[str]:
    """The commands `make TARGET` would run on a machine without the Python environment."""
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", "-C", str(ROOT), target, f"VENV={tmp_path / 'venv'}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return result.stdout.splitlines()


def _index(commands: list[str], command: str) -> int:
    return next(i for i, line in enumerate(commands) if command in line)


def test_make_demo_installs_prometheus_and_python_and_never_builds_helm(tmp_path: Path) -> None:
    commands = _dry_run("demo", tmp_path)
    text = "\n".join(commands)
    assert "cluster/deps.sh demo" in text  # openssl, curl and Prometheus, before anything uses them
    assert "cluster/deps.sh venv" in text and "pip install" in text
    assert _index(commands, "cluster/deps.sh demo") < _index(commands, "cluster/up.sh")
    assert "build.sh helm" not in text
    assert "deps.sh test" not in text  # no image tools for the demo


def test_make_test_installs_everything_and_builds_helm_before_the_cluster(tmp_path: Path) -> None:
    commands = _dry_run("test", tmp_path)
    text = "\n".join(commands)
    assert "cluster/deps.sh test" in text
    assert "cluster/deps.sh venv" in text
    # Before up.sh, which links it into the cluster's bin folder; before pytest, whose chart tests run it.
    assert _index(commands, "cluster/build.sh helm") < _index(commands, "cluster/up.sh")
    assert _index(commands, "cluster/build.sh helm") < _index(commands, "pytest tests")


def _deps_venv(tmp_path: Path, python: str) -> list[str]:
    """Run `cluster/deps.sh venv` for PYTHON with a fake apt-get: the apt-get installs it asked for."""
    log = tmp_path / "apt.log"
    apt_get = tmp_path / "apt-get"
    apt_get.write_text(f'#!/bin/sh\necho "$*" >>{log}\n')
    apt_get.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "PYTHON": python}
    subprocess.run(["bash", str(ROOT / "cluster" / "deps.sh"), "venv"], env=env, check=True, timeout=30)
    return [line for line in log.read_text().splitlines() if line.startswith("install")] if log.exists() else []


def test_a_python_without_ensurepip_gets_debians_venv_package(tmp_path: Path) -> None:
    # Debian's python3 without python3.X-venv: `import ensurepip` fails, so `python3 -m venv` would.
    python = tmp_path / "python-without-venv"
    python.write_text('#!/bin/sh\ncase "$2" in *ensurepip*) exit 1;; esac\nexec python3 "$@"\n')
    python.chmod(0o755)
    version = subprocess.run(
        ["python3", "-c", "import sys; print(f'{sys.version_info.major}.{sys.version_info.minor}')"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert _deps_venv(tmp_path, str(python)) == [f"install -y -qq --no-install-recommends python{version}-venv"]


def test_a_python_with_ensurepip_installs_nothing(tmp_path: Path) -> None:
    assert _deps_venv(tmp_path, "python3") == []


def _step(cache: Path, *command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "INFERSCALE_CACHE": str(cache)}
    return subprocess.run(
        ["bash", str(ROOT / "cluster" / "progress.sh"), "etcd", "building etcd v3.6.16", *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_a_long_step_says_what_it_builds_and_how_long_it_took_last_time(tmp_path: Path) -> None:
    first = _step(tmp_path, "sleep", "1")
    assert first.returncode == 0
    took = int((tmp_path / "times" / "etcd").read_text())
    assert took in (1, 2)  # whole seconds
    assert first.stdout.splitlines() == ["==> building etcd v3.6.16 (first time here)", f"    done in {took} s"]
    second = _step(tmp_path, "true")
    assert second.stdout.splitlines()[0] == f"==> building etcd v3.6.16 (took {took} s last time)"


def test_a_failed_step_fails_and_keeps_the_last_good_time(tmp_path: Path) -> None:
    assert _step(tmp_path, "sleep", "1").returncode == 0
    took = (tmp_path / "times" / "etcd").read_text()
    failed = _step(tmp_path, "sh", "-c", "exit 3")
    assert failed.returncode == 3
    assert "ERROR: building etcd v3.6.16 failed after" in failed.stderr
    assert (tmp_path / "times" / "etcd").read_text() == took


SLOW_TESTS = {"integration", "e2e", "image"}
"""What needs a server on loopback, the cluster or the built image; `make test` runs them, `make test-unit` not."""


def test_make_test_unit_runs_every_fast_test_folder_and_no_slow_one(tmp_path: Path) -> None:
    [command] = [line for line in _dry_run("test-unit", tmp_path) if "/bin/pytest " in line]
    fast = {arg.removeprefix("tests/") for arg in command.split() if arg.startswith("tests/")}
    folders = {p.name for p in (ROOT / "tests").iterdir() if (p / "__init__.py").exists()}
    assert fast == folders - SLOW_TESTS


def test_the_tests_mirror_the_packages() -> None:
    # tests/operator for operator/inferscale, tests/harness for cluster/harness, tests/loadgen/X for loadgen/X,
    # and the same under tests/integration: a module's tests are found by its path. tests/bench has the tests
    # of bench/'s scripts, which are no package: test_X.py for bench/X.py.
    homes = {"operator": ROOT / "operator" / "inferscale", "harness": ROOT / "cluster" / "harness"}
    scripts = sorted((ROOT / "tests" / "bench").glob("test_*.py"))
    assert scripts and all((ROOT / "bench" / p.name.removeprefix("test_")).exists() for p in scripts)
    for base in (ROOT / "tests", ROOT / "tests" / "integration"):
        for init in sorted(base.rglob("__init__.py")):
            folder = init.parent.relative_to(base)
            if not folder.parts or folder.parts[0] in SLOW_TESTS | {"project"} or folder == Path("bench"):
                continue
            top, *rest = folder.parts
            package = homes.get(top, ROOT / top).joinpath(*rest)
            assert (package / "__init__.py").exists(), f"tests/{folder} mirrors no package ({package} is none)"
