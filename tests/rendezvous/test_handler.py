"""The handler on the in-memory store with real threads (no wall-clock assertions)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from protoref.rendezvous.adapters.store import InMemoryStore
from protoref.rendezvous.core.errors import (
    RendezvousClosedError,
    RendezvousGracefulExitError,
    RendezvousTimeoutError,
)
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings
from protoref.rendezvous.runtime.handler import DynamicRendezvousHandler
from protoref.rendezvous.runtime.heartbeat import HeartbeatTimer
from support.rendezvous import rendezvous_all

JOIN_LIMIT = 30.0  # seconds a test thread may take before the test fails (never reached)


def _nodes(n: int) -> list[NodeDesc]:
    return [NodeDesc(f"10.0.0.{8 + i}", 7, i) for i in range(n)]


@pytest.fixture
def handlers() -> Iterator[list[DynamicRendezvousHandler]]:
    made: list[DynamicRendezvousHandler] = []
    yield made
    for h in made:
        h._heartbeats.close()


@pytest.mark.parametrize("n", [1, 3, 8])
def test_ranks_follow_sorted_node_order(n: int, handlers: list[DynamicRendezvousHandler]) -> None:
    store = InMemoryStore()
    cfg = RendezvousSettings(run_id="t", min_nodes=n, max_nodes=n)
    handlers += [DynamicRendezvousHandler(store, cfg, node=node) for node in _nodes(n)]
    out = rendezvous_all(handlers)
    expected = {node: rank for rank, node in enumerate(sorted(_nodes(n)))}
    assert {node: info.rank for node, info in out.items()} == expected
    assert {info.world_size for info in out.values()} == {n}
    assert {info.store_prefix for info in out.values()} == {"torch.rendezvous.t.0"}


def test_last_call_completes_between_min_and_max(handlers: list[DynamicRendezvousHandler]) -> None:
    store = InMemoryStore()
    cfg = RendezvousSettings(run_id="t", min_nodes=2, max_nodes=4, last_call_timeout=0.05)
    handlers += [DynamicRendezvousHandler(store, cfg, node=node) for node in _nodes(2)]
    out = rendezvous_all(handlers)
    assert sorted(i.rank for i in out.values()) == [0, 1]


def test_second_round_after_an_exit(handlers: list[DynamicRendezvousHandler]) -> None:
    store = InMemoryStore()
    cfg = RendezvousSettings(run_id="t", min_nodes=2, max_nodes=2)
    handlers += [DynamicRendezvousHandler(store, cfg, node=node) for node in _nodes(2)]
    assert {i.round for i in rendezvous_all(handlers).values()} == {0}
    second = rendezvous_all(handlers)  # both exit round 0; the last one out bumps the round
    assert {i.round for i in second.values()} == {1}
    assert sorted(i.rank for i in second.values()) == [0, 1]


def test_waiting_close_and_shutdown(handlers: list[DynamicRendezvousHandler]) -> None:
    store = InMemoryStore()
    cfg = RendezvousSettings(run_id="t", min_nodes=1, max_nodes=1, cache_duration=0)
    a, b = (DynamicRendezvousHandler(store, cfg, node=node) for node in _nodes(2))
    handlers += [a, b]
    assert a.next_rendezvous().rank == 0
    assert a.get_run_id() == "t"
    # b finds the round complete and full: it waits in the redundancy list (not counted).
    ended: list[BaseException] = []

    def wait() -> None:
        try:
            b.next_rendezvous()
        except RendezvousGracefulExitError as err:  # closed while redundant (2.13 rule 1)
            ended.append(err)

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert not a.is_closed()
    assert a.num_nodes_waiting() == 0
    assert a.shutdown()
    waiter.join(JOIN_LIMIT)
    assert not waiter.is_alive()
    assert len(ended) == 1
    assert b.is_closed()
    with pytest.raises(RendezvousClosedError):
        DynamicRendezvousHandler(store, cfg, node=NodeDesc("x", 1, 1)).next_rendezvous()


def test_join_times_out_below_min(handlers: list[DynamicRendezvousHandler]) -> None:
    store = InMemoryStore()
    cfg = RendezvousSettings(
        run_id="t", min_nodes=2, max_nodes=2, join_timeout=0.05, rollback_period=0.05
    )
    h = DynamicRendezvousHandler(store, cfg, node=_nodes(1)[0])
    handlers.append(h)
    with pytest.raises(RendezvousTimeoutError) as raised:
        h.next_rendezvous()
    assert h.num_nodes_waiting() == 0
    # issue 28 section 5: said "exit op of ... passed its deadline" (the op it started with)
    message = str(raised.value)
    assert message.startswith("join timeout: ")
    assert "joined no complete round within join_timeout = 0.05 s" in message
    assert "exit op" not in message


def test_heartbeat_timer_beats_only_while_resumed() -> None:
    beats = threading.Semaphore(0)
    paused = threading.Event()
    while_paused: list[int] = []

    def beat() -> None:
        if paused.is_set():
            while_paused.append(1)
        beats.release()

    timer = HeartbeatTimer(0.001, beat, "test-beat")
    try:
        timer.resume()
        assert beats.acquire(timeout=JOIN_LIMIT)
        assert beats.acquire(timeout=JOIN_LIMIT)  # periodic, not once
        timer.pause()  # returns only once no callback runs
        paused.set()
        threading.Event().wait(0.02)  # twenty intervals in which a paused timer must not beat
        assert while_paused == []
        paused.clear()
        timer.resume()
        assert beats.acquire(timeout=JOIN_LIMIT)
    finally:
        timer.close()


def test_paused_timer_never_calls_back() -> None:
    called = threading.Event()
    timer = HeartbeatTimer(0.001, called.set, "test-beat")
    timer.close()  # never resumed: the thread ends without a call
    assert not called.is_set()


def _until(pred: Callable[[], bool]) -> bool:
    """Poll ``pred`` every 10 ms for at most JOIN_LIMIT seconds (never a timing assertion)."""
    tick = threading.Event()
    for _ in range(int(JOIN_LIMIT / 0.01)):
        if pred():
            return True
        tick.wait(0.01)
    return pred()


def test_late_joiner_lands_in_the_wait_list(handlers: list[DynamicRendezvousHandler]) -> None:
    store = InMemoryStore()
    cfg = RendezvousSettings(
        run_id="t", min_nodes=2, max_nodes=3, last_call_timeout=0.05, cache_duration=0
    )
    a, b, late = (DynamicRendezvousHandler(store, cfg, node=node) for node in _nodes(3))
    handlers += [a, b, late]
    first = rendezvous_all([a, b])  # min reached, last call expires: round 0 with 2 of 3
    assert {i.world_size for i in first.values()} == {2}
    ended: list[BaseException] = []

    def join_late() -> None:
        try:
            late.next_rendezvous()
        except RendezvousClosedError as err:  # the job ends before a next round starts
            ended.append(err)

    waiter = threading.Thread(target=join_late)
    waiter.start()
    # The round is complete but not full: the late node waits for the next round, and the
    # participants see it (torchelastic's agent restarts the group on num_nodes_waiting > 0).
    assert _until(lambda: a.num_nodes_waiting() == 1)
    assert a.shutdown()
    waiter.join(JOIN_LIMIT)
    assert not waiter.is_alive()
    assert len(ended) == 1


def test_a_dead_node_is_removed_by_the_others(handlers: list[DynamicRendezvousHandler]) -> None:
    store = InMemoryStore()
    cfg = RendezvousSettings(
        run_id="t",
        min_nodes=2,
        max_nodes=3,
        last_call_timeout=0.05,
        keep_alive_interval=0.02,
        keep_alive_max_attempt=2,
        cache_duration=0,
    )
    a, b, dead = (DynamicRendezvousHandler(store, cfg, node=node) for node in _nodes(3))
    handlers += [a, b, dead]
    assert {i.world_size for i in rendezvous_all([a, b, dead]).values()} == {3}
    dead._heartbeats.close()  # the process dies: no exit op, no more heartbeats
    second = rendezvous_all([a, b])  # the survivors sanitize it away and start round 1
    assert {i.round for i in second.values()} == {1}
    assert {i.world_size for i in second.values()} == {2}
    assert sorted(i.rank for i in second.values()) == [0, 1]


def test_a_node_stopped_by_a_close_stays_closed(handlers: list[DynamicRendezvousHandler]) -> None:
    """After RendezvousClosedError (the agent's launcher then calls shutdown()), set_closed and
    shutdown succeed and next_rendezvous raises RendezvousClosedError again, as torch's ops
    would (the close op FINISHes on a closed state), not a RuntimeError of the executor."""
    store = InMemoryStore()
    cfg = RendezvousSettings(run_id="t", min_nodes=1, max_nodes=1, cache_duration=0)
    a, b = (DynamicRendezvousHandler(store, cfg, node=node) for node in _nodes(2))
    handlers += [a, b]
    a.set_closed()
    for _ in range(2):
        with pytest.raises(RendezvousClosedError):
            b.next_rendezvous()
    b.set_closed()
    assert b.is_closed()
    assert b.shutdown()
