"""The ``loadgen`` entry point: one parser, one subcommand per job, one exit-status table.

To add a subcommand, write ``add_NAME_parser(subparsers)`` setting ``func`` to ``cmd_NAME(args) -> int`` and
list the adder in ``SUBCOMMANDS``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from loadgen.cli import measure, simulate
from loadgen.cli.common import EXIT_OK, EXIT_STATUS, EXIT_USAGE, UsageError, fail

__all__ = ["SUBCOMMANDS", "build_parser", "main"]

SUBCOMMANDS: list[Callable[[Any], None]] = [
    measure.add_run_parser,
    measure.add_knee_parser,
    measure.add_sweep_parser,
    simulate.add_parser,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loadgen",
        description="Load generator for LLM serving: open-loop streaming traffic, trace replay, knee finding, "
        "and scaling policies compared in simulated time.",
        epilog="Exit status: " + ", ".join(f"{code} {meaning}" for code, meaning in EXIT_STATUS.items()) + ".",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except UsageError as err:
        fail(str(err))
        return EXIT_USAGE
    except BrokenPipeError:  # the output went to a pager or `head` that quit: not an error of ours
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps Python's exit-time flush quiet
        return EXIT_OK
    return code
