"""What a trace claims about itself, checked before TLC replays it: who took each step, when,
and with arguments inside the spec's domains.

A spec step says what happened, not who logged it nor in which order the logs of several
processes interleave; the trace says both, and the checker must not take them on trust:

- **Who.** Each event's ``node`` must be the actor of the action it names
  (:attr:`~tracecheck.protocols.mapping.ActionMap.actor`): a worker action's worker, the sender
  of a retried message, the header's environment actor of a global step. A step logged by the
  wrong node used to be accepted, or rejected events later at an innocent event.
- **When.** Lamport clocks grow along each node's events; and (schema 4) a step that takes a
  message names its send (``sent_by``: the sender and its clock at the send), which must be an
  earlier event of that node, with a smaller clock. ``--merge`` orders per-process logs by these
  clocks, so a wrong clock would reorder a run; here it is a rejection at the event that carries it.
- **Domains.** Arguments hold what the mapping says they hold (a header node, an id, a message
  record of nodes and ids, :attr:`~tracecheck.protocols.mapping.ProtocolMap.arg_kinds`): a
  value outside them (``"w": "zz"``) made TLC fail to evaluate the step, which stopped the
  whole batch without a verdict.

:func:`first_false_claim` returns the first event that breaks one of them. The validation gives
TLC only the events before it: if the spec explains them all, the trace is rejected at that
event with the claim's reason; if not, TLC's own first unmatched event comes first.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tracecheck.protocols.mapping import ActionMap, ProtocolMap
from tracecheck.traces.load import Trace, TraceEvent, TraceHeader

__all__ = ["SENT_BY_VERSION", "Claim", "ClaimCheck", "ClaimKind", "Stamps", "first_false_claim"]

#: The schema version from which a step that takes a message carries ``sent_by``.
SENT_BY_VERSION = 4

ClaimKind = Literal["actor", "clock", "argument", "outside"]


@dataclass(frozen=True, slots=True)
class Claim:
    """The first event whose claim is false: 1-based index, which claim, and why."""

    index: int
    kind: ClaimKind
    reason: str


def first_false_claim(trace: Trace, mapping: ProtocolMap) -> Claim | None:
    """The first event of ``trace`` whose actor, clock or arguments are wrong, or None."""
    return ClaimCheck(trace.header, mapping).first_false(trace.events)


class ClaimCheck:
    """The claims of one trace checked as its events come, window after window (what the
    events so far say of clocks is kept between calls: a window checked after the others
    gets the verdict the whole trace would give)."""

    def __init__(self, header: TraceHeader, mapping: ProtocolMap) -> None:
        self.nodes = frozenset(header.nodes)
        self.actors = self.nodes | frozenset(header.environment)
        self.actions = {a.event: a for a in mapping.actions}
        self.kinds = mapping.arg_kinds
        #: events of shapes the spec leaves out on purpose, with the shape's name
        self.outside = mapping.outside
        self.causal = header.schema_version >= SENT_BY_VERSION
        self.clocks: dict[str, int] = {}
        #: per node, the Lamport clocks of its events so far (the sends a receive may name)
        self.stamps: dict[str, Stamps] = {}
        #: events checked so far (the next one's index is this plus one)
        self.checked = 0

    def first_false(self, events: Iterable[TraceEvent]) -> Claim | None:
        """The first of the next ``events`` (indexed from the start of the trace) whose claim
        is false, or None; after a false claim the check is over."""
        nodes, actors, actions, kinds = self.nodes, self.actors, self.actions, self.kinds
        clocks, stamps = self.clocks, self.stamps
        for index, event in enumerate(events, start=self.checked + 1):
            self.checked = index
            if event.event in self.outside:  # a shape the spec leaves out on purpose
                return Claim(index, "outside", f"outside the spec: {self.outside[event.event]}")
            action = actions.get(event.event)
            if action is None:  # the renderer names the unknown event (a format error)
                continue
            problem = _arguments(event, kinds, nodes)
            if problem is not None:
                return Claim(index, "argument", problem)
            takers = _actors(action, event)
            if event.node not in takers:
                actor = takers[0]
                return Claim(
                    index,
                    "actor",
                    f"{event.event} is taken by {actor!r} ({_who(action)}), but the event was "
                    f"logged by {event.node!r}",
                )
            last = clocks.get(event.node)
            if last is not None and event.lamport <= last:
                return Claim(
                    index,
                    "clock",
                    f"Lamport clock {event.lamport} of {event.node} does not grow (its previous "
                    f"event had {last})",
                )
            if self.causal:
                problem = _receive(event, action, actors, stamps)
                if problem is not None:
                    return Claim(index, "clock", problem)
            clocks[event.node] = event.lamport
            node_stamps = stamps.get(event.node)
            if node_stamps is None:
                node_stamps = stamps[event.node] = Stamps()
            node_stamps.add(event.lamport)
        return None


class Stamps:
    """One node's Lamport clocks so far, as runs of consecutive integers.

    A receive may name any earlier send of its sender (a message stays in flight as long as it
    likes), so every clock of every node is kept; but a node's clocks only grow (the clock
    claim is checked before a clock is added) and most steps add one, so they are stored as
    runs ``[start, end]`` in two arrays of unsigned 64-bit integers (a clock is a JSON integer
    within 64 bits): 16 bytes per run, a run ending only where a receive (or a logger) jumps
    the clock. A set held an int object and a hash slot per event (about 60 bytes each)."""

    __slots__ = ("_ends", "_starts")

    def __init__(self) -> None:
        self._starts = array("Q")
        self._ends = array("Q")

    def add(self, stamp: int) -> None:
        """Add ``stamp``, larger than every stamp added before."""
        if self._ends and stamp == self._ends[-1] + 1:
            self._ends[-1] = stamp
        else:
            self._starts.append(stamp)
            self._ends.append(stamp)

    def __contains__(self, stamp: object) -> bool:
        if type(stamp) is not int:
            return False
        at = bisect_right(self._starts, stamp) - 1
        return at >= 0 and stamp <= self._ends[at]

    @property
    def runs(self) -> int:
        """Runs stored (what the memory is proportional to)."""
        return len(self._starts)


def _who(action: ActionMap) -> str:
    if action.actor is None or action.actor.startswith("env:"):
        return "the environment actor of the step" if action.actor else "its acting node"
    return " or ".join(f"args.{choice}" for choice in action.actor.split("|"))


def _actors(action: ActionMap, event: TraceEvent) -> list[object]:
    """The nodes that may take the step (one, or the mapping's alternatives), read from the
    event as the mapping says."""
    actor = action.actor
    if actor is None:
        return [event.node]  # the acting node is a parameter itself
    if actor.startswith("env:"):
        return [actor.removeprefix("env:")]
    found: list[object] = []
    for choice in actor.split("|"):
        value: Any = event.args
        for part in choice.split("."):
            if not isinstance(value, dict) or part not in value:
                value = None
                break
            value = value[part]
        # a worker that is a natural in the spec (autograd) is named by its decimal string
        found.append(str(value) if type(value) is int else value)
    return found


def _receive(
    event: TraceEvent, action: ActionMap, actors: frozenset[str], stamps: dict[str, Stamps]
) -> str | None:
    sent_by = event.sent_by
    if not action.receives:
        if sent_by is not None:
            return f"{event.event} takes no message, but the event names a send (sent_by)"
        return None
    if sent_by is None:
        return f"{event.event} takes a message: the event must name its send (sent_by)"
    sender, stamp = sent_by
    if sender not in actors:
        return f"sent_by names {sender!r}, which is not among the header's nodes"
    if event.lamport <= stamp:
        return (
            f"Lamport clock {event.lamport} is not after the send's ({sender} at {stamp}): "
            "a receive must follow its send"
        )
    known = stamps.get(sender)
    if known is None or stamp not in known:
        return (
            f"the message was sent by {sender} at Lamport clock {stamp}, but no earlier event "
            f"of {sender} has that clock"
        )
    return None


def _arguments(event: TraceEvent, kinds: Mapping[str, str], nodes: frozenset[str]) -> str | None:
    for name, value in event.args.items():
        kind = kinds.get(name)
        if kind is None:
            continue
        problem = _check(kind, value, nodes)
        if problem is not None:
            return f"args.{name}: {problem}"
    return None


def _check(kind: str, value: Any, nodes: frozenset[str]) -> str | None:
    if kind == "node":
        return None if type(value) is str and value in nodes else f"{_short(value)} is not a node"
    if kind in ("id", "id?"):
        if kind == "id?" and value == []:
            return None
        if (
            type(value) is list
            and len(value) == 2
            and type(value[0]) is str
            and value[0] in nodes
            and type(value[1]) is int
            and value[1] >= 1
        ):
            return None
        return f"{_short(value)} is not an id [node, n >= 1]"
    if kind == "message":
        if type(value) is not dict:
            return f"{_short(value)} is not a message record"
        for field, part in (("src", "node"), ("dst", "node"), ("owner", "node")):
            if field in value and _check(part, value[field], nodes) is not None:
                return f"field {field}: {_short(value[field])} is not a node"
        for field in ("rref", "fork", "parent"):
            if field in value and _check("id?", value[field], nodes) is not None:
                return f"field {field}: {_short(value[field])} is not an id or []"
        return None
    return None  # pragma: no cover - the mapping's type admits no other kind


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
