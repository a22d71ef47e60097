"""The ``tracecheck`` command: run the model manifest (``check``), one model (``tlc``), or SANY.

Exit codes: 0 everything as expected; 1 a verdict differs from the manifest (``check``) or TLC
found a violation or error (``tlc``, ``sany``); 2 bad usage, a bad manifest, or no Java/TLC.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from tracecheck.cli import models, tlc, validation
from tracecheck.errors import TracecheckError

# The docstring above is the --help description. One module per command group: models (check,
# docs, bench), tlc (tlc, sany), validation (validate, campaign, simtraces, contract); common
# holds what they share.

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tracecheck`` console script."""
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:  # everything after -- goes to TLC verbatim
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    args.extra = extra
    console = Console(highlight=False, soft_wrap=True)
    try:
        code: int = args.func(args, console)
    except TracecheckError as exc:
        Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(str(exc))}")
        return 2
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracecheck", description=__doc__)
    sub = parser.add_subparsers(required=True, metavar="COMMAND")
    models.add_check(sub)
    tlc.add_tlc(sub)
    validation.add_validate(sub)
    validation.add_campaign(sub)
    models.add_bench(sub)
    models.add_docs(sub)
    tlc.add_sany(sub)
    validation.add_simtraces(sub)
    validation.add_contract(sub)
    return parser
