"""Planted bugs: broken variants of the rendezvous implementation, for proving the checker.

Each :class:`Fault` is a bug of the kind the dynamic rendezvous guards against (the issue's list
and the spec's must-fail models). :func:`inject` plants one for the duration of a ``with``
block by replacing one function or method of the implementation (the store's compare-and-set,
a business function, the join op's decision or the holder's sanitize); outside the block the
implementation is the correct one, and no module is edited.

The simulator keeps running with the bug (it checks no invariant unless asked), so
:func:`run_with_fault` returns the whole trace; the checker must reject it at the event where
the bug first shows.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Final
from unittest import mock

from protoref.rendezvous.adapters.store import InMemoryStore, Versioned
from protoref.rendezvous.core import actions, ops, statecheck
from protoref.rendezvous.core.ops import Action
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings, RendezvousState
from protoref.rendezvous.runtime import holder
from protoref.rendezvous.sim.simulator import SimConfig, Simulator
from protoref.tracing import JsonlSink

__all__ = ["FAULTS", "Fault", "inject", "ranks_any_order", "run_with_fault"]


class Fault(enum.Enum):
    """A planted bug. The value is its name in test ids."""

    #: compare_set ignores the token: a node's stale copy overwrites another node's write
    #: (G2, the lost update of the spec's MCDynamicRendezvous_lost_update).
    IGNORE_TOKEN = "ignore-token"
    #: _mark_rendezvous_complete ranks participants by arrival (dict order) instead of
    #: sorted(participants) (G1, RanksFollowNodeOrderInv).
    RANK_BY_ARRIVAL = "rank-by-arrival"
    #: The join op completes the round as soon as a lone participant would wait, below
    #: min_nodes (G1, CompletionCountProp).
    COMPLETE_BELOW_MIN = "complete-below-min"
    #: The epilogue forgets to bump the round when a participant leaves a complete round
    #: (RoundAdvanceProp: the next round reuses the old round number).
    FORGET_ROUND_BUMP = "forget-round-bump"
    #: torch 2.13's epilogue: a complete round that loses some of its participants stays
    #: complete, at the same number, with the rest (Variant "PyTorch"; the Reference spec the
    #: traces are checked against ends the round: CompleteRoundFrozenProp, RankBelowWorldInv).
    TORCH_EPILOGUE = "torch-epilogue"
    #: sanitize keeps nodes whose heartbeat expired (G5: a dead node is never removed).
    KEEP_DEAD_NODE = "keep-dead-node"


FAULTS: Final = tuple(Fault)

#: The workload of the fault runs: the campaign's (4 nodes, min 2, max 3, close from tick 6).
CONFIG: Final = SimConfig(nodes=4, min_nodes=2, max_nodes=3, close_after=6)


def _cas_ignoring_token(
    original: Callable[[InMemoryStore, str, int | None, bytes], tuple[bool, Versioned]],
) -> Callable[[InMemoryStore, str, int | None, bytes], tuple[bool, Versioned]]:
    def compare_set(
        self: InMemoryStore, key: str, token: int | None, value: bytes
    ) -> tuple[bool, Versioned]:
        current = self.get(key)
        return original(self, key, None if current is None else current.token, value)

    return compare_set


def _complete_by_arrival(s: RendezvousState) -> RendezvousState:
    ranks = {n: rank for rank, n in enumerate(s.participants)}  # insertion order, not sorted
    return s.replace(complete=True, deadline=None, participants=ranks)


def _join_completing_below_min(
    original: Callable[..., Action],
) -> Callable[..., Action]:
    def join_decision(
        s: RendezvousState,
        node: NodeDesc,
        settings: RendezvousSettings,
        now: float,
        deadline: float,
        *,
        uncounted: frozenset[NodeDesc] = frozenset(),
    ) -> Action:
        action = original(s, node, settings, now, deadline, uncounted=uncounted)
        lone = node in s.participants and len(s.participants) < settings.min_nodes
        if lone and not s.complete and action in (Action.SYNC, Action.KEEP_ALIVE):
            return Action.MARK_RENDEZVOUS_COMPLETE
        return action

    return join_decision


def _epilogue_without_bump(s: RendezvousState, settings: RendezvousSettings) -> RendezvousState:
    if s.complete:  # the round number stays
        waiting = s.wait_list | s.participants.keys()
        return s.replace(complete=False, participants={}, wait_list=waiting)
    if len(s.participants) < settings.min_nodes:
        return s.replace(deadline=None)
    return s


def _torch_epilogue(s: RendezvousState, settings: RendezvousSettings) -> RendezvousState:
    if s.complete:  # 2.13: advance only when the last participant left
        return s if s.participants else s.replace(complete=False, round=s.round + 1)
    if len(s.participants) < settings.min_nodes:
        return s.replace(deadline=None)
    return s


def ranks_any_order(s: RendezvousState, settings: RendezvousSettings) -> str | None:
    """The holder's own check of the ranks, loosened to any permutation of ``0..n-1``, so that
    the planted ranking reaches the trace and the checker (which must find it) instead of
    being refused by the other nodes' holders first (statecheck)."""
    if sorted(s.participants.values()) == list(range(len(s.participants))):
        return None
    return f"complete round {s.round} has ranks that are not a permutation"


def _torch_complete_ranks(s: RendezvousState, settings: RendezvousSettings) -> str | None:
    """Variant "PyTorch"'s complete round: it may have lost members, whose ranks stay gaps, so
    its ranks need only increase in node order and stay below ``max_nodes``."""
    ranks = [s.participants[n] for n in sorted(s.participants)]
    if all(a < b for a, b in itertools.pairwise(ranks)) and all(
        0 <= r < settings.max_nodes for r in ranks
    ):
        return None
    return f"complete round {s.round} has ranks {ranks[:8]} in node order (Variant PyTorch)"


def _keep_everyone(s: RendezvousState, settings: RendezvousSettings, now: float) -> RendezvousState:
    return s


def _patches(fault: Fault) -> list[tuple[Any, str, Any]]:
    match fault:
        case Fault.IGNORE_TOKEN:
            broken = _cas_ignoring_token(InMemoryStore.compare_set)
            return [(InMemoryStore, "compare_set", broken)]
        case Fault.RANK_BY_ARRIVAL:
            return [
                (actions, "mark_rendezvous_complete", _complete_by_arrival),
                (statecheck, "complete_ranks_problem", ranks_any_order),
            ]
        case Fault.COMPLETE_BELOW_MIN:
            return [(ops, "join_decision", _join_completing_below_min(ops.join_decision))]
        case Fault.FORGET_ROUND_BUMP:
            return [(actions, "epilogue", _epilogue_without_bump)]
        case Fault.TORCH_EPILOGUE:
            # and the states it writes: a complete round with gaps in its ranks
            return [
                (actions, "epilogue", _torch_epilogue),
                (statecheck, "complete_ranks_problem", _torch_complete_ranks),
            ]
        case Fault.KEEP_DEAD_NODE:
            return [(holder, "sanitize", _keep_everyone)]


@contextmanager
def inject(fault: Fault) -> Iterator[None]:
    """Plant ``fault`` for the duration of the block."""
    with ExitStack() as stack:
        for target, name, replacement in _patches(fault):
            stack.enter_context(mock.patch.object(target, name, replacement))
        yield


def run_with_fault(fault: Fault | None, seed: int, steps: int, out: Path) -> None:
    """One seeded simulator run with ``fault`` planted (``None``: the correct implementation),
    its trace written to ``out``."""
    with ExitStack() as stack:
        if fault is not None:
            stack.enter_context(inject(fault))
        Simulator(seed, CONFIG, sink=JsonlSink(str(out))).run(steps)
