"""Action coverage: every spec action is exercised by a campaign, or its gap has a reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.ledger import LEDGER, SPEC_ROOT
from tracecheck.campaigns.campaign import run_campaign
from tracecheck.protocols import load_mapping
from tracecheck.replay.coverage import NOT_PRODUCED, action_coverage
from tracecheck.replay.verdicts import ValidationReport

ROOT = Path(__file__).resolve().parent.parent.parent


def _report(coverage: dict[str, int]) -> ValidationReport:
    return ValidationReport(
        protocol="ledger",
        verdicts=[],
        coverage=coverage,
        uncovered=[],
        tlc_runs=1,
        events=sum(coverage.values()),
        seconds=1.0,
    )


def test_every_spec_action_is_listed_with_events_or_a_status() -> None:
    summary = action_coverage(_report({"Deposit": 2, "Transfer": 1}), LEDGER, SPEC_ROOT)
    rows = {a.action: (a.events, a.status, a.reason) for a in summary.actions}
    assert rows == {
        "Deposit": (2, "covered", None),
        "Transfer": (1, "covered", None),
        "Receive": (0, "gap", None),
    }
    assert summary.gaps == ["Receive"]
    assert summary.percent == pytest.approx(200 / 3)


def test_a_gap_with_a_reason_is_not_a_gap() -> None:
    reasons = {"Receive": "this workload never delivers"}
    summary = action_coverage(_report({"Deposit": 2, "Transfer": 1}), LEDGER, SPEC_ROOT, reasons)
    (receive,) = [a for a in summary.actions if a.action == "Receive"]
    assert (receive.status, receive.reason) == ("not-produced", "this workload never delivers")
    assert summary.gaps == []


def test_hidden_actions_carry_the_mappings_reason_and_do_not_count_as_mapped() -> None:
    mapping = LEDGER.model_copy(
        update={
            "actions": tuple(a for a in LEDGER.actions if a.event != "Receive"),
            "hidden": {"Receive": "not logged by this implementation"},
        }
    )
    summary = action_coverage(_report({"Deposit": 2, "Transfer": 1}), mapping, SPEC_ROOT)
    (receive,) = [a for a in summary.actions if a.action == "Receive"]
    assert (receive.status, receive.reason) == ("hidden", "not logged by this implementation")
    assert summary.percent == 100.0
    assert summary.gaps == []


@pytest.mark.parametrize(
    ("protocol", "runs", "steps"),
    [
        pytest.param("rref", 20, 150, id="rref-as-in-make-check"),
        # make check runs 50; 20 runs already reach every action (measured) in a third the time.
        pytest.param("rendezvous", 20, 150, id="rendezvous"),
    ],
)
def test_campaign_covers_every_mapped_action_or_gives_the_reason(
    protocol: str, runs: int, steps: int
) -> None:
    result = run_campaign(protocol, runs, 1, steps, ROOT / "spec", explain=False)
    assert result.report.all_accepted, result.rejected_seeds
    summary = action_coverage(result.report, load_mapping(protocol), ROOT / "spec")
    assert summary.gaps == [], f"{protocol}: actions with no events and no reason: {summary.gaps}"
    # A reason for an action the campaign does reach is stale: say so rather than hide it.
    stale = set(NOT_PRODUCED[protocol]) & set(result.report.coverage)
    assert not stale, f"{protocol}: NOT_PRODUCED lists exercised actions {sorted(stale)}"
    assert all(a.reason for a in summary.actions if a.status in {"hidden", "not-produced"})
