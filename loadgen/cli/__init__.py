"""The ``loadgen`` command line: one entry point (``main``), one usage error, one exit-status table.

* ``main``: the parser and the dispatch to a subcommand.
* ``common``: the exit-status table, ``UsageError`` and how an error is printed.
* ``measure``: ``run``, ``knee`` and ``sweep`` against a live target.
* ``simulate``: every scaling policy on one trace in simulated time.
* ``argtypes``: argparse value types whose errors say what was expected.
"""

from loadgen.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UsageError
from loadgen.cli.main import build_parser, main

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "UsageError", "build_parser", "main"]
