"""Reading TLC's ``-tool`` output: framed messages, plain text between them, and their figures.

In ``-tool`` mode TLC frames each message as ``@!@!@STARTMSG code:class @!@!@`` ... ``@!@!@ENDMSG
code @!@!@``. Frames can open in the middle of a line and nest (an exception message embeds the
message that explains it), and SANY's parse errors and ``PrintT`` output arrive as plain text
outside any frame. This module turns that stream into :class:`Message` objects and plain lines,
and holds the regular expressions that read figures out of message bodies. It knows nothing of
processes; :mod:`tracecheck.runner.tlc` feeds it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

__all__ = [
    "Code",
    "Message",
    "ToolOutputReader",
    "parse_depth",
    "parse_progress",
    "parse_stats",
]


class Code(IntEnum):
    """The TLC 2.15 message codes we act on (``tlc2.output.EC``)."""

    TLC_CRASH = 1000  # "TLC threw an unexpected exception"
    ASSUMPTION_FALSE = 2104
    ASSUMPTION_ERROR = 2105
    NESTED_EXPRESSION = 2103  # positions of the expressions being evaluated at an error
    INVARIANT_VIOLATED_INITIAL = 2107
    INVARIANT_VIOLATED = 2110
    ACTION_PROPERTY_VIOLATED = 2112
    DEADLOCK = 2114
    TEMPORAL_VIOLATED = 2116
    BEHAVIOR_UP_TO_HERE = 2121
    BACK_TO_STATE = 2122
    STARTING = 2185
    FINISHED = 2186
    MODE_MC = 2187
    MODE_SIMULATION = 2188
    SUCCESS = 2193
    DEPTH = 2194
    STATS = 2199
    PROGRESS = 2200
    SANY_END = 2219
    STATE = 2217
    STATE_STUTTERING = 2218
    VERSION = 2262
    COUNTEREXAMPLE = 2264
    SANY_ERROR = 3002  # "parsing or semantic analysis failed"; details are plain text


class MessageClass(IntEnum):
    """The number after the colon of a frame: what kind of message TLC says it is."""

    INFO = 0
    ERROR = 1
    TLC_BUG = 2
    WARNING = 3
    STATE = 4


@dataclass
class Message:
    """One framed message; ``body`` excludes nested frames, which are in ``children``."""

    code: int
    klass: int
    body: str = ""
    children: list[Message] = field(default_factory=list)


_MARKER = re.compile(r"@!@!@(?:STARTMSG (\d+):(\d+)|ENDMSG (\d+)) @!@!@")


class ToolOutputReader:
    """Incremental parser: feed lines, get callbacks for top-level messages and plain text."""

    def __init__(
        self,
        on_message: Callable[[Message], None],
        on_text: Callable[[str], None],
    ) -> None:
        self._on_message = on_message
        self._on_text = on_text
        self._stack: list[Message] = []
        self._parts: list[list[str]] = []

    def feed(self, line: str) -> None:
        """Consume one line of output (with or without its newline)."""
        line = line.rstrip("\n")
        pos = 0
        for match in _MARKER.finditer(line):
            self._text(line[pos : match.start()], newline=False)
            pos = match.end()
            if match.group(1) is not None:
                self._stack.append(Message(int(match.group(1)), int(match.group(2))))
                self._parts.append([])
            else:
                self._close()
        self._text(line[pos:], newline=True)

    def close(self) -> None:
        """End of stream: deliver frames TLC left open (it does when killed)."""
        while self._stack:
            self._close()

    def _text(self, text: str, *, newline: bool) -> None:
        if self._stack:
            self._parts[-1].append(text + ("\n" if newline else ""))
        elif text.strip():
            self._on_text(text)

    def _close(self) -> None:
        if not self._stack:
            return  # a stray ENDMSG: nothing to close, ignore rather than lose the stream
        message = self._stack.pop()
        message.body = "".join(self._parts.pop()).strip("\n")
        if self._stack:
            self._stack[-1].children.append(message)
        else:
            self._on_message(message)


_NUM = r"([\d,]+)"
_PROGRESS = re.compile(
    rf"Progress\({_NUM}\).*?: {_NUM} states generated(?: \(([\d,]+) s/min\))?, "
    rf"{_NUM} distinct states found(?: \([\d,]+ ds/min\))?, {_NUM} states left on queue"
)
_STATS = re.compile(
    rf"{_NUM} states generated, {_NUM} distinct states found, {_NUM} states left on queue"
)
_DEPTH = re.compile(rf"depth of the complete state graph search is {_NUM}")


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def parse_progress(body: str) -> tuple[int, int, int, int, int | None] | None:
    """``(depth, generated, distinct, queue, states per minute)`` from a 2200 message."""
    match = _PROGRESS.search(body)
    if match is None:
        return None
    rate = _int(match.group(3)) if match.group(3) else None
    return (
        _int(match.group(1)),
        _int(match.group(2)),
        _int(match.group(4)),
        _int(match.group(5)),
        rate,
    )


def parse_stats(body: str) -> tuple[int, int, int] | None:
    """``(generated, distinct, queue)`` from a 2199 message."""
    match = _STATS.search(body)
    return None if match is None else (_int(match[1]), _int(match[2]), _int(match[3]))


def parse_depth(body: str) -> int | None:
    """The search depth from a 2194 message."""
    match = _DEPTH.search(body)
    return None if match is None else _int(match[1])
