"""Bracketed ageing across clock domains (spec/rendezvous/MCDynamicRendezvousClocksDomains.tla).

The case of issue 28, section 6: node A, on another host, joins alone and dies; an expiry
later B and C (one host) join. First-sight ageing dated A's stamp from their first read, so
they counted the dead A alive and completed the round at max_nodes with it: world 3 instead
of 2. Under the Reference they may not count A until they bound its age (the stamp changes
under their eyes) or it expires by the time since they first saw it: the round completes with
B and C. Deterministic: hand-moved clocks, the executor's steps driven in a fixed order."""

from __future__ import annotations

import pytest

from protoref.rendezvous.adapters.store import InMemoryStore
from protoref.rendezvous.core import actions, stamps
from protoref.rendezvous.core.codec import decode_stored
from protoref.rendezvous.core.ops import Action, Op
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings
from protoref.rendezvous.runtime.clock import FakeClock, OffsetClock
from protoref.rendezvous.runtime.executor import NodeRunner, Pc, Result
from protoref.rendezvous.runtime.holder import StateHolder

A, B, C = (NodeDesc(f"10.0.0.{i}", 1, 0) for i in (1, 2, 3))
#: expiry 3 s; a last call of 2 s; max 3, so a third participant completes the round at once
CFG = RendezvousSettings(
    run_id="r",
    min_nodes=2,
    max_nodes=3,
    keep_alive_interval=1.0,
    keep_alive_max_attempt=3,
    last_call_timeout=2.0,
    cache_duration=0,
)


def _join_until_done(runners: list[NodeRunner], clock: FakeClock, limit: int = 200) -> None:
    """Run each runner's join to its end, one step each in turn, 0.25 s passing per turn."""
    for r in runners:
        r.start(Op.EXIT, clock.now())
    for _ in range(limit):
        busy = [r for r in runners if r.pc is not Pc.IDLE]
        if not busy:
            return
        for r in busy:
            now = clock.now()
            if r.pc in (Pc.SYNC, Pc.SLEEP):
                r.sync_step(now)
            else:
                r.decide_step(now)
        clock.advance(0.25)
    raise AssertionError("the joins did not end")


def _dead_foreign_node_then_two_joiners() -> tuple[NodeRunner, NodeRunner]:
    store, base = InMemoryStore(), FakeClock(1000.0)
    foreign = OffsetClock(base, 12_345.0)  # another host: its own domain, any offset
    a = NodeRunner(A, StateHolder(store, CFG, foreign.domain))
    a.start(Op.EXIT, foreign.now())
    while a.holder.state.participants.get(A) is None or a.holder.dirty:
        now = foreign.now()
        _ = a.sync_step(now) if a.pc in (Pc.SYNC, Pc.SLEEP) else a.decide_step(now)
    a.crash(foreign.now())  # A is a participant in the store, and dead
    base.advance(10.0)  # well past the 3 s expiry before anyone else looks
    b = NodeRunner(B, StateHolder(store, CFG, base.domain))
    c = NodeRunner(C, StateHolder(store, CFG, base.domain))
    _join_until_done([b, c], base)
    return b, c


def test_a_foreign_node_dead_before_the_others_joined_is_not_counted() -> None:
    b, c = _dead_foreign_node_then_two_joiners()
    for r in (b, c):
        assert r.result is Result.OK
        assert r.view is not None
        assert set(r.view.ranks) == {B, C}  # world 2, not 3 with the dead A
    assert b.view == c.view


def test_first_sight_ageing_counts_the_dead_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """Teeth: with every first-seen stamp counted (the old scheme), the round completes with
    the dead node, world 3 (MCDynamicRendezvousClocksDomains_first_sight)."""
    monkeypatch.setattr(stamps.LocalTimes, "unconfirmed", lambda self, now, expiry: frozenset())
    b, _ = _dead_foreign_node_then_two_joiners()
    assert b.view is not None
    assert set(b.view.ranks) == {A, B, C}


def test_a_joiner_waits_for_a_foreign_stamp_it_cannot_bound() -> None:
    """Rule 7 of the join op: joining would complete at max_nodes with an uncounted node."""
    store, base = InMemoryStore(), FakeClock(1000.0)
    foreign = OffsetClock(base, -500.0)
    holders = {n: StateHolder(store, CFG, foreign.domain) for n in (A, B)}
    for n in (A, B):
        r = NodeRunner(n, holders[n])
        r.start(Op.EXIT, foreign.now())
        while n not in r.holder.state.participants or r.holder.dirty:
            now = foreign.now()
            _ = r.sync_step(now) if r.pc in (Pc.SYNC, Pc.SLEEP) else r.decide_step(now)
    c = NodeRunner(C, StateHolder(store, CFG, base.domain))
    c.start(Op.EXIT, base.now())
    c.sync_step(base.now())  # exit op: not a participant
    assert c.decide_step(base.now()) is Action.FINISH
    c.sync_step(base.now())  # join op: A and B first seen, no read before: no bound
    assert c.holder.unconfirmed(base.now()) == {A, B}
    assert c.decide_step(base.now()) is Action.SYNC


def test_a_live_foreign_node_is_counted_once_its_stamp_changes() -> None:
    store, base = InMemoryStore(), FakeClock(1000.0)
    foreign = OffsetClock(base, 777.0)
    a = StateHolder(store, CFG, foreign.domain)
    reader = stamps.LocalTimes(base.domain)
    a.sync(foreign.now())  # an empty store
    a.set_state(actions.add_to_participants(a.state, A, CFG, foreign.now()))
    a.sync(foreign.now())
    got = store.get(a.key)
    assert got is not None
    reader.to_local(decode_stored(got.value, a.key, CFG.run_id), base.now())
    assert reader.unconfirmed(base.now(), CFG.heartbeat_expiry) == {A}  # first sight: no bound
    base.advance(1.0)
    a.set_state(actions.keep_alive(a.state, A, foreign.now()))
    a.sync(foreign.now())
    got = store.get(a.key)
    assert got is not None
    reader.to_local(decode_stored(got.value, a.key, CFG.run_id), base.now())
    # changed since our read 1 s ago: at most 1 s old, counted until 3 s after that read
    assert reader.unconfirmed(base.now(), CFG.heartbeat_expiry) == frozenset()
    assert reader.unconfirmed(base.now() + 2.5, CFG.heartbeat_expiry) == {A}
