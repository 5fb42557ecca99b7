"""``bench/policy_matrix.py``'s verdict on one cell: the attainment floor a user is promised, and how far
below it a cell falls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import policy_matrix
import pytest


@dataclass
class _Cell:
    """What ``judge`` reads of a ``Comparison``: its summaries, feasible requests and inferscale's ticks."""

    attained: float
    oracle_attained: float
    feasible: tuple[int, ...] = tuple(range(100))
    results: dict[str, Any] = field(default_factory=lambda: {"inferscale": _Run()})

    def summaries(self) -> dict[str, dict[str, Any]]:
        def summary(attained: float) -> dict[str, Any]:
            return {"slo_attainment_feasible": attained, "gpu_seconds": 100.0, "requests": 100, "rejected": 0}

        ours = summary(self.attained) | {"gpu_vs_oracle": 1.2, "gpu_vs_reactive": 1.0}
        return {"inferscale": ours, "oracle": summary(self.oracle_attained)}


@dataclass
class _Run:
    timeseries: tuple[()] = ()


@pytest.mark.parametrize(
    ("attained", "oracle_attained", "met", "shortfall"),
    [
        (0.946, 0.973, False, 0.017),  # the floor is the oracle's less a point: 96.3%
        (0.963, 0.973, True, 0.0),
        (0.946, 0.955, False, 0.004),  # ... and at least 95% where the oracle got there
        (0.930, 0.940, True, 0.0),  # the oracle's less a point where it did not
    ],
)
def test_a_cell_below_its_attainment_floor_says_by_how_much(
    attained: float, oracle_attained: float, met: bool, shortfall: float
) -> None:
    verdict = policy_matrix.judge(_Cell(attained, oracle_attained))  # type: ignore[arg-type]
    assert verdict["attainment_met"] is met
    assert verdict["shortfall"] == pytest.approx(shortfall)


def test_trace_names_expand_ranges_of_either_random_family_and_refuse_the_unknown() -> None:
    names = ["spikes", "random-2..3", "wander-1..2", "wander-7"]
    assert policy_matrix.expand(names) == ["spikes", "random-2", "random-3", "wander-1", "wander-2", "wander-7"]
    assert set(policy_matrix.traces(["wander-1", "random-1"])) == {"wander-1", "random-1"}
    with pytest.raises(SystemExit, match="unknown trace 'drift-1'"):
        policy_matrix.traces(["drift-1"])
