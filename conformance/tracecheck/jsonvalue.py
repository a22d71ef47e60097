"""Trace JSON values to TLA+ values, following the ITF conventions for what JSON lacks.

JSON strings, integers and booleans are themselves; a JSON list is a TLA+ sequence (a tuple);
a JSON object is a record, except the tagged forms ``{"#set": [...]}`` (a set),
``{"#map": [[k, v], ...]}`` (a function) and ``{"#bigint": "..."}`` (an integer). Floats and
``null`` have no TLA+ counterpart and are refused, with the path of the offending field.
"""

from __future__ import annotations

from typing import Any

from tracecheck.tlavalue import Record, TLAFunction, TLAValue

__all__ = ["JsonValueError", "from_json"]


class JsonValueError(ValueError):
    """A JSON value that has no TLA+ counterpart; ``path`` says where it is."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


def from_json(value: Any, path: str = "$") -> TLAValue:
    """Convert one decoded JSON value into a TLA+ value (see the module docstring)."""
    if isinstance(value, bool | str):
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
        return TLAFunction(
            (from_json(k, f"{path}.#map[{i}][0]"), from_json(v, f"{path}.#map[{i}][1]"))
            for i, (k, v) in enumerate(pairs)
        )
    if "#bigint" in value:
        _only_key(value, "#bigint", path)
        try:
            return int(value["#bigint"])
        except (TypeError, ValueError):
            raise JsonValueError(path, "#bigint takes a decimal string") from None
    if not value:
        raise JsonValueError(path, "an empty object has no TLA+ value (TLA+ has no empty record)")
    return Record((k, from_json(v, f"{path}.{k}")) for k, v in value.items())


def _only_key(value: dict[str, Any], key: str, path: str) -> None:
    if len(value) != 1:
        raise JsonValueError(path, f"{key} must be the object's only key")
