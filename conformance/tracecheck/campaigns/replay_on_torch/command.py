"""The ``replay-on-torch`` command's arguments and output (registered by ``tracecheck.cli``).

Exit codes: 0 every replayed model reproduced or is not reproducible with a reason; 1 some
model's torch run did not show the symptom; 3 torch is not installed.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tracecheck.campaigns.replay_on_torch.recipes import RECIPES
from tracecheck.campaigns.replay_on_torch.run import (
    ReplayResult,
    pytorch_models,
    record,
    replay_model,
)
from tracecheck.errors import TracecheckError
from tracecheck.runner.toolchain import toolchain

__all__ = ["add_replay_on_torch"]

TORCH_UNAVAILABLE = 3


def add_replay_on_torch(sub: Any) -> None:
    """Register ``tracecheck replay-on-torch``."""
    p = sub.add_parser(
        "replay-on-torch",
        help="a PyTorch-variant must-fail model: TLC, then torch driven along its counterexample",
    )
    p.add_argument("model", nargs="*", help="model names (default with --all: every one)")
    p.add_argument("--all", action="store_true", help="every PyTorch-variant must-fail model")
    p.add_argument(
        "--record", action="store_true", help="merge the verdicts into spec/torch_replay.json"
    )
    p.add_argument("--spec-root", type=Path, help="the spec folder (default: the checkout's)")
    p.set_defaults(func=_cmd)


def _cmd(args: argparse.Namespace, console: Console) -> int:
    from tracecheck.plugins.torch_harness import TorchUnavailableError  # noqa: PLC0415 - lazily

    names = pytorch_models(args.spec_root) if args.all else list(args.model)
    if not names:
        raise TracecheckError("name a model, or pass --all")
    missing = sorted(set(pytorch_models(args.spec_root)) - set(RECIPES))
    if missing:
        raise TracecheckError(f"PyTorch-variant models without a replay entry: {missing}")
    toolchain()
    results: list[ReplayResult] = []
    try:
        for name in names:
            result = replay_model(name, args.spec_root)
            _line(console, result)
            results.append(result)
    except TorchUnavailableError as err:
        Console(stderr=True).print(f"[yellow]replay-on-torch not run:[/] {escape(str(err))}")
        return TORCH_UNAVAILABLE
    table = Table(title="counterexamples replayed on torch")
    for column in ("model", "verdict", "torch", "detail"):
        table.add_column(column)
    for r in results:
        table.add_row(r.model, r.verdict, r.torch or "-", escape(r.detail))
    console.print(table)
    if args.record:
        console.print(f"wrote {record(results, args.spec_root)}")
    return 1 if any(r.verdict == "not reproduced" for r in results) else 0


def _line(console: Console, r: ReplayResult) -> None:
    colour = {
        "reproduced": "green",
        "not reproduced": "red",
        "not reproducible": "yellow",
        "not replayed": "yellow",
    }
    console.print(f"[{colour[r.verdict]}]{r.verdict}[/] {r.model}: {escape(r.detail)}")
