"""The new replay recipes without torch or TLC (issue 27, §2): each planner takes the order its
program realizes and refuses a counterexample without it; each symptom check refuses facts
that lack the symptom; every PyTorch-variant model now has a torch run or a reason."""

from __future__ import annotations

from typing import Any

import pytest

from protoref.torch.rpc_repro import FaultPlan
from tracecheck.campaigns.replay_on_torch.recipes import (
    RECIPES,
    NotReplayed,
    RendezvousReplay,
    RpcReplay,
)
from tracecheck.campaigns.replay_on_torch.steps import Step


def _step(i: int, action: str = "", taken: tuple[str, ...] = (), **kw: Any) -> Step:
    return Step(index=i + 2, action=action, taken=taken, **kw)


def _rpc(model: str) -> RpcReplay:
    recipe = RECIPES[model]
    assert isinstance(recipe, RpcReplay)
    return recipe


def test_no_model_is_left_not_replayed() -> None:
    assert not [m for m, r in RECIPES.items() if isinstance(r, NotReplayed)]


UNFORKED = [
    _step(0, "Remote"),
    _step(1, "ReceiveNext", ("PYTHON_CALL",), changed=("owners",)),
    _step(2, "SystemNext", ("RREF_USER_DELETE",), changed=("erasedOwners", "owners")),
]
SELF_SHARE = [
    _step(0, "Remote"),
    _step(1, "ReceiveNext", ("PYTHON_CALL",), changed=("owners",)),
    _step(2, "ReceiveNext", ("PYTHON_CALL",), changed=("erasedOwners", "owners")),
]
LATE_CALL = [_step(9, "ReceiveNext", ("PYTHON_REMOTE_CALL",))]


@pytest.mark.parametrize(
    ("model", "steps"),
    [("MCRRef_pytorch_unforkedOwner", UNFORKED), ("MCRRef_pytorch_selfShare", SELF_SHARE)],
)
def test_empty_owner_planners_need_the_erase_before_the_call(model: str, steps: list[Step]) -> None:
    recipe = _rpc(model)
    plan = recipe.plan(steps)
    assert isinstance(plan, dict)
    FaultPlan.model_validate(plan)
    # the call taken before the erase, or no early owner: not this counterexample
    assert isinstance(recipe.plan([steps[0], *LATE_CALL, *steps[1:]]), str)
    assert isinstance(recipe.plan([steps[0], steps[2]]), str)


def test_the_retries_planner_fails_the_type_the_counterexample_lost() -> None:
    recipe = _rpc("MCRRef_pytorch_retriesExhausted")
    for kind in ("RREF_FORK_REQUEST", "RREF_CHILD_ACCEPT"):
        plan = recipe.plan([_step(0, "FaultNext", (kind,))])
        assert isinstance(plan, dict)
        assert plan["fails"] == {2: [kind]}
    assert isinstance(recipe.plan([_step(0, "ReceiveNext", ("RREF_FORK_REQUEST",))]), str)


def test_the_cleanup_race_planners_need_their_order() -> None:
    leak = _rpc("MCDistAutograd_pytorch38513_leak")
    assert isinstance(leak.plan([_step(0, "", ("CLEANUP",)), _step(1, "", ("FWD_REQ",))]), dict)
    assert isinstance(leak.plan([_step(0, "", ("FWD_REQ",)), _step(1, "", ("CLEANUP",))]), str)
    timeout = _rpc("MCDistAutograd_pytorchTimeout")
    ordered = [
        _step(0, "SystemNext", ("FWD_REQ",)),
        _step(1, "PollTimeoutRpcs"),
        _step(2, "ReleaseContext"),
        _step(3, "SystemNext", ("CLEANUP",)),
    ]
    assert isinstance(timeout.plan(ordered), dict)
    assert isinstance(timeout.plan([ordered[0], ordered[2], ordered[3]]), str)
    fire = _rpc("MCDistAutograd_pytorchFireForget")
    fired = _step(0, "AppNext", changed=("detached",))
    cleanup, answer = _step(1, "", ("CLEANUP",)), _step(2, "", ("FWD_RESP",))
    assert isinstance(fire.plan([fired, cleanup, answer]), dict)
    assert isinstance(fire.plan([fired, answer, cleanup]), str)


EMPTY = {"num_owner_rrefs": 0, "num_forks": 0}
ONE = {"num_owner_rrefs": 1, "num_forks": 1}


@pytest.mark.parametrize(
    ("model", "shown", "not_shown"),
    [
        (
            "MCRRef_pytorch_unforkedOwner",
            {
                "owner_early": ONE,
                "owner_after_delete": EMPTY,
                "owner_udf": "still waiting after 4 s",
                "creator_to_here": "returned",
                "owner": ONE,
            },
            {
                "owner_early": ONE,
                "owner_after_delete": ONE,
                "owner_udf": "still waiting after 4 s",
                "creator_to_here": "returned",
                "owner": ONE,
            },
        ),
        (
            "MCRRef_pytorch_selfShare",
            {
                "owner_udf": {"after_self_share": EMPTY, "local_value": "still waiting after 4 s"},
                "creator_to_here": "returned",
                "owner": ONE,
            },
            {
                "owner_udf": {"after_self_share": EMPTY, "local_value": "returned"},
                "creator_to_here": "returned",
                "owner": ONE,
            },
        ),
        (
            "MCRRef_pytorch_retriesExhausted",
            {"owner_before": ONE, "owner_after_drop": ONE},
            {"owner_before": ONE, "owner_after_drop": EMPTY},
        ),
        (
            "MCDistAutograd_pytorch38513_leak",
            {
                "answer": "returned",
                "callee_holds_context": {"send_functions": 0, "recv_functions": 1},
                "caller": {"num_autograd_contexts": 0},
            },
            {
                "answer": "returned",
                "callee_holds_context": None,
                "caller": {"num_autograd_contexts": 0},
            },
        ),
        (
            "MCDistAutograd_pytorchTimeout",
            {
                "call": "raised: RPC ran for more than set timeout (500 ms)",
                "callee_udf": {"current_context": "raised: Couldn't find autograd context data"},
            },
            {
                "call": "raised: RPC ran for more than set timeout (500 ms)",
                "callee_udf": {"current_context": "returned"},
            },
        ),
        (
            "MCDistAutograd_pytorchFireForget",
            {
                "answer": "returned",
                "callee_holds_context": {"send_functions": 0, "recv_functions": 1},
            },
            {
                "answer": "returned",
                "callee_holds_context": {"send_functions": 1, "recv_functions": 2},
            },
        ),
    ],
)
def test_new_symptom_checks_have_teeth(
    model: str, shown: dict[str, object], not_shown: dict[str, object]
) -> None:
    recipe = _rpc(model)
    assert recipe.symptom(shown)
    assert recipe.symptom(not_shown) is None


def test_the_rendezvous_shapes_refuse_other_counterexamples() -> None:
    waitlist = RECIPES["MCDynamicRendezvous_waitlist_full"]
    boot = RECIPES["MCDynamicRendezvousBootstrap_d7"]
    assert isinstance(waitlist, RendezvousReplay)
    assert isinstance(boot, RendezvousReplay)
    names = ["AddToWaitList", "RemoveFromParticipants", "AddToParticipants"]
    assert waitlist.shape([_step(i, n) for i, n in enumerate(names)]) is None
    assert waitlist.shape([_step(i, n) for i, n in enumerate(reversed(names))]) is not None
    built = _step(0, "Action", changed=("hasServer", "infoBuilt"))
    awaits = _step(1, "Action", changed=("awaiting",))
    assert boot.shape([built, awaits]) is None
    assert boot.shape([awaits, built]) is not None
