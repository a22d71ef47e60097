"""Transitions of the backward pass: the Reference's "Echo" backward (DistAutograd.tla with
``BackwardMode = "Echo"``).

torch's FAST mode counts dependencies over the root and every send function of the context and
assumes each send function gets exactly one gradient; a request whose answer carries no grad,
or an output the loss does not use, leaves a send function waiting for ever and backward hangs
(MCDistAutograd_pytorchFastUnusedSend). Echo keeps the counting and restores the assumption:

- "zeroDead": a recv function nothing consumes fires at once with a zero gradient
  (:func:`ready_recv`), so every send function gets exactly one gradient request;
- "flood": the root floods ``BWD_START`` along the known workers; a worker's first one makes
  its sender the parent and starts its graph task (so the recv functions of a worker no
  gradient reaches still fire their zeros); a worker acknowledges (``BWD_ACK``) once its graph
  task is over and its children have acknowledged (Dijkstra-Scholten termination detection).
  The root's ``backward`` returns after that; gradient requests need no answer.

Passes: a context may run several (``retain_graph=True`` keeps the graph; a pass over a freed
graph fails at once and adds nothing); backward messages carry their pass, and one of a pass a
worker has finished is dropped ("passTag"). Errors: a backward function that raises fails its
graph task (``BackwardError``), which still drains (its recv functions fire zeros) and reports
the failure up the flood ("ackErrors"); the root's backward then raises.

Gradients here are the spec's tokens: ``grads`` holds ``(c, pass, f)`` for every function ``f``
whose non-zero gradient of that pass reached this worker's leaves; the values themselves are
the scalar engine's (:mod:`protoref.autograd.runtime.engine`), accumulated in the context, never in
``.grad``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from protoref.autograd.core.events import Msg
from protoref.autograd.core.ids import ROOT_FN, AutogradId
from protoref.autograd.core.state import BState, Container, Outcome, RecvFn
from protoref.autograd.core.transition import NotYetError, Step, addressed, alive, fail
from protoref.autograd.trace import args as a

T = TypeVar("T")

__all__ = [
    "backward_error",
    "cleanup_backward_pass",
    "complete",
    "dist_engine_execute",
    "process_backward_ack",
    "process_backward_autograd_req",
    "process_backward_autograd_resp",
    "process_backward_start",
    "ready_recv",
    "ready_recvs",
    "recv_rpc_backward_apply",
]


def ready_recv(ctn: Container, c: AutogradId, r: RecvFn) -> bool:
    """``ReadyRecv(w, c, r)``: not yet fired, and every consumer has run (Echo: also when it
    has none, with a zero gradient), or the graph task has failed ("zeroDead": it drains)."""
    if r.mid in ctn.fired_of(c):
        return False
    return ctn.consumers(c, r) <= ctn.execd_of(c) or ctn.task_in(c, "err")


def ready_recvs(ctn: Container, c: AutogradId) -> list[RecvFn]:
    """The recv functions of ``c`` that may fire now, in message-id order."""
    if not ctn.running(c):
        return []
    return sorted((r for r in ctn.recvs_of(c) if ready_recv(ctn, c, r)), key=lambda r: r.mid)


def complete(ctn: Container, c: AutogradId, dead: frozenset[int] = frozenset()) -> bool:
    """``Complete(w, c)`` for Echo: every send function of ``c`` here has run (one whose
    destination the failure detector reports ``dead`` counts as run), every recv function has
    fired, the worker is the root or has a flood parent, and every flood child has
    acknowledged."""
    done = ctn.execd_of(c)
    sends = {s.mid for s in ctn.sends_of(c) if s.dst not in dead}
    return (
        sends <= done
        and {r.mid for r in ctn.recvs_of(c)} <= ctn.fired_of(c)
        and (ctn.is_root(c) or ctn.has_parent(c))
        and not any(k == c for k, _ in ctn.echo_wait)
    )


def _without(items: frozenset[T], c: AutogradId) -> frozenset[T]:
    return frozenset(e for e in items if e[0] != c)  # type: ignore[index]


def _set_task(ctn: Container, c: AutogradId, p: int, state: BState) -> frozenset[Any]:
    return _without(ctn.bstate, c) | {(c, p, state)}


def dist_engine_execute(ctn: Container, c: AutogradId, t: int = 0, retain: bool = False) -> Step:
    """``DistEngineExecute(w, t, retain)``: ``dist_autograd.backward(context_id, roots,
    retain_graph)`` -> ``DistEngine::execute`` (torch/csrc/distributed/autograd/engine/
    dist_engine.cpp) on thread ``t``, once the results the loss needs have arrived: pass
    ``p`` (one more than the passes the root finished) starts; the root runs and feeds the
    leaves; Echo starts the ``BWD_START`` flood along the known workers. A pass over a graph an
    earlier pass freed (no ``retain_graph``) fails at once and adds nothing ("Trying to
    backward through the graph a second time").

    ``c`` is the context the call names, thread ``t``'s current one in a ``with`` block (the
    spec's ``cur[w][t]``)."""
    name = "DistEngineExecute"
    alive(ctn, name)
    if c not in ctn.ctxs:
        raise fail(ctn, name, f"Could not find autograd context with id: {c.to_int()}")
    if ctn.pending_of(c):
        raise NotYetError(str(ctn.me), name, f"the application's calls of context {c} are pending")
    if ctn.running(c):
        raise fail(ctn, name, f"a backward pass of context {c} is running on this worker")
    p = ctn.finished(c) + 1
    args = a.DistEngineExecuteArgs.of(w=ctn.me, t=t, retain=retain)
    if c in ctn.freed:
        new = ctn.evolve(
            bstate=_set_task(ctn, c, p, "fail"), results=ctn.results | {(c, p, "fail")}
        )
        return Step(new, (), args)
    to = sorted(ctn.known_of(c) - {ctn.me})
    new = ctn.evolve(
        bstate=_set_task(ctn, c, p, "run"),
        execd=_without(ctn.execd, c) | {(c, ROOT_FN)},
        fired=_without(ctn.fired, c),
        grads=ctn.grads | {(c, p, ROOT_FN)},
        freed=ctn.freed if retain else ctn.freed | {c},
        outst=_without(ctn.outst, c),
        awaiting=_without(ctn.awaiting, c),
        parent=_without(ctn.parent, c),
        echo_wait=_without(ctn.echo_wait, c) | {(c, x) for x in to},
    )
    starts = tuple(Msg.bwd("BWD_START", c, None, p, ctn.me, x, True) for x in to)
    return Step(new, starts, args)


def recv_rpc_backward_apply(ctn: Container, c: AutogradId, r: RecvFn) -> Step:
    """``RecvRpcBackwardApply(w, c, r)``: ``RecvRpcBackward::apply``
    (torch/csrc/distributed/autograd/functions/recvrpc_backward.cpp): once every consumer has
    delivered its gradient, send ``BACKWARD_AUTOGRAD_REQ`` of the task's pass with it to the
    worker that sent the tensors. The gradient is non-zero iff some consumer's contribution of
    this pass was (and the task has not failed); Echo runs a recv function nothing consumes, or
    one of a failed task, at once with a zero gradient, and records no outstanding RPC."""
    name = "RecvRpcBackwardApply"
    alive(ctn, name)
    if not ctn.running(c):
        raise fail(ctn, name, f"no running graph task of context {c} here")
    if r not in ctn.recvs:
        raise fail(ctn, name, f"no recv function {r.mid} of context {c} here")
    if r.ctx != c:
        raise fail(ctn, name, f"recv function {r.mid} belongs to context {r.ctx}, not {c}")
    if not ready_recv(ctn, c, r):
        raise fail(ctn, name, f"recv function {r.mid} has fired or waits for a consumer")
    p = ctn.pass_of(c)
    real = ctn.task_in(c, "run") and any((c, p, f) in ctn.grads for f in ctn.consumers(c, r))
    new = ctn.evolve(fired=ctn.fired | {(c, r.mid)})
    request = Msg.bwd("BWD_REQ", c, r.mid, p, ctn.me, r.src, real)
    return Step(new, (request,), a.RecvRpcBackwardApplyArgs.of(w=ctn.me, c=c, r=r))


def process_backward_autograd_req(ctn: Container, msg: Msg) -> Step:
    """``ProcessBackwardAutogradReq(w, msg)``: ``processBackwardAutogradReq`` ->
    ``retrieveContext``, ``retrieveSendFunction`` (both throw: the answer is an error),
    ``DistEngine::executeSendFunctionAsync``: a request finding no running graph task of the
    context starts one (of the request's pass); the send function runs and feeds the leaves
    (a contribution of the request's pass when its gradient is non-zero and the task has not
    failed). Echo answers nothing else (the flood tracks completion). A request of a pass this
    worker has finished, or of an older one, is dropped ("passTag")."""
    name = "ProcessBackwardAutogradReq"
    addressed(ctn, name, msg, "BWD_REQ")
    c, args = msg.ctx, a.ProcessBackwardAutogradReqArgs.of(w=ctn.me, msg=msg)
    mid = msg.mid
    found = c in ctn.ctxs and any(s.ctx == c and s.mid == mid for s in ctn.sends)
    if found and ctn.stale_pass(c, msg.pass_):
        return Step(ctn, (), args)
    if not found or mid is None:
        error = Msg.bwd("BWD_RESP", c, mid, msg.pass_, ctn.me, msg.src, False)
        return Step(ctn, (error,), args)
    first = not ctn.running(c)
    p = msg.pass_ if first else ctn.pass_of(c)
    applies = msg.flag and (first or ctn.task_in(c, "run"))
    changes: dict[str, object] = {
        "execd": (_without(ctn.execd, c) if first else ctn.execd) | {(c, mid)},
    }
    if applies:
        changes["grads"] = ctn.grads | {(c, msg.pass_, mid)}
    if first:
        changes.update(
            fired=_without(ctn.fired, c),
            bstate=_set_task(ctn, c, p, "run"),
            outst=_without(ctn.outst, c),
            parent=_without(ctn.parent, c),
            echo_wait=_without(ctn.echo_wait, c),
        )
    return Step(ctn.evolve(**changes), (), args)


def process_backward_autograd_resp(ctn: Container, msg: Msg) -> Step:
    """``ProcessBackwardAutogradResp(w, msg)``: the callback of
    ``DistAutogradContext::addOutstandingRpc`` (context/context.cpp): a gradient request
    completes; an error fails the running graph task (Echo: it drains as ``err``). An answer of
    another pass than the task's is ignored (the Reference's). In the Echo backward only an
    error answers a gradient request (a dead worker's agent, a missing context or function)."""
    name = "ProcessBackwardAutogradResp"
    addressed(ctn, name, msg, "BWD_RESP")
    c, args = msg.ctx, a.ProcessBackwardAutogradRespArgs.of(w=ctn.me, msg=msg)
    stale = msg.pass_ != ctn.pass_of(c)
    if msg.flag or not ctn.task_in(c, "run") or c not in ctn.ctxs or stale:
        outst = frozenset(e for e in ctn.outst if e != (c, msg.mid))
        return Step(ctn.evolve(outst=outst), (), args)
    new = ctn.evolve(bstate=_set_task(ctn, c, ctn.pass_of(c), "err"))
    return Step(new, (), args)


def backward_error(ctn: Container, c: AutogradId) -> Step:
    """``BackwardError(w, c)``: a backward function of ``c``'s running graph task raised
    (``engine_.thread_on_exception``, engine/dist_engine.cpp): Echo marks the task failed
    (``err``); it still drains and reports the failure up the flood."""
    name = "BackwardError"
    alive(ctn, name)
    if c not in ctn.ctxs or not ctn.task_in(c, "run"):
        raise fail(ctn, name, f"no running graph task of context {c} here")
    new = ctn.evolve(bstate=_set_task(ctn, c, ctn.pass_of(c), "err"))
    return Step(new, (), a.BackwardErrorArgs.of(w=ctn.me, c=c))


def cleanup_backward_pass(
    ctn: Container, c: AutogradId, dead: frozenset[int] = frozenset()
) -> Step:
    """``CleanupBackwardPass(w, c)``: ``DistEngine::cleanupBackwardPass`` once the graph task
    is over (:func:`complete`; ``dead``: the workers the failure detector reports dead): its
    outcome is recorded (on the root ``dist_autograd.backward`` returns, or raises for a
    failed pass) and the flood parent is told, with the outcome ("ackErrors")."""
    name = "CleanupBackwardPass"
    alive(ctn, name)
    if c not in ctn.ctxs or not ctn.running(c):
        raise fail(ctn, name, f"no running graph task of context {c} here")
    if not complete(ctn, c, dead):
        raise fail(ctn, name, f"the graph task of context {c} is not complete")
    p, ok = ctn.pass_of(c), ctn.task_in(c, "run")
    outcome: Outcome = "done" if ok else "fail"
    parents = sorted(x for k, x in ctn.parent if k == c)
    new = ctn.evolve(
        bstate=_set_task(ctn, c, p, outcome),
        results=ctn.results | {(c, p, outcome)} if ctn.is_root(c) else ctn.results,
    )
    acks = tuple(Msg.bwd("BWD_ACK", c, None, p, ctn.me, x, ok) for x in parents)
    return Step(new, acks, a.CleanupBackwardPassArgs.of(w=ctn.me, c=c))


def process_backward_start(ctn: Container, msg: Msg) -> Step:
    """``ProcessBackwardStart(w, msg)`` (Echo): the first ``BWD_START`` of a pass makes its
    sender the parent, starts the graph task of that pass if no gradient request of it has (so
    recv functions nothing consumes fire their zero gradient) and is passed on to the known
    workers; any later one of the pass, one for a context not held here, or a stale one
    ("passTag") is acknowledged at once."""
    name = "ProcessBackwardStart"
    addressed(ctn, name, msg, "BWD_START")
    c, p, args = msg.ctx, msg.pass_, a.ProcessBackwardStartArgs.of(w=ctn.me, msg=msg)
    same = ctn.started(c) and ctn.pass_of(c) == p
    engaged = same and (ctn.is_root(c) or ctn.has_parent(c))
    if engaged or c not in ctn.ctxs or ctn.stale_pass(c, p):
        ack = Msg.bwd("BWD_ACK", c, None, p, ctn.me, msg.src, True)
        return Step(ctn, (ack,), args)
    to = sorted(ctn.known_of(c) - {msg.src, ctn.me})
    fresh = not (same and ctn.running(c))
    changes: dict[str, object] = {
        "parent": _without(ctn.parent, c) | {(c, msg.src)},
        "echo_wait": _without(ctn.echo_wait, c) | {(c, x) for x in to},
    }
    if fresh:
        changes.update(
            bstate=_set_task(ctn, c, p, "run"),
            execd=_without(ctn.execd, c),
            fired=_without(ctn.fired, c),
        )
    starts = tuple(Msg.bwd("BWD_START", c, None, p, ctn.me, x, True) for x in to)
    return Step(ctn.evolve(**changes), starts, args)


def process_backward_ack(ctn: Container, msg: Msg) -> Step:
    """``ProcessBackwardAck(w, msg)`` (Echo): a flood child reports that it and its subtree
    are done; a failed one fails this worker's task of that pass too ("ackErrors")."""
    name = "ProcessBackwardAck"
    addressed(ctn, name, msg, "BWD_ACK")
    c = msg.ctx
    changes: dict[str, object] = {"echo_wait": ctn.echo_wait - {(c, msg.src)}}
    if not msg.flag and ctn.task_in(c, "run") and ctn.pass_of(c) == msg.pass_:
        changes["bstate"] = _set_task(ctn, c, msg.pass_, "err")
    return Step(ctn.evolve(**changes), (), a.ProcessBackwardAckArgs.of(w=ctn.me, msg=msg))
