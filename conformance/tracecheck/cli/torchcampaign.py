"""``tracecheck campaign torch-rendezvous``: the command's output and exit codes.

Exit codes: 0 every run accepted or a known torch defect; 1 some run failed; 3 torch is not
installed or is not 2.13 (the campaign did not run; ``make check`` says it skipped it).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sized
from typing import Final, Protocol, TypeVar

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tracecheck.campaigns.torch_rendezvous import TorchCampaignResult, run_torch_campaign
from tracecheck.cli.progress import ProgressLog
from tracecheck.protocols import load_mapping
from tracecheck.replay.coverage import action_coverage
from tracecheck.replay.report import print_report
from tracecheck.replay.witness import print_witness
from tracecheck.runner.toolchain import toolchain

__all__ = ["TORCH_CAMPAIGN", "TORCH_UNAVAILABLE", "cmd_torch_campaign", "report_torch_campaign"]

#: The campaign's name on the command line.
TORCH_CAMPAIGN: Final = "torch-rendezvous"
#: Exit code when torch 2.13 is not installed.
TORCH_UNAVAILABLE: Final = 3


class _Result(Protocol):
    """A torch campaign's result: its failed runs, and its JSON."""

    @property
    def failed(self) -> Sized: ...

    def model_dump(self, *, mode: str) -> dict[str, object]: ...


R = TypeVar("R", bound=_Result)


def cmd_torch_campaign(args: argparse.Namespace, console: Console) -> int:
    from tracecheck.plugins.torch_harness import (  # noqa: PLC0415 - protoref, lazily
        TorchUnavailableError,
    )

    toolchain()
    log = ProgressLog(console, args.runs)

    def ran(scenario: str, seed: int, seconds: float) -> None:
        if not args.json:
            # named: beside the models and the other campaigns the lines interleave
            log.finished(scenario, f"torch-rendezvous {escape(scenario)} seed {seed}", seconds)
            if log.done == args.runs:
                console.print(f"validating {args.runs} traces with TLC, then the invariants")

    return report_torch_campaign(
        args,
        TORCH_CAMPAIGN,
        lambda: run_torch_campaign(args.runs, args.seed, args.spec_root, out=args.out, on_run=ran),
        lambda result: _print(console, result, args, log),
        TorchUnavailableError,
    )


def report_torch_campaign(
    args: argparse.Namespace,
    name: str,
    campaign: Callable[[], R],
    show: Callable[[R], None],
    unavailable: type[Exception],
) -> int:
    """Run a torch campaign and give its exit code: torch ``unavailable`` (the plug-in's
    TorchUnavailableError) is said on stderr, TORCH_UNAVAILABLE; else the result as --json or
    ``show``n, and 1 if a run failed."""
    try:
        result = campaign()
    except unavailable as err:
        Console(stderr=True, soft_wrap=True).print(
            f"[yellow]campaign {name} not run:[/] {escape(str(err))}"
        )
        return TORCH_UNAVAILABLE
    if args.json:
        print(json.dumps(result.model_dump(mode="json") | {"failed": len(result.failed)}, indent=2))
    else:
        show(result)
    return 1 if result.failed else 0


def _print(
    console: Console, result: TorchCampaignResult, args: argparse.Namespace, log: ProgressLog
) -> None:
    mapping = load_mapping("rendezvous")
    print_report(console, result.report, action_coverage(result.report, mapping, args.spec_root))
    print_witness(console, result.invariants)
    runs = Table(title=f"campaign {TORCH_CAMPAIGN} on torch {result.torch}")
    for column in ("scenario", "seed", "store", "events", "verdict", "detail"):
        runs.add_column(column)
    colour = {"accepted": "green", "known-defect": "yellow", "failed": "red"}
    for r in result.runs:
        verdict = r.outcome if r.defect is None else f"known torch defect {r.defect}"
        store = f"{r.store} (processes)" if r.processes else r.store
        runs.add_row(
            r.scenario,
            str(r.seed),
            store,
            str(r.events),
            f"[{colour[r.outcome]}]{escape(verdict)}[/]",
            escape(r.detail),
        )
    console.print(runs)
    stores = Table(title="per store: traces the spec explains")
    for column in ("store", "traces", "events", "actions"):
        stores.add_column(column)
    for s in result.stores:
        stores.add_row(s.store, str(s.traces), str(s.events), str(len(s.actions)))
    console.print(stores)
    accepted = sum(r.outcome == "accepted" for r in result.runs)
    defects = ", ".join(f"{k}: {n}" for k, n in sorted(result.known_defects.items()))
    console.print(
        f"{len(result.runs)} runs ({result.run_seconds:.1f} s): {accepted} accepted, "
        f"{sum(result.known_defects.values())} known torch defects"
        + (f" ({defects})" if defects else "")
        + (f", [red]{len(result.failed)} failed[/]" if result.failed else ", none failed")
        + (f"; traces in {result.trace_dir}" if result.trace_dir else "")
    )
    console.print(f"campaign {TORCH_CAMPAIGN}: {log.total_line('runs')}")
