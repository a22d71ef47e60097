"""Validating traces with TLC: batch verdicts, then an explanation for each rejected trace.

All traces that share their spec constants are checked together, in two passes at most:

1. TLC's random simulation walks the traces one after the other in a single behaviour
   (``TraceSim``). It keeps no set of seen states, so it costs a fraction of a breadth-first
   search; every trace it consumes is accepted, because the behaviour it walked is a spec
   behaviour that explains every event. It stops at the first trace it cannot finish, which
   proves nothing: simulation picks one successor at random and may have picked badly.
2. Breadth-first search (``TraceSpec``) on the traces the simulation did not accept, which is
   exhaustive: a trace is accepted when some spec behaviour consumes every event; otherwise the
   first event no spec step can explain is the one after the furthest cursor any behaviour
   reached.

A large batch is cut into chunks of about :data:`~tracecheck.replay.batches.CHUNK_EVENTS` events,
each checked by its own TLC runs (the two passes above): the next chunk is rendered (Python; with
:func:`validate_files` its files are also read only then) while TLC (Java) checks the previous ones,
at most :data:`~tracecheck.replay.batches.TLC_PROCESSES` at a time, so the two halves of the work
overlap on the machine's cores instead of following each other.

Each rejected trace is then re-run alone by :mod:`tracecheck.replay.explain` to say why. A TLC
failure on the generated modules (a parse error, a crash) is a
:class:`~tracecheck.replay.tlcrun.CheckerError`, never a verdict.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from tracecheck.errors import TracecheckError
from tracecheck.nogc import paused_gc
from tracecheck.plugins import event_schema
from tracecheck.protocols.mapping import ProtocolMap
from tracecheck.replay.batches import TLC_PROCESSES, GroupRun, chunks
from tracecheck.replay.claims import Claim, first_false_claim
from tracecheck.replay.ending import explain_end
from tracecheck.replay.explain import explain_rejection
from tracecheck.replay.javareader import reader_classes
from tracecheck.replay.stream import stream_file
from tracecheck.replay.tlcrun import CheckerError, spec_library, spec_variables
from tracecheck.replay.tracedata import header_constants
from tracecheck.replay.verdicts import Rejection, TraceVerdict, ValidationReport
from tracecheck.runner.tlc import TLCOptions
from tracecheck.traces.load import (
    Trace,
    TraceHeader,
    TracePeek,
    load_trace,
    peek_trace,
    spooled,
)
from tracecheck.traces.schema import check_events

__all__ = ["check_schema", "validate_files", "validate_traces"]


def _check_schemas(traces: Sequence[Trace], mapping: ProtocolMap) -> None:
    for trace in traces:
        check_schema(trace, mapping)


def check_schema(trace: Trace, mapping: ProtocolMap) -> None:
    """Validate every event against the implementation's own event schema, if its plug-in is
    installed (each logged set's elements once per trace: :mod:`tracecheck.traces.schema`)."""
    adapter = event_schema(mapping.protocol)
    if adapter is not None:
        check_events(trace, adapter)


def validate_traces(
    traces: Sequence[Trace],
    mapping: ProtocolMap,
    spec_root: Path,
    *,
    explain: bool = True,
    explain_limit: int | None = None,
    options: TLCOptions | None = None,
    simulate: bool = True,
    watch: Sequence[str] | None = None,
) -> ValidationReport:
    """Check every trace against the spec; batch by constants; explain each rejection.

    ``simulate=False`` skips the simulation pass (breadth-first search decides every trace).
    ``explain_limit`` explains only the first that many rejections (each is a TLC run of its
    own: explaining 200 rejected traces took minutes); ``explain=False`` none. ``watch``: the
    invariants the runs also evaluate (:mod:`tracecheck.replay.watch`; what
    :func:`~tracecheck.replay.witness.check_invariants` then needs no run for).
    """
    started = time.monotonic()
    sources = [_Source(t.source, t.header, len(t.events), trace=t) for t in traces]
    explain_at_most = explain_limit if explain else 0
    return _validate(
        sources, mapping, spec_root, started, explain_at_most, options, simulate, watch
    )[1]


def validate_files(
    paths: Sequence[Path | TracePeek],
    mapping: ProtocolMap,
    spec_root: Path,
    *,
    explain: bool = True,
    explain_limit: int | None = None,
    options: TLCOptions | None = None,
    simulate: bool = True,
    probe_events: int | None = None,
    window: int | None = None,
    watch: Sequence[str] | None = None,
) -> tuple[list[Trace], ValidationReport]:
    """:func:`validate_traces` on trace files, each loaded just before its chunk is rendered:
    TLC checks the first chunk while the next files are read (their headers and line counts,
    read first, are what batching needs). The loaded traces come back with the report; a
    malformed file is the same TraceFormatError as from :func:`tracecheck.traces.load.load_trace`.
    A file already peeked at (:func:`tracecheck.traces.load.peek_trace`) may be passed as its peek.

    ``probe_events``: a file of more than twice that many events is first checked on its first
    ``probe_events`` events alone (only those lines are read), then on twice as many, and so
    on (each prefix while it is under half the file, and with ``window`` at most that): the
    first prefix the spec or a claim rejects is the file's verdict (a behaviour that explains
    the whole trace explains its prefix, and a prefix says nothing of a finished run's end),
    and the rest of the file is never read, rendered or given to TLC. The rejecting prefix's
    breadth-first pass names the first unmatched event itself, so a rejection at event k
    costs about log2(k / probe_events) + 2 TLC runs and k events read. A file whose prefixes
    are all accepted is checked whole, or, with ``window`` and more than that many events
    (a regular file, or a stream copied to one as far as it is read: its peek's spool), in
    windows of that many events (:mod:`tracecheck.replay.stream`:
    memory bounded by the window, the same verdict). The returned trace of a file decided on
    a prefix is that prefix; of a file checked in windows, its events up to the rejection,
    or its first window when accepted.

    ``watch`` as for :func:`validate_traces`, in the run that checks files whole (a file
    accepted in windows is not watched: its ``watch_breach`` is None).
    """
    started = time.monotonic()
    peeks = [p if isinstance(p, TracePeek) else peek_trace(p) for p in paths]
    explain_at_most = explain_limit if explain else 0
    decided: dict[int, tuple[Trace, TraceVerdict]] = {}
    spent = _Spent()
    streamed: list[int] = []
    if probe_events:
        size = probe_events
        pending = [i for i, p in enumerate(peeks) if p.lines > 2 * probe_events]
        while pending:
            # (a stream copied as far as its probe reads: its line count is exact at its end)
            for i in pending:
                peeks[i] = spooled(peeks[i], size)
            prefixes = [_first_events(peeks[i], size) for i in pending]
            probed = [_Source(t.source, t.header, len(t.events), trace=t) for t in prefixes]
            shown, first = _validate(
                probed, mapping, spec_root, started, explain_at_most, options, simulate
            )
            spent.add(first)
            size *= 2
            more: list[int] = []
            for i, trace, verdict in zip(pending, shown, first.verdicts, strict=True):
                if not verdict.accepted:
                    decided[i] = (trace, verdict)
                elif peeks[i].lines > 2 * size and (window is None or size <= window):
                    more.append(i)
                elif window is not None and peeks[i].lines > window and peeks[i].trace is None:
                    streamed.append(i)
            pending = more
    explained = sum(1 for _, v in decided.values() if v.explanation)
    for i in streamed:
        assert window is not None
        limit = None if explain_at_most is None else max(0, explain_at_most - explained)
        peeks[i] = spooled(peeks[i])  # (a stream, copied to its end: windows read it again)
        decided[i] = _stream(peeks[i], mapping, spec_root, limit, options, window, spent)
        explained += bool(decided[i][1].explanation)
    rest = [i for i in range(len(peeks)) if i not in decided]
    # (a pipe, FIFO or device is read from its spool, copied to its end)
    sources = [
        _Source(str(p.path), p.header, p.lines, trace=p.trace, path=p.readable)
        for p in (spooled(peeks[i]) for i in rest)
    ]
    traces, report = _validate(
        sources, mapping, spec_root, started, explain_at_most, options, simulate, watch
    )
    if not decided and not spent.runs:
        return traces, report
    return _merged(len(peeks), rest, traces, report, decided, spent, started)


class _Spent:
    """What the runs before the last one (probes, windows) cost and saw."""

    def __init__(self) -> None:
        self.runs = self.simulated = self.distinct = 0
        #: the events of the files accepted in windows (the last run counts the others)
        self.coverage: Counter[str] = Counter()

    def add(self, report: ValidationReport) -> None:
        self.runs += report.tlc_runs
        self.simulated += report.simulated
        self.distinct += report.distinct_states


def _stream(  # noqa: PLR0917 - validate_files' options, passed on
    peek: TracePeek,
    mapping: ProtocolMap,
    spec_root: Path,
    explain_limit: int | None,
    options: TLCOptions | None,
    window: int,
    spent: _Spent,
) -> tuple[Trace, TraceVerdict]:
    """A file checked in windows (:mod:`tracecheck.replay.stream`), and its rejection
    explained on its events up to the rejection (which a rejection at event k reads anyway)."""
    library = spec_library(spec_root, mapping)
    got = stream_file(
        peek.readable,
        peek.header,
        mapping,
        library,
        spec_variables(library, mapping),
        options,
        reader_classes(),
        window=window,
        check_schema=check_schema,
        source=str(peek.path),
    )
    spent.runs += got.runs
    spent.distinct += got.distinct
    spent.coverage += got.coverage
    trace, verdict = got.trace, got.verdict
    rejection = verdict.rejection
    if rejection is not None:
        # the events up to the rejection (every event before an end step's: the whole trace)
        trace = load_trace(
            peek.readable,
            max_events=rejection.index if rejection.event else None,
            source=str(peek.path),
        )
        if rejection.kind in ("spec", "end") and explain_limit != 0:
            explain_one = explain_end if rejection.kind == "end" else explain_rejection
            explanation = explain_one(trace, rejection.index, mapping, library, options)
            spent.runs += 1
            verdict = verdict.model_copy(update={"explanation": explanation})
    return trace, verdict


def _first_events(peek: TracePeek, events: int) -> Trace:
    """The first ``events`` events of a peeked file (read from the file, or cut from the trace
    a stream's peek holds)."""
    if peek.trace is not None:
        return _prefix(peek.trace, events)
    return load_trace(peek.readable, max_events=events, source=str(peek.path))


def _merged(  # noqa: PLR0917 - the runs of validate_files and what they decided
    count: int,
    rest: Sequence[int],
    traces: Sequence[Trace],
    report: ValidationReport,
    decided: dict[int, tuple[Trace, TraceVerdict]],
    spent: _Spent,
    started: float,
) -> tuple[list[Trace], ValidationReport]:
    """The files' traces and verdicts in their order: those decided on a prefix or in
    windows, and the others from the last run; the figures of all runs together."""
    whole = dict(zip(rest, zip(traces, report.verdicts, strict=True), strict=True))
    pairs = [decided[i] if i in decided else whole[i] for i in range(count)]
    seconds = time.monotonic() - started
    events = report.events + sum(v.events for _, v in decided.values())
    coverage = Counter(report.coverage) + spent.coverage
    return [t for t, _ in pairs], report.model_copy(
        update={
            "verdicts": [v for _, v in pairs],
            "coverage": dict(sorted(coverage.items())),
            "uncovered": sorted(set(report.uncovered) - set(coverage)),
            "tlc_runs": report.tlc_runs + spent.runs,
            "simulated": report.simulated + spent.simulated,
            "distinct_states": report.distinct_states + spent.distinct,
            "events": events,
            "seconds": seconds,
            "rate": events / seconds if seconds else 0.0,
        }
    )


class _Source:
    """A trace to validate: loaded already, or a file loaded when its chunk comes."""

    def __init__(
        self,
        source: str,
        header: TraceHeader,
        size: int,
        *,
        trace: Trace | None = None,
        path: Path | None = None,
    ) -> None:
        self.source, self.header, self.size = source, header, size
        self._trace, self._path = trace, path

    def load(self) -> Trace:
        if self._trace is None:
            assert self._path is not None
            self._trace = load_trace(self._path, source=self.source)
        return self._trace


def _validate(  # noqa: PLR0917 - the two public entry points' options, passed on
    sources: Sequence[_Source],
    mapping: ProtocolMap,
    spec_root: Path,
    started: float,
    explain_limit: int | None,
    options: TLCOptions | None,
    simulate: bool,
    watch: Sequence[str] | None = None,
) -> tuple[list[Trace], ValidationReport]:
    for source in sources:
        if source.header.protocol != mapping.protocol:
            raise CheckerError(
                f"{source.source}: a {source.header.protocol} trace, but the mapping is for "
                f"{mapping.protocol}"
            )
    claims: list[Claim | None] = [None] * len(sources)
    groups: dict[tuple[tuple[str, str], ...], list[int]] = {}
    for i, source in enumerate(sources):
        key = tuple(sorted(header_constants(source.header, source.source, mapping).items()))
        groups.setdefault(key, []).append(i)
    library = spec_library(spec_root, mapping)
    run = GroupRun(
        [None] * len(sources),
        mapping,
        library,
        options=options,
        variables=spec_variables(library, mapping) if simulate else None,
        reader=reader_classes(),
        watch=watch,
    )
    # The implementation's schema is checked in a thread while TLC (another process) runs:
    # both take about as long per event, and the machine has two cores.
    schemas: list[Future[None]] = []
    checks: list[Future[None]] = []
    sizes = [s.size for s in sources]
    with (
        paused_gc(),
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracecheck-schema") as pool,
        ThreadPoolExecutor(max_workers=TLC_PROCESSES, thread_name_prefix="tracecheck-tlc") as tlc,
    ):
        try:
            for indices in groups.values():
                for chunk in chunks(indices, sizes):
                    loaded = [sources[i].load() for i in chunk]
                    schemas.append(pool.submit(_check_schemas, loaded, mapping))
                    # TLC gets each trace up to its first false claim (claims.py): the spec
                    # may reject it earlier; if not, the claim is the rejection.
                    checked = []
                    for i, trace in zip(chunk, loaded, strict=True):
                        claims[i] = claim = first_false_claim(trace, mapping)
                        if claim is not None and claim.index == 1:
                            continue  # nothing before it for TLC to check
                        run.traces[i] = trace if claim is None else _prefix(trace, claim.index - 1)
                        checked.append(i)
                    if checked:
                        checks.append(tlc.submit(run.check, checked, run.render(checked)))
            for check in checks:
                check.result()
        except TracecheckError:
            for check in checks:
                check.cancel()
            # TLC could not run a batch, or a file is malformed: a trace that breaks the
            # schema says better why
            for schema in schemas:
                schema.result()
            raise
        for schema in schemas:
            schema.result()  # a malformed trace is an error whatever TLC said of it
    traces = [source.load() for source in sources]  # (every one was, chunk by chunk)
    runs = run.runs
    final = [
        _with_claim(trace, verdict, claim)
        for trace, verdict, claim in zip(traces, run.verdicts, claims, strict=True)
    ]
    if watch:
        final = [
            v.model_copy(update={"watch_breach": b}) if v.accepted else v
            for v, b in zip(final, run.breached, strict=True)
        ]
    if explain_limit != 0:
        explained = 0
        for i, verdict in enumerate(final):
            rejection = verdict.rejection
            if rejection is None or rejection.kind not in ("spec", "end"):
                continue  # a false claim says why itself
            if explain_limit is not None and explained >= explain_limit:
                break
            explained += 1
            explain_one = explain_end if rejection.kind == "end" else explain_rejection
            explanation = explain_one(traces[i], rejection.index, mapping, library, options)
            runs += 1
            final[i] = verdict.model_copy(update={"explanation": explanation})
    coverage: Counter[str] = Counter(
        e.event for t, v in zip(traces, final, strict=True) if v.accepted for e in t.events
    )
    seconds = time.monotonic() - started
    events = sum(len(t.events) for t in traces)
    return traces, ValidationReport(
        protocol=mapping.protocol,
        verdicts=final,
        coverage=dict(sorted(coverage.items())),
        uncovered=sorted({a.event for a in mapping.actions} - set(coverage)),
        tlc_runs=runs,
        simulated=run.simulated,
        events=events,
        seconds=seconds,
        distinct_states=run.distinct,
        watched=list(watch) if watch else None,
        rate=events / seconds if seconds else 0.0,
    )


def _prefix(trace: Trace, events: int) -> Trace:
    """The trace's first ``events`` events, as a run that did not say it finished."""
    return trace.model_copy(
        update={"events": trace.events[:events], "lines": trace.lines[:events], "end": None}
    )


def _with_claim(trace: Trace, verdict: TraceVerdict | None, claim: Claim | None) -> TraceVerdict:
    """The trace's verdict: TLC's on the events before its first false claim, if TLC rejected
    one of them; else the claim's rejection."""
    total = len(trace.events)
    if claim is None:
        assert verdict is not None
        return verdict
    if verdict is not None and not verdict.accepted:
        return verdict.model_copy(update={"events": total})
    index = claim.index
    return TraceVerdict(
        source=trace.source,
        accepted=False,
        events=total,
        matched=index - 1,
        rejection=Rejection(
            index=index,
            line=trace.lines[index - 1],
            event=trace.events[index - 1],
            kind=claim.kind,
            reason=claim.reason,
        ),
    )
