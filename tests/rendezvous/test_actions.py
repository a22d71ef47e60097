"""The business functions and the sanitizer."""

from __future__ import annotations

from protoref.rendezvous.core import actions as fn
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings, RendezvousState

CFG = RendezvousSettings(
    min_nodes=2,
    max_nodes=3,
    last_call_timeout=30,
    keep_alive_interval=5,
    keep_alive_max_attempt=3,
)
N8 = NodeDesc("127.0.0.8", 1, 0)
N10 = NodeDesc("127.0.0.10", 1, 0)
N9 = NodeDesc("127.0.0.9", 1, 0)


def test_add_to_participants_arms_last_call_at_min_and_completes_at_max() -> None:
    s = fn.add_to_participants(RendezvousState(), N8, CFG, 1.0)
    assert s.deadline is None
    assert dict(s.participants) == {N8: 0}
    s = fn.add_to_participants(s, N10, CFG, 2.0)
    assert s.deadline == 32.0
    assert not s.complete
    s = fn.add_to_participants(s.replace(wait_list={N9}), N9, CFG, 3.0)
    # Ranks follow the descriptor order, addr as a string: 127.0.0.10 < 127.0.0.8 < 127.0.0.9.
    assert s.complete
    assert s.deadline is None
    assert N9 not in s.wait_list
    assert dict(s.participants) == {N10: 0, N8: 1, N9: 2}
    assert dict(s.last_heartbeats) == {N8: 1.0, N10: 2.0, N9: 3.0}


def test_add_to_wait_list_leaves_the_redundancy_list() -> None:
    s = fn.add_to_wait_list(RendezvousState().replace(redundancy_list={N8}), N8, 4.0)
    assert s.wait_list == {N8}
    assert not s.redundancy_list
    assert s.last_heartbeats[N8] == 4.0


def test_remove_last_participant_of_complete_round_bumps_round_keeping_lists() -> None:
    s = RendezvousState().replace(
        complete=True, participants={N8: 0}, wait_list={N9}, last_heartbeats={N8: 1, N9: 1}
    )
    t = fn.remove_from_participants(s, N8, CFG)
    assert t.round == 1
    assert not t.complete
    assert t.wait_list == {N9}
    assert dict(t.last_heartbeats) == {N9: 1}


def test_a_leave_ends_a_complete_round_and_the_rest_wait() -> None:
    # Reference epilogue: torch 2.13 would keep round 0 complete with {N9: 1}, and a node
    # still in its join op would return rank 1 of a world of 1 (RankBelowWorldInv).
    s = RendezvousState().replace(
        complete=True,
        participants={N8: 0, N9: 1, N10: 2},
        redundancy_list={NodeDesc("127.0.0.7", 1, 0)},
        last_heartbeats={N8: 1, N9: 1, N10: 1},
    )
    t = fn.remove_from_participants(s, N8, CFG)
    assert t.round == 1
    assert not t.complete
    assert not t.participants
    assert t.wait_list == {N9, N10}  # they count as waiting: their agents re-rendezvous
    assert t.redundancy_list == s.redundancy_list
    assert dict(t.last_heartbeats) == {N9: 1, N10: 1}


def test_incomplete_round_below_min_disarms_last_call() -> None:
    s = RendezvousState().replace(participants={N8: 0, N9: 0}, deadline=5.0)
    assert fn.remove_from_participants(s, N8, CFG).deadline is None


def test_sanitize_drops_expired_nodes_everywhere() -> None:
    s = RendezvousState().replace(
        complete=True,
        participants={N8: 0},
        wait_list={N9},
        redundancy_list={N10},
        last_heartbeats={N8: 0.0, N9: 0.0, N10: 10.0},
    )
    assert fn.sanitize(s, CFG, 15.0) == s  # exactly 15 s old: not strictly older
    t = fn.sanitize(s, CFG, 15.5)
    assert not t.participants
    assert not t.wait_list
    assert t.redundancy_list == {N10}
    assert t.round == 1
    assert not t.complete


def test_sanitizing_a_dead_participant_counts_the_survivors_as_waiting() -> None:
    # pytorch#111646: in 2.13 the survivor stays in the complete round, nobody waits, and an
    # elastic agent (which restarts when num_nodes_waiting() > 0) never re-rendezvouses.
    s = RendezvousState().replace(
        complete=True, participants={N8: 0, N9: 1}, last_heartbeats={N8: 0.0, N9: 14.0}
    )
    t = fn.sanitize(s, CFG, 15.5)
    assert (t.round, t.complete, dict(t.participants)) == (1, False, {})
    assert t.wait_list == {N9}
