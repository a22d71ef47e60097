"""The typed result of one TLC (or SANY) run: verdict, figures, errors and counterexample.

These are pydantic models so a result can be printed as JSON (``tracecheck tlc --json``), stored
next to a manifest, and compared in tests. Values in counterexamples are Python values parsed
from TLC's value syntax by :mod:`tracecheck.tla.values` and are kept ``Any`` here because they are
immutable mappings and sets that pydantic need not validate.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from tracecheck.tla.values import format_value

__all__ = [
    "Counterexample",
    "CounterexampleState",
    "Progress",
    "SourceLocation",
    "TLCError",
    "TLCResult",
    "TLCStats",
    "Verdict",
]


class Verdict(StrEnum):
    """What a TLC run concluded."""

    #: The model checked completely (or the simulation ran out) with nothing violated.
    SUCCESS = "success"
    #: An invariant is false in a reachable state; ``violated`` names it.
    INVARIANT = "invariant"
    #: A temporal property fails on a behaviour; ``violated`` names it when it can be told.
    PROPERTY = "property"
    #: A ``[][A]_v`` action property fails on a step; ``violated`` names it.
    ACTION_PROPERTY = "action_property"
    #: A reachable state has no successor and deadlock checking was on.
    DEADLOCK = "deadlock"
    #: SANY could not parse a module.
    PARSE_ERROR = "parse_error"
    #: SANY parsed the modules but semantic analysis failed (unknown operator, arity, ...).
    SEMANTIC_ERROR = "semantic_error"
    #: An ASSUME of the spec is false under the model's constants.
    ASSUME_FALSE = "assume_false"
    #: TLC stopped with an error it did not classify (evaluation error, bad cfg, JVM failure).
    CRASH = "crash"
    #: Our timeout killed TLC before it finished.
    TIMEOUT = "timeout"

    @property
    def is_violation(self) -> bool:
        """True for the verdicts that come with a counterexample."""
        return self in {
            Verdict.INVARIANT,
            Verdict.PROPERTY,
            Verdict.ACTION_PROPERTY,
            Verdict.DEADLOCK,
        }


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SourceLocation(_Model):
    """A place in a TLA+ module, as SANY or TLC reported it."""

    module: str | None = None
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else "unknown line"
        if self.column is not None:
            where += f", column {self.column}"
        return f"{where} of module {self.module}" if self.module else where


class TLCError(_Model):
    """One error TLC or SANY reported, with its location when known."""

    code: int | None = None
    message: str
    location: SourceLocation | None = None


class TLCStats(_Model):
    """The figures of a finished (or interrupted) run."""

    generated: int | None = None
    distinct: int | None = None
    queue: int | None = None
    depth: int | None = None


class Progress(_Model):
    """One progress report from TLC (message 2200), as fed to a progress callback."""

    depth: int
    generated: int
    distinct: int
    queue: int
    states_per_minute: int | None = None
    elapsed: float = Field(description="seconds since TLC was started")


class CounterexampleState(_Model):
    """One state of a counterexample: the header TLC prints and the parsed variables."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    index: int
    #: ``"Initial predicate"``, an action name such as ``"Inc"``, ``"Stuttering"``, or ``None``.
    action: str | None
    header: str
    location: SourceLocation | None = None
    values: dict[str, Any] = Field(default_factory=dict)
    #: The state's text exactly as TLC printed it, kept when values could not be parsed.
    raw: str = ""
    parse_error: str | None = None

    @field_serializer("values")
    def _values_as_tla(self, values: dict[str, Any]) -> dict[str, str]:
        # In JSON each value is its TLA+ text: exact, and parse_value reads it back.
        return {name: format_value(value) for name, value in values.items()}


class Counterexample(_Model):
    """A behaviour that violates the checked property (a prefix, or a lasso for liveness)."""

    states: list[CounterexampleState]
    #: For a lasso: the index of the state the last one loops back to.
    loops_to: int | None = None
    #: For a liveness violation: the behaviour ends by stuttering forever.
    stutters: bool = False


class TLCResult(_Model):
    """Everything one TLC run tells: verdict, figures, errors, counterexample, command."""

    verdict: Verdict
    #: The violated invariant or property, when TLC names it (or attribution found it).
    violated: str | None = None
    #: A one-line human summary (the first line of the deciding message).
    summary: str = ""
    errors: list[TLCError] = Field(default_factory=list)
    stats: TLCStats = TLCStats()
    counterexample: Counterexample | None = None
    wall_seconds: float = 0.0
    tlc_version: str | None = None
    tlc_revision: str | None = None
    mode: str | None = None
    command: list[str] = Field(default_factory=list)
    exit_code: int | None = None
    #: Plain text TLC printed outside messages (``Print``/``PrintT`` output, SANY errors).
    printed: list[str] = Field(default_factory=list)
