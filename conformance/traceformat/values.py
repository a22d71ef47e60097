"""Value encoding of the trace contract: TLA+ sets as ``{"#set": [...]}`` in a deterministic
order (:func:`sort_key`), read back into frozensets (:data:`TlaSet`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import (
    Annotated,
    Any,
    TypeVar,
)

from pydantic import BeforeValidator as _Before
from pydantic import (
    JsonValue,
    WrapSerializer,
)

T = TypeVar("T")

# --------------------------------------------------------------------------- value encoding


def sort_key(value: Any) -> tuple[Any, ...]:
    """A total order on JSON values, so sets serialize the same way on every run.

    Type-tagged so mixed elements compare; lists compare element-wise, which puts ``["w0", 9]``
    before ``["w0", 10]`` (a JSON-string order would not).
    """
    if isinstance(value, bool):
        return (0, value)
    if isinstance(value, int | float):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    if isinstance(value, list | tuple):
        return (3, tuple(sort_key(v) for v in value))
    if isinstance(value, dict):
        return (4, tuple((k, sort_key(v)) for k, v in sorted(value.items())))
    return (5, repr(value))


def tla_set(elements: Iterable[JsonValue]) -> dict[str, JsonValue]:
    """Encode already-JSON elements as a TLA+ set (for header settings and hand-built values)."""
    return {"#set": sorted(elements, key=sort_key)}


def tla_set_in(value: Any) -> Any:
    """Unwrap ``{"#set": [...]}`` for a validator (other values pass through unchanged)."""
    if isinstance(value, dict):
        if set(value) != {"#set"}:
            raise ValueError(
                f"a TLA+ set is encoded as {{'#set': [...]}}, got keys {sorted(value)}"
            )
        return value["#set"]
    return value


def _set_out(value: Any, handler: Callable[[Any], Any]) -> Any:
    return tla_set(handler(value))


#: A TLA+ set: a frozenset in Python, ``{"#set": [...]}`` in JSON.
TlaSet = Annotated[frozenset[T], _Before(tla_set_in), WrapSerializer(_set_out, when_used="json")]
