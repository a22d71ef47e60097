"""Campaigns: simulate N seeded runs of a protocol's implementation, validate every trace.

Each run's seed is ``first_seed + i``, so any rejected run is reproduced by its seed alone
(`python -m protoref.rref.simulator --seed S`). Traces go to a folder of the caller's choice,
or to a temporary one that is removed afterwards unless a trace was rejected. A failed
campaign's traces, generated modules and report are kept like a failed validation's
(:func:`keep_campaign`, through :mod:`tracecheck.replay.artifacts`).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from tracecheck.protocols import load_mapping, load_simulator
from tracecheck.replay.artifacts import keep_failures, rejections
from tracecheck.replay.validate import validate_files
from tracecheck.replay.verdicts import ValidationReport
from tracecheck.replay.witness import WitnessReport, check_invariants
from tracecheck.traces.load import load_trace

__all__ = ["CampaignResult", "campaign_failure_note", "keep_campaign", "run_campaign"]


class CampaignResult(BaseModel):
    """What a campaign did: seeds, where the traces are, the validation report."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    protocol: str
    seeds: list[int]
    trace_dir: str | None
    simulate_seconds: float
    report: ValidationReport
    #: The spec's invariants on each accepted behaviour, when the campaign checked them.
    invariants: WitnessReport | None = None

    @property
    def rejected_seeds(self) -> list[int]:
        return [s for s, v in zip(self.seeds, self.report.verdicts, strict=True) if not v.accepted]


def run_campaign(
    protocol: str,
    runs: int,
    first_seed: int,
    steps: int,
    spec_root: Path,
    *,
    out: Path | None = None,
    explain: bool = True,
    invariants: bool = False,
) -> CampaignResult:
    """Simulate ``runs`` seeded runs and validate all their traces in one batch."""
    simulate = load_simulator(protocol)
    mapping = load_mapping(protocol)
    folder = out or Path(tempfile.mkdtemp(prefix=f"campaign-{protocol}-"))
    folder.mkdir(parents=True, exist_ok=True)
    seeds = list(range(first_seed, first_seed + runs))
    started = time.monotonic()
    paths = []
    for seed in seeds:
        path = folder / f"{protocol}-seed{seed}.ndjson"
        simulate(seed, steps, path)
        paths.append(path)
    simulated = time.monotonic() - started
    traces, report = validate_files(paths, mapping, spec_root, explain=explain)
    witness = check_invariants(traces, report, mapping, spec_root) if invariants else None
    keep = (
        out is not None
        or not report.all_accepted
        or (witness is not None and not witness.all_clean)
    )
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    return CampaignResult(
        protocol=protocol,
        seeds=seeds,
        trace_dir=str(folder) if keep else None,
        simulate_seconds=simulated,
        report=report,
        invariants=witness,
    )


def keep_campaign(
    result: CampaignResult, spec_root: Path, *, root: Path | None = None
) -> Path | None:
    """:func:`~tracecheck.replay.artifacts.keep_failures` for a campaign (its failing traces are
    still in its folder)."""
    witness = result.invariants
    sources = {v.source for v in result.report.verdicts if not v.accepted}
    if witness is not None:
        sources |= {v.source for v in witness.verdicts if not v.clean}
    traces = [load_trace(Path(s)) for s in sorted(sources)]
    mapping = load_mapping(result.protocol)
    return keep_failures(traces, result.report, mapping, spec_root, witness=witness, root=root)


def campaign_failure_note(result: CampaignResult, spec_root: Path) -> str:
    """:func:`~tracecheck.replay.artifacts.failure_note` for a campaign."""
    kept = keep_campaign(result, spec_root)
    return (
        f"rejected seeds {result.rejected_seeds} ({rejections(result.report)}); "
        f"traces, modules and report in {kept}"
    )
