"""Logged post-state sets as differences: what keeps long traces cheap to parse.

Implementations log the acting node's whole slice of a variable after each step, and many
slices only grow (every UserRRef ever created, every tombstone): written out literally, the data
module of an n-event trace has O(n^2) elements, and SANY's parse time dominated validation (a
2,000-event RRef trace: 13 s of parsing for 1.7 s of search). So a set-valued post field is
rendered as ``<<removed, added>>`` relative to the value the same node logged for the same
expression last time, and the trace spec rebuilds the logged value in a variable (``tvLog``)
before comparing it with the spec's. The rebuilt value is exactly the logged one, so verdicts do
not change; the comparison itself still reads the whole slice, as before.

Elements are compared by their canonical JSON text. That is TLA+ equality only for JSON
without ITF tags (strings, integers, booleans, lists as tuples, objects as records with sorted
keys), so an expression is delta-encoded only when none of its elements has a tag: ``{"#set":
[1, 2]}`` and ``{"#set": [2, 1]}`` differ as text and are equal as sets.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

__all__ = ["UNCHANGED", "Delta", "DeltaPlan", "element_text", "encode_compact", "plan_deltas"]

#: Delta-encode an expression only when that shrinks its logged elements at least this much.
WORTH = 0.75

#: One event as the planner sees it: the acting node and its (expression, JSON value) posts.
Shape = tuple[str, Sequence[tuple[str, Any]]]


_SORTED = orjson.OPT_SORT_KEYS


def element_text(element: Any) -> bytes:
    """The canonical JSON text of a set element (compact, objects with sorted keys)."""
    return orjson.dumps(element, option=orjson.OPT_SORT_KEYS)


class Delta(NamedTuple):
    """A logged set as the elements removed from and added to the node's previous one
    (canonical JSON text -> JSON element). A tuple, not a frozen dataclass: one is made per
    changed set, and a frozen dataclass's ``__init__`` costs several times as much."""

    removed: dict[bytes, Any]
    added: dict[bytes, Any]


_NOTHING: dict[bytes, Any] = {}
#: The delta of a set logged exactly as the node's previous one (a third of all logged sets
#: in the RRef campaign traces): shared, and recognised by identity when rendering.
UNCHANGED = Delta(_NOTHING, _NOTHING)


class _Logged(NamedTuple):
    """The last set a node logged for an expression."""

    whole: bytes  # its canonical JSON text (one orjson call over the list)
    items: list[Any]  # its elements as logged, and their canonical texts
    texts: list[bytes]
    elements: dict[bytes, Any]  # canonical text -> element


def _texts(items: list[Any], whole: bytes, seen: _Logged | None) -> list[bytes]:
    """The canonical text of each element of a logged list whose canonical text is ``whole``.

    A node's next set is mostly its last one with an element or two inserted or removed, so
    the texts of the elements before and after the change are taken from ``seen`` (Python's
    ``==`` finds them, a C comparison) and only the elements in between are encoded (an orjson
    call per element was half the time of delta encoding). ``==`` also equates ``1``, ``1.0``
    and ``True``, whose texts differ, so the result is checked against ``whole``: the
    texts of complete JSON values that join into it are its elements' (a JSON value is read
    unambiguously up to the next separator), and on a mismatch every element is encoded."""
    dumps = orjson.dumps
    if seen is None:
        return [dumps(e, option=_SORTED) for e in items]
    before = seen.items
    n, m = len(items), len(before)
    shortest = min(n, m)
    head = 0
    while head < shortest and items[head] == before[head]:
        head += 1
    tail = 0
    while tail < shortest - head and items[n - 1 - tail] == before[m - 1 - tail]:
        tail += 1
    texts = seen.texts[:head]
    texts += [dumps(e, option=_SORTED) for e in items[head : n - tail]]
    if tail:
        texts += seen.texts[m - tail :]
    if b"[" + b",".join(texts) + b"]" == whole:
        return texts
    return [dumps(e, option=_SORTED) for e in items]


def _changes(
    events: Sequence[Shape], sizes: dict[str, list[int]] | None = None
) -> list[list[Delta | None]]:
    """Per event, per post value: its delta from the value the same node logged for the same
    expression last time, or None when the value is not a tag-free set. ``sizes`` adds up, per
    expression, the elements logged and those in deltas, and gets -1 for a value not a set.

    A set logged as last time (the same canonical JSON text) is :data:`UNCHANGED` without a
    text per element: one orjson call over the list instead of one per element. Its elements
    may differ from the last ones in the order of their keys, which no text depends on: a
    removed element's TLA+ text was memoised when it was added (:mod:`tracecheck.tracespec`)."""
    last: dict[tuple[str, str], _Logged] = {}
    dumps, get = orjson.dumps, last.get
    counts: dict[str, list[int]] = {} if sizes is None else sizes
    out: list[list[Delta | None]] = []
    for node, posts in events:
        row: list[Delta | None] = []
        for expr, value in posts:
            count = counts.get(expr)
            if count is None:
                count = counts[expr] = [0, 0]
            items = value.get("#set") if isinstance(value, dict) and len(value) == 1 else None
            if not isinstance(items, list):
                count[1] = -1
                row.append(None)
                continue
            whole = dumps(items, option=_SORTED)
            seen = get((expr, node))
            if seen is not None and seen.whole == whole:
                count[0] += len(items)
                row.append(UNCHANGED)
                continue
            # the texts joined with commas are ``whole`` less its brackets: the tag test of
            # the texts one by one, made once
            if b'"#' in whole:
                count[1] = -1
                row.append(None)
                continue
            texts = _texts(items, whole, seen)
            now = dict(zip(texts, items, strict=True))
            last[(expr, node)] = _Logged(whole, items, texts, now)
            before = _NOTHING if seen is None else seen.elements
            gone = before.keys() - now.keys()
            new = now.keys() - before.keys()
            removed = {t: before[t] for t in gone} if gone else _NOTHING
            added = {t: now[t] for t in new} if new else _NOTHING
            count[0] += len(items)
            if count[1] >= 0:
                count[1] += len(removed) + len(added)
            row.append(Delta(removed, added))
        out.append(row)
    return out


@dataclass(frozen=True)
class DeltaPlan:
    """Which post expressions are delta-encoded, each with its key (1-based) in ``tvLog``."""

    keys: dict[str, int]

    def encode(self, traces: Sequence[Sequence[Shape]]) -> list[list[list[Any]]]:
        """Per trace, per event, the post values, delta-encoded ones replaced by a Delta."""
        if not self.keys:
            return [[[value for _, value in posts] for _, posts in events] for events in traces]
        return [_choose(events, _changes(events), self.keys) for events in traces]


def _choose(
    events: Sequence[Shape], changes: Sequence[Sequence[Delta | None]], keys: dict[str, int]
) -> list[list[Any]]:
    """The post values of each event, those of the ``keys`` expressions as their Delta."""
    return [
        [
            value if change is None or expr not in keys else change
            for (expr, value), change in zip(posts, row, strict=True)
        ]
        for (_, posts), row in zip(events, changes, strict=True)
    ]


def plan_deltas(traces: Iterable[Sequence[Shape]]) -> DeltaPlan:
    """Delta-encode an expression when every value logged for it is a tag-free set and the
    differences are clearly smaller than the values (a one-message ``delivered`` set is not)."""
    return encode_compact(list(traces))[0]


def encode_compact(
    traces: Sequence[Sequence[Shape]],
) -> tuple[DeltaPlan, list[list[list[Any]]]]:
    """:func:`plan_deltas` and :meth:`DeltaPlan.encode` in one walk over the logged sets
    (canonical texts are the expensive part, and every logged element needs one)."""
    # expression -> [elements logged, elements in deltas (-1: a value is not a tag-free set)]
    sizes: dict[str, list[int]] = {}
    walked = [_changes(events, sizes) for events in traces]
    chosen = sorted(e for e, (full, delta) in sizes.items() if 0 <= delta < WORTH * full)
    plan = DeltaPlan(keys={e: i for i, e in enumerate(chosen, start=1)})
    out = [
        _choose(events, changes, plan.keys) for events, changes in zip(traces, walked, strict=True)
    ]
    return plan, out
