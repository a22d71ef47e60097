"""Replay a model on torch with the plan ``spec/torch_replay.json`` recorded for it, without
TLC: what the torch tests use for models whose TLC run alone takes most of a minute, and a
quick way to see whether a new torch release still shows a recorded symptom. The plan was
derived from the model's counterexample when it was recorded (``replay-on-torch --record``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracecheck.campaigns.replay_on_torch.recipes import RECIPES, RendezvousReplay, RpcReplay
from tracecheck.campaigns.replay_on_torch.run import (
    TABLE,
    ReplayResult,
    run_rendezvous,
    run_rpc,
)
from tracecheck.errors import TracecheckError

__all__ = ["recorded_plan", "replay_recorded"]


def recorded_plan(name: str, spec_root: Path) -> dict[str, Any]:
    """The plan the table holds for ``name`` (a TracecheckError when it holds none)."""
    path = spec_root / TABLE
    rows = json.loads(path.read_text(encoding="utf-8")).get("models", {})
    row = rows.get(name)
    if not isinstance(row, dict) or row.get("verdict") != "reproduced":
        raise TracecheckError(f"{name}: {path.name} records no reproduced run to repeat")
    plan = row.get("plan", {})
    if not isinstance(plan, dict):
        raise TracecheckError(f"{name}: the recorded plan is not an object: {plan!r}")
    return plan


def replay_recorded(name: str, spec_root: Path) -> ReplayResult:
    """Run ``name``'s recipe on torch with its recorded plan."""
    recipe = RECIPES.get(name)
    if isinstance(recipe, RpcReplay):
        return run_rpc(name, recipe, recorded_plan(name, spec_root))
    if isinstance(recipe, RendezvousReplay):
        recorded_plan(name, spec_root)  # the table must record it reproduced
        return run_rendezvous(name, recipe)
    raise TracecheckError(f"{name}: no torch run to repeat (recipe {type(recipe).__name__})")
