"""Spec invariants checked on the accepted behaviour of a trace (tracecheck.replay.witness)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from support.ledger import GOOD, LEDGER, SPEC_ROOT, event, header, trace
from support.ledger_audit import LEDGER_AUDIT, LEDGER_AUDIT_HIDDEN
from tracecheck.cli import main
from tracecheck.errors import TracecheckError
from tracecheck.protocols import load_mapping
from tracecheck.replay.tlcrun import CheckerError, run_rendered, spec_library
from tracecheck.replay.tracespec import render_batch
from tracecheck.replay.validate import validate_traces
from tracecheck.replay.witness import check_invariants, protocol_invariants, validate_checked
from tracecheck.runner.results import Verdict

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_invariants_are_those_of_the_protocols_quick_model() -> None:
    rref = protocol_invariants(load_mapping("rref"), ROOT / "spec")
    assert rref[:2] == ("TypeOK", "NoPrematureDeleteInv")
    assert "NoForkResurrectionInv" in rref
    assert protocol_invariants(LEDGER, SPEC_ROOT) == ("TypeOK",)  # from Ledger.cfg
    assert protocol_invariants(LEDGER_AUDIT, SPEC_ROOT) == ("TypeOK", "SingleHolderInv")


def test_no_model_to_take_invariants_from_is_a_typed_error() -> None:
    nowhere = LEDGER.model_copy(update={"module": "Nowhere"})
    with pytest.raises(TracecheckError, match=r"no invariants known for protocol ledger"):
        protocol_invariants(nowhere, SPEC_ROOT)


def test_an_accepted_trace_that_keeps_the_invariants_is_clean() -> None:
    traces = [trace(GOOD[:2], "short.ndjson")]  # a deposits, sends: one holder
    report = validate_traces(traces, LEDGER_AUDIT, SPEC_ROOT)
    (verdict,) = check_invariants(traces, report, LEDGER_AUDIT, SPEC_ROOT).verdicts
    assert verdict.clean
    assert (verdict.clean_events, verdict.event, verdict.breaches) == (2, None, [])


def test_an_accepted_trace_that_breaks_an_invariant_is_flagged_at_the_event() -> None:
    traces = [trace(GOOD, "good.ndjson"), trace(GOOD[:2], "short.ndjson")]
    report = validate_traces(traces, LEDGER_AUDIT, SPEC_ROOT)
    assert report.all_accepted  # the transition relation explains every event
    witness = check_invariants(traces, report, LEDGER_AUDIT, SPEC_ROOT)
    assert witness.invariants == ["TypeOK", "SingleHolderInv"]
    assert witness.tlc_runs == 1
    broken, clean = witness.verdicts
    assert clean.clean
    assert not broken.clean
    # b receives while a keeps 1: event 3 (file line 4) leaves two holders.
    assert (broken.clean_events, broken.event, broken.line) == (2, 3, 4)
    (breach,) = broken.breaches
    assert breach.invariants == ["SingleHolderInv"]
    assert (breach.after, breach.hidden) == (3, 0)
    assert breach.state == {"balance": "[a |-> 1, b |-> 2]", "inbox": "{}"}
    assert "SingleHolderInv false after event 3 (line 4)" in broken.summary()


def test_a_breach_in_the_initial_state_is_reported_before_any_event() -> None:
    traces = [trace(GOOD)]
    report = validate_traces(traces, LEDGER_AUDIT, SPEC_ROOT)
    witness = check_invariants(traces, report, LEDGER_AUDIT, SPEC_ROOT, invariants=["FundedInv"])
    (verdict,) = witness.verdicts
    assert (verdict.clean, verdict.clean_events, verdict.event, verdict.line) == (False, 0, 0, None)
    (breach,) = verdict.breaches
    assert (breach.invariants, breach.after) == (["FundedInv"], 0)
    assert verdict.summary().endswith("FundedInv false initially")


def test_rejected_traces_have_no_behaviour_to_check() -> None:
    rejected = trace([GOOD[0], event("Receive", "b", 1, 2, a=2)], "bad.ndjson")
    good = trace(GOOD[:2], "short.ndjson")
    report = validate_traces([rejected, good], LEDGER_AUDIT, SPEC_ROOT, explain=False)
    witness = check_invariants([rejected, good], report, LEDGER_AUDIT, SPEC_ROOT)
    assert [v.source for v in witness.verdicts] == ["short.ndjson"]


def test_a_dead_end_branch_that_breaks_an_invariant_is_not_reported() -> None:
    # With unlogged deposits the trace spec also explores, e.g., a hidden Deposit(b, 1) before
    # a's logged deposit: two holders, a branch the implementation never took. Checking the
    # invariant on every explored state (a plain INVARIANT) raises that false alarm ...
    traces = [trace([event("Deposit", "a", 1, 1, a=1)], "one.ndjson")]
    rendered = render_batch(traces, LEDGER_AUDIT_HIDDEN)
    naive = dataclasses.replace(rendered, cfg=rendered.cfg + "INVARIANT SingleHolderInv\n")
    result = run_rendered(naive, spec_library(SPEC_ROOT, LEDGER_AUDIT_HIDDEN))
    assert (result.verdict, result.violated) == (Verdict.INVARIANT, "SingleHolderInv")
    # ... while the behaviour that explains the trace (a deposits 1, nothing hidden) is clean.
    report = validate_traces(traces, LEDGER_AUDIT_HIDDEN, SPEC_ROOT)
    assert report.all_accepted
    (verdict,) = check_invariants(traces, report, LEDGER_AUDIT_HIDDEN, SPEC_ROOT).verdicts
    assert verdict.clean


def test_an_unknown_invariant_is_a_checker_error_naming_it() -> None:
    traces = [trace(GOOD[:1])]
    report = validate_traces(traces, LEDGER_AUDIT, SPEC_ROOT)
    with pytest.raises(CheckerError, match="NoSuchInv"):
        check_invariants(traces, report, LEDGER_AUDIT, SPEC_ROOT, invariants=["NoSuchInv"])


def test_cli_validate_invariants_exits_1_and_names_the_invariant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "good.ndjson"
    path.write_text("\n".join(json.dumps(r) for r in [header(), *GOOD]) + "\n", encoding="utf-8")
    args = ["validate", str(path), "--mapping", "support.ledger_audit:LEDGER_AUDIT"]
    args += ["--spec-root", str(SPEC_ROOT)]
    assert main(args) == 0  # accepted by the transition relation
    assert main([*args, "--invariants"]) == 1
    out = capsys.readouterr().out
    assert "SingleHolderInv false after event 3 (line 4)" in out
    assert "balance = [a |-> 1, b |-> 2]" in out


def test_an_rref_campaign_keeps_every_invariant_on_its_accepted_behaviours() -> None:
    from tracecheck.campaigns.campaign import run_campaign  # noqa: PLC0415 - only this test needs it

    result = run_campaign("rref", 4, 11, 60, ROOT / "spec", explain=False, invariants=True)
    assert result.report.all_accepted
    assert result.invariants is not None
    assert "NoPrematureDeleteInv" in result.invariants.invariants
    assert [v.clean for v in result.invariants.verdicts] == [True] * 4, [
        v.summary() for v in result.invariants.verdicts
    ]
    # every state the acceptance run explored keeps them: no second run
    assert (result.invariants.tlc_runs, result.invariants.settled) == (0, 1)


# --- the invariants watched in the acceptance run (tracecheck.replay.watch) -----------------


def test_a_batch_no_explored_state_of_which_breaks_an_invariant_needs_no_second_run() -> None:
    traces = [trace(GOOD[:2], "short.ndjson"), trace(GOOD[:1], "one.ndjson")]
    _, report, witness = validate_checked(traces, LEDGER_AUDIT, SPEC_ROOT, invariants=True)
    assert report.watched == ["TypeOK", "SingleHolderInv"]
    assert [v.watch_breach for v in report.verdicts] == [False, False]
    assert witness is not None
    assert (witness.tlc_runs, witness.settled) == (0, 1)
    assert [(v.clean, v.clean_events) for v in witness.verdicts] == [(True, 2), (True, 1)]
    # the same verdicts as the pruning run gives, which the old path still takes
    _, unwatched, old = validate_checked(
        traces, LEDGER_AUDIT, SPEC_ROOT, invariants=True, settle=False
    )
    assert (unwatched.watched, [v.watch_breach for v in unwatched.verdicts]) == (None, [None] * 2)
    assert old is not None
    assert (old.tlc_runs, old.settled) == (1, 0)
    assert old.verdicts == witness.verdicts


def test_a_batch_with_a_breaking_trace_gets_the_same_breach_as_from_two_runs() -> None:
    traces = [trace(GOOD, "good.ndjson"), trace(GOOD[:2], "short.ndjson")]
    _, report, witness = validate_checked(traces, LEDGER_AUDIT, SPEC_ROOT, invariants=True)
    _, unwatched, old = validate_checked(
        traces, LEDGER_AUDIT, SPEC_ROOT, invariants=True, settle=False
    )
    assert witness is not None
    assert old is not None
    # watching changes no acceptance verdict, nor which pass gave it (the simulation pass
    # accepts both: the watch works in TLC's simulation mode too)
    assert [v.model_copy(update={"watch_breach": None}) for v in report.verdicts] == (
        unwatched.verdicts
    )
    assert (
        (report.simulated, report.tlc_runs) == (unwatched.simulated, unwatched.tlc_runs) == (2, 1)
    )
    assert [v.watch_breach for v in report.verdicts] == [True, False]
    assert (witness.tlc_runs, witness.settled) == (1, 0)  # the batch has a breach: its run
    assert witness.verdicts == old.verdicts
    broken, clean = witness.verdicts
    assert clean.clean
    assert (broken.clean, broken.event, broken.line) == (False, 3, 4)
    (breach,) = broken.breaches
    assert (breach.invariants, breach.after) == (["SingleHolderInv"], 3)
    assert breach.state == {"balance": "[a |-> 1, b |-> 2]", "inbox": "{}"}


def test_batches_are_settled_each_on_its_own_breaches() -> None:
    # two batches (the ledger's Max differs): the clean one is settled, the other one runs
    clean = trace(GOOD[:2], "short.ndjson", maximum=4)
    traces = [trace(GOOD, "good.ndjson"), clean]
    _, _, witness = validate_checked(traces, LEDGER_AUDIT, SPEC_ROOT, invariants=True)
    assert witness is not None
    assert (witness.tlc_runs, witness.settled) == (1, 1)
    assert [v.clean for v in witness.verdicts] == [False, True]


def test_a_breach_on_a_dead_end_only_leaves_the_accepted_trace_clean() -> None:
    # With unlogged deposits the acceptance run explores a hidden Deposit(b, 1) before a's
    # logged deposit (two holders): the watch sees the breach, and the pruning run finds the
    # behaviour that explains the trace clean.
    traces = [trace([event("Deposit", "a", 1, 1, a=1)], "one.ndjson")]
    _, report, witness = validate_checked(traces, LEDGER_AUDIT_HIDDEN, SPEC_ROOT, invariants=True)
    assert report.all_accepted
    assert [v.watch_breach for v in report.verdicts] == [True]
    assert witness is not None
    assert witness.tlc_runs == 1
    (verdict,) = witness.verdicts
    assert verdict.clean
