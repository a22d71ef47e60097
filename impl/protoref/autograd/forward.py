"""Transitions of the context lifecycle and the forward pass (DistAutograd.tla, Reference).

One function per spec action, named after it in snake case, following its guard and effect for
``Variant = "Reference"``, ``RefAblations = {}``, ``BackwardMode = "Echo"``, ``Cascade``,
``LateForward`` and ``UnusedSends``; each cites the torch 2.13 function it models. Where the
implementation takes more than the spec allows (torch programs do more than the spec's bounds),
the docstring says so; such a step is outside what a trace can be checked against, and
docs/divergences.md lists them.

``extra`` parameters of the send-creating actions are the recv functions the real tensors of
the message reach (the scalar engine computes them): the send function's next edges are the
spec's formula joined with them, so a graph the spec's shapes do not cover (a value fetched from
an RRef the request created) still gets every gradient. The simulator passes none.
"""

from __future__ import annotations

from protoref.autograd import args as a
from protoref.autograd.events import Msg
from protoref.autograd.ids import MAX_LOCAL_ID, AutogradId
from protoref.autograd.state import Container, Handler, RecvFn, SendFn
from protoref.autograd.transition import (
    NotYetError,
    Step,
    addressed,
    alive,
    cleanups_for,
    erase,
    fail,
)

__all__ = [
    "crash",
    "deserialize_forward_autograd_resp",
    "deserialize_response",
    "finish_forward_autograd_req",
    "nested_send_message_with_autograd",
    "new_context",
    "process_cleanup_autograd_context_req",
    "process_forward_autograd_req",
    "release_context",
    "release_orphaned_context",
    "send_message_with_autograd",
]

_NOTHING: frozenset[AutogradId] = frozenset()

#: torch's error texts (torch/csrc/distributed/autograd/context/container.cpp).
ALREADY_HAVE = "Already have an autograd context id for this thread."
NO_CURRENT = (
    "Current thread doesn't have a valid autograd context. Please wrap your code using: "
    "`with torch.distributed.autograd.context() as context_id` to generate a valid context"
)
NOT_FOUND = "Could not find autograd context with id: {}"
CURRENT_GONE = "Couldn't find autograd context data for current autograd context id"


def _draw(ctn: Container, counter: int, action: str, what: str) -> AutogradId:
    # torch asserts the counter stays below 2^48 (kMaxAutoIncrement): never a wrap-around into
    # the next worker's range (MCDistAutograd_idOverflow shows what that would break).
    if counter > MAX_LOCAL_ID:
        raise fail(ctn, action, f"We have run out of autograd {what} ids!!!")
    return AutogradId(ctn.me, counter)


# --------------------------------------------------------------------------- application


def new_context(ctn: Container, t: int = 0) -> Step:
    """``NewContext(w)``: ``with dist_autograd.context()`` -> ``_new_context`` ->
    ``DistAutogradContainer::newContext``: a fresh id, current for the thread; refused while
    the thread has one (one context per thread, no nesting)."""
    name = "NewContext"
    alive(ctn, name)
    if t in ctn.threads:
        raise fail(ctn, name, ALREADY_HAVE)
    c = _draw(ctn, ctn.next_ctx, name, "context")
    new = ctn.evolve(
        next_ctx=ctn.next_ctx + 1,
        ctxs=ctn.ctxs | {c},
        threads={**ctn.threads, t: c},
    )
    return Step(new, (), a.NewContextArgs.of(w=ctn.me))


def _current(ctn: Container, action: str, t: int) -> AutogradId:
    c = ctn.threads.get(t)
    if c is None:
        raise fail(ctn, action, NO_CURRENT)
    if c not in ctn.ctxs:
        raise fail(ctn, action, CURRENT_GONE)
    return c


def send_message_with_autograd(
    ctn: Container, dst: int, grad: bool, t: int = 0, extra: frozenset[AutogradId] = _NOTHING
) -> Step:
    """``SendMessageWithAutograd(w, dst, grad)``: an RPC from the block ->
    ``getMessageWithAutograd`` (torch/csrc/distributed/autograd/utils.cpp): a message id,
    ``addSendRpcBackward`` if the tensors require grad (next edges: the recv functions the
    loss may use, ``AppInputs``), ``addKnownWorkerId(dst)`` for every wrapped message (PR
    #30914), the future pending.

    Beyond the spec: a send while the context's pass is over (the spec has one pass, before
    which every forward RPC is made; a DistributedOptimizer step sends after it), and a call to
    the worker itself (whose cleanup would be sent to itself: it is not made a known worker)."""
    name = "SendMessageWithAutograd"
    alive(ctn, name)
    c = _current(ctn, name, t)
    if ctn.running(c):
        raise fail(ctn, name, f"context {c}'s backward pass is running on this worker")
    m = _draw(ctn, ctn.next_msg, name, "message")
    sends = ctn.sends
    if grad:
        sends = sends | {SendFn.of(c, m, dst, ctn.app_inputs(c) | extra)}
    known = ctn.known if dst == ctn.me else ctn.known | {(c, dst)}
    new = ctn.evolve(
        next_msg=ctn.next_msg + 1,
        sends=sends,
        known=known,
        pending=ctn.pending | {(c, m)},
    )
    msg = Msg.make("FWD_REQ", c, m, m, ctn.me, dst, grad)
    return Step(new, (msg,), a.SendMessageWithAutogradArgs.of(w=ctn.me, dst=dst, grad=grad))


def nested_send_message_with_autograd(
    ctn: Container, h: Handler, dst: int, grad: bool, extra: frozenset[AutogradId] = _NOTHING
) -> Step:
    """``NestedSendMessageWithAutograd(w, h, dst, grad)``: the UDF of handler ``h`` calls on;
    ``DistAutogradContextGuard`` makes ``getMessageWithAutograd`` wrap it in the caller's
    context and record ``dst`` in this worker's known workers; the handler waits for it.

    Beyond the spec (which bounds a UDF to one nested call, ``~h.called``): further nested
    calls, whose send functions are also fed by the earlier nested answers (``h.nr``; empty at
    the first call, so the first call is the spec's)."""
    name = "NestedSendMessageWithAutograd"
    alive(ctn, name)
    if h not in ctn.handlers:
        raise fail(ctn, name, f"no running handler {h.req} of context {h.ctx} here")
    if h.wait is not None or h.err:
        raise fail(ctn, name, f"handler {h.req} waits for a call or has failed")
    c = h.ctx
    if c not in ctn.ctxs:
        raise fail(ctn, name, CURRENT_GONE)
    m = _draw(ctn, ctn.next_msg, name, "message")
    sends = ctn.sends
    if grad:
        inputs = ({h.req} if h.grad else set()) | h.nr | extra
        sends = sends | {SendFn.of(c, m, dst, frozenset(inputs))}
    known = ctn.known if dst == ctn.me else ctn.known | {(c, dst)}
    waiting = h.evolve(wait=m, called=True)
    new = ctn.evolve(
        next_msg=ctn.next_msg + 1,
        sends=sends,
        known=known,
        handlers=(ctn.handlers - {h}) | {waiting},
    )
    msg = Msg.make("FWD_REQ", c, m, m, ctn.me, dst, grad)
    args = a.NestedSendMessageWithAutogradArgs.of(w=ctn.me, h=h, dst=dst, grad=grad)
    return Step(new, (msg,), args)


def release_context(ctn: Container, c: AutogradId | None = None, t: int = 0) -> Step:
    """``ReleaseContext(w)``: ``with`` exits -> ``_release_context`` ->
    ``DistAutogradContainer::releaseContext``: the id must exist; snapshot the known workers,
    erase, reset the thread's current id, send the cleanups (fire and forget; retried until
    acknowledged). The block's RPCs may still be in flight (``LateForward``). Reference
    ("defer"): waits for this worker's running handlers of the context.

    ``c`` defaults to thread ``t``'s current context (the spec's); torch's
    ``_release_context(id)`` may name another, and then resets no thread."""
    name = "ReleaseContext"
    alive(ctn, name)
    if c is None:
        c = ctn.threads.get(t)
        if c is None:
            raise fail(ctn, name, NO_CURRENT)
    if c not in ctn.ctxs:
        raise fail(ctn, name, NOT_FOUND.format(c.to_int()))
    if ctn.running(c):
        raise NotYetError(str(ctn.me), name, f"context {c}'s backward pass is running here")
    if ctn.handlers_of(c):
        raise NotYetError(str(ctn.me), name, f"handlers of context {c} still run here (defer)")
    to = ctn.known_of(c) - {ctn.me}
    threads = {k: v for k, v in ctn.threads.items() if not (k == t and v == c)}
    new = erase(ctn, c).evolve(threads=threads)
    return Step(new, cleanups_for(ctn, c, to, ctn.me), a.ReleaseContextArgs.of(w=ctn.me))


# --------------------------------------------------------------------------- handlers


def process_forward_autograd_req(ctn: Container, msg: Msg) -> Step:
    """``ProcessForwardAutogradReq(w, msg)``: ``RequestCallbackNoPython::
    processForwardAutogradReq`` -> ``addRecvRpcBackward`` -> ``getOrCreateContext``: the
    callee's copy of the context comes into being here, a recv function if the tensors require
    grad, and the UDF starts under ``DistAutogradContextGuard``. Reference ("tombstone"): an id
    this worker released, or saw a cleanup for, is refused with an error answer."""
    name = "ProcessForwardAutogradReq"
    addressed(ctn, name, msg, "FWD_REQ")
    c, args = msg.ctx, a.ProcessForwardAutogradReqArgs.of(w=ctn.me, msg=msg)
    if msg.mid is None:
        raise fail(ctn, name, "a FWD_REQ without a message id")
    if c in ctn.tomb:
        refused = Msg.make("RESP", c, None, msg.req, ctn.me, msg.src, False)
        return Step(ctn, (refused,), args)
    recvs = ctn.recvs
    if msg.flag:
        recvs = recvs | {RecvFn.of(c, msg.mid, msg.src, False)}
    h = Handler.start(ctn.me, c, msg.mid, msg.src, msg.flag)
    new = ctn.evolve(ctxs=ctn.ctxs | {c}, recvs=recvs, handlers=ctn.handlers | {h})
    return Step(new, (), args)


def finish_forward_autograd_req(
    ctn: Container,
    h: Handler,
    resp_grad: bool,
    extra: frozenset[AutogradId] = _NOTHING,
    *,
    raised: bool = False,
) -> Step:
    """``FinishForwardAutogradReq(w, h, respGrad)``: the UDF returned; the continuation of
    ``processForwardAutogradReq`` wraps the answer with ``getMessageWithAutograd(fromWorkerId,
    response, FORWARD_AUTOGRAD_RESP)`` if the result requires grad (a message id, a send
    function fed by the request's and the nested answers' recv functions, the caller known),
    which needs ``currentContext()``; otherwise an unwrapped answer (an error if a nested call
    failed). ``raised``: the UDF itself raised (beyond the spec, whose UDFs fail only through a
    nested call): an error answer."""
    name = "FinishForwardAutogradReq"
    alive(ctn, name)
    if h not in ctn.handlers:
        raise fail(ctn, name, f"no running handler {h.req} of context {h.ctx} here")
    if h.wait is not None:
        raise fail(ctn, name, f"handler {h.req} still waits for its nested call {h.wait}")
    c = h.ctx
    ok = not h.err and not raised and (not resp_grad or c in ctn.ctxs)
    args = a.FinishForwardAutogradReqArgs.of(w=ctn.me, h=h, resp_grad=resp_grad)
    handlers = ctn.handlers - {h}
    if ok and resp_grad:
        m = _draw(ctn, ctn.next_msg, name, "message")
        inputs = frozenset(({h.req} if h.grad else set()) | h.nr | extra)
        known = ctn.known if h.caller == ctn.me else ctn.known | {(c, h.caller)}
        new = ctn.evolve(
            handlers=handlers,
            next_msg=ctn.next_msg + 1,
            sends=ctn.sends | {SendFn.of(c, m, h.caller, inputs)},
            known=known,
        )
        return Step(new, (Msg.make("FWD_RESP", c, m, h.req, ctn.me, h.caller, True),), args)
    answer = Msg.make("RESP", c, None, h.req, ctn.me, h.caller, ok)
    return Step(ctn.evolve(handlers=handlers), (answer,), args)


def _waiting(ctn: Container, req: AutogradId | None) -> list[Handler]:
    return [h for h in ctn.handlers if h.wait is not None and h.wait == req]


def deserialize_forward_autograd_resp(ctn: Container, msg: Msg, loss: bool) -> Step:
    """``DeserializeForwardAutogradResp(w, msg, loss)``: ``deserializeResponse``
    (torch/csrc/distributed/rpc/utils.cpp) calls ``addRecvRpcBackward``, hence
    ``getOrCreateContext`` on the caller. Reference ("tombstone"): for a released id the
    autograd part is dropped and the value delivered detached. ``loss``: the application's loss
    may use the output (a handler's nested answer is fed to its own answer instead)."""
    name = "DeserializeForwardAutogradResp"
    addressed(ctn, name, msg, "FWD_RESP")
    c = msg.ctx
    if msg.mid is None or msg.req is None:
        raise fail(ctn, name, "a FWD_RESP without its message ids")
    app = (c, msg.req) in ctn.pending
    hs = _waiting(ctn, msg.req)
    if not app and not hs:
        raise fail(ctn, name, f"nobody waits for the answer to {msg.req}")
    if not app and not loss:
        raise fail(ctn, name, "a nested answer feeds its handler (loss must be TRUE)")
    drop = c in ctn.tomb
    args = a.DeserializeForwardAutogradRespArgs.of(w=ctn.me, msg=msg, loss=loss)
    changes: dict[str, object] = {"pending": ctn.pending - {(c, msg.req)}}
    if not drop:
        changes["ctxs"] = ctn.ctxs | {c}
        changes["recvs"] = ctn.recvs | {RecvFn.of(c, msg.mid, msg.src, app and loss)}
    if not app:
        nr = frozenset() if drop else frozenset({msg.mid})
        woken = {h.evolve(wait=None, nr=h.nr | nr) for h in hs}
        changes["handlers"] = (ctn.handlers - set(hs)) | woken
    return Step(ctn.evolve(**changes), (), args)


def deserialize_response(ctn: Container, msg: Msg) -> Step:
    """``DeserializeResponse(w, msg)``: the future completes with an unwrapped value or an
    exception (``deserializeResponse``); a nested call's exception makes its UDF fail."""
    name = "DeserializeResponse"
    addressed(ctn, name, msg, "RESP")
    app = (msg.ctx, msg.req) in ctn.pending
    hs = _waiting(ctn, msg.req)
    if not app and not hs:
        raise fail(ctn, name, f"nobody waits for the answer to {msg.req}")
    changes: dict[str, object] = {"pending": ctn.pending - {(msg.ctx, msg.req)}}
    if not app:
        woken = {h.evolve(wait=None, err=not msg.flag) for h in hs}
        changes["handlers"] = (ctn.handlers - set(hs)) | woken
    return Step(ctn.evolve(**changes), (), a.DeserializeResponseArgs.of(w=ctn.me, msg=msg))


def process_cleanup_autograd_context_req(ctn: Container, msg: Msg) -> Step:
    """``ProcessCleanupAutogradContextReq(w, msg)``: ``processCleanupAutogradContextReq`` ->
    ``DistAutogradContainer::releaseContextIfPresent``: absent, nothing (the Reference
    tombstones the id: "tombstone"); present, erase and send the cleanup on to the known
    workers but the sender ("skipSender", #32497). Reference ("defer"): waits while a handler
    of the context runs here."""
    name = "ProcessCleanupAutogradContextReq"
    addressed(ctn, name, msg, "CLEANUP")
    c = msg.ctx
    if ctn.handlers_of(c):
        raise NotYetError(str(ctn.me), name, f"handlers of context {c} still run here (defer)")
    args = a.ProcessCleanupAutogradContextReqArgs.of(w=ctn.me, msg=msg)
    if c in ctn.ctxs:
        to = ctn.known_of(c) - {msg.src, ctn.me}
        return Step(erase(ctn, c), cleanups_for(ctn, c, to, msg.src), args)
    return Step(ctn.evolve(tomb=ctn.tomb | {c}), (), args)


def release_orphaned_context(ctn: Container, c: AutogradId, creator_dead: bool) -> Step:
    """``ReleaseOrphanedContext(w, c)``: Reference ("orphan", the proposal of #26379): a holder
    whose failure detector reports the creator dead releases the context after its handlers of
    it, and cascades the cleanup as releaseContextIfPresent does. ``creator_dead`` is the
    failure detector's verdict on ``c``'s creator."""
    name = "ReleaseOrphanedContext"
    alive(ctn, name)
    if c not in ctn.ctxs:
        raise fail(ctn, name, NOT_FOUND.format(c.to_int()))
    if not creator_dead:
        raise fail(ctn, name, f"the creator {c.worker} of context {c} is alive")
    if ctn.handlers_of(c):
        raise NotYetError(str(ctn.me), name, f"handlers of context {c} still run here (defer)")
    to = ctn.known_of(c) - {ctn.me}
    args = a.ReleaseOrphanedContextArgs.of(w=ctn.me, c=c)
    return Step(erase(ctn, c), cleanups_for(ctn, c, to, ctn.me), args)


def crash(ctn: Container) -> Step:
    """``Crash(w)``: the worker dies with its container. The messages it returns are the error
    answers the other workers' agents make up for the requests it was handling (for those
    still in flight to it, and for everything else sent to it, the driver's network decides:
    see :func:`protoref.autograd.network.crash_network`)."""
    name = "Crash"
    alive(ctn, name)
    answers = tuple(
        Msg.make("RESP", h.ctx, None, h.req, ctn.me, h.caller, False)
        for h in sorted(ctn.handlers, key=lambda h: (h.ctx, h.req))
    )
    new = Container(me=ctn.me, next_ctx=ctn.next_ctx, next_msg=ctn.next_msg, alive=False)
    return Step(new.evolve(tomb=ctn.tomb), answers, a.CrashArgs.of(w=ctn.me))
