"""The business functions of ``_DistributedRendezvousOpExecutor`` as pure functions.

Each takes the node's local copy and returns the changed copy; the executor marks it dirty so the
next sync writes it. Names are the snake_case of the DynamicRendezvous.tla actions (whose ``...Fn``
operators they implement) and each cites the torch method it mirrors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings, RendezvousState

__all__ = [
    "add_to_participants",
    "add_to_redundancy_list",
    "add_to_wait_list",
    "epilogue",
    "expired_nodes",
    "keep_alive",
    "mark_rendezvous_closed",
    "mark_rendezvous_complete",
    "remove_from_participants",
    "remove_from_redundancy_list",
    "remove_from_wait_list",
    "sanitize",
]

V = TypeVar("V")


def _without(mapping: Mapping[NodeDesc, V], *nodes: NodeDesc) -> dict[NodeDesc, V]:
    return {k: v for k, v in mapping.items() if k not in nodes}


def keep_alive(s: RendezvousState, node: NodeDesc, now: float) -> RendezvousState:
    """KeepAlive / ``KeepAliveFn``: ``_keep_alive``: ``last_heartbeats[node] = now``."""
    return s.replace(last_heartbeats={**s.last_heartbeats, node: now})


def mark_rendezvous_complete(s: RendezvousState) -> RendezvousState:
    """MarkRendezvousComplete / ``MarkCompleteFn``: ``_mark_rendezvous_complete``.

    Ranks are positions in ``sorted(participants)`` (G1).
    """
    ranks = {n: rank for rank, n in enumerate(sorted(s.participants))}
    return s.replace(complete=True, deadline=None, participants=ranks)


def add_to_participants(
    s: RendezvousState, node: NodeDesc, settings: RendezvousSettings, now: float
) -> RendezvousState:
    """AddToParticipants / ``AddToParticipantsFn``: ``_add_to_participants``.

    Leaves the wait list, gets rank 0 for now, heartbeats; arms the last call when the count
    becomes exactly ``min_nodes``; completes when it becomes exactly ``max_nodes``.
    """
    t = s.replace(
        wait_list=s.wait_list - {node},
        participants={**s.participants, node: 0},
        last_heartbeats={**s.last_heartbeats, node: now},
    )
    if len(t.participants) == settings.min_nodes:
        t = t.replace(deadline=now + settings.last_call_timeout)
    if len(t.participants) == settings.max_nodes:
        t = mark_rendezvous_complete(t)
    return t


def add_to_wait_list(s: RendezvousState, node: NodeDesc, now: float) -> RendezvousState:
    """AddToWaitList / ``AddToWaitListFn``: ``_add_to_wait_list`` (2.13 leaves the redundancy
    list first)."""
    return s.replace(
        redundancy_list=s.redundancy_list - {node},
        wait_list=s.wait_list | {node},
        last_heartbeats={**s.last_heartbeats, node: now},
    )


def add_to_redundancy_list(s: RendezvousState, node: NodeDesc, now: float) -> RendezvousState:
    """AddToRedundancyList / ``AddToRedundancyListFn``: ``_add_to_redundancy_list``."""
    return s.replace(
        redundancy_list=s.redundancy_list | {node},
        last_heartbeats={**s.last_heartbeats, node: now},
    )


def epilogue(s: RendezvousState, settings: RendezvousSettings) -> RendezvousState:
    """``Epilogue`` (Variant "Reference"): ``_remove_participant_epilogue``, after a participant
    left (its exit op, its join op's rollback, or another node's sanitize).

    A complete round that loses a participant ends: it moves to the next round and the remaining
    participants move to the wait list (their ranks are void). So a complete round never changes
    its membership, and every node that returns from it returns the same world, with a rank
    below its size (G1; torch 2.13 keeps the round complete with the rest, and a node still in
    its join op then returns the shrunk membership with its old rank). The survivors count as
    waiting, so their agents, which re-rendezvous when ``num_nodes_waiting() > 0``, form a new
    round without a dead participant (G5; pytorch#111646). An incomplete round below
    ``min_nodes`` disarms the last call.
    """
    if s.complete:
        return s.replace(
            complete=False,
            round=s.round + 1,
            participants={},
            wait_list=s.wait_list | s.participants.keys(),
        )
    if len(s.participants) < settings.min_nodes:
        return s.replace(deadline=None)
    return s


def remove_from_participants(
    s: RendezvousState, node: NodeDesc, settings: RendezvousSettings
) -> RendezvousState:
    """RemoveFromParticipants / ``RemoveFromParticipantsFn``: ``_remove_from_participants``."""
    t = s.replace(
        participants=_without(s.participants, node),
        last_heartbeats=_without(s.last_heartbeats, node),
    )
    return epilogue(t, settings)


def remove_from_wait_list(s: RendezvousState, node: NodeDesc) -> RendezvousState:
    """RemoveFromWaitList / ``RemoveFromWaitListFn``: ``_remove_from_wait_list``."""
    return s.replace(
        wait_list=s.wait_list - {node}, last_heartbeats=_without(s.last_heartbeats, node)
    )


def remove_from_redundancy_list(s: RendezvousState, node: NodeDesc) -> RendezvousState:
    """RemoveFromRedundancyList / ``RemoveFromRedundancyListFn``:
    ``_remove_from_redundancy_list``."""
    return s.replace(
        redundancy_list=s.redundancy_list - {node},
        last_heartbeats=_without(s.last_heartbeats, node),
    )


def mark_rendezvous_closed(s: RendezvousState) -> RendezvousState:
    """MarkRendezvousClosed / ``MarkClosedFn``: ``_mark_rendezvous_closed``."""
    return s.replace(closed=True)


def expired_nodes(
    s: RendezvousState, settings: RendezvousSettings, now: float
) -> frozenset[NodeDesc]:
    """Nodes whose last heartbeat is strictly older than ``now - expiry`` (``_sanitize``)."""
    expiry = now - settings.heartbeat_expiry
    return frozenset(n for n, t in s.last_heartbeats.items() if t < expiry)


def sanitize(s: RendezvousState, settings: RendezvousSettings, now: float) -> RendezvousState:
    """``Sanitize``: ``_BackendRendezvousStateHolder._sanitize`` on the syncing node's copy.

    Dead nodes leave every collection; if a participant went, the epilogue runs (G5).
    """
    dead = expired_nodes(s, settings, now)
    if not dead:
        return s
    t = s.replace(
        last_heartbeats=_without(s.last_heartbeats, *dead),
        participants=_without(s.participants, *dead),
        wait_list=s.wait_list - dead,
        redundancy_list=s.redundancy_list - dead,
    )
    return epilogue(t, settings) if dead & s.participants.keys() else t
