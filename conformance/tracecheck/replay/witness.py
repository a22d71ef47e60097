"""Spec invariants on the accepted behaviour of a trace, not on dead-end prefixes.

The validation run explores every spec behaviour that matches a prefix of the trace. With
partial logging (hidden steps, copies of retried messages) many of them are dead ends that the
implementation never took, and an invariant that fails on one of those says nothing about the
implementation (CCF PR #5933). What matters is the behaviour that explains the whole trace.

TLC cannot know, when it meets a state, whether the state lies on an accepting behaviour, so
this pass does not ask it to. It re-runs the trace spec of the accepted traces with one change:
the state constraint first evaluates the protocol's invariants and, in a state where one fails,
prints the failure and prunes the state (a constraint that is false stops TLC from exploring
the state's successors; nothing stops the run). The furthest cursor a trace then reaches is
how far some *invariant-clean* behaviour explains it:

- the trace still reaches its end: some accepting behaviour satisfies every invariant in every
  state (it is "clean"), whatever the dead ends did;
- it stops at event ``K``: every behaviour that explains events ``1..K`` breaks an invariant,
  and the states after event ``K`` (printed with the invariants they break) say which.

One extra TLC run per batch of constants, on the generated trace spec, with the spec's own
invariants by name (a generated module EXTENDS the trace spec; nothing is re-implemented). When
the trace spec is deterministic (one state per event, as for RRef and rendezvous traces) the
verdict is the plain check of every state of the one accepting behaviour.

Most batches need no such run: when the acceptance run watched the invariants
(:mod:`tracecheck.replay.watch`, :func:`validate_checked`) and no state it explored for the
batch's traces broke one, every accepting behaviour is clean, and so is every trace. Only a
batch with a printed breach (on a dead end, perhaps) gets the pruning run.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from pydantic import BaseModel, ConfigDict, ValidationError
from rich.console import Console
from rich.markup import escape

from tracecheck.errors import TracecheckError
from tracecheck.protocols.mapping import ProtocolMap
from tracecheck.replay.batches import furthest_cursors
from tracecheck.replay.javareader import reader_classes
from tracecheck.replay.tlcrun import (
    CheckerError,
    printed_values,
    run_rendered,
    spec_library,
    spec_variables,
)
from tracecheck.replay.tracedata import constants_for
from tracecheck.replay.tracespec import TRACE_MODULE, RenderedBatch, render_batch
from tracecheck.replay.validate import validate_files, validate_traces
from tracecheck.replay.verdicts import ValidationReport
from tracecheck.replay.watch import BREACH_TAG, breach_print, checked_names, failing
from tracecheck.runner.manifest import MANIFEST_NAME, Expect, ProtocolManifest
from tracecheck.runner.results import TLCResult, Verdict
from tracecheck.runner.tlc import TLCOptions
from tracecheck.tla.cfgfile import KEYWORDS, strip_comments
from tracecheck.tla.values import TLAValue, format_value
from tracecheck.traces.load import Trace, TracePeek

__all__ = [
    "WITNESS_MODULE",
    "InvariantBreach",
    "WitnessReport",
    "WitnessVerdict",
    "check_invariants",
    "print_witness",
    "protocol_invariants",
    "validate_checked",
    "witness_files",
]

WITNESS_MODULE = "TraceWitness"


class InvariantBreach(BaseModel):
    """A state of the trace spec in which some of the protocol's invariants are false."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    invariants: list[str]
    #: Events consumed before the state: the state follows event ``after`` (0: the initial
    #: state), and ``hidden`` unlogged steps after it.
    after: int
    hidden: int
    #: The spec's variables in that state, as TLA+ text.
    state: dict[str, str]


class WitnessVerdict(BaseModel):
    """The invariant check of one accepted trace."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    events: int
    #: Some behaviour that explains the whole trace satisfies every invariant in every state.
    clean: bool
    #: How many events, from the first, an invariant-clean behaviour explains.
    clean_events: int
    #: When not clean: the 1-based index and file line of the event after which every
    #: explaining behaviour breaks an invariant (0: already the initial state), and the
    #: breaking states.
    event: int | None = None
    line: int | None = None
    breaches: list[InvariantBreach] = []

    def summary(self) -> str:
        if self.clean:
            return f"{self.source}: every invariant holds on the accepted behaviour"
        names = sorted({n for b in self.breaches for n in b.invariants})
        where = f"after event {self.event} (line {self.line})" if self.event else "initially"
        if not names:
            return f"{self.source}: no invariant-clean behaviour explains it ({where})"
        return f"{self.source}: {', '.join(names)} false {where}"


class WitnessReport(BaseModel):
    """The invariants checked and the per-trace verdicts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    protocol: str
    invariants: list[str]
    verdicts: list[WitnessVerdict]
    #: The pruning runs (one per batch of constants that needed one).
    tlc_runs: int
    #: Batches every trace of which the acceptance run settled (no explored state broke one).
    settled: int = 0
    seconds: float
    distinct_states: int = 0

    @property
    def all_clean(self) -> bool:
        return all(v.clean for v in self.verdicts)


# --- which invariants ----------------------------------------------------------------------


def _cfg_sections(text: str) -> list[tuple[str, list[str]]]:
    sections: list[tuple[str, list[str]]] = []
    for token in re.findall(r'"(?:[^"\\]|\\.)*"|[A-Za-z0-9_]+|<-|\S', strip_comments(text)):
        if token in KEYWORDS:
            sections.append((token, []))
        elif sections:
            sections[-1][1].append(token)
    return sections


def _cfg_invariants(text: str) -> list[str]:
    return [
        name
        for keyword, tokens in _cfg_sections(text)
        if keyword in {"INVARIANT", "INVARIANTS"}
        for name in tokens
        if name != ","
    ]


def protocol_invariants(mapping: ProtocolMap, spec_root: Path) -> tuple[str, ...]:
    """The invariants the protocol's own models check: those of its first quick model that
    must pass (``spec/<protocol>/models.json``), or of ``<module>.cfg`` beside the spec."""
    folder = spec_root / mapping.protocol
    manifest_path = folder / MANIFEST_NAME
    cfg_path = folder / f"{mapping.module}.cfg"
    if manifest_path.is_file():
        try:
            manifest = ProtocolManifest.model_validate_json(manifest_path.read_text("utf-8"))
        except ValidationError as exc:
            raise TracecheckError(f"{manifest_path}: not a model manifest: {exc}") from exc
        quick = [m for m in manifest.models if m.klass == "quick" and m.expect is Expect.PASS]
        if quick:
            cfg_path = folder / quick[0].cfg
    if not cfg_path.is_file():
        raise TracecheckError(
            f"no invariants known for protocol {mapping.protocol}: no quick passing model in "
            f"{manifest_path} and no {cfg_path}; name them explicitly"
        )
    names = _cfg_invariants(cfg_path.read_text(encoding="utf-8"))
    if not names:
        raise TracecheckError(f"{cfg_path} lists no INVARIANT to check on traces")
    return tuple(names)


# --- the generated module ------------------------------------------------------------------


def _witness_cfg(cfg: str) -> tuple[str, list[str]]:
    """The trace spec's cfg with its constraints replaced by ``WitnessWatch``, and their names
    (WitnessWatch conjoins them, so the furthest-cursor registers count clean states only)."""
    kept: list[str] = []
    constraints: list[str] = []
    for keyword, tokens in _cfg_sections(cfg):
        if keyword in {"CONSTRAINT", "CONSTRAINTS"}:
            constraints += [t for t in tokens if t != ","]
        else:
            kept.append(" ".join([keyword, *tokens]))
    kept.append("CONSTRAINT WitnessWatch")
    return "\n".join(kept) + "\n", constraints


def _witness_module(invariants: Sequence[str], constraints: Sequence[str], vars_name: str) -> str:
    original = " /\\ ".join(constraints) or "TRUE"
    return (
        "\n".join(
            [
                f"---- MODULE {WITNESS_MODULE} ----",
                "\\* Generated by tracecheck.replay.witness; do not edit. The trace spec, with its",
                "\\* constraint guarded by the protocol's invariants: a state that breaks one is",
                "\\* printed and not explored, so the furthest cursor is how far a clean",
                "\\* behaviour explains the trace.",
                f"EXTENDS {TRACE_MODULE}, TLC",
                "",
                f"TVFailing == {failing(invariants)}",
                "",
                "WitnessWatch ==",
                f"  IF TVFailing = {{}} THEN {original}",
                f"  ELSE {breach_print(vars_name)} /\\ FALSE",
                "====",
            ]
        )
        + "\n"
    )


def witness_files(
    rendered: RenderedBatch, invariants: Sequence[str], mapping: ProtocolMap
) -> tuple[str, str]:
    """The generated ``TraceWitness`` module and its cfg for a rendered batch."""
    cfg, constraints = _witness_cfg(rendered.cfg)
    return _witness_module(invariants, constraints, mapping.vars), cfg


# --- the run -------------------------------------------------------------------------------


def _breaches(
    result: TLCResult, count: int, names: list[str] | None
) -> dict[int, list[tuple[int, InvariantBreach]]]:
    """Per trace number, (cursor, breach) for every printed failure."""
    found: dict[int, list[tuple[int, InvariantBreach]]] = {}
    for value in printed_values(result.printed, BREACH_TAG):
        if len(value) != 6:
            continue
        _, number, cursor, hidden, failing, state = value
        if not (isinstance(number, int) and isinstance(cursor, int) and 1 <= number <= count):
            continue
        values = list(state) if isinstance(state, tuple) else [state]
        labels = names if names and len(names) == len(values) else []
        labels = labels or [f"{i}" for i in range(1, len(values) + 1)]
        breach = InvariantBreach(
            invariants=sorted(str(n) for n in failing) if isinstance(failing, frozenset) else [],
            after=cursor - 1,
            hidden=hidden if isinstance(hidden, int) else 0,
            # printed_values parsed these with tla.parser.parse_value: they are TLA+ values.
            state={
                k: format_value(cast("TLAValue", v)) for k, v in zip(labels, values, strict=True)
            },
        )
        found.setdefault(number, []).append((cursor, breach))
    return found


def _verdict(
    trace: Trace, furthest: int, printed: list[tuple[int, InvariantBreach]]
) -> WitnessVerdict:
    total = len(trace.events)
    if furthest - 1 >= total:
        return WitnessVerdict(source=trace.source, events=total, clean=True, clean_events=total)
    # No clean behaviour consumes event ``furthest``: the states right after it are the ones to
    # show. Without any (the event is explained only from states already broken, e.g. through
    # a hidden step), show the latest breaches before it.
    cursors = {c for c, _ in printed}
    at = (
        furthest + 1
        if furthest + 1 in cursors
        else max((c for c in cursors if c <= furthest), default=None)
    )
    event = furthest if at is None else at - 1
    return WitnessVerdict(
        source=trace.source,
        events=total,
        clean=False,
        clean_events=furthest - 1,
        event=event,
        line=trace.lines[event - 1] if event else None,
        breaches=[b for c, b in printed if c == at],
    )


def check_invariants(
    traces: Sequence[Trace],
    report: ValidationReport,
    mapping: ProtocolMap,
    spec_root: Path,
    *,
    invariants: Sequence[str] | None = None,
    options: TLCOptions | None = None,
    settle: bool = True,
) -> WitnessReport:
    """Check ``invariants`` (default: :func:`protocol_invariants`) on the accepted behaviour of
    every trace ``report`` accepted; rejected traces have none and are skipped.

    A batch whose traces the acceptance run watched for these invariants with no breach
    (:mod:`tracecheck.replay.watch`) is clean without a run; ``settle=False`` runs every batch
    (what the watch is compared with)."""
    started = time.monotonic()
    names = checked_names(
        list(invariants) if invariants is not None else protocol_invariants(mapping, spec_root)
    )
    accepted = [(t, v) for t, v in zip(traces, report.verdicts, strict=True) if v.accepted]
    watched = settle and report.watched == names
    groups: dict[tuple[tuple[str, str], ...], list[Trace]] = {}
    unbroken: dict[tuple[tuple[str, str], ...], bool] = {}
    for trace, verdict in accepted:
        key = tuple(sorted(constants_for(trace, mapping).items()))
        groups.setdefault(key, []).append(trace)
        unbroken[key] = unbroken.get(key, True) and watched and verdict.watch_breach is False
    library = spec_library(spec_root, mapping)
    labels = spec_variables(library, mapping)
    reader = reader_classes()
    verdicts: dict[int, WitnessVerdict] = {}
    distinct = runs = 0
    for key, batch in groups.items():
        if unbroken[key]:  # every accepting behaviour was explored, and no state broke one
            for trace in batch:
                total = len(trace.events)
                verdicts[id(trace)] = WitnessVerdict(
                    source=trace.source, events=total, clean=True, clean_events=total
                )
            continue
        runs += 1
        rendered = render_batch(batch, mapping, reader=reader)
        module, cfg = witness_files(rendered, names, mapping)
        result = run_rendered(
            dataclasses.replace(rendered, cfg=cfg),
            library,
            options,
            extra={WITNESS_MODULE: module},
            root=WITNESS_MODULE,
        )
        if result.verdict is not Verdict.SUCCESS:
            details = "; ".join(e.message for e in result.errors)
            raise CheckerError(
                f"TLC could not check the invariants {names} on {batch[0].source}"
                f"{' and others' if len(batch) > 1 else ''}: {result.verdict.value}: "
                f"{result.summary}" + (f" ({details})" if details else "")
            )
        distinct += result.stats.distinct or 0
        printed = _breaches(result, len(batch), labels)
        for number, (trace, furthest) in enumerate(
            zip(batch, furthest_cursors(result, len(batch)), strict=True), start=1
        ):
            verdicts[id(trace)] = _verdict(trace, furthest, printed.get(number, []))
    return WitnessReport(
        protocol=mapping.protocol,
        invariants=names,
        verdicts=[verdicts[id(t)] for t, _ in accepted],
        tlc_runs=runs,
        settled=len(groups) - runs,
        seconds=time.monotonic() - started,
        distinct_states=distinct,
    )


def print_witness(console: Console, report: WitnessReport) -> None:
    """One line per trace that breaks an invariant (with the state), then the figures."""
    for verdict in report.verdicts:
        if verdict.clean:
            continue
        console.print(f"[bold red]invariant broken[/] {escape(verdict.summary())}")
        for breach in verdict.breaches[:3]:
            after = f"after event {breach.after}" if breach.after else "in the initial state"
            hidden = f" and {breach.hidden} hidden step(s)" if breach.hidden else ""
            console.print(f"  {', '.join(breach.invariants)} false {after}{hidden}:")
            for name, value in breach.state.items():
                console.print(f"      {name} = {escape(value)}", soft_wrap=True)
    clean = sum(v.clean for v in report.verdicts)
    color = "green" if report.all_clean else "red"
    console.print(
        f"[{color}]invariants on the accepted behaviour: {clean}/{len(report.verdicts)} "
        f"traces clean[/] ({', '.join(report.invariants)}) in {report.seconds:.1f} s over "
        f"{report.tlc_runs} TLC run(s), {report.settled} batch(es) settled by the acceptance run"
    )


def validate_checked(
    inputs: Sequence[Path | TracePeek] | Sequence[Trace],
    mapping: ProtocolMap,
    spec_root: Path,
    *,
    invariants: bool,
    explain: bool = True,
    explain_limit: int | None = None,
    probe_events: int | None = None,
    window: int | None = None,
    settle: bool = True,
) -> tuple[list[Trace], ValidationReport, WitnessReport | None]:
    """Validate trace files (:func:`~tracecheck.replay.validate.validate_files`) or loaded
    traces (:func:`~tracecheck.replay.validate.validate_traces`) and, with ``invariants``,
    check the protocol's invariants on the accepted behaviours: the acceptance run watches
    them, and only batches with a breach get :func:`check_invariants`' run. Files are checked
    whole then (``window`` is ignored: the invariants are checked on the whole behaviour).
    ``settle=False``: the watch off, a pruning run for every batch (as before the watch)."""
    names = list(protocol_invariants(mapping, spec_root)) if invariants else None
    watch = names if settle else None
    loaded = [t for t in inputs if isinstance(t, Trace)]
    if loaded and len(loaded) == len(inputs):
        traces = loaded
        report = validate_traces(
            traces, mapping, spec_root, explain=explain, explain_limit=explain_limit, watch=watch
        )
    else:
        files = [p for p in inputs if not isinstance(p, Trace)]
        if len(files) != len(inputs):
            raise TypeError("validate_checked takes trace files or loaded traces, not both")
        traces, report = validate_files(
            files,
            mapping,
            spec_root,
            explain=explain,
            explain_limit=explain_limit,
            probe_events=probe_events,
            window=None if invariants else window,
            watch=watch,
        )
    if names is None:
        return traces, report, None
    witness = check_invariants(traces, report, mapping, spec_root, invariants=names, settle=settle)
    return traces, report, witness
