"""One long trace file checked in windows: memory bounded by the window, not the trace.

A trace checked whole is held whole: its events in Python, their text in the data module or the
Java reader's file, and TLC's values of them. A file of more than a window's events is instead
read a window at a time (:func:`tracecheck.traces.load.trace_windows`), and each window is one
breadth-first TLC run that starts from **every** state the previous window ended in:

- TLC prints each state whose cursor passed the window's events (``tv_state``, with
  ``tvHidden``; :data:`~tracecheck.replay.tracespec.STATE_TAG`), and the next window's
  ``TraceInit`` is the set of them (``TVStart``). Breadth-first search reaches every state that
  explains events 1..K, so the states at cursor K+1 are exactly those the whole run reaches
  there, and what follows from them is what follows in the whole run: the verdict and the first
  unmatched event are the same (tests compare both ways). The set is bounded
  (:data:`MAX_FRONTIER`): a trace that leaves more states open is a :class:`CheckerError`,
  never a guess. ``tvLog`` (the rebuilt logged sets) is not carried: each window's events have
  their logged deltas resolved first, from each node's sets at the window's start (kept here),
  so a window's data stands alone.
- A protocol whose spec state grows with the trace projects each start state
  (:attr:`~tracecheck.protocols.mapping.ProtocolMap.window_start`; RRef: the UserRRefs that
  are over left out, :func:`tracecheck.protocols.rref.window_start` says why the verdicts are
  the whole run's), so the start is bounded by what is live; an event naming an id every start
  state dropped is rejected at that event (:class:`~tracecheck.replay.retired.Retired`).
- The constants are the whole file's: ``mapping.derive`` reads the file once before the first
  window (one pass, a window in memory at a time), as it would read the loaded trace.
- The claims (:class:`~tracecheck.replay.claims.ClaimCheck`) and the implementation's schema are
  checked window by window, their state (clocks, sends) kept between windows.

What a window costs is a TLC start (about a second) and one breadth-first pass over its events;
the simulation pass is not used (it reaches one end state, not all of them). A rejection stops
the read: the lines after the rejecting window are never read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from tracecheck.protocols.mapping import ProtocolMap, WindowIds
from tracecheck.replay.batches import cursor_verdict, furthest_cursors, simulate_rendered
from tracecheck.replay.claims import Claim, ClaimCheck
from tracecheck.replay.retired import Retired
from tracecheck.replay.tlcrun import CheckerError, printed_values, require_clean, run_rendered
from tracecheck.replay.tracespec import STATE_TAG, Window, render_batch
from tracecheck.replay.verdicts import Rejection, TraceVerdict
from tracecheck.runner.tlc import TLCOptions
from tracecheck.tla.values import Record, TLAFunction, TLAValue, format_value
from tracecheck.traces.load import Trace, TraceEvent, TraceFormatError, TraceHeader, trace_windows
from traceformat.deltas import DeltaError, resolve

__all__ = ["MAX_FRONTIER", "STREAM_WINDOW", "Streamed", "state_text", "stream_file"]

#: Events per window. A window's events, their text and TLC's values of them are what a long
#: trace holds in memory (with the next window's first event).
STREAM_WINDOW = 50_000

#: The most distinct states a window may end in: the next window starts from each of them.
MAX_FRONTIER = 1_000


@dataclass
class Streamed:
    """A file checked in windows: its verdict and what it cost."""

    #: The events up to the rejection (what a report and the artefacts show), or, accepted,
    #: the first window.
    trace: Trace
    verdict: TraceVerdict
    #: TLC runs (one per window checked) and the distinct states they found.
    runs: int
    distinct: int
    #: Events read and checked (all of them when accepted).
    events: int
    #: The events of an accepted trace by name (empty when rejected).
    coverage: Counter[str]


class _FileEvents:
    """The file's events, read again at each iteration a window at a time: what
    ``mapping.derive`` iterates (it reads ``header`` and ``events`` in order, nothing else)."""

    def __init__(self, path: Path, header: TraceHeader, size: int, source: str) -> None:
        self.source, self.header, self._path, self._size = source, header, path, size

    @property
    def events(self) -> Iterator[TraceEvent]:
        for window, _ in trace_windows(self._path, self._size, source=self.source):
            yield from window.events


def _derived(
    path: Path, header: TraceHeader, mapping: ProtocolMap, size: int, source: str
) -> dict[str, str]:
    if mapping.derive is None:
        return {}
    view = cast("Trace", _FileEvents(path, header, size, source))
    return dict(mapping.derive([view]))


def _resolved(
    window: Trace, state: dict[tuple[str, str], dict[bytes, Any] | None], events: int
) -> Trace:
    """The window's first ``events`` events with every logged delta replaced by the whole set
    it stands for, from each node's sets as the earlier windows left them (``state``)."""
    kept = window.events[:events]
    try:
        rows = resolve([(e.node, list(e.post.items())) for e in kept], state)
    except DeltaError as exc:
        raise TraceFormatError(
            window.source, window.lines[exc.index], f"field post.{exc.key}: {exc.problem}"
        ) from exc
    return window.model_copy(
        update={
            "events": tuple(
                e.model_copy(update={"post": dict(zip(e.post, row, strict=True))})
                for e, row in zip(kept, rows, strict=True)
            ),
            "lines": window.lines[:events],
            "end": window.end if events == len(window.events) else None,
        }
    )


def _start(
    value: tuple[Any, ...], variables: Sequence[str], mapping: ProtocolMap
) -> tuple[str, WindowIds | None]:
    """A printed end state ``<<"tv_state", tvHidden, <<vars...>>>>`` as the next window's start,
    TLA+ text of ``<<tvHidden, vars...>>``: projected by the protocol's ``window_start`` if it
    has one (what is over left out), with the ids the projection dropped."""
    hidden, values = value[1], value[2]
    if mapping.window_start is None or len(values) != len(variables):
        return state_text(cast("TLAValue", (hidden, *values))), None
    projected, dropped = mapping.window_start(dict(zip(variables, values, strict=True)))
    state = (hidden, *(projected[name] for name in variables))
    return state_text(cast("TLAValue", state)), dropped


def _states(
    printed: Sequence[str], source: str, variables: Sequence[str], mapping: ProtocolMap
) -> tuple[tuple[str, ...], list[WindowIds]]:
    """The distinct states a window ended in, as TLA+ text of ``<<tvHidden, vars...>>`` (see
    :func:`_start`), and what each dropped."""
    found: dict[str, None] = {}
    dropped: list[WindowIds] = []
    for value in printed_values(printed, STATE_TAG):
        if len(value) != 3 or not isinstance(value[2], tuple):
            continue
        text, gone = _start(value, variables, mapping)
        if text not in found and gone is not None:
            dropped.append(gone)
        found[text] = None
        if len(found) > MAX_FRONTIER:
            raise CheckerError(
                f"{source}: more than {MAX_FRONTIER:,} spec states explain the trace up to a "
                "window's end; check it whole (validate --probe 0)"
            )
    if not found:
        raise CheckerError(f"{source}: TLC printed no state at a window's end")
    return tuple(found), dropped


def state_text(value: TLAValue) -> str:
    """``value`` as TLA+ text TLC reads back whatever its size: as :func:`format_value` writes
    it, except that a function's entries are merged as a balanced tree, ``((a :> 1 @@ b :> 2)
    @@ (c :> 3 @@ d :> 4))``, one entry per line. A state holds functions of thousands of
    entries (RRef's ``users``: every UserRRef ever created), and written as one chain
    ``a :> 1 @@ b :> 2 @@ ...`` their depth overflowed TLC's stack (a 16,931-event RRef trace
    in windows of 4,000: StackOverflowError in the second window); the tree is log2(n) deep."""
    if isinstance(value, TLAFunction) and value:
        return _merged([f"{state_text(k)} :> {state_text(v)}" for k, v in value.items()])
    if isinstance(value, frozenset):
        return "{" + ", ".join(sorted(state_text(v) for v in value)) + "}"
    if isinstance(value, tuple):
        return "<<" + ", ".join(state_text(v) for v in value) + ">>"
    if isinstance(value, Record):
        return "[" + ", ".join(f"{k} |-> {state_text(v)}" for k, v in value.items()) + "]"
    return format_value(value)


def _merged(entries: Sequence[str]) -> str:
    if len(entries) == 1:
        return f"({entries[0]})"
    half = len(entries) // 2
    return f"({_merged(entries[:half])} @@\n{_merged(entries[half:])})"


def _shifted(verdict: TraceVerdict, window: Trace, offset: int, read: int) -> TraceVerdict:
    """A window's rejection as the whole trace's: its index counted from the trace's start,
    the event as logged (the window TLC checked had its deltas resolved)."""
    rejection = verdict.rejection
    assert rejection is not None
    event = None if rejection.event is None else window.events[verdict.matched]
    return verdict.model_copy(
        update={
            "events": read,
            "matched": offset + verdict.matched,
            "rejection": rejection.model_copy(
                update={"index": offset + rejection.index, "event": event}
            ),
        }
    )


def _claimed(window: Trace, claim: Claim, offset: int, read: int) -> TraceVerdict:
    local = claim.index - offset - 1
    return TraceVerdict(
        source=window.source,
        accepted=False,
        events=read,
        matched=claim.index - 1,
        rejection=Rejection(
            index=claim.index,
            line=window.lines[local],
            event=window.events[local],
            kind=claim.kind,
            reason=claim.reason,
        ),
    )


def stream_file(  # noqa: PLR0917 - what a run of windows needs, passed on
    path: Path,
    header: TraceHeader,
    mapping: ProtocolMap,
    library: Sequence[Path],
    variables: Sequence[str] | None,
    options: TLCOptions | None,
    reader: Path | None,
    *,
    window: int = STREAM_WINDOW,
    check_schema: Any = None,
    walk: bool = True,
    source: str | None = None,
) -> Streamed:
    """Check one trace file window by window (see the module docstring). ``variables`` are the
    spec's (the order of its ``vars``); ``check_schema(trace, mapping)`` checks a window
    against the implementation's schema (in a thread, while TLC runs). ``walk=False``: no
    simulation chain first, the breadth-first chain decides. ``source``: the name verdicts
    and errors give (default ``path``; a stream's spool is named as its stream)."""
    name = source or str(path)
    if not variables:
        raise CheckerError(
            f"{name}: the spec's vars are not known, so its windows cannot be chained; "
            "check it whole (validate --probe 0)"
        )
    derived = _derived(path, header, mapping, window, name)
    cost = _Cost()
    args = (path, header, mapping, library, variables, options, reader, window, derived, name)
    walked = _walk(*args, cost, check_schema) if walk else None
    if walked is not None:
        return walked
    claims = ClaimCheck(header, mapping)
    retired = Retired(mapping)
    deltas: dict[tuple[str, str], dict[bytes, Any] | None] = {}
    start: tuple[str, ...] | None = None
    offset = 0
    first: Trace | None = None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracecheck-schema") as pool:
        for part, last in trace_windows(path, window, source=name):
            first = first or part
            read = offset + len(part.events)
            schema = pool.submit(check_schema, part, mapping) if check_schema else None
            claim = _first(
                claims.first_false(part.events), retired.first_named(part.events, offset)
            )
            checked = len(part.events) if claim is None else claim.index - offset - 1
            verdict: TraceVerdict | None = None
            if checked:
                resolved = _resolved(part, deltas, checked)
                more = not last and claim is None
                rendered = render_batch(
                    [resolved],
                    mapping,
                    compact=True,
                    reader=reader,
                    window=Window(start, more),
                    derived=derived,
                )
                result = run_rendered(rendered, library, options)
                cost.runs += 1
                require_clean(result, f"{name}, events {offset + 1}..{offset + checked}")
                cost.distinct += result.stats.distinct or 0
                (furthest,) = furthest_cursors(result, 1)
                local = cursor_verdict(resolved, furthest, rendered.end_steps[0])
                if not local.accepted:
                    verdict = _shifted(local, part, offset, read)
                elif more:
                    start, dropped = _states(result.printed, name, variables, mapping)
                    retired.starts(dropped)
            if schema is not None:
                schema.result()  # a malformed window is an error whatever TLC said of it
            if verdict is None and claim is not None:
                verdict = _claimed(part, claim, offset, read)
            if verdict is not None:
                return cost.streamed(part, verdict, read)
            cost.coverage.update(e.event for e in part.events)
            offset = read
    assert first is not None
    accepted = TraceVerdict(source=name, accepted=True, events=offset, matched=offset)
    return cost.streamed(first, accepted, offset)


def _first(a: Claim | None, b: Claim | None) -> Claim | None:
    """The earlier of two false claims."""
    if a is None or b is None:
        return a or b
    return a if a.index <= b.index else b


def _walk(  # noqa: PLR0917 - stream_file's, passed on
    path: Path,
    header: TraceHeader,
    mapping: ProtocolMap,
    library: Sequence[Path],
    variables: Sequence[str],
    options: TLCOptions | None,
    reader: Path | None,
    window: int,
    derived: dict[str, str],
    name: str,
    cost: _Cost,
    check_schema: Any,
) -> Streamed | None:
    """The trace accepted by TLC's simulation, window after window, each walk going on from
    the state the previous one ended in: one spec behaviour that explains every event, which
    is all acceptance means (so it is sound; with one state per event, as the protocols'
    traces have, it is the breadth-first chain's verdict at a fraction of its cost: no
    fingerprints, and RRef's states grow with the trace). None when a walk did not finish a
    window or a claim is false: then the breadth-first chain decides, from the start. Each
    window is checked against the implementation's schema too."""
    claims = ClaimCheck(header, mapping)
    retired = Retired(mapping)
    deltas: dict[tuple[str, str], dict[bytes, Any] | None] = {}
    hidden = mapping.max_hidden if mapping.hidden_steps else 0
    start: tuple[str, ...] | None = None
    offset = 0
    coverage: Counter[str] = Counter()
    first: Trace | None = None
    for part, last in trace_windows(path, window, source=name):
        first = first or part
        if check_schema is not None:
            check_schema(part, mapping)  # a malformed window is an error whatever TLC says
        if claims.first_false(part.events) is not None:
            return None
        if retired.first_named(part.events, offset) is not None:
            return None  # the breadth-first chain says where and why
        resolved = _resolved(part, deltas, len(part.events))
        rendered = render_batch(
            [resolved],
            mapping,
            compact=True,
            variables=variables,
            reader=reader,
            window=Window(start, not last),
            derived=derived,
        )
        done, result = simulate_rendered(rendered, library, options, hidden)
        cost.runs += 1
        if 1 not in done or result is None:
            return None
        if not last:
            ends = printed_values(result.printed, STATE_TAG)
            if not ends or len(ends[0]) != 3 or not isinstance(ends[0][2], tuple):
                return None
            text, dropped = _start(ends[0], variables, mapping)
            start = (text,)
            retired.starts([] if dropped is None else [dropped])
        coverage.update(e.event for e in part.events)
        offset += len(part.events)
    assert first is not None
    cost.coverage = coverage
    accepted = TraceVerdict(source=name, accepted=True, events=offset, matched=offset)
    return cost.streamed(first, accepted, offset)


@dataclass
class _Cost:
    runs: int = 0
    distinct: int = 0
    coverage: Counter[str] = field(default_factory=Counter)

    def streamed(self, trace: Trace, verdict: TraceVerdict, events: int) -> Streamed:
        coverage = self.coverage if verdict.accepted else Counter[str]()
        return Streamed(trace, verdict, self.runs, self.distinct, events, coverage)
