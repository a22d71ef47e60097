"""torch 2.13's own RRef protocol under the checker: one real session (three torch processes
on the FAULTY_TENSORPIPE agent, seed 2: every retried control type fails once, so torch
re-sends each), with three scenarios, replayed through TraceRRefTorch.tla."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from protoref.torch.rpc.faults import ACCEPTED_TYPES, plan_for
from tracecheck.campaigns.torch_rref import TorchRRefResult, run_torch_rref_campaign

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ("forks_of_forks", "self_remote", "to_here_timeout")


@pytest.fixture(scope="module")
def rref_campaign(
    torch_dr: ModuleType, tmp_path_factory: pytest.TempPathFactory
) -> TorchRRefResult:
    return run_torch_rref_campaign(
        1, 2, ROOT / "spec", out=tmp_path_factory.mktemp("torch-rref"), scenarios=SCENARIOS
    )


def test_the_session_is_accepted(rref_campaign: TorchRRefResult) -> None:
    (run,) = rref_campaign.runs
    assert run.outcome == "accepted", run.detail
    assert run.scenarios == [*SCENARIOS, "held_at_shutdown"]


def test_the_accepting_behaviour_ran_torch_s_protocol(rref_campaign: TorchRRefResult) -> None:
    """The agent fails a first attempt before writing it, so torch's retry is the only copy:
    no duplicate is needed; the accepting behaviour ran the fork protocol, the self remote,
    the timed-out fetch and the shutdown sweep."""
    taken = {a for a, n in rref_campaign.actions.items() if n}
    assert not rref_campaign.actions["RetrySend"]
    assert {
        "AddForkOfOwnerIfNotPresent",
        "DelPendingChild",
        "FinishCreatingOwnerRRef",
        "TimeOutToHere",
        "DelAllUsersAndUnforkedOwners",
        "DestroyInstance",
    } <= taken


def test_the_fault_plan_uses_names_the_agent_accepts() -> None:
    for seed in range(1, 30):
        plan = plan_for("rref", seed)
        assert set(plan.messages_to_fail) | set(plan.messages_to_delay) <= set(ACCEPTED_TYPES)
    assert plan_for("rref", 2) == plan_for("rref", 2)
