"""Traces through the checker: ``validate`` (trace files), ``campaign`` (seeded runs of an
implementation), ``simtraces`` (TLC's own simulation as traces) and ``contract`` (what a
protocol's traces must carry)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape

from tracecheck.campaigns.campaign import keep_campaign, run_campaign
from tracecheck.cli.common import ARTIFACTS_HELP, SPEC_ROOT_HELP, positive
from tracecheck.cli.progress import ProgressLog
from tracecheck.errors import TracecheckError
from tracecheck.plugins import plugin_refs
from tracecheck.protocols import load_mapping
from tracecheck.replay.artifacts import keep_failures
from tracecheck.replay.coverage import CoverageSummary, action_coverage
from tracecheck.replay.report import print_report
from tracecheck.replay.stream import STREAM_WINDOW
from tracecheck.replay.validate import validate_files
from tracecheck.replay.witness import WitnessReport, print_witness, validate_checked
from tracecheck.runner.toolchain import toolchain
from tracecheck.traces.load import load_trace, merge_traces, peek_trace
from tracecheck.traces.source import IDLE_SECONDS

__all__ = ["PROBE_EVENTS", "add_campaign", "add_contract", "add_simtraces", "add_validate"]

#: ``validate --probe``'s default: a long file's first this many events are checked first.
PROBE_EVENTS = 2_000


def add_validate(sub: Any) -> None:
    validate = sub.add_parser(
        "validate", help="check implementation traces against their protocol's spec with TLC"
    )
    validate.add_argument("traces", type=Path, nargs="+", help="trace files (JSON lines)")
    validate.add_argument("--spec-root", type=Path, help=SPEC_ROOT_HELP)
    validate.add_argument(
        "--mapping", help="a protocol name or module:NAME of a ProtocolMap (default: header's)"
    )
    validate.add_argument(
        "--merge", action="store_true", help="the files are per-process logs of one run"
    )
    validate.add_argument("--no-explain", action="store_true", help="skip the explain pass")
    validate.add_argument(
        "--explain",
        type=positive("--explain", least=0),
        metavar="N",
        help="explain only the first N rejections (default: every one)",
    )
    validate.add_argument(
        "--invariants",
        action="store_true",
        help="also check the spec's invariants on each accepted behaviour (a second TLC run "
        "only for a batch where validation saw a state break one)",
    )
    validate.add_argument("--json", action="store_true", help="print the report as JSON")
    validate.add_argument("--artifacts", type=Path, help=ARTIFACTS_HELP)
    validate.add_argument(
        "--idle-timeout",
        type=float,
        default=IDLE_SECONDS,
        metavar="SECONDS",
        help=f"how long a pipe or FIFO given as a trace may stay silent (default {IDLE_SECONDS:g})",
    )
    validate.add_argument(
        "--probe",
        type=positive("--probe", least=0),
        default=PROBE_EVENTS,
        metavar="N",
        help="check a file of more than 2N events on its first N first, then 2N, 4N, ...: a "
        f"rejection there is its verdict, the rest unread (default {PROBE_EVENTS:,}; 0: off)",
    )
    validate.add_argument(
        "--window",
        type=positive("--window", least=0),
        default=STREAM_WINDOW,
        metavar="N",
        help="after the probes, check a file of more than N events N at a time, chained by "
        f"the spec states each window ends in: memory bounded by N (default {STREAM_WINDOW:,};"
        " 0: whole; --invariants checks whole)",
    )
    validate.set_defaults(func=_cmd_validate)


def add_campaign(sub: Any) -> None:
    campaign = sub.add_parser(
        "campaign", help="simulate N seeded runs of an implementation and validate every trace"
    )
    from tracecheck.cli.torchcampaign import TORCH_CAMPAIGN  # noqa: PLC0415 - as in _cmd_campaign

    campaign.add_argument(
        "protocol",
        metavar="PROTOCOL",
        help=f"one of: {', '.join([*sorted(plugin_refs()), TORCH_CAMPAIGN])} ({TORCH_CAMPAIGN}: "
        "torch 2.13's own rendezvous handler, traced; needs make torch)",
    )
    campaign.add_argument("--runs", type=positive("--runs"), default=20)
    campaign.add_argument("--seed", type=int, default=1, help="the first seed (default 1)")
    campaign.add_argument(
        "--steps", type=positive("--steps"), default=150, help="workload steps per run"
    )
    campaign.add_argument("--spec-root", type=Path, help=SPEC_ROOT_HELP)
    campaign.add_argument("--out", type=Path, help="keep the traces in this folder")
    campaign.add_argument(
        "--invariants",
        action="store_true",
        help="also check the spec's invariants on each accepted behaviour (a second TLC run "
        "only for a batch where validation saw a state break one)",
    )
    campaign.add_argument("--no-explain", action="store_true", help="explain no rejection")
    campaign.add_argument(
        "--explain",
        type=positive("--explain", least=0),
        default=3,
        metavar="N",
        help="explain the first N rejections (default 3; each is one more TLC run)",
    )
    campaign.add_argument("--json", action="store_true")
    campaign.add_argument("--artifacts", type=Path, help=ARTIFACTS_HELP)
    campaign.set_defaults(func=_cmd_campaign)


def add_simtraces(sub: Any) -> None:
    sim = sub.add_parser(
        "simtraces", help="write traces of TLC's random simulation of RRef and validate them"
    )
    sim.add_argument(
        "--runs", type=positive("--runs"), default=5, help="behaviours, one TLC run each"
    )
    sim.add_argument("--seed", type=int, default=1, help="TLC's seed of the first run")
    sim.add_argument(
        "--depth", type=positive("--depth"), default=40, help="events per behaviour (at most)"
    )
    sim.add_argument("--spec-root", type=Path, help=SPEC_ROOT_HELP)
    sim.add_argument("--out", type=Path, required=True, help="folder for the trace files")
    sim.set_defaults(func=_cmd_simtraces)


def add_contract(sub: Any) -> None:
    contract = sub.add_parser(
        "contract", help="what a protocol's traces must carry (for another implementation)"
    )
    contract.add_argument("protocol", help="a protocol name (rref, rendezvous) or module:MAP")
    contract.add_argument("--json", action="store_true", help="as JSON instead of Markdown")
    contract.set_defaults(func=_cmd_contract)


def _cmd_validate(args: argparse.Namespace, console: Console) -> int:
    idle = args.idle_timeout
    merged = (
        [merge_traces([load_trace(path, idle=idle) for path in args.traces])]
        if args.merge
        else None
    )
    # read once, passed on (a pipe or FIFO is loaded here: it cannot be read twice)
    peeks = [] if merged else [peek_trace(p, idle=idle) for p in args.traces]
    protocols = {t.header.protocol for t in merged or peeks}
    if args.mapping is None and len(protocols) != 1:
        raise TracecheckError(f"traces of several protocols {sorted(protocols)}: pass --mapping")
    mapping = load_mapping(args.mapping or protocols.pop())
    toolchain()
    # each file read as its chunk comes, while TLC checks the previous ones
    traces, report, witness = validate_checked(
        merged or peeks,
        mapping,
        args.spec_root,
        invariants=args.invariants,
        explain=not args.no_explain,
        explain_limit=args.explain,
        probe_events=args.probe or None,
        window=args.window or None,  # (not with --invariants: checked whole)
    )
    coverage = action_coverage(report, mapping, args.spec_root)
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
    # torch's own handler (tracecheck campaign torch-rendezvous), not a protocol's simulator
    from tracecheck.cli.torchcampaign import TORCH_CAMPAIGN, cmd_torch_campaign  # noqa: PLC0415

    if args.protocol == TORCH_CAMPAIGN:
        return cmd_torch_campaign(args, console)
    # torch's own RPC protocols, black-box (torch-rref, torch-autograd)
    from tracecheck.cli.torchautograd import TORCH_RPC_CAMPAIGNS  # noqa: PLC0415

    if args.protocol in TORCH_RPC_CAMPAIGNS:
        return TORCH_RPC_CAMPAIGNS[args.protocol](args, console)
    toolchain()
    if not args.json:  # --json prints the JSON and nothing else
        console.print(
            f"campaign {args.protocol}: {args.runs} runs, seeds {args.seed}.."
            f"{args.seed + args.runs - 1}, {args.steps} workload steps each"
        )
    log = ProgressLog(console, args.runs)

    def ran(seed: int, seconds: float) -> None:
        if not args.json:
            text = f"{escape(args.protocol)} seed {seed} simulated"
            log.finished(str(seed), text, seconds, quiet=not log.every_tenth())
            if log.done == args.runs:
                console.print(
                    f"validating {args.runs} traces with TLC"
                    + (" (and the invariants on the accepted ones)" if args.invariants else "")
                )

    result = run_campaign(
        args.protocol,
        args.runs,
        args.seed,
        args.steps,
        args.spec_root,
        out=args.out,
        explain=not args.no_explain,
        explain_limit=args.explain,
        invariants=args.invariants,
        on_run=ran,
    )
    witness = result.invariants
    coverage = action_coverage(result.report, load_mapping(args.protocol), args.spec_root)
    kept = keep_campaign(result, args.spec_root, root=args.artifacts)
    if args.json:
        payload = _with_coverage(result, coverage, kept=kept)
        payload["summary"] = result.summary()
        print(json.dumps(payload, indent=2))
        return 0 if result.ok else 1
    print_report(console, result.report, coverage)
    if witness is not None:
        print_witness(console, witness)
    for failure in result.failures:
        what = failure.exception or "its trace"
        console.print(f"[bold red]seed {failure.seed}[/]: {escape(what)}")
        if failure.unreadable:
            console.print(f"    its trace has no verdict: {escape(failure.unreadable)}")
    unexplained = sum(
        1
        for v in result.report.verdicts
        if v.rejection is not None and v.rejection.kind in ("spec", "end") and not v.explanation
    )
    if unexplained > 0:
        console.print(
            f"{unexplained} rejection(s) not explained (--explain N explains the first N, "
            "tracecheck validate TRACE explains one)"
        )
    console.print(f"[bold]{escape(result.summary())}[/]")
    verdict = "[green]every trace accepted[/]"
    if not result.ok:
        parts = []
        if result.rejected_seeds:
            parts.append(f"rejected seeds {result.rejected_seeds}")
        if result.raised_seeds:
            parts.append(f"raised: seeds {result.raised_seeds}")
        if witness is not None and not witness.all_clean:
            parts.append("an invariant broke on an accepted behaviour")
        unreadable = [f.seed for f in result.failures if f.unreadable]
        if unreadable:
            parts.append(f"unreadable traces: seeds {unreadable}")
        verdict = f"[red]{'; '.join(parts)}[/]"
    console.print(
        f"simulated in {result.simulate_seconds:.1f} s; {verdict}"
        + (f"; traces in {result.trace_dir}" if result.trace_dir else "")
    )
    console.print(f"campaign {escape(args.protocol)}: {log.total_line('runs')}")
    _print_kept(console, kept)
    return 0 if result.ok else 1


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


def _cmd_simtraces(args: argparse.Namespace, console: Console) -> int:
    from tracecheck.campaigns.simtraces import write_sim_traces  # noqa: PLC0415 - only this command

    toolchain()
    seeds = range(args.seed, args.seed + args.runs)
    paths = write_sim_traces(args.spec_root, args.out, seeds, args.depth)
    mapping = load_mapping("rref")
    _, report = validate_files(paths, mapping, args.spec_root)
    print_report(console, report, action_coverage(report, mapping, args.spec_root))
    return 0 if report.all_accepted else 1


def _cmd_contract(args: argparse.Namespace, console: Console) -> int:
    from tracecheck.protocols.contract import contract_markdown, contract_of  # noqa: PLC0415 - only here

    found = contract_of(load_mapping(args.protocol))
    print(found.model_dump_json(indent=2) if args.json else contract_markdown(found), end="")
    del console
    return 0
