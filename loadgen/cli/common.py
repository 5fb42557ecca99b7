"""What every ``loadgen`` subcommand shares: the exit-status table and the one way bad input is reported.

A subcommand returns one of the ``EXIT_*`` codes. Bad input (a flag, a trace, a manifest) raises
``UsageError``; ``fail`` prints it in argparse's shape, and ``loadgen.cli.main`` turns an uncaught one into
``EXIT_USAGE``, so a subcommand only catches it where it has more to do (``run`` still writes its reports).
"""

from __future__ import annotations

import sys

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_STATUS", "EXIT_USAGE", "UsageError", "fail"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

EXIT_STATUS = {
    EXIT_OK: "done",
    EXIT_FAILED: "the target could not be reached, nothing measured succeeded, or no knee was found",
    EXIT_USAGE: "bad input (arguments, a malformed trace or manifest, an impossible setting)",
    EXIT_INTERRUPTED: "interrupted (the reports so far are still written)",
}
"""The one exit-status table: ``loadgen --help`` prints it."""


class UsageError(Exception):
    """Bad input from the command line or a file it names; the message says what and how to fix it."""


def fail(message: str) -> None:
    """Report an error on stderr, as ``loadgen: error: MESSAGE``."""
    print(f"loadgen: error: {message}", file=sys.stderr)
