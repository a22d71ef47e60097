"""Loading traces: typed errors that name the file, line and field; merging per-process logs."""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path

import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from support.ledger import GOOD, event, header
from tracecheck.tla.values import Record, TLAFunction, format_value
from tracecheck.traces.jsonvalue import MAX_STRING, JsonValueError, from_json, tla_text
from tracecheck.traces.load import (
    MAX_LINE,
    TraceFormatError,
    load_trace,
    merge_traces,
    parse_trace_lines,
    peek_trace,
)


def _write(path: Path, lines: list[object], *, newline: bool = True) -> Path:
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    path.write_text(text + ("\n" if newline else ""), encoding="utf-8")
    return path


def test_loads_header_and_events(tmp_path: Path) -> None:
    trace = load_trace(_write(tmp_path / "t.ndjson", [header(), *GOOD]))
    assert trace.header.nodes == ("a", "b")
    assert [e.event for e in trace.events] == ["Deposit", "Transfer", "Receive"]
    assert trace.lines == (2, 3, 4)


V4 = header(schema_version=4)


def test_a_finished_run_ends_with_its_last_seqs(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.ndjson", [V4, *GOOD, {"kind": "end", "seqs": {"a": 2, "b": 1}}])
    trace = load_trace(path)
    assert trace.finished
    assert trace.end is not None
    assert trace.end.seqs == {"a": 2, "b": 1}
    assert len(trace.events) == 3
    unfinished = load_trace(_write(tmp_path / "u.ndjson", [V4, *GOOD]))
    assert not unfinished.finished


def test_a_line_too_long_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    huge = GOOD[0] | {"args": {"a": "x" * (MAX_LINE + 10)}}
    path = _write(tmp_path / "t.ndjson", [header(), huge])
    with pytest.raises(TraceFormatError, match="a line of more than 4,194,304 bytes") as caught:
        load_trace(path)
    assert caught.value.line == 2
    assert len(str(caught.value)) < 300  # the line itself is not echoed
    first = _write(tmp_path / "h.ndjson", [header(seed="y" * (MAX_LINE + 10)), GOOD[0]])
    with pytest.raises(TraceFormatError, match="a line of more than"):
        peek_trace(first)


@pytest.mark.parametrize(
    ("lines", "where", "problem"),
    [
        ([], None, "empty trace: no header line"),
        ([header()], 1, "header but no events"),
        ([GOOD[0]], 1, "the first line must be the header"),
        ([header(), "{not json"], 2, "bad JSON"),
        ([header(schema_version=5), GOOD[0]], 1, "schema_version: 5 is not supported"),
        ([header(schema_version=True), GOOD[0]], 1, "schema_version: True is not supported"),
        ([header(), GOOD[0] | {"event": "lower"}], 2, "field event: String should match"),
        (
            [header(), {k: v for k, v in GOOD[0].items() if k != "node"}],
            2,
            "field node: Field required",
        ),
        ([header(), GOOD[0] | {"node": "zed"}], 2, "'zed' is not among the header's nodes"),
        ([header(), GOOD[0] | {"extra": 1}], 2, "field extra: Extra inputs"),
        ([header(), GOOD[0], GOOD[0]], 3, "jumps to 1, expected 2"),
        ([header(), header(), GOOD[0]], 2, "a second header"),
        # schema 4: the end line and sent_by
        ([header(), GOOD[0], {"kind": "end", "seqs": {"a": 1}}], 3, "needs schema_version 4"),
        ([header(), GOOD[0] | {"sent_by": ["a", 1]}], 2, "sent_by: needs schema_version 4"),
        (
            [V4, *GOOD, {"kind": "end", "seqs": {"a": 2, "b": 2}}],
            5,
            "b: 2 said, 1 read (lost lines?)",
        ),
        ([V4, *GOOD, {"kind": "end", "seqs": {"a": 2}}], 5, "nodes logged but not named: ['b']"),
        ([V4, GOOD[0], {"kind": "end", "seqs": {"a": 1}}, GOOD[1]], 4, "a line after the end"),
        ([V4, GOOD[0], {"kind": "end"}], 3, "field seqs: Field required"),
        ([V4, GOOD[0] | {"sent_by": ["a"]}], 2, "field sent_by"),
    ],
)
def test_malformed_traces_name_line_and_field(
    tmp_path: Path, lines: list[object], where: int | None, problem: str
) -> None:
    path = _write(tmp_path / "bad.ndjson", lines, newline=bool(lines))
    with pytest.raises(TraceFormatError) as caught:
        load_trace(path)
    assert caught.value.line == where
    assert problem in str(caught.value)
    assert str(path) in str(caught.value)


class _Cycle:
    """An object that refers to itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_loading_leaves_the_collector_as_it_was(tmp_path: Path) -> None:
    # Loading moves the live objects to the oldest generation (tracecheck.nogc): a cycle that
    # was alive then is still collected once it is garbage, and the collector is on again.
    good = _write(tmp_path / "t.ndjson", [header(), *GOOD])
    bad = _write(tmp_path / "bad.ndjson", [header(), "{not json"])
    assert gc.isenabled()
    for path in (good, bad):
        cycle = _Cycle()
        alive = weakref.ref(cycle)
        try:
            load_trace(path)
        except TraceFormatError:
            assert path == bad
        assert gc.isenabled()
        del cycle
        gc.collect()
        assert alive() is None


def test_truncated_last_line_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "cut.ndjson", [header(), GOOD[0]], newline=False)
    with pytest.raises(TraceFormatError, match="truncated"):
        load_trace(path)


def test_missing_file_and_binary(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="cannot read"):
        load_trace(tmp_path / "none.ndjson")
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(TraceFormatError, match="not UTF-8"):
        load_trace(tmp_path / "bin")


def test_merge_orders_by_lamport_clock() -> None:
    a = parse_trace_lines(
        [
            json.dumps(header()),
            json.dumps(event("Deposit", "a", 1, 3, a=3) | {"lamport": 1}),
            json.dumps(event("Transfer", "a", 2, 1, to="b", a=2) | {"lamport": 2}),
        ],
        "a.log",
    )
    b = parse_trace_lines(
        [json.dumps(header()), json.dumps(event("Receive", "b", 1, 2, a=2) | {"lamport": 3})],
        "b.log",
    )
    merged = merge_traces([b, a])
    assert [e.event for e in merged.events] == ["Deposit", "Transfer", "Receive"]
    with pytest.raises(TraceFormatError, match="appears in two logs"):
        merge_traces([a, a])
    other = parse_trace_lines(
        [json.dumps(header(seed=2)), json.dumps(event("Receive", "b", 1, 2, a=2))], "c.log"
    )
    with pytest.raises(TraceFormatError, match="not the same run"):
        merge_traces([a, other])


def test_json_values_follow_itf() -> None:
    assert from_json({"#set": [1, 2]}) == frozenset({1, 2})
    assert from_json({"#map": [[["w", 1], "x"]]}) == TLAFunction({("w", 1): "x"})
    assert from_json({"a": [1, True]}) == Record(a=(1, True))
    assert from_json({"#bigint": "-12"}) == -12
    for bad, path in [(None, "$"), ({"x": 1.5}, "$.x"), ({}, "$"), ({"#set": [], "y": 1}, "$")]:
        with pytest.raises(JsonValueError) as caught:
            from_json(bad)
        assert caught.value.path == path
        with pytest.raises(JsonValueError) as caught:
            tla_text(bad)
        assert caught.value.path == path
    with pytest.raises(JsonValueError, match="identifier, not 'a b'"):
        tla_text({"ok": {"a b": 1}})
    with pytest.raises(JsonValueError, match="identifier, not 'a b'"):
        from_json({"ok": {"a b": 1}})
    for convert in (from_json, tla_text):
        with pytest.raises(JsonValueError, match=r"\$\.f: #map: a TLAFunction cannot have a key"):
            convert({"f": {"#map": [[0, 1], [0, 2]]}}, "$")


_NAMES = st.from_regex(r"[a-z][A-Za-z0-9_]{0,6}", fullmatch=True)
_JSON = st.recursive(
    st.booleans() | st.integers(-(2**31), 2**31 - 1) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(lambda xs: {"#set": xs})
        | st.dictionaries(_NAMES, inner, min_size=1, max_size=4)
        | st.dictionaries(st.integers(0, 9), inner, min_size=1, max_size=3).map(
            lambda kv: {"#map": [[k, v] for k, v in kv.items()]}
        )
    ),
    max_leaves=20,
)


def _python_conflates_elements(value: object) -> bool:
    """A set two of whose elements differ as TLA+ values but are equal in Python, at any depth
    (``FALSE`` and ``0``, ``<<FALSE>>`` and ``<<0>>``): the general path builds Python
    frozensets, which keep only one of them, so the two renderings differ there by design of
    neither (TLC refuses such a set anyway: it cannot compare a boolean with an integer)."""
    if isinstance(value, list):
        return any(_python_conflates_elements(v) for v in value)
    if isinstance(value, dict):
        items = value.get("#set")
        if isinstance(items, list):
            texts = {json.dumps(v, sort_keys=True) for v in items}
            if len({from_json(v) for v in items}) != len(texts):
                return True
        return any(_python_conflates_elements(v) for v in value.values())
    return False


@settings(deadline=None)  # (no wall-clock bound: a loaded machine is no failure)
@given(_JSON)
def test_the_fast_renderer_writes_what_the_general_one_writes(value: object) -> None:
    # (both refuse a string TLA+ cannot hold, with the same error: a control character)
    try:
        general = format_value(from_json(value))
    except JsonValueError as exc:
        refused = str(exc)
    else:
        refused = None
    if refused is not None:
        with pytest.raises(JsonValueError) as fast:
            tla_text(value)
        assert str(fast.value) == refused
        return
    assume(not _python_conflates_elements(value))
    assert tla_text(value) == general


def test_environment_actors_log_steps_without_being_spec_nodes(tmp_path: Path) -> None:
    tick = GOOD[0] | {"node": "clock", "seq": 1}
    trace = load_trace(_write(tmp_path / "t.ndjson", [header(environment=["clock"]), tick, *GOOD]))
    assert trace.header.nodes == ("a", "b")
    assert trace.header.environment == ("clock",)
    assert trace.events[0].node == "clock"
    with pytest.raises(TraceFormatError, match="'clock' is not among the header's nodes"):
        load_trace(_write(tmp_path / "u.ndjson", [header(), tick]))
    with pytest.raises(TraceFormatError, match=r"field environment: \['a'\] are also spec nodes"):
        load_trace(_write(tmp_path / "v.ndjson", [header(environment=["a"]), *GOOD]))


def test_the_fast_event_path_builds_what_pydantic_builds(tmp_path: Path) -> None:
    """``_plain_event`` builds the event of a line in the common form without validation; it
    must equal pydantic's, and leave everything else (None) to pydantic."""
    from tracecheck.protocols import load_simulator  # noqa: PLC0415 - only here
    from tracecheck.traces.load import _EVENT, _plain_event  # noqa: PLC0415 - the private path

    raws = []
    for protocol in ("rref", "rendezvous"):
        load_simulator(protocol)(3, 150, tmp_path / f"{protocol}.ndjson")
        text = (tmp_path / f"{protocol}.ndjson").read_text(encoding="utf-8")
        raws += [orjson.loads(line) for line in text.splitlines()[1:]]
        if raws[-1].get("kind") == "end":  # a finished run's end line: no event
            raws.pop()
    for raw in raws:
        assert _plain_event(raw) == _EVENT.validate_python(raw)
    base = dict(GOOD[0])
    odd: list[object] = [
        base | {"seq": True},
        base | {"seq": 0},
        base | {"lamport": -1},
        base | {"seq": 1.0},
        base | {"event": "lower"},
        base | {"event": "Deposit\n"},
        base | {"extra": 1},
        base | {"args": []},
        base | {"node": 3},
        {k: v for k, v in base.items() if k != "node"},
        [base],
    ]
    for raw in odd:
        assert _plain_event(raw) is None, raw
    bare = {k: v for k, v in base.items() if k not in ("args", "post")}
    assert _plain_event(bare) == _EVENT.validate_python(bare)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("x" * (MAX_STRING + 1), "a string of 65,537 characters (at most 65,536)"),
        ("a\x00b", "the control character '\\x00'"),
        ("a\x0bb", "the control character '\\x0b'"),
    ],
)
def test_strings_a_tla_module_cannot_hold_are_refused_with_their_path(
    value: str, problem: str
) -> None:
    for convert in (tla_text, from_json):
        with pytest.raises(JsonValueError) as caught:
            convert({"m": {"#set": [value]}}, "args")
        assert caught.value.path == "args.m.#set[0]"
        assert problem in caught.value.problem
        assert len(str(caught.value)) < 300
    # what TLA+ strings escape passes, and reads back
    fine = 'tab\t "quote" back\\slash\nnewline'
    assert from_json(fine) == fine
    assert tla_text(fine) == format_value(fine)


def test_node_names_are_checked_in_the_header(tmp_path: Path) -> None:
    for nodes, problem in (
        (["a", ""], "a node name is empty"),
        (["a", "b\x01"], "control character"),
        (["a", "n" * 300], "300 characters (at most 256)"),
    ):
        path = _write(tmp_path / "t.ndjson", [header(nodes=tuple(nodes)), GOOD[0]])
        with pytest.raises(TraceFormatError, match="field nodes: a node name is") as caught:
            load_trace(path)
        assert problem in str(caught.value)
