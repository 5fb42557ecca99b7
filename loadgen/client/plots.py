"""What every PNG the load generator writes shares: matplotlib without a display, and the saving."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (files only: these run on servers and in CI, with no display).

    Imported here, not at module level: matplotlib is the optional `plots` extra and slow to import.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Figure, path: str | Path, *, dpi: int = 100) -> Path:
    """Write the figure (making its folder), free it, and return the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)
    pyplot().close(fig)
    return out
