"""The ``tracecheck`` command: run the model manifest (``check``), one model (``tlc``), or SANY.

Exit codes: 0 everything as expected; 1 a verdict differs from the manifest (``check``) or TLC
found a violation or error (``tlc``, ``sany``); 2 bad usage, a bad manifest, or no Java/TLC.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress as RichProgress
from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from tracecheck.artifacts import keep_campaign, keep_failures
from tracecheck.bench import (
    TV_END,
    TV_START,
    bench_table,
    run_bench,
    trace_validation_table,
    write_block,
    write_marked,
)
from tracecheck.campaign import run_campaign
from tracecheck.coverage import CoverageSummary, action_coverage
from tracecheck.errors import TracecheckError
from tracecheck.manifest import (
    ModelCheck,
    load_manifest,
    models_markdown,
    record_results,
    run_model,
)
from tracecheck.protocols import load_mapping
from tracecheck.report import print_report
from tracecheck.results import Progress, TLCResult, Verdict
from tracecheck.teeth import teeth_markdown
from tracecheck.tlavalue import format_value
from tracecheck.tlc import ProgressCallback, TLCOptions, run_sany, run_tlc, tlc_command
from tracecheck.toolchain import toolchain
from tracecheck.traces import load_trace, merge_traces, peek_trace
from tracecheck.validate import validate_files, validate_traces
from tracecheck.witness import WitnessReport, check_invariants, print_witness

__all__ = ["main"]

DEFAULT_SPEC_ROOT = Path("spec")


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
    _add_check(sub)
    _add_tlc(sub)
    _add_validate(sub)
    _add_campaign(sub)
    _add_bench(sub)
    _add_docs(sub)
    _add_sany(sub)
    _add_simtraces(sub)
    _add_contract(sub)
    return parser


def _add_check(sub: Any) -> None:
    check = sub.add_parser("check", help="run the manifest's models and compare TLC's verdicts")
    check.add_argument("--spec-root", type=Path, default=DEFAULT_SPEC_ROOT)
    check.add_argument("--protocol", action="append", help="only this protocol (repeatable)")
    check.add_argument("--model", action="append", help="only this model (repeatable)")
    check.add_argument(
        "--class",
        dest="klass",
        choices=["quick", "deep", "all"],
        default="quick",
        help="which models to run (default: quick; --model ignores it)",
    )
    check.add_argument("--workers", help="override the manifest's workers (a number or auto)")
    check.add_argument("--timeout", type=float, help="seconds per model before TLC is killed")
    check.add_argument("--record", action="store_true", help="write the figures back")
    check.add_argument("--list", action="store_true", help="list the selected models, run none")
    check.add_argument("--json", action="store_true", help="print results as JSON")
    check.set_defaults(func=_cmd_check)


def _add_tlc(sub: Any) -> None:
    tlc = sub.add_parser("tlc", help="model-check one spec ad hoc, with live progress")
    tlc.add_argument("spec", type=Path, help="the .tla module to check")
    tlc.add_argument("--config", type=Path, help="the .cfg (default: the module's name)")
    tlc.add_argument("--workers", default="1", help="a number or auto (default 1)")
    tlc.add_argument("--timeout", type=float)
    tlc.add_argument("--heap", help="JVM heap, e.g. 4g")
    tlc.add_argument("--simulate", action="store_true", help="random simulation, not BFS")
    tlc.add_argument("--depth", type=int, help="simulation: behaviour length")
    tlc.add_argument("--traces", type=int, help="simulation: number of behaviours")
    tlc.add_argument("--seed", type=int)
    tlc.add_argument("--no-deadlock", action="store_true", help="do not report deadlocks")
    tlc.add_argument("--library", type=Path, action="append", default=[])
    tlc.add_argument("--dry-run", action="store_true", help="print the command, run nothing")
    tlc.add_argument("--json", action="store_true", help="print the result as JSON")
    tlc.epilog = "Flags after -- are passed to TLC verbatim, e.g. -- -view."
    tlc.set_defaults(func=_cmd_tlc)


_ARTIFACTS_HELP = (
    "where a failure leaves its traces, generated modules and report "
    "(default: $TRACECHECK_ARTIFACTS or artifacts/tracecheck)"
)


def _add_validate(sub: Any) -> None:
    validate = sub.add_parser(
        "validate", help="check implementation traces against their protocol's spec with TLC"
    )
    validate.add_argument("traces", type=Path, nargs="+", help="trace files (JSON lines)")
    validate.add_argument("--spec-root", type=Path, default=DEFAULT_SPEC_ROOT)
    validate.add_argument(
        "--mapping", help="a protocol name or module:NAME of a ProtocolMap (default: header's)"
    )
    validate.add_argument(
        "--merge", action="store_true", help="the files are per-process logs of one run"
    )
    validate.add_argument("--no-explain", action="store_true", help="skip the explain pass")
    validate.add_argument(
        "--invariants",
        action="store_true",
        help="also check the spec's invariants on each accepted behaviour (one more TLC run)",
    )
    validate.add_argument("--json", action="store_true", help="print the report as JSON")
    validate.add_argument("--artifacts", type=Path, help=_ARTIFACTS_HELP)
    validate.set_defaults(func=_cmd_validate)


def _add_campaign(sub: Any) -> None:
    campaign = sub.add_parser(
        "campaign", help="simulate N seeded runs of an implementation and validate every trace"
    )
    campaign.add_argument("protocol", help="e.g. rref")
    campaign.add_argument("--runs", type=int, default=20)
    campaign.add_argument("--seed", type=int, default=1, help="the first seed (default 1)")
    campaign.add_argument("--steps", type=int, default=150, help="workload steps per run")
    campaign.add_argument("--spec-root", type=Path, default=DEFAULT_SPEC_ROOT)
    campaign.add_argument("--out", type=Path, help="keep the traces in this folder")
    campaign.add_argument(
        "--invariants",
        action="store_true",
        help="also check the spec's invariants on each accepted behaviour (one more TLC run)",
    )
    campaign.add_argument("--json", action="store_true")
    campaign.add_argument("--artifacts", type=Path, help=_ARTIFACTS_HELP)
    campaign.set_defaults(func=_cmd_campaign)


def _add_bench(sub: Any) -> None:
    bench = sub.add_parser(
        "bench", help="run the deep models with the TLC ceiling; write docs/performance.md"
    )
    bench.add_argument("--spec-root", type=Path, default=DEFAULT_SPEC_ROOT)
    bench.add_argument("--workers", default="auto", help="a number or auto (default auto)")
    bench.add_argument("--out", type=Path, default=Path("docs/performance.md"))
    bench.add_argument("--model", action="append", help="only these models (and the ceiling)")
    bench.add_argument(
        "--tv-runs", type=int, default=100, help="RRef traces for the trace-validation figures"
    )
    bench.add_argument("--tv-steps", type=int, default=1440, help="workload steps per trace")
    bench.add_argument(
        "--tv-long-steps",
        type=int,
        default=100_000,
        help="steps of the long trace (about 100,400 events)",
    )
    bench.set_defaults(func=_cmd_bench)


def _add_docs(sub: Any) -> None:
    docs = sub.add_parser("docs", help="write docs/models.md: the manifest as tables")
    docs.add_argument("--spec-root", type=Path, default=DEFAULT_SPEC_ROOT)
    docs.add_argument("--out", type=Path, default=Path("docs/models.md"))
    docs.set_defaults(func=_cmd_docs)


def _add_sany(sub: Any) -> None:
    sany = sub.add_parser("sany", help="parse and check a module with SANY")
    sany.add_argument("spec", type=Path)
    sany.add_argument("--json", action="store_true")
    sany.set_defaults(func=_cmd_sany)


def _add_simtraces(sub: Any) -> None:
    sim = sub.add_parser(
        "simtraces", help="write traces of TLC's random simulation of RRef and validate them"
    )
    sim.add_argument("--runs", type=int, default=5, help="behaviours, one TLC run each")
    sim.add_argument("--seed", type=int, default=1, help="TLC's seed of the first run")
    sim.add_argument("--depth", type=int, default=40, help="events per behaviour (at most)")
    sim.add_argument("--spec-root", type=Path, default=DEFAULT_SPEC_ROOT)
    sim.add_argument("--out", type=Path, required=True, help="folder for the trace files")
    sim.set_defaults(func=_cmd_simtraces)


def _add_contract(sub: Any) -> None:
    contract = sub.add_parser(
        "contract", help="what a protocol's traces must carry (for another implementation)"
    )
    contract.add_argument("protocol", help="a protocol name (rref, rendezvous) or module:MAP")
    contract.add_argument("--json", action="store_true", help="as JSON instead of Markdown")
    contract.set_defaults(func=_cmd_contract)


def _cmd_contract(args: argparse.Namespace, console: Console) -> int:
    from tracecheck.contract import contract_markdown, contract_of  # noqa: PLC0415 - only here

    found = contract_of(load_mapping(args.protocol))
    print(found.model_dump_json(indent=2) if args.json else contract_markdown(found), end="")
    del console
    return 0


def _cmd_simtraces(args: argparse.Namespace, console: Console) -> int:
    from tracecheck.simtraces import write_sim_traces  # noqa: PLC0415 - only this command

    toolchain()
    seeds = range(args.seed, args.seed + args.runs)
    paths = write_sim_traces(args.spec_root, args.out, seeds, args.depth)
    mapping = load_mapping("rref")
    _, report = validate_files(paths, mapping, args.spec_root)
    print_report(console, report, action_coverage(report, mapping, args.spec_root))
    return 0 if report.all_accepted else 1


def _workers(value: str | None) -> int | str | None:
    if value is None or value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise TracecheckError(f"--workers takes a number or auto, not {value!r}") from None


# --- check ------------------------------------------------------------------------------------


def _cmd_check(args: argparse.Namespace, console: Console) -> int:
    manifest = load_manifest(args.spec_root)
    selected = manifest.select(args.protocol, args.model, args.klass)
    if args.list:
        for protocol, entry in selected:
            console.print(f"{protocol:12} {entry.name:40} {entry.klass:6} {_expected(entry)}")
        return 0
    if not selected:
        console.print("[yellow]no models selected[/]")
        return 1
    toolchain()  # fail early, with the install hint, before any progress display
    checks: list[ModelCheck] = []
    for protocol, entry in selected:
        with _live_progress(console, f"{protocol}/{entry.name}") as on_progress:
            check = run_model(
                manifest,
                protocol,
                entry,
                on_progress,
                workers=_workers(args.workers),
                timeout=args.timeout,
            )
        checks.append(check)
        if not args.json:
            _print_check_line(console, check)
    if args.json:
        print(json.dumps([c.model_dump(mode="json") for c in checks], indent=2))
    else:
        console.print(_check_table(checks))
    if args.record:
        for path in record_results(manifest, checks):
            console.print(f"recorded figures in {path}")
    failed = [c for c in checks if not c.ok]
    if not args.json:
        verdict = "[green]all as expected[/]" if not failed else f"[red]{len(failed)} differ[/]"
        console.print(f"{len(checks)} models: {verdict}")
    return 1 if failed else 0


def _expected(entry: object) -> str:
    expect = getattr(entry, "expect", None)
    violates = getattr(entry, "violates", None)
    text = str(getattr(expect, "value", expect))
    return f"{text} {violates}" if violates else text


def _print_check_line(console: Console, check: ModelCheck) -> None:
    mark = "[green]ok[/]  " if check.ok else "[red]FAIL[/]"
    line = f"{mark} {check.protocol}/{check.entry.name}: {escape(_got(check.result))}"
    if check.problem:
        line += f"  [red]({escape(check.problem)})[/]"
    if check.drift:
        line += f"  [yellow]drift: {', '.join(check.drift)}[/]"
    console.print(line)


def _got(result: TLCResult) -> str:
    if result.verdict is Verdict.SUCCESS:
        return "pass"
    return f"{result.verdict.value} {result.violated or ''}".strip()


def _check_table(checks: list[ModelCheck]) -> Table:
    table = Table(title="TLC models against the manifest")
    for column in ("protocol", "model", "class", "expected", "got", "distinct", "depth", "s"):
        table.add_column(
            column, justify="right" if column in {"distinct", "depth", "s"} else "left"
        )
    table.add_column("")
    for c in checks:
        stats = c.result.stats
        table.add_row(
            c.protocol,
            c.entry.name,
            c.entry.klass,
            _expected(c.entry),
            _got(c.result),
            _num(stats.distinct),
            _num(stats.depth),
            f"{c.result.wall_seconds:.1f}",
            "[green]ok[/]" if c.ok else "[red]FAIL[/]",
        )
    return table


def _num(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


@contextmanager
def _live_progress(console: Console, label: str) -> Iterator[ProgressCallback]:
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


def _cmd_validate(args: argparse.Namespace, console: Console) -> int:
    merged = [merge_traces([load_trace(path) for path in args.traces])] if args.merge else None
    peeks = [] if merged else [peek_trace(p) for p in args.traces]  # read once, passed on
    protocols = {t.header.protocol for t in merged or peeks}
    if args.mapping is None and len(protocols) != 1:
        raise TracecheckError(f"traces of several protocols {sorted(protocols)}: pass --mapping")
    mapping = load_mapping(args.mapping or protocols.pop())
    toolchain()
    explain = not args.no_explain
    if merged:
        traces = merged
        report = validate_traces(traces, mapping, args.spec_root, explain=explain)
    else:  # each file read as its chunk comes, while TLC checks the previous ones
        traces, report = validate_files(peeks, mapping, args.spec_root, explain=explain)
    coverage = action_coverage(report, mapping, args.spec_root)
    witness = check_invariants(traces, report, mapping, args.spec_root) if args.invariants else None
    kept = keep_failures(
        traces,
        report,
        mapping,
        args.spec_root,
        witness=witness,
        coverage=coverage,
        root=args.artifacts,
    )
    if args.json:
        print(json.dumps(_with_coverage(report, coverage, witness, kept), indent=2))
    else:
        print_report(console, report, coverage)
        if witness is not None:
            print_witness(console, witness)
        _print_kept(console, kept)
    return 0 if report.all_accepted and (witness is None or witness.all_clean) else 1


def _cmd_campaign(args: argparse.Namespace, console: Console) -> int:
    toolchain()
    console.print(
        f"campaign {args.protocol}: {args.runs} runs, seeds {args.seed}.."
        f"{args.seed + args.runs - 1}, {args.steps} workload steps each"
    )
    result = run_campaign(
        args.protocol,
        args.runs,
        args.seed,
        args.steps,
        args.spec_root,
        out=args.out,
        invariants=args.invariants,
    )
    witness = result.invariants
    coverage = action_coverage(result.report, load_mapping(args.protocol), args.spec_root)
    kept = keep_campaign(result, args.spec_root, root=args.artifacts)
    if args.json:
        print(json.dumps(_with_coverage(result, coverage, kept=kept), indent=2))
    else:
        print_report(console, result.report, coverage)
        if witness is not None:
            print_witness(console, witness)
        console.print(
            f"simulated in {result.simulate_seconds:.1f} s; "
            + (
                f"[red]rejected seeds {result.rejected_seeds}[/]"
                if result.rejected_seeds
                else "[green]every trace accepted[/]"
            )
            + (f"; traces in {result.trace_dir}" if result.trace_dir else "")
        )
        _print_kept(console, kept)
    return 0 if result.report.all_accepted and (witness is None or witness.all_clean) else 1


def _print_kept(console: Console, kept: Path | None) -> None:
    if kept is not None:
        console.print(f"[red]the failing traces, generated modules and report are in {kept}[/]")


def _with_coverage(
    result: BaseModel,
    coverage: CoverageSummary,
    witness: WitnessReport | None = None,
    kept: Path | None = None,
) -> dict[str, Any]:
    """The result as JSON with every spec action's coverage (or the reason it has none) and,
    when checked, the invariants on the accepted behaviours."""
    extra: dict[str, Any] = {"action_coverage": coverage.model_dump(mode="json")}
    if witness is not None:
        extra["invariants"] = witness.model_dump(mode="json")
    if kept is not None:
        extra["artifacts"] = str(kept)
    return result.model_dump(mode="json") | extra


def _cmd_bench(args: argparse.Namespace, console: Console) -> int:
    manifest = load_manifest(args.spec_root)
    toolchain()
    workers = _workers(args.workers)
    with _live_progress(console, "deep models") as on_progress:
        checks = run_bench(
            manifest, workers, on_progress, lambda c: _print_check_line(console, c), args.model
        )
    block = bench_table(checks, workers)
    write_block(args.out, block)
    if args.tv_runs:
        console.print(f"trace validation: {args.tv_runs} RRef traces, batch vs one run each")
        tv = trace_validation_table(args.spec_root, args.tv_runs, args.tv_steps, args.tv_long_steps)
        write_marked(args.out, tv, TV_START, TV_END)
    console.print(_check_table(checks))
    console.print(f"wrote the table into {args.out}")
    return 0 if all(c.ok for c in checks) else 1


def _cmd_docs(args: argparse.Namespace, console: Console) -> int:
    manifest = load_manifest(args.spec_root)
    text = models_markdown(manifest) + teeth_markdown(manifest)
    args.out.write_text(text, encoding="utf-8")
    console.print(f"wrote {args.out}")
    return 0


# --- tlc and sany -----------------------------------------------------------------------------


def _cmd_tlc(args: argparse.Namespace, console: Console) -> int:
    options = TLCOptions(
        workers=_workers(args.workers) or 1,
        timeout=args.timeout,
        heap=args.heap,
        simulate=args.simulate,
        depth=args.depth,
        traces=args.traces,
        seed=args.seed,
        check_deadlock=not args.no_deadlock,
        library=tuple(p.resolve() for p in args.library),
        extra=tuple(args.extra),
    )
    if not args.spec.is_file():
        raise TracecheckError(f"no such module: {args.spec}")
    if args.dry_run:
        metadir = Path(tempfile.gettempdir()) / "tlc-meta-XXXX"
        cmd = tlc_command(
            args.spec.resolve(), args.config and args.config.resolve(), options, metadir
        )
        console.print(
            f"cd {shlex.quote(str(args.spec.resolve().parent))} && {shlex.join(cmd)}",
            soft_wrap=True,
        )
        return 0
    with _live_progress(console, args.spec.name) as on_progress:
        result = run_tlc(args.spec, args.config, options, on_progress)
    _report(console, result, as_json=args.json)
    return 0 if result.verdict is Verdict.SUCCESS else 1


def _cmd_sany(args: argparse.Namespace, console: Console) -> int:
    if not args.spec.is_file():
        raise TracecheckError(f"no such module: {args.spec}")
    result = run_sany(args.spec)
    _report(console, result, as_json=args.json)
    return 0 if result.verdict is Verdict.SUCCESS else 1


def _report(console: Console, result: TLCResult, *, as_json: bool) -> None:
    if as_json:
        print(result.model_dump_json(indent=2))
        return
    color = "green" if result.verdict is Verdict.SUCCESS else "red"
    console.print(f"[bold {color}]{_got(result)}[/]: {escape(result.summary)}")
    for error in result.errors:
        where = f" ({error.location})" if error.location else ""
        console.print(f"  [red]error{escape(where)}:[/] {escape(error.message)}")
    if result.counterexample:
        for state in result.counterexample.states:
            console.print(f"[bold]{state.index}: {state.action}[/]")
            for name, value in state.values.items():
                console.print(f"    {name} = {escape(format_value(value))}", soft_wrap=True)
        if result.counterexample.loops_to is not None:
            console.print(f"[bold]back to state {result.counterexample.loops_to}[/]")
    stats = result.stats
    console.print(
        f"{_num(stats.generated)} generated, {_num(stats.distinct)} distinct, depth "
        f"{_num(stats.depth)}, {result.wall_seconds:.1f} s, TLC {result.tlc_version} "
        f"rev {result.tlc_revision}"
    )


if __name__ == "__main__":
    sys.exit(main())
