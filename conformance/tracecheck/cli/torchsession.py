"""The output and exit codes of the black-box torch campaigns (``torch-rref``,
``torch-autograd``; :mod:`tracecheck.campaigns.torch_session`).

Exit codes: 0 every run accepted or a known torch defect; 1 some run failed; 3 torch is not
installed or is not supported (the campaign did not run; ``make check`` says it skipped it).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tracecheck.campaigns.torch_session import TorchSessionResult
from tracecheck.cli.torchcampaign import report_torch_campaign
from tracecheck.runner.toolchain import toolchain

__all__ = ["cmd_torch_session"]

#: (runs, first seed, spec root, out=...) -> the campaign's result
Campaign = Callable[..., TorchSessionResult[Any]]


def cmd_torch_session(
    args: argparse.Namespace, console: Console, name: str, campaign: Campaign, actions: str
) -> int:
    """Run ``campaign`` for ``tracecheck campaign NAME``; ``actions`` titles its table of spec
    actions."""
    from tracecheck.plugins.torch_rpc import TorchUnavailableError  # noqa: PLC0415 - lazily

    toolchain()
    return report_torch_campaign(
        args,
        name,
        lambda: campaign(args.runs, args.seed, args.spec_root, out=args.out),
        lambda result: _print(console, name, result, actions),
        TorchUnavailableError,
    )


def _print(console: Console, name: str, result: TorchSessionResult[Any], actions: str) -> None:
    runs = Table(title=f"campaign {name} on torch {result.torch} (hidden <= {result.hidden})")
    for column in ("seed", "faults", "events", "states", "verdict", "detail"):
        runs.add_column(column)
    colour = {"accepted": "green", "known-defect": "yellow", "failed": "red"}
    for r in result.runs:
        runs.add_row(
            str(r.seed),
            escape(r.faults),
            str(r.events),
            str(r.states),
            f"[{colour[r.outcome]}]{escape('; '.join(r.known) or r.outcome)}[/]",
            escape(r.detail),
        )
    console.print(runs)
    cover = Table(title="observed events per op (accepted traces)")
    cover.add_column("op")
    cover.add_column("events")
    for op, n in result.coverage.items():
        cover.add_row(op, str(n) if n else "[yellow]0[/]")
    console.print(cover)
    acts = Table(title=actions)
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
