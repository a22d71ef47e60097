"""TraceOps, the operators of the mappings' post-state expressions: the Java reader's native
versions compute exactly the TLA+ definitions that TLC evaluates without it."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from support.rref_runtime import SPEC_ROOT
from tracecheck.protocols import load_simulator
from tracecheck.protocols.rref import RREF
from tracecheck.replay.javareader import READER_ENV, reader_classes
from tracecheck.replay.tracespec import _OPS_MODULE, OPS_MODULE
from tracecheck.replay.validate import validate_traces
from tracecheck.runner.results import Verdict
from tracecheck.runner.tlc import TLCOptions, run_tlc, tlc_command
from tracecheck.traces.load import load_trace, parse_trace_lines

#: (native call, the same with the definition's copy) for every kind of argument the
#: mappings pass and the edges around them: elements outside the function's domain, the empty
#: function (<<>>, a tuple to TLC), integer domains, records and tuples as elements, a removed
#: element added back, removals that are not there, duplicates between S and A.
CASES = [
    'SliceBy({}, U1, "on", "w0")',
    'SliceBy({<<"w0", 1>>, <<"w1", 9>>, <<"w2", 2>>}, U1, "on", "w0")',
    'SliceBy({<<"w0", 1>>, <<"w1", 9>>, <<"w2", 2>>}, U1, "on", "w1")',
    'SliceBy({<<"w0", 1>>}, <<>>, "on", "w0")',
    'SliceBy({1, 2, 3}, <<[on |-> "a"], [on |-> "b"]>>, "on", "a")',
    'SliceBy({2, 7}, <<[on |-> "a"], [on |-> "b"]>>, "on", "b")',
    'SliceBy({<<"w0", 1>>, <<"w2", 2>>}, U1, "rref", <<"w0", 1>>)',
    'ImageBy(U1, "on", "w0")',
    'ImageBy(U1, "on", "nobody")',
    'ImageBy(<<>>, "on", "w0")',
    'ImageBy(<<[on |-> 1, x |-> 2], [on |-> 1, x |-> 1], [on |-> 2, x |-> 0]>>, "on", 1)',
    "Patch({}, {}, {})",
    "Patch({1, 2, 3}, {2}, {})",
    "Patch({1, 2, 3}, {}, {0, 4})",
    "Patch({1, 2, 3}, {2, 9}, {2, 3, 5})",
    "Patch({1, 2, 3}, {1, 2, 3}, {})",
    "Patch({}, {7}, {3, 1})",
    'Patch({<<"a", 1>>, <<"b", 2>>}, {<<"a", 1>>}, {<<"c", 0>>, <<"b", 2>>})',
    "Patch({[k |-> 1], [k |-> 2]}, {[k |-> 2]}, {[k |-> 0], [k |-> 3]})",
    "Patch({{1}, {2}}, {{2}}, {{}, {1, 2}})",
    "Minus({}, {})",
    "Minus({1, 2, 3}, {})",
    "Minus({}, {1})",
    "Minus({1, 2, 3, 5}, {0, 2, 4, 5, 9})",
    "Minus({3, 1, 2}, {2, 1, 3})",
    'Minus({[t |-> "A", d |-> 1], [t |-> "B", d |-> 2]}, {[t |-> "B", d |-> 2]})',
    'Minus({<<"w0", 1>>, <<"w1", 2>>}, {<<"w1", 2>>, <<"w2", 0>>})',
    "NewEntries(<<>>, <<>>)",
    "NewEntries(<<>>, U1)",
    "NewEntries(U1, U1)",
    "NewEntries(U0, U1)",
    "NewEntries(U1, U0)",
    'NewEntries(U1, U1 @@ (<<"w0", 0>> :> [on |-> "w2", rref |-> <<"w0", 0>>]))',
    "NewEntries(<<[on |-> 1]>>, <<[on |-> 1], [on |-> 2], [on |-> 0]>>)",
    "NewEntries(<<>>, <<[on |-> 1]>>)",
]

_USERS = (
    'U1 == (<<"w0", 1>> :> [on |-> "w0", rref |-> <<"w0", 1>>]) @@ '
    '(<<"w1", 9>> :> [on |-> "w1", rref |-> <<"w0", 1>>]) @@ '
    '(<<"w0", 5>> :> [on |-> "w0", rref |-> <<"w1", 3>>])\n'
    'U0 == (<<"w1", 9>> :> [on |-> "w1", rref |-> <<"w0", 1>>])'
)


def _module(checks: list[str]) -> str:
    body = _OPS_MODULE.split("\n", 1)[1].rsplit("====", 1)[0]
    # The definitions again under other names: TLC overrides only the TraceOps ones.
    copies = re.sub(r"^TV(\w+)\(", r"Def\1(", body, flags=re.M)
    return "\n".join(
        [
            "---- MODULE Check ----",
            f"EXTENDS {OPS_MODULE}, TLC, Integers",
            copies,
            _USERS,
            *(f"ASSUME {c}" for c in checks),
            "VARIABLE x",
            "Init == x = 0",
            "Next == UNCHANGED x",
            "====",
            "",
        ]
    )


def _run(tmp_path: Path, checks: list[str]) -> tuple[Verdict, str]:
    classes = reader_classes()
    assert classes is not None, "the Java reader did not compile: is `javac` installed?"
    (tmp_path / f"{OPS_MODULE}.tla").write_text(_OPS_MODULE, encoding="utf-8")
    (tmp_path / "Check.tla").write_text(_module(checks), encoding="utf-8")
    (tmp_path / "Check.cfg").write_text("INIT Init\nNEXT Next\n", encoding="utf-8")
    result = run_tlc(tmp_path / "Check.tla", options=TLCOptions(classpath=(classes,)))
    said = [result.summary, *(e.message for e in result.errors), *result.printed]
    return result.verdict, "\n".join(said)


def test_native_operators_equal_their_definitions(tmp_path: Path) -> None:
    checks = [f"TV{c} = Def{c}" for c in CASES]
    verdict, text = _run(tmp_path, checks)
    assert verdict is Verdict.SUCCESS, text


@pytest.mark.parametrize(
    "wrong",
    [
        'TVSliceBy({<<"w0", 1>>, <<"w1", 9>>}, U1, "on", "w0") = {<<"w1", 9>>}',
        'TVImageBy(U1, "on", "w1") = {}',
        "TVPatch({1, 2}, {2}, {3}) = {1, 2, 3}",
        "TVMinus({1, 2}, {2}) = {}",
        "TVNewEntries(U0, U1) = {}",
    ],
)
def test_a_wrong_expectation_fails(tmp_path: Path, wrong: str) -> None:
    """The comparison above has teeth: the native operators do not return anything at all."""
    verdict, _ = _run(tmp_path, [wrong])
    assert verdict is not Verdict.SUCCESS


@pytest.mark.parametrize(
    ("call", "native_error"),
    [
        ('TVSliceBy({1}, <<[x |-> 1]>>, "on", 1)', 'TVSliceBy: [x |-> 1] has no field "on"'),
        ('TVImageBy(<<[x |-> 1]>>, "on", 1)', 'TVImageBy: [x |-> 1] has no field "on"'),
        ("TVPatch(1, {}, {})", "TVPatch: not a finite set: 1"),
        ("TVMinus({1}, 2)", "TVMinus: not a finite set: 2"),
        ("TVNewEntries(U1, 2)", "TVNewEntries: not a function: 2"),
    ],
)
def test_the_native_operators_are_the_ones_run(
    tmp_path: Path, call: str, native_error: str
) -> None:
    """An argument of the wrong kind is an error, and the error is the Java reader's own:
    so the comparison above is of the native operators with the definitions, not of the
    definitions with themselves."""
    verdict, text = _run(tmp_path, [f"{call} = {{}}"])
    assert verdict is not Verdict.SUCCESS
    assert native_error in text, text[-2000:]


def _add_entry_definition() -> str:
    """RRef.tla's own definition of AddEntry (the native one must compute it)."""
    text = (SPEC_ROOT / "rref" / "RRef.tla").read_text(encoding="utf-8")
    found = re.search(r"^AddEntry\(fn, x, e\) == .*$", text, re.M)
    assert found is not None, "RRef.tla no longer defines AddEntry(fn, x, e)"
    return found[0]


def _rref_stand_in(folder: Path, checks: Sequence[str] = ()) -> None:
    """A module named RRef (TLC matches overrides by module name) holding the spec's AddEntry,
    its copy under another name, and ``checks`` as ASSUMEs."""
    definition = _add_entry_definition()
    lines = [
        "---- MODULE RRef ----",
        "EXTENDS TLC, Integers, FiniteSets",
        definition,
        definition.replace("AddEntry(", "DefAddEntry(", 1),
        _USERS,
        'R == [on |-> "w2", rref |-> <<"w0", 0>>]',
        "RECURSIVE Build(_)",
        'Build(n) == IF n = 0 THEN <<>> ELSE AddEntry(Build(n - 1), <<"w", (n * 37) % 101>>, n)',
        *(f"ASSUME {c}" for c in checks),
        "====",
        "",
    ]
    (folder / "RRef.tla").write_text("\n".join(lines), encoding="utf-8")


def _run_stand_in(tmp_path: Path, checks: Sequence[str]) -> tuple[Verdict, str]:
    classes = reader_classes()
    assert classes is not None, "the Java reader did not compile: is `javac` installed?"
    _rref_stand_in(tmp_path, checks)
    (tmp_path / "Check.tla").write_text(
        "---- MODULE Check ----\nEXTENDS RRef\nVARIABLE x\nInit == x = 0\n"
        "Next == UNCHANGED x\n====\n",
        encoding="utf-8",
    )
    (tmp_path / "Check.cfg").write_text("INIT Init\nNEXT Next\n", encoding="utf-8")
    result = run_tlc(tmp_path / "Check.tla", options=TLCOptions(classpath=(classes,)))
    said = [result.summary, *(e.message for e in result.errors), *result.printed]
    return result.verdict, "\n".join(said)


#: AddEntry's arguments: a key between, before, after the others and one already there; the
#: empty function (<<>>); integer domains (TLC's @@ then); a record.
ADD_ENTRY_CASES = [
    ('U1, <<"w0", 3>>, R', "between"),
    ('U1, <<"a", 0>>, R', "first"),
    ('U1, <<"z", 0>>, R', "last"),
    ('U1, <<"w1", 9>>, R', "already there"),
    ('<<>>, <<"w0", 1>>, R', "empty"),
    ("<<10, 20>>, 3, 30", "integers"),
    ("<<10, 20>>, 1, 30", "integers, already there"),
    ('[a |-> 1], "b", 2', "record"),
]


def test_add_entry_natively_equals_the_specs_definition(tmp_path: Path) -> None:
    checks = [f"AddEntry({args}) = DefAddEntry({args})" for args, _ in ADD_ENTRY_CASES]
    verdict, text = _run_stand_in(tmp_path, checks)
    assert verdict is Verdict.SUCCESS, text


def test_add_entry_of_keys_tlc_cannot_order_fails_as_tlcs_own(tmp_path: Path) -> None:
    """A tuple key added to a record's string keys: TLC cannot compare them, so the native
    AddEntry hands them to TLC's @@, which fails exactly as the definition does."""
    said = []
    for op in ("AddEntry", "DefAddEntry"):
        verdict, text = _run_stand_in(tmp_path, [f'{op}([a |-> 1], <<"w", 1>>, 2) # <<>>'])
        assert verdict is not Verdict.SUCCESS
        said.append(text)
    errors = [[line for line in t.splitlines() if "Attempted to" in line] for t in said]
    assert errors[0], said[0]
    assert errors[0] == errors[1]


def test_add_entry_builds_functions_whose_lookups_work(tmp_path: Path) -> None:
    """30 keys added one by one: over 10 keys TLC looks a key up through a hash index, which
    the native AddEntry builds itself."""
    key = '<<"w", (i * 37) % 101>>'
    checks = [
        rf"\A i \in 1..30 : Build(30)[{key}] = i",
        rf"DOMAIN Build(30) = {{{key} : i \in 1..30}}",
        "Cardinality(DOMAIN Build(30)) = 30",
    ]
    verdict, text = _run_stand_in(tmp_path, checks)
    assert verdict is Verdict.SUCCESS, text
    wrong, _ = _run_stand_in(tmp_path, ['Build(30)[<<"w", 37>>] = 2'])
    assert wrong is not Verdict.SUCCESS


def test_add_entry_is_the_native_one(tmp_path: Path) -> None:
    """TLC says which overrides it loaded: AddEntry of module RRef is one, so the tests above
    compare the native version with the definition, not the definition with itself."""
    classes = reader_classes()
    assert classes is not None, "the Java reader did not compile: is `javac` installed?"
    verdict, text = _run_stand_in(tmp_path, ['AddEntry(U1, <<"w0", 3>>, R) # U1'])
    assert verdict is Verdict.SUCCESS, text
    options = TLCOptions(classpath=(classes,))
    cmd = tlc_command(tmp_path / "Check.tla", tmp_path / "Check.cfg", options, tmp_path / "m")
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=False).stdout
    assert "Loading AddEntry operator override from tlc2.overrides.TLCOverrides" in out, out


#: A set and a function that grow by one element per step, as the RRef spec's history
#: variables do (X \cup {x}, RRef!AddEntry), and a set that loses one and gains one, as the
#: network does ((N \ {m}) \cup {r}), each new key landing anywhere in the order (37 and 53
#: are coprime to 101). TVMinus sorts the grown set in place from the previous one
#: (TLCOverrides.Grown), AddEntry inserts natively and gives TLC its hash index; every later
#: step looks each key up again, compares the whole, and has TLC's own operators (\in, [],
#: =, \cup) work on the values so built.
_GROWING = r"""
VARIABLES n, X, U, N
Key(i) == <<"w", (i * 37) % 101>>
Other(i) == <<"v", (i * 53) % 101>>
Init == n = 0 /\ X = {} /\ U = <<>> /\ N = {}
Next == /\ n < 100
        /\ n' = n + 1
        /\ X' = X \cup {Key(n')}
        /\ N' = (IF n >= 10 THEN N \ {Other(n - 10)} ELSE N) \cup {Other(n')}
        /\ Assert(TVMinus(N, N') = IF n > 10 THEN {Other(n - 10)} ELSE {}, <<"taken", n'>>)
        /\ Assert(TVMinus(N', N) = {Other(n')}, <<"put", n'>>)
        /\ Assert(\A i \in 1..n' : (Other(i) \in N') <=> (i > n' - 11), <<"N' lookups", n'>>)
        /\ Assert(N' = {Other(i) : i \in {j \in 1..n' : j > n' - 11}}, <<"N'", n'>>)
        /\ U' = AddEntry(U, Key(n'), [on |-> IF n' % 2 = 0 THEN "even" ELSE "odd", i |-> n'])
        /\ Assert(TVMinus(X', X) = {Key(n')}, <<"TVMinus", n'>>)
        /\ Assert(TVMinus(X, X) = {}, <<"TVMinus of the same", n'>>)
        /\ Assert(TVNewEntries(U, U') = {U'[Key(n')]}, <<"TVNewEntries", n'>>)
        /\ Assert(\A i \in 1..n' : Key(i) \in X' /\ U'[Key(i)].i = i, <<"lookups", n'>>)
        /\ Assert(X' = {Key(i) : i \in 1..n'}, <<"X'", n'>>)
        /\ Assert(DOMAIN U' = X', <<"DOMAIN U'", n'>>)
        /\ Assert(TVSliceBy(X', U', "on", "even") = {Key(i) : i \in {j \in 1..n' : j % 2 = 0}},
                  <<"TVSliceBy", n'>>)
        /\ Assert(TVMinus(X', {Key(1)}) = X' \ {Key(1)}, <<"TVMinus, not grown", n'>>)
NotYet == n < 100
"""


@pytest.mark.parametrize("simulate", [True, False], ids=["simulation", "breadth-first"])
def test_values_sorted_in_place_as_they_grow_stay_the_same_values(
    tmp_path: Path, simulate: bool
) -> None:
    classes = reader_classes()
    assert classes is not None, "the Java reader did not compile: is `javac` installed?"
    _rref_stand_in(tmp_path)
    module = "\n".join(
        ["---- MODULE Grow ----", f"EXTENDS {OPS_MODULE}, RRef, TLC, Integers", _GROWING, "===="]
    )
    (tmp_path / f"{OPS_MODULE}.tla").write_text(_OPS_MODULE, encoding="utf-8")
    (tmp_path / "Grow.tla").write_text(module + "\n", encoding="utf-8")
    # NotYet fails once n = 100: the run got there, every Assert on the way held
    (tmp_path / "Grow.cfg").write_text("INIT Init\nNEXT Next\nINVARIANT NotYet\n", "utf-8")
    options = TLCOptions(
        classpath=(classes,),
        simulate=simulate,
        traces=1 if simulate else None,
        depth=110 if simulate else None,
    )
    result = run_tlc(tmp_path / "Grow.tla", options=options)
    said = "\n".join([result.summary, *(e.message for e in result.errors), *result.printed])
    assert (result.verdict, result.violated) == (Verdict.INVARIANT, "NotYet"), said
    assert result.counterexample is not None
    assert len(result.counterexample.states) == 101


def test_rref_traces_get_the_same_verdicts_with_and_without_the_native_operators(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The RRef mapping through TraceOps: the Java reader's operators and TLC evaluating the
    definitions accept the same traces and reject a broken one at the same event."""
    simulate = load_simulator("rref")
    good = []
    for seed in (3, 4):
        simulate(seed, 60, tmp_path / f"s{seed}.ndjson")
        good.append(load_trace(tmp_path / f"s{seed}.ndjson"))
    # a UserRRef slice (TVSliceBy) that loses an element: the first DropRRef logs held as if
    # the dropped UserRRef were still held
    lines = (tmp_path / "s3.ndjson").read_text(encoding="utf-8").splitlines()
    index = next(i for i, line in enumerate(lines) if '"event":"DropRRef"' in line)
    event = json.loads(lines[index])
    event["post"]["held"]["#del"].remove(event["args"]["f"])  # (a delta: trace schema 3)
    lines[index] = json.dumps(event)
    bad = parse_trace_lines(lines, "s3-broken")
    verdicts = {}
    for reader in ("1", "0"):
        monkeypatch.setenv(READER_ENV, reader)
        report = validate_traces([*good, bad], RREF, SPEC_ROOT, explain=False)
        verdicts[reader] = [
            (v.accepted, v.rejection and v.rejection.index) for v in report.verdicts
        ]
    assert verdicts["1"] == verdicts["0"]
    assert verdicts["1"][:2] == [(True, None), (True, None)]
    assert verdicts["1"][2] == (False, index)  # lines[0] is the header: event index = line - 1
