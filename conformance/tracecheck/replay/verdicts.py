"""The checker's verdicts: per trace (accepted, or where it stops making sense) and per batch
(with coverage and figures)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tracecheck.traces.load import TraceEvent

__all__ = ["Rejection", "RejectionKind", "TraceVerdict", "ValidationReport"]


#: Why a trace is rejected at its event: no spec step explains it (``spec``); what it claims
#: about itself is false (``actor``, ``clock``, ``argument``: :mod:`tracecheck.replay.claims`);
#: it marks a shape the spec leaves out on purpose (``outside``: the mapping's ``outside``);
#: or its run says it finished but the spec state after its last event is not quiescent
#: (``end``: the event is then the trace's end, one past its last event).
RejectionKind = Literal["spec", "actor", "clock", "argument", "outside", "end"]


class Rejection(BaseModel):
    """Where a rejected trace stops making sense."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: 1-based index of the first event no spec behaviour explains (for ``end``: the number of
    #: events plus one, the end line).
    index: int
    #: The line of the trace file it came from.
    line: int
    #: The event (None for ``end``).
    event: TraceEvent | None
    kind: RejectionKind = "spec"
    #: Why, when the checker knows it without the explain pass (a false claim).
    reason: str | None = None

    def what(self) -> str:
        """``event 7 (line 8) Receive by b``, or ``the end line (line 40)``."""
        if self.event is None:
            return f"the end line (line {self.line}), after event {self.index - 1},"
        return f"event {self.index} (line {self.line}) {self.event.event} by {self.event.node}"


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
    #: With invariants watched (:mod:`tracecheck.replay.watch`), for an accepted trace: whether
    #: a state the run that accepted it explored for it broke one (None: not watched).
    watch_breach: bool | None = None


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
    #: The invariants the runs watched (each accepted verdict's ``watch_breach``), if any.
    watched: list[str] | None = None
    rate: float = Field(default=0.0, description="events per second, end to end")

    @property
    def all_accepted(self) -> bool:
        return all(v.accepted for v in self.verdicts)
