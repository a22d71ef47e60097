"""The session loop of the black-box torch campaigns (``torch-rref``, ``torch-autograd``).

Run ``i`` is one session of :mod:`protoref.torch.rpc` for the protocol with seed
``first_seed + i``; its merged trace is parsed with the protocol's op table and replayed by its
checker (at most ``hidden`` unobserved steps between two observed events). A run's verdict:
``failed`` when the session failed, TLC could not decide or the full bounded search rejected the
trace; otherwise ``known-defect`` when the protocol's classifier names a known torch defect in
the accepted trace, else ``accepted``. Coverage (observed events per op, spec actions in the
accepting behaviours) counts the accepted traces only.

What differs between the campaigns is a :class:`TorchBlackBox`: the protocol, its ops, spec
actions, checker and defect classifier, and its run and result models (each campaign keeps
its own JSON fields for the defects it reports).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, Self, TypeVar

from pydantic import BaseModel, ConfigDict

from tracecheck.protocols.blackbox import BlackBoxTrace, OpTable, load_blackbox
from tracecheck.replay.hidden import HiddenVerdict
from tracecheck.replay.tlcrun import CheckerError

__all__ = [
    "Outcome",
    "TorchBlackBox",
    "TorchSessionResult",
    "TorchSessionRun",
]

Outcome = Literal["accepted", "known-defect", "failed"]


class TorchSessionRun(BaseModel):
    """One session's verdict; a campaign's subclass adds the field of its known defects."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int
    faults: str
    scenarios: list[str]
    events: int
    outcome: Outcome
    detail: str = ""
    states: int = 0
    session_seconds: float = 0.0
    check_seconds: float = 0.0

    @classmethod
    def of(cls, defects: list[str], **fields: Any) -> Self:
        """The run with the known defects ``defects`` (empty: none) in the subclass's field."""
        raise NotImplementedError

    @property
    def known(self) -> list[str]:
        """The known torch defects the run showed."""
        raise NotImplementedError


RunT = TypeVar("RunT", bound=TorchSessionRun)


class TorchSessionResult(BaseModel, Generic[RunT]):
    model_config = ConfigDict(frozen=True, extra="forbid")

    torch: str
    hidden: int
    runs: list[RunT]
    #: observed events per op over the accepted traces
    coverage: dict[str, int]
    #: spec action -> steps of it in the accepting behaviours (observed and searched)
    actions: dict[str, int]
    seconds: float
    trace_dir: str | None = None

    @property
    def failed(self) -> list[RunT]:
        return [r for r in self.runs if r.outcome == "failed"]


ResultT = TypeVar("ResultT", bound=TorchSessionResult[Any])


@dataclass(frozen=True)
class TorchBlackBox(Generic[ResultT]):
    """What one black-box torch campaign plugs into the session loop."""

    #: the session's protocol (``protoref.torch.rpc``), also the traces' file prefix
    protocol: Literal["rref", "autograd"]
    ops: OpTable
    #: the spec's actions (the disjuncts of Next), reported 0 when never taken
    actions: Sequence[str]
    #: replays one parsed trace: (trace, spec_root, hidden) -> TLC's verdict
    check: Callable[[BlackBoxTrace, Path, int], HiddenVerdict]
    #: the known torch defects an accepted trace shows (empty: none)
    defects: Callable[[BlackBoxTrace], list[str]]
    run: type[TorchSessionRun]
    result: type[ResultT]
    #: the default bound on unobserved steps between two observed events
    hidden: int

    def campaign(
        self,
        runs: int,
        first_seed: int,
        spec_root: Path,
        *,
        out: Path | None = None,
        hidden: int | None = None,
        scenarios: tuple[str, ...] = (),
    ) -> ResultT:
        """``runs`` sessions from seed ``first_seed``, each checked (the module's doc); the
        traces are kept in ``out`` (``None``: a temporary folder, removed)."""
        if hidden is None:
            hidden = self.hidden
        from tracecheck.plugins.torch_rpc import (  # noqa: PLC0415 - protoref only for torch runs
            ProtorefError,
            require_torch,
            run_session,
            torch_version,
        )

        require_torch()
        start = time.monotonic()
        prefix = f"torch-{self.protocol}"
        folder = Path(tempfile.mkdtemp(prefix=f"tracecheck-{prefix}-")) if out is None else out
        folder.mkdir(parents=True, exist_ok=True)
        verdicts: list[TorchSessionRun] = []
        coverage: Counter[str] = Counter()
        actions: Counter[str] = Counter()
        try:
            for i in range(runs):
                seed = first_seed + i
                path = folder / f"{prefix}-{seed}.jsonl"
                try:
                    session = run_session(self.protocol, seed, path, scenarios)
                except ProtorefError as err:
                    verdicts.append(
                        self.run.of(
                            [],
                            seed=seed,
                            faults="",
                            scenarios=[],
                            events=0,
                            outcome="failed",
                            detail=f"session failed: {err}"[:800],
                        )
                    )
                    continue
                trace = load_blackbox(path, self.ops)
                try:
                    verdict = self.check(trace, spec_root, hidden)
                except CheckerError as err:  # TLC could not decide (e.g. its timeout): no verdict
                    verdicts.append(
                        self.run.of(
                            [],
                            seed=seed,
                            faults=session.faults,
                            scenarios=session.scenarios,
                            events=len(trace.events),
                            outcome="failed",
                            detail=str(err)[:800],
                        )
                    )
                    continue
                defects = self.defects(trace) if verdict.accepted else []
                if verdict.accepted:
                    coverage.update(e.op for e in trace.events)
                    actions.update(verdict.actions)
                outcome: Outcome = (
                    "failed" if not verdict.accepted else "known-defect" if defects else "accepted"
                )
                verdicts.append(
                    self.run.of(
                        defects,
                        seed=seed,
                        faults=session.faults,
                        scenarios=session.scenarios,
                        events=verdict.events,
                        outcome=outcome,
                        detail=verdict.detail,
                        states=verdict.distinct,
                        session_seconds=session.seconds,
                        check_seconds=verdict.seconds,
                    )
                )
        finally:
            if out is None:
                shutil.rmtree(folder, ignore_errors=True)
        return self.result(
            torch=torch_version() or "?",
            hidden=hidden,
            runs=verdicts,
            coverage={op: coverage.get(op, 0) for op in self.ops},
            actions={a: actions.get(a, 0) for a in self.actions},
            seconds=time.monotonic() - start,
            trace_dir=str(out) if out is not None else None,
        )
