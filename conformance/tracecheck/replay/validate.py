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

A large batch is cut into chunks of about :data:`CHUNK_EVENTS` events, each checked by its own
TLC runs (the two passes above): the next chunk is rendered (Python; with :func:`validate_files`
its files are also read only then) while TLC (Java) checks the previous ones, at most
:data:`TLC_PROCESSES` at a time, so the two halves of the work overlap on the machine's cores
instead of following each other.

Each rejected trace is then re-run alone by :mod:`tracecheck.replay.explain` to say why. A TLC
failure on the generated modules (a parse error, a crash) is a :class:`CheckerError`, never a
verdict.
"""

from __future__ import annotations

import importlib
import re
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from itertools import accumulate
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from tracecheck.errors import TracecheckError
from tracecheck.nogc import paused_gc
from tracecheck.protocols.mapping import ProtocolMap
from tracecheck.replay.javareader import reader_classes
from tracecheck.replay.tracespec import (
    DATA_FILE,
    DONE_TAG,
    MAX_TAG,
    SIM_MODULE,
    TRACE_MODULE,
    RenderedBatch,
    header_constants,
    printed_values,
    render_batch,
)
from tracecheck.runner.results import TLCResult, Verdict
from tracecheck.runner.tlc import TLCOptions, run_tlc
from tracecheck.traces.load import (
    Trace,
    TraceEvent,
    TraceHeader,
    TracePeek,
    load_trace,
    peek_trace,
)
from tracecheck.traces.schema import check_events

__all__ = [
    "CHUNK_EVENTS",
    "TLC_PROCESSES",
    "CheckerError",
    "TraceVerdict",
    "ValidationReport",
    "chunks",
    "run_rendered",
    "spec_library",
    "spec_variables",
    "validate_files",
    "validate_traces",
]


#: A batch of more events than this is validated in chunks of about this many (see the module
#: docstring). Each chunk costs a TLC start-up (about a second of CPU), so chunks stay large;
#: smaller batches, every test's among them, are one chunk as before.
CHUNK_EVENTS = 40_000
#: TLC processes at a time: the machines this runs on have two cores, and one thread of Python
#: renders the next chunk meanwhile.
TLC_PROCESSES = 2


class CheckerError(TracecheckError):
    """TLC could not run the generated trace spec: a bug in a mapping or spec, not a verdict."""


class Rejection(BaseModel):
    """Where a rejected trace stops making sense."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: 1-based index of the first event no spec behaviour explains.
    index: int
    #: The line of the trace file it came from.
    line: int
    event: TraceEvent


class TraceVerdict(BaseModel):
    """The verdict on one trace."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    source: str
    accepted: bool
    events: int
    #: How many events, from the first, some spec behaviour explains.
    matched: int
    rejection: Rejection | None = None
    #: Filled by the explain pass for rejected traces.
    explanation: object | None = None


class ValidationReport(BaseModel):
    """Verdicts for a set of traces, with coverage and figures."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    protocol: str
    verdicts: list[TraceVerdict]
    #: Events per spec action over the accepted traces.
    coverage: dict[str, int]
    #: Spec actions the mapping knows that no accepted trace exercised.
    uncovered: list[str]
    tlc_runs: int
    #: Traces the simulation pass accepted (the others went to breadth-first search).
    simulated: int = 0
    events: int
    seconds: float
    distinct_states: int = 0
    rate: float = Field(default=0.0, description="events per second, end to end")

    @property
    def all_accepted(self) -> bool:
        return all(v.accepted for v in self.verdicts)


def spec_library(spec_root: Path, mapping: ProtocolMap) -> tuple[Path, ...]:
    """The folders SANY searches for the protocol spec and shared modules."""
    folders = [spec_root / mapping.protocol, spec_root / "common"]
    return tuple(f.resolve() for f in folders if f.is_dir())


def spec_variables(library: Sequence[Path], mapping: ProtocolMap) -> list[str] | None:
    """The names in the spec's ``vars == <<...>>``, in order; ``None`` if it is not found."""
    # The spec module first, then the modules beside it (``vars`` may come from one it EXTENDS).
    paths = [f / f"{mapping.module}.tla" for f in library]
    paths += [p for f in library for p in sorted(f.glob("*.tla")) if p not in paths]
    for path in paths:
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            found = re.search(rf"^{mapping.vars}\s*==\s*<<(.*?)>>", text, re.M | re.S)
            if found:
                body = re.sub(r"\\\*[^\n]*", "", found[1])
                return [v.strip() for v in body.split(",") if v.strip()]
    return None


def run_rendered(
    rendered: RenderedBatch,
    library: Sequence[Path],
    options: TLCOptions | None = None,
    *,
    extra: Mapping[str, str] | None = None,
    root: str = TRACE_MODULE,
    cfg: str | None = None,
) -> TLCResult:
    """Write the generated modules (and ``extra`` ones, by name) to a temporary folder and run
    TLC on module ``root`` with ``cfg`` (by default the rendered breadth-first one)."""
    base = options or TLCOptions()
    classpath = (*base.classpath, rendered.reader) if rendered.reader else base.classpath
    opts = base.model_copy(
        update={
            "classpath": classpath,
            "check_deadlock": False,  # a consumed trace has no successor: that is its end
            "workers": 1,  # the registers that track the furthest cursor are per worker
            "library": tuple(library),
            "attribute_properties": False,
            # C1 only: trace runs are short and TLC's C2 compilations cost as much CPU as the
            # search (a 2,782-event RRef trace: 10 s of CPU with C2, 5 s without; the same at
            # 6,000 events), and the machines have two cores.
            "jvm": (*base.jvm, "-XX:TieredStopAtLevel=1"),
        }
    )
    with tempfile.TemporaryDirectory(prefix="tracecheck-") as tmp:
        folder = Path(tmp)
        for name, text in (rendered.modules() | dict(extra or {})).items():
            (folder / f"{name}.tla").write_text(text, encoding="utf-8")
        if rendered.data_file is not None:
            (folder / DATA_FILE).write_text(rendered.data_file, encoding="utf-8")
        (folder / f"{root}.cfg").write_text(cfg or rendered.cfg, encoding="utf-8")
        return run_tlc(folder / f"{root}.tla", folder / f"{root}.cfg", opts)


def furthest_cursors(result: TLCResult, count: int) -> list[int]:
    """Per trace, the furthest cursor TLC printed (1 = nothing consumed)."""
    furthest = [1] * count
    for _, number, cursor in printed_values(result.printed, MAX_TAG):
        if isinstance(number, int) and isinstance(cursor, int) and 1 <= number <= count:
            furthest[number - 1] = max(furthest[number - 1], cursor)
    return furthest


@cache
def _schema(ref: str) -> TypeAdapter[Any]:
    module_name, _, attribute = ref.partition(":")
    adapter = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(adapter, TypeAdapter):
        raise CheckerError(f"{ref} is not a pydantic TypeAdapter")
    return adapter


def _check_schemas(traces: Sequence[Trace], mapping: ProtocolMap) -> None:
    for trace in traces:
        check_schema(trace, mapping)


def check_schema(trace: Trace, mapping: ProtocolMap) -> None:
    """Validate every event against the implementation's own event schema, if it has one
    (each logged set's elements once per trace: :mod:`tracecheck.traces.schema`)."""
    if mapping.event_schema is None:
        return
    check_events(trace, _schema(mapping.event_schema))


def _require_clean(result: TLCResult, what: str) -> None:
    if result.verdict is not Verdict.SUCCESS:
        details = "; ".join(
            f"{e.location}: {e.message}" if e.location else e.message for e in result.errors
        )
        raise CheckerError(
            f"TLC could not check {what}: {result.verdict.value}: {result.summary}"
            + (f" ({details})" if details else "")
        )


#: TLC's seed for the simulation pass: runs are reproducible (with one successor per event, as
#: the traces of both protocols have, the seed does not matter at all).
SIM_SEED = 1


def _simulation_pass(
    rendered: RenderedBatch, library: Sequence[Path], options: TLCOptions | None, hidden: int = 0
) -> set[int]:
    """The numbers (1-based) of the traces that TLC's random simulation consumed."""
    if rendered.sim_module is None or rendered.sim_cfg is None:
        return set()
    base = options or TLCOptions()
    sim = base.model_copy(
        update={
            "simulate": True,
            "traces": 1,
            # every event is a step (after up to ``hidden`` hidden ones), and one reset step
            # between two traces
            "depth": (sum(rendered.lengths) + len(rendered.lengths)) * (1 + hidden) + 1,
            "seed": SIM_SEED,
        }
    )
    result = run_rendered(rendered, library, sim, root=SIM_MODULE, cfg=rendered.sim_cfg)
    count = len(rendered.lengths)
    # A failed run (an evaluation error in a state no trace reaches, say) accepts nothing
    # and leaves every trace to the breadth-first pass, which reports real errors.
    return {
        number
        for _, number in (v[:2] for v in printed_values(result.printed, DONE_TAG))
        if isinstance(number, int) and 1 <= number <= count
    }


def _verdict(trace: Trace, furthest: int) -> TraceVerdict:
    total = len(trace.events)
    matched = furthest - 1
    if matched >= total:
        return TraceVerdict(source=trace.source, accepted=True, events=total, matched=total)
    return TraceVerdict(
        source=trace.source,
        accepted=False,
        events=total,
        matched=matched,
        rejection=Rejection(index=furthest, line=trace.lines[matched], event=trace.events[matched]),
    )


class _GroupRun:
    """Verdicts for batches of traces with the same constants: the simulation pass, then
    breadth-first search on the traces it did not accept (see the module docstring)."""

    def __init__(
        self,
        traces: list[Trace | None],
        mapping: ProtocolMap,
        library: Sequence[Path],
        *,
        options: TLCOptions | None,
        variables: Sequence[str] | None,
        reader: Path | None,
    ) -> None:
        self.traces, self.mapping, self.library = traces, mapping, library
        self.options, self.variables, self.reader = options, variables, reader
        self.verdicts: list[TraceVerdict | None] = [None] * len(traces)
        self.runs = self.simulated = self.distinct = 0
        # chunks are checked in threads (TLC runs as another process); counts are shared
        self._lock = threading.Lock()

    def _count(self, runs: int = 0, simulated: int = 0, distinct: int = 0) -> None:
        with self._lock:
            self.runs += runs
            self.simulated += simulated
            self.distinct += distinct

    def trace(self, i: int) -> Trace:
        """Trace ``i``, loaded before its chunk is rendered (validate_files loads as it goes)."""
        trace = self.traces[i]
        if trace is None:
            raise AssertionError(f"trace {i} was not loaded before its chunk")
        return trace

    def render(self, indices: Sequence[int], *, simulation: bool = True) -> RenderedBatch:
        return render_batch(
            [self.trace(i) for i in indices],
            self.mapping,
            compact=True,
            variables=self.variables if simulation else None,
            reader=self.reader,
        )

    def check(self, indices: Sequence[int], rendered: RenderedBatch) -> None:
        rest = list(indices)
        if self.variables:
            hidden = self.mapping.max_hidden if self.mapping.hidden_steps else 0
            done = _simulation_pass(rendered, self.library, self.options, hidden)
            self._count(runs=1, simulated=len(done))
            for number in sorted(done):
                i = rest[number - 1]
                self.verdicts[i] = _verdict(self.trace(i), len(self.trace(i).events) + 1)
            if done:  # breadth-first search gets its own, smaller batch
                rest = [i for n, i in enumerate(rest, start=1) if n not in done]
                if not rest:
                    return
                rendered = self.render(rest, simulation=False)
        batch = [self.trace(i) for i in rest]
        result = run_rendered(rendered, self.library, self.options)
        self._count(runs=1)
        _require_clean(result, f"{len(batch)} trace(s) starting with {batch[0].source}")
        self._count(distinct=result.stats.distinct or 0)
        for i, furthest in zip(rest, furthest_cursors(result, len(batch)), strict=True):
            self.verdicts[i] = _verdict(self.trace(i), furthest)


def chunks(
    indices: Sequence[int], sizes: Sequence[int], size: int | None = None
) -> list[list[int]]:
    """``indices`` cut, in order, into runs of traces of about ``size`` (by default
    :data:`CHUNK_EVENTS`) events each on average (the count rounded); all of them when they
    hold fewer. ``sizes[i]`` is trace ``i``'s event count.

    The shares are :func:`chunk_shares`: the first chunk is smaller, so that TLC starts sooner
    (it waits for that chunk to be read and rendered), and so is the last, which TLC checks
    when Python has nothing left to do and may leave a core idle."""
    size = size or CHUNK_EVENTS
    lengths = [sizes[i] for i in indices]
    total = sum(lengths)
    count = max(1, min(len(indices), round(total / size)))
    if count == 1:
        return [list(indices)]
    ends = list(accumulate(share * total / count for share in chunk_shares(count)))
    out: list[list[int]] = [[]]
    filled = 0
    for i, length in zip(indices, lengths, strict=True):
        # start a new chunk once this one reached its end
        if out[-1] and filled >= ends[len(out) - 1] and len(out) < count:
            out.append([])
        out[-1].append(i)
        filled += length
    return out


def chunk_shares(count: int) -> list[float]:
    """Each chunk's events relative to the average (they add up to ``count``): 0.6 for the
    first and 0.8 for the last of three or more, the rest between the others. On the bench's
    100 RRef traces (5 chunks) the batch took 14.0-14.1 s against 14.6-15.2 s in equal chunks
    (alternating, 2 rounds); 0.5 and 0.7 were no better."""
    if count == 1:
        return [1.0]
    if count == 2:
        return [0.8, 1.2]
    middle = (count - 1.4) / (count - 2)
    return [0.6, *([middle] * (count - 2)), 0.8]


def validate_traces(
    traces: Sequence[Trace],
    mapping: ProtocolMap,
    spec_root: Path,
    *,
    explain: bool = True,
    options: TLCOptions | None = None,
    simulate: bool = True,
) -> ValidationReport:
    """Check every trace against the spec; batch by constants; explain each rejection.

    ``simulate=False`` skips the simulation pass (breadth-first search decides every trace).
    """
    started = time.monotonic()
    sources = [_Source(t.source, t.header, len(t.events), trace=t) for t in traces]
    return _validate(sources, mapping, spec_root, started, explain, options, simulate)[1]


def validate_files(
    paths: Sequence[Path | TracePeek],
    mapping: ProtocolMap,
    spec_root: Path,
    *,
    explain: bool = True,
    options: TLCOptions | None = None,
    simulate: bool = True,
) -> tuple[list[Trace], ValidationReport]:
    """:func:`validate_traces` on trace files, each loaded just before its chunk is rendered:
    TLC checks the first chunk while the next files are read (their headers and line counts,
    read first, are what batching needs). The loaded traces come back with the report; a
    malformed file is the same TraceFormatError as from :func:`tracecheck.traces.load.load_trace`.
    A file already peeked at (:func:`tracecheck.traces.load.peek_trace`) may be passed as its peek.
    """
    started = time.monotonic()
    peeks = [p if isinstance(p, TracePeek) else peek_trace(p) for p in paths]
    sources = [_Source(str(p.path), p.header, p.lines, path=p.path) for p in peeks]
    return _validate(sources, mapping, spec_root, started, explain, options, simulate)


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
            self._trace = load_trace(self._path)
        return self._trace


def _validate(  # noqa: PLR0917 - the two public entry points' options, passed on
    sources: Sequence[_Source],
    mapping: ProtocolMap,
    spec_root: Path,
    started: float,
    explain: bool,
    options: TLCOptions | None,
    simulate: bool,
) -> tuple[list[Trace], ValidationReport]:
    for source in sources:
        if source.header.protocol != mapping.protocol:
            raise CheckerError(
                f"{source.source}: a {source.header.protocol} trace, but the mapping is for "
                f"{mapping.protocol}"
            )
    groups: dict[tuple[tuple[str, str], ...], list[int]] = {}
    for i, source in enumerate(sources):
        key = tuple(sorted(header_constants(source.header, source.source, mapping).items()))
        groups.setdefault(key, []).append(i)
    library = spec_library(spec_root, mapping)
    run = _GroupRun(
        [None] * len(sources),
        mapping,
        library,
        options=options,
        variables=spec_variables(library, mapping) if simulate else None,
        reader=reader_classes(),
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
                    for i, trace in zip(chunk, loaded, strict=True):
                        run.traces[i] = trace
                    rendered = run.render(chunk)
                    schemas.append(pool.submit(_check_schemas, loaded, mapping))
                    checks.append(tlc.submit(run.check, chunk, rendered))
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
    verdicts, runs = run.verdicts, run.runs
    final = [v for v in verdicts if v is not None]
    if explain:
        from tracecheck.replay.explain import explain_rejection  # noqa: PLC0415 - avoids a cycle

        for i, verdict in enumerate(final):
            if not verdict.accepted and verdict.rejection is not None:
                explanation = explain_rejection(
                    traces[i], verdict.rejection.index, mapping, library, options
                )
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
        rate=events / seconds if seconds else 0.0,
    )
