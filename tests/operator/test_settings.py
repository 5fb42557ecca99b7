"""One home for the scaling loop's timing (inferscale.settings): the operator, its policy's defaults, the
queries, the chart, the README and the fleet simulator all say the same tick, window and staleness."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
import yaml
from inferscale.config import OperatorConfig
from inferscale.policy import DEFAULT_STALE_AFTER, DEFAULT_TTFT_WINDOW
from inferscale.promql import QueryOptions

from loadgen.cli import simulate as simulate_cli
from loadgen.engine.profiles import get_profile
from loadgen.fleet.compare import Settings, default_spec
from loadgen.fleet.policies import InferscalePolicy
from loadgen.fleet.sim import FleetConfig

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "synthetic_trace.csv"
SLO = 1.0


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("INFERSCALE_TICK_SECONDS", "INFERSCALE_TTFT_WINDOW_SECONDS", "INFERSCALE_STALE_AFTER_SECONDS"):
        monkeypatch.delenv(name, raising=False)


def test_the_simulator_ticks_and_windows_as_the_deployed_operator_does() -> None:
    operator = OperatorConfig()
    assert (operator.tick_seconds, operator.ttft_window_seconds, operator.stale_after_seconds) == (15, 120, 60)
    chart = yaml.safe_load((ROOT / "charts/inferscale/values.yaml").read_text())
    assert chart["tickSeconds"] == operator.tick_seconds  # the chart sets it explicitly
    assert (operator.ttft_window, operator.stale_after) == (DEFAULT_TTFT_WINDOW, DEFAULT_STALE_AFTER)
    for queries in (operator.query_options(), QueryOptions()):
        assert (queries.window_seconds, queries.max_sample_age_seconds) == (120, 60)
    profile = get_profile("a10g-llama3-8b-awq")
    settings = Settings(profile=profile, spec=default_spec(profile, SLO), slo_ttft_s=SLO)
    assert (settings.tick_s, settings.ttft_window_s, settings.stale_after_s) == (15, 120, 60)
    for fleet in (settings.fleet(1), FleetConfig(profile=profile)):
        assert (fleet.tick_s, fleet.ttft_window_s) == (15, 120)
    policy = InferscalePolicy(settings.spec)
    assert (policy.ttft_window, policy.stale_after) == (DEFAULT_TTFT_WINDOW, DEFAULT_STALE_AFTER)
    parser = argparse.ArgumentParser(prog="loadgen")
    simulate_cli.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["simulate", "--trace", str(TRACE), "--json", "out.json"])
    assert (args.tick, args.ttft_window) == (15, 120)


def test_the_readme_states_the_operators_defaults() -> None:
    table = re.findall(r"^\| `INFERSCALE_(\w+)`[^|]*\| (\S+) \|", (ROOT / "README.md").read_text(), re.MULTILINE)
    stated = {name.lower(): default for name, default in table}
    operator = OperatorConfig()
    for field in ("tick_seconds", "ttft_window_seconds", "stale_after_seconds"):
        assert float(stated[field]) == getattr(operator, field), field
