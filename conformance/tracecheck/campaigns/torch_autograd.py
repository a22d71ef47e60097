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

from pathlib import Path
from typing import Any, Self

from pydantic import Field

from tracecheck.campaigns.torch_session import (
    TorchBlackBox,
    TorchSessionResult,
    TorchSessionRun,
)
from tracecheck.protocols.autograd import AUTOGRAD
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

__all__ = [
    "AUTOGRAD_ACTIONS",
    "TorchAutogradResult",
    "TorchAutogradRun",
    "check_autograd_trace",
    "known_defects",
    "run_torch_autograd_campaign",
]

#: DistAutograd.tla's actions (the disjuncts of Next), for coverage: the mapping's list, so an
#: action the spec gains is counted here too; the ones the torch instance turns off are listed
#: (and reported as 0) so the table says what is not exercised.
AUTOGRAD_ACTIONS = tuple(action.event for action in AUTOGRAD.actions)

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


class TorchAutogradRun(TorchSessionRun):
    defects: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, defects: list[str], **fields: Any) -> Self:
        return cls(defects=defects, **fields)

    @property
    def known(self) -> list[str]:
        return self.defects


class TorchAutogradResult(TorchSessionResult[TorchAutogradRun]):
    """The runs; ``actions`` counts DistAutograd.tla's actions (observed, searched)."""


AUTOGRAD_BLACKBOX = TorchBlackBox(
    protocol="autograd",
    ops=AUTOGRAD_OPS,
    actions=AUTOGRAD_ACTIONS,
    check=check_autograd_trace,
    defects=known_defects,
    run=TorchAutogradRun,
    result=TorchAutogradResult,
    hidden=DEFAULT_HIDDEN,
)


#: ``run_torch_autograd_campaign(runs, first_seed, spec_root, *, out=None, hidden=DEFAULT_HIDDEN,
#: scenarios=())``: the campaign (:meth:`TorchBlackBox.campaign`)
run_torch_autograd_campaign = AUTOGRAD_BLACKBOX.campaign
