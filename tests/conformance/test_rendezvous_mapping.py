"""The rendezvous mapping against the spec and the implementation, statically and with runs."""

from __future__ import annotations

from pathlib import Path

from protoref.rendezvous.trace.events import EVENT_MODELS, POST_FIELDS
from tracecheck.campaigns.campaign import campaign_failure_note, run_campaign
from tracecheck.plugins.rendezvous import simulate
from tracecheck.protocols import load_mapping, load_simulator
from tracecheck.protocols.mapping import spec_actions
from tracecheck.protocols.rendezvous import RENDEZVOUS
from tracecheck.traces.load import load_trace

ROOT = Path(__file__).resolve().parent.parent.parent
SPEC = (ROOT / "spec" / "rendezvous" / "DynamicRendezvous.tla").read_text(encoding="utf-8")


def test_every_spec_action_is_mapped_or_hidden_with_a_reason() -> None:
    actions = spec_actions(SPEC)
    assert RENDEZVOUS.unmapped(set(actions)) == set()
    assert all(reason.strip() for reason in RENDEZVOUS.hidden.values())
    assert set(RENDEZVOUS.hidden) <= set(actions)
    # Each logged action is its own definition (not a shared helper such as Stop).
    assert {a.event for a in RENDEZVOUS.actions} == set(actions)


def test_mapped_parameters_are_the_spec_actions_parameters() -> None:
    actions = spec_actions(SPEC)
    for row in RENDEZVOUS.actions:
        assert row.params == actions[row.event], row.event


def test_every_implementation_event_maps_and_carries_the_mapped_fields() -> None:
    assert set(EVENT_MODELS) == {a.event for a in RENDEZVOUS.actions}
    for name, model in EVENT_MODELS.items():
        row = RENDEZVOUS.action(name)
        assert row is not None
        args = model.model_fields["args"].annotation
        assert args is not None
        assert set(args.model_fields) == set(row.args), name
        assert set(POST_FIELDS[name]) == set(row.post), name


def test_the_registry_finds_the_rendezvous_mapping_and_simulator() -> None:
    assert load_mapping("rendezvous") is RENDEZVOUS
    assert load_simulator("rendezvous") is simulate


def test_ticks_are_logged_by_an_environment_actor_not_a_spec_node(tmp_path: Path) -> None:
    simulate(3, 40, tmp_path / "t.ndjson")
    trace = load_trace(tmp_path / "t.ndjson")
    assert trace.header.environment == ("clock",)
    assert "clock" not in trace.header.nodes
    assert list(trace.header.nodes) == sorted(trace.header.nodes, key=_desc_order)
    assert {e.node for e in trace.events if e.event == "Tick"} == {"clock"}


def _desc_order(desc: str) -> tuple[str, int, int]:
    addr, pid, local = desc.rsplit("_", 2)
    return addr, int(pid), int(local)


def test_a_seeded_campaign_is_accepted_in_one_tlc_run(tmp_path: Path) -> None:
    result = run_campaign("rendezvous", 4, 21, 150, ROOT / "spec", out=tmp_path)
    assert result.report.all_accepted, campaign_failure_note(result, ROOT / "spec")
    assert result.report.tlc_runs == 1
    assert result.rejected_seeds == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"rendezvous-seed{s}.ndjson" for s in (21, 22, 23, 24)
    ]
    assert sum(result.report.coverage.values()) == result.report.events
    # Every event is pinned down: no unlogged choice multiplies the states per event.
    assert result.report.distinct_states <= 2 * result.report.events


def test_fifty_seeded_runs_with_crashes_and_close_are_accepted() -> None:
    # The simulator's default workload crashes nodes, lets late joiners in, closes the
    # rendezvous and interleaves every node's sync / decide / apply steps by the seed.
    result = run_campaign("rendezvous", 50, 1000, 150, ROOT / "spec")
    assert result.report.all_accepted, campaign_failure_note(result, ROOT / "spec")
    assert len(result.report.verdicts) == 50
    for action in ("Crash", "SetClosed", "SyncWriteLost", "RemoveFromParticipants"):
        assert result.report.coverage.get(action, 0) > 0, action
    assert result.report.tlc_runs == 1
