"""Trace JSON values to TLA+ values, following the ITF conventions for what JSON lacks.

JSON strings, integers and booleans are themselves; a JSON list is a TLA+ sequence (a tuple);
a JSON object is a record, except the tagged forms ``{"#set": [...]}`` (a set),
``{"#map": [[k, v], ...]}`` (a function) and ``{"#bigint": "..."}`` (an integer). Floats and
``null`` have no TLA+ counterpart and are refused, with the path of the offending field.
"""

from __future__ import annotations

import re
from typing import Any

from tracecheck.tla.values import Record, TLAFunction, TLAValue, format_value, is_identifier

__all__ = ["MAX_STRING", "JsonValueError", "from_json", "string_problem", "tla_text"]


class JsonValueError(ValueError):
    """A JSON value that has no TLA+ counterpart; ``path`` says where it is."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


#: The longest string a trace value may hold: node names, message types and the like are
#: short; a megabyte string is a broken or hostile writer, and TLC echoes values it cannot
#: handle into its error output.
MAX_STRING = 64 * 1024
#: Characters a TLA+ string cannot hold: control characters other than the four it escapes
#: (tab, newline, carriage return, form feed).
_CONTROL = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f]")


def string_problem(value: str) -> str | None:
    """Why ``value`` cannot be a TLA+ string of a trace, or None."""
    if len(value) > MAX_STRING:
        return f"a string of {len(value):,} characters (at most {MAX_STRING:,})"
    bad = _CONTROL.search(value)
    if bad is not None:
        return f"a string with the control character {bad[0]!r}, which TLA+ strings cannot hold"
    return None


def from_json(value: Any, path: str = "$") -> TLAValue:
    """Convert one decoded JSON value into a TLA+ value (see the module docstring)."""
    if isinstance(value, str):
        problem = string_problem(value)
        if problem is not None:
            raise JsonValueError(path, problem)
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, list):
        return tuple(from_json(v, f"{path}[{i}]") for i, v in enumerate(value))
    if isinstance(value, dict):
        return _tagged_or_record(value, path)
    if value is None:
        raise JsonValueError(path, "null has no TLA+ value (log a string or omit the field)")
    raise JsonValueError(path, f"{type(value).__name__} has no TLA+ value")


def _tagged_or_record(value: dict[str, Any], path: str) -> TLAValue:
    if "#set" in value:
        _only_key(value, "#set", path)
        items = value["#set"]
        if not isinstance(items, list):
            raise JsonValueError(path, "#set takes a list")
        return frozenset(from_json(v, f"{path}.#set[{i}]") for i, v in enumerate(items))
    if "#map" in value:
        _only_key(value, "#map", path)
        pairs = value["#map"]
        if not isinstance(pairs, list) or not all(
            isinstance(p, list) and len(p) == 2 for p in pairs
        ):
            raise JsonValueError(path, "#map takes a list of [key, value] pairs")
        if not pairs:
            raise JsonValueError(path, "#map: an empty function is <<>>; log []")
        try:
            return TLAFunction(
                (from_json(k, f"{path}.#map[{i}][0]"), from_json(v, f"{path}.#map[{i}][1]"))
                for i, (k, v) in enumerate(pairs)
            )
        except ValueError as exc:  # a key twice: not a function
            if isinstance(exc, JsonValueError):
                raise
            raise JsonValueError(path, f"#map: {exc}") from None
    if "#bigint" in value:
        _only_key(value, "#bigint", path)
        try:
            return int(value["#bigint"])
        except (TypeError, ValueError):
            raise JsonValueError(path, "#bigint takes a decimal string") from None
    if not value:
        raise JsonValueError(path, "an empty object has no TLA+ value (TLA+ has no empty record)")
    for k in value:
        if not is_identifier(k):
            raise JsonValueError(path, f"a record field name must be an identifier, not {k!r}")
    return Record((k, from_json(v, f"{path}.{k}")) for k, v in value.items())


def _only_key(value: dict[str, Any], key: str, path: str) -> None:
    if len(value) != 1:
        raise JsonValueError(path, f"{key} must be the object's only key")


_ESCAPES = str.maketrans(
    {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\f": "\\f"}
)


def tla_text(value: Any, path: str = "$") -> str:
    """``format_value(from_json(value, path))`` without building the TLA+ value in between:
    the trace renderer's hot path (a test holds the two to the same text)."""
    try:
        return _fast(value)
    except (_SlowPathError, RecursionError):
        pass
    try:
        return _text(value, path)
    except RecursionError:  # nesting deeper than Python's stack: the iterative path
        return format_value(from_json(value, path))


class _SlowPathError(Exception):
    """Raised by :func:`_fast` for what it leaves to :func:`_text`: errors, #map, #bigint."""


#: Record field names already seen to be identifiers (a regex match per key and per value was
#: a tenth of rendering a message set).
_FIELD_NAMES: set[str] = set()
#: Strings as TLA+ text: message types, node names and the like recur in every message (a
#: quarter off rendering the RRef messages); cleared when full, so memory stays bounded.
_STRINGS: dict[str, str] = {}
_STRINGS_KEPT = 4096


def _fast(value: Any) -> str:
    """:func:`_text` for the common forms, without the error path: a child's path is built for
    the error message only, and doing it for every child was a third of the renderer's time.
    Exact types only (what ``orjson`` decodes); anything else raises :class:`_SlowPathError`."""
    kind = type(value)
    if kind is str:
        text = _STRINGS.get(value)
        if text is None:
            if string_problem(value) is not None:
                raise _SlowPathError  # (the general path says where)
            if len(_STRINGS) >= _STRINGS_KEPT:
                _STRINGS.clear()
            text = _STRINGS[value] = '"' + str.translate(value, _ESCAPES) + '"'
        return text
    if kind is int:
        return str(value)
    if kind is bool:
        return "TRUE" if value else "FALSE"
    if kind is list:
        return "<<" + ", ".join([_fast(v) for v in value]) + ">>"
    if kind is dict and value:
        if len(value) == 1 and "#set" in value:
            items = value["#set"]
            if type(items) is not list:
                raise _SlowPathError
            return "{" + ", ".join(sorted({_fast(v) for v in items})) + "}"
        if not _FIELD_NAMES.issuperset(value):
            for k in value:
                if type(k) is not str or not is_identifier(k):
                    raise _SlowPathError
            _FIELD_NAMES.update(value)
        return "[" + ", ".join([k + " |-> " + _fast(v) for k, v in value.items()]) + "]"
    raise _SlowPathError


def _text(value: Any, path: str) -> str:
    if isinstance(value, str):
        problem = string_problem(value)
        if problem is not None:
            raise JsonValueError(path, problem)
        return '"' + value.translate(_ESCAPES) + '"'
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "<<" + ", ".join(_text(v, f"{path}[{i}]") for i, v in enumerate(value)) + ">>"
    if isinstance(value, dict) and len(value) == 1 and "#set" in value:
        items = value["#set"]
        if not isinstance(items, list):
            raise JsonValueError(path, "#set takes a list")
        texts = {_text(v, f"{path}.#set[{i}]") for i, v in enumerate(items)}
        return "{" + ", ".join(sorted(texts)) + "}"
    if isinstance(value, dict) and value and not any(k.startswith("#") for k in value):
        for k in value:
            if not is_identifier(k):
                raise JsonValueError(path, f"a record field name must be an identifier, not {k!r}")
        return "[" + ", ".join(f"{k} |-> {_text(v, f'{path}.{k}')}" for k, v in value.items()) + "]"
    # the rare forms (#map, #bigint) and every error: the general path
    return format_value(from_json(value, path))
