"""Campaigns: simulate N seeded runs of a protocol's implementation, validate every trace.

Each run's seed is ``first_seed + i``, so any rejected run is reproduced by its seed alone
(`python -m protoref.rref.sim.simulator --seed S`). Traces go to a folder of the caller's choice,
or to a temporary one that is removed afterwards unless a trace was rejected. A failed
campaign's traces, generated modules and report are kept like a failed validation's
(:func:`keep_campaign`, through :mod:`tracecheck.replay.artifacts`).

A campaign survives its implementation: a run that raises (a planted bug, a real one) keeps the
trace it wrote up to the error, which is validated like the others, and the run is reported
with its seed and exception (:class:`RunFailure`); the campaign goes on. A run that raised did
not finish, so its trace has no end line and no quiescence is asked of it; the run is a failure
of the campaign whatever its trace's verdict. A trace the checker cannot read at all (a format
error, no event logged) is reported the same way, with what is wrong with it.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from tracecheck.protocols import load_mapping, load_simulator
from tracecheck.protocols.mapping import ProtocolMap
from tracecheck.replay.artifacts import keep_failures, rejections
from tracecheck.replay.verdicts import ValidationReport
from tracecheck.replay.witness import WitnessReport, validate_checked
from tracecheck.traces.load import TraceFormatError, load_trace, peek_trace

__all__ = [
    "CampaignResult",
    "RunFailure",
    "campaign_failure_note",
    "keep_campaign",
    "run_campaign",
]

#: The most of an exception's message a campaign keeps (a bug's error may print a whole state).
_SHOWN = 500


class RunFailure(BaseModel):
    """A run whose implementation raised, or whose trace the checker could not read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int
    #: ``TypeName: message`` of what the implementation raised, if it raised.
    exception: str | None = None
    #: Why its trace has no verdict (a format error, no event logged), if it has none.
    unreadable: str | None = None
    #: The trace file (absent when the run wrote nothing).
    trace: str | None = None


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
    #: Runs that raised or left an unreadable trace, by seed.
    failures: list[RunFailure] = []
    #: The seed of each verdict of ``report`` (its traces are those that could be read).
    verdict_seeds: list[int] = []

    @property
    def rejected_seeds(self) -> list[int]:
        return [
            s
            for s, v in zip(self.verdict_seeds, self.report.verdicts, strict=True)
            if not v.accepted
        ]

    @property
    def raised_seeds(self) -> list[int]:
        return [f.seed for f in self.failures if f.exception is not None]

    @property
    def ok(self) -> bool:
        """Every run finished and its trace was accepted (and clean, when checked)."""
        clean = self.invariants is None or self.invariants.all_clean
        return not self.failures and self.report.all_accepted and clean

    def summary(self) -> str:
        """One line of counts: runs, accepted, rejected by kind, raised, unreadable, invariants."""
        verdicts = self.report.verdicts
        kinds = Counter(v.rejection.kind for v in verdicts if v.rejection is not None)
        raised = set(self.raised_seeds)
        raised_rejected = sum(
            1
            for s, v in zip(self.verdict_seeds, verdicts, strict=True)
            if s in raised and not v.accepted
        )
        parts = [
            f"{len(self.seeds)} runs",
            f"{sum(v.accepted for v in verdicts)} accepted",
            f"{len(verdicts) - sum(v.accepted for v in verdicts)} rejected"
            + (f" ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})" if kinds else ""),
            f"{len(raised)} raised"
            + (f" ({raised_rejected} of their traces rejected)" if raised else ""),
        ]
        unreadable = sum(f.unreadable is not None for f in self.failures)
        if unreadable:
            parts.append(f"{unreadable} unreadable")
        if self.invariants is not None:
            dirty = sum(not v.clean for v in self.invariants.verdicts)
            parts.append(f"{dirty} breaking an invariant")
        return ", ".join(parts)


def run_campaign(
    protocol: str,
    runs: int,
    first_seed: int,
    steps: int,
    spec_root: Path,
    *,
    out: Path | None = None,
    explain: bool = True,
    explain_limit: int | None = None,
    invariants: bool = False,
    on_run: Callable[[int, float], None] | None = None,
) -> CampaignResult:
    """Simulate ``runs`` seeded runs and validate all their traces in one batch; ``on_run``
    hears each run's seed and seconds as it ends (the command's progress lines)."""
    simulate = load_simulator(protocol)
    mapping = load_mapping(protocol)
    folder = out or Path(tempfile.mkdtemp(prefix=f"campaign-{protocol}-"))
    keep = out is not None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        seeds = list(range(first_seed, first_seed + runs))
        started = time.monotonic()
        failures: dict[int, RunFailure] = {}
        paths: dict[int, Path] = {}
        for seed in seeds:
            path = folder / f"{protocol}-seed{seed}.ndjson"
            began = time.monotonic()
            try:
                simulate(seed, steps, path)
            except Exception as exc:  # the implementation's error is a finding, not ours
                failures[seed] = RunFailure(
                    seed=seed, exception=_text(exc), trace=str(path) if path.exists() else None
                )
            if on_run is not None:
                on_run(seed, time.monotonic() - began)
            if path.exists():
                paths[seed] = path
        simulated = time.monotonic() - started
        readable = _readable(paths, failures)
        verdict_seeds, report, witness = _validate(
            readable,
            failures,
            mapping,
            spec_root,
            explain=explain,
            explain_limit=explain_limit,
            invariants=invariants,
        )
        result = CampaignResult(
            protocol=protocol,
            seeds=seeds,
            trace_dir=str(folder),
            simulate_seconds=simulated,
            report=report,
            invariants=witness,
            failures=[failures[s] for s in sorted(failures)],
            verdict_seeds=verdict_seeds,
        )
        keep = keep or not result.ok
    finally:  # (an interrupt too: a temporary folder never outlives the campaign)
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    return result if keep else result.model_copy(update={"trace_dir": None})


def _text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _readable(paths: dict[int, Path], failures: dict[int, RunFailure]) -> dict[int, Path]:
    """The traces whose header the checker reads and that logged an event; the others are
    recorded as unreadable in ``failures`` (with the run's exception, if it raised)."""
    readable: dict[int, Path] = {}
    for seed, path in paths.items():
        try:
            peek = peek_trace(path)
        except TraceFormatError as exc:
            problem: str | None = str(exc)
        else:
            problem = None if peek.lines > 0 else "no event logged"
        if problem is None:
            readable[seed] = path
            continue
        failure = failures.get(seed, RunFailure(seed=seed, trace=str(path)))
        failures[seed] = failure.model_copy(update={"unreadable": problem})
    return readable


def _validate(
    paths: dict[int, Path],
    failures: dict[int, RunFailure],
    mapping: ProtocolMap,
    spec_root: Path,
    *,
    explain: bool,
    explain_limit: int | None,
    invariants: bool,
) -> tuple[list[int], ValidationReport, WitnessReport | None]:
    """Validate the readable traces (their seeds come back, in the report's order), and with
    ``invariants`` check them on the accepted behaviours; a trace that turns out malformed (a
    format error while it is loaded) is moved to ``failures`` and the rest validated again."""
    remaining = dict(paths)
    while True:
        try:
            _, report, witness = validate_checked(
                list(remaining.values()),
                mapping,
                spec_root,
                invariants=invariants,
                explain=explain,
                explain_limit=explain_limit,
            )
        except TraceFormatError as exc:
            seed = next((s for s, p in remaining.items() if str(p) == exc.source), None)
            if seed is None or len(remaining) == 1:
                raise
            del remaining[seed]
            failure = failures.get(seed, RunFailure(seed=seed, trace=exc.source))
            failures[seed] = failure.model_copy(update={"unreadable": str(exc)[:_SHOWN]})
        else:
            return list(remaining), report, witness


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
    raised = "; ".join(f"seed {f.seed}: {f.exception or f.unreadable}" for f in result.failures)
    return (
        f"rejected seeds {result.rejected_seeds} ({rejections(result.report)})"
        + (f"; failed runs: {raised}" if raised else "")
        + f"; traces, modules and report in {kept}"
    )
