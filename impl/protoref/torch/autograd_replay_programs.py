"""torch programs for three more dist-autograd counterexamples (#38513 family; run by
:mod:`protoref.torch.rpc_worker`).

As in :mod:`protoref.torch.rpc_programs`: rank 0 runs the program, the facts come from
``dist_autograd._get_debug_info`` and from what torch's own calls return or raise. The order the
agent cannot give comes from the program's timing: a request argument whose unpickling takes
``unpickle_seconds`` on the callee (torch unpickles a wrapped Python call before
``processForwardAutogradReq`` creates the context), or a UDF that sleeps.

- :func:`cleanup_first` (``MCDistAutograd_pytorch38513_leak``): the caller's CLEANUP reaches the
  callee before the request does (the request is still being unpickled); the callee finds no
  context, then the request creates one that no cleanup will reach.
- :func:`timeout_mid_request` (``MCDistAutograd_pytorchTimeout``): the call is awaited in the
  block but times out; the block's cleanup erases the callee's context under the running UDF,
  which then reads its current context.
- :func:`fire_and_forget` (``MCDistAutograd_pytorchFireForget``): the callee's UDF fires a
  nested call to w2 and forgets it; the caller's cleanup erases the callee's context, and the
  nested call's late answer re-creates it there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from protoref.torch.rpc_programs import (
    SlowToUnpickle,
    _outcome,
    _torch,
    autograd_info,
    times3,
    times3_after,
)

__all__ = ["PROGRAMS"]

Facts = dict[str, Any]

#: what the callee's UDFs noted (read back by :func:`notes`)
_NOTES: dict[str, Any] = {}
#: the nested calls a UDF fired and forgot (kept so the future is not collected)
_FORGOTTEN: list[Any] = []


def notes() -> dict[str, Any]:
    """What this worker's UDFs noted."""
    return dict(_NOTES)


def holds_context(context_id: int) -> dict[str, int] | None:
    """The context with ``context_id`` on this worker (its send and recv functions), or None.
    A context re-created by a late answer has one recv function and no send function; the
    original one of :func:`fire_and_forget` also has the send function of its nested call."""
    _, _, dist_autograd = _torch()
    try:
        ctx = dist_autograd._retrieve_context(context_id)
    except RuntimeError:
        return None
    return {
        "send_functions": len(ctx._send_functions()),
        "recv_functions": len(ctx._recv_functions()),
    }


def no_grad_answer(t: Any, slow: Any) -> None:
    """The callee's UDF of :func:`cleanup_first`: takes a tensor with grad, answers None."""
    del t, slow


def sleep_then_read_context(t: Any, seconds: float) -> Any:
    """The callee's UDF of :func:`timeout_mid_request`: sleeps, then reads its current context
    (``DistAutogradContainer::currentContext``), notes what it found, and answers with grad."""
    _, _, dist_autograd = _torch()
    time.sleep(seconds)
    _NOTES["current_context"] = _outcome(dist_autograd._current_context)
    return t * 3


def fire_nested(t: Any, seconds: float) -> None:
    """The callee's UDF of :func:`fire_and_forget`: a nested call to w2 that answers with grad
    after ``seconds``, not awaited; the UDF answers at once without grad."""
    _, rpc, _ = _torch()
    _FORGOTTEN.append(rpc.rpc_async("w2", times3_after, (t, seconds)))


def cleanup_first(knobs: dict[str, float]) -> Facts:
    """w0 exits the block while w1 still unpickles the request (``unpickle_seconds``)."""
    torch, rpc, dist_autograd = _torch()
    p = torch.ones(2, requires_grad=True)
    with dist_autograd.context() as ctx_id:
        fut = rpc.rpc_async("w1", no_grad_answer, (p, SlowToUnpickle(knobs["unpickle_seconds"])))
    facts: Facts = {"answer": _outcome(fut.wait)}
    time.sleep(knobs["hold"])
    facts["caller"] = autograd_info()
    facts["callee"] = rpc.rpc_sync("w1", autograd_info)
    facts["callee_holds_context"] = rpc.rpc_sync("w1", holds_context, (ctx_id,))
    return facts


def timeout_mid_request(knobs: dict[str, float]) -> Facts:
    """w0 awaits the call in the block with ``rpc_timeout``, shorter than the UDF's sleep."""
    torch, rpc, dist_autograd = _torch()
    p = torch.ones(2, requires_grad=True)
    with dist_autograd.context():
        seen = _outcome(
            lambda: rpc.rpc_sync(
                "w1",
                sleep_then_read_context,
                (p, knobs["udf_seconds"]),
                timeout=knobs["rpc_timeout"],
            )
        )
    time.sleep(knobs["udf_seconds"] + 0.5)
    return {
        "call": seen,
        "callee_udf": rpc.rpc_sync("w1", notes),
        "caller": autograd_info(),
        "callee": rpc.rpc_sync("w1", autograd_info),
    }


def fire_and_forget(knobs: dict[str, float]) -> Facts:
    """w0 awaits its call to w1 in the block; w1's UDF fires a call to w2 and forgets it."""
    torch, rpc, dist_autograd = _torch()
    p = torch.ones(2, requires_grad=True)
    with dist_autograd.context() as ctx_id:
        facts: Facts = {
            "answer": _outcome(lambda: rpc.rpc_sync("w1", fire_nested, (p, knobs["udf_seconds"])))
        }
    time.sleep(knobs["settle"])
    facts["callee_holds_context"] = rpc.rpc_sync("w1", holds_context, (ctx_id,))
    facts["caller"] = autograd_info()
    facts["callee"] = rpc.rpc_sync("w1", autograd_info)
    facts["nested"] = rpc.rpc_sync("w2", autograd_info)
    return facts


_RETRY_FUNCTIONS: dict[str, Any] = {}
#: how many times this worker's raising backward has run (it raises the first time only)
_RAISED: list[int] = []


def _retry_functions() -> dict[str, Any]:
    """The raise-once backward (worker 1) and the slow identity (root), made once."""
    if not _RETRY_FUNCTIONS:
        torch, _, _ = _torch()

        class BoomOnce(torch.autograd.Function):  # type: ignore[misc,name-defined]
            @staticmethod
            def forward(ctx: Any, x: Any, seconds: float) -> Any:
                ctx.seconds = seconds
                return x * 2

            @staticmethod
            def backward(ctx: Any, grad: Any) -> Any:
                _RAISED.append(1)
                time.sleep(ctx.seconds)
                if len(_RAISED) == 1:
                    raise ValueError("a backward function raised (first pass only)")
                return grad * 2, None

        class SlowIdentity(torch.autograd.Function):  # type: ignore[misc,name-defined]
            @staticmethod
            def forward(ctx: Any, x: Any, seconds: float) -> Any:
                ctx.seconds = seconds
                return x.clone()

            @staticmethod
            def backward(ctx: Any, grad: Any) -> Any:
                time.sleep(ctx.seconds)
                return grad, None

        _RETRY_FUNCTIONS.update(boom_once=BoomOnce, slow=SlowIdentity)
    return _RETRY_FUNCTIONS


def boom_once(t: Any, seconds: float) -> Any:
    """Worker 1's UDF: times 2, whose backward sleeps ``seconds`` and raises the first time."""
    return _retry_functions()["boom_once"].apply(t, seconds)


def retry_after_error(knobs: dict[str, float]) -> Facts:
    """Two calls to w1 in one context: ``times3`` (its argument behind a slow identity on the
    root, so the root handles that call's gradient late) and ``boom_once``. FAST-mode backward
    raises (w1's first pass), is retried at once on the same graph (retain_graph): p's gradient
    when the retry returns, and again ``settle`` seconds later."""
    torch, rpc, dist_autograd = _torch()
    p = torch.ones(2, requires_grad=True)
    facts: Facts = {}
    with dist_autograd.context() as ctx_id:
        q = _retry_functions()["slow"].apply(p, knobs["root_seconds"])
        if knobs.get("boom_first"):  # the later call's gradient request is sent first
            y2 = rpc.rpc_sync("w1", boom_once, (p, knobs["boom_seconds"]))
            y1 = rpc.rpc_sync("w1", times3, (q,))
        else:
            y1 = rpc.rpc_sync("w1", times3, (q,))
            y2 = rpc.rpc_sync("w1", boom_once, (p, knobs["boom_seconds"]))
        loss = (y1 + y2).sum()  # d loss / d p = 3 + 2 per pass
        facts["first"] = _outcome(lambda: dist_autograd.backward(ctx_id, [loss], True))
        facts["after_first"] = _grad_of(dist_autograd.get_gradients(ctx_id), p)
        facts["retry"] = _outcome(lambda: dist_autograd.backward(ctx_id, [loss], True))
        facts["at_return"] = _grad_of(dist_autograd.get_gradients(ctx_id), p)
        facts["root_at_return"] = autograd_info()
        time.sleep(knobs["settle"])
        facts["later"] = _grad_of(dist_autograd.get_gradients(ctx_id), p)
    return facts


def _grad_of(grads: Any, p: Any) -> list[float] | None:
    """p's gradient in the context (None before any was accumulated)."""
    grad = grads.get(p)
    return None if grad is None else [float(v) for v in grad.tolist()]


PROGRAMS: Final[dict[str, Callable[[dict[str, float]], Facts]]] = {
    "retry_after_error": retry_after_error,
    "cleanup_first": cleanup_first,
    "timeout_mid_request": timeout_mid_request,
    "fire_and_forget": fire_and_forget,
}
