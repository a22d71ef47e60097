"""The world ``next_rendezvous`` returns, against torch 2.13's two defects (handler, threads, a
real store; no wall-clock assertions).

- **Rank not below the world size** (notes, Findings of 2026-11-26;
  ``MCDynamicRendezvous_pytorch_leave_complete_*``): node B completes round 0 with its own
  write and returns while node A still waits in its join op; B's agent restarts at once, so B
  leaves the complete round; A then returns. With torch's epilogue the round stays complete
  with A alone and A returns rank 1 of a world of 1. With the Reference epilogue (ours) B's
  leave ends the round, A is counted as waiting, and both return round 1, world 2.
- **pytorch#111646** (``MCDynamicRendezvous_pytorch111646`` / ``_regroup``): a participant of a
  complete round dies. With torch's epilogue the survivor's sanitize shrinks the round, which
  stays complete, and ``num_nodes_waiting()`` stays 0, so torch's elastic agent never
  re-rendezvouses. With ours the survivor counts as waiting and its next round has no dead node.

Each test runs twice: with our epilogue, and with torch's planted in its place
(``faults.Fault.TORCH_EPILOGUE``), which must show the defect: the test can fail.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from protoref.rendezvous.adapters.store import FileStore, InMemoryStore, RendezvousStore, Versioned
from protoref.rendezvous.core.codec import decode_state
from protoref.rendezvous.core.errors import RendezvousClosedError, RendezvousError
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings, RendezvousState
from protoref.rendezvous.runtime.handler import DynamicRendezvousHandler, RendezvousInfo
from protoref.rendezvous.runtime.holder import state_key
from protoref.rendezvous.sim.faults import Fault, inject
from support.rendezvous import JOIN_LIMIT

B, A = NodeDesc("10.0.0.8", 7, 0), NodeDesc("10.0.0.9", 7, 1)  # B sorts first: rank 0


@pytest.fixture(params=["reference", "torch"])
def epilogue(request: pytest.FixtureRequest) -> Iterator[str]:
    """Our epilogue, or torch 2.13's planted in its place."""
    if request.param == "torch":
        with inject(Fault.TORCH_EPILOGUE):
            yield request.param
    else:
        yield request.param


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> RendezvousStore:
    return InMemoryStore() if request.param == "memory" else FileStore(tmp_path)


class HeldWaits:
    """A's view of the store: its first wait for a change is held until :meth:`release`, so
    that B can complete the round, return and leave it before A looks again (the schedule of
    torch's run, where A slept in its 1 s SYNC delay)."""

    def __init__(self, inner: RendezvousStore) -> None:
        self.inner = inner
        self.waiting = threading.Event()
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    def get(self, key: str) -> Versioned | None:
        return self.inner.get(key)

    def compare_set(self, key: str, token: int | None, value: bytes) -> tuple[bool, Versioned]:
        return self.inner.compare_set(key, token, value)

    def wait_for_change(self, key: str, token: int | None, timeout: float) -> bool:
        self.waiting.set()
        assert self._released.wait(JOIN_LIMIT), "A was never released"
        return self.inner.wait_for_change(key, token, timeout)

    def describe(self) -> str:
        return f"held {self.inner.describe()}"


def _stored(store: RendezvousStore, run_id: str) -> RendezvousState:
    got = store.get(state_key(run_id))
    assert got is not None
    return decode_state(got.value, state_key(run_id), run_id)


def _left_round_0(s: RendezvousState) -> bool:
    """B's exit op wrote: round 0 lost B (torch), or ended (ours; B may be in round 1 already)."""
    return s.round > 0 or B not in s.participants


def _until(pred: Callable[[], bool]) -> bool:
    """Poll ``pred`` every 10 ms for at most JOIN_LIMIT seconds (never a timing assertion)."""
    tick = threading.Event()
    for _ in range(int(JOIN_LIMIT / 0.01)):
        if pred():
            return True
        tick.wait(0.01)
    return pred()


def _in_thread(call: Callable[[], RendezvousInfo]) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []

    def run() -> None:
        try:
            out.append(call())
        except RendezvousError as err:  # torch's epilogue leaves B waiting until the close
            out.append(err)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def test_a_late_returner_gets_a_consistent_world(epilogue: str, store: RendezvousStore) -> None:
    cfg = RendezvousSettings(run_id="w", min_nodes=2, max_nodes=2)
    held = HeldWaits(store)
    a = DynamicRendezvousHandler(held, cfg, node=A)
    b = DynamicRendezvousHandler(store, cfg, node=B)
    try:
        a_thread, a_out = _in_thread(a.next_rendezvous)
        assert held.waiting.wait(JOIN_LIMIT)  # A joined round 0 and waits for a second node
        first_b = b.next_rendezvous()  # B fills round 0 (max 2), completes it and returns
        assert (first_b.round, first_b.rank, first_b.world_size) == (0, 0, 2)
        # B's agent restarts at once: its exit op leaves round 0 before A looks again.
        b_thread, b_out = _in_thread(b.next_rendezvous)
        assert _until(lambda: _left_round_0(_stored(store, "w")))
        held.release()
        a_thread.join(JOIN_LIMIT)
        if epilogue == "torch":  # B waits in the wait list of the round A returned from
            a.set_closed()
        b_thread.join(JOIN_LIMIT)
        assert not a_thread.is_alive()
        assert not b_thread.is_alive()
    finally:
        held.release()
        for h in (a, b):
            h._heartbeats.close()
    (got_a,) = a_out
    assert isinstance(got_a, RendezvousInfo)
    if epilogue == "torch":  # the defect, reproduced against our handler
        assert (got_a.round, got_a.rank, got_a.world_size) == (0, 1, 1)
        assert isinstance(b_out[0], RendezvousClosedError)
        return
    (got_b,) = b_out
    assert isinstance(got_b, RendezvousInfo)
    assert got_a.rank < got_a.world_size
    assert (got_a.round, got_a.world_size) == (got_b.round, got_b.world_size) == (1, 2)
    assert {got_a.rank, got_b.rank} == {0, 1}
    assert got_a.store_prefix == got_b.store_prefix == "torch.rendezvous.w.1"


def test_survivors_of_a_dead_participant_are_counted_as_waiting(
    epilogue: str, store: RendezvousStore
) -> None:
    cfg = RendezvousSettings(
        run_id="d",
        min_nodes=1,
        max_nodes=2,
        last_call_timeout=0.05,
        # Heartbeats every 0.25 s, dead after 0.75 s: long enough that a loaded machine does
        # not make the survivor miss its own heartbeats (it would then sanitize itself away).
        keep_alive_interval=0.25,
        keep_alive_max_attempt=3,  # torch's default number of attempts
        cache_duration=0,
    )
    survivor = DynamicRendezvousHandler(store, cfg, node=A)
    dead = DynamicRendezvousHandler(store, cfg, node=B)
    try:
        t, out = _in_thread(dead.next_rendezvous)
        assert survivor.next_rendezvous().world_size == 2  # max 2: completes at once
        t.join(JOIN_LIMIT)
        assert not t.is_alive()
        assert out
        assert isinstance(out[0], RendezvousInfo)
        dead._heartbeats.close()  # the process dies: no exit op, no more heartbeats
        # The survivor's sanitize drops it and its heartbeat writes that.
        assert _until(lambda: B not in _stored(store, "d").participants)
        if epilogue == "torch":  # pytorch#111646: the round stays complete, nobody waits
            s = _stored(store, "d")
            assert (s.round, s.complete, dict(s.participants)) == (0, True, {A: 1})
            assert survivor.num_nodes_waiting() == 0  # an elastic agent never restarts
            return
        # torch's elastic agent restarts when num_nodes_waiting() > 0 (SimpleElasticAgent).
        assert _until(lambda: survivor.num_nodes_waiting() > 0)
        again = survivor.next_rendezvous()
    finally:
        for h in (survivor, dead):
            h._heartbeats.close()
    assert (again.round, again.rank, again.world_size) == (1, 0, 1)
