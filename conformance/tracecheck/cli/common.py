"""What the command groups share: the default spec root, ``--workers``, TLC's live progress,
and how a verdict and a figure print."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import Progress as RichProgress
from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

from tracecheck.errors import TracecheckError
from tracecheck.runner.results import Progress, TLCResult, Verdict
from tracecheck.runner.tlc import ProgressCallback

__all__ = ["ARTIFACTS_HELP", "DEFAULT_SPEC_ROOT", "got", "live_progress", "num", "parse_workers"]

DEFAULT_SPEC_ROOT = Path("spec")


ARTIFACTS_HELP = (
    "where a failure leaves its traces, generated modules and report "
    "(default: $TRACECHECK_ARTIFACTS or artifacts/tracecheck)"
)


def parse_workers(value: str | None) -> int | str | None:
    if value is None or value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise TracecheckError(f"--workers takes a number or auto, not {value!r}") from None


def got(result: TLCResult) -> str:
    if result.verdict is Verdict.SUCCESS:
        return "pass"
    return f"{result.verdict.value} {result.violated or ''}".strip()


def num(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


@contextmanager
def live_progress(console: Console, label: str) -> Iterator[ProgressCallback]:
    """A spinner with TLC's latest figures; TLC 2.15 reports progress once a minute."""
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
