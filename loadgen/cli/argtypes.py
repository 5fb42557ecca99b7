"""argparse value types shared by the loadgen commands; each error says what was expected."""

from __future__ import annotations

import argparse
import importlib.util
import math
from pathlib import Path

from loadgen.client.slo import Slos, parse_slos


def positive(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def non_negative(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def png_path(text: str) -> Path:
    """Where to draw a PNG; refused up front, before any run, when the plotting extra is missing."""
    if importlib.util.find_spec("matplotlib") is None:
        raise argparse.ArgumentTypeError(
            "drawing a PNG needs matplotlib, which is not installed: pip install 'inferscale-loadgen[plots]'"
        )
    return Path(text)


def slos(text: str) -> Slos:
    """``--slo ttft=0.5,itl=50ms,e2e=10`` (see ``loadgen.client.slo``)."""
    try:
        return parse_slos(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
