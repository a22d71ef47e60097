"""Table tests of the ops: each rule of 2.13's join op in order; the exit, close, keep-alive ops."""

from __future__ import annotations

import pytest

from protoref.rendezvous.core.ops import (
    Action,
    close_decision,
    exit_decision,
    join_decision,
    keep_alive_decision,
)
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings, RendezvousState

ME = NodeDesc("10.0.0.1", 1, 0)
A = NodeDesc("10.0.0.2", 1, 0)
B = NodeDesc("10.0.0.3", 1, 0)
CFG = RendezvousSettings(min_nodes=2, max_nodes=3, keep_alive_interval=5, rollback_period=5)
NOW = 100.0
LATER = 200.0  # op deadline not passed
FRESH = {ME: NOW}  # heartbeat not due
DUE = {ME: NOW - 5}  # heartbeat due (>= one interval old)


def st(**kw: object) -> RendezvousState:
    return RendezvousState().replace(**kw)


JOIN_CASES = [
    # (id, state, deadline, expected)
    ("1 closed", st(closed=True), LATER, Action.ERROR_CLOSED),
    ("1 closed+redundant", st(closed=True, redundancy_list={ME}), LATER, Action.GRACEFUL_EXIT),
    (
        "2 redundant, full, due",
        st(
            participants={A: 0, B: 1, NodeDesc("z", 1, 1): 2},
            redundancy_list={ME},
            last_heartbeats=DUE,
            complete=True,
        ),
        NOW - 50,  # no timeout check for a redundant node
        Action.KEEP_ALIVE,
    ),
    (
        "2 redundant, full",
        st(
            participants={A: 0, B: 1, NodeDesc("z", 1, 1): 2},
            redundancy_list={ME},
            last_heartbeats=FRESH,
            complete=True,
        ),
        LATER,
        Action.SYNC,
    ),
    (
        "2 redundant, room",
        st(participants={A: 0}, redundancy_list={ME}),
        LATER,
        Action.REMOVE_FROM_REDUNDANCY_LIST,
    ),
    (
        "3 complete participant",
        st(participants={ME: 0, A: 1}, complete=True),
        NOW - 50,
        Action.FINISH,
    ),
    ("4 timeout participant", st(participants={ME: 0}), NOW - 1, Action.REMOVE_FROM_PARTICIPANTS),
    (
        "4 timeout wait list",
        st(wait_list={ME}, complete=True, participants={A: 0}),
        NOW - 1,
        Action.REMOVE_FROM_WAIT_LIST,
    ),
    ("4 timeout past rollback", st(participants={ME: 0}), NOW - 6, Action.ERROR_TIMEOUT),
    ("4 timeout nobody", st(), NOW - 1, Action.ERROR_TIMEOUT),
    (
        "5 complete with room",
        st(participants={A: 0}, complete=True),
        LATER,
        Action.ADD_TO_WAIT_LIST,
    ),
    (
        "5 complete and full",
        st(participants={A: 0, B: 1, NodeDesc("z", 1, 1): 2}, complete=True),
        LATER,
        Action.ADD_TO_REDUNDANCY_LIST,
    ),
    (
        "5 full, wait-listed: falls through to keep-alive",
        st(
            participants={A: 0, B: 1, NodeDesc("z", 1, 1): 2},
            complete=True,
            wait_list={ME},
            last_heartbeats=DUE,
        ),
        LATER,
        Action.KEEP_ALIVE,
    ),
    (
        "6 last call passed",
        st(participants={ME: 0, A: 0}, deadline=NOW - 1, last_heartbeats=FRESH),
        LATER,
        Action.MARK_RENDEZVOUS_COMPLETE,
    ),
    (
        "6 last call running",
        st(participants={ME: 0, A: 0}, deadline=NOW + 1, last_heartbeats=FRESH),
        LATER,
        Action.SYNC,
    ),
    (
        "6 deadline at now is not passed",
        st(participants={ME: 0, A: 0}, deadline=NOW, last_heartbeats=FRESH),
        LATER,
        Action.SYNC,
    ),
    ("6 below min", st(participants={ME: 0}, last_heartbeats=DUE), LATER, Action.KEEP_ALIVE),
    ("7 join", st(participants={A: 0}), LATER, Action.ADD_TO_PARTICIPANTS),
    ("7 join from wait list", st(wait_list={ME}), LATER, Action.ADD_TO_PARTICIPANTS),
]


@pytest.mark.parametrize(
    ("state", "deadline", "expected"), [c[1:] for c in JOIN_CASES], ids=[c[0] for c in JOIN_CASES]
)
def test_join_rules(state: RendezvousState, deadline: float, expected: Action) -> None:
    assert join_decision(state, ME, CFG, NOW, deadline) is expected


def test_exit_op() -> None:
    assert (
        exit_decision(st(participants={ME: 0}), ME, NOW, LATER) is Action.REMOVE_FROM_PARTICIPANTS
    )
    assert exit_decision(st(participants={ME: 0}), ME, NOW, NOW - 1) is Action.ERROR_TIMEOUT
    assert exit_decision(st(closed=True, wait_list={ME}), ME, NOW, LATER) is Action.FINISH


def test_close_op() -> None:
    assert close_decision(st(closed=True), NOW, NOW - 1) is Action.FINISH
    assert close_decision(st(), NOW, NOW - 1) is Action.ERROR_TIMEOUT
    assert close_decision(st(), NOW, LATER) is Action.MARK_RENDEZVOUS_CLOSED


def test_keep_alive_op() -> None:
    assert keep_alive_decision(st(last_heartbeats=DUE), ME, CFG, NOW, LATER) is Action.KEEP_ALIVE
    assert keep_alive_decision(st(last_heartbeats=DUE), ME, CFG, NOW, NOW - 1) is (
        Action.ERROR_TIMEOUT
    )
    assert keep_alive_decision(st(last_heartbeats=FRESH), ME, CFG, NOW, LATER) is Action.FINISH
    assert keep_alive_decision(st(), ME, CFG, NOW, LATER) is Action.FINISH
