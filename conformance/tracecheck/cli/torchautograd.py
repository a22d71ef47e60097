"""``tracecheck campaign torch-autograd``: the command's output and exit codes.

Exit codes: 0 every run accepted or a known torch defect; 1 some run failed; 3 torch is not
installed or is not supported (the campaign did not run; ``make check`` says it skipped it).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Final

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tracecheck.campaigns.torch_autograd import TorchAutogradResult, run_torch_autograd_campaign
from tracecheck.cli.torchcampaign import TORCH_UNAVAILABLE
from tracecheck.cli.torchrref import TORCH_RREF, cmd_torch_rref
from tracecheck.runner.toolchain import toolchain

__all__ = ["TORCH_AUTOGRAD", "TORCH_RPC_CAMPAIGNS", "cmd_torch_autograd"]

TORCH_AUTOGRAD: Final = "torch-autograd"


def cmd_torch_autograd(args: argparse.Namespace, console: Console) -> int:
    from tracecheck.plugins.torch_rpc import TorchUnavailableError  # noqa: PLC0415 - lazily

    toolchain()
    try:
        result = run_torch_autograd_campaign(args.runs, args.seed, args.spec_root, out=args.out)
    except TorchUnavailableError as err:
        Console(stderr=True, soft_wrap=True).print(
            f"[yellow]campaign {TORCH_AUTOGRAD} not run:[/] {escape(str(err))}"
        )
        return TORCH_UNAVAILABLE
    if args.json:
        print(json.dumps(result.model_dump(mode="json") | {"failed": len(result.failed)}, indent=2))
    else:
        _print(console, result)
    return 1 if result.failed else 0


def _print(console: Console, result: TorchAutogradResult) -> None:
    title = f"campaign {TORCH_AUTOGRAD} on torch {result.torch} (hidden <= {result.hidden})"
    runs = Table(title=title)
    for column in ("seed", "faults", "events", "states", "verdict", "detail"):
        runs.add_column(column)
    colour = {"accepted": "green", "known-defect": "yellow", "failed": "red"}
    for r in result.runs:
        runs.add_row(
            str(r.seed),
            escape(r.faults),
            str(r.events),
            str(r.states),
            f"[{colour[r.outcome]}]{escape('; '.join(r.defects) or r.outcome)}[/]",
            escape(r.detail),
        )
    console.print(runs)
    cover = Table(title="observed events per op (accepted traces)")
    cover.add_column("op")
    cover.add_column("events")
    for op, n in result.coverage.items():
        cover.add_row(op, str(n) if n else "[yellow]0[/]")
    console.print(cover)
    acts = Table(title="DistAutograd.tla actions in the accepting behaviours (observed, searched)")
    acts.add_column("action")
    acts.add_column("steps")
    for action, n in result.actions.items():
        acts.add_row(action, str(n) if n else "[yellow]0[/]")
    console.print(acts)
    events = sum(r.events for r in result.runs)
    covered = sum(1 for n in result.actions.values() if n)
    console.print(
        f"{len(result.runs)} runs, {events} events, {covered}/{len(result.actions)} actions "
        f"covered, {result.seconds:.1f} s: "
        + f"{sum(r.outcome == 'accepted' for r in result.runs)} accepted, "
        + f"{sum(r.outcome == 'known-defect' for r in result.runs)} known torch defects, "
        + (f"[red]{len(result.failed)} failed[/]" if result.failed else "none failed")
        + (f"; traces in {result.trace_dir}" if result.trace_dir else "")
    )


#: the campaigns of torch's own RPC protocols, by name (``tracecheck campaign NAME``)
TORCH_RPC_CAMPAIGNS: Final[dict[str, Callable[[argparse.Namespace, Console], int]]] = {
    TORCH_RREF: cmd_torch_rref,
    TORCH_AUTOGRAD: cmd_torch_autograd,
}
