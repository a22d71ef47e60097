"""Batches of traces through TLC: cut into chunks checked side by side, each by the simulation
pass and then breadth-first search on what it did not accept (see :mod:`tracecheck.replay.validate`
for why), and each trace's verdict read from the furthest cursor TLC printed."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from itertools import accumulate
from pathlib import Path

from tracecheck.protocols.mapping import ProtocolMap
from tracecheck.replay.tlcrun import printed_values, require_clean, run_rendered
from tracecheck.replay.tracespec import DONE_TAG, MAX_TAG, SIM_MODULE, RenderedBatch, render_batch
from tracecheck.replay.verdicts import Rejection, TraceVerdict
from tracecheck.replay.watch import breached_traces, watched
from tracecheck.runner.results import TLCResult
from tracecheck.runner.tlc import TLCOptions
from tracecheck.traces.load import Trace

__all__ = [
    "CHUNK_EVENTS",
    "SIM_SEED",
    "TLC_PROCESSES",
    "GroupRun",
    "chunk_shares",
    "chunks",
    "cursor_verdict",
    "furthest_cursors",
    "simulate_rendered",
]


#: A batch of more events than this is validated in chunks of about this many (see the module
#: docstring). Each chunk costs a TLC start-up (about a second of CPU), so chunks stay large;
#: smaller batches, every test's among them, are one chunk as before.
CHUNK_EVENTS = 40_000


#: TLC processes at a time: the machines this runs on have two cores, and one thread of Python
#: renders the next chunk meanwhile.
TLC_PROCESSES = 2


def furthest_cursors(result: TLCResult, count: int) -> list[int]:
    """Per trace, the furthest cursor TLC printed (1 = nothing consumed)."""
    furthest = [1] * count
    for _, number, cursor in printed_values(result.printed, MAX_TAG):
        if isinstance(number, int) and isinstance(cursor, int) and 1 <= number <= count:
            furthest[number - 1] = max(furthest[number - 1], cursor)
    return furthest


#: TLC's seed for the simulation pass: runs are reproducible (with one successor per event, as
#: the traces of both protocols have, the seed does not matter at all).
SIM_SEED = 1


def simulate_rendered(
    rendered: RenderedBatch, library: Sequence[Path], options: TLCOptions | None, hidden: int = 0
) -> tuple[set[int], TLCResult | None]:
    """The numbers (1-based) of the traces that TLC's random simulation consumed, and TLC's
    result (None: no simulation module)."""
    if rendered.sim_module is None or rendered.sim_cfg is None:
        return set(), None
    base = options or TLCOptions()
    sim = base.model_copy(
        update={
            "simulate": True,
            "traces": 1,
            # every event is a step (after up to ``hidden`` hidden ones), and one reset step
            # between two traces
            "depth": (sum(rendered.lengths) + sum(rendered.end_steps) + len(rendered.lengths))
            * (1 + hidden)
            + 1,
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
    }, result


def cursor_verdict(trace: Trace, furthest: int, end_step: int) -> TraceVerdict:
    """The verdict from the furthest cursor: past the events (and the end step of a finished
    run, :data:`~tracecheck.replay.tracespec.END_STEP`), accepted; else rejected there."""
    total = len(trace.events)
    matched = min(furthest - 1, total)
    if furthest - 1 >= total + end_step:
        return TraceVerdict(source=trace.source, accepted=True, events=total, matched=total)
    if matched == total:  # every event explained, but the run's end is not quiescent
        rejection = Rejection(index=total + 1, line=_end_line(trace), event=None, kind="end")
    else:
        rejection = Rejection(
            index=furthest, line=trace.lines[matched], event=trace.events[matched]
        )
    return TraceVerdict(
        source=trace.source, accepted=False, events=total, matched=matched, rejection=rejection
    )


def _end_line(trace: Trace) -> int:
    """The file line of a trace's end line: the one after its last event (a merged trace's
    events come from several files; its last event's line plus one is still what it says)."""
    return trace.lines[-1] + 1 if trace.lines else 1


class GroupRun:
    """Verdicts for batches of traces with the same constants: the simulation pass, then
    breadth-first search on the traces it did not accept (see the module docstring).

    ``watch``: invariants every run also evaluates (:mod:`tracecheck.replay.watch`);
    ``breached[i]`` then says whether a state of trace ``i`` broke one in the run that
    decided it (None: not watched, or not decided here)."""

    def __init__(
        self,
        traces: list[Trace | None],
        mapping: ProtocolMap,
        library: Sequence[Path],
        *,
        options: TLCOptions | None,
        variables: Sequence[str] | None,
        reader: Path | None,
        watch: Sequence[str] | None = None,
    ) -> None:
        self.traces, self.mapping, self.library = traces, mapping, library
        self.options, self.variables, self.reader = options, variables, reader
        self.watch = list(watch) if watch else None
        self.verdicts: list[TraceVerdict | None] = [None] * len(traces)
        self.breached: list[bool | None] = [None] * len(traces)
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
        rendered = render_batch(
            [self.trace(i) for i in indices],
            self.mapping,
            compact=True,
            variables=self.variables if simulation else None,
            reader=self.reader,
        )
        return rendered if self.watch is None else watched(rendered, self.watch, self.mapping.vars)

    def check(self, indices: Sequence[int], rendered: RenderedBatch) -> None:
        rest = list(indices)
        if self.variables:
            hidden = self.mapping.max_hidden if self.mapping.hidden_steps else 0
            done, sim = simulate_rendered(rendered, self.library, self.options, hidden)
            self._count(runs=1, simulated=len(done))
            # (the walked behaviour of each accepted trace is among the states evaluated)
            broke = set() if sim is None else breached_traces(sim, len(rest))
            for number in sorted(done):
                i = rest[number - 1]
                trace = self.trace(i)
                end = rendered.end_steps[number - 1]
                self.verdicts[i] = cursor_verdict(trace, len(trace.events) + end + 1, end)
                if self.watch is not None:
                    self.breached[i] = number in broke
            if done:  # breadth-first search gets its own, smaller batch
                rest = [i for n, i in enumerate(rest, start=1) if n not in done]
                if not rest:
                    return
                rendered = self.render(rest, simulation=False)
        batch = [self.trace(i) for i in rest]
        result = run_rendered(rendered, self.library, self.options)
        self._count(runs=1)
        require_clean(result, f"{len(batch)} trace(s) starting with {batch[0].source}")
        self._count(distinct=result.stats.distinct or 0)
        cursors = furthest_cursors(result, len(batch))
        broke = breached_traces(result, len(batch))
        for number, (i, furthest, end) in enumerate(
            zip(rest, cursors, rendered.end_steps, strict=True), start=1
        ):
            self.verdicts[i] = cursor_verdict(self.trace(i), furthest, end)
            if self.watch is not None:
                self.breached[i] = number in broke


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
