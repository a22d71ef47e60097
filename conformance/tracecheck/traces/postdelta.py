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

Since trace schema version 3 an implementation may log such a field as a delta itself
(:mod:`traceformat.deltas`): its traces are then linear in their length. An expression
logged as a delta anywhere is rendered as differences, whatever it saves.

Planning walks every logged set, and for a set whose elements are all new at each event
(``delivered``, the ``Added`` fields) the walk cost more than it could save: an expression
logged whole is retired once it has held :data:`RETIRE_AFTER` elements and its differences did
not pay, and from then on written literally without being diffed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, TypeVar

import orjson

from traceformat.deltas import (
    MIXED,
    NO_CHANGE,
    NOTHING,
    UNCHANGED,
    Delta,
    DeltaError,
    Shape,
    apply_delta,
    delta_lists,
    resolve,
)

__all__ = [
    "RETIRE_AFTER",
    "WORTH",
    "DeltaPlan",
    "encode_compact",
    "plan_deltas",
]

T = TypeVar("T")
R = TypeVar("R")

#: Delta-encode an expression only when that shrinks its logged elements at least this much.
WORTH = 0.75


_SORTED = orjson.OPT_SORT_KEYS


class _Logged(NamedTuple):
    """The last set a node logged for an expression. After a delta only ``elements`` is
    known (the other fields are None): the set as :func:`resolve` rebuilds it."""

    whole: bytes | None  # its canonical JSON text (one orjson call over the list)
    items: list[Any] | None  # its elements as logged, and their canonical texts
    texts: list[bytes] | None
    elements: dict[bytes, Any]  # canonical text -> element (owned: a delta updates it)


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
    if seen is None or seen.items is None or seen.texts is None:
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
    events: Sequence[Shape],
    sizes: dict[str, list[int]] | None = None,
    keep: Collection[str] = (),
) -> list[list[Delta | None]]:
    """Per event, per post value: its delta from the value the same node logged for the same
    expression last time, or None when the value is not a tag-free set or a logged delta.
    ``sizes`` adds up, per expression, the elements of the logged sets and those in deltas
    (-1: a value is neither a tag-free set nor a delta), counts the values logged as deltas, and
    says whether the expression was retired: with ``sizes`` (planning), an expression logged
    whole whose differences do not pay (:data:`RETIRE_AFTER`) is no longer diffed, unless it is
    in ``keep``; a delta logged for a retired expression raises :class:`_Restart`.

    A set logged as last time (the same canonical JSON text) is :data:`UNCHANGED` without a
    text per element: one orjson call over the list instead of one per element. Its elements
    may differ from the last ones in the order of their keys, which no text depends on: a
    removed element's TLA+ text was memoised when it was added (:mod:`tracecheck.replay.tracedata`).
    A logged delta costs a text per element it names, whatever the size of the set."""
    last: dict[tuple[str, str], _Logged] = {}
    dumps, get = orjson.dumps, last.get
    counts: dict[str, list[int]] = {} if sizes is None else sizes
    planning = sizes is not None
    out: list[list[Delta | None]] = []
    for index, (node, posts) in enumerate(events):
        row: list[Delta | None] = []
        for expr, value in posts:
            count = counts.get(expr)
            if count is None:
                count = counts[expr] = [0, 0, 0, 0]
            if value == NO_CHANGE and count[1] >= 0 and not count[3]:
                # a delta changing nothing (most of those an implementation logs): no text,
                # no state; a set that could not be changed (count[1] < 0) is the error below
                count[2] += 1
                row.append(UNCHANGED)
                continue
            items = value.get("#set") if isinstance(value, dict) and len(value) == 1 else None
            if not isinstance(items, list):
                lists = delta_lists(value)
                if lists is None:
                    _opaque(last, (expr, node), index, count)
                    row.append(None)
                    continue
                row.append(_logged_delta(last, (expr, node), lists, index, count))
                continue
            if planning and not count[3] and expr not in keep and _not_paying(count):
                count[3] = 1  # retired: its sets are written literally, not diffed any more
            if count[3]:
                row.append(None)
                continue
            whole = dumps(items, option=_SORTED)
            seen = get((expr, node))
            if seen is not None and seen.whole == whole:
                count[0] += len(items)
                row.append(UNCHANGED)
                continue
            row.append(_logged_whole(last, (expr, node), items, whole, index=index, count=count))
        out.append(row)
    return out


def _logged_whole(
    last: dict[tuple[str, str], _Logged],
    where: tuple[str, str],
    items: list[Any],
    whole: bytes,
    *,
    index: int,
    count: list[int],
) -> Delta | None:
    """The change from the set the node logged last for the expression (``where``) to the set
    ``items`` it logs now (canonical text ``whole``), remembered for the next; None for a set
    with tagged elements; ``count`` as in :func:`_changes`."""
    # the texts joined with commas are ``whole`` less its brackets: the tag test of the texts
    # one by one, made once
    if b'"#' in whole:
        _opaque(last, where, index, count)
        return None
    seen = last.get(where)
    texts = _texts(items, whole, seen)
    now = dict(zip(texts, items, strict=True))
    last[where] = _Logged(whole, items, texts, now)
    before = NOTHING if seen is None else seen.elements
    gone_keys = before.keys() - now.keys()
    new = now.keys() - before.keys()
    removed = {t: before[t] for t in gone_keys} if gone_keys else NOTHING
    added = {t: now[t] for t in new} if new else NOTHING
    count[0] += len(items)
    if count[1] >= 0:
        count[1] += len(removed) + len(added)
    return Delta(removed, added)


#: Planning retires an expression logged whole once its sets hold this many elements in all
#: and their differences hold at least :data:`WORTH` of that (``delivered``: one new message
#: per event; the ``Added`` fields: new elements only): it would not be rendered as
#: differences, and diffing it was half of the planning's time on the bench's RRef batch.
RETIRE_AFTER: Final = 256


def _not_paying(count: list[int]) -> bool:
    full, delta, logged, _ = count
    return not logged and full >= RETIRE_AFTER and delta >= WORTH * full


class _Restart(Exception):  # noqa: N818 - a signal, not an error
    """A delta was logged for an expression planning had retired: plan again, keeping it."""

    def __init__(self, expr: str) -> None:
        super().__init__(expr)
        self.expr = expr


#: What a node logged last for an expression when that was no tag-free set: no delta can follow.
_OPAQUE: Final = _Logged(b"", None, None, {})


def _opaque(
    last: dict[tuple[str, str], _Logged], where: tuple[str, str], index: int, count: list[int]
) -> None:
    """A value for ``where[0]`` that is no tag-free set: the expression cannot be rendered
    as differences, which an expression logged as a delta must be."""
    if count[2]:
        raise DeltaError(index, where[0], MIXED)
    count[1] = -1
    last[where] = _OPAQUE


def _logged_delta(
    last: dict[tuple[str, str], _Logged],
    where: tuple[str, str],
    lists: tuple[list[Any], list[Any]],
    index: int,
    count: list[int],
) -> Delta:
    """The change a logged delta makes to the set the node logged last for the expression
    (``where``), applied to it; ``count`` as in :func:`_changes`."""
    if count[3]:
        raise _Restart(where[0])
    seen = last.get(where)
    if count[1] < 0 or seen is _OPAQUE:
        raise DeltaError(index, where[0], MIXED)
    if seen is None:
        elements: dict[bytes, Any] = {}
    elif seen.whole is None:
        elements = seen.elements
    else:  # the node logged this expression whole last time: its elements are that _Logged's
        elements = dict(seen.elements)
    count[2] += 1
    add, gone = lists
    if add or gone:
        removed, added = apply_delta(elements, add, gone, index, where[0])
    else:
        removed = added = NOTHING
    if seen is None or seen.whole is not None:
        last[where] = _Logged(None, None, None, elements)
    count[0] += len(elements)
    if count[1] >= 0:
        count[1] += len(removed) + len(added)
    return UNCHANGED if not removed and not added else Delta(removed, added)


@dataclass(frozen=True)
class DeltaPlan:
    """Which post expressions are delta-encoded, each with its key (1-based) in ``tvLog``."""

    keys: dict[str, int]

    def encode(self, traces: Sequence[Sequence[Shape]]) -> list[list[list[Any]]]:
        """Per trace, per event, the post values, delta-encoded ones replaced by a Delta."""
        if not self.keys:
            return _each(traces, resolve)
        return _each(traces, lambda events: _choose(events, _changes(events), self.keys))


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


def _each(traces: Sequence[T], walk: Callable[[T], R]) -> list[R]:
    """``walk`` over each trace; a DeltaError learns the index of its trace."""
    out: list[R] = []
    for number, events in enumerate(traces):
        try:
            out.append(walk(events))
        except DeltaError as exc:
            exc.trace = number
            raise
    return out


def plan_deltas(traces: Iterable[Sequence[Shape]]) -> DeltaPlan:
    """Delta-encode an expression when every value logged for it is a tag-free set and the
    differences are clearly smaller than the values (a one-message ``delivered`` set is not)."""
    return encode_compact(list(traces))[0]


def encode_compact(
    traces: Sequence[Sequence[Shape]],
) -> tuple[DeltaPlan, list[list[list[Any]]]]:
    """:func:`plan_deltas` and :meth:`DeltaPlan.encode` in one walk over the logged sets
    (canonical texts are the expensive part, and every logged element needs one)."""
    # expression -> [elements logged, elements in deltas (-1: a value is not a tag-free set
    # or a delta), values logged as deltas, retired]
    keep: set[str] = set()
    while True:
        sizes: dict[str, list[int]] = {}
        try:
            walked = _each(traces, lambda events: _changes(events, sizes, keep))  # noqa: B023
            break
        except _Restart as restart:  # (rare: a field logged whole for a while, then as deltas)
            keep.add(restart.expr)
    chosen = sorted(
        e
        for e, (full, delta, logged, retired) in sizes.items()
        if logged or (not retired and 0 <= delta < WORTH * full)
    )
    plan = DeltaPlan(keys={e: i for i, e in enumerate(chosen, start=1)})
    out = [
        _choose(events, changes, plan.keys) for events, changes in zip(traces, walked, strict=True)
    ]
    return plan, out
