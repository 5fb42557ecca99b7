"""``bench/matrix_cells.py``: the matrix's traces and cells, and what ``--reuse`` keeps a cell's comparison
under."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matrix_cells
import pytest


def test_trace_names_expand_ranges_of_each_drawn_family_and_refuse_the_unknown() -> None:
    names = ["spikes", "random-2..3", "wander-1..2", "wander-7", "code-3..4"]
    expanded = ["spikes", "random-2", "random-3", "wander-1", "wander-2", "wander-7", "code-3", "code-4"]
    assert matrix_cells.expand(names) == expanded
    assert set(matrix_cells.traces(["wander-1", "random-1"])) == {"wander-1", "random-1"}
    with pytest.raises(SystemExit, match="unknown trace 'drift-1'"):
        matrix_cells.traces(["drift-1"])


def test_a_change_to_the_report_keeps_the_kept_cells_and_one_to_the_cells_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A cell is kept under a digest of what its baselines run: the traces and cells (bench/matrix_cells.py), not
    # the verdicts and the printing of policy_matrix.py. Each is read as if edited, one at a time.
    before = matrix_cells.baseline_digest()
    read_bytes = Path.read_bytes

    def edited(name: str) -> Callable[[Path], bytes]:
        return lambda path: read_bytes(path) + (b"\n# edited\n" if path.name == name else b"")

    monkeypatch.setattr(Path, "read_bytes", edited("policy_matrix.py"))
    assert matrix_cells.baseline_digest() == before
    monkeypatch.setattr(Path, "read_bytes", edited("matrix_cells.py"))
    assert matrix_cells.baseline_digest() != before


def test_a_cell_is_named_by_its_gpu_and_slo_and_a_name_that_is_neither_is_refused() -> None:
    assert [c.name for c in matrix_cells.CELLS] == ["a10g-1s", "a10g-3s", "h100-1s"]
    assert matrix_cells.parse_cell("a10g-2s") == matrix_cells.Cell("a10g-2s", "a10g-llama3-8b-awq", 2.0)
    assert matrix_cells.parse_cell("h100-0.5s").slo_s == 0.5
    for name in ("t4-1s", "a10g-1", "a10g-fasts", "h100-0s", "h100-infs", "a10g"):
        with pytest.raises(
            ValueError, match=rf"unknown cell '{name}': name one as <gpu>-<SLO>s, the gpu one of a10g, h100"
        ):
            matrix_cells.parse_cell(name)
