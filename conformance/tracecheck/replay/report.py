"""The human-readable report of a validation: verdicts, explanations, coverage and figures."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tracecheck.replay.coverage import CoverageSummary, coverage_table
from tracecheck.replay.explain import Explanation
from tracecheck.replay.verdicts import TraceVerdict, ValidationReport

__all__ = ["print_report"]


def print_report(
    console: Console, report: ValidationReport, coverage: CoverageSummary | None = None
) -> None:
    """Verdict lines, then one block per rejected trace, then coverage and figures.

    With ``coverage`` the table lists every spec action: its events, or why it has none.
    """
    for verdict in report.verdicts:
        if verdict.accepted:
            console.print(f"[green]accepted[/] {escape(verdict.source)} ({verdict.events} events)")
        else:
            _rejected(console, verdict)
    console.print(_coverage_table(report) if coverage is None else coverage_table(coverage))
    accepted = sum(v.accepted for v in report.verdicts)
    console.print(
        f"{accepted}/{len(report.verdicts)} accepted; {report.events:,} events in "
        f"{report.seconds:.1f} s ({report.rate:,.0f} events/s) over {report.tlc_runs} TLC run(s)"
        f" ({report.simulated} accepted by the simulation pass)"
    )


def _coverage_table(report: ValidationReport) -> Table:
    table = Table(title=f"{report.protocol} coverage", caption="events of accepted traces")
    table.add_column("action")
    table.add_column("events", justify="right")
    for action, count in report.coverage.items():
        table.add_row(action, f"{count:,}")
    for action in report.uncovered:
        table.add_row(f"[yellow]{action}[/]", "0")
    return table


def _rejected(console: Console, verdict: TraceVerdict) -> None:
    rejection = verdict.rejection
    if rejection is None:
        return
    event = rejection.event
    if rejection.kind == "spec":
        why = "has no spec step"
    elif rejection.kind == "end":
        why = "says the run finished, but its last spec state is not quiescent"
    elif rejection.kind == "outside":
        why = f"is {rejection.reason}"
    else:
        why = f"is wrong about its {rejection.kind}: {rejection.reason}"
    console.print(
        f"[bold red]rejected[/] {escape(verdict.source)}: {escape(rejection.what())} "
        f"{escape(why)}; the first {verdict.matched} events are explained"
    )
    if event is not None:
        args, post = _bounded(event.args), _bounded(event.post)
        console.print(f"    args {escape(args)}  post {escape(post)}")
    explanation = verdict.explanation
    if not isinstance(explanation, Explanation):
        return
    for number, state in enumerate(explanation.frontier, start=1):
        console.print(f"  [bold]in spec state {number}[/]: {escape(state.reason())}")
        for name, value in state.state.items():
            console.print(f"      {name} = {escape(value)}", soft_wrap=True)
    if not explanation.frontier:
        console.print("  no spec state reaches that event")


#: The most of a logged value a report prints (a hostile trace's megabyte argument is cut).
SHOWN = 2000


def _bounded(value: object) -> str:
    text = str(value)
    if len(text) <= SHOWN:
        return text
    return f"{text[:SHOWN]}... ({len(text) - SHOWN:,} more characters)"
