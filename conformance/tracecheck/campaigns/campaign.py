"""Campaigns: simulate N seeded runs of a protocol's implementation, validate every trace.

Each run's seed is ``first_seed + i``, so any rejected run is reproduced by its seed alone
(`python -m protoref.rref.simulator --seed S`). Traces go to a folder of the caller's choice,
or to a temporary one that is removed afterwards unless a trace was rejected.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from tracecheck.protocols import load_mapping, load_simulator
from tracecheck.replay.validate import ValidationReport, validate_files
from tracecheck.replay.witness import WitnessReport, check_invariants

__all__ = ["CampaignResult", "run_campaign"]


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
