"""torch 2.13's own distributed autograd under the checker: one real session (three torch
processes on the FAULTY_TENSORPIPE agent, seed 5: every CLEANUP_AUTOGRAD_CONTEXT_REQ's first
attempt fails, so torch re-sends each a second later) with three scenarios, replayed through
TraceDistAutogradTorch.tla; and the command's skip when torch is absent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from protoref.torch.rpc.autograd_scenarios import SCENARIOS
from protoref.torch.rpc.faults import ACCEPTED_TYPES, plan_for
from tracecheck.campaigns.torch_autograd import (
    AUTOGRAD_ACTIONS,
    TorchAutogradResult,
    run_torch_autograd_campaign,
)
from tracecheck.protocols.autograd_torch import AUTOGRAD_OPS

ROOT = Path(__file__).resolve().parents[2]
CHOSEN = ("cleanup_cascade", "backward_error", "fire_and_forget")


@pytest.fixture(scope="module")
def autograd_campaign(
    torch_dr: ModuleType, tmp_path_factory: pytest.TempPathFactory
) -> TorchAutogradResult:
    return run_torch_autograd_campaign(
        1, 5, ROOT / "spec", out=tmp_path_factory.mktemp("torch-autograd"), scenarios=CHOSEN
    )


def test_the_session_is_explained(autograd_campaign: TorchAutogradResult) -> None:
    (run,) = autograd_campaign.runs
    # accepted, or accepted with FAST mode's never-ending graph task seen at a quiet point
    assert run.outcome in {"accepted", "known-defect"}, run.detail
    assert run.scenarios == list(CHOSEN)
    assert "CLEANUP_AUTOGRAD_CONTEXT_REQ" in run.faults


def test_the_accepting_behaviour_ran_torch_s_protocol(
    autograd_campaign: TorchAutogradResult,
) -> None:
    """The nested calls (one fired and forgotten), the cascade, the FAST-mode backward and
    the backward function that raised all took their spec actions."""
    taken = {a for a, n in autograd_campaign.actions.items() if n}
    assert {
        "NestedSendMessageWithAutograd",
        "ProcessCleanupAutogradContextReq",
        "ProcessBackwardAutogradReq",
        "CleanupBackwardPass",
        "BackwardError",
    } <= taken
    assert taken <= set(AUTOGRAD_ACTIONS)
    assert set(autograd_campaign.coverage) == set(AUTOGRAD_OPS)


def test_the_fault_plan_uses_names_the_agent_accepts() -> None:
    for seed in range(1, 30):
        plan = plan_for("autograd", seed)
        assert set(plan.messages_to_fail) | set(plan.messages_to_delay) <= set(ACCEPTED_TYPES)
    assert plan_for("autograd", 5) == plan_for("autograd", 5)
    assert plan_for("autograd", 5).messages_to_fail == ("CLEANUP_AUTOGRAD_CONTEXT_REQ",)
    assert set(CHOSEN) <= set(SCENARIOS)


def test_without_torch_the_command_exits_3() -> None:
    """A Python that finds no torch (its version lookup patched to say so): the campaign says
    it did not run (exit 3), as make check's target expects."""
    code = (
        "import sys; import protoref.torch.compat as compat; "
        "compat.torch_version = lambda: None; from tracecheck.cli import main; "
        "sys.exit(main(['campaign', 'torch-autograd', '--runs', '1']))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "campaign torch-autograd not run" in proc.stderr


def test_a_quiet_point_is_idle_only_when_nothing_can_change_a_counter(
    torch_dr: ModuleType,
) -> None:
    """The fast path of a quiet point (autograd_steps._idle): no context anywhere and the
    agents' active calls as at the last quiet point. A held context (its cleanup may wait
    for the agent's re-send) or one more active call (a UDF still sleeping) is not idle; a
    hang's call that stays active for good is, once the last quiet point saw it."""
    from protoref.torch.rpc import autograd_steps as s  # noqa: PLC0415 - torch only here

    def sample(contexts: int = 0, client: int = 0, server: int = 1) -> dict[str, int]:
        return {
            "num_autograd_contexts": contexts,
            "num_current_backward_passes": 0,
            "client_active_calls": client,
            "server_active_calls": server,
            "server_active_async_calls": 0,
        }

    first = [(0, 1, 0)]
    assert s._idle([sample()], first)
    assert not s._idle([sample(contexts=1)], first)
    assert not s._idle([sample(server=2)], first)
    assert not s._idle([sample(client=1)], first)
    assert s._idle([sample(client=1)], [(1, 1, 0)])
