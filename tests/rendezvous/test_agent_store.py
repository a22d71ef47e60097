"""Rank 0 publishes its agent store's address through our store; the other ranks await it
(no torch needed: the TCPStores are protoref.torch.torchrun's)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from protoref.rendezvous.adapters.store import FileStore, InMemoryStore, RendezvousStore
from protoref.rendezvous.core.errors import RendezvousStateError, RendezvousTimeoutError
from protoref.torch.agent_store import (
    RoundSupersededError,
    agent_store_key,
    await_address,
    publish_address,
)


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> RendezvousStore:
    return InMemoryStore() if request.param == "memory" else FileStore(tmp_path)


def test_a_waiter_gets_the_address_published_later(store: RendezvousStore) -> None:
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(await_address(store, "j", 3, 30.0)))
    waiter.start()
    publish_address(store, "j", 3, addr="10.0.0.7", port=4242, timeout=5.0)
    waiter.join(30.0)
    (where,) = got
    assert (where.addr, where.port, where.round) == ("10.0.0.7", 4242, 3)  # type: ignore[attr-defined]


def test_each_round_publishes_over_the_last(store: RendezvousStore) -> None:
    publish_address(store, "j", 0, addr="a", port=1, timeout=5.0)
    publish_address(store, "j", 1, addr="a", port=2, timeout=5.0)  # same node, a fresh server
    assert await_address(store, "j", 1, 1.0).port == 2
    publish_address(store, "j", 1, addr="a", port=2, timeout=5.0)  # again: nothing to do


def test_an_older_round_is_superseded(store: RendezvousStore) -> None:
    publish_address(store, "j", 5, addr="a", port=1, timeout=5.0)
    with pytest.raises(RoundSupersededError, match="round 4 was superseded by round 5"):
        publish_address(store, "j", 4, addr="b", port=2, timeout=5.0)
    with pytest.raises(RoundSupersededError):
        await_address(store, "j", 4, 1.0)


def test_a_second_rank_0_for_one_round_is_a_state_error(store: RendezvousStore) -> None:
    publish_address(store, "j", 2, addr="a", port=1, timeout=5.0)
    with pytest.raises(RendezvousStateError, match="claimed by a:1"):
        publish_address(store, "j", 2, addr="b", port=9, timeout=5.0)


def test_waiting_for_a_rank_0_that_never_publishes_times_out(store: RendezvousStore) -> None:
    with pytest.raises(RendezvousTimeoutError, match="rank 0 of round 0 did not publish"):
        await_address(store, "j", 0, 0.2)


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b"not json", "Invalid JSON"),
        (b'{"schema":"protoref.agent_store/1","run_id":"j","round":0,"addr":"a","port":0}', "port"),
        (
            b'{"schema":"protoref.agent_store/1","run_id":"k","round":0,"addr":"a","port":1}',
            "run_id",
        ),
        (b"x" * 5000, "more than 4096"),
    ],
)
def test_a_bad_record_is_a_state_error(raw: bytes, needle: str) -> None:
    store = InMemoryStore()
    store.put_raw(agent_store_key("j"), raw)
    with pytest.raises(RendezvousStateError, match=needle):
        await_address(store, "j", 0, 1.0)
