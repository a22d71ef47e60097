"""Replaying a black-box trace of torch's RRef protocol (tracecheck.protocols.rref_torch's
instance of spec/rref/TraceRRefTorch.tla) with bounded unobserved steps."""

from __future__ import annotations

from pathlib import Path

from tracecheck.protocols.blackbox import RREF_OPS, BlackBoxTrace, load_blackbox
from tracecheck.protocols.rref_torch import (
    DEFAULT_HIDDEN,
    RREF_CONSTANTS,
    TRACE_MODULE,
    trace_constants,
)
from tracecheck.replay.hidden import HiddenReplay, HiddenVerdict, replay_hidden

__all__ = ["check_rref_trace"]


def check_rref_trace(
    trace: BlackBoxTrace | Path, spec_root: Path, hidden: int = DEFAULT_HIDDEN
) -> HiddenVerdict:
    """Replay one black-box RRef trace (a file or a parsed trace) through TraceRRefTorch."""
    parsed = load_blackbox(trace, RREF_OPS) if isinstance(trace, Path) else trace
    replay = HiddenReplay(
        module=TRACE_MODULE,
        spec_dir=spec_root / "rref",
        constants=RREF_CONSTANTS,
        hidden=hidden,
        per_trace=trace_constants,
    )
    return replay_hidden(parsed, replay)
