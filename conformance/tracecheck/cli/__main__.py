"""``python -m tracecheck.cli``: the ``tracecheck`` command."""

import sys

from tracecheck.cli import main

sys.exit(main())
