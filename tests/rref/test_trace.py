"""The RRef trace schema: round trips, and the event names against RRef.tla's actions."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from protoref.ids import GloballyUniqueId as G
from protoref.rref.core.events import UserDelete
from protoref.rref.core.machine import ACTION_TABLE
from protoref.rref.core.state import RRefContext, UserRRef
from protoref.rref.sim.scenarios import SCENARIOS
from protoref.rref.sim.simulator import SimConfig, Simulator
from protoref.rref.trace import (
    ACTION_ARGS,
    DELTAS,
    EVENT_ADAPTER,
    EVENT_MODELS,
    AssignOwnerRRefArgs,
    DelForkOfOwnerArgs,
    DropRRefArgs,
    EventEncoder,
    IdSet,
    RemoteArgs,
    make_event,
)
from protoref.rref.trace.encoder import _ATOMS
from protoref.tracing import (
    SCHEMA_VERSION,
    JsonlSink,
    MemorySink,
    SetDelta,
    TraceEnd,
    TraceEventBase,
    TraceHeader,
    encode_line,
    read_trace_file,
    sort_key,
)
from tracecheck.protocols.mapping import spec_actions

SPEC = Path(__file__).resolve().parents[2] / "spec" / "rref" / "RRef.tla"

#: Spec actions the implementation does not perform, each with the reason. The test below fails
#: when the spec gains an action that is neither performed nor listed here.
NOT_PERFORMED = {
    # Guarded by ~Reference: in the Reference a to_here keeps its UserRRef pinned until the reply
    # arrives (a timeout changes no protocol state), so the step only exists for PyTorch.
    "TimeOutToHere": "PyTorch variant only",
    # PyTorch-only faults (constants UnknownErrors, RetryExhaustion): the Reference stores any
    # failure of rpc.remote in the OwnerRRef and retries control messages until delivered.
    "FailRemote": "PyTorch-only fault",
    "ExhaustRetries": "PyTorch-only fault",
}


@pytest.fixture(scope="module")
def spec_action_params() -> dict[str, tuple[str, ...]]:
    return spec_actions(SPEC.read_text(encoding="utf-8"))


def test_schema_events_are_the_reference_actions(
    spec_action_params: dict[str, tuple[str, ...]],
) -> None:
    spec_names = set(spec_action_params)
    assert set(NOT_PERFORMED) <= spec_names, "NOT_PERFORMED names an action the spec lacks"
    assert set(EVENT_MODELS) == spec_names - set(NOT_PERFORMED)
    assert {row.tla_action for row in ACTION_TABLE} == set(EVENT_MODELS)


def test_args_are_named_like_the_tla_parameters(
    spec_action_params: dict[str, tuple[str, ...]],
) -> None:
    for name, args in ACTION_ARGS.items():
        assert tuple(args.model_fields) == spec_action_params[name], name


def _all_events_run() -> MemorySink:
    sink = MemorySink()
    Simulator(5, SimConfig(shutdown=True, lose_first_attempts=True), sink).run(400)
    return sink


def _event_lines(lines: list[str]) -> list[str]:
    """A trace's event lines: after the header, without the end line of a finished run."""
    return [line for line in lines[1:] if json.loads(line)["kind"] == "event"]


def test_every_line_round_trips() -> None:
    sink = _all_events_run()
    lines = sink.lines()
    assert TraceHeader.model_validate_json(lines[0]) == sink.records[0]
    # the run finished: its last line is the end line (schema 4), the last seq of each actor
    assert TraceEnd.model_validate_json(lines[-1]) == sink.records[-1]
    for line, record in zip(lines[1:-1], sink.records[1:-1], strict=True):
        event = EVENT_ADAPTER.validate_json(line)
        assert event == record
        assert json.loads(event.model_dump_json(by_alias=True)) == json.loads(line)


def test_runs_perform_every_schema_event() -> None:
    seen: set[str] = set()
    for seed in range(6):
        config = SimConfig(shutdown=seed % 2 == 0, lose_first_attempts=seed >= 3)
        seen |= set(Simulator(seed, config).run(300).counts)
    sim = Simulator(0, SimConfig(timeouts=False))
    SCENARIOS["self_remote"](sim)
    seen |= set(sim.finish().counts)
    assert seen == set(EVENT_MODELS)


def test_jsonl_sink_file_parses_back(tmp_path: Path) -> None:
    path = tmp_path / "trace.ndjson"
    summary = Simulator(3, SimConfig(), JsonlSink(path)).run(150)
    trace = read_trace_file(path, EVENT_ADAPTER)
    assert trace.header.seed == 3
    assert trace.header.settings["Variant"] == "Reference"
    assert len(trace.events) == summary.events
    # Per-node seq counts from 1 without gaps; Lamport clocks grow per node.
    last: dict[str, tuple[int, int]] = {}
    for event in trace.events:
        seq, lamport = last.get(event.node, (0, 0))
        assert event.seq == seq + 1
        assert event.lamport > lamport
        last[event.node] = (event.seq, event.lamport)


def test_post_uses_tla_variable_names() -> None:
    sink = _all_events_run()
    keys = {k for r in _event_lines(sink.lines()) for k in json.loads(r)["post"]}
    # Spec variable names, `<name>Added` for what a step added to a variable that only grows,
    # and `delivered`: the message a handler took (net \ net').
    assert keys <= {
        "nextId", "owners", "pendingOwners", "forks", "pendingUsers", "confirmedUsers",
        "pendingChildren", "ownerHeld", "selfCalls", "tombstonesAdded", "usersAdded", "held",
        "fetching", "fetchedAdded", "deletedAdded", "timedOutAdded", "phase", "stopping",
        "delivered",
    }  # fmt: skip


def test_handlers_log_the_message_they_took() -> None:
    sink = _all_events_run()
    for line in _event_lines(sink.lines()):
        event = json.loads(line)
        if "delivered" in event["post"]:
            (message,) = event["post"]["delivered"]["#set"]
            assert message["dst"] == event["node"]


def _spec_constants() -> set[str]:
    text = SPEC.read_text(encoding="utf-8")
    block = text.split("CONSTANTS", 1)[1].split("VARIABLES", 1)[0]
    return set(re.findall(r"^\s+([A-Z][A-Za-z0-9]*),?\s", block, flags=re.MULTILINE))


def test_header_settings_name_the_spec_constants() -> None:
    sink = MemorySink()
    Simulator(1, SimConfig(), sink).run(1)
    header = sink.records[0]
    assert isinstance(header, TraceHeader)
    # Workers are the header's nodes; MaxLocalId is read off the trace (the largest id drawn).
    derived = {"Workers", "MaxLocalId"}
    # The PyTorch-only faults are fixed FALSE by the mapping (tracecheck.protocols.rref), not
    # carried by a Reference trace.
    derived |= {"UnknownErrors", "RetryExhaustion"}
    # ... and definitions a trace overrides (RRef.tla DeleteLast, issue 28)
    overridden = {"DeleteLast"}
    settings = {k for k in header.settings if k[0].isupper()}
    assert settings == (_spec_constants() - derived) | overridden


def test_logged_sets_are_in_the_contract_order() -> None:
    # trace.py orders whole sets by Python's order on their JSON elements and the direct encoder
    # orders a delta's sides by Python's order on the elements (both faster than the contract's
    # type-tagged sort_key); the orders must agree on every logged list.
    checked = 0
    for seed in range(12):
        sink = MemorySink()
        Simulator(seed, SimConfig(shutdown=True, workers=4), sink).run(300)
        for line in _event_lines(sink.lines()):
            for value in json.loads(line)["post"].values():
                if isinstance(value, dict):
                    for side in ("#set", "#add", "#del"):
                        items = value.get(side, [])
                        assert items == sorted(items, key=sort_key)
                        checked += len(items) > 1
    assert checked > 10
    # Every element shape a post-state set holds, on lists long enough to tell the orders apart.
    ids = [G(w, n) for w in ("w0", "w1", "w10", "w2") for n in (0, 1, 2, 9, 10, 100)]
    shapes: list[list[Any]] = [
        ids,
        [(a, b) for a in ids[::5] for b in ids[::7]],
        [(a, b, w) for a in ids[::5] for b in ids[::7] for w in ("w1", "w10", "w2")],
    ]
    for elements in shapes:
        want = sorted(json.loads(json.dumps(elements)), key=sort_key)
        assert TypeAdapter(IdSet[Any]).dump_python(frozenset(elements), mode="json") == {
            "#set": want
        }
        # (both sides the same set: only their order is looked at here)
        delta = SetDelta[Any].of(frozenset(elements), frozenset(elements))
        assert delta.model_dump(mode="json") == {"#add": want, "#del": want}
        # the direct encoder (any set will do for the field: it only sorts and writes)
        before = RRefContext(me="w1")
        ctx = RRefContext(me="w1", held=frozenset(elements))
        line = EventEncoder().line(DropRRefArgs.of("w1", ids[0]), "w1", 1, 1, ctx, None, before)
        assert json.loads(line)["post"]["held"] == {"#add": want, "#del": []}


CONFIGS = [
    SimConfig(),
    SimConfig(shutdown=True),
    SimConfig(workers=4, max_delay=2, shutdown=True),
    SimConfig(shutdown=True, lose_first_attempts=True),
]
CONFIG_IDS = ["default", "shutdown", "four-workers", "lost-first-attempts"]


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_direct_encoder_writes_the_models_bytes(tmp_path: Path, config: SimConfig) -> None:
    # The simulator renders events for a JsonlSink with EventEncoder, for any other sink with
    # the pydantic models: the two files must be byte-identical, event by event.
    for seed in range(12):
        path = tmp_path / f"{seed}.ndjson"
        Simulator(seed, config, JsonlSink(path)).run(150)
        memory = MemorySink()
        Simulator(seed, config, memory).run(150)
        assert path.read_text(encoding="utf-8").splitlines() == memory.lines(), seed


def _hashable(value: Any) -> Any:
    """A JSON value as a hashable one (lists as tuples): a set element."""
    return tuple(map(_hashable, value)) if isinstance(value, list) else value


def _elements(values: Iterable[Any]) -> set[Any]:
    return {_hashable(v) for v in values}


class _ContextSink(MemorySink):
    """A MemorySink that keeps, with each event, the acting node's context after the step."""

    def __init__(self) -> None:
        super().__init__()
        self.sim: Simulator | None = None
        self.contexts: list[RRefContext | None] = []

    def emit(self, event: TraceEventBase) -> None:
        super().emit(event)
        assert self.sim is not None
        self.contexts.append(self.sim.contexts.get(event.node))


#: JSON key of every post field logged as a delta -> its RRefContext attribute.
DELTA_KEYS = {
    info.alias or name: name
    for cls in EVENT_MODELS.values()
    for name, info in cls.model_fields["post"].annotation.model_fields.items()  # type: ignore[union-attr]
    if name in DELTAS
}


def test_delta_fields_are_the_per_node_sets() -> None:
    # Every post field that is a set of the node's state and not history is a delta.
    assert set(DELTA_KEYS) == {
        "owners", "pendingOwners", "forks", "pendingUsers", "confirmedUsers", "pendingChildren",
        "ownerHeld", "selfCalls", "held", "fetching",
    }  # fmt: skip
    assert set(DELTAS) == {f.name for f in fields(RRefContext)} - {
        "me", "next_id", "tombstones", "users", "fetched", "deleted", "timed_out", "phase",
        "stopping",
    }  # fmt: skip


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_deltas_resolve_to_the_whole_slices(tmp_path: Path, config: SimConfig) -> None:
    # For every event of many runs, both renderings: each per-node set, resolved from the
    # node's deltas in file order (the empty set before the first), is the node's whole slice
    # as schema 2 logged it, computed here from the node's context after the step; a delta adds
    # only new elements and deletes only present ones (so its sides are disjoint).
    whole = TypeAdapter(IdSet[Any])
    seen: set[str] = set()
    changed = 0
    for seed in range(15):
        path = tmp_path / f"{seed}.ndjson"
        Simulator(seed, config, JsonlSink(path)).run(200)
        memory = _ContextSink()
        memory.sim = Simulator(seed, config, memory)
        memory.sim.run(200)
        lines = path.read_text(encoding="utf-8").splitlines()
        assert lines == memory.lines(), seed
        assert json.loads(lines[0])["schema_version"] == SCHEMA_VERSION
        slices: dict[tuple[str, str], set[Any]] = {}
        for line, ctx in zip(_event_lines(lines), memory.contexts, strict=True):
            event = json.loads(line)
            for key, value in event["post"].items():
                if key not in DELTA_KEYS:
                    assert "#add" not in value if isinstance(value, dict) else True
                    continue
                assert list(value) == ["#add", "#del"], (seed, line)
                add, delete = _elements(value["#add"]), _elements(value["#del"])
                current = slices.setdefault((event["node"], key), set())
                assert not add & current, (seed, line)
                assert delete <= current, (seed, line)
                current -= delete
                current |= add
                assert ctx is not None
                logged_whole = whole.dump_python(getattr(ctx, DELTA_KEYS[key]), mode="json")
                assert current == _elements(logged_whole["#set"]), (seed, line)
                seen.add(key)
                changed += bool(add or delete)
    assert changed > 500
    assert seen == set(DELTA_KEYS)


def test_direct_encoder_needs_the_delivered_message() -> None:
    ctx = RRefContext(me="w1")
    args = AssignOwnerRRefArgs.of("w1", G("w0", 1), G("w0", 2))
    with pytest.raises(ValueError, match="delivered"):
        EventEncoder().line(args, "w1", 1, 1, ctx)


def test_direct_encoder_needs_the_pre_state_for_what_a_step_added() -> None:
    ctx = RRefContext(me="w1")
    with pytest.raises(ValueError, match="pre-state"):
        EventEncoder().line(RemoteArgs.of("w1", "w0"), "w1", 1, 1, ctx)
    with pytest.raises(ValueError, match="pre-state"):
        make_event(RemoteArgs.of("w1", "w0"), "w1", 1, 1, ctx)


def test_direct_encoder_follows_any_change_of_a_logged_set() -> None:
    # EventEncoder writes a set's delta from the value it last wrote for the node (make_event
    # from the pre-state): a step usually adds or removes one element, but every other change
    # (several elements, a swap, an equal new set, emptied) must give the models' bytes too, and
    # resolving the deltas must give the sets. users only grows (HistoryGrowsProp): the event
    # logs the records the step added (none, one or several) relative to the pre-state.
    def user(n: int, owner: str = "w0") -> UserRRef:
        return UserRRef.of(G("w1", n), G("w0", n), owner, "w1", None)

    ids = [G("w0", n) for n in (1, 2, 9, 10, 11, 100)]
    sets = [
        frozenset(),
        frozenset(ids[:1]),
        frozenset(ids[:2]),  # one added
        frozenset(ids[:5]),  # three added
        frozenset(ids[1:5]),  # one removed (the first)
        frozenset(ids[1:4]) | {ids[5]},  # a swap: same size
        frozenset(ids[1:4]) | {ids[5]},  # an equal new set
        frozenset(ids[1:3]) | {ids[5]},  # one removed (in the middle)
        frozenset({ids[5], ids[0]}),  # two removed, one added
        frozenset(),
        frozenset(ids),
    ]
    u1, u2, u3, u10, u11 = user(1), user(2), user(3), user(10), user(11, "w2")
    records = [
        [],
        [u1],
        [u1, u10],  # one added
        [u1, u10],  # none
        [u1, u10, u2, u3],  # two added
        [u1, u10, u2, u3],
        [u1, u10, u2, u3],
        [u1, u10, u2, u3, u11],  # one added
        [u1, u10, u2, u3, u11],
        [u1, u10, u2, u3, u11],
        [u1, u10, u2, u3, u11],
    ]
    # One encoder per action, each logging every step of the node: an encoder given two events
    # of one step would write the second's deltas relative to the first's (nothing changed).
    encoders = {RemoteArgs: EventEncoder(), DelForkOfOwnerArgs: EventEncoder()}
    resolved: dict[tuple[type, str], set[Any]] = {}
    node = "w1"
    before = RRefContext(me=node)
    for step, (ids_now, users_now) in enumerate(zip(sets, records, strict=True), start=1):
        users = {u.fork: u for u in users_now}
        ctx = RRefContext(
            me=node,
            next_id=step,
            owners=ids_now,
            forks=frozenset((r, r) for r in ids_now),
            users=users,
            held=frozenset(users),
        )
        for args in (RemoteArgs.of(node, "w0"), DelForkOfOwnerArgs.of(node, ids[0], ids[1])):
            delivered = None
            if isinstance(args, DelForkOfOwnerArgs):
                delivered = UserDelete.make("w0", node, ids[0], node, ids[1])
            want = encode_line(
                make_event(args, node, step, step, ctx, delivered=delivered, before=before)
            )
            line = encoders[type(args)].line(args, node, step, step, ctx, delivered, before)
            assert line == want, step
            post = json.loads(line)["post"]
            for key in ("owners", "forks"):
                value = resolved.setdefault((type(args), key), set())
                value -= {_hashable(x) for x in post[key]["#del"]}
                value |= {_hashable(x) for x in post[key]["#add"]}
                assert value == _elements(json.loads(json.dumps(list(ctx.__dict__[key]))))
        added = json.loads(
            encode_line(make_event(RemoteArgs.of(node, "w0"), node, step, step, ctx, before=before))
        )
        assert [u["fork"][1] for u in added["post"]["usersAdded"]["#set"]] == sorted(
            u.fork[1] for u in users_now if u.fork not in before.users
        ), step
        before = ctx


def test_the_atom_cache_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # The JSON of strings and ids is cached once per process, for every encoder: it empties
    # itself when full, so a long run's ids never grow it past its bound, and what it writes
    # after starting over is the same as before.
    monkeypatch.setattr(_ATOMS, "limit", 8)
    _ATOMS.clear()
    before = RRefContext(me="w1")
    for n in range(1, 40):
        ctx = RRefContext(me="w1", held=frozenset({G("w0", n), G("w2", n + 1)}))
        args = DropRRefArgs.of("w1", G("w0", n))
        line = EventEncoder().line(args, "w1", n, n, ctx, None, before)
        assert line == encode_line(make_event(args, "w1", n, n, ctx, before=before)), n
        assert len(_ATOMS) <= 8
