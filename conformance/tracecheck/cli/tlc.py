"""One module ad hoc: ``tlc`` (model-check it, with live progress, or print the exact command)
and ``sany`` (parse and check it)."""

from __future__ import annotations

import argparse
import json
import shlex
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from tracecheck.cli.common import got, live_progress, num, parse_workers, positive, positive_float
from tracecheck.errors import TracecheckError
from tracecheck.runner.javac import HELPERS, helper_classes, javac, shipped
from tracecheck.runner.manifest import MANIFEST_NAME, entry_for
from tracecheck.runner.results import TLCResult, Verdict
from tracecheck.runner.tlc import TLCOptions, run_sany, run_tlc, tlc_command
from tracecheck.runner.toolchain import java_source, toolchain
from tracecheck.tla.values import format_value

__all__ = ["add_sany", "add_tlc", "add_toolchain"]


def add_tlc(sub: Any) -> None:
    tlc = sub.add_parser("tlc", help="model-check one spec ad hoc, with live progress")
    tlc.add_argument("spec", type=Path, help="the .tla module to check")
    tlc.add_argument("--config", type=Path, help="the .cfg (default: the module's name)")
    tlc.add_argument(
        "--workers", help="a number or auto (default: the manifest's for this model, else 1)"
    )
    tlc.add_argument("--timeout", type=positive_float, help="seconds before TLC is killed")
    tlc.add_argument("--heap", help="JVM heap, e.g. 4g")
    tlc.add_argument("--simulate", action="store_true", help="random simulation, not BFS")
    tlc.add_argument("--depth", type=positive("--depth"), help="simulation: behaviour length")
    tlc.add_argument("--traces", type=positive("--traces"), help="simulation: number of behaviours")
    tlc.add_argument("--seed", type=int)
    tlc.add_argument(
        "--deadlock",
        dest="deadlock",
        action="store_true",
        default=None,
        help="report states without successors as deadlocks",
    )
    tlc.add_argument(
        "--no-deadlock",
        dest="deadlock",
        action="store_false",
        help="do not report deadlocks (default: as the manifest's entry for this module and "
        "cfg says, else the cfg's CHECK_DEADLOCK, else on)",
    )
    tlc.add_argument("--library", type=Path, action="append", default=[])
    tlc.add_argument("--dry-run", action="store_true", help="print the command, run nothing")
    tlc.add_argument("--json", action="store_true", help="print the result as JSON")
    tlc.epilog = "Flags after -- are passed to TLC verbatim, e.g. -- -view."
    tlc.set_defaults(func=_cmd_tlc)


def add_toolchain(sub: Any) -> None:
    tools = sub.add_parser(
        "toolchain", help="say which java runs TLC, which jar, and where the Java helpers come from"
    )
    tools.add_argument("--json", action="store_true", help="as JSON")
    tools.set_defaults(func=_cmd_toolchain)


def _cmd_toolchain(args: argparse.Namespace, console: Console) -> int:
    java, where = java_source()
    tools = toolchain()
    compiler = javac(tools)
    helpers = {}
    for helper in HELPERS:
        found = shipped(helper)
        if found is not None:
            helpers[helper.stem] = "shipped"
        else:
            built = helper_classes(helper)
            helpers[helper.stem] = "none" if built is None else f"compiled ({built})"
    report = {
        "java": java,
        "java_from": where,
        "java_version": tools.java_version,
        "jar": str(tools.jar),
        "javac": compiler,
        "helpers": helpers,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    console.print(
        f"java: {escape(java)} (Java {tools.java_version}, from {where}); "
        f"TLC jar: {escape(str(tools.jar))}"
    )
    console.print(
        "Java helpers: "
        + ", ".join(f"{name} {how}" for name, how in helpers.items())
        + f"; javac: {escape(compiler or 'none (not needed)')}"
    )
    return 0


def add_sany(sub: Any) -> None:
    sany = sub.add_parser("sany", help="parse and check a module with SANY")
    sany.add_argument("spec", type=Path)
    sany.add_argument("--json", action="store_true")
    sany.set_defaults(func=_cmd_sany)


def _cmd_tlc(args: argparse.Namespace, console: Console) -> int:
    if not args.spec.is_file():
        raise TracecheckError(f"no such module: {args.spec}")
    if args.config is not None and not args.config.is_file():
        raise TracecheckError(f"no such cfg: {args.config}")
    # A model of the manifest runs as `tracecheck check` runs it: its deadlock setting, its
    # workers and spec/common; flags given here win.
    entry = entry_for(args.spec, args.config)
    workers = parse_workers(args.workers) or (entry.workers if entry else 1)
    deadlock: bool | None = args.deadlock
    if deadlock is None and entry is not None:
        deadlock = entry.check_deadlock
    library = [p.resolve() for p in args.library]
    common = args.spec.resolve().parent.parent / "common"
    if entry is not None and common.is_dir() and common not in library:
        library.append(common)
    options = TLCOptions(
        workers=workers,
        timeout=args.timeout,
        heap=args.heap,
        simulate=args.simulate,
        depth=args.depth,
        traces=args.traces,
        seed=args.seed,
        check_deadlock=deadlock,
        library=tuple(library),
        extra=tuple(args.extra),
    )
    if entry is not None and not args.json:
        console.print(
            f"[dim]{escape(entry.name)} of {escape(str(args.spec.parent / MANIFEST_NAME))}: "
            f"deadlock checking {'on' if options.check_deadlock is not False else 'off'}, "
            f"{options.worker_count} worker(s)[/]"
        )
    if args.dry_run:
        metadir = Path(tempfile.gettempdir()) / "tlc-meta-XXXX"
        cmd = tlc_command(
            args.spec.resolve(), args.config and args.config.resolve(), options, metadir
        )
        cwd = str(args.spec.resolve().parent)
        if args.json:
            print(json.dumps({"cwd": cwd, "command": cmd}, indent=2))
            return 0
        console.print(f"cd {shlex.quote(cwd)} && {shlex.join(cmd)}", soft_wrap=True)
        return 0
    with live_progress(console, args.spec.name) as on_progress:
        result = run_tlc(args.spec, args.config, options, on_progress)
    _report(console, result, as_json=args.json)
    return 0 if result.verdict is Verdict.SUCCESS else 1


def _cmd_sany(args: argparse.Namespace, console: Console) -> int:
    if not args.spec.is_file():
        raise TracecheckError(f"no such module: {args.spec}")
    result = run_sany(args.spec)
    _report(console, result, as_json=args.json, figures=False)
    return 0 if result.verdict is Verdict.SUCCESS else 1


def _report(console: Console, result: TLCResult, *, as_json: bool, figures: bool = True) -> None:
    if as_json:
        print(result.model_dump_json(indent=2))
        return
    color = "green" if result.verdict is Verdict.SUCCESS else "red"
    console.print(f"[bold {color}]{got(result)}[/]: {escape(result.summary)}")
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
    if not figures:
        return
    stats = result.stats
    console.print(
        f"{num(stats.generated)} generated, {num(stats.distinct)} distinct, depth "
        f"{num(stats.depth)}, {result.wall_seconds:.1f} s, TLC {result.tlc_version} "
        f"rev {result.tlc_revision}"
    )
