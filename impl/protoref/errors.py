"""Typed errors of the protoref package.

Every error says what was wrong and where (which node, which action, which trace line), so a
reader can act on it without a stack trace.
"""

from __future__ import annotations

__all__ = [
    "InvariantViolationError",
    "LeakError",
    "ProtocolError",
    "ProtorefError",
    "TraceFormatError",
]


class ProtorefError(Exception):
    """Base class of every error this package raises on purpose."""


class ProtocolError(ProtorefError):
    """An input that the protocol does not allow in the current state.

    Raised by the sans-IO cores before any change: the state the input was applied to is unchanged
    (it is immutable), so a driver may log the error and carry on.
    """

    def __init__(self, node: str, action: str, reason: str) -> None:
        self.node = node
        self.action = action
        self.reason = reason
        super().__init__(f"{action} on {node}: {reason}")


class InvariantViolationError(ProtorefError):
    """A runtime check of a spec invariant (named as in the spec, e.g. ``ParentHeldInv``) failed."""

    def __init__(self, invariant: str, detail: str, *, seed: int | None = None) -> None:
        self.invariant = invariant
        self.detail = detail
        self.seed = seed
        where = "" if seed is None else f" (seed {seed})"
        super().__init__(f"{invariant} violated{where}: {detail}")


class LeakError(InvariantViolationError):
    """State left behind at quiescence (``LeakFreeQuiescenceInv``): the protocol leaked."""


class TraceFormatError(ProtorefError):
    """A trace file or line does not follow the trace contract (docs/trace-format)."""

    def __init__(self, source: str, line: int, reason: str) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        super().__init__(f"{source}:{line}: {reason}")
