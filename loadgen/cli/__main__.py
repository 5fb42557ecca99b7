"""``python -m loadgen.cli``: the same as the ``loadgen`` command."""

import sys

from loadgen.cli.main import main

sys.exit(main())
