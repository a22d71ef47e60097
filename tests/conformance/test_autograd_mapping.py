"""The autograd mapping against the spec and the implementation, statically and with real
runs: every spec action mapped, every logged field one the action may write, a campaign's
traces accepted by TLC with every Reference action exercised, and the contract printable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protoref.autograd.trace.args import ARGS_MODELS
from protoref.autograd.trace.events import EVENT_MODELS
from tracecheck.campaigns.campaign import campaign_failure_note, run_campaign
from tracecheck.cli import main as tracecheck_main
from tracecheck.protocols import load_mapping
from tracecheck.protocols.autograd import AUTOGRAD
from tracecheck.protocols.mapping import spec_actions, spec_writers
from tracecheck.replay.coverage import NOT_PRODUCED, action_coverage

ROOT = Path(__file__).resolve().parent.parent.parent
SPEC = (ROOT / "spec" / "autograd" / "DistAutograd.tla").read_text(encoding="utf-8")


def test_every_spec_action_is_mapped_with_the_specs_parameters() -> None:
    actions = spec_actions(SPEC)
    assert AUTOGRAD.unmapped(set(actions)) == set()
    assert AUTOGRAD.hidden == {}
    for row in AUTOGRAD.actions:
        assert row.params == actions[row.event], row.event


def test_every_implementation_event_carries_the_mapped_fields() -> None:
    # every event is a mapped action, or the marker of a shape left out (the mapping's outside)
    assert set(EVENT_MODELS) == {a.event for a in AUTOGRAD.actions} | set(AUTOGRAD.outside)
    assert not set(AUTOGRAD.outside) & {a.event for a in AUTOGRAD.actions}
    for args in ARGS_MODELS:
        row = AUTOGRAD.action(args.action)
        assert row is not None
        names = {f.alias or n for n, f in args.model_fields.items()}
        assert names == set(row.args), args.action
        post = EVENT_MODELS[args.action].model_fields["post"].annotation
        assert post is not None
        logged = {f.alias or n for n, f in post.model_fields.items()}
        assert logged == set(row.post), args.action


def test_each_logged_variable_is_one_the_action_may_write() -> None:
    # and every action that may write a per-worker variable logs it: post holds every
    # variable the action touches, so a delta is also the change from the step's pre-state
    variables = {v for a in AUTOGRAD.actions for v in a.post}
    assert len(variables) == 20
    for variable in sorted(variables):
        # PeerDied(w, x) writes through Crash(x) only the dead worker's slices (and net),
        # which nobody logs after: the survivor w's own slice is unchanged, so it logs none
        writers = spec_writers(SPEC, variable) - {"PeerDied"}
        if "PeerDied" in spec_writers(SPEC, variable):
            assert "Crash" in writers, variable
        logging = {a.event for a in AUTOGRAD.actions if variable in a.post}
        assert logging == writers, variable


def test_the_registry_finds_the_autograd_mapping() -> None:
    assert load_mapping("autograd") is AUTOGRAD


def test_a_campaign_is_accepted_with_every_reference_action_exercised(tmp_path: Path) -> None:
    result = run_campaign("autograd", 20, 1, 150, ROOT / "spec", out=tmp_path)
    assert result.report.all_accepted, campaign_failure_note(result, ROOT / "spec")
    assert result.report.tlc_runs == 1
    coverage = action_coverage(result.report, AUTOGRAD, ROOT / "spec")
    gaps = [row.action for row in coverage.actions if row.status == "gap"]
    assert gaps == []
    unexercised = {row.action for row in coverage.actions if row.events == 0}
    assert unexercised == set(NOT_PRODUCED["autograd"])
    assert unexercised == {"LoseCleanupMsg", "FetchStoredValue", "UdfRaises", "PeerDied"}


def test_the_contract_lists_every_event(capsys: pytest.CaptureFixture[str]) -> None:
    assert tracecheck_main(["contract", "autograd", "--json"]) == 0
    contract = json.loads(capsys.readouterr().out)
    assert contract["module"] == "DistAutograd"
    assert {e["event"] for e in contract["events"]} == set(EVENT_MODELS) - set(AUTOGRAD.outside)
    assert "Workers" in contract["settings"]
    assert contract["derived_constants"] is True
