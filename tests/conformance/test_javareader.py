"""The Java trace reader (tracecheck.replay.javareader): it compiles here, builds exactly the values
SANY builds from the same text, refuses malformed lines by line and column, and gives the same
verdicts as the TLA+ constant module it replaces."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from support.ledger import GOOD, LEDGER, SPEC_ROOT, event, trace
from tracecheck.replay.javareader import CACHE_ENV, READER_ENV, reader_classes
from tracecheck.replay.tlcrun import run_rendered, spec_library
from tracecheck.replay.tracedata import DATA_FILE
from tracecheck.replay.tracespec import render_batch
from tracecheck.replay.validate import validate_traces
from tracecheck.runner import javac
from tracecheck.runner.results import Verdict
from tracecheck.runner.tlc import TLCOptions, run_tlc
from tracecheck.tla.values import ModelValue, Record, TLAFunction, format_value


def _reader() -> Path:
    classes = reader_classes()
    # The machines this project runs on have a JDK (.ci/run installs one when javac is
    # missing); without it the checker still works, through the slower TLA+ data module.
    assert classes is not None, "the Java trace reader did not compile: is `javac` installed?"
    return classes


#: One value of every kind the trace renderer writes, with the escapes strings can carry.
VALUES = [
    "plain",
    'quote " backslash \\ newline \n tab \t',
    -17,
    0,
    2_147_483_647,
    True,
    False,
    (),
    frozenset(),
    (1, "a", (2, (3,))),
    frozenset({("w0", 1), ("w1", 2), ("w0", 1)}),
    Record({"type": "RREF_ACK", "fork": ("w0", 2), "dup": 0}),
    TLAFunction({"w0": 1, "w1": frozenset({"x"})}),
    ModelValue("mv"),
]


def test_the_reader_builds_the_values_sany_builds(tmp_path: Path) -> None:
    classes = _reader()
    lines = [format_value(v) for v in VALUES]
    (tmp_path / "d.txt").write_text("#\n" + "\n".join(lines) + "\n#\n<<>>\n", encoding="utf-8")
    (tmp_path / "TraceIO.tla").write_text(
        "---- MODULE TraceIO ----\nTVRead(path) == FALSE\n====\n", encoding="utf-8"
    )
    literal = "<<<<" + ",\n  ".join(lines) + ">>, <<<<>>>>>>"
    (tmp_path / "Check.tla").write_text(
        "---- MODULE Check ----\nEXTENDS TraceIO, TLC, Integers\nCONSTANT mv\n"
        f'ASSUME TVRead("d.txt") = {literal}\n'
        "VARIABLE x\nInit == x = 0\nNext == UNCHANGED x\n====\n",
        encoding="utf-8",
    )
    (tmp_path / "Check.cfg").write_text("INIT Init\nNEXT Next\nCONSTANT mv = mv\n")
    result = run_tlc(tmp_path / "Check.tla", options=TLCOptions(classpath=(classes,)))
    assert result.verdict is Verdict.SUCCESS, result.summary
    # and the assumption has teeth: one changed value breaks it
    (tmp_path / "d.txt").write_text("#\n" + "\n".join([*lines[:-1], '"mv"']) + "\n#\n<<>>\n")
    broken = run_tlc(tmp_path / "Check.tla", options=TLCOptions(classpath=(classes,)))
    assert broken.verdict is not Verdict.SUCCESS


@pytest.mark.parametrize(
    ("text", "where"),
    [
        pytest.param('#\n<<"Deposit", "a"\n', "line 2, column 17: expected >>", id="unclosed"),
        pytest.param('#\n<<"a">> 3\n', "line 2, column 9: unexpected text", id="trailing"),
        pytest.param('#\n"open\n', "line 2, column 6: unterminated string", id="string"),
        pytest.param("#\n99999999999\n", "not a 32-bit integer", id="overflow"),
        pytest.param("<<1>>\n", "line 1 before the first #", id="no-header"),
    ],
)
def test_malformed_lines_are_refused_by_line_and_column(text: str, where: str) -> None:
    classes = _reader()
    rendered = render_batch([trace(GOOD)], LEDGER, reader=classes)
    result = run_rendered(
        dataclasses.replace(rendered, data_file=text), spec_library(SPEC_ROOT, LEDGER)
    )
    assert result.verdict is not Verdict.SUCCESS
    messages = " ".join(e.message for e in result.errors) + " ".join(result.printed)
    assert "TVRead: " in messages
    assert where in messages


def test_without_the_reader_the_data_module_stub_fails_loudly() -> None:
    classes = _reader()
    rendered = render_batch([trace(GOOD)], LEDGER, reader=classes)
    assert rendered.data_file is not None
    assert DATA_FILE in rendered.data_module
    result = run_rendered(
        dataclasses.replace(rendered, reader=None), spec_library(SPEC_ROOT, LEDGER)
    )
    assert result.verdict is not Verdict.SUCCESS
    messages = " ".join(e.message for e in result.errors) + " ".join(result.printed)
    assert "needs tracecheck's Java reader" in messages


def test_an_unusable_cache_folder_means_no_reader_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))
    assert reader_classes() is not None  # the shipped classes need no cache
    # another jar than the shipped classes were built for: only the cache could serve
    monkeypatch.setattr(javac, "shipped", lambda *_args: None)
    assert reader_classes() is None
    (verdict,) = validate_traces([trace(GOOD)], LEDGER, SPEC_ROOT, explain=False).verdicts
    assert verdict.accepted


def test_reader_and_data_module_give_the_same_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    _reader()
    bad = trace([GOOD[0], event("Receive", "b", 1, 2, a=2)], source="bad")
    traces = [trace(GOOD, source="good"), bad]
    with_reader = validate_traces(traces, LEDGER, SPEC_ROOT, explain=False)
    monkeypatch.setenv(READER_ENV, "0")
    assert reader_classes() is None
    without = validate_traces(traces, LEDGER, SPEC_ROOT, explain=False)
    assert [v.accepted for v in with_reader.verdicts] == [True, False]
    assert with_reader.verdicts == without.verdicts
