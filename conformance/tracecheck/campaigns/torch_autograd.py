"""``tracecheck campaign torch-autograd``: torch 2.13's own distributed autograd, run and checked
black-box.

Run ``i`` is one session of :mod:`protoref.torch.rpc` (protocol ``autograd``) with seed
``first_seed + i``: three torch processes on the FAULTY_TENSORPIPE agent, the autograd scenario
library in a seeded order, the failure and delay of CLEANUP_AUTOGRAD_CONTEXT_REQ chosen from the
seed. Its merged trace is replayed through ``spec/autograd/TraceDistAutogradTorch.tla`` (the
PyTorch variant of DistAutograd.tla, FAST mode, at most ``hidden`` unobserved steps between two
observed events). A run's verdict:

- ``accepted``: some behaviour of the spec explains every observed event, and no quiet point
  shows a known torch defect;
- ``known-defect``: accepted, and the trace shows one of the two autograd defects the PyTorch
  variant models: a released context re-created by a late answer (#38513: a late
  ``get_gradients`` / ``backward`` that found its context, MCDistAutograd_pytorch38513
  _lateCall, or a quiet point with ``num_autograd_contexts`` > 0,
  MCDistAutograd_pytorch38513) or a graph task that never ends
  (``num_current_backward_passes`` > 0 after a failed pass, MCDistAutograd_pytorchBackward
  ErrorHang);
- ``failed``: the full bounded search rejects the trace (the first unexplained event is
  named), the session failed, or TLC could not decide.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from tracecheck.protocols.autograd_torch import (
    AUTOGRAD_OPS,
    AUTOGRAD_TORCH_CONSTANTS,
    DEFAULT_HIDDEN,
    TRACE_MODULE,
    trace_constants,
    trace_workers,
)
from tracecheck.protocols.blackbox import BlackBoxTrace, load_blackbox
from tracecheck.replay.hidden import HiddenReplay, HiddenVerdict, replay_hidden
from tracecheck.replay.tlcrun import CheckerError

__all__ = [
    "AUTOGRAD_ACTIONS",
    "TorchAutogradResult",
    "TorchAutogradRun",
    "check_autograd_trace",
    "known_defects",
    "run_torch_autograd_campaign",
]

#: DistAutograd.tla's actions (the disjuncts of Next), for coverage; the ones the torch
#: instance turns off are listed (and reported as 0) so the table says what is not exercised.
AUTOGRAD_ACTIONS = (
    "NewContext",
    "NewContextRefused",
    "SendMessageWithAutograd",
    "NestedSendMessageWithAutograd",
    "ReleaseContext",
    "DistEngineExecute",
    "RetrieveContext",
    "RetryCleanup",
    "LoseCleanupMsg",
    "Crash",
    "BackwardError",
    "ProcessForwardAutogradReq",
    "FinishForwardAutogradReq",
    "DeserializeForwardAutogradResp",
    "DeserializeResponse",
    "PollTimeoutRpcs",
    "ProcessCleanupAutogradContextReq",
    "ReleaseOrphanedContext",
    "Discard",
    "RecvRpcBackwardApply",
    "ProcessBackwardAutogradReq",
    "ProcessBackwardAutogradResp",
    "CleanupBackwardPass",
    "ProcessBackwardStart",
    "ProcessBackwardAck",
)

Outcome = Literal["accepted", "known-defect", "failed"]
RESURRECTION = "pytorch#38513: a context left after its release"
BACKWARD_HANG = "FAST-mode hang: a failed pass's graph task never ends"


def check_autograd_trace(
    trace: BlackBoxTrace | Path, spec_root: Path, hidden: int = DEFAULT_HIDDEN
) -> HiddenVerdict:
    """Replay one black-box autograd trace (a file or a parsed trace) through
    TraceDistAutogradTorch."""
    parsed = load_blackbox(trace, AUTOGRAD_OPS) if isinstance(trace, Path) else trace
    replay = HiddenReplay(
        module=TRACE_MODULE,
        spec_dir=spec_root / "autograd",
        constants=AUTOGRAD_TORCH_CONSTANTS,
        hidden=hidden,
        per_trace=trace_constants,
        workers=trace_workers,
        # a trace showing FAST mode's hang needs the full search (the observed-first one takes
        # the block's exit at once, and a gradient request handled after the exit is answered
        # with an error): run it alone, not after an observed-first search bound to fail
        eager_first=BACKWARD_HANG not in known_defects(parsed),
    )
    return replay_hidden(parsed, replay)


def known_defects(trace: BlackBoxTrace) -> list[str]:
    """The known torch defects an accepted trace's quiet points show (see the module's doc)."""
    found = []
    counters = [e for e in trace.events if e.op == "Counters"]
    late = [e for e in trace.events if e.op in {"LateGradients", "LateBackward"}]
    # a late call that found its context: the late answer re-created it (the spec allows
    # nothing else: MCDistAutograd_pytorch38513_lateCall)
    found_late = any(e.fields["outcome"] in {"found", "ok"} for e in late)
    if found_late or any(e.fields["contexts"] > 0 for e in counters):
        found.append(RESURRECTION)
    if any(e.fields["passes"] > 0 for e in counters):
        found.append(BACKWARD_HANG)
    return found


class TorchAutogradRun(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int
    faults: str
    scenarios: list[str]
    events: int
    outcome: Outcome
    defects: list[str] = []
    detail: str = ""
    states: int = 0
    session_seconds: float = 0.0
    check_seconds: float = 0.0


class TorchAutogradResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    torch: str
    hidden: int
    runs: list[TorchAutogradRun]
    #: observed events per op over the accepted traces
    coverage: dict[str, int]
    #: DistAutograd.tla action -> steps of it in the accepting behaviours (observed, searched)
    actions: dict[str, int]
    seconds: float
    trace_dir: str | None = None

    @property
    def failed(self) -> list[TorchAutogradRun]:
        return [r for r in self.runs if r.outcome == "failed"]


def run_torch_autograd_campaign(
    runs: int,
    first_seed: int,
    spec_root: Path,
    *,
    out: Path | None = None,
    hidden: int = DEFAULT_HIDDEN,
    scenarios: tuple[str, ...] = (),
) -> TorchAutogradResult:
    from tracecheck.plugins.torch_rpc import (  # noqa: PLC0415 - protoref only for torch runs
        ProtorefError,
        require_torch,
        run_session,
        torch_version,
    )

    require_torch()
    start = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="tracecheck-torch-autograd-")) if out is None else out
    folder.mkdir(parents=True, exist_ok=True)
    verdicts: list[TorchAutogradRun] = []
    coverage: Counter[str] = Counter()
    actions: Counter[str] = Counter()
    try:
        for i in range(runs):
            seed = first_seed + i
            path = folder / f"torch-autograd-{seed}.jsonl"
            try:
                session = run_session("autograd", seed, path, scenarios)
            except ProtorefError as err:
                verdicts.append(
                    TorchAutogradRun(
                        seed=seed,
                        faults="",
                        scenarios=[],
                        events=0,
                        outcome="failed",
                        detail=f"session failed: {err}"[:800],
                    )
                )
                continue
            trace = load_blackbox(path, AUTOGRAD_OPS)
            try:
                verdict = check_autograd_trace(trace, spec_root, hidden)
            except CheckerError as err:  # TLC could not decide (e.g. its timeout): no verdict
                verdicts.append(
                    TorchAutogradRun(
                        seed=seed,
                        faults=session.faults,
                        scenarios=session.scenarios,
                        events=len(trace.events),
                        outcome="failed",
                        detail=str(err)[:800],
                    )
                )
                continue
            defects = known_defects(trace) if verdict.accepted else []
            if verdict.accepted:
                coverage.update(e.op for e in trace.events)
                actions.update(verdict.actions)
            outcome: Outcome = (
                "failed" if not verdict.accepted else "known-defect" if defects else "accepted"
            )
            verdicts.append(
                TorchAutogradRun(
                    seed=seed,
                    faults=session.faults,
                    scenarios=session.scenarios,
                    events=verdict.events,
                    outcome=outcome,
                    defects=defects,
                    detail=verdict.detail,
                    states=verdict.distinct,
                    session_seconds=session.seconds,
                    check_seconds=verdict.seconds,
                )
            )
    finally:
        if out is None:
            shutil.rmtree(folder, ignore_errors=True)
    return TorchAutogradResult(
        torch=torch_version() or "?",
        hidden=hidden,
        runs=verdicts,
        coverage={op: coverage.get(op, 0) for op in AUTOGRAD_OPS},
        actions={a: actions.get(a, 0) for a in AUTOGRAD_ACTIONS},
        seconds=time.monotonic() - start,
        trace_dir=str(out) if out is not None else None,
    )
