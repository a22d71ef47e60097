"""Time across hosts: a reader trusts a stamp's value only on its own clock domain.

Deterministic: hand-moved clocks and the holders' sync steps. The "trusted" variants give the
skewed clock the other's domain, which is what comparing wall clocks across hosts amounts to,
and show the failures the domains prevent (a live node dropped, a last call cut short)."""

from __future__ import annotations

import pytest

from protoref.rendezvous.adapters.store import InMemoryStore
from protoref.rendezvous.core import actions
from protoref.rendezvous.core.codec import decode_stored
from protoref.rendezvous.core.ops import Action, Op, decide
from protoref.rendezvous.core.stamps import LocalTimes
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings
from protoref.rendezvous.runtime.clock import FakeClock, OffsetClock
from protoref.rendezvous.runtime.holder import StateHolder

DAY = 86_400.0
A, B = NodeDesc("10.0.0.1", 1, 0), NodeDesc("10.0.0.2", 1, 0)
#: expiry 3 s; a last call of 10 s
CFG = RendezvousSettings(
    run_id="r",
    min_nodes=1,
    max_nodes=3,
    keep_alive_interval=1.0,
    keep_alive_max_attempt=3,
    last_call_timeout=10.0,
    cache_duration=0,
)


class Host:
    """One node's holder on its own clock."""

    def __init__(self, store: InMemoryStore, node: NodeDesc, clock: FakeClock | OffsetClock):
        self.node, self.clock = node, clock
        self.holder = StateHolder(store, CFG, clock.domain)

    def read(self) -> None:
        self.holder.sync(self.clock.now())

    def apply(self, action: Action) -> None:
        """Decide on the copy (must be ``action``), apply it and write it."""
        now = self.clock.now()
        got = decide(Op.JOIN, self.holder.state, self.node, CFG, now=now, deadline=now + 600)
        assert got is action
        s = self.holder.state
        if action is Action.ADD_TO_PARTICIPANTS:
            s = actions.add_to_participants(s, self.node, CFG, now)
        else:
            s = actions.keep_alive(s, self.node, now)
        self.holder.set_state(s)
        self.holder.sync(now)


def _pair(trusted: bool, offset: float = DAY) -> tuple[FakeClock, Host, Host]:
    """A on a clock; B on the same clock read ``offset`` ahead (another host)."""
    store, base = InMemoryStore(), FakeClock(1000.0)
    skewed = OffsetClock(base, offset, domain=base.domain if trusted else None)
    return base, Host(store, A, base), Host(store, B, skewed)


def test_a_live_node_is_kept_by_a_host_a_day_ahead() -> None:
    _, a, b = _pair(trusted=False)
    a.read()
    a.apply(Action.ADD_TO_PARTICIPANTS)
    b.read()
    assert A in b.holder.state.participants
    assert A in b.holder.state.last_heartbeats


def test_trusting_the_skewed_clock_drops_the_live_node() -> None:
    """Teeth: the failure of the notes (a host a day ahead sanitizes the other away)."""
    _, a, b = _pair(trusted=True)
    a.read()
    a.apply(Action.ADD_TO_PARTICIPANTS)
    b.read()
    assert A not in b.holder.state.participants


def test_a_foreign_heartbeat_expires_after_the_expiry_on_the_readers_clock() -> None:
    base, a, b = _pair(trusted=False)
    b.read()
    b.apply(Action.ADD_TO_PARTICIPANTS)  # B stamps with its clock, a day ahead
    a.read()
    assert B in a.holder.state.participants
    base.advance(2.9)
    a.read()
    assert B in a.holder.state.participants  # 2.9 s unchanged on A's clock: not expired
    base.advance(0.2)
    a.read()
    assert B not in a.holder.state.participants  # 3.1 s > expiry 3 s


def test_a_foreign_heartbeat_that_changes_never_expires() -> None:
    base, a, b = _pair(trusted=False)
    b.read()
    b.apply(Action.ADD_TO_PARTICIPANTS)
    for _ in range(10):
        a.read()
        assert B in a.holder.state.participants
        base.advance(1.0)
        b.read()
        b.apply(Action.KEEP_ALIVE)  # the stamp changes every second: B is alive
    a.read()
    assert B in a.holder.state.participants


def test_a_foreign_last_call_lasts_its_full_length_on_the_readers_clock() -> None:
    base, a, b = _pair(trusted=False)
    b.read()
    b.apply(Action.ADD_TO_PARTICIPANTS)  # min 1: B arms a 10 s last call on its clock
    a.read()
    deadline = a.holder.state.deadline
    assert deadline == base.now() + 10.0  # first seen now, 10 s left as written
    base.advance(2.0)
    b.read()
    b.apply(Action.KEEP_ALIVE)  # another write carrying the same last call
    a.read()
    assert a.holder.state.deadline == deadline  # the same arming keeps A's deadline


def test_trusting_the_skewed_clock_cuts_the_last_call_short() -> None:
    """Teeth: B is 2 s ahead (less than the expiry, so A stays), A arms a 10 s last call; a B
    that trusts the stamp sees it end 2 s early, one that does not sees all 10 s."""
    for trusted, left in ((True, 8.0), (False, 10.0)):
        _, a, b = _pair(trusted=trusted, offset=2.0)
        a.read()
        a.apply(Action.ADD_TO_PARTICIPANTS)
        b.read()
        assert b.holder.state.deadline is not None
        assert b.holder.state.deadline - b.clock.now() == left


def test_foreign_stamps_are_written_back_unchanged() -> None:
    base, a, b = _pair(trusted=False)
    b.read()
    b.apply(Action.ADD_TO_PARTICIPANTS)
    raw_b = a.holder.store.get(a.holder.key)
    assert raw_b is not None
    b_beat = decode_stored(raw_b.value, "k", "r").state.last_heartbeats[B]
    base.advance(1.0)
    a.read()
    a.apply(Action.ADD_TO_PARTICIPANTS)  # A's write carries B's stamp as B wrote it
    raw = a.holder.store.get(a.holder.key)
    assert raw is not None
    stored = decode_stored(raw.value, "k", "r")
    assert stored.state.last_heartbeats[B] == b_beat
    assert stored.beat_clocks[B] == b.clock.domain
    assert stored.beat_clocks[A] == base.domain
    assert stored.deadline_clock == b.clock.domain  # B armed it; A only carries it


@pytest.mark.parametrize("domain", ["x", "y"])
def test_memory_is_bounded_by_the_state(domain: str) -> None:
    times = LocalTimes(domain)
    store = InMemoryStore()
    writer = StateHolder(store, CFG, "w")
    for i in range(50):  # 50 nodes come and go, one at a time
        node = NodeDesc("h", i, 0)
        writer.sync(float(i))
        writer.set_state(writer.state.replace(last_heartbeats={node: float(i)}, wait_list={node}))
        writer.sync(float(i))
        got = store.get(writer.key)
        assert got is not None
        times.to_local(decode_stored(got.value, writer.key, "r"), float(i))
        assert len(times._beats) == 1
