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
    oracle: _Plan | None = None
    reactive: _Plan | None = None

    def summaries(self) -> dict[str, dict[str, Any]]:
        def summary(attained: float) -> dict[str, Any]:
            return {"slo_attainment_feasible": attained, "gpu_seconds": 100.0, "requests": 100, "rejected": 0}

        ours = summary(self.attained) | {"gpu_vs_oracle": 1.2, "gpu_vs_reactive": 1.0}
        return {"inferscale": ours, "oracle": summary(self.oracle_attained)}


@dataclass
class _Run:
    timeseries: tuple[()] = ()


@dataclass
class _Plan:
    """A bound's runs, ``(gpu_seconds, attainment)``; at an attainment between them, the dearer one's cost."""

    frontier: tuple[tuple[float, float], ...]

    def gpu_seconds_at(self, attainment: float) -> tuple[float, bool]:
        reached = [cost for cost, attained in self.frontier if attained >= attainment]
        return (min(reached), True) if reached else (self.frontier[-1][0], False)


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


ORACLE = _Plan(((80.0, 0.95), (100.0, 0.97), (110.0, 0.99)))


@pytest.mark.parametrize(
    ("reactive", "at_floor", "needs_foresight"),
    [
        # The floor is 96.3%. Reacting exactly reaches it at 97% for 112 GPU-s, where the oracle spends 100.
        (((90.0, 0.94), (112.0, 0.97)), 1.12, False),
        # It reaches it only at 99%, for 140 where the oracle spends 110: the targets together need foresight.
        (((90.0, 0.94), (140.0, 0.99)), 140 / 110, True),
        # None of its runs reaches the floor.
        (((90.0, 0.94), (150.0, 0.96)), None, True),
    ],
)
def test_a_cell_where_even_exact_reaction_misses_the_targets_needs_foresight(
    reactive: tuple[tuple[float, float], ...], at_floor: float | None, needs_foresight: bool
) -> None:
    cell = _Cell(0.97, 0.973, oracle=ORACLE, reactive=_Plan(reactive))
    verdict = policy_matrix.judge(cell)  # type: ignore[arg-type]
    assert verdict["reactive_at_floor"] == (None if at_floor is None else pytest.approx(at_floor))
    assert verdict["needs_foresight"] is needs_foresight
    # Without a reactive run, or an oracle to hold it against, there is nothing to say either way.
    assert policy_matrix.judge(_Cell(0.97, 0.973, oracle=ORACLE))["needs_foresight"] is False  # type: ignore[arg-type]
    unmeasured = _Cell(0.97, 0.973, reactive=_Plan(reactive))
    assert policy_matrix.judge(unmeasured)["needs_foresight"] is False  # type: ignore[arg-type]
