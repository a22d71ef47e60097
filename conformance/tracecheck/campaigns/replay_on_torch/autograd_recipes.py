"""How each PyTorch-variant dist-autograd must-fail model is replayed on torch, or why not."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from tracecheck.campaigns.replay_on_torch.cleanup_race_recipes import CLEANUP_RACE_RECIPES
from tracecheck.campaigns.replay_on_torch.recipe_types import (
    ABLATION,
    Facts,
    NotReproducible,
    Recipe,
    RpcReplay,
    fact,
    waiting,
)
from tracecheck.campaigns.replay_on_torch.steps import Step, first_taken

__all__ = ["AUTOGRAD_RECIPES"]


def _backward_error_plan(steps: Sequence[Step]) -> dict[str, Any] | str:
    # TLC labels the raise by its disjunct of Next (FaultNext), after the pass started
    start = next((i for i, s in enumerate(steps) if s.action == "DistEngineExecute"), None)
    if start is None or not any(s.action in ("BackwardError", "FaultNext") for s in steps[start:]):
        return "the counterexample has no backward function raising during a pass"
    return {"knobs": {"in_block": 3.0, "after_release": 2.0}}


def _running(snapshot: Any) -> int:
    return sum(int(w["num_current_backward_passes"]) for w in snapshot or [])


def _raised_while_running(facts: Facts) -> str | None:
    raised = fact(facts, "backward")
    if (
        isinstance(raised, str)
        and raised.startswith("raised")
        and _running(fact(facts, "right_after"))
    ):
        return (
            f"backward {raised.removeprefix('raised: ')!r} while another worker's graph task of "
            f"the failed pass still runs ({_running(fact(facts, 'right_after'))} running)"
        )
    return None


def _pass_outlives_context(facts: Facts) -> str | None:
    after = fact(facts, "after_release")
    if _raised_while_running(facts) is None or not after:
        return None
    held = sum(int(w["num_autograd_contexts"]) for w in after)
    if held == 0 and _running(after) > 0:
        return (
            f"hang: 2 s after the release no worker holds the context, yet {_running(after)} "
            "backward passes of the failed pass still run (num_current_backward_passes)"
        )
    return None


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
    if fact(facts, "answer") != "returned" or not fact(facts, "released_context_found"):
        return None
    return (
        "resurrection: after the context block exited, the late answer re-created the context "
        f"on the caller (num_autograd_contexts {fact(facts, 'caller', 'num_autograd_contexts')})"
    )


def _unpaired(facts: Facts) -> str | None:
    if _resurrected(facts) is None:
        return None
    sends, recvs = fact(facts, "send_functions"), fact(facts, "recv_functions")
    if sends == 0 and recvs and recvs >= 1:
        return f"resurrected context with {recvs} recv function and no send function"
    return None


def _late_call(facts: Facts) -> str | None:
    if _resurrected(facts) is None or fact(facts, "get_gradients") != "returned":
        return None
    return "get_gradients with the released context's id returned (the late answer re-created it)"


def _mid_request(facts: Facts) -> str | None:
    answer = fact(facts, "answer")
    if isinstance(answer, str) and "Couldn't find autograd context" in answer:
        return f"the call failed on the callee: {answer.removeprefix('raised: ')}"
    return None


def _fast_plan(steps: Sequence[Step]) -> dict[str, Any] | str:
    if not any(s.action == "DistEngineExecute" for s in steps):
        return "the counterexample runs no backward pass (no DistEngineExecute)"
    return {"knobs": {"grace": 8.0}}


def _fast_hang(facts: Facts) -> str | None:
    hang = fact(facts, "answer_without_grad")
    if fact(facts, "baseline") == "returned" and waiting(hang):
        return f"hang: FAST-mode backward {hang} (the same program without the call returns)"
    return None


def _udf_hang(facts: Facts) -> str | None:
    hang = fact(facts, "udf_raised")
    if fact(facts, "baseline") == "returned" and waiting(hang):
        return (
            f"hang: FAST-mode backward {hang} after the UDF of a request that carried grad "
            f"raised ({fact(facts, 'udf_error')}); the same program without that call returns"
        )
    return None


AUTOGRAD_RECIPES: Final[dict[str, Recipe]] = {
    "MCDistAutograd_pytorch38513": RpcReplay("late_answer", _late_answer_plan, _resurrected),
    "MCDistAutograd_pytorch38513_pairing": RpcReplay("late_answer", _late_answer_plan, _unpaired),
    "MCDistAutograd_pytorch38513_lateCall": RpcReplay("late_answer", _late_answer_plan, _late_call),
    "MCDistAutograd_pytorch38513_midRequest": RpcReplay(
        "late_answer", _mid_request_plan, _mid_request
    ),
    "MCDistAutograd_pytorch26379": NotReproducible(
        "needs the creator to crash: the agent injects send failures and delays, not crashes"
    ),
    "MCDistAutograd_noCascade": NotReproducible(ABLATION + " (the cleanup cascade)"),
    "MCDistAutograd_knownOnlyOnGrad": NotReproducible(ABLATION + " (PR #30914)"),
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
    "MCDistAutograd_pytorchUdfRaises": RpcReplay("udf_raises", _fast_plan, _udf_hang),
    "MCDistAutograd_pytorchBackwardError": RpcReplay(
        "backward_error", _backward_error_plan, _raised_while_running, world=3
    ),
    "MCDistAutograd_pytorchBackwardErrorHang": RpcReplay(
        "backward_error", _backward_error_plan, _pass_outlives_context, world=3
    ),
    "MCDistAutograd_pytorchRetryAfterError": NotReproducible(
        "needs the failed pass's BACKWARD_AUTOGRAD_REQ (worker 1's gradient, sent before its "
        "error) to reach the root after the retry began: the agent cannot delay that type "
        "(messageStringToType lacks it) and the program's timing gave no such run on torch "
        "2.13 (program retry_after_error, four timings: two calls to w1, either one's gradient "
        "request first, one backward raising once after 0.3 to 1.5 s, a 0 to 2 s slow identity "
        "on the root): the failed pass left no gradient for p, and the retry counted its own "
        "once (5.0 at its return and 3-4 s later)"
    ),
    "MCDistAutograd_notesDrainFix": NotReproducible(
        "a fix proposed in the research note, not torch's code: no torch release runs it"
    ),
    "MCDistAutograd_idOverflow": NotReproducible(ABLATION + " (newContext's overflow check)"),
    "MCDistAutograd_idOverflowTop": NotReproducible(ABLATION + " (newContext's overflow check)"),
    "MCDistAutograd_nestingUnchecked": NotReproducible(ABLATION + " (newContext's nesting check)"),
    **CLEANUP_RACE_RECIPES,
}
