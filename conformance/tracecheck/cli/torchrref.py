"""``tracecheck campaign torch-rref``: the command (output and exit codes:
:mod:`tracecheck.cli.torchsession`; torch not 2.13 is exit 3, not run)."""

from __future__ import annotations

import argparse
from typing import Final

from rich.console import Console

from tracecheck.campaigns.torch_rref import run_torch_rref_campaign
from tracecheck.cli.torchsession import cmd_torch_session

__all__ = ["TORCH_RREF", "cmd_torch_rref"]

TORCH_RREF: Final = "torch-rref"


def cmd_torch_rref(args: argparse.Namespace, console: Console) -> int:
    return cmd_torch_session(
        args,
        console,
        TORCH_RREF,
        run_torch_rref_campaign,
        "RRef.tla actions in the accepting behaviours (observed and searched)",
    )
