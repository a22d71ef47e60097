"""How each PyTorch-variant RRef must-fail model is replayed on torch, or why it cannot be."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from tracecheck.campaigns.replay_on_torch.early_owner_recipes import EARLY_OWNER_RECIPES
from tracecheck.campaigns.replay_on_torch.recipe_types import (
    Facts,
    NotReproducible,
    Planner,
    Recipe,
    RpcReplay,
    fact,
    waiting,
)
from tracecheck.campaigns.replay_on_torch.steps import Step, first_taken, takes_before

__all__ = ["RREF_RECIPES"]


def _late_remote_plan(shutdown: bool) -> Planner:
    def plan(steps: Sequence[Step]) -> dict[str, Any] | str:
        if not takes_before(steps, "RREF_USER_DELETE", "PYTHON_REMOTE_CALL"):
            return "the counterexample does not take RREF_USER_DELETE before PYTHON_REMOTE_CALL"
        # The delete must overtake the call on the owner: the agent cannot reorder one pipe
        # (a delay holds the sending thread, and the call is sent first), so the owner is kept
        # unpickling the call's argument for longer than the creator's timeout and drop.
        knobs = {"remote_timeout": 0.5, "unpickle_seconds": 2.5}
        if shutdown:
            # both workers shut down; the creator's fails at the store's 30 s timeout
            knobs |= {"grace": 33.0}
        return {"knobs": knobs}

    return plan


def _leak_symptom(facts: Facts) -> str | None:
    owner, creator = fact(facts, "owner"), fact(facts, "creator")
    if not owner or not creator:
        return None
    if owner["num_owner_rrefs"] >= 1 and owner["num_forks"] >= 1 and creator["num_forks"] == 0:
        return (
            f"leaked owner: after the creator dropped its timed-out UserRRef the owner holds "
            f"{owner['num_owner_rrefs']} OwnerRRef and {owner['num_forks']} fork; the creator "
            f"holds none"
        )
    return None


def _leak_shutdown_symptom(facts: Facts) -> str | None:
    leak = _leak_symptom(facts)
    owner = fact(facts, "owner_shutdown")
    logged = fact(facts, "errors_logged", "w1") or []
    # the creator's shutdown outcome comes on its stderr (protoref.torch.rref_replay_programs)
    creator = next((ln for ln in logged if "shutdown error report w1: raised" in ln), None)
    if leak is None or not waiting(owner) or creator is None or "timeout" not in creator:
        return None
    said = creator.split(": ", 1)[1]
    return (
        f"{leak}; the creator's rpc.shutdown() {said} (the join barrier's store wait), while "
        f"the owner's is {owner} (its sweep waits for the leaked OwnerRRef)"
    )


def _fetch_plan(reshare: bool) -> Planner:
    def plan(steps: Sequence[Step]) -> dict[str, Any] | str:
        if not takes_before(steps, "RREF_USER_DELETE", "PYTHON_RREF_FETCH_CALL"):
            return "the counterexample does not take RREF_USER_DELETE before the fetch"
        knobs = {"fetch_timeout": 60.0, "grace": 6.0} | ({"reshare": 1.0} if reshare else {})
        # the fetch is delayed in the user's sending thread (torch sends a TorchScript-typed
        # value's fetch as SCRIPT_RREF_FETCH_CALL: both kinds delayed); torch's shutdown sweep
        # sends the delete from another thread, so it reaches the owner first
        fetch = {"PYTHON_RREF_FETCH_CALL": 1.0, "SCRIPT_RREF_FETCH_CALL": 1.0}
        return {"delays": {1: fetch}, "knobs": knobs}

    return plan


def _fetch_symptom(facts: Facts) -> str | None:
    owner = fact(facts, "owner")
    if waiting(fact(facts, "user_side", "to_here")) and owner and owner["num_owner_rrefs"] == 0:
        return (
            f"hang: the user's to_here is {fact(facts, 'user_side', 'to_here')}; the owner "
            "has erased the OwnerRRef (0 owner RRefs) and parked the fetch"
        )
    return None


def _stranded_symptom(facts: Facts) -> str | None:
    again = fact(facts, "owner_after_reshare")
    if waiting(fact(facts, "user_side", "to_here")) and again and again["num_owner_rrefs"] >= 1:
        return (
            "hang: the owner shared the RRef again (1 OwnerRRef back in owners_), the parked "
            f"fetch stays stranded: to_here {fact(facts, 'user_side', 'to_here')}"
        )
    return None


def _self_remote_plan(steps: Sequence[Step]) -> dict[str, Any] | str:
    if (
        not steps
        or "PYTHON_REMOTE_CALL" not in steps[0].sent
        or "selfCalls" not in steps[0].changed
    ):
        return "the counterexample does not start with an rpc.remote to self"
    if first_taken(steps, "PYTHON_REMOTE_CALL") is not None:
        return "the counterexample runs the self call before the timeout"
    # the self call is kept unpickling past the timeout: the agent's delay would hold the
    # calling thread, and the timeout with it
    return {"knobs": {"remote_timeout": 0.3, "unpickle_seconds": 1.5}}


def _self_owner_assert(facts: Facts) -> str | None:
    logged = fact(facts, "errors_logged", "w0") or []
    hit = next((ln for ln in logged if "Expected OwnerRRef" in ln), None)
    if hit is None:
        return None
    return f"the delayed self call asserts after the timeout erased its owner: {hit.strip()[:200]}"


def _exhausted_plan(steps: Sequence[Step]) -> dict[str, Any] | str:
    lost = first_taken(steps, "RREF_FORK_REQUEST")
    accepted = first_taken(steps, "RREF_CHILD_ACCEPT")
    if lost is None or accepted is not None or any("RREF_ACK" in s.taken for s in steps[lost:]):
        return "the counterexample does not lose the child's RREF_FORK_REQUEST for good"
    # the child (rank 2) fails every attempt: more failures than sendWithRetries' 6 attempts
    return {
        "fails": {2: ["RREF_FORK_REQUEST"]},
        "num_fail_sends": 10,
        "knobs": {"retry_window": 16.0},
    }


def _pending_user_kept(facts: Facts) -> str | None:
    early, late = fact(facts, "child_early"), fact(facts, "child_after_retries")
    if not isinstance(early, Mapping) or early["num_pending_users"] < 1:
        return None
    if isinstance(late, Mapping) and late["num_pending_users"] >= 1:
        return (
            f"leaked pending user: after every RREF_FORK_REQUEST attempt failed the child still "
            f"holds {late['num_pending_users']} pending user"
        )
    logged = fact(facts, "errors_logged", "w2") or []
    if any("terminate called" in line for line in logged):
        # torch does worse than the spec's leak: the rethrown error ends the child's process
        what = next((ln.strip() for ln in logged if "what()" in ln), "")
        return (
            "the child's pending user is never confirmed; after the last failed attempt the "
            "child's process aborts (terminate called after throwing c10::Error)"
            + (f" {what}" if what else "")
        )
    return None


def _retries_plan(steps: Sequence[Step]) -> dict[str, Any] | str:
    lost = next(
        (
            kind
            for s in steps
            if s.action == "FaultNext"
            for kind in s.taken
            if kind in ("RREF_FORK_REQUEST", "RREF_CHILD_ACCEPT")
        ),
        None,
    )
    if lost is None:
        return "the counterexample exhausts neither an RREF_FORK_REQUEST nor an RREF_CHILD_ACCEPT"
    # the child (rank 2) sends both: every attempt of the lost one fails (more failures than
    # sendWithRetries' 6 attempts, about 13 s), then the parent drops its own RRef
    return {"fails": {2: [lost]}, "num_fail_sends": 10, "knobs": {"retry_window": 14.0}}


def _parent_fork_kept(facts: Facts) -> str | None:
    before, after = fact(facts, "owner_before"), fact(facts, "owner_after_drop")
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return None
    # the owner's only fork is the parent's (the child's fork request never arrived); had the
    # parent's drop sent its RREF_USER_DELETE, forks_ and owners_ would be empty
    if before["num_forks"] == 1 and after["num_forks"] == 1 and after["num_owner_rrefs"] == 1:
        return (
            "the parent keeps its pendingChildren_ entry: after its child's attempts were "
            "exhausted it dropped its RRef, but no RREF_USER_DELETE reached the owner, which "
            "still holds 1 OwnerRRef and the parent's fork"
        )
    return None


RREF_RECIPES: Final[dict[str, Recipe]] = {
    "MCRRef_pytorch_lateRemoteLeak": RpcReplay(
        "late_remote_leak", _late_remote_plan(shutdown=False), _leak_symptom
    ),
    "MCRRef_pytorch_lateRemoteLeak_shutdown": RpcReplay(
        "leak_then_shutdown", _late_remote_plan(shutdown=True), _leak_shutdown_symptom
    ),
    "MCRRef_pytorch40141": RpcReplay("fetch_after_delete", _fetch_plan(False), _fetch_symptom),
    "MCRRef_pytorch40141_parked": RpcReplay(
        "fetch_after_delete", _fetch_plan(False), _fetch_symptom
    ),
    "MCRRef_pytorch_strandedFetch": RpcReplay(
        "fetch_after_delete", _fetch_plan(True), _stranded_symptom
    ),
    "MCRRef_pytorch26759": NotReproducible(
        "needs a retried RREF_FORK_REQUEST delivered twice, the copy after the delete: the agent "
        "fails a send before it leaves (no copy arrives) and cannot duplicate a delivered one"
    ),
    "MCRRef_pytorch71029": RpcReplay(
        "self_remote_timeout", _self_remote_plan, _self_owner_assert, world=1
    ),
    "MCRRef_pytorch_unknownError": NotReproducible(
        "needs a processing error before the OwnerRRef is assigned (an UNKNOWN error reply): "
        "the agent fails sends, it cannot make the receiver's handler fail"
    ),
    "MCRRef_pytorch_forkRequestExhausted": RpcReplay(
        "fork_request_exhausted", _exhausted_plan, _pending_user_kept, world=3
    ),
    "MCRRef_pytorch_retriesExhausted": RpcReplay(
        "retries_exhausted", _retries_plan, _parent_fork_kept, world=3
    ),
    "MCRRef_pytorch31893": NotReproducible(
        "the pre-1.5 shutdown order: PR #31893 made join wait for every client call, so "
        "torch 2.13 to 2.15 forbid the ordering (a USER_DELETE processed after destroyInstance)"
    ),
    **EARLY_OWNER_RECIPES,
}
