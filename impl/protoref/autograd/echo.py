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

Gradients here are the spec's tokens: ``grads`` holds ``(c, f)`` for every function ``f`` whose
non-zero gradient reached this worker's leaves; the values themselves are the scalar engine's
(:mod:`protoref.autograd.engine`), accumulated in the context, never in ``.grad``.
"""

from __future__ import annotations

from protoref.autograd import args as a
from protoref.autograd.events import Msg
from protoref.autograd.ids import ROOT_FN, AutogradId
from protoref.autograd.state import Container, RecvFn
from protoref.autograd.transition import NotYetError, Step, addressed, alive, fail

__all__ = [
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
    "reset_pass",
]


def ready_recv(ctn: Container, c: AutogradId, r: RecvFn) -> bool:
    """``ReadyRecv(w, c, r)``: not yet run, and every consumer has run (Echo: also when it has
    none, with a zero gradient)."""
    done = ctn.execd_of(c)
    return r.mid not in done and ctn.consumers(c, r) <= done


def ready_recvs(ctn: Container, c: AutogradId) -> list[RecvFn]:
    """The recv functions of ``c`` that may fire now, in message-id order."""
    if not ctn.running(c):
        return []
    return sorted((r for r in ctn.recvs_of(c) if ready_recv(ctn, c, r)), key=lambda r: r.mid)


def complete(ctn: Container, c: AutogradId) -> bool:
    """``Complete(w, c)`` for Echo: every send and recv function of ``c`` here has run, the
    worker is the root or has a flood parent, and every flood child has acknowledged."""
    done = ctn.execd_of(c)
    functions = {s.mid for s in ctn.sends_of(c)} | {r.mid for r in ctn.recvs_of(c)}
    return (
        functions <= done
        and (ctn.is_root(c) or ctn.has_parent(c))
        and not any(k == c for k, _ in ctn.echo_wait)
    )


def dist_engine_execute(ctn: Container, c: AutogradId) -> Step:
    """``DistEngineExecute(w)``: ``dist_autograd.backward(context_id, roots)`` ->
    ``DistEngine::execute`` (torch/csrc/distributed/autograd/engine/dist_engine.cpp) on the
    creator's thread once the results the loss needs have arrived: the graph task, the root
    runs and feeds the leaves; Echo starts the ``BWD_START`` flood along the known workers.

    ``c`` is the context the call names (the spec's ``cur[w]``, which it is in a ``with``
    block). One pass per context, as in the spec; a second raises."""
    name = "DistEngineExecute"
    alive(ctn, name)
    if c not in ctn.ctxs:
        raise fail(ctn, name, f"Could not find autograd context with id: {c.to_int()}")
    if ctn.pending_of(c):
        raise NotYetError(str(ctn.me), name, f"the application's calls of context {c} are pending")
    if ctn.started(c):
        raise fail(ctn, name, f"context {c} already had its backward pass on this worker")
    to = sorted(ctn.known_of(c))
    new = ctn.evolve(
        bstate=ctn.bstate | {(c, "run")},
        execd=ctn.execd | {(c, ROOT_FN)},
        grads=ctn.grads | {(c, ROOT_FN)},
        echo_wait=ctn.echo_wait | {(c, x) for x in to},
    )
    starts = tuple(Msg.make("BWD_START", c, None, None, ctn.me, x, True) for x in to)
    return Step(new, starts, a.DistEngineExecuteArgs.of(w=ctn.me))


def recv_rpc_backward_apply(ctn: Container, c: AutogradId, r: RecvFn) -> Step:
    """``RecvRpcBackwardApply(w, c, r)``: ``RecvRpcBackward::apply``
    (torch/csrc/distributed/autograd/functions/recvrpc_backward.cpp): once every consumer has
    delivered its gradient, send ``BACKWARD_AUTOGRAD_REQ`` with it to the worker that sent the
    tensors. The gradient is non-zero iff some consumer's was; Echo runs a recv function
    nothing consumes at once with a zero gradient, and records no outstanding RPC."""
    name = "RecvRpcBackwardApply"
    alive(ctn, name)
    if not ctn.running(c):
        raise fail(ctn, name, f"no running graph task of context {c} here")
    if r not in ctn.recvs:
        raise fail(ctn, name, f"no recv function {r.mid} of context {c} here")
    if r.ctx != c:
        raise fail(ctn, name, f"recv function {r.mid} belongs to context {r.ctx}, not {c}")
    if not ready_recv(ctn, c, r):
        raise fail(ctn, name, f"recv function {r.mid} has run or waits for a consumer")
    real = any((c, f) in ctn.grads for f in ctn.consumers(c, r))
    new = ctn.evolve(execd=ctn.execd | {(c, r.mid)})
    request = Msg.make("BWD_REQ", c, r.mid, r.mid, ctn.me, r.src, real)
    return Step(new, (request,), a.RecvRpcBackwardApplyArgs.of(w=ctn.me, c=c, r=r))


def process_backward_autograd_req(ctn: Container, msg: Msg) -> Step:
    """``ProcessBackwardAutogradReq(w, msg)``: ``processBackwardAutogradReq`` ->
    ``retrieveContext``, ``retrieveSendFunction``, ``DistEngine::executeSendFunctionAsync``:
    the first request of the context starts the graph task; the send function runs and feeds
    the leaves (a contribution when its gradient is non-zero). Echo answers nothing (the flood
    tracks completion), not even a request for a context or send function that is gone."""
    name = "ProcessBackwardAutogradReq"
    addressed(ctn, name, msg, "BWD_REQ")
    c, args = msg.ctx, a.ProcessBackwardAutogradReqArgs.of(w=ctn.me, msg=msg)
    found = c in ctn.ctxs and any(s.ctx == c and s.mid == msg.mid for s in ctn.sends)
    if not found or msg.mid is None:
        return Step(ctn, (), args)
    changes: dict[str, object] = {"execd": ctn.execd | {(c, msg.mid)}}
    if msg.flag:
        changes["grads"] = ctn.grads | {(c, msg.mid)}
    if not ctn.started(c):
        changes["bstate"] = ctn.bstate | {(c, "run")}
    return Step(ctn.evolve(**changes), (), args)


def process_backward_autograd_resp(ctn: Container, msg: Msg) -> Step:
    """``ProcessBackwardAutogradResp(w, msg)``: the callback of
    ``DistAutogradContext::addOutstandingRpc`` (context/context.cpp): an outstanding gradient
    request completes; an error fails the graph task and is passed on to whoever waits for it.
    In the Echo backward only a dead worker's agent answers a gradient request (``Discard``)."""
    name = "ProcessBackwardAutogradResp"
    addressed(ctn, name, msg, "BWD_RESP")
    c, args = msg.ctx, a.ProcessBackwardAutogradRespArgs.of(w=ctn.me, msg=msg)
    outst = frozenset(e for e in ctn.outst if e != (c, msg.mid))
    if msg.flag or not ctn.running(c):
        return Step(ctn.evolve(outst=outst), (), args)
    waiting = sorted(e for e in ctn.awaiting if e[0] == c)
    new = ctn.evolve(
        outst=outst,
        bstate=(ctn.bstate - {(c, "run")}) | {(c, "fail")},
        awaiting=ctn.awaiting - set(waiting),
    )
    errors = tuple(Msg.make("BWD_RESP", c, e[2], None, ctn.me, e[1], False) for e in waiting)
    return Step(new, errors, args)


def cleanup_backward_pass(ctn: Container, c: AutogradId) -> Step:
    """``CleanupBackwardPass(w, c)``: ``DistEngine::cleanupBackwardPass`` once the graph task
    is over (:func:`complete`): on the root ``dist_autograd.backward`` returns; elsewhere the
    flood parent is told (Echo)."""
    name = "CleanupBackwardPass"
    alive(ctn, name)
    if not ctn.running(c):
        raise fail(ctn, name, f"no running graph task of context {c} here")
    if not complete(ctn, c):
        raise fail(ctn, name, f"the graph task of context {c} is not complete")
    parents = sorted(x for k, x in ctn.parent if k == c)
    new = ctn.evolve(bstate=(ctn.bstate - {(c, "run")}) | {(c, "done")})
    acks = tuple(Msg.make("BWD_ACK", c, None, None, ctn.me, x, True) for x in parents)
    return Step(new, acks, a.CleanupBackwardPassArgs.of(w=ctn.me, c=c))


def process_backward_start(ctn: Container, msg: Msg) -> Step:
    """``ProcessBackwardStart(w, msg)`` (Echo): the first ``BWD_START`` makes its sender the
    parent, starts the graph task if no gradient request has (so recv functions nothing
    consumes fire their zero gradient) and is passed on to the known workers; any later one,
    or one for a context not held here, is acknowledged at once."""
    name = "ProcessBackwardStart"
    addressed(ctn, name, msg, "BWD_START")
    c, args = msg.ctx, a.ProcessBackwardStartArgs.of(w=ctn.me, msg=msg)
    if ctn.is_root(c) or ctn.has_parent(c) or c not in ctn.ctxs:
        ack = Msg.make("BWD_ACK", c, None, None, ctn.me, msg.src, True)
        return Step(ctn, (ack,), args)
    to = sorted(ctn.known_of(c) - {msg.src})
    new = ctn.evolve(
        parent=ctn.parent | {(c, msg.src)},
        echo_wait=ctn.echo_wait | {(c, x) for x in to},
        bstate=ctn.bstate if ctn.started(c) else ctn.bstate | {(c, "run")},
    )
    starts = tuple(Msg.make("BWD_START", c, None, None, ctn.me, x, True) for x in to)
    return Step(new, starts, args)


def process_backward_ack(ctn: Container, msg: Msg) -> Step:
    """``ProcessBackwardAck(w, msg)`` (Echo): a flood child reports that it and its subtree
    are done."""
    name = "ProcessBackwardAck"
    addressed(ctn, name, msg, "BWD_ACK")
    new = ctn.evolve(echo_wait=ctn.echo_wait - {(msg.ctx, msg.src)})
    return Step(new, (), a.ProcessBackwardAckArgs.of(w=ctn.me, msg=msg))


def reset_pass(ctn: Container, c: AutogradId) -> Container:
    """Forget ``c``'s last backward pass on this worker (its graph task, executed functions,
    contributions and flood links), so that another pass can run: ``retain_graph=True`` lets a
    context run several (torch accumulates them, PR #32506). Beyond the spec, which has one
    pass per context: no trace event (docs/divergences.md)."""
    return ctn.evolve(
        execd=frozenset(e for e in ctn.execd if e[0] != c),
        grads=frozenset(e for e in ctn.grads if e[0] != c),
        bstate=frozenset(e for e in ctn.bstate if e[0] != c),
        outst=frozenset(e for e in ctn.outst if e[0] != c),
        awaiting=frozenset(e for e in ctn.awaiting if e[0] != c),
        parent=frozenset(e for e in ctn.parent if e[0] != c),
        echo_wait=frozenset(e for e in ctn.echo_wait if e[0] != c),
    )
