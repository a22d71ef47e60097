"""How each PyTorch-variant rendezvous must-fail model is replayed on torch, or why not."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from tracecheck.campaigns.replay_on_torch.recipe_types import (
    NO_PROGRAM,
    NotReplayed,
    NotReproducible,
    Recipe,
    RendezvousReplay,
)
from tracecheck.campaigns.replay_on_torch.steps import Step

__all__ = ["RENDEZVOUS_RECIPES"]


def _leave_complete_shape(steps: Sequence[Step]) -> str | None:
    names = [s.action for s in steps]
    if not any("Exit" in n or "Leave" in n or "Remove" in n for n in names):
        return "the counterexample has no participant leaving the complete round"
    return None


def _crash_shape(steps: Sequence[Step]) -> str | None:
    if not any("Crash" in s.action for s in steps):
        return "the counterexample has no crash"
    return None


RENDEZVOUS_RECIPES: Final[dict[str, Recipe]] = {
    "MCDynamicRendezvous_pytorch_leave_complete_rank": RendezvousReplay(
        "defect_rank_world", _leave_complete_shape
    ),
    "MCDynamicRendezvous_pytorch_leave_complete_world": RendezvousReplay(
        "defect_rank_world", _leave_complete_shape
    ),
    "MCDynamicRendezvous_pytorch_leave_complete_round": RendezvousReplay(
        "defect_rank_world", _leave_complete_shape
    ),
    "MCDynamicRendezvous_pytorch111646": RendezvousReplay("defect_pytorch_111646", _crash_shape),
    "MCDynamicRendezvous_waitlist_full": NotReplayed(NO_PROGRAM + " (notes, Difference 6)"),
    "MCDynamicRendezvous_live_lastcall_long": NotReproducible(
        "a liveness lasso (a lone joiner rejoining for ever): a finite run shows rejoins, not "
        "that no round ever completes"
    ),
    "MCDynamicRendezvousBootstrap_d7": NotReplayed(
        NO_PROGRAM + " (TCPStore sharing: the elastic agent's bootstrap, not the handler)"
    ),
}
