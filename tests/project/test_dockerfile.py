"""The Dockerfile's recipe (no Docker engine builds it here; `make image` builds the same
image another way, checked in tests/image): a non-root multi-stage build of the pinned
dependencies, with the same entry point the tests run."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
PYPROJECT = tomllib.loads((ROOT / "operator" / "pyproject.toml").read_text())


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def _final_stage() -> list[tuple[str, str]]:
    instructions = _instructions()
    last_from = max(i for i, (op, _) in enumerate(instructions) if op == "FROM")
    return instructions[last_from:]


def _lock() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, _, version = line.partition("==")
        assert version, f"requirements.lock: {line!r} is not pinned with =="
        pins[canonicalize_name(name)] = Version(version)
    return pins


def test_multi_stage_on_python_slim() -> None:
    bases = [args.split()[0] for op, args in _instructions() if op == "FROM"]
    assert len(bases) >= 2
    assert all(base == "python:3.11-slim" for base in bases)
    # The runtime stage gets the built venv only, not the sources or the build tools.
    copies = [args for op, args in _final_stage() if op == "COPY"]
    assert copies == ["--from=build /opt/inferscale /opt/inferscale"]


def test_runs_as_a_non_root_user() -> None:
    users = [args for op, args in _final_stage() if op == "USER"]
    assert users, "the runtime stage sets no USER: it would run as root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "USER must be a numeric non-zero UID (runAsNonRoot checks it)"


def test_entry_point_is_the_console_script_the_tests_run() -> None:
    [entrypoint] = [json.loads(args) for op, args in _final_stage() if op == "ENTRYPOINT"]
    [command] = [json.loads(args) for op, args in _final_stage() if op == "CMD"]
    assert PYPROJECT["project"]["scripts"][entrypoint[0]] == "inferscale.cli:main"
    assert entrypoint == ["inferscale"]
    assert command[:2] == ["operator", "run"]


def test_dependencies_install_from_the_lock_only() -> None:
    runs = " ".join(args for op, args in _instructions() if op == "RUN")
    assert "--no-deps --require-virtualenv -r requirements.lock" in runs
    assert "pip check" in runs
    assert re.search(r"setuptools==\d", runs), "the build backend is pinned too"


def test_the_lock_pins_every_runtime_dependency_within_its_range() -> None:
    pins = _lock()
    for spec in PYPROJECT["project"]["dependencies"]:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"requirements.lock does not pin {requirement.name}: run `make lock`"
        assert pins[name] in requirement.specifier, f"requirements.lock pins {name}=={pins[name]}, outside {spec}"
    assert "inferscale" not in pins
