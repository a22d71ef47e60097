"""``tracecheck replay-on-torch MODEL``: TLC's counterexample, then unchanged torch along it.

For one PyTorch-variant must-fail model: run TLC as ``tracecheck check`` does (the manifest's
row; a fixed seed so a liveness lasso is the same each time), check that it fails as the
manifest says, read the counterexample's message order (:mod:`.steps`), and follow it on torch
with the model's recipe (:mod:`.recipes`). The verdict is ``reproduced`` with the symptom torch
showed, ``not reproduced`` with what torch did instead, ``not reproducible`` with the reason
no torch run can follow the counterexample, or ``not replayed`` (no program follows it yet).
:func:`record` keeps the verdicts in ``spec/torch_replay.json``, the table ``make docs`` turns
into docs/models.md's column.
"""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from tracecheck.campaigns.replay_on_torch.recipes import (
    RECIPES,
    NotReplayed,
    NotReproducible,
    RendezvousReplay,
    RpcReplay,
)
from tracecheck.campaigns.replay_on_torch.steps import steps_of
from tracecheck.errors import TracecheckError
from tracecheck.runner.manifest import load_manifest, run_model

__all__ = [
    "TABLE",
    "ReplayResult",
    "pytorch_models",
    "record",
    "replay_model",
    "run_rendezvous",
    "run_rpc",
    "torch_column",
]

#: The replay table beside the manifests (spec root relative).
TABLE: Final = "torch_replay.json"

Verdict = Literal["reproduced", "not reproduced", "not reproducible", "not replayed"]


class ReplayResult(BaseModel):
    """One model's replay on torch."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    verdict: Verdict
    #: the symptom (reproduced), what torch did instead, or why no run can follow
    detail: str
    torch: str | None = None
    program: str | None = None
    plan: dict[str, JsonValue] = Field(default_factory=dict)
    facts: dict[str, JsonValue] = Field(default_factory=dict)
    seconds: float = 0.0


def pytorch_models(spec_root: Path) -> list[str]:
    """Every must-fail model whose cfg sets ``Variant = "PyTorch"``."""
    manifest = load_manifest(spec_root)
    names: list[str] = []
    for protocol, entry in manifest.entries():
        if entry.expect.value == "pass":
            continue
        cfg = (manifest.folder(protocol) / entry.cfg).read_text(encoding="utf-8")
        if any(
            line.split("=", 1)[-1].split("<-", 1)[-1].strip() == '"PyTorch"'
            for line in cfg.splitlines()
            if line.strip().startswith("Variant")
        ):
            names.append(entry.name)
    return names


def replay_model(name: str, spec_root: Path) -> ReplayResult:
    """Replay ``name`` on the installed torch (see the module docstring)."""
    recipe = RECIPES.get(name)
    if recipe is None:
        raise TracecheckError(
            f"{name}: no replay recipe (is it a PyTorch-variant must-fail model?)"
        )
    if isinstance(recipe, NotReproducible):
        return ReplayResult(model=name, verdict="not reproducible", detail=recipe.reason)
    if isinstance(recipe, NotReplayed):
        return ReplayResult(model=name, verdict="not replayed", detail=recipe.reason)
    manifest = load_manifest(spec_root)
    entries = {m.name: (p, m) for p, m in manifest.entries()}
    protocol, entry = entries[name]
    check = run_model(manifest, protocol, entry, seed=0, extra=("-fp", "0"))
    cex = check.result.counterexample
    if not check.ok or cex is None:
        raise TracecheckError(f"{name}: TLC did not fail as the manifest says: {check.problem}")
    steps = steps_of(cex)
    if isinstance(recipe, RendezvousReplay):
        return _rendezvous(name, recipe, steps)
    return _rpc(name, recipe, steps)


def _rpc(name: str, recipe: RpcReplay, steps: Any) -> ReplayResult:
    planned = recipe.plan(steps)
    if isinstance(planned, str):
        return ReplayResult(model=name, verdict="not reproduced", detail=planned)
    return run_rpc(name, recipe, planned)


def run_rpc(name: str, recipe: RpcReplay, planned: dict[str, Any]) -> ReplayResult:
    """Run ``recipe``'s program with the plan ``planned`` (from a counterexample or the
    table) and judge what torch showed."""
    from tracecheck.plugins.torch_rpc import FaultPlan, run_program  # noqa: PLC0415 - torch side

    plan = FaultPlan.model_validate(planned)
    seen = run_program(recipe.program, plan, world=recipe.world)
    common: dict[str, Any] = {
        "model": name,
        "torch": seen.torch,
        "program": recipe.program,
        "plan": plan.model_dump(mode="json"),
        "facts": seen.facts,
        "seconds": round(seen.seconds, 1),
    }
    if seen.problem:
        return ReplayResult(verdict="not reproduced", detail=seen.problem, **common)
    symptom = recipe.symptom(seen.facts)
    if symptom is None:
        detail = "torch did not show the symptom: " + json.dumps(seen.facts)[:400]
        return ReplayResult(verdict="not reproduced", detail=detail, **common)
    return ReplayResult(verdict="reproduced", detail=symptom, **common)


def _rendezvous(name: str, recipe: RendezvousReplay, steps: Any) -> ReplayResult:
    misfit = recipe.shape(steps)
    if misfit is not None:
        return ReplayResult(model=name, verdict="not reproduced", detail=misfit)
    return run_rendezvous(name, recipe)


def run_rendezvous(name: str, recipe: RendezvousReplay) -> ReplayResult:
    """Run ``recipe``'s forced schedule once (seed 1); its own check decides."""
    from tracecheck.plugins.torch_harness import (  # noqa: PLC0415 - the torch side
        DEFECT_SCENARIOS,
        REPLAY_SCENARIOS,
        run_scenario,
        torch_version,
    )

    scenario = {**DEFECT_SCENARIOS, **REPLAY_SCENARIOS}[recipe.scenario]
    started = datetime.now(UTC)
    with tempfile.TemporaryDirectory(prefix="replay-") as tmp:
        run = run_scenario(scenario, 1, Path(tmp))
    seconds = (datetime.now(UTC) - started).total_seconds()
    outcomes: dict[str, JsonValue] = {k: list(v) for k, v in run.outcomes.items()}
    common: dict[str, Any] = {
        "model": name,
        "torch": torch_version(),
        "program": recipe.scenario,
        "facts": {
            "outcomes": outcomes,
            "waiting": {k: list(v) for k, v in run.waiting.items()},
            "problems": list(run.problems),
        },
        "seconds": round(seconds, 1),
    }
    if run.problems:
        return ReplayResult(verdict="not reproduced", detail="; ".join(run.problems), **common)
    shown = ", ".join(f"{node}: {' '.join(o)}" for node, o in sorted(run.outcomes.items()))
    waited = {node: n for node, n in sorted(run.waiting.items()) if n}
    asked = f"; num_nodes_waiting() answers: {waited}" if recipe.shown and waited else ""
    lead = f"{recipe.shown}; " if recipe.shown else ""
    return ReplayResult(
        verdict="reproduced",
        detail=f"{lead}the forced schedule's returns: {shown}{asked}",
        **common,
    )


def record(results: list[ReplayResult], spec_root: Path) -> Path:
    """Merge ``results`` into ``spec_root/torch_replay.json`` (one row per model)."""
    path = spec_root / TABLE
    rows: dict[str, Any] = {}
    if path.is_file():
        rows = json.loads(path.read_text(encoding="utf-8")).get("models", {})
    for r in results:
        rows[r.model] = {
            "verdict": r.verdict,
            "detail": r.detail,
            "torch": r.torch,
            "program": r.program,
            "plan": r.plan,
        }
    body = {
        "generated_by": "tracecheck replay-on-torch --record",
        "models": dict(sorted(rows.items())),
    }
    path.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def torch_column(spec_root: Path) -> dict[str, str]:
    """docs/models.md's "on torch" column: model -> verdict and detail, from the table; every
    PyTorch-variant must-fail model missing from the table says so."""
    path = spec_root / TABLE
    rows: dict[str, Any] = {}
    if path.is_file():
        rows = json.loads(path.read_text(encoding="utf-8")).get("models", {})
    column = dict.fromkeys(
        pytorch_models(spec_root), "not replayed yet (run replay-on-torch --record)"
    )
    for name, row in rows.items():
        where = f" (torch {row['torch']})" if row.get("torch") else ""
        detail = str(row["detail"]).replace("|", "/")
        column[name] = f"**{row['verdict']}**{where}: {detail}"
    return column
