"""Action coverage: every spec action, with how often accepted traces exercised it, or why not.

A campaign is only as good as the actions it reaches. The validation report counts events per
mapped action over the accepted traces; this module puts that next to the spec's full list of
actions (read from the spec's source by :func:`tracecheck.protocols.mapping.spec_actions`), so a gap
is either explained (an action the implementation never logs, listed as hidden in the mapping with
its reason; or one the campaign's configuration cannot produce, listed in :data:`NOT_PRODUCED`)
or shown as an unexplained gap that a test can fail on.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict
from rich.markup import escape
from rich.table import Table

from tracecheck.errors import TracecheckError
from tracecheck.protocols.mapping import ProtocolMap, spec_actions
from tracecheck.replay.verdicts import ValidationReport

__all__ = [
    "NOT_PRODUCED",
    "ActionCoverage",
    "CoverageSummary",
    "action_coverage",
    "coverage_table",
]

#: Per protocol: spec actions that the protocol's campaign (its simulator's configuration)
#: cannot produce although the mapping maps them, each with the reason. Declarative, so a new
#: gap is a decision someone wrote down, not a silent yellow line.
NOT_PRODUCED: dict[str, dict[str, str]] = {
    "rref": {
        "TimeOutToHere": (
            'enabled only when Variant = "PyTorch" (a to_here timeout that leaves the reply in '
            "flight, pytorch#40141); campaigns simulate the Reference variant"
        ),
    },
    "rendezvous": {},
    "autograd": {
        "LoseCleanupMsg": (
            'enabled only when Variant = "PyTorch" (a cleanup whose retries are exhausted); the '
            "Reference retries a cleanup until it is acknowledged, and campaigns simulate it"
        ),
        "FetchStoredValue": (
            "a shape of real programs (remote, then to_here: issue 26 s4) the simulator's "
            "workload does not make (StoredValues is FALSE in its header); the runtime's traces "
            "take it, tests/autograd/test_program_shapes.py"
        ),
        "PeerDied": (
            "a survivor's report of a death (issue 26 s4e); the simulator logs the Crash step "
            "itself (ReportedDeaths is FALSE in its header); the runtime's traces take it, "
            "tests/autograd/test_death_traced.py"
        ),
        "UdfRaises": (
            "a UDF raising by itself (issue 26 s4), which the simulator's workload does not make "
            "(UdfErrors is FALSE in its header); the runtime's traces take it, "
            "tests/autograd/test_program_shapes.py"
        ),
    },
}

Status = Literal["covered", "hidden", "not-produced", "gap"]


class ActionCoverage(BaseModel):
    """One spec action: how many events of accepted traces it explained, or why none."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: str
    events: int
    status: Status
    #: Why the action has no events (hidden or not produced); None when covered or a gap.
    reason: str | None = None


class CoverageSummary(BaseModel):
    """Every spec action of one protocol against the accepted traces of a validation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    protocol: str
    actions: list[ActionCoverage]

    @property
    def mapped(self) -> list[ActionCoverage]:
        """The actions the mapping maps (everything but the hidden ones)."""
        return [a for a in self.actions if a.status != "hidden"]

    @property
    def gaps(self) -> list[str]:
        """Actions no accepted trace exercised and no reason explains."""
        return [a.action for a in self.actions if a.status == "gap"]

    @property
    def percent(self) -> float:
        """Covered mapped actions, in percent of the mapped actions."""
        mapped = self.mapped
        covered = sum(a.status == "covered" for a in mapped)
        return 100.0 * covered / len(mapped) if mapped else 100.0


def _spec_action_names(mapping: ProtocolMap, spec_root: Path) -> set[str]:
    path = spec_root / mapping.protocol / f"{mapping.module}.tla"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TracecheckError(f"cannot read the spec {path} for coverage: {exc}") from exc
    return set(spec_actions(text))


def action_coverage(
    report: ValidationReport,
    mapping: ProtocolMap,
    spec_root: Path,
    not_produced: Mapping[str, str] | None = None,
) -> CoverageSummary:
    """Every action of the spec (and of the mapping) with its events over accepted traces.

    ``not_produced`` defaults to the protocol's entry in :data:`NOT_PRODUCED`. A reason given
    for an action that the traces did exercise is ignored: the count speaks for itself.
    """
    reasons = NOT_PRODUCED.get(mapping.protocol, {}) if not_produced is None else not_produced
    names = _spec_action_names(mapping, spec_root) | {a.event for a in mapping.actions}
    rows: list[ActionCoverage] = []
    for name in sorted(names):
        count = report.coverage.get(name, 0)
        if count:
            rows.append(ActionCoverage(action=name, events=count, status="covered"))
        elif name in mapping.hidden:
            rows.append(
                ActionCoverage(action=name, events=0, status="hidden", reason=mapping.hidden[name])
            )
        elif name in reasons:
            rows.append(
                ActionCoverage(action=name, events=0, status="not-produced", reason=reasons[name])
            )
        else:
            rows.append(ActionCoverage(action=name, events=0, status="gap"))
    return CoverageSummary(protocol=mapping.protocol, actions=rows)


_STYLE = {"covered": "", "hidden": "dim", "not-produced": "dim", "gap": "bold yellow"}


def coverage_table(summary: CoverageSummary) -> Table:
    """Every spec action: its events, or (dimmed) why none, or (yellow) an unexplained gap."""
    mapped = summary.mapped
    covered = sum(a.status == "covered" for a in mapped)
    table = Table(
        title=f"{summary.protocol} action coverage",
        caption=(
            f"{covered}/{len(mapped)} mapped actions exercised ({summary.percent:.0f}%) by "
            f"accepted traces; {len(summary.gaps)} without a reason"
        ),
    )
    table.add_column("action")
    table.add_column("events", justify="right")
    table.add_column("why none")
    for row in summary.actions:
        style = _STYLE[row.status]
        why = row.reason or ("no reason given" if row.status == "gap" else "")
        status = "" if row.status == "covered" else f"{row.status}: "
        table.add_row(
            row.action, f"{row.events:,}", escape(status + why) if why else "", style=style
        )
    return table
