"""``tracecheck campaign torch-autograd``: the command (output and exit codes:
:mod:`tracecheck.cli.torchsession`), and the registry of the torch RPC campaigns."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Final

from rich.console import Console

from tracecheck.campaigns.torch_autograd import run_torch_autograd_campaign
from tracecheck.cli.torchrref import TORCH_RREF, cmd_torch_rref
from tracecheck.cli.torchsession import cmd_torch_session

__all__ = ["TORCH_AUTOGRAD", "TORCH_RPC_CAMPAIGNS", "cmd_torch_autograd"]

TORCH_AUTOGRAD: Final = "torch-autograd"


def cmd_torch_autograd(args: argparse.Namespace, console: Console) -> int:
    return cmd_torch_session(
        args,
        console,
        TORCH_AUTOGRAD,
        run_torch_autograd_campaign,
        "DistAutograd.tla actions in the accepting behaviours (observed, searched)",
    )


#: the campaigns of torch's own RPC protocols, by name (``tracecheck campaign NAME``)
TORCH_RPC_CAMPAIGNS: Final[dict[str, Callable[[argparse.Namespace, Console], int]]] = {
    TORCH_RREF: cmd_torch_rref,
    TORCH_AUTOGRAD: cmd_torch_autograd,
}
