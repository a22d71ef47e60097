"""The ops: which action a node takes next, from (op, state, node, settings, now, deadline).

torch's ``_RendezvousExitOp``, ``_RendezvousJoinOp``, ``_RendezvousKeepAliveOp`` and
``_RendezvousCloseOp`` with 2.13's rule order (the first matching rule wins). Sans-IO: ``now`` and
the op ``deadline`` are passed in; nothing here reads a clock. Results are the DynamicRendezvous.tla
action names (``Decision(n)``): torch's SYNC is ``Delay``, FINISH ``Finish``, and the join op's
``RendezvousGracefulExitError`` is ``GracefulExit``.
"""

from __future__ import annotations

from enum import StrEnum

from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings, RendezvousState

__all__ = [
    "Action",
    "Op",
    "close_decision",
    "decide",
    "exit_decision",
    "join_decision",
    "keep_alive_decision",
    "should_keep_alive",
]


class Op(StrEnum):
    """The spec's ``op[n]`` values."""

    EXIT = "exit"
    JOIN = "join"
    CLOSE = "close"
    KEEP_ALIVE = "keepalive"


class Action(StrEnum):
    """torch's ``_Action`` members, spelled as the DynamicRendezvous.tla actions."""

    KEEP_ALIVE = "KeepAlive"
    ADD_TO_PARTICIPANTS = "AddToParticipants"
    ADD_TO_WAIT_LIST = "AddToWaitList"
    ADD_TO_REDUNDANCY_LIST = "AddToRedundancyList"
    REMOVE_FROM_PARTICIPANTS = "RemoveFromParticipants"
    REMOVE_FROM_WAIT_LIST = "RemoveFromWaitList"
    REMOVE_FROM_REDUNDANCY_LIST = "RemoveFromRedundancyList"
    MARK_RENDEZVOUS_COMPLETE = "MarkRendezvousComplete"
    MARK_RENDEZVOUS_CLOSED = "MarkRendezvousClosed"
    SYNC = "Delay"
    ERROR_CLOSED = "ErrorClosed"
    ERROR_TIMEOUT = "ErrorTimeout"
    FINISH = "Finish"
    GRACEFUL_EXIT = "GracefulExit"


def should_keep_alive(
    s: RendezvousState, node: NodeDesc, settings: RendezvousSettings, now: float
) -> bool:
    """``KeepAliveDue``: ``_should_keep_alive``: a heartbeat entry at least one interval old."""
    last = s.last_heartbeats.get(node)
    return last is not None and last <= now - settings.keep_alive_interval


def exit_decision(s: RendezvousState, node: NodeDesc, now: float, deadline: float) -> Action:
    """``ExitDecision``: ``_RendezvousExitOp``. Ignores ``closed`` and the lists."""
    if node in s.participants:
        return Action.ERROR_TIMEOUT if now > deadline else Action.REMOVE_FROM_PARTICIPANTS
    return Action.FINISH


def join_decision(
    s: RendezvousState,
    node: NodeDesc,
    settings: RendezvousSettings,
    now: float,
    deadline: float,
    *,
    uncounted: frozenset[NodeDesc] = frozenset(),
) -> Action:
    """``JoinDecision``: ``_RendezvousJoinOp`` (2.13), rules 1-8 of the notes in order.

    ``uncounted``: nodes of other clock domains whose heartbeat this node cannot yet bound
    within the expiry; no round completes with one of them as a participant (the spec's
    ``AllCounted``, which is TRUE on one clock: then ``uncounted`` is empty)."""
    count = len(s.participants)
    is_participant = node in s.participants
    all_counted = uncounted.isdisjoint(s.participants)
    # 1. closed: a redundant node exits gracefully, anybody else fails.
    if s.closed:
        return Action.GRACEFUL_EXIT if node in s.redundancy_list else Action.ERROR_CLOSED
    # 2. redundant: wait (no timeout) while the round is full, else leave the list.
    if node in s.redundancy_list:
        if count == settings.max_nodes:
            due = should_keep_alive(s, node, settings, now)
            return Action.KEEP_ALIVE if due else Action.SYNC
        return Action.REMOVE_FROM_REDUNDANCY_LIST
    # 3. done.
    if s.complete and is_participant:
        return Action.FINISH
    # 4. timed out: roll back within the rollback period, then fail.
    if now > deadline:
        if now <= deadline + settings.rollback_period:
            if is_participant:
                return Action.REMOVE_FROM_PARTICIPANTS
            if node in s.wait_list:
                return Action.REMOVE_FROM_WAIT_LIST
        return Action.ERROR_TIMEOUT
    # 5. complete without us: wait list if there is room, redundancy list if full.
    if s.complete:
        if count < settings.max_nodes and node not in s.wait_list:
            return Action.ADD_TO_WAIT_LIST
        if count >= settings.max_nodes and node not in s.wait_list:
            return Action.ADD_TO_REDUNDANCY_LIST
    # 6. a participant completes the round once the last call has passed.
    elif is_participant:
        in_range = settings.min_nodes <= count <= settings.max_nodes
        if in_range and s.deadline is not None and s.deadline < now and all_counted:
            return Action.MARK_RENDEZVOUS_COMPLETE
    # 7. join, unless that would complete the round at max_nodes with a node not counted.
    elif all_counted or count + 1 != settings.max_nodes:
        return Action.ADD_TO_PARTICIPANTS
    # 8. wait.
    return Action.KEEP_ALIVE if should_keep_alive(s, node, settings, now) else Action.SYNC


def close_decision(s: RendezvousState, now: float, deadline: float) -> Action:
    """``CloseDecision``: ``_RendezvousCloseOp``."""
    if s.closed:
        return Action.FINISH
    if now > deadline:
        return Action.ERROR_TIMEOUT
    return Action.MARK_RENDEZVOUS_CLOSED


def keep_alive_decision(
    s: RendezvousState, node: NodeDesc, settings: RendezvousSettings, now: float, deadline: float
) -> Action:
    """``KeepAliveOpDecision``: ``_RendezvousKeepAliveOp``."""
    if should_keep_alive(s, node, settings, now):
        return Action.ERROR_TIMEOUT if now > deadline else Action.KEEP_ALIVE
    return Action.FINISH


def decide(
    op: Op,
    s: RendezvousState,
    node: NodeDesc,
    settings: RendezvousSettings,
    *,
    now: float,
    deadline: float,
    uncounted: frozenset[NodeDesc] = frozenset(),
) -> Action:
    """``Decision(n)``: the running op's choice (``uncounted``: see :func:`join_decision`)."""
    if op is Op.EXIT:
        return exit_decision(s, node, now, deadline)
    if op is Op.JOIN:
        return join_decision(s, node, settings, now, deadline, uncounted=uncounted)
    if op is Op.CLOSE:
        return close_decision(s, now, deadline)
    return keep_alive_decision(s, node, settings, now, deadline)


#: Actions that change the local copy (the executor marks it dirty afterwards).
MUTATING: frozenset[Action] = frozenset(
    {
        Action.KEEP_ALIVE,
        Action.ADD_TO_PARTICIPANTS,
        Action.ADD_TO_WAIT_LIST,
        Action.ADD_TO_REDUNDANCY_LIST,
        Action.REMOVE_FROM_PARTICIPANTS,
        Action.REMOVE_FROM_WAIT_LIST,
        Action.REMOVE_FROM_REDUNDANCY_LIST,
        Action.MARK_RENDEZVOUS_COMPLETE,
        Action.MARK_RENDEZVOUS_CLOSED,
    }
)
