"""TLA+ values in Python, and TLA+ text for them as TLC prints it (:func:`format_value`);
:mod:`tracecheck.tla.parser` reads that text back.

Python representation of a TLA+ value (the ``TLAValue`` type):

==========================  ==================================================================
TLA+ (as TLC prints it)     Python
==========================  ==================================================================
``-3``                      ``int``
``"a\\"b"``                 ``str`` (escapes ``\\"`` ``\\\\`` ``\\n`` ``\\t`` ``\\r`` ``\\f``)
``TRUE`` / ``FALSE``        ``bool``
``w1`` (a model value)      ``ModelValue("w1")``
``{1, 2}``, ``1..3``        ``frozenset``
``<<1, "a">>``              ``tuple``
``[a |-> 1]``               ``Record``
``(1 :> "a" @@ 2 :> "b")``  ``TLAFunction``
==========================  ==================================================================

TLC prints a function by its domain: 1..n (the empty function included) as a sequence ``<<...>>``;
a set of identifier-like strings as a record; anything else with ``:>`` and ``@@``. The parser
keeps the printed form, so ``Record`` and ``TLAFunction`` are never empty: the empty function is
``()``. Python equates ``True`` with ``1``; TLC never mixes booleans and integers in one set or
domain (it cannot compare them), so this does not arise in its output.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, Self, TypeAlias, TypeVar

__all__ = [
    "KEYWORDS",
    "ModelValue",
    "Record",
    "TLAFunction",
    "TLAValue",
    "format_value",
    "is_identifier",
]


_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Words that are TLA+ values of their own, never a model value's name.
KEYWORDS: Final = frozenset({"TRUE", "FALSE"})
_K = TypeVar("_K")


def is_identifier(name: str) -> bool:
    return _IDENTIFIER.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class ModelValue:
    """A TLC model value (a constant assigned ``m = m`` in a cfg), printed as its bare name."""

    name: str

    def __post_init__(self) -> None:
        if not is_identifier(self.name) or self.name in KEYWORDS:
            raise ValueError(f"a model value's name must be a TLA+ identifier, not {self.name!r}")

    def __str__(self) -> str:
        return self.name


class _FrozenMap(Mapping[_K, "TLAValue"], Generic[_K]):
    """An immutable, hashable mapping that keeps its keys' order; equal regardless of order."""

    __slots__ = ("_data", "_hash")
    _data: dict[_K, TLAValue]
    _hash: int | None

    def _init(self, pairs: Iterable[tuple[_K, TLAValue]]) -> None:
        pairs = list(pairs)
        data = dict(pairs)
        name = type(self).__name__
        if len(data) != len(pairs):
            raise ValueError(f"a {name} cannot have a key twice")
        if not data:
            raise ValueError(f"a {name} cannot be empty: TLC prints the empty function as <<>>")
        self._data = data
        self._hash = None

    @classmethod
    def _trusted(cls, data: dict[_K, TLAValue]) -> Self:
        made = cls.__new__(cls)
        made._data = data
        made._hash = None
        return made

    def __getitem__(self, key: _K) -> TLAValue:
        return self._data[key]

    def __iter__(self) -> Iterator[_K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _FrozenMap) or type(other) is not type(self):
            return NotImplemented
        return self._data == other._data

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((type(self).__name__, frozenset(self._data.items())))
        return self._hash

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._data!r})"


class Record(_FrozenMap[str]):
    """A TLA+ record ``[a |-> 1, b |-> "x"]``: field names (identifiers) to values."""

    __slots__ = ()

    def __init__(
        self,
        fields: Mapping[str, TLAValue] | Iterable[tuple[str, TLAValue]] = (),
        /,
        **named: TLAValue,
    ) -> None:
        pairs = list(fields.items() if isinstance(fields, Mapping) else fields)
        pairs.extend(named.items())
        for name, _ in pairs:
            if not is_identifier(name):
                raise ValueError(f"a record field name must be a TLA+ identifier, not {name!r}")
        self._init(pairs)


class TLAFunction(_FrozenMap["TLAValue"]):
    """A TLA+ function printed as ``(k1 :> v1 @@ k2 :> v2)``: values to values."""

    __slots__ = ()

    def __init__(
        self, mapping: Mapping[Any, TLAValue] | Iterable[tuple[TLAValue, TLAValue]], /
    ) -> None:
        # Keys are TLA+ values; Any because Mapping is invariant in its key type, so a precise
        # Mapping[TLAValue, TLAValue] would refuse a plain dict[int, str].
        self._init(mapping.items() if isinstance(mapping, Mapping) else mapping)


TLAValue: TypeAlias = (
    bool
    | int
    | str
    | ModelValue
    | frozenset["TLAValue"]
    | tuple["TLAValue", ...]
    | Record
    | TLAFunction
)


# --- printer ---------------------------------------------------------------------------------
_STRING_ESCAPES: Final = str.maketrans(
    {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\f": "\\f"}
)


def _children(value: TLAValue) -> list[TLAValue] | None:
    """The values inside a container, in printing order; None for an atom."""
    if isinstance(value, frozenset | tuple):
        return list(value)
    if isinstance(value, Record):
        return list(value.values())
    if isinstance(value, TLAFunction):
        return [part for pair in value.items() for part in pair]
    return None


def _format_atom(value: TLAValue) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.translate(_STRING_ESCAPES) + '"'
    if isinstance(value, ModelValue):
        return value.name
    raise TypeError(f"not a TLA+ value: {type(value).__name__}")


def _format_container(value: TLAValue, parts: list[str]) -> str:
    if isinstance(value, frozenset):
        return "{" + ", ".join(sorted(parts)) + "}"
    if isinstance(value, tuple):
        return "<<" + ", ".join(parts) + ">>"
    if isinstance(value, Record):
        return "[" + ", ".join(f"{k} |-> {p}" for k, p in zip(value, parts, strict=True)) + "]"
    pairs = (f"{parts[i]} :> {parts[i + 1]}" for i in range(0, len(parts), 2))
    return "(" + " @@ ".join(pairs) + ")"


def format_value(value: TLAValue) -> str:
    """TLA+ text for ``value`` that `parse_value` reads back and TLC accepts as a constant.

    Sets are printed in sorted order of their elements' text, so equal sets print alike; records
    and functions keep their keys' order. Iterative, so any depth of nesting is safe.
    """
    done: list[str] = []
    todo: list[tuple[TLAValue, int]] = [(value, -1)]  # (value, child count once expanded, or -1)
    while todo:
        item, count = todo.pop()
        if count >= 0:
            parts = done[len(done) - count :]
            del done[len(done) - count :]
            done.append(_format_container(item, parts))
            continue
        children = _children(item)
        if children is None:
            done.append(_format_atom(item))
            continue
        todo.append((item, len(children)))
        todo.extend((child, -1) for child in reversed(children))
    return done[0]
