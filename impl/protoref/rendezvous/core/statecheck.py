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
- the codec has already bounded sizes, strings and numbers (no negatives, finite times).
"""

from __future__ import annotations

from protoref.rendezvous.core.errors import RendezvousStateError
from protoref.rendezvous.core.state import RendezvousSettings, RendezvousState

__all__ = ["check_state", "complete_ranks_problem"]


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
