"""The manifest's commands: ``check`` (every selected model against its expected verdict),
``docs`` (the manifest as tables) and ``bench`` (the deep models against TLC's ceiling, and
trace validation, into docs/performance.md)."""

from __future__ import annotations

import argparse
import json
import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tracecheck.campaigns.bench import (
    TV_END,
    TV_START,
    bench_table,
    run_bench,
    trace_validation_table,
    write_block,
    write_marked,
)
from tracecheck.campaigns.replay_on_torch.run import torch_column
from tracecheck.cli.common import (
    SPEC_ROOT_HELP,
    got,
    live_progress,
    num,
    parse_workers,
    positive,
    positive_float,
)
from tracecheck.cli.progress import ProgressLog, duration
from tracecheck.errors import TracecheckError
from tracecheck.runner.distributed import Distribution
from tracecheck.runner.manifest import (
    ModelCheck,
    ModelEntry,
    load_manifest,
    models_markdown,
    record_results,
    run_model,
)
from tracecheck.runner.teeth import teeth_markdown
from tracecheck.runner.tlc import cores
from tracecheck.runner.toolchain import toolchain

__all__ = ["add_bench", "add_check", "add_docs"]


def add_check(sub: Any) -> None:
    check = sub.add_parser("check", help="run the manifest's models and compare TLC's verdicts")
    check.add_argument("--spec-root", type=Path, help=SPEC_ROOT_HELP)
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
    check.add_argument(
        "--jobs",
        type=positive("--jobs"),
        help="models checked at once (default: one per core when each TLC has one worker; 1 "
        "with --workers or --distributed)",
    )
    check.add_argument(
        "--timeout", type=positive_float, help="seconds per model before TLC is killed"
    )
    check.add_argument("--record", action="store_true", help="write the figures back")
    check.add_argument("--list", action="store_true", help="list the selected models, run none")
    check.add_argument("--json", action="store_true", help="print results as JSON")
    dist = check.add_argument_group(
        "distributed TLC (tlc2.tool.distributed: a TLCServer and TLCWorkers; models with "
        "temporal properties run locally, which TLC 2.15's distributed mode does not check)"
    )
    dist.add_argument(
        "--distributed",
        type=positive("--distributed", least=0),
        metavar="N",
        help="run each model on a TLCServer with N TLCWorkers on this machine (0: only workers "
        "that join from other hosts, with the command printed)",
    )
    dist.add_argument(
        "--worker-threads",
        type=positive("--worker-threads"),
        help="threads per local worker (default: every core)",
    )
    dist.add_argument(
        "--port",
        type=positive("--port", least=0),
        default=0,
        help="the server's RMI registry port (default: a free one)",
    )
    dist.add_argument(
        "--host",
        help="the address other hosts reach this server at (default: loopback only, every "
        "worker on this machine)",
    )
    dist.add_argument(
        "--join-timeout",
        type=positive_float,
        default=600.0,
        help="seconds to wait for the first worker (default 600)",
    )
    check.set_defaults(func=_cmd_check)


def add_bench(sub: Any) -> None:
    bench = sub.add_parser(
        "bench", help="run the deep models with the TLC ceiling; write docs/performance.md"
    )
    bench.add_argument("--spec-root", type=Path, help=SPEC_ROOT_HELP)
    bench.add_argument("--workers", default="auto", help="a number or auto (default auto)")
    bench.add_argument("--out", type=Path, help="default: docs/performance.md beside the spec root")
    bench.add_argument("--model", action="append", help="only these models (and the ceiling)")
    bench.add_argument(
        "--tv-runs",
        type=positive("--tv-runs", least=0),
        default=100,
        help="RRef traces for the trace-validation figures (0: none)",
    )
    bench.add_argument(
        "--tv-steps", type=positive("--tv-steps"), default=1440, help="workload steps per trace"
    )
    bench.add_argument(
        "--tv-long-steps",
        type=positive("--tv-long-steps"),
        default=100_000,
        help="steps of the long trace (about 100,400 events)",
    )
    bench.set_defaults(func=_cmd_bench)


def add_docs(sub: Any) -> None:
    docs = sub.add_parser("docs", help="write docs/models.md: the manifest as tables")
    docs.add_argument("--spec-root", type=Path, help=SPEC_ROOT_HELP)
    docs.add_argument("--out", type=Path, help="default: docs/models.md beside the spec root")
    docs.set_defaults(func=_cmd_docs)


def _cmd_check(args: argparse.Namespace, console: Console) -> int:
    manifest = load_manifest(args.spec_root)
    selected = schedule(manifest.select(args.protocol, args.model, args.klass))
    if args.list:
        for protocol, entry in selected:
            smoke = " smoke" if entry.smoke else ""
            console.print(
                f"{protocol:12} {entry.name:40} {entry.klass:6} {_expected(entry)}{smoke}"
            )
        return 0
    if not selected:
        console.print("[yellow]no models selected[/]")
        return 1
    toolchain()  # fail early, with the install hint, before any progress display
    distribution = _distribution(args)
    workers = parse_workers(args.workers)
    jobs = _jobs(args, distribution, workers, len(selected))
    log = ProgressLog(
        console,
        len(selected),
        expected={f"{p}/{e.name}": e.recorded.seconds for p, e in selected},
        jobs=jobs,
    )
    if not args.json:
        console.print(
            f"{len(selected)} models, {jobs} at a time"
            + (" (smoke models first)" if any(e.smoke for _, e in selected) else "")
        )

    def ready(cmd: list[str]) -> None:
        if args.json:
            return
        where = (
            "a worker on another host joins with"
            if args.host
            else "(loopback only; with --host ADDRESS, workers on other hosts join with)"
        )
        console.print(f"[dim]TLC server ready; {where}: {escape(shlex.join(cmd))}[/]")

    def one(protocol: str, entry: ModelEntry) -> ModelCheck:
        label = f"{protocol}/{entry.name}"
        # TLC's own figures (once a minute) only when one model runs at a time, on a terminal
        with live_progress(console if jobs == 1 else None, label) as on_progress:
            check = run_model(
                manifest,
                protocol,
                entry,
                on_progress,
                distribution=distribution,
                on_ready=ready,
                workers=workers,
                timeout=args.timeout,
            )
        if not args.json:
            log.finished(label, _check_line(check), check.result.wall_seconds)
        return check

    if jobs == 1:
        checks = [one(p, e) for p, e in selected]
    else:
        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="tracecheck-check") as pool:
            # submitted in schedule order: smoke models start first, then the longest
            futures = [pool.submit(one, p, e) for p, e in selected]
            checks = [f.result() for f in futures]
    if args.json:
        # the manifest's own field names ("class", not the Python attribute)
        print(json.dumps([c.model_dump(mode="json", by_alias=True) for c in checks], indent=2))
    else:
        console.print(_check_table(checks))
    if args.record:
        for path in record_results(manifest, checks):
            console.print(f"recorded figures in {path}")
    failed = [c for c in checks if not c.ok]
    if not args.json:
        verdict = "[green]all as expected[/]" if not failed else f"[red]{len(failed)} differ[/]"
        spent = sum(c.result.wall_seconds for c in checks)
        console.print(
            f"{len(checks)} models: {verdict} ({log.total_line('models')}, {jobs} at a time; "
            f"{duration(spent)} of TLC runs)"
        )
    return 1 if failed else 0


def schedule(selected: list[tuple[str, ModelEntry]]) -> list[tuple[str, ModelEntry]]:
    """The order models start in: each protocol's smoke model first (an error in a spec shows
    in seconds), then the longest recorded first (so the last to finish is a short one)."""
    return sorted(selected, key=lambda pe: (not pe[1].smoke, -(pe[1].recorded.seconds or 0.0)))


def _jobs(
    args: argparse.Namespace, distribution: Distribution | None, workers: object, count: int
) -> int:
    """How many models run at once: ``--jobs``, else one per core when each TLC has one worker
    and nothing is distributed (several workers per TLC, or distributed TLC: one at a time)."""
    if args.jobs is not None:
        return min(int(args.jobs), count)
    if distribution is not None or workers not in (None, 1):
        return 1
    return max(1, min(cores(), count))


def _distribution(args: argparse.Namespace) -> Distribution | None:
    if args.distributed is None:
        return None
    if args.distributed == 0 and args.host is None:
        raise TracecheckError("--distributed 0 waits for workers from other hosts: give --host")
    return Distribution(
        workers=args.distributed,
        worker_threads=args.worker_threads,
        port=args.port,
        host=args.host,
        join_timeout=args.join_timeout,
    )


def _expected(entry: object) -> str:
    expect = getattr(entry, "expect", None)
    violates = getattr(entry, "violates", None)
    text = str(getattr(expect, "value", expect))
    return f"{text} {violates}" if violates else text


def _check_line(check: ModelCheck) -> str:
    mark = "[green]ok[/]  " if check.ok else "[red]FAIL[/]"
    line = f"{mark} {check.protocol}/{check.entry.name}: {escape(got(check.result))}"
    if check.problem:
        line += f"  [red]({escape(check.problem)})[/]"
    if check.drift:
        line += f"  [yellow]drift: {', '.join(check.drift)}[/]"
    if check.mode:
        line += f"  [dim]({escape(check.mode)})[/]"
    return line


def _print_check_line(console: Console, check: ModelCheck) -> None:
    console.print(_check_line(check))


def _check_table(checks: list[ModelCheck]) -> Table:
    table = Table(title="TLC models against the manifest")
    for column in ("protocol", "model", "class", "expected", "got", "distinct", "depth", "s"):
        # fold, not "…": a narrow terminal wraps a model's name instead of cutting it
        table.add_column(
            column,
            justify="right" if column in {"distinct", "depth", "s"} else "left",
            overflow="fold",
        )
    table.add_column("")
    for c in checks:
        stats = c.result.stats
        table.add_row(
            c.protocol,
            c.entry.name,
            c.entry.klass,
            _expected(c.entry),
            got(c.result),
            num(stats.distinct),
            num(stats.depth),
            f"{c.result.wall_seconds:.1f}",
            "[green]ok[/]" if c.ok else "[red]FAIL[/]",
        )
    return table


def _docs_file(args: argparse.Namespace, name: str) -> Path:
    """``--out``, or the checkout's ``docs/<name>`` (beside its ``spec/``), from any folder."""
    out: Path = args.out or args.spec_root.resolve().parent / "docs" / name
    if not out.parent.is_dir():
        raise TracecheckError(f"no folder {out.parent} for {out.name}; pass --out")
    return out


def _cmd_bench(args: argparse.Namespace, console: Console) -> int:
    args.out = _docs_file(args, "performance.md")
    manifest = load_manifest(args.spec_root)
    toolchain()
    workers = parse_workers(args.workers)
    with live_progress(console, "deep models") as on_progress:
        checks = run_bench(
            manifest, workers, on_progress, lambda c: _print_check_line(console, c), args.model
        )
    console.print(_check_table(checks))
    failed = [c for c in checks if not c.ok]
    if failed:
        # A benchmark never writes a failed run into the docs: the previous figures stay.
        names = ", ".join(f"{c.protocol}/{c.entry.name}" for c in failed)
        console.print(
            f"[red]{len(failed)} model(s) not as expected ({names}): {args.out} unchanged[/]"
        )
        return 1
    write_block(args.out, bench_table(checks, workers))
    console.print(f"wrote the models' table into {args.out}")
    if args.tv_runs:
        console.print(f"trace validation: {args.tv_runs} RRef traces, batch vs one run each")
        tv = trace_validation_table(args.spec_root, args.tv_runs, args.tv_steps, args.tv_long_steps)
        write_marked(args.out, tv, TV_START, TV_END)
        console.print(f"wrote the trace-validation table into {args.out}")
    return 0


def _cmd_docs(args: argparse.Namespace, console: Console) -> int:
    args.out = _docs_file(args, "models.md")
    manifest = load_manifest(args.spec_root)
    text = models_markdown(manifest, torch_column(args.spec_root)) + teeth_markdown(manifest)
    args.out.write_text(text, encoding="utf-8")
    console.print(f"wrote {args.out}")
    return 0
