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

from protoref.autograd.core.events import Msg
from protoref.autograd.core.horizon import NO_HORIZON, compact, heard
from protoref.autograd.core.ids import MAX_LOCAL_ID, AutogradId
from protoref.autograd.core.state import Container, Handler, RecvFn, SendFn
from protoref.autograd.core.transition import (
    NotYetError,
    Step,
    addressed,
    alive,
    cleanups_for,
    erase,
    fail,
)
from protoref.autograd.trace import args as a

__all__ = [
    "crash",
    "deserialize_forward_autograd_resp",
    "deserialize_response",
    "fetch_stored_value",
    "finish_forward_autograd_req",
    "nested_send_message_with_autograd",
    "new_context",
    "new_context_refused",
    "peer_died",
    "poll_timeout_rpcs",
    "process_cleanup_autograd_context_req",
    "process_forward_autograd_req",
    "release_context",
    "release_orphaned_context",
    "retrieve_context",
    "send_message_with_autograd",
    "udf_raises",
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
    """``NewContext(w, t)``: ``with dist_autograd.context()`` on thread ``t`` ->
    ``_new_context`` -> ``DistAutogradContainer::newContext``: a fresh id, current for the
    thread; refused while the thread has one (one context per thread, no nesting: the refusal
    is :func:`new_context_refused`)."""
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
    return Step(new, (), a.NewContextArgs.of(w=ctn.me, t=t))


def new_context_refused(ctn: Container, t: int = 0) -> Step:
    """``NewContextRefused(w, t)``: ``newContext`` on a thread that has a context raises
    "Already have an autograd context id for this thread." and nothing changes (a step the
    trace records; the spec sees it as stuttering). The caller raises the error."""
    name = "NewContextRefused"
    alive(ctn, name)
    if t not in ctn.threads:
        raise fail(ctn, name, f"thread {t} has no context: NewContext is not refused")
    return Step(ctn, (), a.NewContextRefusedArgs.of(w=ctn.me, t=t))


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
    """``SendMessageWithAutograd(w, t, dst, grad)``: an RPC from thread ``t``'s block ->
    ``getMessageWithAutograd`` (torch/csrc/distributed/autograd/utils.cpp): a message id,
    ``addSendRpcBackward`` if the tensors require grad (next edges: the recv functions the
    loss may use, ``AppInputs``), ``addKnownWorkerId(dst)`` for every wrapped message (PR
    #30914; ``dst`` may be the worker itself, a self-RPC), the future pending.

    Beyond the spec: a send once the context's pass is over (the spec's forward RPCs all come
    before the first pass; a DistributedOptimizer step sends after it)."""
    name = "SendMessageWithAutograd"
    alive(ctn, name)
    c = _current(ctn, name, t)
    if ctn.running(c):
        raise fail(ctn, name, f"context {c}'s backward pass is running on this worker")
    m = _draw(ctn, ctn.next_msg, name, "message")
    sends = ctn.sends
    if grad:
        sends = sends | {SendFn.of(c, m, dst, ctn.app_inputs(c) | extra)}
    new = ctn.evolve(
        next_msg=ctn.next_msg + 1,
        sends=sends,
        known=ctn.known | {(c, dst)},
        pending=ctn.pending | {(c, m)},
    )
    msg = Msg.make("FWD_REQ", c, m, m, ctn.me, dst, grad)
    args = a.SendMessageWithAutogradArgs.of(w=ctn.me, t=t, dst=dst, grad=grad)
    return Step(new, (msg,), args)


def nested_send_message_with_autograd(  # noqa: PLR0917 - the spec's parameters, then extra
    ctn: Container,
    h: Handler,
    dst: int,
    grad: bool,
    await_: bool = True,
    extra: frozenset[AutogradId] = _NOTHING,
) -> Step:
    """``NestedSendMessageWithAutograd(w, h, dst, grad, await)``: the UDF of handler ``h``
    calls on; ``DistAutogradContextGuard`` makes ``getMessageWithAutograd`` wrap it in the
    caller's context and record ``dst`` in this worker's known workers. The handler waits for
    it (``await``), or fires and forgets it: its future is ``detached`` and the Reference's
    answer waits for it ("joinNested"). Its send function is fed by the request's recv
    function and the earlier nested answers' (``h.nr``); the spec bounds the calls by
    ``MaxNested`` (a trace's bound is derived from it)."""
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
    waiting = h.evolve(
        wait=m if await_ else None,
        called=h.called + 1,
        forgot=h.forgot if await_ else h.forgot | {m},
    )
    new = ctn.evolve(
        next_msg=ctn.next_msg + 1,
        sends=sends,
        known=ctn.known | {(c, dst)},
        handlers=(ctn.handlers - {h}) | {waiting},
        detached=ctn.detached if await_ else ctn.detached | {(c, m)},
    )
    msg = Msg.make("FWD_REQ", c, m, m, ctn.me, dst, grad)
    args = a.NestedSendMessageWithAutogradArgs.of(w=ctn.me, h=h, dst=dst, grad=grad, await_=await_)
    return Step(new, (msg,), args)


def _running_handler(ctn: Container, name: str, h: Handler) -> None:
    alive(ctn, name)
    if h not in ctn.handlers:
        raise fail(ctn, name, f"no running handler {h.req} of context {h.ctx} here")
    if h.wait is not None or h.err:
        raise fail(ctn, name, f"handler {h.req} waits for a call or has failed")


def peer_died(ctn: Container, x: int) -> Step:
    """``PeerDied(w, x)``: this worker's failure detector reported worker ``x`` dead (a dead
    worker logs nothing: the first report is its ``Crash`` in the trace). Changes nothing
    here; what the survivor does about it are the steps that follow (the failed flood
    acknowledgements, the orphans released)."""
    name = "PeerDied"
    alive(ctn, name)
    if x == ctn.me:
        raise fail(ctn, name, "a worker does not report its own death")
    return Step(ctn, (), a.PeerDiedArgs.of(w=ctn.me, x=x))


def fetch_stored_value(ctn: Container, h: Handler, r: RecvFn) -> Step:
    """``FetchStoredValue(w, h, r)``: the UDF of handler ``h`` returns, or sends on, a value
    an earlier request of its context stored here (``remote`` keeps its result in the owner's
    RRef; ``to_here`` returns it), which reached recv function ``r``: the handler's inputs
    (``nr``) gain ``r``, so the send function of what it answers or sends is fed by it."""
    name = "FetchStoredValue"
    _running_handler(ctn, name, h)
    if h.ctx not in ctn.ctxs:
        raise fail(ctn, name, CURRENT_GONE)
    if r not in ctn.recvs_of(h.ctx) or r.mid == h.req or r.mid in h.nr:
        raise fail(ctn, name, f"recv function {r.mid} is no stored input of handler {h.req}")
    new = ctn.evolve(handlers=(ctn.handlers - {h}) | {h.evolve(nr=h.nr | {r.mid})})
    return Step(new, (), a.FetchStoredValueArgs.of(w=ctn.me, h=h, r=r))


def udf_raises(ctn: Container, h: Handler) -> Step:
    """``UdfRaises(w, h)``: the UDF of handler ``h`` raised by itself (no nested call failed):
    the handler is marked failed, so ``finish_forward_autograd_req`` answers with an error."""
    name = "UdfRaises"
    _running_handler(ctn, name, h)
    new = ctn.evolve(handlers=(ctn.handlers - {h}) | {h.evolve(err=True)})
    return Step(new, (), a.UdfRaisesArgs.of(w=ctn.me, h=h))


def release_context(ctn: Container, c: AutogradId | None = None, t: int = 0) -> Step:
    """``ReleaseContext(w, t)``: ``with`` exits on thread ``t`` -> ``_release_context`` ->
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
    if ctn.running(c) and ctn.is_root(c):
        raise NotYetError(str(ctn.me), name, f"context {c}'s backward pass is running here")
    if ctn.handlers_of(c):
        raise NotYetError(str(ctn.me), name, f"handlers of context {c} still run here (defer)")
    to = ctn.known_of(c) - {ctn.me}
    threads = {k: v for k, v in ctn.threads.items() if not (k == t and v == c)}
    # Released(w, c): its own horizon is its live state; the cleanups carry it ("Horizon").
    horizons = {**ctn.horizon, ctn.me: ctn.own_horizon(c)}
    new = erase(ctn, c, horizons).evolve(threads=threads)
    sent = cleanups_for(ctn, c, to, ctn.me, horizons[ctn.me])
    return Step(new, sent, a.ReleaseContextArgs.of(w=ctn.me, t=t))


def retrieve_context(ctn: Container, c: AutogradId) -> Step:
    """``RetrieveContext(w, c)``: ``backward`` or ``get_gradients`` called with the id of a
    context this worker created and has released (#40880: e.g. in a future's callback) ->
    ``DistAutogradContainer::retrieveContext``, which throws "Could not find autograd context
    with id" (the Reference's erase is final: the tombstone refuses a late message). The spec
    records the first such call per context; a later one is no step (the caller raises
    either way). Raises for an id that is no released context of this worker."""
    name = "RetrieveContext"
    alive(ctn, name)
    if c.worker != ctn.me or not ctn.refused(c):
        raise fail(ctn, name, f"context {c} is no context this worker created and released")
    if c in ctn.late:
        raise fail(ctn, name, f"a late call with context {c} is already recorded")
    return Step(ctn.evolve(late=ctn.late | {c}), (), a.RetrieveContextArgs.of(w=ctn.me, c=c))


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
    if ctn.refused(c):
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
    if any((c, m) in ctn.detached for m in h.forgot):  # "joinNested"
        raise NotYetError(str(ctn.me), name, f"handler {h.req}'s forgotten calls still run")
    ok = not h.err and not raised and (not resp_grad or c in ctn.ctxs)
    args = a.FinishForwardAutogradReqArgs.of(w=ctn.me, h=h, resp_grad=resp_grad)
    handlers = ctn.handlers - {h}
    if ok and resp_grad:
        m = _draw(ctn, ctn.next_msg, name, "message")
        inputs = frozenset(({h.req} if h.grad else set()) | h.nr | extra)
        new = ctn.evolve(
            handlers=handlers,
            next_msg=ctn.next_msg + 1,
            sends=ctn.sends | {SendFn.of(c, m, h.caller, inputs)},
            known=ctn.known | {(c, h.caller)},
        )
        return Step(new, (Msg.make("FWD_RESP", c, m, h.req, ctn.me, h.caller, True),), args)
    answer = Msg.make("RESP", c, None, h.req, ctn.me, h.caller, ok)
    return Step(ctn.evolve(handlers=handlers), (answer,), args)


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
    det = (c, msg.req) in ctn.detached
    hs = ctn.handlers_waiting(msg.req)
    if not app and not det and not hs:
        raise fail(ctn, name, f"nobody waits for the answer to {msg.req}")
    if not app and not loss:
        raise fail(ctn, name, "a nested answer feeds its handler (loss must be TRUE)")
    drop = ctn.refused(c)
    args = a.DeserializeForwardAutogradRespArgs.of(w=ctn.me, msg=msg, loss=loss)
    changes: dict[str, object] = {
        "pending": ctn.pending - {(c, msg.req)},
        "detached": ctn.detached - {(c, msg.req)},
    }
    if not drop:
        changes["ctxs"] = ctn.ctxs | {c}
        changes["recvs"] = ctn.recvs | {RecvFn.of(c, msg.mid, msg.src, app and loss)}
    if not app and not det:
        nr = frozenset() if drop else frozenset({msg.mid})
        woken = {h.evolve(wait=None, nr=h.nr | nr) for h in hs}
        changes["handlers"] = (ctn.handlers - set(hs)) | woken
    return Step(ctn.evolve(**changes), (), args)


def deserialize_response(ctn: Container, msg: Msg) -> Step:
    """``DeserializeResponse(w, msg)``: the future completes with an unwrapped value or an
    exception (``deserializeResponse``); a nested call's exception makes its UDF fail."""
    name = "DeserializeResponse"
    addressed(ctn, name, msg, "RESP")
    key = (msg.ctx, msg.req)
    app, det = key in ctn.pending, key in ctn.detached
    hs = ctn.handlers_waiting(msg.req)
    if not app and not det and not hs:
        raise fail(ctn, name, f"nobody waits for the answer to {msg.req}")
    changes: dict[str, object] = {
        "pending": ctn.pending - {key},
        "detached": ctn.detached - {key},
    }
    if not app and not det:
        woken = {h.evolve(wait=None, err=not msg.flag) for h in hs}
        changes["handlers"] = (ctn.handlers - set(hs)) | woken
    return Step(ctn.evolve(**changes), (), a.DeserializeResponseArgs.of(w=ctn.me, msg=msg))


def poll_timeout_rpcs(ctn: Container, m: AutogradId) -> Step:
    """``PollTimeoutRpcs(w, m)``: the agent's timeout poller (``pollTimeoutRpcs``,
    rpc/tensorpipe_agent.cpp) fails the future of request ``m``: "RPC ran for more than set
    timeout". An application future or a forgotten call's future is gone; a handler waiting on
    it resumes with the error. The callee's late answer is then nobody's (``Discard``)."""
    name = "PollTimeoutRpcs"
    alive(ctn, name)
    in_app = frozenset(p for p in ctn.pending if p[1] == m)
    in_det = frozenset(p for p in ctn.detached if p[1] == m)
    hs = ctn.handlers_waiting(m)
    if not in_app and not in_det and not hs:
        raise fail(ctn, name, f"no future of request {m} is pending here")
    new = ctn.evolve(
        pending=ctn.pending - in_app,
        detached=ctn.detached - in_det,
        handlers=(ctn.handlers - set(hs)) | {h.evolve(wait=None, err=True) for h in hs},
    )
    return Step(new, (), a.PollTimeoutRpcsArgs.of(w=ctn.me, m=m))


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
    # Heard(w, msg): the horizon the cleanup carries ("Horizon"), passed on by the cascade.
    horizons = heard(ctn.horizon, c.worker, msg.hz)
    if c in ctn.ctxs:
        to = ctn.known_of(c) - {msg.src, ctn.me}
        hz = horizons.get(c.worker, NO_HORIZON)
        return Step(erase(ctn, c, horizons), cleanups_for(ctn, c, to, msg.src, hz), args)
    return Step(ctn.evolve(tomb=compact((*ctn.tomb, c), horizons), horizon=horizons), (), args)


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
    hz = ctn.horizon.get(c.worker, NO_HORIZON)  # HorizonOf: a dead creator sends no newer one
    return Step(erase(ctn, c, ctn.horizon), cleanups_for(ctn, c, to, ctn.me, hz), args)


def crash(ctn: Container) -> Step:
    """``Crash(w)``: the worker dies with its container. The messages it returns are what the
    other workers' agents make up when they notice (``Detect``): error answers for the requests
    it was handling, and a failed ``BWD_ACK`` to the flood parent of each graph task it was
    running (for the messages still in flight to it the driver's network decides: see
    :func:`protoref.autograd.core.network.crash_network`)."""
    name = "Crash"
    alive(ctn, name)
    answers = [
        Msg.make("RESP", h.ctx, None, h.req, ctn.me, h.caller, False)
        for h in sorted(ctn.handlers, key=lambda h: (h.ctx, h.req))
    ]
    answers += [
        Msg.bwd("BWD_ACK", c, None, ctn.pass_of(c), ctn.me, x, False)
        for c, x in sorted(ctn.parent)
        if ctn.running(c)
    ]
    new = Container(me=ctn.me, next_ctx=ctn.next_ctx, next_msg=ctn.next_msg, alive=False)
    kept = new.evolve(
        tomb=ctn.tomb, horizon=ctn.horizon, results=ctn.results, freed=ctn.freed, late=ctn.late
    )
    return Step(kept, tuple(answers), a.CrashArgs.of(w=ctn.me))
