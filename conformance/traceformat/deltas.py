"""A logged set as a difference: :class:`Delta`, what an implementation's ``{"#add": [...],
"#del": [...]}`` means (:func:`resolve` rebuilds the whole set it stands for), and the errors of
one that cannot be applied. :mod:`tracecheck.traces.postdelta` plans which logged sets the trace
spec is given as differences.

Since trace schema version 3 an implementation may log such a field as a delta itself,
``{"#add": [...], "#del": [...]}``: what the node's slice gained and lost since the value the
same node last logged for the same field (the empty set before its first). The RRef
implementation does, for every per-node set: its traces are then linear in their length, and the
planner (:mod:`~tracecheck.traces.postdelta`) no longer encodes and compares the whole sets (about
half of the checker's Python time per event when they were logged whole). A delta stands for
the whole set ``(last \\ del) \\cup add``, exactly as :func:`resolve` rebuilds it; an element
removed that was not there, or added that already was, changes nothing (the post-state is what is
checked, and it is well defined). Its elements must be tag-free, since they are matched by text.
An expression logged as a delta anywhere is rendered as differences, whatever it saves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple

import orjson

__all__ = [
    "MIXED",
    "NOTHING",
    "NO_CHANGE",
    "UNCHANGED",
    "Delta",
    "DeltaError",
    "Shape",
    "apply_delta",
    "delta_lists",
    "element_text",
    "resolve",
]

_SORTED = orjson.OPT_SORT_KEYS

#: One event as the planner sees it: the acting node and its (expression, JSON value) posts.
Shape = tuple[str, Sequence[tuple[str, Any]]]


def element_text(element: Any) -> bytes:
    """The canonical JSON text of a set element (compact, objects with sorted keys)."""
    return orjson.dumps(element, option=orjson.OPT_SORT_KEYS)


class Delta(NamedTuple):
    """A logged set as the elements removed from and added to the node's previous one
    (canonical JSON text -> JSON element). A tuple, not a frozen dataclass: one is made per
    changed set, and a frozen dataclass's ``__init__`` costs several times as much."""

    removed: dict[bytes, Any]
    added: dict[bytes, Any]


NOTHING: dict[bytes, Any] = {}


#: The delta of a set logged exactly as the node's previous one (a third of all logged sets
#: in the RRef campaign traces): shared, and recognised by identity when rendering.
UNCHANGED = Delta(NOTHING, NOTHING)


class DeltaError(ValueError):
    """A logged delta that cannot be applied: ``index`` is the event's (0-based) in its trace,
    ``key`` the post expression (or field) it was logged for, ``trace`` the trace's index in a
    batch once known."""

    def __init__(self, index: int, key: str, problem: str) -> None:
        super().__init__(problem)
        self.index = index
        self.key = key
        self.problem = problem
        self.trace = 0


def delta_lists(value: Any) -> tuple[list[Any], list[Any]] | None:
    """``(add, del)`` of a value logged as ``{"#add": [...], "#del": [...]}``, else None."""
    if type(value) is dict and len(value) == 2:
        add = value.get("#add")
        gone = value.get("#del")
        if type(add) is list and type(gone) is list:
            return add, gone
    return None


def _tag_free(texts: Iterable[bytes], index: int, key: str) -> None:
    if any(b'"#' in t for t in texts):
        raise DeltaError(
            index, key, "a delta's elements must be tag-free JSON (they are matched by text)"
        )


def apply_delta(
    elements: dict[bytes, Any], add: list[Any], gone: list[Any], index: int, key: str
) -> tuple[dict[bytes, Any], dict[bytes, Any]]:
    """Apply a logged delta to ``elements`` in place; the elements it really removed and
    added, by canonical text (an element both removed and added stays)."""
    dumps = orjson.dumps
    added_texts = {dumps(e, option=_SORTED): e for e in add}
    gone_texts = [dumps(e, option=_SORTED) for e in gone]
    _tag_free([*added_texts, *gone_texts], index, key)
    removed = {t: elements.pop(t) for t in gone_texts if t in elements and t not in added_texts}
    added = {t: e for t, e in added_texts.items() if t not in elements}
    elements.update(added)
    return removed or NOTHING, added or NOTHING


#: A logged delta that changes nothing.
NO_CHANGE: Final[dict[str, list[Any]]] = {"#add": [], "#del": []}


MIXED: Final = (
    "logged as a delta, and for this expression also as a value that is no tag-free set: "
    "a delta needs a set to change"
)


def resolve(
    events: Sequence[Shape], state: dict[tuple[str, str], dict[bytes, Any] | None] | None = None
) -> list[list[Any]]:
    """Per event, its post values with each logged delta replaced by the whole set it stands
    for (``{"#set": [...]}``, elements in the order of their canonical texts): what the
    literal rendering and rejection reports show. ``Shape``'s keys may be post expressions or
    field names, as long as one node's values for one key are meant to follow each other.
    ``state`` (updated in place) carries each (key, node)'s set from an earlier part of the
    same trace: a trace resolved in windows gets the values it would get resolved whole."""
    if state is None:
        state = {}
    dumps = orjson.dumps
    out: list[list[Any]] = []
    for index, (node, posts) in enumerate(events):
        row: list[Any] = []
        for key, value in posts:
            lists = delta_lists(value)
            if lists is None:
                items = value.get("#set") if isinstance(value, dict) and len(value) == 1 else None
                # the base of a delta that may follow (None: no set a delta could change)
                base = None
                if isinstance(items, list):
                    base = {dumps(e, option=_SORTED): e for e in items}
                    if any(b'"#' in t for t in base):
                        base = None
                state[(key, node)] = base
                row.append(value)
                continue
            elements = state.setdefault((key, node), {})  # (state owns it: updated in place)
            if elements is None:
                raise DeltaError(index, key, MIXED)
            apply_delta(elements, *lists, index, key)
            row.append({"#set": [elements[t] for t in sorted(elements)]})
        out.append(row)
    return out
