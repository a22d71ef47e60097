"""What the command groups share: the default spec root, ``--workers``, TLC's live progress,
and how a verdict and a figure print."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import Progress as RichProgress
from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

from tracecheck.errors import TracecheckError
from tracecheck.runner.results import Progress, TLCResult, Verdict
from tracecheck.runner.specs import default_spec_root
from tracecheck.runner.tlc import ProgressCallback

__all__ = [
    "ARTIFACTS_HELP",
    "SPEC_ROOT_HELP",
    "got",
    "live_progress",
    "make_console",
    "num",
    "parse_workers",
    "positive",
    "positive_float",
    "spec_root_of",
]

SPEC_ROOT_HELP = "the folder of the TLA+ specs (default: those installed with tracecheck)"


def spec_root_of(args: argparse.Namespace) -> None:
    """Resolve ``args.spec_root`` when the command has one and it was not given."""
    if getattr(args, "spec_root", False) is None:
        args.spec_root = default_spec_root()


ARTIFACTS_HELP = (
    "where a failure leaves its traces, generated modules and report "
    "(default: $TRACECHECK_ARTIFACTS or artifacts/tracecheck)"
)


def parse_workers(value: str | None) -> int | str | None:
    """``--workers``: a number from 1, or ``auto`` (one TLC worker per core)."""
    if value is None or value == "auto":
        return value
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise TracecheckError(f"--workers takes a number from 1 or auto, not {value!r}")
    return number


def positive(what: str, least: int = 1) -> Callable[[str], int]:
    """An argparse type: an integer from ``least`` (``what`` names it in the error)."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            number = least - 1
        if number < least:
            raise argparse.ArgumentTypeError(f"{what} takes a number from {least}, not {value!r}")
        return number

    return parse


def positive_float(value: str) -> float:
    """An argparse type: a number of seconds above 0."""
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not number > 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"takes a number of seconds above 0, not {value!r}")
    return number


def got(result: TLCResult) -> str:
    if result.verdict is Verdict.SUCCESS:
        return "pass"
    return f"{result.verdict.value} {result.violated or ''}".strip()


def num(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


#: The width of output that is not a terminal (a pipe, a file, a CI log): wide enough that no
#: table is cut or wrapped (rich would assume 80 columns), so each row stays one line.
PIPE_WIDTH = 4096


def make_console(*, stderr: bool = False) -> Console:
    """The console of a command: a terminal's width on a terminal, :data:`PIPE_WIDTH` in a pipe
    or a log; no markup guessing (highlight) and long lines left whole (soft wrap)."""
    console = Console(stderr=stderr, highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console = Console(stderr=stderr, highlight=False, soft_wrap=True, width=PIPE_WIDTH)
    return console


@contextmanager
def live_progress(console: Console | None, label: str) -> Iterator[ProgressCallback]:
    """A spinner with TLC's latest figures; TLC 2.15 reports progress once a minute. Only on a
    terminal (and not with ``console`` None: several runs at once): in a pipe or a log it would
    print a blank line where it stood."""
    if console is None or not console.is_terminal:
        yield lambda _progress: None
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with RichProgress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(f"{label}: starting TLC")

        def update(progress: Progress) -> None:
            rate = progress.states_per_minute
            bar.update(
                task,
                description=(
                    f"{label}: {progress.generated:,} states, {progress.distinct:,} distinct, "
                    f"queue {progress.queue:,}, depth {progress.depth}"
                    + (f", {rate / 60:,.0f} states/s" if rate else "")
                ),
            )

        yield update
