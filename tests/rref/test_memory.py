"""An owner's memory over many RRefs (issue 28): 10,000 RRefs created and deleted leave nothing
on the owner. Before, the Reference kept a tombstone per deleted fork for ever (one entry per
RRef, and every delete copied the whole set); under RRef.tla's DeleteLast the delete is the last
message of its fork, so the owner keeps no tombstone (``TombstoneBoundInv``). Entries are
counted, not bytes or times.
"""

from __future__ import annotations

from protoref.rref.core import events as ev
from protoref.rref.core.machine import step
from protoref.rref.core.state import RRefContext

N = 10_000


def _run(n: int, *, time_out_every: int = 0) -> tuple[RRefContext, RRefContext]:
    """w0 creates n RRefs on w1 one after the other and drops each; every ``time_out_every``-th
    rpc.remote times out before the owner has run it (RRef.tla TimeOutRemote), and the owner
    processes the late call after the creator dropped the RRef (#41217's order)."""
    w0, w1 = RRefContext(me="w0"), RRefContext(me="w1")
    for i in range(n):
        s = step(w0, ev.Remote.of("w1"))
        w0, (call,) = s.state, s.sent
        f = call.fork
        if time_out_every and i % time_out_every == 0:
            w0 = step(w0, ev.TimeOutRemote(r=call.rref, f=f)).state
            w0 = step(w0, ev.DropRRef(f=f)).state
            # PinTimedOut: nothing may delete it yet (it is still pending)
            assert f not in w0.destructible()
        else:
            w0 = step(w0, ev.DropRRef(f=f)).state
        s = step(w1, call)  # AssignOwnerRRef (late, for a timed-out one)
        w1, (ret,) = s.state, s.sent
        w0 = step(w0, ret).state  # ConfirmPendingUser
        assert w0.destructible() == [f]
        s = step(w0, ev.DelUser(f=f))
        w0, (delete,) = s.state, s.sent
        w1 = step(w1, delete).state  # DelForkOfOwner
        w1 = step(w1, delete.model_copy(update={"dup": 2})).state  # a retry's copy: nothing
    return w0, w1


def test_ten_thousand_rrefs_leave_no_tombstone_on_the_owner() -> None:
    _, owner = _run(N, time_out_every=10)
    assert len(owner.tombstones) == 0  # before issue 28: 10,000 entries
    assert not owner.forks
    assert not owner.owners
    assert not owner.pending_owners


def test_the_owner_keeps_the_same_nothing_after_1000_or_10000() -> None:
    small, large = _run(1_000)[1], _run(N)[1]
    assert len(small.tombstones) == len(large.tombstones) == 0
    assert small.forks == large.forks == frozenset()
