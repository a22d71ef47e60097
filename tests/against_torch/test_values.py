"""torch's state and descriptors as the spec's values (no torch needed: plain stand-ins)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import NamedTuple

import pytest

from protoref.torch.values import TorchSettings, desc_order, op_deadline, state_value


class Desc(NamedTuple):
    addr: str
    pid: int
    local_id: int


def test_nodes_are_ordered_as_torch_orders_node_descriptors() -> None:
    descs = [Desc("h", 10, 0), Desc("h", 9, 0), Desc("h", 9, 10), Desc("h", 9, 2)]
    descs += [Desc("127.0.0.10", 1, 0), Desc("127.0.0.8", 1, 0)]
    # addr as a string (127.0.0.10 < 127.0.0.8), then pid and local id as integers
    assert desc_order(descs) == [
        "127.0.0.10_1_0",
        "127.0.0.8_1_0",
        "h_9_0",
        "h_9_2",
        "h_9_10",
        "h_10_0",
    ]


def test_a_state_becomes_ticks_relative_to_now() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=100)
    a, b = Desc("h", 1, 0), Desc("h", 1, 1)
    state = SimpleNamespace(
        round=2,
        complete=False,
        deadline=now + timedelta(seconds=3),
        closed=False,
        participants={b: 0, a: 0},
        wait_list=set(),
        redundancy_list={b},
        last_heartbeats={a: now - timedelta(seconds=4), b: now - timedelta(seconds=99)},
    )
    cfg = TorchSettings(min_nodes=1, max_nodes=2)  # expiry 10: ages saturate at 11
    assert state_value(state, now, cfg) == {
        "round": 2,
        "complete": False,
        "deadline": [3],
        "closed": False,
        "participants": {"#map": [["h_1_0", 0], ["h_1_1", 0]]},
        "waitList": {"#set": []},
        "redundancyList": {"#set": ["h_1_1"]},
        "lastHeartbeats": {"#map": [["h_1_0", 4], ["h_1_1", 11]]},
    }
    state.deadline = now - timedelta(seconds=30)
    assert state_value(state, now, cfg)["deadline"] == [-1]  # type: ignore[index]


def test_times_off_the_tick_clock_are_refused() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    state = SimpleNamespace(
        round=0,
        complete=False,
        deadline=now + timedelta(seconds=0.5),
        closed=False,
        participants={},
        wait_list=set(),
        redundancy_list=set(),
        last_heartbeats={},
    )
    with pytest.raises(ValueError, match="not on the tick clock"):
        state_value(state, now, TorchSettings(min_nodes=1, max_nodes=1))
    with pytest.raises(ValueError, match="not a whole number of ticks"):
        op_deadline(10.5, 3.0)
    assert op_deadline(None, 3.0) == 0
    assert op_deadline(100.0, 3.0) == 97
    assert op_deadline(1.0, 30.0) == -6  # saturated below the 5 s rollback window
