"""The -tool output reader: frames, nesting, text between frames, and figures."""

from __future__ import annotations

from tracecheck.runner.tooloutput import (
    Message,
    ToolOutputReader,
    parse_depth,
    parse_progress,
    parse_stats,
)


def _read(lines: list[str]) -> tuple[list[Message], list[str]]:
    messages: list[Message] = []
    text: list[str] = []
    reader = ToolOutputReader(messages.append, text.append)
    for line in lines:
        reader.feed(line + "\n")
    reader.close()
    return messages, text


def test_frames_and_plain_text() -> None:
    messages, text = _read(
        [
            "@!@!@STARTMSG 2262:0 @!@!@",
            "TLC2 Version 2.15 of Day Month 20?? (rev: d5b5a7f)",
            "@!@!@ENDMSG 2262 @!@!@",
            "Parsing file Foo.tla",
            "@!@!@STARTMSG 2217:4 @!@!@",
            "1: <Initial predicate>",
            "x = 0",
            "",
            "@!@!@ENDMSG 2217 @!@!@",
        ]
    )
    assert [(m.code, m.klass) for m in messages] == [(2262, 0), (2217, 4)]
    assert messages[1].body == "1: <Initial predicate>\nx = 0"
    assert text == ["Parsing file Foo.tla"]


def test_nested_frame_opened_mid_line() -> None:
    messages, _ = _read(
        [
            "@!@!@STARTMSG 1000:1 @!@!@",
            "TLC threw an unexpected exception.",
            ": @!@!@STARTMSG 2179:0 @!@!@",
            "The second argument of \\div is 0.",
            "@!@!@ENDMSG 2179 @!@!@",
            "@!@!@ENDMSG 1000 @!@!@",
        ]
    )
    assert len(messages) == 1
    assert messages[0].code == 1000
    assert [c.code for c in messages[0].children] == [2179]
    assert "second argument" in messages[0].children[0].body


def test_unterminated_frame_is_delivered_on_close_and_stray_end_ignored() -> None:
    messages, text = _read(["@!@!@ENDMSG 2186 @!@!@", "@!@!@STARTMSG 2200:0 @!@!@", "half"])
    assert [m.code for m in messages] == [2200]
    assert messages[0].body == "half"
    assert text == []


def test_figures() -> None:
    body = (
        "Progress(12) at 2026-11-22 00:34:46: 1,234,567 states generated (8,000 s/min), "
        "45,678 distinct states found (900 ds/min), 12 states left on queue."
    )
    assert parse_progress(body) == (12, 1234567, 45678, 12, 8000)
    assert parse_progress(
        "Progress(3) at x: 4 states generated, 3 distinct states found, 0 states left on queue."
    ) == (3, 4, 3, 0, None)
    assert parse_stats("4 states generated, 3 distinct states found, 0 states left on queue.") == (
        4,
        3,
        0,
    )
    assert parse_depth("The depth of the complete state graph search is 17.") == 17
    assert parse_progress("garbage") is None
    assert parse_stats("garbage") is None
    assert parse_depth("garbage") is None
