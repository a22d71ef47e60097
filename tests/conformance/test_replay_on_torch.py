"""tracecheck replay-on-torch without torch or TLC: every PyTorch-variant must-fail model has a
recipe, each planner derives its faults from the counterexample's message order and refuses a
counterexample without that order, each symptom check refuses facts that lack the symptom, and
the fault plan refuses a message type the agent cannot inject."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from protoref.torch.rpc_repro import FAULT_TYPES, FaultPlan
from tracecheck.campaigns.replay_on_torch.matrix import campaigns
from tracecheck.campaigns.replay_on_torch.recipes import (
    RECIPES,
    NotReplayed,
    NotReproducible,
    RendezvousReplay,
    RpcReplay,
)
from tracecheck.campaigns.replay_on_torch.run import pytorch_models, torch_column
from tracecheck.campaigns.replay_on_torch.steps import Step, takes_before

SPEC = Path(__file__).resolve().parents[2] / "spec"


def _steps(*taken: str) -> list[Step]:
    return [Step(index=i + 2, action="", taken=(t,)) for i, t in enumerate(taken)]


def test_every_pytorch_must_fail_model_has_a_recipe_and_only_those() -> None:
    models = set(pytorch_models(SPEC))
    assert len(models) >= 40
    assert models == set(RECIPES)
    for name, recipe in RECIPES.items():
        if isinstance(recipe, NotReproducible | NotReplayed):
            assert len(recipe.reason) > 20, name


def test_the_docs_column_covers_every_pytorch_model() -> None:
    column = torch_column(SPEC)
    assert set(column) >= set(pytorch_models(SPEC))
    assert all(column[m] for m in pytorch_models(SPEC))


def test_takes_before_needs_both_types_in_that_order() -> None:
    steps = _steps("RREF_USER_DELETE", "PYTHON_REMOTE_CALL")
    assert takes_before(steps, "RREF_USER_DELETE", "PYTHON_REMOTE_CALL")
    assert not takes_before(steps, "PYTHON_REMOTE_CALL", "RREF_USER_DELETE")
    assert not takes_before(steps, "RREF_USER_DELETE", "PYTHON_RREF_FETCH_CALL")


@pytest.mark.parametrize(
    ("model", "order"),
    [
        ("MCRRef_pytorch_lateRemoteLeak", ("RREF_USER_DELETE", "PYTHON_REMOTE_CALL")),
        ("MCRRef_pytorch40141", ("RREF_USER_DELETE", "PYTHON_RREF_FETCH_CALL")),
        ("MCRRef_pytorch40141_parked", ("RREF_USER_DELETE", "PYTHON_RREF_FETCH_CALL")),
    ],
)
def test_rref_planners_follow_the_order_and_refuse_the_reverse(
    model: str, order: tuple[str, str]
) -> None:
    recipe = RECIPES[model]
    assert isinstance(recipe, RpcReplay)
    plan = recipe.plan(_steps(*order))
    assert isinstance(plan, dict)
    FaultPlan.model_validate(plan)  # only types the agent accepts
    assert isinstance(recipe.plan(_steps(*reversed(order))), str)


def test_the_late_answer_planner_needs_the_answer_after_the_release() -> None:
    recipe = RECIPES["MCDistAutograd_pytorch38513"]
    assert isinstance(recipe, RpcReplay)
    release = Step(index=2, action="ReleaseContext")
    answer = Step(index=3, action="DeserializeForwardAutogradResp", taken=("FWD_RESP",))
    assert isinstance(recipe.plan([release, answer]), dict)
    assert isinstance(recipe.plan([answer, release]), str)


@pytest.mark.parametrize(
    ("model", "shown", "not_shown"),
    [
        (
            "MCRRef_pytorch_lateRemoteLeak",
            {"owner": {"num_owner_rrefs": 1, "num_forks": 1}, "creator": {"num_forks": 0}},
            {"owner": {"num_owner_rrefs": 0, "num_forks": 0}, "creator": {"num_forks": 0}},
        ),
        (
            "MCRRef_pytorch40141",
            {"user_side": {"to_here": "still waiting after 6 s"}, "owner": {"num_owner_rrefs": 0}},
            {"user_side": {"to_here": "returned"}, "owner": {"num_owner_rrefs": 0}},
        ),
        (
            "MCDistAutograd_pytorch38513",
            {"answer": "returned", "released_context_found": True, "caller": {}},
            {"answer": "returned", "released_context_found": False},
        ),
        (
            "MCDistAutograd_pytorchFastUnusedSend",
            {"baseline": "returned", "answer_without_grad": "still waiting after 8 s"},
            {"baseline": "still waiting after 8 s", "answer_without_grad": "still waiting"},
        ),
    ],
)
def test_symptom_checks_have_teeth(
    model: str, shown: dict[str, object], not_shown: dict[str, object]
) -> None:
    recipe = RECIPES[model]
    assert isinstance(recipe, RpcReplay)
    assert recipe.symptom(shown)
    assert recipe.symptom(not_shown) is None


def test_rendezvous_recipes_name_a_forced_schedule() -> None:
    schedules = {r.scenario for r in RECIPES.values() if isinstance(r, RendezvousReplay)}
    assert schedules == {
        "defect_rank_world",
        "defect_pytorch_111646",
        "waitlist_full",
        "bootstrap_d7",
    }


def test_a_fault_plan_refuses_what_the_agent_cannot_inject() -> None:
    assert "CLEANUP_AUTOGRAD_CONTEXT_REQ" in FAULT_TYPES
    with pytest.raises(ValidationError, match="cannot inject"):
        FaultPlan(delays={0: {"FORWARD_AUTOGRAD_REQ": 1.0}})


def test_the_fork_request_symptom_needs_the_pending_user() -> None:
    recipe = RECIPES["MCRRef_pytorch_forkRequestExhausted"]
    assert isinstance(recipe, RpcReplay)
    pending = {"num_pending_users": 1}
    aborted = {"w2": ["terminate called after throwing an instance of 'c10::Error'"]}
    assert recipe.symptom({"child_early": pending, "child_after_retries": pending})
    assert recipe.symptom(
        {"child_early": pending, "child_after_retries": "raised: eof", "errors_logged": aborted}
    )
    assert (
        recipe.symptom({"child_early": {"num_pending_users": 0}, "errors_logged": aborted}) is None
    )
    assert recipe.symptom({"child_early": pending, "child_after_retries": "raised: eof"}) is None


def test_the_matrix_discovers_the_torch_campaigns() -> None:
    found = campaigns()
    assert "torch-rendezvous" in found
    assert all(name.startswith("torch-") for name in found)


def test_the_self_remote_symptom_is_torchs_assert() -> None:
    recipe = RECIPES["MCRRef_pytorch71029"]
    assert isinstance(recipe, RpcReplay)
    line = (
        "INTERNAL ASSERT FAILED ... Expected OwnerRRef with id GloballyUniqueId(0, 1) to be created"
    )
    assert recipe.symptom({"errors_logged": {"w0": [line]}})
    assert recipe.symptom({"errors_logged": {"w0": ["some other error"]}}) is None
    assert recipe.symptom({}) is None


def test_the_backward_error_symptoms_need_the_running_pass() -> None:
    idle = {"num_autograd_contexts": 0, "num_current_backward_passes": 0}
    busy = {"num_autograd_contexts": 0, "num_current_backward_passes": 1}
    held = {"num_autograd_contexts": 1, "num_current_backward_passes": 1}
    raised = {"backward": "raised: Error on Node 0", "right_after": [held, held]}
    error, hang = (
        RECIPES[m]
        for m in ("MCDistAutograd_pytorchBackwardError", "MCDistAutograd_pytorchBackwardErrorHang")
    )
    assert isinstance(error, RpcReplay)
    assert isinstance(hang, RpcReplay)
    assert error.symptom(raised)
    assert error.symptom({"backward": "returned", "right_after": [held]}) is None
    assert error.symptom({"backward": "raised: x", "right_after": [idle]}) is None
    assert hang.symptom(raised | {"after_release": [busy, idle]})
    assert hang.symptom(raised | {"after_release": [idle, idle]}) is None
    assert hang.symptom(raised | {"after_release": [held]}) is None
