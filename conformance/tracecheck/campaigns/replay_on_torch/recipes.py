"""How each PyTorch-variant must-fail model is replayed on torch, or why it cannot be: the
table of :mod:`.rref_recipes`, :mod:`.autograd_recipes` and :mod:`.rendezvous_recipes` (the
kinds of recipe are in :mod:`.recipe_types`)."""

from __future__ import annotations

from typing import Final

from tracecheck.campaigns.replay_on_torch.autograd_recipes import AUTOGRAD_RECIPES
from tracecheck.campaigns.replay_on_torch.recipe_types import (
    NotReplayed,
    NotReproducible,
    Recipe,
    RendezvousReplay,
    RpcReplay,
)
from tracecheck.campaigns.replay_on_torch.rendezvous_recipes import RENDEZVOUS_RECIPES
from tracecheck.campaigns.replay_on_torch.rref_recipes import RREF_RECIPES

__all__ = ["RECIPES", "NotReplayed", "NotReproducible", "Recipe", "RendezvousReplay", "RpcReplay"]

RECIPES: Final[dict[str, Recipe]] = RREF_RECIPES | AUTOGRAD_RECIPES | RENDEZVOUS_RECIPES
