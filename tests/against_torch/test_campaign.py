"""The session's torch campaign: every run's trace is explained by DynamicRendezvous.tla, the
runs cover threads and processes on three stores and every spec action, and the two forced
schedules are reported as the torch defects they are."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from protoref.torch.defects import DEFECT_SCENARIOS, PYTORCH_111646, RANK_WORLD
from support.torch_runs import FIRST_SEED, SESSION_SCENARIOS
from tracecheck.campaigns.torch_rendezvous import (
    RANK_WORLD_INVARIANTS,
    TorchCampaignResult,
    run_torch_campaign,
)
from tracecheck.protocols.rendezvous import RENDEZVOUS
from tracecheck.traces.load import load_trace

SPEC_ROOT = Path(__file__).resolve().parents[2] / "spec"


def _note(result: TorchCampaignResult) -> str:
    lines = [
        f"{r.scenario} seed {r.seed}: {r.outcome} {r.defect or ''} {r.detail}" for r in result.runs
    ]
    return "\n".join([*lines, f"traces in {result.trace_dir}"])


def test_every_run_ran_and_every_plain_run_is_accepted(campaign: TorchCampaignResult) -> None:
    assert [r.scenario for r in campaign.runs] == list(SESSION_SCENARIOS)
    assert not campaign.failed, _note(campaign)
    for run in campaign.runs:
        if run.scenario in DEFECT_SCENARIOS:
            continue
        # random agents may run into the rank/world defect themselves (torch, not the adapter)
        allowed = {"accepted"} | ({"known-defect"} if run.scenario.startswith("random") else set())
        assert run.outcome in allowed, _note(campaign)
        assert run.defect in (None, RANK_WORLD), _note(campaign)


def test_threads_and_processes_on_three_stores(campaign: TorchCampaignResult) -> None:
    kinds = {(r.store, r.processes) for r in campaign.runs}
    assert {
        ("hash", False),
        ("tcp", False),
        ("file", False),
        ("tcp", True),
        ("file", True),
    } <= kinds
    assert {s.store for s in campaign.stores} == {"hash", "tcp", "file"}
    for store in campaign.stores:
        assert store.traces > 0
        assert store.events > 0
        # each store alone takes the handler through syncs, writes, lost CASes and time
        assert {"SyncRead", "SyncCached", "SyncWriteWon", "Tick", "Finish"} <= set(store.actions)


def test_every_spec_action_is_exercised(campaign: TorchCampaignResult) -> None:
    covered = {a for s in campaign.stores for a in s.actions}
    assert covered == {a.event for a in RENDEZVOUS.actions}
    assert campaign.report.uncovered == []


def test_processes_were_killed_with_sigkill_and_logged_as_crashes(
    campaign: TorchCampaignResult,
) -> None:
    for run in (r for r in campaign.runs if r.processes):
        assert any(outcomes[-1:] == ["killed"] for outcomes in run.returned.values()), run
    crashes = Counter(a for s in campaign.stores for a, n in s.actions.items() for _ in range(n))
    assert crashes["Crash"] >= 4  # two thread crashes, two SIGKILLs (random agents may add)


def test_the_rank_world_schedule_is_flagged_as_the_torch_defect(
    campaign: TorchCampaignResult,
) -> None:
    (run,) = [r for r in campaign.runs if r.scenario == "defect_rank_world"]
    # real torch returned rank 1 in a world of size 1 to the node held in its SYNC sleep
    assert "1/1@0" in [o for outcomes in run.returned.values() for o in outcomes]
    assert (run.outcome, run.defect) == ("known-defect", RANK_WORLD), _note(campaign)
    assert any(name in run.detail for name in RANK_WORLD_INVARIANTS), run.detail


def test_the_111646_schedule_is_flagged_as_the_torch_defect(campaign: TorchCampaignResult) -> None:
    (run,) = [r for r in campaign.runs if r.scenario == "defect_pytorch_111646"]
    assert (run.outcome, run.defect) == ("known-defect", PYTORCH_111646), _note(campaign)
    # accepted as what torch does (the PyTorch variant); the Reference variant, whose epilogue
    # moves the survivor to the wait list, rejects the survivor's sanitizing sync
    assert "accepted as PyTorch; the Reference variant: rejected at event" in run.detail
    assert "Sync" in run.detail
    # the survivor returned once and never re-rendezvoused
    assert sorted(len(o) for o in run.returned.values()) == [1, 1]


def test_runs_of_one_scenario_share_their_node_names_and_tlc_runs(
    torch_dr: object, tmp_path: Path
) -> None:
    """Each run numbers torch's handlers from the campaign's first local id (as a fresh agent
    process would), so two runs of one scenario have the same nodes, hence the same spec
    constants, and batch into one TLC run (the simulation pass, whose invariant watch settles
    their one group of constants: no invariants' run)."""
    result = run_torch_campaign(
        2, FIRST_SEED, SPEC_ROOT, out=tmp_path, names=["min_equals_max"], explain=False
    )
    assert [r.outcome for r in result.runs] == ["accepted", "accepted"], _note(result)
    first, second = (load_trace(Path(r.trace)).header.nodes for r in result.runs)
    assert first == second
    runs = (result.report.tlc_runs, result.invariants.tlc_runs, result.invariants.settled)
    assert runs == (1, 0, 1), runs
