"""How each PyTorch-variant must-fail model is replayed on torch, or why it cannot be.

A recipe reads the model's counterexample (:mod:`.steps`) and either derives the torch run from
it (the fault agent's delays from the order in which message types are taken, the program's own
timing for what the agent cannot order), returning a string when the counterexample lacks the
order the program realizes; or it says why no torch run can follow the counterexample.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tracecheck.campaigns.replay_on_torch.steps import Step, first_taken, takes_before

__all__ = ["RECIPES", "NotReplayed", "NotReproducible", "Recipe", "RendezvousReplay", "RpcReplay"]

Facts = Mapping[str, Any]
#: the plan (FaultPlan fields) derived from the steps, or why the steps do not fit the program
Planner = Callable[[Sequence[Step]], "dict[str, Any] | str"]
#: the symptom torch showed, or None when the facts do not show it
Symptom = Callable[[Facts], "str | None"]


@dataclass(frozen=True)
class RpcReplay:
    """A program of :mod:`protoref.torch.rpc_programs` on FAULTY_TENSORPIPE workers."""

    program: str
    plan: Planner
    symptom: Symptom
    world: int = 2


@dataclass(frozen=True)
class RendezvousReplay:
    """A forced schedule of :mod:`protoref.torch.defects` (its own check decides)."""

    scenario: str
    shape: Callable[[Sequence[Step]], str | None]


@dataclass(frozen=True)
class NotReproducible:
    """No torch run can follow the counterexample: why."""

    reason: str


@dataclass(frozen=True)
class NotReplayed:
    """A torch run could follow the counterexample, but no program does yet: what it needs."""

    reason: str


Recipe = RpcReplay | RendezvousReplay | NotReproducible | NotReplayed


def _get(facts: Facts, *path: str) -> Any:
    cur: Any = facts
    for key in path:
        if not isinstance(cur, Mapping) or key not in cur:
            return None
        cur = cur[key]
    return cur


def _waiting(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("still waiting")


# -- RRef ----------------------------------------------------------------------------------


def _late_remote_plan(shutdown: bool) -> Planner:
    def plan(steps: Sequence[Step]) -> dict[str, Any] | str:
        if not takes_before(steps, "RREF_USER_DELETE", "PYTHON_REMOTE_CALL"):
            return "the counterexample does not take RREF_USER_DELETE before PYTHON_REMOTE_CALL"
        # The delete must overtake the call on the owner: the agent cannot reorder one pipe
        # (a delay holds the sending thread, and the call is sent first), so the owner is kept
        # unpickling the call's argument for longer than the creator's timeout and drop.
        knobs = {"remote_timeout": 0.5, "unpickle_seconds": 2.5}
        if shutdown:
            knobs |= {"shutdown": 1.0, "grace": 10.0}
        return {"knobs": knobs}

    return plan


def _leak_symptom(facts: Facts) -> str | None:
    owner, creator = _get(facts, "owner"), _get(facts, "creator")
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
    if leak is None or not _waiting(_get(facts, "owner_shutdown")):
        return None
    return f"{leak}; the owner's rpc.shutdown() is {_get(facts, 'owner_shutdown')}"


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
    owner = _get(facts, "owner")
    if _waiting(_get(facts, "user_side", "to_here")) and owner and owner["num_owner_rrefs"] == 0:
        return (
            f"hang: the user's to_here is {_get(facts, 'user_side', 'to_here')}; the owner "
            "has erased the OwnerRRef (0 owner RRefs) and parked the fetch"
        )
    return None


def _stranded_symptom(facts: Facts) -> str | None:
    again = _get(facts, "owner_after_reshare")
    if _waiting(_get(facts, "user_side", "to_here")) and again and again["num_owner_rrefs"] >= 1:
        return (
            "hang: the owner shared the RRef again (1 OwnerRRef back in owners_), the parked "
            f"fetch stays stranded: to_here {_get(facts, 'user_side', 'to_here')}"
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
    logged = _get(facts, "errors_logged", "w0") or []
    hit = next((ln for ln in logged if "Expected OwnerRRef" in ln), None)
    if hit is None:
        return None
    return f"the delayed self call asserts after the timeout erased its owner: {hit.strip()[:200]}"


def _backward_error_plan(steps: Sequence[Step]) -> dict[str, Any] | str:
    # TLC labels the raise by its disjunct of Next (FaultNext), after the pass started
    start = next((i for i, s in enumerate(steps) if s.action == "DistEngineExecute"), None)
    if start is None or not any(s.action in ("BackwardError", "FaultNext") for s in steps[start:]):
        return "the counterexample has no backward function raising during a pass"
    return {"knobs": {"in_block": 3.0, "after_release": 2.0}}


def _running(snapshot: Any) -> int:
    return sum(int(w["num_current_backward_passes"]) for w in snapshot or [])


def _raised_while_running(facts: Facts) -> str | None:
    raised = _get(facts, "backward")
    if (
        isinstance(raised, str)
        and raised.startswith("raised")
        and _running(_get(facts, "right_after"))
    ):
        return (
            f"backward {raised.removeprefix('raised: ')!r} while another worker's graph task of "
            f"the failed pass still runs ({_running(_get(facts, 'right_after'))} running)"
        )
    return None


def _pass_outlives_context(facts: Facts) -> str | None:
    after = _get(facts, "after_release")
    if _raised_while_running(facts) is None or not after:
        return None
    held = sum(int(w["num_autograd_contexts"]) for w in after)
    if held == 0 and _running(after) > 0:
        return (
            f"hang: 2 s after the release no worker holds the context, yet {_running(after)} "
            "backward passes of the failed pass still run (num_current_backward_passes)"
        )
    return None


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
    early, late = _get(facts, "child_early"), _get(facts, "child_after_retries")
    if not isinstance(early, Mapping) or early["num_pending_users"] < 1:
        return None
    if isinstance(late, Mapping) and late["num_pending_users"] >= 1:
        return (
            f"leaked pending user: after every RREF_FORK_REQUEST attempt failed the child still "
            f"holds {late['num_pending_users']} pending user"
        )
    logged = _get(facts, "errors_logged", "w2") or []
    if any("terminate called" in line for line in logged):
        # torch does worse than the spec's leak: the rethrown error ends the child's process
        what = next((ln.strip() for ln in logged if "what()" in ln), "")
        return (
            "the child's pending user is never confirmed; after the last failed attempt the "
            "child's process aborts (terminate called after throwing c10::Error)"
            + (f" {what}" if what else "")
        )
    return None


# -- autograd ------------------------------------------------------------------------------


def _late_answer_plan(steps: Sequence[Step]) -> dict[str, Any] | str:
    release = next((i for i, s in enumerate(steps) if s.action == "ReleaseContext"), None)
    answer = first_taken(steps, "FWD_RESP")
    if release is None or answer is None or answer < release:
        return "the counterexample does not take the FORWARD_AUTOGRAD_RESP after the release"
    # The caller's CLEANUP must reach the callee after it answered: the callee gets one RPC
    # thread (the cleanup queues behind the running UDF). torch's callee then cascades a
    # cleanup back to the caller (#32497), which the counterexample leaves in flight: delayed.
    return {
        "delays": {1: {"CLEANUP_AUTOGRAD_CONTEXT_REQ": 4.0}},
        "knobs": {"udf_seconds": 0.5, "callee_threads": 1.0, "settle": 0.3, "hold": 0.0},
    }


def _mid_request_plan(steps: Sequence[Step]) -> dict[str, Any] | str:
    cleanup = first_taken(steps, "CLEANUP")
    request = first_taken(steps, "FWD_REQ")
    if cleanup is None or request is None or cleanup < request:
        return "the counterexample does not take the CLEANUP while the request's handler runs"
    # no agent fault: the UDF outlasts the caller's exit, so the cleanup arrives mid-request
    return {"knobs": {"udf_seconds": 1.5, "settle": 0.3}}


def _resurrected(facts: Facts) -> str | None:
    if _get(facts, "answer") != "returned" or not _get(facts, "released_context_found"):
        return None
    return (
        "resurrection: after the context block exited, the late answer re-created the context "
        f"on the caller (num_autograd_contexts {_get(facts, 'caller', 'num_autograd_contexts')})"
    )


def _unpaired(facts: Facts) -> str | None:
    if _resurrected(facts) is None:
        return None
    sends, recvs = _get(facts, "send_functions"), _get(facts, "recv_functions")
    if sends == 0 and recvs and recvs >= 1:
        return f"resurrected context with {recvs} recv function and no send function"
    return None


def _late_call(facts: Facts) -> str | None:
    if _resurrected(facts) is None or _get(facts, "get_gradients") != "returned":
        return None
    return "get_gradients with the released context's id returned (the late answer re-created it)"


def _mid_request(facts: Facts) -> str | None:
    answer = _get(facts, "answer")
    if isinstance(answer, str) and "Couldn't find autograd context" in answer:
        return f"the call failed on the callee: {answer.removeprefix('raised: ')}"
    return None


def _fast_plan(steps: Sequence[Step]) -> dict[str, Any] | str:
    if not any(s.action == "DistEngineExecute" for s in steps):
        return "the counterexample runs no backward pass (no DistEngineExecute)"
    return {"knobs": {"grace": 8.0}}


def _fast_hang(facts: Facts) -> str | None:
    hang = _get(facts, "answer_without_grad")
    if _get(facts, "baseline") == "returned" and _waiting(hang):
        return f"hang: FAST-mode backward {hang} (the same program without the call returns)"
    return None


# -- rendezvous ----------------------------------------------------------------------------


def _leave_complete_shape(steps: Sequence[Step]) -> str | None:
    names = [s.action for s in steps]
    if not any("Exit" in n or "Leave" in n or "Remove" in n for n in names):
        return "the counterexample has no participant leaving the complete round"
    return None


def _crash_shape(steps: Sequence[Step]) -> str | None:
    if not any("Crash" in s.action for s in steps):
        return "the counterexample has no crash"
    return None


_ABLATION = (
    "an ablation of a check torch ships (the model removes it to show its teeth); "
    "unchanged torch keeps the check, so it has no run to follow"
)
_NO_PROGRAM = "no torch program follows this counterexample yet"

RECIPES: Final[dict[str, Recipe]] = {
    # rref
    "MCRRef_pytorch_lateRemoteLeak": RpcReplay(
        "late_remote_leak", _late_remote_plan(shutdown=False), _leak_symptom
    ),
    "MCRRef_pytorch_lateRemoteLeak_shutdown": RpcReplay(
        "late_remote_leak", _late_remote_plan(shutdown=True), _leak_shutdown_symptom
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
    "MCRRef_pytorch_unforkedOwner": NotReplayed(_NO_PROGRAM),
    "MCRRef_pytorch_selfShare": NotReplayed(_NO_PROGRAM),
    "MCRRef_pytorch_unknownError": NotReproducible(
        "needs a processing error before the OwnerRRef is assigned (an UNKNOWN error reply): "
        "the agent fails sends, it cannot make the receiver's handler fail"
    ),
    "MCRRef_pytorch_forkRequestExhausted": RpcReplay(
        "fork_request_exhausted", _exhausted_plan, _pending_user_kept, world=3
    ),
    "MCRRef_pytorch_retriesExhausted": NotReplayed(_NO_PROGRAM),
    "MCRRef_pytorch31893": NotReproducible(
        "the pre-1.5 shutdown order: PR #31893 made join wait for every client call, so "
        "torch 2.13 to 2.15 forbid the ordering (a USER_DELETE processed after destroyInstance)"
    ),
    # autograd
    "MCDistAutograd_pytorch38513": RpcReplay("late_answer", _late_answer_plan, _resurrected),
    "MCDistAutograd_pytorch38513_pairing": RpcReplay("late_answer", _late_answer_plan, _unpaired),
    "MCDistAutograd_pytorch38513_lateCall": RpcReplay("late_answer", _late_answer_plan, _late_call),
    "MCDistAutograd_pytorch38513_midRequest": RpcReplay(
        "late_answer", _mid_request_plan, _mid_request
    ),
    "MCDistAutograd_pytorch38513_leak": NotReplayed(_NO_PROGRAM + " (a context held for ever)"),
    "MCDistAutograd_pytorchTimeout": NotReplayed(_NO_PROGRAM),
    "MCDistAutograd_pytorchFireForget": NotReplayed(_NO_PROGRAM),
    "MCDistAutograd_pytorch26379": NotReproducible(
        "needs the creator to crash: the agent injects send failures and delays, not crashes"
    ),
    "MCDistAutograd_noCascade": NotReproducible(_ABLATION + " (the cleanup cascade)"),
    "MCDistAutograd_knownOnlyOnGrad": NotReproducible(_ABLATION + " (PR #30914)"),
    "MCDistAutograd_pytorch32497": NotReproducible(
        "unobservable from outside: the redundant cleanup finds no context and is dropped; no "
        "torch counter counts cleanups"
    ),
    "MCDistAutograd_pytorchSelfCall": NotReproducible(
        "unobservable from outside: the self-sent cleanup finds no context; no torch counter "
        "counts cleanups"
    ),
    "MCDistAutograd_pytorchLoseCleanup": NotReproducible(
        "needs all 21 attempts of a CLEANUP to fail: the agent can fail them, but the retry "
        "schedule (1 s x 1.5^k, 20 retries) takes about 6,600 s"
    ),
    "MCDistAutograd_pytorchStoppedCallee": NotReproducible(
        "needs a callee that stops without closing its connections: the agent cannot stop a "
        "process (docs: observed by hand with SIGSTOP)"
    ),
    "MCDistAutograd_pytorchFastUnusedSend": RpcReplay("fast_unused_send", _fast_plan, _fast_hang),
    "MCDistAutograd_pytorchBackwardError": RpcReplay(
        "backward_error", _backward_error_plan, _raised_while_running, world=3
    ),
    "MCDistAutograd_pytorchBackwardErrorHang": RpcReplay(
        "backward_error", _backward_error_plan, _pass_outlives_context, world=3
    ),
    "MCDistAutograd_pytorchRetryAfterError": NotReplayed(_NO_PROGRAM),
    "MCDistAutograd_notesDrainFix": NotReproducible(
        "a fix proposed in the research note, not torch's code: no torch release runs it"
    ),
    "MCDistAutograd_idOverflow": NotReproducible(_ABLATION + " (newContext's overflow check)"),
    "MCDistAutograd_idOverflowTop": NotReproducible(_ABLATION + " (newContext's overflow check)"),
    "MCDistAutograd_nestingUnchecked": NotReproducible(_ABLATION + " (newContext's nesting check)"),
    # rendezvous
    "MCDynamicRendezvous_pytorch_leave_complete_rank": RendezvousReplay(
        "defect_rank_world", _leave_complete_shape
    ),
    "MCDynamicRendezvous_pytorch_leave_complete_world": RendezvousReplay(
        "defect_rank_world", _leave_complete_shape
    ),
    "MCDynamicRendezvous_pytorch_leave_complete_round": RendezvousReplay(
        "defect_rank_world", _leave_complete_shape
    ),
    "MCDynamicRendezvous_pytorch111646": RendezvousReplay("defect_pytorch_111646", _crash_shape),
    "MCDynamicRendezvous_waitlist_full": NotReplayed(_NO_PROGRAM + " (notes, Difference 6)"),
    "MCDynamicRendezvous_live_lastcall_long": NotReproducible(
        "a liveness lasso (a lone joiner rejoining for ever): a finite run shows rejoins, not "
        "that no round ever completes"
    ),
    "MCDynamicRendezvousBootstrap_d7": NotReplayed(
        _NO_PROGRAM + " (TCPStore sharing: the elastic agent's bootstrap, not the handler)"
    ),
}
