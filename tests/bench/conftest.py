"""The benches are scripts, not a package: run as ``python bench/X.py`` their folder is on ``sys.path``, which is
how ``bench/timeline.py`` imports its sibling ``matrix_cells``. The tests import them the same way."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = str(Path(__file__).resolve().parents[2] / "bench")
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)
