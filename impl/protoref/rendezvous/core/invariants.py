"""DynamicRendezvous.tla's invariants and action properties, checked on live states.

The simulator calls :func:`check_state` after every step and :func:`check_store_step` whenever
the store changes; a violation raises :class:`InvariantViolationError` named as in the spec.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from protoref.errors import InvariantViolationError
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings, RendezvousState, View

__all__ = ["check_state", "check_store_step"]


def _fail(name: str, detail: str, seed: int | None) -> None:
    raise InvariantViolationError(name, detail, seed=seed)


def _disjoint(s: RendezvousState) -> bool:
    parts = s.participants.keys()
    return (
        not parts & s.wait_list
        and not parts & s.redundancy_list
        and not s.wait_list & s.redundancy_list
    )


def _sorted_ranks(s: RendezvousState) -> dict[NodeDesc, int]:
    return {n: i for i, n in enumerate(sorted(s.participants))}


def check_state(
    cur: RendezvousState,
    copies: Iterable[RendezvousState],
    views: dict[NodeDesc, View],
    settings: RendezvousSettings,
    *,
    seed: int | None = None,
) -> None:
    """The state invariants (``...Inv``) on the store's state, the copies and the views."""
    count = len(cur.participants)
    if count > settings.max_nodes:
        _fail("ParticipantsAtMostMaxInv", f"{count} participants", seed)
    if not _disjoint(cur) or not all(_disjoint(c) for c in copies):
        _fail("ListsDisjointInv", "a node is in two of the lists", seed)
    if cur.complete:
        ranks = cur.participants
        if len(set(ranks.values())) != count:
            _fail("RanksDistinctInv", f"ranks {dict(ranks)}", seed)
        order = sorted(ranks)
        if any(ranks[a] >= ranks[b] for a, b in itertools.pairwise(order)):
            _fail("RanksFollowNodeOrderInv", f"ranks {dict(ranks)}", seed)
        if cur.deadline is not None:
            _fail("DeadlineArmedInv", "a complete round has a last-call deadline", seed)
    elif (cur.deadline is not None) != (count >= settings.min_nodes):
        _fail("DeadlineArmedInv", f"deadline {cur.deadline} with {count} participants", seed)
    _check_views(views, seed)


def _check_views(views: dict[NodeDesc, View], seed: int | None) -> None:
    """What ``next_rendezvous`` returned: ``RankBelowWorldInv``, ``WorldAgreementInv``,
    ``ReturnedRanksDistinctInv``."""
    for n, view in views.items():
        rank = view.ranks.get(n)
        if rank is None or rank >= len(view.ranks):
            size = len(view.ranks)
            detail = f"{n} returned rank {rank} in a world of {size} (round {view.round})"
            _fail("RankBelowWorldInv", detail, seed)
        for m, other in views.items():
            if m == n or view.round != other.round:
                continue
            if dict(view.ranks) != dict(other.ranks):
                _fail("WorldAgreementInv", f"{n} and {m} returned round {view.round} apart", seed)
            if view.ranks.get(n) == other.ranks.get(m):
                _fail("ReturnedRanksDistinctInv", f"{n} and {m} share a rank", seed)


def check_store_step(
    old: RendezvousState,
    new: RendezvousState,
    settings: RendezvousSettings,
    *,
    seed: int | None = None,
) -> None:
    """The action properties (``...Prop``, ``[][A]_store``) on one change of the store."""
    if old.closed and not new.closed:
        _fail("ClosedStableProp", "closed went back", seed)
    if new.round < old.round:
        _fail("RoundMonotoneProp", f"round {old.round} -> {new.round}", seed)
    if new.round != old.round and not (old.complete and new.round == old.round + 1):
        _fail("RoundAdvanceProp", f"round {old.round} -> {new.round}", seed)
    if new.complete and (not old.complete or new.round != old.round):
        count = len(new.participants)
        if not settings.min_nodes <= count <= settings.max_nodes:
            _fail("CompletionCountProp", f"completed with {count} participants", seed)
        if dict(new.participants) != _sorted_ranks(new):
            _fail("CompletionRanksProp", f"ranks {dict(new.participants)}", seed)
    same_round = old.complete and new.round == old.round
    if same_round and (not new.complete or dict(new.participants) != dict(old.participants)):
        _fail("CompleteRoundFrozenProp", "a complete round changed its members", seed)
