"""The empty-OwnerRRef and retry-exhaustion counterexamples on torch (issue 27, §2): selfShare
end to end (TLC's counterexample, then torch along it); unforkedOwner and retriesExhausted with
the plan recorded from their counterexamples (their TLC runs alone take 25-45 s); the leak's
graceful shutdown with its recorded plan (the store's 30 s timeout makes it a long run)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tracecheck.campaigns.replay_on_torch.recorded import replay_recorded
from tracecheck.campaigns.replay_on_torch.run import replay_model

SPEC_ROOT = Path(__file__).resolve().parents[2] / "spec"


def test_self_share_erases_the_owner_while_the_creator_is_alive(torch_dr: ModuleType) -> None:
    del torch_dr  # (torch must be installed)
    result = replay_model("MCRRef_pytorch_selfShare", SPEC_ROOT)
    assert result.verdict == "reproduced", result.detail
    udf = result.facts["owner_udf"]
    assert isinstance(udf, dict)
    assert udf["after_self_share"] == {
        "num_owner_rrefs": 0,
        "num_forks": 0,
        "num_pending_users": 0,
        "num_pending_futures": 0,
    }
    assert str(udf["local_value"]).startswith("still waiting")


def test_another_users_delete_erases_the_empty_owner(torch_dr: ModuleType) -> None:
    del torch_dr
    result = replay_recorded("MCRRef_pytorch_unforkedOwner", SPEC_ROOT)
    assert result.verdict == "reproduced", result.detail
    erased, owner = result.facts["owner_after_delete"], result.facts["owner"]
    assert isinstance(erased, dict)
    assert isinstance(owner, dict)
    assert erased["num_owner_rrefs"] == 0  # erased while the creating call was in flight
    assert owner["num_owner_rrefs"] == 1  # the second OwnerRRef the late call made


def test_exhausted_fork_request_keeps_the_parents_fork(torch_dr: ModuleType) -> None:
    del torch_dr
    result = replay_recorded("MCRRef_pytorch_retriesExhausted", SPEC_ROOT)
    assert result.verdict == "reproduced", result.detail
    assert result.plan["fails"] == {"2": ["RREF_FORK_REQUEST"]}
    after = result.facts["owner_after_drop"]
    assert isinstance(after, dict)
    assert after["num_forks"] == 1  # the parent's fork, never deleted


def test_the_leak_fails_the_creators_shutdown_at_the_store_timeout(torch_dr: ModuleType) -> None:
    """Issue 27's 30 s shutdown failure: the worker without the leaked owner raises at the join
    barrier's store wait while the owner's sweep still waits (no model shows the barrier)."""
    del torch_dr
    result = replay_recorded("MCRRef_pytorch_lateRemoteLeak_shutdown", SPEC_ROOT)
    assert result.verdict == "reproduced", result.detail
    assert "DistStoreError" in result.detail
    assert str(result.facts["owner_shutdown"]).startswith("still waiting")
