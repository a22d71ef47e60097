"""A state that breaks the spec's invariants, or the codec's bounds, is a typed
``RendezvousStateError`` before any decision: never a loop, never a traceback of another type,
and nothing is written over it."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import pytest

from protoref.rendezvous.adapters.store import FileStore, InMemoryStore
from protoref.rendezvous.core.codec import MAX_LISTED, MAX_STATE_BYTES, decode_stored, encode_state
from protoref.rendezvous.core.errors import RendezvousStateError
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings, RendezvousState
from protoref.rendezvous.core.statecheck import check_state
from protoref.rendezvous.runtime.handler import DynamicRendezvousHandler
from protoref.rendezvous.runtime.holder import StateHolder, state_key

CFG = RendezvousSettings(run_id="r", min_nodes=2, max_nodes=2, cache_duration=0)
A, B, C = NodeDesc("10.0.0.1", 5, 0), NodeDesc("10.0.0.2", 5, 0), NodeDesc("10.0.0.3", 5, 0)


def _check(s: RendezvousState) -> None:
    check_state(s, CFG, "k")


def test_states_the_protocol_reaches_pass() -> None:
    _check(RendezvousState())
    _check(RendezvousState().replace(participants={A: 0}, wait_list={C}))
    open3 = CFG.model_copy(update={"max_nodes": 3})
    check_state(RendezvousState(deadline=5.0).replace(participants={A: 0, B: 0}), open3, "k")
    _check(RendezvousState(complete=True).replace(participants={A: 0, B: 1}, redundancy_list={C}))
    _check(RendezvousState(round=7))


@pytest.mark.parametrize(
    ("state", "invariant"),
    [
        (
            RendezvousState(complete=True).replace(participants={A: 0, B: 1, C: 2}),
            "ParticipantsAtMostMaxInv",
        ),
        (RendezvousState().replace(participants={A: 0}, wait_list={A}), "ListsDisjointInv"),
        (RendezvousState().replace(wait_list={A}, redundancy_list={A}), "ListsDisjointInv"),
        (RendezvousState(complete=True).replace(participants={A: 0, B: 0}), "CompletionRanksProp"),
        (RendezvousState(complete=True).replace(participants={A: 1}), "CompletionRanksProp"),
        (RendezvousState(complete=True).replace(participants={A: 1, B: 0}), "CompletionRanksProp"),
        (RendezvousState(complete=True).replace(participants={A: 0, B: 2}), "CompletionRanksProp"),
        (RendezvousState().replace(participants={A: 1}), "CompletionRanksProp"),
        (
            RendezvousState(complete=True, deadline=1.0).replace(participants={A: 0, B: 1}),
            "DeadlineArmedInv",
        ),
        (RendezvousState().replace(participants={A: 0, B: 0}), "DeadlineArmedInv"),
        (RendezvousState(deadline=1.0).replace(participants={A: 0}), "DeadlineArmedInv"),
        # issue 28 section 5: a complete round nobody is in; an open round already at max
        (RendezvousState(complete=True), "CompletionCountProp"),
        (RendezvousState(round=3, complete=True), "CompletionCountProp"),
        (
            RendezvousState(deadline=1.0).replace(participants={A: 0, B: 0}),
            "ParticipantsAtMostMaxInv",
        ),
    ],
)
def test_each_broken_invariant_is_named(state: RendezvousState, invariant: str) -> None:
    with pytest.raises(RendezvousStateError, match=invariant):
        _check(state)


def _doc(**changes: object) -> bytes:
    doc = json.loads(encode_state(RendezvousState(), "r"))
    doc.update(changes)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (_doc(round=-1), "round: Input should be greater than or equal to 0"),
        (_doc(round=2**64), "round"),
        (_doc(participants=[[["h", -5, 0], 0]]), "participants.0.0.1"),
        (_doc(participants=[[["h", 5, 0], -1]]), "participants.0.1"),
        (_doc(participants=[[["", 5, 0], 0]]), "participants.0.0.0"),
        (_doc(wait_list=[["h" * 256, 5, 0]]), "wait_list.0.0"),
        (_doc(last_heartbeats=[[["h", 5, 0], "c", 1e400]]), "last_heartbeats.0.2"),
        (_doc(deadline={"clock": "c", "at": 1.0, "left": -1e400}), "deadline.left"),
        (_doc(wait_list=[["h", 5, 0], ["h", 5, 0]]), "wait_list: a node is listed twice"),
        (_doc(wait_list=[["h", i, 0] for i in range(MAX_LISTED + 1)]), "wait_list"),
        (_doc(schema="protoref.rendezvous/1"), "schema 1, written by an older protoref"),
        (b" " * (MAX_STATE_BYTES + 1), f"more than {MAX_STATE_BYTES}"),
    ],
)
def test_codec_bounds_are_typed_errors(raw: bytes, needle: str) -> None:
    with pytest.raises(RendezvousStateError, match=needle):
        decode_stored(raw, "k", "r")


def test_a_5000_digit_token_line_is_a_state_error(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.put_raw("k", b"9" * 5000 + b"\n" + encode_state(RendezvousState(), "r"))
    with pytest.raises(RendezvousStateError, match="a token of 5000 digits"):
        store.get("k")


def test_an_oversized_file_is_refused_unread(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.put_raw("k", b"1\n" + b" " * (2 * MAX_STATE_BYTES))
    with pytest.raises(RendezvousStateError, match="more than"):
        store.get("k")


def _fifty_participants() -> bytes:
    nodes = {NodeDesc("10.9.9.9", 1000 + i, 0): i for i in range(50)}
    return encode_state(RendezvousState(complete=True).replace(participants=nodes), "r")


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_fifty_participants_for_max_two_is_an_error_not_a_loop(kind: str, tmp_path: Path) -> None:
    """Before the check: rule 5 adds to the redundancy list, rule 2 removes (the round is not
    exactly full), and so on, a write per turn, the op deadline restarted each time."""
    store = InMemoryStore() if kind == "memory" else FileStore(tmp_path)
    key = state_key("r")
    store.put_raw(key, b"1\n" + _fifty_participants() if kind == "file" else _fifty_participants())
    before = store.get(key)
    cfg = RendezvousSettings(run_id="r", min_nodes=1, max_nodes=2, join_timeout=30.0)
    h = DynamicRendezvousHandler(store, cfg, node=A)
    try:
        outcome: list[BaseException] = []
        t = threading.Thread(target=lambda: outcome.append(_raised(h.next_rendezvous)))
        t.start()
        t.join(20.0)
        assert not t.is_alive(), "next_rendezvous looped on an invalid state"
    finally:
        h._heartbeats.close()
    (err,) = outcome
    assert isinstance(err, RendezvousStateError)
    assert "50 participants for max_nodes = 2" in str(err)
    assert "ParticipantsAtMostMaxInv" in str(err)
    assert store.get(key) == before  # nothing written over it
    if isinstance(store, InMemoryStore):
        assert store.cas_won == store.cas_lost == 0


def _raised(call: object) -> BaseException:
    assert callable(call)
    try:
        call()
    except BaseException as err:  # the test inspects it
        return err
    raise AssertionError("next_rendezvous returned on an invalid state")


def test_a_lost_cas_loading_an_invalid_state_is_an_error() -> None:
    store = InMemoryStore()
    holder = StateHolder(store, CFG)
    holder.sync(0.0)
    store.put_raw(holder.key, _fifty_participants())
    holder.set_state(RendezvousState().replace(participants={A: 0}, last_heartbeats={A: 0.0}))
    with pytest.raises(RendezvousStateError, match="ParticipantsAtMostMaxInv"):
        holder.sync(0.0)
    got = store.get(holder.key)
    assert got is not None
    assert got.value == _fifty_participants()


def test_times_are_finite_in_every_stamp() -> None:
    ok = encode_state(
        RendezvousState(deadline=2.5).replace(participants={A: 0, B: 0}, last_heartbeats={A: 1.0}),
        "r",
    )
    stored = decode_stored(ok, "k", "r")
    assert stored.deadline_left == 2.5
    assert all(math.isfinite(t) for t in stored.state.last_heartbeats.values())


# --- issue 28 section 5: states the check let through -----------------------------------------

DAY = 86_400.0


def _written_by(store: InMemoryStore, s: RendezvousState, domain: str, now: float) -> None:
    """``s`` written by a holder of clock ``domain`` at ``now`` (its stamps are that domain's)."""
    writer = StateHolder(store, CFG, domain)
    writer.sync(now)
    writer.set_state(s)
    writer.sync(now)


@pytest.mark.parametrize(
    ("state", "needle"),
    [
        (RendezvousState(complete=True), "complete round 0 has no participants"),
        (
            RendezvousState(deadline=1005.0).replace(
                participants={A: 0, B: 0}, last_heartbeats={A: 1000.0, B: 1000.0}
            ),
            "open round 0 already has max_nodes = 2 participants",
        ),
    ],
    ids=["complete-empty", "open-at-max"],
)
def test_a_joiner_refuses_the_state_at_once_and_writes_nothing(
    state: RendezvousState, needle: str
) -> None:
    """Before: on a complete round with no participants every joiner waited for its join
    timeout (no node ends such a round); on an open round at max_nodes the joiner wrote
    max_nodes + 1 participants."""
    store = InMemoryStore()
    store.put_raw(state_key("r"), encode_state(state, "r"))
    before = store.get(state_key("r"))
    h = DynamicRendezvousHandler(store, CFG.model_copy(update={"join_timeout": 30.0}), node=C)
    try:
        err = _raised(h.next_rendezvous)
    finally:
        h._heartbeats.close()
    assert isinstance(err, RendezvousStateError)
    assert needle in str(err)
    assert store.get(state_key("r")) == before
    assert store.cas_won == store.cas_lost == 0


def test_a_phantom_heartbeat_a_day_ahead_on_the_readers_own_clock_is_refused() -> None:
    """TypeOK: ages are never negative. A stamp of the reader's own clock domain lying in the
    future was not written by a node of that clock; before, it kept a phantom participant
    alive for a day, completing rounds with it and shutting real nodes out."""
    store = InMemoryStore()
    phantom = RendezvousState().replace(participants={A: 0}, last_heartbeats={A: 1000.0 + DAY})
    _written_by(store, phantom, "host-1", 1000.0)
    reader = StateHolder(store, CFG, "host-1")
    with pytest.raises(RendezvousStateError, match=r"heartbeat of .* in the future.*TypeOK"):
        reader.sync(1000.0)
    # within one expiry ahead (a write of another process while the read ran) is accepted
    near = RendezvousState().replace(participants={A: 0}, last_heartbeats={A: 1005.0})
    store_near = InMemoryStore()
    _written_by(store_near, near, "host-1", 1000.0)
    StateHolder(store_near, CFG, "host-1").sync(1000.0)
    reader.set_state(RendezvousState().replace(participants={B: 0}, last_heartbeats={B: 1000.0}))
    before = store.get(state_key("r"))
    with pytest.raises(RendezvousStateError, match="TypeOK"):
        reader.sync(1000.0)  # a lost CAS loads it: refused too, nothing written
    assert store.get(state_key("r")) == before


def test_a_last_call_beyond_its_timeout_is_refused() -> None:
    store = InMemoryStore()
    cfg3 = CFG.model_copy(update={"max_nodes": 3, "last_call_timeout": 30.0})
    s = RendezvousState(deadline=1000.0 + DAY).replace(
        participants={A: 0, B: 0}, last_heartbeats={A: 1000.0, B: 1000.0}
    )
    writer = StateHolder(store, cfg3, "host-1")
    writer.sync(1000.0)
    writer.set_state(s)
    writer.sync(1000.0)
    with pytest.raises(RendezvousStateError, match=r"last_call_timeout = 30 s \(plus 15 s"):
        StateHolder(store, cfg3, "host-1").sync(1000.0)


def test_a_foreign_phantom_seen_first_shuts_no_real_node_out() -> None:
    """A stamp of another domain cannot be refused (a real node of another host writes one),
    but first sight proves nothing: the joiner does not complete the round with the phantom
    (it cannot bound its age), the phantom expires by the time since its first sight, and the
    real node completes its own round. Before: it joined at once, completing max_nodes = 2
    with the phantom (world 2), and a second real node was shut out as redundant."""
    from protoref.rendezvous.core.ops import Op  # noqa: PLC0415 - only here
    from protoref.rendezvous.runtime.executor import NodeRunner, Pc, Result  # noqa: PLC0415

    cfg = RendezvousSettings(
        run_id="r", min_nodes=1, max_nodes=2, cache_duration=0, last_call_timeout=1.0
    )
    store = InMemoryStore()
    writer = StateHolder(store, cfg, "attacker")
    writer.sync(5.0)
    writer.set_state(
        RendezvousState(deadline=5.5).replace(participants={A: 0}, last_heartbeats={A: 5.0})
    )
    writer.sync(5.0)
    r = NodeRunner(B, StateHolder(store, cfg, "host-1"))
    now = 1000.0
    r.start(Op.EXIT, now)
    for _ in range(400):
        if r.pc is Pc.IDLE:
            break
        _ = r.sync_step(now) if r.pc in (Pc.SYNC, Pc.SLEEP) else r.decide_step(now)
        now += 0.1
    assert r.result is Result.OK
    assert r.view is not None
    assert set(r.view.ranks) == {B}
