"""The distributed-autograd steps the conductor asks of a worker, and the UDFs they call.

A step (:func:`program`) runs one ``with dist_autograd.context()`` block on the worker, on the
RPC thread that serves the conductor's call: torch's context is thread-local, so the whole block
(calls, backward passes, ``get_gradients``, the exit) runs in one step. It logs every
user-visible operation with the events of ``spec/autograd/TraceDistAutogradTorch.tla``
(op names are its ``Obs*`` wrappers' names). A context is named by its id as the program sees
it, split as torch builds it (``worker_id << 48 | n``: ``cw`` and ``cn``).

Values are built so that a leaf's gradient counts the spec's contributions
(DistAutograd.tla's abstraction: the root and every send function of a context feed the worker's
one leaf, each pass apart): every worker has one leaf ``p`` (``ones(2)``), the root adds
``p * 1`` to the loss, and every UDF returns ``t + p - p.detach()`` (its value is ``t``; the
gradient of ``t`` and of its worker's ``p`` are both the incoming one). So each send function
that carries a gradient adds exactly 1 to its worker's leaf, per pass, and ``get_gradients``'s
value is the number of the spec's ``grads`` tokens of the context there.
"""

from __future__ import annotations

import time
from typing import Any, Final

import torch
import torch.distributed.autograd as dist_autograd
from torch.distributed import rpc

from protoref.torch.rpc.world import world

__all__ = ["counters", "leaf", "nested", "probe", "program", "quiet_point", "settle_all"]

#: torch's context and message ids: worker_id << 48 | n
_LOW: Final = (1 << 48) - 1


class Boom(torch.autograd.Function):  # type: ignore[misc]  # torch is not followed by mypy
    """A backward function that raises (a user Function's backward, a hook, a shape check)."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor) -> torch.Tensor:
        return t.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        raise ValueError("planted backward error")


class Slow(torch.autograd.Function):  # type: ignore[misc]  # torch is not followed by mypy
    """A backward function that takes its time (its gradient requests leave late)."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor) -> torch.Tensor:
        return t.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        time.sleep(0.3)
        return grad


def _param() -> torch.Tensor:
    """This worker's one leaf (made once, kept for the session)."""
    handles = world().handles
    if "leaf" not in handles:
        handles["leaf"] = torch.ones(2, requires_grad=True)
    p: torch.Tensor = handles["leaf"]
    return p


def _feed(t: torch.Tensor) -> torch.Tensor:
    """``t``'s value, with this worker's leaf on the gradient's path (see the module's doc)."""
    p = _param()
    return t + p - p.detach()


def _ctx() -> tuple[int, int]:
    cid = int(dist_autograd._current_context()._context_id())
    return cid >> 48, cid & _LOW


def _outcome(err: RuntimeError) -> str:
    text = str(err).lower()
    # torch 2.13: "RPC ran for more than set timeout (200 ms) and will now be marked with an error"
    return "timeout" if "timeout" in text or "timed out" in text else "error"


def leaf(
    t: torch.Tensor, delay: float = 0.0, boom: bool = False, slow: bool = False
) -> torch.Tensor:
    """A callee's UDF: ``t``'s value; fed by its worker's leaf when ``t`` requires grad. Its
    backward raises (``boom``) or sleeps (``slow``)."""
    if delay:
        time.sleep(delay)
    if not t.requires_grad:
        return t * 1.0
    y = _feed(t)
    if slow:
        y = Slow.apply(y)
    return Boom.apply(y) if boom else y


def nested(clock: int, t: torch.Tensor, calls: list[dict[str, Any]]) -> tuple[int, torch.Tensor]:
    """A callee's UDF that calls on, under the caller's context (DistAutogradContextGuard):
    each call awaited (``wait``) or fired and forgotten; returns its clock and its value."""
    rec = world().recorder
    rec.merge(clock)
    cw, cn = _ctx()
    # t fans out to the calls that carry grad: each gets t / k, so t's gradient stays the
    # incoming one (the leaf counts one per send function; see the module's doc)
    k = sum(1 for call in calls if call["grad"] and call["wait"])
    acc: torch.Tensor | None = None if k else t * 1.0
    for call in calls:
        arg = t * (1.0 / k) if call["grad"] and k else t.detach() * 1.0
        rec.log(
            "NestedCall",
            cw=cw,
            cn=cn,
            peer=call["peer"],
            label=call["label"],
            grad=call["grad"],
            wait=call["wait"],
        )
        fut = rpc.rpc_async(call["peer"], leaf, args=(arg, call.get("delay", 0.0)))
        if not call["wait"]:
            world().handles["forgot:" + call["label"]] = fut
            continue
        try:
            y = fut.wait()
        except RuntimeError as err:
            rec.log("CallDone", label=call["label"], outcome=_outcome(err))
            raise
        rec.log("CallDone", label=call["label"], outcome="ok")
        if call["grad"]:
            acc = y if acc is None else acc + y
    assert acc is not None
    return rec.clock, _feed(acc)


def _call(cw: int, cn: int, call: dict[str, Any]) -> tuple[Any, bool]:
    """Send one call of the block (rpc_async; awaited by the caller). Returns the future and
    whether its result carries the clock of a nested UDF."""
    rec = world().recorder
    p = _param()
    arg = p * 1.0 if call["grad"] else p.detach() * 1.0
    raises = bool(call.get("boom", False))
    at = rec.log(
        "Call",
        cw=cw,
        cn=cn,
        peer=call["peer"],
        label=call["label"],
        grad=call["grad"],
        raises=raises,
    )
    timeout = call.get("timeout", rpc.constants.UNSET_RPC_TIMEOUT)
    if call.get("nested"):
        fut = rpc.rpc_async(call["peer"], nested, args=(at, arg, call["nested"]), timeout=timeout)
        return fut, True
    args = (arg, call.get("delay", 0.0), raises, bool(call.get("slow", False)))
    return rpc.rpc_async(call["peer"], leaf, args=args, timeout=timeout), False


def _wait(label: str, fut: Any, clocked: bool) -> torch.Tensor | None:
    rec = world().recorder
    try:
        value = fut.wait()
    except RuntimeError as err:
        rec.log("CallDone", label=label, outcome=_outcome(err))
        return None
    if clocked:
        clock, value = value
        rec.merge(int(clock))
    rec.log("CallDone", label=label, outcome="ok")
    y: torch.Tensor = value
    return y


def program(clock: int, plan: dict[str, Any]) -> int:
    """One context block on this worker, as the plan says (the conductor's step)."""
    rec = world().recorder
    rec.merge(clock)
    p = _param()
    late: list[tuple[str, Any, bool]] = []
    with dist_autograd.context() as cid:
        cw, cn = int(cid) >> 48, int(cid) & _LOW
        rec.log("ContextEnter", cw=cw, cn=cn)
        if plan.get("refuse"):
            try:
                with dist_autograd.context():
                    pass
            except RuntimeError:  # "Already have an autograd context id for this thread."
                rec.log("ContextRefused", cw=cw, cn=cn)
        sent = [(call, *_call(cw, cn, call)) for call in plan["calls"]]
        loss = (p * 1.0).sum()
        failed = False
        for call, fut, clocked in sent:
            if call.get("in_flight"):
                late.append((call["label"], fut, clocked))
                continue
            y = _wait(call["label"], fut, clocked)
            if y is None:
                failed = True
            elif y.requires_grad:
                loss = loss + y.sum()
        for retain in [] if failed else plan.get("passes", []):
            rec.log("Backward", cw=cw, cn=cn, retain=retain)
            try:
                dist_autograd.backward(cid, [loss], retain_graph=retain)
                outcome = "ok"
            except RuntimeError:  # "Error on Node k: ..." (a backward error, a freed graph)
                outcome = "error"
            rec.log("BackwardDone", cw=cw, cn=cn, outcome=outcome)
        if plan.get("passes") and not failed:
            rec.log("Gradients", cw=cw, cn=cn, grad=_grad(cid, p))
        time.sleep(plan.get("linger", 0.0))  # the program goes on in the block
        rec.log("ContextExit", cw=cw, cn=cn)
    for label, fut, clocked in late:
        _wait(label, fut, clocked)
    if plan.get("late"):
        _late_call(plan["late"], cid, loss)
    return rec.clock


def _late_call(kind: str, cid: int, loss: torch.Tensor) -> None:
    """get_gradients or backward with the id of the block just left (#40880)."""
    time.sleep(0.2)  # let a late answer re-create the context first (#38513)
    try:
        if kind == "gradients":
            dist_autograd.get_gradients(cid)
        else:
            dist_autograd.backward(cid, [loss])
        found = True
    except RuntimeError:  # "Could not find autograd context with id"
        found = False
    cw, cn = cid >> 48, cid & _LOW
    if kind == "gradients":
        world().recorder.log("LateGradients", cw=cw, cn=cn, outcome="found" if found else "error")
    else:
        world().recorder.log("LateBackward", cw=cw, cn=cn, outcome="ok" if found else "error")


def _grad(cid: int, p: torch.Tensor) -> int:
    """The leaf's accumulated gradient in the context (one element: every element is equal)."""
    grads = dist_autograd.get_gradients(cid)
    return round(float(grads[p][0].item())) if p in grads else 0


def _debug() -> dict[str, int]:
    return {k: int(v) for k, v in dist_autograd._get_debug_info().items()}


#: seconds the counters must hold still when some worker still holds a context: longer than
#: the agent's 1 s re-send of a failed cleanup plus its largest delay (a cleanup waiting for
#: its re-send shows nowhere but in its target's context count), and than the UDFs' longest
#: sleep
_STILL: Final = 1.5
#: seconds between two probes of every worker at a quiet point (the fast path: two equal,
#: idle reads in a row)
_PROBE: Final = 0.1


def _agent() -> dict[str, int]:
    info = rpc.api._get_current_rpc_agent().get_debug_info()
    keys = ("client_active_calls", "server_active_calls", "server_active_async_calls")
    return {k: int(info["agent." + k]) for k in keys if "agent." + k in info}


def probe(clock: int) -> tuple[int, dict[str, int]]:
    """A worker's autograd counters and its agent's active calls (the probe itself counts as
    one server call on a worker the conductor asks)."""
    world().recorder.merge(clock)
    return world().recorder.clock, _debug() | _agent()


_GAUGES: Final = ("client_active_calls", "server_active_calls", "server_active_async_calls")


def _gauges(sample: dict[str, int]) -> tuple[int, ...]:
    return tuple(sample.get(k, 0) for k in _GAUGES)


def _idle(now: list[dict[str, int]], base: list[tuple[int, ...]]) -> bool:
    """No context anywhere can be the target of a pending cleanup, and every agent runs what
    it ran at the last quiet point (``base``): nothing but the probe itself at first; after a
    FAST-mode hang, also the gradient request its graph task never answers, which stays
    active for good (a call that started since would show as one more)."""
    return all(
        x["num_autograd_contexts"] == 0 and _gauges(x) == b for x, b in zip(now, base, strict=True)
    )


def settle_all(workers: list[str], wait: float) -> None:
    """On the conductor: probe every worker every 0.1 s until two reads in a row are equal
    and idle (:func:`_idle`: nothing of torch's can still change a counter), or else until
    the reads have held still for 1.5 s (a context is held: a cleanup may wait for its
    re-send; or a call is active that was not at the last quiet point); at most ``wait`` s."""
    rec = world().recorder
    handles = world().handles
    # the probe counts as one server call on a worker the conductor asks
    base = handles.get("quiet-gauges") or [(0, int(w != rec.node), 0) for w in workers]
    end = time.monotonic() + wait
    last: list[dict[str, int]] | None = None
    since = time.monotonic()
    while True:
        now = []
        for w in workers:
            if w == rec.node:
                clock, sample = probe(rec.clock)
            else:
                clock, sample = rpc.rpc_sync(w, probe, (rec.clock,))
            rec.merge(int(clock))
            now.append(sample)
        t = time.monotonic()
        if now != last:
            last, since = now, t
        elif _idle(now, base):
            break
        if t - since >= _STILL or t >= end:
            break
        time.sleep(_PROBE)
    handles["quiet-gauges"] = [_gauges(x) for x in now]


def quiet_point(workers: list[str], wait: float) -> None:
    """On the conductor: every worker settles (:func:`settle_all`); then the conductor logs
    ``Quiet`` (no message of torch's in flight, no UDF running: what the settled counters
    stand for) and every worker samples its counters."""
    rec = world().recorder
    settle_all(workers, wait)
    rec.log("Quiet")
    for w in workers:
        clock = counters(rec.clock) if w == rec.node else rpc.rpc_sync(w, counters, (rec.clock,))
        rec.merge(int(clock))


def counters(clock: int) -> int:
    world().recorder.merge(clock)
    info = _debug()
    world().recorder.log(
        "Counters",
        contexts=info["num_autograd_contexts"],
        passes=info["num_current_backward_passes"],
    )
    return world().recorder.clock
