"""The RRef checker has teeth: golden traces are accepted, their single-event mutations are
rejected at the expected event, and the legal ones are accepted.

Every mutation kind (drop, duplicate, swap two adjacent events, change one field) is generated
from the golden traces in ``tests/rref/golden/`` and checked in ONE TLC run per kind
(``explain=False``; the golden traces share their constants, so their mutants batch together).

The expected verdict of a mutant is decided without TLC, by two rules:

- structural rules that hold for any protocol whose state is per worker plus a network (the
  spec's shape): the events before the mutated one are unchanged, so a rejection is never
  earlier; a drop is rejected no later than the first event that takes a message the dropped
  event sent; a changed field is rejected at its own event; two adjacent events on different
  workers, neither taking a message the other sent, commute (the swap is accepted);
- a differential oracle: the mutant is replayed through protoref's sans-IO core (the Reference
  implementation's own transition functions, with a network of the messages they sent). An
  event is explained when the core, given that input in some reachable world, performs it with
  exactly the logged arguments and post-state. The oracle's first unexplained event must be
  TLC's. The core and the spec are written independently, so agreement on hundreds of mutants is
  evidence about both, and a disagreement names the event to look at.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from protoref.errors import ProtocolError
from protoref.rref.core import events as ev
from protoref.rref.core.machine import step as core_step
from protoref.rref.core.state import RRefContext
from protoref.rref.trace import EVENT_ADAPTER, make_event
from protoref.tracing import encode_line
from tracecheck.protocols.rref import RREF
from tracecheck.replay.explain import Explanation
from tracecheck.replay.validate import validate_traces
from tracecheck.replay.verdicts import TraceVerdict
from tracecheck.traces.deltas import resolve
from tracecheck.traces.jsonvalue import from_json
from tracecheck.traces.load import Trace, TraceFormatError, load_trace, parse_trace_lines

ROOT = Path(__file__).resolve().parent.parent.parent
SPEC_ROOT = ROOT / "spec"
GOLDEN = ROOT / "tests" / "rref" / "golden"
SCENARIOS = (
    "user_to_owner_return",
    "user_to_owner_arg",
    "owner_to_user",
    "user_to_user",
    "self_remote",
)

Event = dict[str, Any]


# --------------------------------------------------------------------------- golden traces


@dataclass(frozen=True)
class Golden:
    name: str
    header: dict[str, Any]
    events: tuple[Event, ...]


def _read(name: str) -> Golden:
    lines = (GOLDEN / f"{name}.ndjson").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines[1:]]
    # the events (not the end line: a mutant is checked as a run that did not say it ended)
    return Golden(name, json.loads(lines[0]), tuple(r for r in rows if r["kind"] == "event"))


GOLDENS = tuple(_read(name) for name in SCENARIOS)


def _trace(golden: Golden, events: Sequence[Event], label: str) -> Trace:
    """A well-formed trace file of ``events``: per-node ``seq`` renumbered in file order, and
    Lamport clocks too (the file's position), so that what the mutant claims about its order
    is consistent and only the spec decides it (the clocks are checked on their own)."""
    seqs: dict[str, int] = {}
    # Schema 3: the renumbered clocks make the sends that schema 4's receives name (sent_by)
    # stale, so the mutant claims no causality; test_claims checks those claims on their own.
    lines = [json.dumps(golden.header | {"schema_version": 3})]
    for position, event in enumerate(events, start=1):
        seqs[event["node"]] = seqs.get(event["node"], 0) + 1
        row = {k: v for k, v in event.items() if k != "sent_by"}
        lines.append(json.dumps({**row, "seq": seqs[event["node"]], "lamport": position}))
    return parse_trace_lines(lines, f"{golden.name}:{label}")


def test_golden_files_are_what_the_simulator_produces_now(tmp_path: Path) -> None:
    import importlib.util  # noqa: PLC0415 - the script is not a package module

    spec = importlib.util.spec_from_file_location("regenerate", GOLDEN / "regenerate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert set(module.SEEDS) == set(SCENARIOS)
    assert module.main(["--out", str(tmp_path)]) == 0
    for name in SCENARIOS:
        committed = (GOLDEN / f"{name}.ndjson").read_text(encoding="utf-8")
        now = (tmp_path / f"{name}.ndjson").read_text(encoding="utf-8")
        assert now == committed, f"{name}: run tests/rref/golden/regenerate.py and review the diff"


def test_tlc_accepts_every_golden_trace() -> None:
    traces = [load_trace(GOLDEN / f"{name}.ndjson") for name in SCENARIOS]
    report = validate_traces(traces, RREF, SPEC_ROOT, explain=False)
    assert [v.accepted for v in report.verdicts] == [True] * len(SCENARIOS)
    assert report.tlc_runs == 1


def test_the_oracle_explains_every_golden_trace() -> None:
    for golden in GOLDENS:
        assert replay(golden.header, golden.events).rejected_at is None, golden.name


@pytest.mark.parametrize("lines", [[], ["", "  "]], ids=["empty", "blank"])
def test_an_empty_trace_is_a_format_error(lines: list[str]) -> None:
    with pytest.raises(TraceFormatError, match="empty trace"):
        parse_trace_lines(lines, "empty.ndjson")


def test_a_header_only_trace_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "header.ndjson"
    path.write_text(json.dumps(GOLDENS[0].header) + "\n", encoding="utf-8")
    with pytest.raises(TraceFormatError, match="header but no events"):
        load_trace(path)


# --------------------------------------------------------------------------- the oracle

_RECEIVES: dict[str, tuple[str, str]] = {
    # event -> (message type, the argument holding the message's fork)
    "AssignOwnerRRef": ("PYTHON_REMOTE_CALL", "f"),
    "ConfirmPendingUser": ("REMOTE_RET", "f"),
    "FinishCreatingOwnerRRef": ("REMOTE_RET", "r"),
    "RetrieveOwnerRRef": ("PYTHON_RREF_FETCH_CALL", "f"),
    "ReceiveFetchRet": ("PYTHON_RREF_FETCH_RET", "f"),
    "GetOrCreateRRef": ("PYTHON_CALL", "c"),
    "AddForkOfOwnerIfNotPresent": ("RREF_FORK_REQUEST", "c"),
    "FinishForkRequest": ("RREF_ACK", "c"),
    "DelPendingChild": ("RREF_CHILD_ACCEPT", "c"),
    "DelForkOfOwner": ("RREF_USER_DELETE", "f"),
}

MsgKey = tuple[str, str, Any, Any]


def _key(m: ev.MessageBase) -> MsgKey:
    """What the spec's ``InFlight(type, dst, rref, fork)`` matches on."""
    return (m.type, m.dst, tuple(m.rref), tuple(m.fork))


@dataclass(frozen=True)
class World:
    contexts: dict[str, RRefContext]
    net: tuple[ev.Message, ...]

    def fingerprint(self) -> str:
        return repr((sorted(self.contexts.items()), sorted(map(repr, self.net))))


@dataclass(frozen=True)
class Replay:
    #: 1-based index of the first event the core cannot perform as logged (None: all are).
    rejected_at: int | None
    #: For each explained event, the keys of the messages it put on the network.
    sent: tuple[frozenset[MsgKey], ...]
    #: For each explained receive, the key of the message it took.
    took: tuple[MsgKey | None, ...]


def _gid(value: Any) -> ev.Gid:
    return ev.Gid(str(value[0]), int(value[1]))


def _app_input(event: Event) -> ev.RRefInput | None:
    a = event["args"]
    name = event["event"]
    try:
        if name == "CreateLocalRRef":
            return ev.CreateLocalRRef()
        if name == "Remote":
            return ev.Remote(dst=a["dst"])
        if name == "PrepareChildFork":
            return ev.PrepareChildFork(dst=a["dst"], r=_gid(a["r"]), parent=_gid(a["parent"]))
        if name in {"ToHere", "DropRRef", "DelUser"}:
            cls = {"ToHere": ev.ToHere, "DropRRef": ev.DropRRef, "DelUser": ev.DelUser}[name]
            return cls(f=_gid(a["f"]))
        if name == "DropOwnerRRef":
            return ev.DropOwnerRRef(r=_gid(a["r"]))
        if name == "TimeOutRemote":
            return ev.TimeOutRemote(r=_gid(a["r"]), f=_gid(a["f"]))
    except (ValidationError, TypeError, ValueError, IndexError):
        return None
    raise AssertionError(f"no input for {name}")


def _as_logged(value: Any) -> Any:
    return from_json(value)


def _logged(result: Any, node: str, before: RRefContext, delivered: Any) -> Event:
    """The core's step from ``before`` as it is logged, with each per-node set whole: the
    delta logged from an empty context adds the whole slice."""
    state = result.state

    def line(base: RRefContext) -> Event:
        made = make_event(result.action, node, 1, 1, state, delivered=delivered, before=base)
        loaded: Event = json.loads(encode_line(made))
        return loaded

    made = line(before)
    whole = line(RRefContext(me=node))["post"]
    for field, value in made["post"].items():
        if isinstance(value, dict) and "#add" in value:
            made["post"][field] = {"#set": whole[field]["#add"]}
    return made


def _performs(
    event: Event,
    whole_post: dict[str, Any],
    result: Any,
    node: str,
    before: RRefContext,
    *,
    delivered: Any = None,
) -> bool:
    """The core's step from ``before``, logged, is exactly ``event``: its arguments, and its
    post-state as the checker rebuilds it (``whole_post``: the node's logged deltas applied
    in file order, :func:`tracecheck.traces.deltas.resolve`)."""
    made = _logged(result, node, before, delivered)
    return (
        _as_logged(made["args"]) == _as_logged(event["args"])
        and set(made["post"]) == set(event["post"])
        and all(_as_logged(v) == _as_logged(whole_post[f]) for f, v in made["post"].items())
    )


Step = tuple[World, frozenset[MsgKey], MsgKey | None]


def _successors(
    world: World, event: Event, whole_post: dict[str, Any], settings: dict[str, Any]
) -> Iterator[Step]:
    """The worlds in which the core performs ``event`` (whose post-state, deltas applied, is
    ``whole_post``), with the keys of the messages it sent and of the message it took."""
    node, name, args = event["node"], event["event"], event["args"]
    if name == "RetrySend":
        try:
            m = ev.MESSAGE_ADAPTER.validate_python(args["m"])
        except ValidationError:
            return
        if (
            settings["Duplicates"]
            and m.src == node
            and m.type in ev.RETRIED
            and m.dup == 0
            and m in world.net
            and event["post"] == {}
        ):
            net = list(world.net)
            net.remove(m)
            net += [m.model_copy(update={"dup": 1}), m.model_copy(update={"dup": 2})]
            yield World(world.contexts, tuple(net)), frozenset({_key(m)}), None
        return
    if args.get("w") != node:
        return
    ctx = world.contexts[node]
    if name in _RECEIVES:
        kind, fork_arg = _RECEIVES[name]
        want = (kind, node, tuple(args["r"]), tuple(args[fork_arg]))
        inputs: list[tuple[int | None, ev.RRefInput]] = [
            (i, m) for i, m in enumerate(world.net) if _key(m) == want
        ]
    else:
        if name == "TimeOutRemote" and not settings["Timeouts"]:
            return
        inp = _app_input(event)
        inputs = [] if inp is None else [(None, inp)]
    for index, inp in inputs:
        try:
            result = core_step(ctx, inp)
        except ProtocolError:
            continue
        delivered = inp if isinstance(inp, ev.MessageBase) else None
        if result.action.action != name or not _performs(
            event, whole_post, result, node, ctx, delivered=delivered
        ):
            continue
        net = [m for i, m in enumerate(world.net) if i != index] + list(result.sent)
        took = None if index is None else _key(world.net[index])
        sent = frozenset(_key(m) for m in result.sent)
        yield World({**world.contexts, node: result.state}, tuple(net)), sent, took


def replay(header: dict[str, Any], events: Sequence[Event]) -> Replay:
    """Replay ``events`` through the core from the initial state, as a set of worlds."""
    worlds = [World({w: RRefContext(me=w) for w in header["nodes"]}, ())]
    sent: list[frozenset[MsgKey]] = []
    took: list[MsgKey | None] = []
    wholes = resolve([(e["node"], list(e["post"].items())) for e in events])
    for number, (event, whole) in enumerate(zip(events, wholes, strict=True), start=1):
        whole_post = dict(zip(event["post"], whole, strict=True))
        nexts: dict[str, Step] = {}
        for world in worlds:
            for succ in _successors(world, event, whole_post, header["settings"]):
                nexts.setdefault(succ[0].fingerprint(), succ)
        if not nexts:
            return Replay(number, tuple(sent), tuple(took))
        worlds = [w for w, _, _ in nexts.values()]
        _, first_sent, first_took = next(iter(nexts.values()))
        sent.append(first_sent)
        took.append(first_took)
    return Replay(None, tuple(sent), tuple(took))


# --------------------------------------------------------------------------- mutants


@dataclass(frozen=True)
class Mutant:
    golden: Golden
    label: str
    events: tuple[Event, ...]
    #: 1-based index of the mutated event in the mutant (for a swap: the first of the two).
    at: int
    #: The oracle's first unexplained event (None: the mutant is legal).
    expected: int | None

    def trace(self) -> Trace:
        return _trace(self.golden, self.events, self.label)


def _mutant(golden: Golden, label: str, events: Sequence[Event], at: int) -> Mutant:
    return Mutant(golden, label, tuple(events), at, replay(golden.header, events).rejected_at)


def _golden_replay(golden: Golden) -> Replay:
    result = replay(golden.header, golden.events)
    assert result.rejected_at is None
    return result


def _drop_bound(golden: Golden, facts: Replay, i: int) -> int | None:
    """The structural bound on where dropping event ``i`` is caught (in mutant numbering): the
    first later event that takes a message of which, without the dropped event, fewer copies
    were sent than taken so far (a RetrySend sends one more copy). None when there is none, or
    when a later identical event (a duplicate delivery) can stand in for the dropped one."""
    dropped = golden.events[i - 1]
    same = (dropped["event"], dropped["node"], dropped["args"])
    if any((e["event"], e["node"], e["args"]) == same for e in golden.events[i:]):
        return None
    for j in range(i + 1, len(golden.events) + 1):
        k = facts.took[j - 1]
        if k is None or k not in facts.sent[i - 1]:
            continue
        supply = sum(1 for t in range(1, j) if t != i and k in facts.sent[t - 1])
        demand = sum(1 for t in range(1, j + 1) if t != i and facts.took[t - 1] == k)
        if demand > supply:
            return j - 1  # the taker moves up by one in the mutant
    return None


def drops() -> list[tuple[Mutant, int | None]]:
    """Every drop, with its structural bound (:func:`_drop_bound`)."""
    out = []
    for golden in GOLDENS:
        facts = _golden_replay(golden)
        for i in range(1, len(golden.events) + 1):
            events = golden.events[: i - 1] + golden.events[i:]
            bound = _drop_bound(golden, facts, i)
            out.append((_mutant(golden, f"drop-{i}", events, i), bound))
    return out


def duplicates() -> list[Mutant]:
    out = []
    for golden in GOLDENS:
        for i in range(1, len(golden.events) + 1):
            events = [*golden.events[:i], golden.events[i - 1], *golden.events[i:]]
            out.append(_mutant(golden, f"dup-{i}", events, i + 1))
    return out


def swaps() -> list[tuple[Mutant, bool]]:
    """Every adjacent swap, with whether the two events are causally related (same worker, or
    the second takes a message the first sent)."""
    out = []
    for golden in GOLDENS:
        facts = _golden_replay(golden)
        for i in range(1, len(golden.events)):
            a, b = golden.events[i - 1], golden.events[i]
            related = a["node"] == b["node"] or (
                facts.took[i] is not None and facts.took[i] in facts.sent[i - 1]
            )
            events = [*golden.events[: i - 1], b, a, *golden.events[i + 1 :]]
            out.append((_mutant(golden, f"swap-{i}", events, i), related))
    return out


_GID_SETS = {
    "owners",
    "pendingUsers",
    "confirmedUsers",
    "ownerHeld",
    "selfCalls",
    "held",
    "fetching",
    "fetchedAdded",
    "deletedAdded",
    "timedOutAdded",
}


def _element(field: str, node: str, number: int = 1) -> Any:
    """A plausible element of ``field``'s set, for changing an empty set (``number``: its
    ids' numbers start there)."""
    gid, other = [node, number], [node, number + 1]
    if field in _GID_SETS:
        return gid
    if field in {"forks", "pendingChildren", "tombstonesAdded"}:
        return [gid, other]
    if field == "pendingOwners":
        return [gid, other, node]
    assert field == "usersAdded", field
    return {"fork": other, "rref": gid, "owner": "w1", "on": node, "parent": []}


def _changed(field: str, value: Any, node: str, workers: Sequence[str]) -> Any:
    """A different, well-typed value for one field."""
    if isinstance(value, dict) and "#set" in value:
        elements = value["#set"]
        return {"#set": elements[:-1] if elements else [_element(field, node)]}
    if isinstance(value, dict) and "#add" in value:  # a delta (trace schema 3)
        add, gone = value["#add"], value["#del"]
        if add:  # the element the step added goes missing
            return {"#add": add[:-1], "#del": gone}
        if gone:  # the element the step removed stays
            return {"#add": add, "#del": gone[:-1]}
        # an element no golden trace has (ids that high) appears
        return {"#add": [_element(field, node, 90)], "#del": []}
    if isinstance(value, dict):  # RetrySend's message: another fork
        return {**value, "fork": _changed("fork", value["fork"], node, workers)}
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return workers[(workers.index(value) + 1) % len(workers)]
    assert isinstance(value, list), value  # a GloballyUniqueId
    assert len(value) == 2, value
    return [value[0], value[1] + 1]


def changes() -> list[tuple[Mutant, int]]:
    """Every single-field change, with where it must be caught: at its own event, except the
    destination of a PrepareChildFork, which no post-state field records (only the message
    carries it): changed to another worker, it is caught where the message is taken (changed
    to the sender itself, at once: there is no self link)."""
    out = []
    for golden in GOLDENS:
        workers = golden.header["nodes"]
        facts = _golden_replay(golden)
        for i, event in enumerate(golden.events, start=1):
            for part in ("args", "post"):
                for field, value in event[part].items():
                    new = copy.deepcopy(event)
                    new[part][field] = _changed(field, value, event["node"], workers)
                    EVENT_ADAPTER.validate_python(new)  # still a well-formed RRef event
                    events = [*golden.events[: i - 1], new, *golden.events[i:]]
                    where = i
                    if (event["event"], part, field) == (
                        "PrepareChildFork",
                        "args",
                        "dst",
                    ) and new["args"]["dst"] != event["node"]:
                        where = next(
                            j
                            for j in range(i + 1, len(golden.events) + 1)
                            if facts.took[j - 1] in facts.sent[i - 1]
                        )
                    out.append((_mutant(golden, f"change-{i}-{part}.{field}", events, i), where))
    return out


def _check(mutants: Sequence[Mutant]) -> list[TraceVerdict]:
    report = validate_traces([m.trace() for m in mutants], RREF, SPEC_ROOT, explain=False)
    # one batch (the golden traces share their constants): the simulation pass, then
    # breadth-first search on every trace it did not accept
    assert report.tlc_runs <= 2
    assert report.simulated < len(mutants) or report.tlc_runs == 1
    return report.verdicts


def _index(verdict: TraceVerdict) -> int | None:
    if verdict.accepted:
        return None
    assert verdict.rejection is not None
    return verdict.rejection.index


def _disagreements(mutants: Sequence[Mutant], verdicts: Sequence[TraceVerdict]) -> list[str]:
    return [
        f"{m.golden.name}:{m.label}: oracle {m.expected}, TLC {_index(v)}"
        for m, v in zip(mutants, verdicts, strict=True)
        if _index(v) != m.expected
    ]


# --------------------------------------------------------------------------- the tests


def test_every_drop_is_rejected_where_its_effect_is_first_needed() -> None:
    cases = drops()
    mutants = [m for m, _ in cases]
    verdicts = _check(mutants)
    assert _disagreements(mutants, verdicts) == []
    for (m, bound), verdict in zip(cases, verdicts, strict=True):
        index = _index(verdict)
        if index is not None:
            assert index >= m.at, m.label  # the prefix before the drop is unchanged
            assert verdict.matched == index - 1
        if bound is not None:
            assert index is not None, f"{m.label}: a later event takes its message"
            assert index <= bound, m.label
    legal = [m for m, _ in cases if m.expected is None]
    # Trailing no-ops (a late duplicate USER_DELETE or ack, a retry nobody needed) are legal.
    assert legal, "expected some legal drops"
    assert len(legal) < len(cases) // 2


def test_every_duplicate_is_rejected_at_the_copy_unless_the_network_had_one() -> None:
    mutants = duplicates()
    verdicts = _check(mutants)
    assert _disagreements(mutants, verdicts) == []
    for m, verdict in zip(mutants, verdicts, strict=True):
        index = _index(verdict)
        if index is not None:
            assert index >= m.at, m.label
    # Most copies are rejected right at the copy.
    at_copy = sum(_index(v) == m.at for m, v in zip(mutants, verdicts, strict=True))
    assert at_copy > len(mutants) * 3 // 4


def test_swaps_of_related_events_are_rejected_at_the_pair_and_independent_ones_accepted() -> None:
    cases = swaps()
    mutants = [m for m, _ in cases]
    verdicts = _check(mutants)
    assert _disagreements(mutants, verdicts) == []
    related_rejected = 0
    for (m, related), verdict in zip(cases, verdicts, strict=True):
        index = _index(verdict)
        if not related:
            assert index is None, f"{m.label}: independent events commute"
        elif index is not None:
            assert index in {m.at, m.at + 1}, m.label
            related_rejected += 1
    assert related_rejected > 0
    assert any(not related for _, related in cases)


def test_every_changed_field_is_rejected_at_its_event() -> None:
    cases = changes()
    mutants = [m for m, _ in cases]
    verdicts = _check(mutants)
    assert _disagreements(mutants, verdicts) == []
    for (m, where), verdict in zip(cases, verdicts, strict=True):
        assert _index(verdict) == where, m.label


# --------------------------------------------------------------------------- explanations


def _pick(mutants: Sequence[Mutant], scenario: str, label: str) -> Mutant:
    return next(m for m in mutants if (m.golden.name, m.label) == (scenario, label))


def test_rejections_are_explained_by_the_false_guard_or_the_post_field() -> None:
    drop_fork_request = _pick([m for m, _ in drops()], "user_to_owner_arg", "drop-5")
    dup_drop = _pick(duplicates(), "user_to_user", "dup-7")
    bad_forks = _pick([m for m, _ in changes()], "user_to_user", "change-8-post.forks")
    lost_ret = _pick([m for m, _ in drops()], "user_to_user", "drop-2")
    first_delivery = _pick([m for m, _ in drops()], "user_to_user", "drop-8")
    picked = [drop_fork_request, dup_drop, bad_forks, lost_ret, first_delivery]
    report = validate_traces([m.trace() for m in picked], RREF, SPEC_ROOT)
    # the simulation pass (it accepts none: the first trace is rejected), one breadth-first
    # batch, one explain run per rejection
    assert (report.tlc_runs, report.simulated) == (2 + len(picked), 0)
    explained: list[Explanation] = []
    for m, verdict in zip(picked, report.verdicts, strict=True):
        assert _index(verdict) == m.expected
        assert isinstance(verdict.explanation, Explanation)
        explained.append(verdict.explanation)
    child, dropped, forks, ret, copy = explained

    # Without the GetOrCreateRRef that sent it, the retry of RREF_CHILD_ACCEPT has no message.
    assert (child.index, child.action) == (6, "RetrySend")
    (state,) = child.frontier
    assert not state.enabled
    assert (state.failed_guard_at, state.failed_guard) == ("2", "m \\in net")
    assert "not enabled: conjunct 2 is false: m \\in net" in child.summary

    # The application drops a UserRRef it no longer holds.
    assert (dropped.index, dropped.action) == (8, "DropRRef")
    (state,) = dropped.frontier
    assert (state.failed_guard_at, state.failed_guard) == ("2", "f \\in held")

    # The owner's forks_ after the fork request lacks the new fork: a post-field diff.
    assert (forks.index, forks.action) == (8, "AddForkOfOwnerIfNotPresent")
    (state,) = forks.frontier
    assert state.enabled
    (post,) = [p for p in state.post if not p.possible]
    assert post.field == "forks"
    assert post.logged == '{<<<<"w0", 1>>, <<"w0", 2>>>>}'
    assert post.allowed == ['{<<<<"w0", 1>>, <<"w0", 2>>>>, <<<<"w0", 1>>, <<"w0", 3>>>>}']
    # the summary names the fork the owner did not log, not the two whole sets
    assert 'post.forks: in the spec\'s but not logged: <<<<"w0", 1>>, <<"w0", 3>>>>' in (
        forks.summary
    )

    # Without the AssignOwnerRRef that sent it, there is no REMOTE_RET for the caller to take:
    # the report quotes the handler's message guard, the domain of its \E m \in InFlight(...).
    assert (ret.index, ret.action) == (2, "ConfirmPendingUser")
    assert ret.frontier
    assert all(not s.enabled for s in ret.frontier)
    assert {s.failed_guard_at for s in ret.frontier} == {"2.0"}
    assert 'conjunct 2.0 is false: \\E m \\in InFlight("REMOTE_RET", w, r, f)' in ret.summary

    # Drop the first delivery of the RREF_FORK_REQUEST: its retried copy stands in for it in the
    # spec, but the copy's event logs forks unchanged (a delta from what the owner logged last,
    # schema 3), so the forks rebuilt from the trace lack the new fork: caught at the copy.
    assert (copy.index, copy.action) == (8, "AddForkOfOwnerIfNotPresent")
    (state,) = copy.frontier
    assert state.enabled
    assert [p.field for p in state.post if not p.possible] == ["forks"]
