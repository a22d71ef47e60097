"""``tracecheck campaign torch-rref``: torch 2.13's own RRef protocol, run and checked black-box.

Run ``i`` is one session of :mod:`protoref.torch.rpc` with seed ``first_seed + i``: three
torch processes on the FAULTY_TENSORPIPE agent, the whole scenario library in a seeded order,
the delays and failures of message types chosen from the seed. Its merged trace is replayed
through ``spec/rref/TraceRRefTorch.tla`` (the PyTorch variant of RRef.tla, at most ``hidden``
unobserved steps between two observed events). A run's verdict:

- ``accepted``: some behaviour of the spec explains every observed event;
- ``known-defect``: accepted, and torch's graceful shutdown failed where the spec shows an
  OwnerRRef leaked by pytorch#41217's hazard (an rpc.remote timed out, its RREF_USER_DELETE
  overtook the late call): MCRRef_pytorch_lateRemoteLeak_shutdown's ShutdownCompletesProp
  violation, seen on torch;
- ``failed``: the full bounded search rejects the trace (the first unexplained event is named),
  or the session itself failed.

Coverage: the observed events per op (each op is one spec action or a probe of its state).
torch absent or unsupported is the plug-in's ``TorchUnavailableError``
(:mod:`tracecheck.plugins.torch_rpc`).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from tracecheck.protocols.blackbox import RREF_OPS, load_blackbox
from tracecheck.protocols.rref_torch import DEFAULT_HIDDEN
from tracecheck.replay.rref_torch import check_rref_trace
from tracecheck.replay.tlcrun import CheckerError

__all__ = ["RREF_ACTIONS", "TorchRRefResult", "TorchRRefRun", "run_torch_rref_campaign"]

#: RRef.tla's actions (the disjuncts of Next), for coverage; FailRemote and ExhaustRetries
#: are off in the torch instance (tracecheck.protocols.rref_torch says why).
RREF_ACTIONS = (
    "CreateLocalRRef",
    "Remote",
    "PrepareChildFork",
    "ToHere",
    "DropRRef",
    "DropOwnerRRef",
    "RetrySend",
    "LoseFirstAttempt",
    "TimeOutRemote",
    "TimeOutToHere",
    "FailRemote",
    "ExhaustRetries",
    "DelUser",
    "AssignOwnerRRef",
    "ConfirmPendingUser",
    "FinishCreatingOwnerRRef",
    "RetrieveOwnerRRef",
    "ReceiveFetchRet",
    "GetOrCreateRRef",
    "AddForkOfOwnerIfNotPresent",
    "FinishForkRequest",
    "DelPendingChild",
    "DelForkOfOwner",
    "WaitAllWorkers",
    "DelAllUsersAndUnforkedOwners",
    "DestroyInstance",
)

Outcome = Literal["accepted", "known-defect", "failed"]
#: the defect tag of a shutdown that failed on a leaked OwnerRRef
LEAK_SHUTDOWN = "pytorch#41217 leak: shutdown never completes"


class TorchRRefRun(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int
    faults: str
    scenarios: list[str]
    events: int
    outcome: Outcome
    defect: str | None = None
    detail: str = ""
    states: int = 0
    session_seconds: float = 0.0
    check_seconds: float = 0.0


class TorchRRefResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    torch: str
    hidden: int
    runs: list[TorchRRefRun]
    #: observed events per op over the accepted traces
    coverage: dict[str, int]
    #: RRef.tla action -> steps of it in the accepting behaviours (observed and searched)
    actions: dict[str, int]
    seconds: float
    trace_dir: str | None = None

    @property
    def failed(self) -> list[TorchRRefRun]:
        return [r for r in self.runs if r.outcome == "failed"]


def run_torch_rref_campaign(
    runs: int,
    first_seed: int,
    spec_root: Path,
    *,
    out: Path | None = None,
    hidden: int = DEFAULT_HIDDEN,
    scenarios: tuple[str, ...] = (),
) -> TorchRRefResult:
    from tracecheck.plugins.torch_rpc import (  # noqa: PLC0415 - protoref only for torch runs
        ProtorefError,
        require_torch,
        run_session,
        torch_version,
    )

    require_torch()
    start = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="tracecheck-torch-rref-")) if out is None else out
    folder.mkdir(parents=True, exist_ok=True)
    verdicts: list[TorchRRefRun] = []
    coverage: Counter[str] = Counter()
    actions: Counter[str] = Counter()
    try:
        for i in range(runs):
            seed = first_seed + i
            path = folder / f"torch-rref-{seed}.jsonl"
            try:
                session = run_session("rref", seed, path, scenarios)
            except ProtorefError as err:
                verdicts.append(
                    TorchRRefRun(
                        seed=seed,
                        faults="",
                        scenarios=[],
                        events=0,
                        outcome="failed",
                        detail=f"session failed: {err}"[:800],
                    )
                )
                continue
            trace = load_blackbox(path, RREF_OPS)
            try:
                verdict = check_rref_trace(trace, spec_root, hidden)
            except CheckerError as err:  # TLC could not decide (e.g. its timeout): no verdict
                verdicts.append(
                    TorchRRefRun(
                        seed=seed,
                        faults=session.faults,
                        scenarios=session.scenarios,
                        events=len(trace.events),
                        outcome="failed",
                        detail=str(err)[:800],
                    )
                )
                continue
            if verdict.accepted:
                coverage.update(e.op for e in trace.events)
                actions.update(verdict.actions)
            leak = verdict.accepted and any(e.op == "ShutdownFailed" for e in trace.events)
            outcome: Outcome = "known-defect" if leak else "accepted"
            verdicts.append(
                TorchRRefRun(
                    seed=seed,
                    faults=session.faults,
                    scenarios=session.scenarios,
                    events=verdict.events,
                    outcome=outcome if verdict.accepted else "failed",
                    defect=LEAK_SHUTDOWN if leak else None,
                    detail=verdict.detail,
                    states=verdict.distinct,
                    session_seconds=session.seconds,
                    check_seconds=verdict.seconds,
                )
            )
    finally:
        if out is None:
            shutil.rmtree(folder, ignore_errors=True)
    return TorchRRefResult(
        torch=torch_version() or "?",
        hidden=hidden,
        runs=verdicts,
        coverage={op: coverage.get(op, 0) for op in RREF_OPS},
        actions={a: actions.get(a, 0) for a in RREF_ACTIONS},
        seconds=time.monotonic() - start,
        trace_dir=str(out) if out is not None else None,
    )
