"""A decoded state is checked against DynamicRendezvous.tla's invariants before any decision.

A store value may have been written by a buggy node, another program or an attacker with write
access to the key. The ops assume the spec's invariants; on a state that breaks them they can
loop (50 participants for ``max_nodes = 2``: rule 5 adds the node to the redundancy list, rule 2
takes it out again because the round is not exactly full, and so on, one write per turn, with
the op deadline restarted each time, so it never times out). So every state a holder loads is
checked first, and a state that breaks an invariant is a :class:`RendezvousStateError` naming
the invariant; nothing is decided on it and nothing is written.

Checked (spec names in parentheses):

- at most ``max_nodes`` participants (``ParticipantsAtMostMaxInv``);
- no node in two of participants, wait list and redundancy list (``ListsDisjointInv``);
- a complete round's ranks are exactly ``0..n-1`` in the ``_NodeDesc`` order of its participants
  (``CompletionRanksProp``: a round completes so, and a complete round never changes its
  members, ``CompleteRoundFrozenProp``); an open round's participants have rank 0 (the rank
  ``_add_to_participants`` gives until completion);
- a complete round has no last-call deadline, an open one has one exactly when it has at least
  ``min_nodes`` participants (``DeadlineArmedInv``; a node configured with another
  ``min_nodes`` than the writer trips it too, which is worth an error as well);
- a complete round has at least one participant (a round completes with ``min_nodes >= 1``,
  ``CompletionCountProp``, and the ``Epilogue`` advances a complete round its last participant
  left, in both variants); an open round has fewer than ``max_nodes`` (``AddToParticipantsFn``
  completes the round when the count reaches ``max_nodes``, ``CompletesAtCount``: a joiner of an
  open round at ``max_nodes`` would write ``max_nodes + 1``, ``ParticipantsAtMostMaxInv``);
- the codec has already bounded sizes, strings and numbers (no negatives, finite times).

On the reader's clock (:func:`check_times`, after the stamps are translated): no heartbeat later
than the reading (``TypeOK``: ages are ``0..HbCap``, never negative; a stamp of one's own clock
domain was written before it is read), no last call ending later than ``last_call_timeout`` from
now (``TypeOK``: the deadline is at most ``MaxDeadline`` ticks away), each up to one heartbeat
expiry of slack for a write that lands during the read. A phantom participant whose
heartbeat lies a day ahead on the reader's own clock is refused here. A stamp of another domain
cannot be refused (it is what a real node of another host writes); the join op does not count it
until the reader has bounded its age, and it expires by the time since its first sight
(:mod:`protoref.rendezvous.core.stamps`, MCDynamicRendezvousClocksDomains).
"""

from __future__ import annotations

from protoref.rendezvous.core.errors import RendezvousStateError
from protoref.rendezvous.core.state import RendezvousSettings, RendezvousState

__all__ = ["check_state", "check_times", "complete_ranks_problem"]


def _fail(key: str, invariant: str, detail: str) -> None:
    raise RendezvousStateError(key, f"{detail} (breaks {invariant})")


def complete_ranks_problem(s: RendezvousState, settings: RendezvousSettings) -> str | None:
    """What is wrong with a complete round's ranks, or None (Variant "Reference": exactly
    ``0..n-1`` in node order, since a complete round never loses a member).

    :mod:`protoref.rendezvous.sim.faults` swaps in the Variant "PyTorch" rule along with torch
    2.13's epilogue, whose complete rounds keep the ranks of the members that remain."""
    parts = s.participants
    if dict(parts) == {n: r for r, n in enumerate(sorted(parts))}:
        return None
    ranks = sorted(parts.values())
    more = "..." if len(ranks) > 8 else ""
    last = len(ranks) - 1
    return f"complete round {s.round} has ranks {ranks[:8]}{more}, not 0..{last} in node order"


def check_state(s: RendezvousState, settings: RendezvousSettings, key: str) -> None:
    """Raise :class:`RendezvousStateError` if ``s`` breaks an invariant the ops rely on."""
    parts = s.participants
    count = len(parts)
    if count > settings.max_nodes:
        _fail(
            key,
            "ParticipantsAtMostMaxInv",
            f"{count} participants for max_nodes = {settings.max_nodes}",
        )
    keys = parts.keys()
    both = (keys & s.wait_list) | (keys & s.redundancy_list) | (s.wait_list & s.redundancy_list)
    if both:
        _fail(key, "ListsDisjointInv", f"{min(both)} is in two of the lists")
    if s.complete:
        if count == 0:
            _fail(key, "CompletionCountProp", f"complete round {s.round} has no participants")
        problem = complete_ranks_problem(s, settings)
        if problem is not None:
            _fail(key, "CompletionRanksProp", problem)
        if s.deadline is not None:
            _fail(key, "DeadlineArmedInv", f"complete round {s.round} has a last-call deadline")
        return
    if any(r != 0 for r in parts.values()):
        _fail(key, "CompletionRanksProp", f"open round {s.round} has a participant with a rank")
    if (s.deadline is not None) != (count >= settings.min_nodes):
        armed = "a" if s.deadline is not None else "no"
        _fail(
            key,
            "DeadlineArmedInv",
            f"open round {s.round} with {count} participants has {armed} last-call deadline "
            f"(min_nodes = {settings.min_nodes}: do all nodes use the same settings?)",
        )
    if count == settings.max_nodes:
        _fail(
            key,
            "ParticipantsAtMostMaxInv",
            f"open round {s.round} already has max_nodes = {count} participants (reaching "
            "max_nodes completes a round; a joiner would write one more)",
        )


def check_times(s: RendezvousState, settings: RendezvousSettings, now: float, key: str) -> None:
    """Raise :class:`RendezvousStateError` if a time of ``s`` (on the reader's clock, read at
    ``now``) is one no reachable state has: a heartbeat in the future, or a last call ending
    more than ``last_call_timeout`` from now (``TypeOK``'s bounds on ages and deadlines).

    ``now`` is read before the store call, and a write may land while the call runs, so a
    stamp of another process of the reader's host may be ahead of ``now`` by the call's
    duration (the spec's steps take no time). The slack allowed is one heartbeat expiry: a
    phantom stamped further ahead would stay alive for more than twice the expiry."""
    slack = settings.heartbeat_expiry
    for node, beat in sorted(s.last_heartbeats.items()):
        if beat > now + slack:
            _fail(
                key,
                "TypeOK",
                f"the heartbeat of {node} is {beat - now:.3f} s in the future on this "
                "node's clock (a stamp of its own clock domain is written before it is read; "
                f"allowed: the heartbeat expiry, {slack:g} s, for a write during the read)",
            )
    if s.deadline is not None and s.deadline > now + settings.last_call_timeout + slack:
        ahead = s.deadline - now
        _fail(
            key,
            "TypeOK",
            f"the last call of round {s.round} ends in {ahead:.3f} s, more than "
            f"last_call_timeout = {settings.last_call_timeout:g} s (plus {slack:g} s for a "
            "write during the read)",
        )
