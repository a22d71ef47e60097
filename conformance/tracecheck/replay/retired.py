"""Ids a long trace's windows dropped from their start states, and the events that name one.

A protocol whose spec state grows with the trace (RRef: every UserRRef ever created) gives
each window a start state without what is over
(:attr:`~tracecheck.protocols.mapping.ProtocolMap.window_start`), with the ids that state no
longer names: no spec step can name them again (the protocol's docstring says why), so an
event that does is rejected at that event, before TLC, with a reason that says so (TLC would
reject it too, in the whole run and in the window, as a step no state explains).

An id counts as dropped only when every state a window starts from dropped it. The record is
per creating node, runs ``(first, last)`` of its id counter: each run ends at an id still
live, so it holds about as many runs as there are live ids, whatever the trace's length.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tracecheck.protocols.mapping import ProtocolMap, WindowIds
from tracecheck.replay.claims import Claim
from tracecheck.traces.load import TraceEvent

__all__ = ["Retired", "common_runs"]

Runs = Sequence[tuple[int, int]]


def common_runs(a: Runs, b: Runs) -> list[tuple[int, int]]:
    """The runs of the ids in both ``a`` and ``b`` (each sorted and disjoint)."""
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        first, last = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if first <= last:
            out.append((first, last))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


class Retired:
    """The ids the latest window's start states all dropped, per creating node."""

    def __init__(self, mapping: ProtocolMap) -> None:
        self._fields = {n: k for n, k in mapping.arg_kinds.items() if k in ("id", "id?")}
        self._messages = [n for n, k in mapping.arg_kinds.items() if k == "message"]
        self._runs: dict[str, list[tuple[int, int]]] = {}

    def starts(self, dropped: Sequence[WindowIds]) -> None:
        """The next window starts from states that dropped ``dropped`` (one per state). What
        earlier windows dropped is dropped again (no step names it again), so this replaces
        the record."""
        runs: dict[str, list[tuple[int, int]]] = {}
        if dropped:
            runs = {node: list(r) for node, r in dropped[0].items()}
            for other in dropped[1:]:
                runs = {n: common_runs(r, other.get(n, ())) for n, r in runs.items()}
        self._runs = {n: r for n, r in runs.items() if r}

    @property
    def runs(self) -> int:
        """Runs stored (what the record's memory is proportional to)."""
        return sum(len(r) for r in self._runs.values())

    def holds(self, value: Any) -> bool:
        """``value`` is an id ``[node, n]`` (as logged) that the start states dropped."""
        if type(value) is not list or len(value) != 2 or type(value[1]) is not int:
            return False
        runs = self._runs.get(value[0]) if type(value[0]) is str else None
        if not runs:
            return False
        n, low, high = value[1], 0, len(runs)
        while low < high:  # the first run that ends at or after n
            mid = (low + high) // 2
            if runs[mid][1] < n:
                low = mid + 1
            else:
                high = mid
        return low < len(runs) and runs[low][0] <= n

    def first_named(self, events: Iterable[TraceEvent], offset: int) -> Claim | None:
        """The first of ``events`` (the first one is event ``offset + 1``) that names a dropped
        id, as a false claim about its arguments, or None."""
        if not self._runs:
            return None
        for index, event in enumerate(events, start=offset + 1):
            for name, value in _named(event.args, self._fields, self._messages):
                if self.holds(value):
                    return Claim(
                        index,
                        "argument",
                        f"{name}: {value!r} is an RRef id that was over before this window "
                        "(deleted, and named by nothing live in any state the window starts "
                        "from): no spec step can name it again",
                    )
        return None


def _named(
    args: Mapping[str, Any], fields: Mapping[str, str], messages: Sequence[str]
) -> Iterable[tuple[str, Any]]:
    for name in fields:
        if name in args:
            yield f"args.{name}", args[name]
    for name in messages:
        message = args.get(name)
        if isinstance(message, dict):
            for field in ("rref", "fork", "parent"):
                if field in message:
                    yield f"args.{name}.{field}", message[field]
