"""What an explanation says: for each spec state in which a rejected event was tried, why it
has no step there (the false guard conjunct, the post fields no step produces and how they
differ, the steps the spec would take instead), or why a finished run's end is not quiescent.
Built by :mod:`tracecheck.replay.explain` and :mod:`tracecheck.replay.ending`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Alternative", "Explanation", "FrontierState", "PostCheck", "spec_text", "vars_names"]


class Alternative(BaseModel):
    """A step the spec could take in a frontier state instead of the logged one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: str
    #: The post fields that action logs, and their values after it (TLA+ text).
    post: dict[str, str] = Field(default_factory=dict)

    def describe(self) -> str:
        fields = ", ".join(f"{k} = {v}" for k, v in self.post.items())
        return f"{self.action} ({fields})" if fields else self.action


class PostCheck(BaseModel):
    """One logged post-state field at one frontier state."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    field: str
    expression: str
    logged: str
    #: Some step of the action produces the logged value.
    possible: bool
    #: The values the action's steps produce (TLA+ text), when it is enabled.
    allowed: list[str] = Field(default_factory=list)
    #: How the logged value differs from the (first) allowed one, briefly: the elements,
    #: fields or entries that differ (:func:`tracecheck.tla.diff.difference`).
    difference: str | None = None


class FrontierState(BaseModel):
    """A spec state in which the unmatched event was tried, and what went wrong there."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The spec variables (TLA+ text) of this state.
    state: dict[str, str]
    enabled: bool
    #: The first guard conjunct that is false (spec text), if one is.
    failed_guard: str | None = None
    #: Where that conjunct is: "2" is the action's second top-level conjunct; "3.1" the first
    #: conjunct under the existential quantifier that is its third.
    failed_guard_at: str | None = None
    post: list[PostCheck] = Field(default_factory=list)
    #: What the spec would do in this state instead: the acting node's actions that are
    #: enabled here, with the post-state each would log.
    alternatives: list[Alternative] = Field(default_factory=list)

    def reason(self) -> str:
        """One sentence: why the event cannot be taken here."""
        if self.failed_guard_at == "quiescence":
            return f"not quiescent: {self.failed_guard} is false"
        if not self.enabled:
            if self.failed_guard is not None:
                return f"not enabled: conjunct {self.failed_guard_at} is false: " + " ".join(
                    self.failed_guard.split()
                )
            return "not enabled with the logged parameters" + self._instead()
        wrong = [p for p in self.post if not p.possible]
        if not wrong:
            return "enabled and each post field is possible, but not all together"
        return "; ".join(_post_reason(p) for p in wrong)

    def _instead(self) -> str:
        if not self.alternatives:
            return " (no single guard conjunct is false, and no other step of the node is enabled)"
        return "; the spec would take " + " or ".join(a.describe() for a in self.alternatives)


def _post_reason(check: PostCheck) -> str:
    if check.difference and len(check.allowed) == 1:
        return f"post.{check.field}: {check.difference}"
    return f"post.{check.field}: logged {check.logged}, the spec allows " + (
        " or ".join(check.allowed) if check.allowed else "no value"
    )


class Explanation(BaseModel):
    """Why the first unmatched event of a trace has no spec step."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    action: str
    params: dict[str, str]
    frontier: list[FrontierState]
    summary: str


def vars_names(spec: str, vars_name: str) -> list[str] | None:
    """The names in the spec's ``vars == <<...>>``, from its source."""
    match = re.search(rf"^{vars_name}\s*==\s*<<(.*?)>>", spec, re.MULTILINE | re.DOTALL)
    if match is None:
        return None
    return [v.strip() for v in re.sub(r"\\\*[^\n]*", "", match[1]).split(",") if v.strip()]


def spec_text(library: Sequence[Path], module: str) -> str:
    """The source of ``module`` from the first library folder that has it ("" if none)."""
    for folder in library:
        path = folder / f"{module}.tla"
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return ""
