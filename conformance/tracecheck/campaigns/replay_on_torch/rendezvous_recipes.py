"""How each PyTorch-variant rendezvous must-fail model is replayed on torch, or why not."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from tracecheck.campaigns.replay_on_torch.recipe_types import (
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


def _waitlist_shape(steps: Sequence[Step]) -> str | None:
    names = [s.action for s in steps]
    listed = names.index("AddToWaitList") if "AddToWaitList" in names else None
    if listed is None:
        return "the counterexample puts no node on the wait list"
    later = names[listed:]
    if "RemoveFromParticipants" not in later or "AddToParticipants" not in later:
        return "the counterexample does not empty and refill the round after the wait listing"
    return None


def _bootstrap_shape(steps: Sequence[Step]) -> str | None:
    # BootSpec's steps are all labelled Action: read what they change
    built = next((i for i, s in enumerate(steps) if "hasServer" in s.changed), None)
    if built is None or not any("awaiting" in s.changed for s in steps[built + 1 :]):
        return "the counterexample has no node awaiting MASTER_ADDR after rank 0 cached its info"
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
    "MCDynamicRendezvous_waitlist_full": RendezvousReplay(
        "waitlist_full",
        _waitlist_shape,
        shown=(
            "the wait-listed node stayed in the wait list of the complete, full round 1 "
            "(torch's state, read while it waited) and num_nodes_waiting() answered 1"
        ),
    ),
    "MCDynamicRendezvous_live_lastcall_long": NotReproducible(
        "a liveness lasso (a lone joiner rejoining for ever): a finite run shows rejoins, not "
        "that no round ever completes"
    ),
    "MCDynamicRendezvousBootstrap_d7": RendezvousReplay(
        "bootstrap_d7",
        _bootstrap_shape,
        shown=(
            "with TCPStore sharing on, rank 0 returned its cached bootstrap info in round 1 and "
            "wrote no MASTER_ADDR there; the node whose first round was 1 waited for it until "
            "its store's timeout"
        ),
    ),
}
