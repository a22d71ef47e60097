"""The dist-autograd counterexamples where a CLEANUP races the context's own calls (#38513;
programs in :mod:`protoref.torch.autograd_replay_programs`):

- ``MCDistAutograd_pytorch38513_leak``: the CLEANUP reaches the callee before the request, which
  then creates a context that no cleanup will reach (the callee is kept unpickling the request).
- ``MCDistAutograd_pytorchTimeout``: the awaited call times out, the block exits, and its
  CLEANUP erases the context under the callee's running UDF.
- ``MCDistAutograd_pytorchFireForget``: the callee's UDF fires a nested call and forgets it; the
  caller's CLEANUP erases the callee's context and the nested call's late FORWARD_AUTOGRAD_RESP
  re-creates it (the callee's cascade CLEANUP to the nested worker, which the counterexample
  leaves in flight, is delayed by the agent).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from tracecheck.campaigns.replay_on_torch.recipe_types import Facts, Recipe, RpcReplay, fact
from tracecheck.campaigns.replay_on_torch.steps import Step, first_taken

__all__ = ["CLEANUP_RACE_RECIPES"]


def _release(steps: Sequence[Step]) -> int | None:
    return next((i for i, s in enumerate(steps) if s.action == "ReleaseContext"), None)


def _leak_plan(steps: Sequence[Step]) -> dict[str, Any] | str:
    cleanup, request = first_taken(steps, "CLEANUP"), first_taken(steps, "FWD_REQ")
    if cleanup is None or request is None or request < cleanup:
        return "the counterexample does not take the CLEANUP before the request"
    # the request's argument takes 1.5 s to unpickle on the callee: torch creates the context
    # only after that, so the CLEANUP (sent at once by the exiting block) finds none
    return {"knobs": {"unpickle_seconds": 1.5, "hold": 3.0}}


def _leak_symptom(facts: Facts) -> str | None:
    held = fact(facts, "callee_holds_context")
    if (
        fact(facts, "answer") != "returned"
        or not isinstance(held, Mapping)
        or fact(facts, "caller", "num_autograd_contexts") != 0
    ):
        return None
    return (
        "leak: the CLEANUP reached the callee before the request, which then created the "
        f"context ({held['recv_functions']} recv function); 3 s after the caller released it "
        "(caller: 0 contexts) the callee still holds it, and no cleanup is left to reach it"
    )


def _timeout_plan(steps: Sequence[Step]) -> dict[str, Any] | str:
    release = _release(steps)
    poll = next((i for i, s in enumerate(steps) if s.action == "PollTimeoutRpcs"), None)
    request, cleanup = first_taken(steps, "FWD_REQ"), first_taken(steps, "CLEANUP")
    if release is None or poll is None or request is None or cleanup is None:
        return "the counterexample has no timed-out call whose cleanup reaches the callee"
    if not request < poll < release < cleanup:
        return "the counterexample does not time the call out while the callee runs it"
    # no agent fault: the UDF sleeps past the RPC's timeout, then reads its current context
    return {"knobs": {"udf_seconds": 1.5, "rpc_timeout": 0.5}}


def _timeout_symptom(facts: Facts) -> str | None:
    call = fact(facts, "call")
    seen = fact(facts, "callee_udf", "current_context")
    if not isinstance(call, str) or "timeout" not in call:
        return None
    if not isinstance(seen, str) or "Couldn't find autograd context" not in seen:
        return None
    return (
        "the call timed out, the block exited, and its CLEANUP erased the context under the "
        f"callee's running UDF: its current context {seen.removeprefix('raised: ')!r}"
    )


def _fire_forget_plan(steps: Sequence[Step]) -> dict[str, Any] | str:
    fired = next((i for i, s in enumerate(steps) if "detached" in s.changed), None)
    cleanup = first_taken(steps, "CLEANUP")
    answer = first_taken(steps, "FWD_RESP")
    if fired is None or cleanup is None or answer is None or not fired < cleanup < answer:
        return "the counterexample takes no forgotten call's answer after the callee's CLEANUP"
    # rank 1's cascade CLEANUP to the nested worker stays in flight in the counterexample: the
    # agent holds it 3 s, so the nested worker answers (with grad) before it arrives
    return {
        "delays": {1: {"CLEANUP_AUTOGRAD_CONTEXT_REQ": 3.0}},
        "knobs": {"udf_seconds": 0.5, "settle": 1.5},
    }


def _fire_forget_symptom(facts: Facts) -> str | None:
    held = fact(facts, "callee_holds_context")
    if not isinstance(held, Mapping) or fact(facts, "answer") != "returned":
        return None
    # the original context on the callee has the nested call's send function; one that the
    # late answer re-created has only the answer's recv function
    if held["send_functions"] != 0 or held["recv_functions"] < 1:
        return None
    return (
        "resurrection on the callee: after the caller's CLEANUP erased its context, the "
        f"forgotten nested call's late answer re-created it ({held['recv_functions']} recv "
        "function, no send function)"
    )


CLEANUP_RACE_RECIPES: Final[dict[str, Recipe]] = {
    "MCDistAutograd_pytorch38513_leak": RpcReplay("cleanup_first", _leak_plan, _leak_symptom),
    "MCDistAutograd_pytorchTimeout": RpcReplay(
        "timeout_mid_request", _timeout_plan, _timeout_symptom
    ),
    "MCDistAutograd_pytorchFireForget": RpcReplay(
        "fire_and_forget", _fire_forget_plan, _fire_forget_symptom, world=3
    ),
}
