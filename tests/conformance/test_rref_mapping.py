"""The RRef mapping against the spec and the implementation, statically and with real runs."""

from __future__ import annotations

from pathlib import Path

from protoref.rref.trace import ACTION_ARGS, EVENT_MODELS
from tracecheck.campaigns.campaign import campaign_failure_note, run_campaign
from tracecheck.protocols import load_mapping
from tracecheck.protocols.mapping import spec_actions, spec_writers
from tracecheck.protocols.rref import RREF

ROOT = Path(__file__).resolve().parent.parent.parent
SPEC = (ROOT / "spec" / "rref" / "RRef.tla").read_text(encoding="utf-8")


def test_every_spec_action_is_mapped_or_hidden_with_a_reason() -> None:
    actions = spec_actions(SPEC)
    assert RREF.unmapped(set(actions)) == set()
    assert all(reason.strip() for reason in RREF.hidden.values())
    assert set(RREF.hidden) <= set(actions)


def test_mapped_parameters_are_the_spec_actions_parameters() -> None:
    actions = spec_actions(SPEC)
    for row in RREF.actions:
        assert row.params == actions[row.event], row.event


def test_every_implementation_event_maps_and_carries_the_mapped_fields() -> None:
    mapped = {a.event for a in RREF.actions}
    assert set(EVENT_MODELS) <= mapped
    for name, model in EVENT_MODELS.items():
        row = RREF.action(name)
        assert row is not None
        args = ACTION_ARGS[name].model_fields
        assert {f.alias or n for n, f in args.items()} == set(row.args), name
        post = model.model_fields["post"].annotation
        assert post is not None
        logged = {f.alias or n for n, f in post.model_fields.items()}
        assert logged == set(row.post), name


#: The variables that only grow (RRef.tla HistoryGrowsProp), logged as what a step added.
HISTORY = ("users", "fetched", "deleted", "timedOut", "tombstones")


def test_every_step_that_grows_a_history_variable_logs_what_it_added() -> None:
    # Checking each step's growth checks the whole value only if no step grows it unlogged:
    # the actions whose text (or a definition they use) primes the variable are exactly the
    # events that log <name>Added.
    for name in HISTORY:
        logging = {a.event for a in RREF.actions if f"{name}Added" in a.post}
        assert logging == spec_writers(SPEC, name), name
    assert "HistoryGrowsProp" in SPEC


def test_spec_writers_reads_helpers_and_ignores_unprimed_mentions() -> None:
    text = """
Helper(w) == x' = x + w
A(w) == Helper(w) /\\ UNCHANGED y
B == /\\ y' = y /\\ UNCHANGED x  \\* x' in a comment
Next == \\E w \\in {1} : A(w) \\/ B
"""
    assert spec_actions(text) == {"A": ("w",), "B": ()}
    assert spec_writers(text, "x") == {"A"}
    assert spec_writers(text, "y") == {"B"}


def test_the_registry_finds_the_rref_mapping() -> None:
    assert load_mapping("rref") is RREF


def test_a_seeded_campaign_is_accepted_in_one_tlc_run(tmp_path: Path) -> None:
    result = run_campaign("rref", 4, 11, 60, ROOT / "spec", out=tmp_path)
    assert result.report.all_accepted, campaign_failure_note(result, ROOT / "spec")
    assert result.report.tlc_runs == 1
    assert result.rejected_seeds == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"rref-seed{s}.ndjson" for s in (11, 12, 13, 14)
    ]
    assert sum(result.report.coverage.values()) == result.report.events


def test_fifty_seeded_runs_with_faults_are_accepted() -> None:
    # The simulator's default workload has duplicated (retried) control messages and rpc.remote
    # timeouts on: the at-least-once faults the protocol must survive.
    result = run_campaign("rref", 50, 1000, 60, ROOT / "spec")
    assert result.report.all_accepted, campaign_failure_note(result, ROOT / "spec")
    assert len(result.report.verdicts) == 50
    assert result.report.coverage.get("RetrySend", 0) > 0
    assert result.report.coverage.get("TimeOutRemote", 0) > 0
    assert result.report.tlc_runs == 1
