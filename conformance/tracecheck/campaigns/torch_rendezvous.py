"""``tracecheck campaign torch-rendezvous``: torch 2.13's own rendezvous handler, run and checked.

Each run is one scenario of :mod:`protoref.torch`, reached through the torch plug-in
(:mod:`tracecheck.plugins.torch_harness`): threads on a HashStore, TCPStore or
FileStore; processes on a TCPStore or FileStore, killed with SIGKILL; the forced schedules of
two torch defects, with the seed ``first_seed + i``; run ``i`` is the ``i``-th of
:func:`scenario_names`, cycling. Every trace is validated against DynamicRendezvous.tla and the
spec's invariants are checked on each accepted behaviour. A run's verdict is one of:

- ``accepted``: the spec explains the trace and every invariant holds;
- ``known-defect``: torch did what a known torch defect does, and the spec says so: the
  rank/world defect breaks only ``RankBelowWorldInv`` / ``WorldAgreementInv`` (in the forced
  schedule, and wherever random agents hit it); pytorch#111646's schedule is accepted as the
  ``PyTorch`` variant and rejected, at the survivor's sanitize, as the ``Reference`` variant
  (whose epilogue moves survivors to the wait list);
- ``failed``: anything else (a rejection, another invariant, a forced schedule that did not
  reproduce its defect, a scenario thread that failed).

torch absent or not 2.13 is the plug-in's ``TorchUnavailableError``, which the command reports
with its own exit code.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict

from tracecheck.protocols import load_mapping
from tracecheck.replay.validate import validate_files
from tracecheck.replay.verdicts import TraceVerdict, ValidationReport
from tracecheck.replay.witness import WitnessReport, WitnessVerdict, validate_checked
from tracecheck.traces.load import load_trace

__all__ = [
    "RANK_WORLD_INVARIANTS",
    "StoreCoverage",
    "TorchCampaignResult",
    "TorchRunVerdict",
    "run_torch_campaign",
    "scenario_names",
]

#: The invariants the rank/world defect breaks (DynamicRendezvous.tla), and nothing else does.
RANK_WORLD_INVARIANTS: Final = frozenset({"RankBelowWorldInv", "WorldAgreementInv"})

Outcome = Literal["accepted", "known-defect", "failed"]


class TorchRunVerdict(BaseModel):
    """One run: what ran, and what the checker made of its trace."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: str
    seed: int
    store: str
    processes: bool
    trace: str
    events: int
    outcome: Outcome
    #: the known defect's tag (``outcome == "known-defect"``)
    defect: str | None = None
    detail: str = ""
    #: what each node's next_rendezvous returned ("rank/world@round", "closed", ...)
    returned: dict[str, list[str]] = {}


class StoreCoverage(BaseModel):
    """Accepted (or known-defect) traces of one store: how many, events, actions exercised."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    store: str
    traces: int
    events: int
    actions: dict[str, int]


class TorchCampaignResult(BaseModel):
    """The campaign's runs, the validation report, the invariants, the per-store coverage."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    torch: str
    runs: list[TorchRunVerdict]
    report: ValidationReport
    invariants: WitnessReport
    stores: list[StoreCoverage]
    run_seconds: float
    trace_dir: str | None

    @property
    def failed(self) -> list[TorchRunVerdict]:
        return [r for r in self.runs if r.outcome == "failed"]

    @property
    def known_defects(self) -> Counter[str]:
        return Counter(r.defect for r in self.runs if r.defect is not None)


def scenario_names(*, processes: bool = True) -> list[str]:
    """Every scenario, in campaign order: threads, then the defect schedules, then processes."""
    names: list[str] = _harness().scenario_names(processes=processes)
    return names


def _harness() -> Any:
    """The torch plug-in (:mod:`tracecheck.plugins.torch_harness`): imported when a campaign
    runs, so that tracecheck's command line starts without protoref."""
    from tracecheck.plugins import torch_harness  # noqa: PLC0415 - protoref and torch, lazily

    return torch_harness


def run_torch_campaign(
    runs: int,
    first_seed: int,
    spec_root: Path,
    *,
    out: Path | None = None,
    names: Sequence[str] | None = None,
    explain: bool = True,
    on_run: Callable[[str, int, float], None] | None = None,
) -> TorchCampaignResult:
    """Run ``runs`` scenarios on the installed torch and check every trace (see the module
    docstring). ``names``: the scenarios to cycle through (default: all); ``on_run`` hears
    each run's scenario, seed and seconds as it ends (the command's progress lines)."""
    harness = _harness()
    harness.require_torch()
    order = list(names) if names is not None else scenario_names()
    folder = out or Path(tempfile.mkdtemp(prefix="campaign-torch-rendezvous-"))
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    done, broken = [], []
    # every run numbers its handlers from the same local id (as its own torchrun agent
    # process would): runs of one scenario get the same node names, hence the same spec
    # constants, and their traces share one TLC run instead of one each
    first_id = harness.next_local_id()
    with harness.node_processes():  # one fork server for every processes run's nodes
        for i in range(runs):
            name, seed = order[i % len(order)], first_seed + i
            began = time.monotonic()
            harness.restart_local_ids(first_id)
            try:
                done.append(harness.run(name, seed, folder))
            except Exception as err:  # a run that left no trace is a failed run, not the end
                broken.append(_no_trace(name, seed, err))
            if on_run is not None:
                on_run(name, seed, time.monotonic() - began)
    run_seconds = time.monotonic() - started
    mapping = load_mapping("rendezvous")
    _, report, witness = validate_checked(
        [d.trace for d in done], mapping, spec_root, invariants=True, explain=explain
    )
    assert witness is not None  # (asked for)
    reference = _reference_verdicts(done, folder, spec_root)
    verdicts = [
        _verdict(d, v, _witness_of(witness, v.source), reference.get(str(d.trace)))
        for d, v in zip(done, report.verdicts, strict=True)
    ] + broken
    # (read while the traces are there: with every run accepted the folder goes just below)
    stores = _coverage(done, verdicts[: len(done)])
    # known torch defects are expected in every campaign: only a failed run keeps its traces
    keep = out is not None or any(v.outcome == "failed" for v in verdicts)
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    return TorchCampaignResult(
        torch=str(harness.torch_version()),
        runs=verdicts,
        report=report,
        invariants=witness,
        stores=stores,
        run_seconds=run_seconds,
        trace_dir=str(folder) if keep else None,
    )


def _no_trace(name: str, seed: int, err: Exception) -> TorchRunVerdict:
    return TorchRunVerdict(
        scenario=name,
        seed=seed,
        store="?",
        processes=name.startswith("processes"),
        trace="",
        events=0,
        outcome="failed",
        detail=f"the run left no trace: {type(err).__name__}: {err}",
    )


def _witness_of(report: WitnessReport, source: str) -> WitnessVerdict | None:
    return next((w for w in report.verdicts if w.source == source), None)


def _reference_verdicts(done: Sequence[Any], folder: Path, spec_root: Path) -> dict[str, str]:
    """pytorch#111646's traces replayed as the ``Reference`` variant: trace -> what happened
    ("rejected at ..." or "accepted")."""
    pairs = []
    for d in done:
        if d.defect == _harness().PYTORCH_111646:
            lines = d.trace.read_text(encoding="utf-8").splitlines()
            header = json.loads(lines[0])
            header["settings"]["Variant"] = "Reference"
            copy = folder / f"{d.trace.stem}-as-reference.ndjson"
            copy.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
            pairs.append((str(d.trace), copy))
    if not pairs:
        return {}
    _, report = validate_files([p for _, p in pairs], load_mapping("rendezvous"), spec_root)
    out = {}
    for (source, _), v in zip(pairs, report.verdicts, strict=True):
        if v.accepted or v.rejection is None:
            out[source] = "accepted"
            continue
        out[source] = f"rejected at {v.rejection.what()}"
    return out


def _verdict(
    run: Any, v: TraceVerdict, w: WitnessVerdict | None, reference: str | None
) -> TorchRunVerdict:
    harness = _harness()
    PYTORCH_111646, RANK_WORLD = harness.PYTORCH_111646, harness.RANK_WORLD  # noqa: N806

    def made(outcome: Outcome, detail: str, defect: str | None = None) -> TorchRunVerdict:
        return TorchRunVerdict(
            scenario=run.scenario,
            seed=run.seed,
            store=run.store,
            processes=run.scenario.startswith("processes"),
            trace=str(run.trace),
            events=run.events,
            outcome=outcome,
            defect=defect,
            detail=detail,
            returned=run.outcomes,
        )

    if run.problems:
        return made("failed", "; ".join(run.problems))
    if not v.accepted:
        at = v.rejection
        where = at.what() if at else "?"
        return made("failed", f"rejected at {where}")
    broken = set() if w is None or w.clean else {n for b in w.breaches for n in b.invariants}
    if broken:
        where = f"{', '.join(sorted(broken))} false after event {w.event if w else '?'}"
        if broken <= RANK_WORLD_INVARIANTS:
            return made("known-defect", where, RANK_WORLD)
        return made("failed", where)
    if run.defect == RANK_WORLD:
        return made("failed", "the forced rank/world schedule broke no invariant")
    if run.defect == PYTORCH_111646:
        if reference is None or reference == "accepted":
            return made("failed", "the Reference variant accepted the #111646 schedule")
        detail = f"accepted as PyTorch; the Reference variant: {reference}"
        return made("known-defect", detail, PYTORCH_111646)
    return made("accepted", "")


def _coverage(done: Sequence[Any], verdicts: Sequence[TorchRunVerdict]) -> list[StoreCoverage]:
    """Per store: the traces the spec explains (accepted or a known defect), their events, and
    how often each spec action occurs in them."""
    by_store: dict[str, list[Any]] = {}
    for d, v in zip(done, verdicts, strict=True):
        if v.outcome != "failed":
            by_store.setdefault(d.store, []).append(d)
    out = []
    for store, runs in sorted(by_store.items()):
        actions: Counter[str] = Counter()
        events = 0
        for d in runs:
            trace = load_trace(d.trace)
            actions.update(e.event for e in trace.events)
            events += len(trace.events)
        out.append(
            StoreCoverage(store=store, traces=len(runs), events=events, actions=dict(actions))
        )
    return out
