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
from typing import Any

import orjson

__all__ = ["Delta", "DeltaPlan", "element_text", "encode_compact", "plan_deltas"]

#: Delta-encode an expression only when that shrinks its logged elements at least this much.
WORTH = 0.75

#: One event as the planner sees it: the acting node and its (expression, JSON value) posts.
Shape = tuple[str, Sequence[tuple[str, Any]]]


_SORTED = orjson.OPT_SORT_KEYS


def element_text(element: Any) -> bytes:
    """The canonical JSON text of a set element (compact, objects with sorted keys)."""
    return orjson.dumps(element, option=orjson.OPT_SORT_KEYS)


def _elements(value: Any) -> dict[bytes, Any] | None:
    """A logged ``{"#set": [...]}`` as canonical text -> element, or None if it is not a set
    or has an element whose text is not its TLA+ identity (it carries an ITF tag)."""
    if not isinstance(value, dict) or len(value) != 1 or not isinstance(value.get("#set"), list):
        return None
    items = value["#set"]
    # one comprehension and C-level set operations below: every logged element of every
    # event passes here, so the per-element Python work is kept to one orjson call
    texts = [orjson.dumps(e, option=_SORTED) for e in items]
    if b'"#' in b"".join(texts):
        return None
    return dict(zip(texts, items, strict=True))


@dataclass(frozen=True)
class Delta:
    """A logged set as the elements removed from and added to the node's previous one
    (canonical JSON text -> JSON element)."""

    removed: dict[bytes, Any]
    added: dict[bytes, Any]


_NOTHING: dict[bytes, Any] = {}


def _walk(
    events: Sequence[Shape], keys: Iterable[str] | None
) -> Iterable[tuple[int, int, Any, Delta | None]]:
    """Per post value, in order: (event, position, value, its delta when ``expr`` is in
    ``keys`` (every expression when None) and the value is a tag-free set)."""
    chosen = None if keys is None else set(keys)
    last: dict[tuple[str, str], dict[bytes, Any]] = {}
    for i, (node, posts) in enumerate(events):
        for j, (expr, value) in enumerate(posts):
            if chosen is not None and expr not in chosen:
                yield i, j, value, None
                continue
            now = _elements(value)
            if now is None:
                yield i, j, value, None
                continue
            before = last.get((expr, node), _NOTHING)
            last[(expr, node)] = now
            gone = before.keys() - now.keys()
            new = now.keys() - before.keys()
            removed = {t: before[t] for t in gone} if gone else _NOTHING
            added = {t: now[t] for t in new} if new else _NOTHING
            yield i, j, value, Delta(removed, added)


@dataclass(frozen=True)
class DeltaPlan:
    """Which post expressions are delta-encoded, each with its key (1-based) in ``tvLog``."""

    keys: dict[str, int]

    def encode(self, traces: Sequence[Sequence[Shape]]) -> list[list[list[Any]]]:
        """Per trace, per event, the post values, delta-encoded ones replaced by a Delta."""
        out: list[list[list[Any]]] = []
        for events in traces:
            rows: list[list[Any]] = [[None] * len(posts) for _, posts in events]
            for i, j, value, delta in _walk(events, self.keys):
                rows[i][j] = value if delta is None else delta
            out.append(rows)
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
    full: dict[str, int] = {}
    delta: dict[str, int] = {}
    refused: set[str] = set()
    walked = []
    for events in traces:
        found = list(_walk(events, None))
        walked.append(found)
        for i, j, value, change in found:
            expr = events[i][1][j][0]
            if change is None:
                refused.add(expr)
                continue
            full[expr] = full.get(expr, 0) + len(value["#set"])
            delta[expr] = delta.get(expr, 0) + len(change.removed) + len(change.added)
    chosen = sorted(e for e in full if e not in refused and delta[e] < WORTH * full[e])
    plan = DeltaPlan(keys={e: i for i, e in enumerate(chosen, start=1)})
    out: list[list[list[Any]]] = []
    for events, found in zip(traces, walked, strict=True):
        rows: list[list[Any]] = [[None] * len(posts) for _, posts in events]
        for i, j, value, change in found:
            use = change is not None and events[i][1][j][0] in plan.keys
            rows[i][j] = change if use else value
        out.append(rows)
    return plan, out
