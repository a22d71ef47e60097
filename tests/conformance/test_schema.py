"""The implementation-schema check (tracecheck.traces.schema): cheaper, and exactly as strict.

Each logged set is validated only in the elements no earlier event of the trace validated, so
these tests put malformed values where that could hide them: in a set the node logged before
unchanged, added to such a set, at a position valid at its first occurrence. Every verdict and
message is compared with the check it replaced (each event validated whole, :func:`reference`).
"""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import (
    BeforeValidator,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from protoref.rref.trace import EVENT_MODELS
from protoref.tracing import DELTA_OR_WHOLE, FrozenModel, TraceEventBase, tla_set_in
from tracecheck.plugins import event_schema
from tracecheck.protocols import load_mapping, load_simulator
from tracecheck.protocols.mapping import ProtocolMap
from tracecheck.replay.validate import check_schema
from tracecheck.traces.load import Trace, TraceFormatError, parse_trace_lines
from tracecheck.traces.schema import _cut, _plan, check_events
from traceformat.deltas import resolve

RREF = load_mapping("rref")
RENDEZVOUS = load_mapping("rendezvous")


def reference(trace: Trace, adapter: TypeAdapter[Any]) -> str | None:
    """The check as it was: every event validated whole; the error it raised, as text."""
    for event, line in zip(trace.events, trace.lines, strict=True):
        try:
            # the event as logged: sent_by (schema 4, receives only) only when it was
            logged = {k: v for k, v in dict(event).items() if k != "sent_by" or v is not None}
            adapter.validate_python(logged)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"][1:] or first["loc"])
            return f"{trace.source}:{line}: field {field}: {first['msg']} ({event.event} schema)"
    return None


def outcome(trace: Trace, mapping: ProtocolMap) -> str | None:
    try:
        check_schema(trace, mapping)
    except TraceFormatError as exc:
        return str(exc)
    return None


def adapter_of(mapping: ProtocolMap) -> TypeAdapter[Any]:
    adapter = event_schema(mapping.protocol)
    assert adapter is not None
    return adapter


@cache
def simulated(protocol: str, seed: int, steps: int) -> tuple[dict[str, Any], ...]:
    """The lines of a simulated trace, parsed (each test mutates its own copy)."""
    import tempfile  # noqa: PLC0415 - only here

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.ndjson"
        load_simulator(protocol)(seed, steps, path)
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        # the header and the events (these tests change events; a finished run's end line
        # names each node's last seq, which no test here changes)
        return tuple(r for r in rows if r.get("kind") != "end")


def lines_of(protocol: str, seed: int = 3, steps: int = 400) -> list[dict[str, Any]]:
    """A simulated trace's lines, with every set logged whole: the RRef implementation logs
    its per-node sets as deltas (trace schema 3), which its schema takes as well as whole sets;
    whole, they repeat their elements from event to event, which the check skips."""
    lines: list[dict[str, Any]] = json.loads(json.dumps(simulated(protocol, seed, steps)))
    return whole_sets(lines)


def whole_sets(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    wholes = resolve([(x["node"], list(x["post"].items())) for x in lines[1:]])
    for line, whole in zip(lines[1:], wholes, strict=True):
        line["post"] = dict(zip(line["post"], whole, strict=True))
    copied: list[dict[str, Any]] = json.loads(json.dumps(lines))  # no element shared by lines
    return copied


def test_traces_logged_with_deltas_are_checked_as_before() -> None:
    """As the implementation writes them (no whole set to cut but ``delivered`` and the
    ``Added`` fields): valid; an element made bad in a delta is caught with the whole check's
    message."""
    lines: list[dict[str, Any]] = json.loads(json.dumps(simulated("rref", 3, 400)))
    assert any("#add" in str(line.get("post")) for line in lines)
    trace = trace_of(lines)
    assert outcome(trace, RREF) is None
    index, key = next(
        (i, k)
        for i, line in enumerate(lines[1:], start=1)
        for k, v in line["post"].items()
        if isinstance(v, dict) and v.get("#add")
    )
    assert spoil(lines[index]["post"][key]["#add"][0])
    assert_caught_as_before(lines, f"t.ndjson:{index + 1}: field post.{key}")


def trace_of(lines: list[dict[str, Any]], source: str = "t.ndjson") -> Trace:
    return parse_trace_lines([json.dumps(x) for x in lines], source)


def repeated_sets(lines: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(line index, post key) of every set of at least two elements that the same node logged
    unchanged at its previous event that logged the key."""
    last: dict[tuple[str, str], Any] = {}
    out = []
    for index, line in enumerate(lines[1:], start=1):
        for key, value in line["post"].items():
            if isinstance(value, dict) and "#set" in value:
                where = (line["node"], key)
                if len(value["#set"]) >= 2 and last.get(where) == value:
                    out.append((index, key))
                last[where] = value
    return out


def spoil(value: Any) -> bool:
    """Replace the first number inside ``value`` (a list or dict, in place) by a word."""
    items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
    for k, v in items:
        if isinstance(v, int) and not isinstance(v, bool):
            value[k] = "many"
            return True
        if isinstance(v, dict | list) and spoil(v):
            return True
    return False


def test_simulated_traces_pass_as_before() -> None:
    for protocol, mapping in (("rref", RREF), ("rendezvous", RENDEZVOUS)):
        trace = trace_of(lines_of(protocol))
        assert outcome(trace, mapping) is None
        assert reference(trace, adapter_of(mapping)) is None


def test_the_rref_schema_is_checked_set_by_set() -> None:
    """Every RRef event kind's post sets are reduced (else the check would be as slow as
    before: this is what makes it cheap), with one memo per element schema."""
    plan = _plan(adapter_of(RREF))
    with_sets = {
        name
        for name, cls in EVENT_MODELS.items()
        for field in cls.model_fields["post"].annotation.model_fields.values()  # type: ignore[union-attr]
        if BeforeValidator(tla_set_in) in field.metadata or DELTA_OR_WHOLE in field.metadata
    }
    assert len(with_sets) == 20
    assert set(plan.kinds) == with_sets
    assert sum(len(k.sets) for k in plan.kinds.values()) > 50
    assert 1 < plan.classes < 10  # ids, id pairs, parked fetches, UserRRefs, messages


def assert_caught_as_before(lines: list[dict[str, Any]], where: str) -> None:
    """The fast check rejects the trace with exactly the old check's message, which names
    ``where`` (file:line and field)."""
    trace = trace_of(lines)
    expected = reference(trace, adapter_of(RREF))
    assert expected is not None
    assert where in expected
    assert outcome(trace, RREF) == expected


@pytest.mark.parametrize("position", ["first", "middle", "last"])
def test_a_bad_element_in_a_set_logged_before_unchanged_is_caught(position: str) -> None:
    lines = lines_of("rref")
    index, key = repeated_sets(lines)[len(repeated_sets(lines)) // 2]
    elements = lines[index]["post"][key]["#set"]
    at = {"first": 0, "middle": len(elements) // 2, "last": len(elements) - 1}[position]
    assert spoil(elements[at])
    assert_caught_as_before(lines, f"t.ndjson:{index + 1}: field post.{key}")


def test_a_bad_element_added_to_a_set_logged_before_is_caught() -> None:
    lines = lines_of("rref")
    index, key = repeated_sets(lines)[-1]
    elements = lines[index]["post"][key]["#set"]
    bad = json.loads(json.dumps(elements[0]))
    assert spoil(bad)
    elements.append(bad)
    assert_caught_as_before(lines, f"t.ndjson:{index + 1}:")


def test_a_value_valid_at_its_first_occurrence_is_checked_again_later() -> None:
    """The same element, valid where it first appears, then with a word for a number in a later
    event's set: rejected at the later line (the memo keys elements by their JSON)."""
    lines = lines_of("rref")
    index, key = repeated_sets(lines)[0]
    first = lines[index]["post"][key]["#set"][0]
    later = [
        i
        for i, line in enumerate(lines[1:], start=1)
        if i > index and first in line["post"].get(key, {}).get("#set", [])
    ]
    assert later, "the element appears again later"
    elements = lines[later[-1]]["post"][key]["#set"]
    assert spoil(elements[elements.index(first)])
    assert_caught_as_before(lines, f"t.ndjson:{later[-1] + 1}:")


@pytest.mark.parametrize(
    "bad",
    [
        {"#set": [], "extra": 1},  # the set encoding itself
        {"#set": "w0"},
        [["w0", "x"]],  # a bare list is a set to the schema, its elements are checked
        {"#set": [["w0", 1], ["w0"]]},
    ],
)
def test_a_malformed_set_encoding_where_a_set_was_logged_before_is_caught(bad: Any) -> None:
    lines = lines_of("rref")
    index, key = repeated_sets(lines)[1]
    lines[index]["post"][key] = bad
    assert_caught_as_before(lines, f"t.ndjson:{index + 1}:")


def test_random_single_mutations_get_the_verdict_and_message_of_the_whole_check() -> None:
    rng = random.Random(5)
    base = lines_of("rref", seed=7, steps=300)
    adapter = adapter_of(RREF)
    rejected = 0
    for _ in range(40):
        lines = json.loads(json.dumps(base))
        line = rng.choice(lines[len(lines) // 3 :])  # late lines: the memo is full by then
        sets = [v["#set"] for v in line["post"].values() if isinstance(v, dict) and v["#set"]]
        if sets:
            elements = rng.choice(sets)
            target = elements[rng.randrange(len(elements))]
            if isinstance(target, dict | list):
                spoil(target)
            else:
                elements.append(["not", "an", "element"])
        else:
            line["post"]["unknown"] = 1
        trace = trace_of(lines)
        expected = reference(trace, adapter)
        rejected += expected is not None
        assert outcome(trace, RREF) == expected
    assert rejected >= 30


def test_rendezvous_events_are_checked_whole() -> None:
    lines = lines_of("rendezvous")
    assert _plan(adapter_of(RENDEZVOUS)).classes == 0  # its sets are JSON values, not TLA+ sets
    lines[-1]["post"]["pc"] = 3
    trace = trace_of(lines)
    expected = reference(trace, adapter_of(RENDEZVOUS))
    assert expected is not None
    assert "field post.pc" in expected
    assert outcome(trace, RENDEZVOUS) == expected


# --- the conditions under which a set is checked element by element -------------------------

Ids = Annotated[frozenset[tuple[str, int]], BeforeValidator(tla_set_in)]


class _Args(FrozenModel):
    pass


class _PlainPost(FrozenModel):
    ids: Ids


class _BoundedPost(FrozenModel):
    ids: Annotated[Ids, Field(max_length=1)]


class _CheckedPost(FrozenModel):
    ids: Ids

    @model_validator(mode="after")
    def _at_most_one(self) -> _CheckedPost:
        if len(self.ids) > 1:
            raise ValueError("more than one id")
        return self


class _CountedPost(FrozenModel):
    ids: Ids
    n: int

    @field_validator("n")
    @classmethod
    def _counts(cls, value: int, info: ValidationInfo) -> int:
        if value != len(info.data.get("ids", ())):
            raise ValueError("n is not the number of ids")
        return value


class Plain(TraceEventBase):
    event: Literal["Plain"] = "Plain"
    args: _Args
    post: _PlainPost


class Bounded(TraceEventBase):
    event: Literal["Bounded"] = "Bounded"
    args: _Args
    post: _BoundedPost


class Checked(TraceEventBase):
    event: Literal["Checked"] = "Checked"
    args: _Args
    post: _CheckedPost


class Counted(TraceEventBase):
    event: Literal["Counted"] = "Counted"
    args: _Args
    post: _CountedPost


TOY: TypeAdapter[Any] = TypeAdapter(
    Annotated[Plain | Bounded | Checked | Counted, Field(discriminator="event")]
)


def toy_trace(name: str, posts: list[dict[str, Any]]) -> Trace:
    header = {"kind": "header", "schema_version": 2, "protocol": "toy", "nodes": ["a"], "seed": 1}
    events = [
        {"kind": "event", "event": name, "node": "a", "seq": i, "lamport": i, "args": {}, "post": p}
        for i, p in enumerate(posts, start=1)
    ]
    return parse_trace_lines([json.dumps(x) for x in [header, *events]], "toy.ndjson")


def toy_outcome(trace: Trace) -> str | None:
    try:
        check_events(trace, TOY)
    except TraceFormatError as exc:
        return str(exc)
    return None


def test_only_sets_whose_validity_is_their_elements_are_reduced() -> None:
    """A length bound, a model validator and a validator reading other fields (``info.data``)
    each see the whole set: such events are validated whole."""
    assert set(_plan(TOY).kinds) == {"Plain"}


@pytest.mark.parametrize(
    ("name", "extra"), [("Bounded", {}), ("Checked", {}), ("Counted", {"n": 1})]
)
def test_a_set_that_breaks_a_whole_set_condition_is_rejected(
    name: str, extra: dict[str, Any]
) -> None:
    one = {"ids": {"#set": [["x", 1]]}, **extra}
    two = {"ids": {"#set": [["x", 1], ["y", 2]]}, **extra}  # ["x", 1] was validated at line 2
    trace = toy_trace(name, [one, two])
    expected = reference(trace, TOY)
    assert expected is not None
    assert expected.startswith("toy.ndjson:3:")
    assert toy_outcome(trace) == expected


def test_plain_sets_are_reduced_and_still_checked() -> None:
    good = toy_trace("Plain", [{"ids": {"#set": [["x", 1]]}}, {"ids": {"#set": [["x", 1]]}}])
    assert toy_outcome(good) is None
    bad = toy_trace(
        "Plain", [{"ids": {"#set": [["x", 1]]}}, {"ids": {"#set": [["x", 1], ["y", "z"]]}}]
    )
    assert toy_outcome(bad) == reference(bad, TOY) is not None


def test_an_equal_value_with_other_json_or_type_is_validated_again() -> None:
    """The memo skips an element only if it has the same JSON as one validated before and is
    equal to it: True where 1 was (equal, other JSON) and a tuple where a list was (same JSON,
    not equal) are validated."""
    memo: dict[bytes, Any] = {}
    cut = _cut([["w0", 1], ["w0", 2]], None, 0, memo)
    assert cut is not None
    slot, new = cut
    memo.update(new)
    for other in ([["w0", True], ["w0", 2]], [("w0", 1), ["w0", 2]], [["w0", 1.0], ["w0", 2]]):
        again = _cut(other, slot, 0, memo)
        assert again is not None
        assert [x for _, x in again[1]] == [other[0]]
    unchanged = _cut([["w0", 1], ["w0", 2]], slot, 0, memo)
    assert unchanged is not None
    assert unchanged[1] == []
    grown = _cut([["w0", 1], ["w0", 2], ["w0", 3]], slot, 0, memo)
    assert grown is not None
    assert [x for _, x in grown[1]] == [["w0", 3]]
    assert _cut([{1, 2}], slot, 0, memo) is None  # not JSON: validated whole


class _Item(FrozenModel):
    name: str
    size: int

    @field_validator("size")
    @classmethod
    def _sized(cls, value: int, info: ValidationInfo) -> int:
        del info
        return value


class _ItemsPost(FrozenModel):
    stock: Annotated[frozenset[_Item], BeforeValidator(tla_set_in)]
    sold: Annotated[frozenset[_Item], BeforeValidator(tla_set_in)]


class Stocked(TraceEventBase):
    event: Literal["Stocked"] = "Stocked"
    args: _Args
    post: _ItemsPost


class Sold(TraceEventBase):
    event: Literal["Sold"] = "Sold"
    args: _Args
    post: _ItemsPost


def test_a_validator_taking_info_in_a_shared_type_turns_the_cut_off() -> None:
    """Types used in several places are compiled once, as definitions, apart from where they
    are used; one with a validator taking ``info`` (which could read other fields) is not
    worth telling apart: every event is validated whole."""
    adapter: TypeAdapter[Any] = TypeAdapter(Annotated[Stocked | Sold, Field(discriminator="event")])
    assert adapter.core_schema["type"] == "definitions"
    assert _plan(adapter).kinds == {}
