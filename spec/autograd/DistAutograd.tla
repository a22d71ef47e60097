---------------------------- MODULE DistAutograd ----------------------------
(***************************************************************************)
(* PyTorch's distributed autograd context (torch.distributed.autograd),    *)
(* modelled at the level of the DistAutogradContainer singleton of each    *)
(* worker: context lifecycle, the cleanup cascade and FAST-mode backward.  *)
(*                                                                         *)
(* What is modelled                                                        *)
(*  - Per-worker containers with two counters (contexts and autograd       *)
(*    message ids, separate namespaces).  An id is <<worker, n>>, the      *)
(*    spec's form of torch's worker_id << 48 | n; the bound is torch's     *)
(*    overflow assertion (removed on the workers in UncheckedIds: their    *)
(*    counters then run into the next worker's bits, as the arithmetic     *)
(*    would).                                                              *)
(*  - One application thread per worker with its thread-local current      *)
(*    context (current_context_id_); newContext refuses nesting.          *)
(*  - Sender wrapping (getMessageWithAutograd): a message id from the      *)
(*    sender's counter, a send function when the tensors require grad,    *)
(*    the destination recorded in knownWorkerIds_ (only for grad messages *)
(*    under the KnownOnlyOnGrad ablation, as before PR #30914).  Python    *)
(*    UDF calls are always wrapped (forced recording) inside a context.    *)
(*  - The receiver's passive creation of its copy (getOrCreateContext in   *)
(*    addRecvRpcBackward), its recv function; the callee running under    *)
(*    the caller's context (DistAutogradContextGuard) with nested RPCs     *)
(*    recorded in its own known workers; the response wrapped only if its  *)
(*    result requires grad; the caller's recv registration (which          *)
(*    re-creates a context the caller already released: #38513).          *)
(*  - Release on the creator and the cleanup cascade                       *)
(*    (releaseContext / releaseContextIfPresent, sendReleaseContextRpc):   *)
(*    fire and forget with retries (a copy may arrive twice; PyTorch may   *)
(*    exhaust the retries), each holder erases and forwards once, a        *)
(*    receiver without the context does nothing.                           *)
(*  - FAST-mode backward (DistEngine): dependencies counted over the root  *)
(*    and every send function of the context; RecvRpcBackward sends        *)
(*    BACKWARD_AUTOGRAD_REQ; a non-root answers its first request when its *)
(*    graph task and its own outstanding RPCs are done, later requests at  *)
(*    once.  Gradients are tokens <<ctx, function>> accumulated into the   *)
(*    worker's leaf (accumulatedGrads_), never values.                     *)
(*  - Crashes of the workers in CrashWorkers (#26379).                     *)
(*                                                                         *)
(* Two variants, selected by the constant Variant:                         *)
(*  - "PyTorch": torch 2.13 as it behaves, bugs included.                  *)
(*  - "Reference": the protocol protoref implements.  Its fixes, each      *)
(*    named and removable through RefAblations to show it is needed:       *)
(*      "tombstone"  a worker remembers the ids it released (or saw a      *)
(*                   cleanup for) and getOrCreateContext refuses them;     *)
(*      "defer"      a cleanup, and the creator's own release, wait until  *)
(*                   the worker's running handlers of the context finish; *)
(*      "skipSender" the cascade does not send the cleanup back to the     *)
(*                   worker it came from (#32497);                          *)
(*      "orphan"     a holder releases a context whose creator crashed     *)
(*                   (needs a failure detector; #26379).                   *)
(*    Backward is chosen separately (BackwardMode): "FAST" is torch's,     *)
(*    "Echo" the Reference's (dead recv functions fire a zero gradient at  *)
(*    graph-task start; a BACKWARD_START flood along the known workers,    *)
(*    acknowledged once a worker's graph task is complete, tells the root  *)
(*    when every worker is done; its parts "zeroDead" and "flood" are      *)
(*    removable through RefAblations too), "Drain" the research note's     *)
(*    proposal (a graph task answers when its ready queue and its RPCs     *)
(*    drain).                                                              *)
(*                                                                         *)
(* What is abstracted away                                                 *)
(*  - Tensors and values: a message carries or does not carry grad; a      *)
(*    recv function on the caller is used by the loss or not; every send   *)
(*    function and the root also feed the worker's one leaf parameter.     *)
(*  - The sharded map and its locks: each handler runs atomically; the     *)
(*    response callback is a separate step.  Device maps, CUDA streams,    *)
(*    profiling, TorchScript, the DistributedOptimizer (no protocol state). *)
(*  - One backward pass per context, started by the creator's thread once  *)
(*    its forward RPCs have returned; nested RPCs of a handler are         *)
(*    synchronous (rpc_sync in the UDF); self-RPCs are excluded.           *)
(*  - Unwrapped RPCs (builtin ops without grad, calls outside a context)   *)
(*    touch no autograd state and are left out.                            *)
(***************************************************************************)
EXTENDS Integers, FiniteSets

CONSTANTS
    Workers,         \* ranks of the RPC workers (naturals), one container each
    MaxCtx,          \* [Workers -> Nat]: contexts w's application thread may create
    MaxMsg,          \* [Workers -> Nat]: autograd message ids w may draw
    Calls,           \* pairs <<w, dst>>: w's application thread may call dst
    NestCalls,       \* pairs <<w, dst>>: a request handler on w may call dst
    Variant,         \* "PyTorch" | "Reference"
    RefAblations,    \* Reference fixes left out (a subset of the names above)
    LateForward,     \* BOOLEAN: the `with` block may exit with its RPCs in flight
    DupCleanup,      \* BOOLEAN: a retried cleanup may be delivered twice
    LoseCleanup,     \* BOOLEAN: a cleanup may exhaust its retries (PyTorch only)
    CrashWorkers,    \* workers that may crash
    Cascade,         \* BOOLEAN: FALSE = ablation (#28124, #25525): no forwarding
    KnownOnlyOnGrad, \* BOOLEAN: ablation: known workers only for grad messages
    BackwardMode,    \* "off" | "FAST" | "Drain" | "Echo"
    UnusedSends,     \* BOOLEAN: an RPC's output may not reach the loss
    UncheckedIds     \* ablation: workers whose counters overflow unchecked

VARIABLES
    nextCtx,   \* [Workers -> Nat]: next_context_id_ (low bits)
    nextMsg,   \* [Workers -> Nat]: next_autograd_message_id_ (low bits)
    ctxs,      \* [Workers -> SUBSET CtxIds]: keys of the container's map
    cur,       \* [Workers -> CtxIds \cup {None}]: the application thread's current_context_id_
    known,     \* [Workers -> SUBSET (CtxIds \X Workers)]: <<c, x>>: x in knownWorkerIds_ of c
    sends,     \* [Workers -> SUBSET SendRec]: sendAutogradFunctions_ (and their next edges)
    recvs,     \* [Workers -> SUBSET RecvRec]: recvAutogradFunctions_
    handlers,  \* set of HandlerRec: requests being processed under the guard
    pending,   \* [Workers -> SUBSET (CtxIds \X MsgIds)]: the application thread's futures
    net,       \* set of MsgRec: messages in flight (retry copies are distinct records)
    tomb,      \* [Workers -> SUBSET CtxIds]: Reference: ids released here or cleaned up
    released,  \* history: <<w, c>>: w erased c at least once
    alive,     \* [Workers -> BOOLEAN]
    execd,     \* [Workers -> SUBSET (CtxIds \X Fns)]: functions executed in the pass
    grads,     \* [Workers -> SUBSET (CtxIds \X Fns)]: gradient contributions accumulated
               \* into the worker's leaf (accumulatedGrads_): one token per function
    bstate,    \* [Workers -> SUBSET (CtxIds \X {"run", "done", "fail"})]: graph task state
    outst,     \* [Workers -> SUBSET (CtxIds \X MsgIds)]: outStandingRpcs_ (FAST, Drain)
    awaiting,  \* [Workers -> SUBSET (CtxIds \X Workers \X MsgIds)]: backward requests
               \* whose answer waits for the graph task (FAST: the first; Drain: all)
    parent,    \* [Workers -> SUBSET (CtxIds \X Workers)]: Echo: the flood's parent
    echoWait   \* [Workers -> SUBSET (CtxIds \X Workers)]: Echo: children not yet done

vars == <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending, net,
          tomb, released, alive, execd, grads, bstate, outst, awaiting, parent, echoWait>>
bwdVars == <<execd, grads, bstate, outst, awaiting, parent, echoWait>>

-----------------------------------------------------------------------------
(* Identifiers, records and messages.  Files are under                      *)
(* torch/csrc/distributed/ in torch 2.13.                                   *)

None == <<>>                  \* no context (current_context_id_ = -1), no message id
NoWorker == -1
RootFn == <<-1, 0>>           \* the graph root (the loss) among a context's functions
Reference == Variant = "Reference"
Fixed(f) == Reference /\ f \notin RefAblations
\* The two parts of the Echo backward, removable the same way: "zeroDead"
\* (a recv function nothing consumes fires a zero gradient) and "flood"
\* (the BACKWARD_START flood and its acknowledgements).
EchoPart(f) == BackwardMode = "Echo" /\ f \notin RefAblations

CtxIds == UNION {{<<w, n>> : n \in 0..(MaxCtx[w] - 1)} : w \in Workers}
MsgIds == UNION {{<<w, n>> : n \in 0..(MaxMsg[w] - 1)} : w \in Workers}
Fns == MsgIds \cup {RootFn}
Creator(c) == c[1]            \* torch: id >> 48

\* Drawing an id (newContext, newAutogradMessageId): torch asserts n < max;
\* without the assertion (UncheckedIds) the counter overflows into the next
\* worker's bits: (w << 48 | 2^48) = (w + 1) << 48.
CanDraw(w, n, max) == IF w \in UncheckedIds THEN n <= max ELSE n < max
DrawId(w, n, max) == IF n < max THEN <<w, n>> ELSE <<w + 1, 0>>

\* One record shape for every message.  FWD_REQ: mid = req = the request's
\* message id, flag = its tensors require grad.  FWD_RESP: mid = the
\* response's own message id, req = the request's.  RESP: an unwrapped
\* response, flag = value (TRUE) or exception (FALSE).  CLEANUP: trig = the
\* worker whose release or cleanup made the sender send it.  BWD_REQ: flag =
\* the gradient is non-zero.  BWD_RESP: flag = ok.  BWD_START, BWD_ACK: Echo.
\* dup: 0 = first attempt, 1 = retried, 2 = the retry's copy.
Msg(t, c, m, rq, s, d, f) ==
    [type |-> t, ctx |-> c, mid |-> m, req |-> rq, src |-> s, dst |-> d, flag |-> f,
     trig |-> NoWorker, dup |-> 0]
CleanupMsg(c, s, d, tr) ==
    [type |-> "CLEANUP", ctx |-> c, mid |-> None, req |-> None, src |-> s, dst |-> d,
     flag |-> TRUE, trig |-> tr, dup |-> 0]

KnownOf(w, c) == {e[2] : e \in {x \in known[w] : x[1] = c}}
SendsOf(w, c) == {s \in sends[w] : s.ctx = c}
RecvsOf(w, c) == {r \in recvs[w] : r.ctx = c}
ExecdOf(w, c) == {e[2] : e \in {x \in execd[w] : x[1] = c}}
Started(w, c) == \E e \in bstate[w] : e[1] = c
Running(w, c) == <<c, "run">> \in bstate[w]
HandlersOf(w, c) == {h \in handlers : h.w = w /\ h.ctx = c}
IsRoot(w, c) == <<c, RootFn>> \in execd[w]

\* The functions of c on w that consume recv function r in the forward pass
\* (so r's gradient is complete once they have all executed): the send
\* functions whose next edges include r, and the root if the loss uses r.
Consumers(w, c, r) ==
    {s.mid : s \in {x \in SendsOf(w, c) : r.mid \in x.in}}
    \cup (IF r.loss THEN {RootFn} ELSE {})

\* Next edges of a new send function on the application thread: every recv
\* function of c whose output the application uses (backward only).
AppInputs(w, c) ==
    IF BackwardMode = "off" THEN {}
    ELSE {r.mid : r \in {x \in RecvsOf(w, c) : x.loss}}

\* A handler's response requires grad: free, unless FAST mode's assumption
\* (every send function gets a gradient) is to hold, in which case a
\* handler whose inputs require grad returns a result that requires grad.
RespGradChoices(h) ==
    IF UnusedSends \/ BackwardMode = "off" \/ (~h.grad /\ h.nr = {})
    THEN BOOLEAN ELSE {TRUE}
\* Does the application's loss use a response's output?
LossChoices == IF UnusedSends /\ BackwardMode # "off" THEN BOOLEAN ELSE {TRUE}

\* Erase c on w (eraseContextIdAndReset): the context and everything it held.
EraseCtx(w, c) ==
    /\ ctxs' = [ctxs EXCEPT ![w] = @ \ {c}]
    /\ known' = [known EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ sends' = [sends EXCEPT ![w] = {s \in @ : s.ctx # c}]
    /\ recvs' = [recvs EXCEPT ![w] = {r \in @ : r.ctx # c}]
    /\ execd' = [execd EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ grads' = [grads EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ bstate' = [bstate EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ outst' = [outst EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ awaiting' = [awaiting EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ parent' = [parent EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ echoWait' = [echoWait EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ released' = released \cup {<<w, c>>}
    /\ tomb' = IF Fixed("tombstone") THEN [tomb EXCEPT ![w] = @ \cup {c}] ELSE tomb

\* Cleanups sent by sendReleaseContextRpc after w erased c, on behalf of trig.
CleanupsFor(w, c, to, tr) == {CleanupMsg(c, w, x, tr) : x \in to}

-----------------------------------------------------------------------------
(* Initial state: init_rpc has called _init(rank) on every worker.          *)

Init ==
    /\ nextCtx = [w \in Workers |-> 0]
    /\ nextMsg = [w \in Workers |-> 0]
    /\ ctxs = [w \in Workers |-> {}]
    /\ cur = [w \in Workers |-> None]
    /\ known = [w \in Workers |-> {}]
    /\ sends = [w \in Workers |-> {}]
    /\ recvs = [w \in Workers |-> {}]
    /\ handlers = {}
    /\ pending = [w \in Workers |-> {}]
    /\ net = {}
    /\ tomb = [w \in Workers |-> {}]
    /\ released = {}
    /\ alive = [w \in Workers |-> TRUE]
    /\ execd = [w \in Workers |-> {}]
    /\ grads = [w \in Workers |-> {}]
    /\ bstate = [w \in Workers |-> {}]
    /\ outst = [w \in Workers |-> {}]
    /\ awaiting = [w \in Workers |-> {}]
    /\ parent = [w \in Workers |-> {}]
    /\ echoWait = [w \in Workers |-> {}]

-----------------------------------------------------------------------------
(* Application actions (no fairness: an application may stop at any time)   *)

(* `with dist_autograd.context()` enters: _new_context ->                   *)
(* DistAutogradContainer::newContext (context/container.cpp).  Refused if   *)
(* the thread already has a context ("Already have an autograd context id  *)
(* for this thread"): one context per thread, no nesting.                  *)
NewContext(w) ==
    /\ alive[w]
    /\ cur[w] = None
    /\ CanDraw(w, nextCtx[w], MaxCtx[w])
    /\ LET c == DrawId(w, nextCtx[w], MaxCtx[w])
       IN /\ nextCtx' = [nextCtx EXCEPT ![w] = @ + 1]
          /\ ctxs' = [ctxs EXCEPT ![w] = @ \cup {c}]
          /\ cur' = [cur EXCEPT ![w] = c]
    /\ UNCHANGED <<nextMsg, known, sends, recvs, handlers, pending, net, tomb,
                   released, alive, bwdVars>>

(* rpc_sync / rpc_async of a Python UDF inside the block:                   *)
(* sendMessageWithAutograd -> getMessageWithAutograd (autograd/utils.cpp),  *)
(* recording forced: a message id from w's counter, addSendRpcBackward if  *)
(* the tensors require grad, addKnownWorkerId(dst) (since PR #30914 for     *)
(* every wrapped message), FORWARD_AUTOGRAD_REQ.  The future is pending.    *)
SendMessageWithAutograd(w, dst, grad) ==
    /\ alive[w]
    /\ <<w, dst>> \in Calls
    /\ cur[w] # None
    /\ cur[w] \in ctxs[w]                     \* currentContext() finds it
    /\ ~Started(w, cur[w])                    \* forward before the one backward pass
    /\ CanDraw(w, nextMsg[w], MaxMsg[w])
    /\ LET c == cur[w]
           m == DrawId(w, nextMsg[w], MaxMsg[w])
       IN /\ nextMsg' = [nextMsg EXCEPT ![w] = @ + 1]
          /\ sends' = IF grad
                      THEN [sends EXCEPT ![w] = @ \cup
                              {[ctx |-> c, mid |-> m, dst |-> dst, in |-> AppInputs(w, c)]}]
                      ELSE sends
          /\ known' = IF grad \/ ~KnownOnlyOnGrad
                      THEN [known EXCEPT ![w] = @ \cup {<<c, dst>>}] ELSE known
          /\ net' = net \cup {Msg("FWD_REQ", c, m, m, w, dst, grad)}
          /\ pending' = [pending EXCEPT ![w] = @ \cup {<<c, m>>}]
    /\ UNCHANGED <<nextCtx, ctxs, cur, recvs, handlers, tomb, released, alive, bwdVars>>

(* The UDF running on a handler thread calls on (nesting): the guard makes   *)
(* getMessageWithAutograd (autograd/utils.cpp) wrap it in the caller's      *)
(* context and record dst in THIS worker's known workers.  currentContext() must find the context:    *)
(* if a cleanup erased it mid-request, the call raises ("Couldn't find     *)
(* autograd context data for current autograd context id") and the UDF     *)
(* can only fail (FinishForwardAutogradReq answers with the error).        *)
(* Nested calls are synchronous: the handler waits for the response.  A     *)
(* UDF makes at most one nested call (a model bound).                       *)
NestedSendMessageWithAutograd(w, h, dst, grad) ==
    /\ alive[w]
    /\ h \in handlers /\ h.w = w /\ h.wait = None /\ ~h.err /\ ~h.called
    /\ <<w, dst>> \in NestCalls
    /\ h.ctx \in ctxs[w]
    /\ CanDraw(w, nextMsg[w], MaxMsg[w])
    /\ LET c == h.ctx
           m == DrawId(w, nextMsg[w], MaxMsg[w])
           inputs == IF BackwardMode # "off" /\ h.grad THEN {h.req} ELSE {}
       IN /\ nextMsg' = [nextMsg EXCEPT ![w] = @ + 1]
          /\ sends' = IF grad
                      THEN [sends EXCEPT ![w] = @ \cup
                              {[ctx |-> c, mid |-> m, dst |-> dst, in |-> inputs]}]
                      ELSE sends
          /\ known' = IF grad \/ ~KnownOnlyOnGrad
                      THEN [known EXCEPT ![w] = @ \cup {<<c, dst>>}] ELSE known
          /\ net' = net \cup {Msg("FWD_REQ", c, m, m, w, dst, grad)}
          /\ handlers' = (handlers \ {h}) \cup {[h EXCEPT !.wait = m, !.called = TRUE]}
    /\ UNCHANGED <<nextCtx, ctxs, cur, recvs, pending, tomb, released, alive, bwdVars>>

(* `with` exits: _release_context -> DistAutogradContainer::releaseContext  *)
(* (context/container.cpp): the id must exist; snapshot knownWorkerIds_, erase, reset the thread's   *)
(* current id, sendReleaseContextRpc (fire and forget).  PyTorch does not   *)
(* wait for the block's RPCs (LateForward: it may exit with them in        *)
(* flight; otherwise the application awaited them).  A backward pass runs   *)
(* on this very thread, so it is over.  Reference ("defer"): the release    *)
(* also waits for this worker's running handlers of the context (a nested   *)
(* call back to the creator), as a cleanup does.                            *)
ReleaseContext(w) ==
    /\ alive[w]
    /\ cur[w] # None
    /\ LET c == cur[w]
       IN /\ c \in ctxs[w]
          /\ LateForward \/ ~\E p \in pending[w] : p[1] = c
          /\ ~Running(w, c)
          /\ Fixed("defer") => HandlersOf(w, c) = {}
          /\ EraseCtx(w, c)
          /\ cur' = [cur EXCEPT ![w] = None]
          /\ net' = net \cup CleanupsFor(w, c, KnownOf(w, c), w)
    /\ UNCHANGED <<nextCtx, nextMsg, handlers, pending, alive>>

(* dist_autograd.backward(context_id, [loss]) -> DistEngine::execute        *)
(* (engine/dist_engine.cpp) on the creator's thread, inside the block, once *)
(* the results the loss needs have arrived: retrieveContext, the graph task *)
(* (computeDependencies over the root and every send function), the root   *)
(* runs and feeds the leaf.  Echo also starts the BACKWARD_START flood.    *)
DistEngineExecute(w) ==
    /\ BackwardMode # "off"
    /\ alive[w]
    /\ cur[w] # None
    /\ LET c == cur[w]
       IN /\ c \in ctxs[w]
          /\ ~\E p \in pending[w] : p[1] = c
          /\ ~Started(w, c)
          /\ bstate' = [bstate EXCEPT ![w] = @ \cup {<<c, "run">>}]
          /\ execd' = [execd EXCEPT ![w] = @ \cup {<<c, RootFn>>}]
          /\ grads' = [grads EXCEPT ![w] = @ \cup {<<c, RootFn>>}]
          /\ IF EchoPart("flood")
             THEN /\ echoWait' = [echoWait EXCEPT ![w] = @ \cup {<<c, x>> : x \in KnownOf(w, c)}]
                  /\ net' = net \cup {Msg("BWD_START", c, None, None, w, x, TRUE) : x \in KnownOf(w, c)}
             ELSE UNCHANGED <<echoWait, net>>
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   tomb, released, alive, outst, awaiting, parent>>

-----------------------------------------------------------------------------
(* Faults (no fairness)                                                     *)

(* RpcAgent::sendWithRetries (rpc/rpc_agent.cpp) retried a                  *)
(* CLEANUP_AUTOGRAD_CONTEXT_REQ whose first attempt was delivered after     *)
(* all: both copies arrive.                                                 *)
RetryCleanup(m) ==
    /\ DupCleanup
    /\ m \in net /\ m.type = "CLEANUP" /\ m.dup = 0
    /\ net' = (net \ {m}) \cup {[m EXCEPT !.dup = 1], [m EXCEPT !.dup = 2]}
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   tomb, released, alive, bwdVars>>

(* The cleanup's 20 retries are exhausted (sendReleaseContextRpc's callback *)
(* in context/container.cpp logs "Could not release Dist Autograd Context   *)
(* on node ...").  The Reference retries until the        *)
(* destination acknowledges or is known to be dead.                        *)
LoseCleanupMsg(m) ==
    /\ LoseCleanup /\ ~Reference
    /\ m \in net /\ m.type = "CLEANUP"
    /\ net' = net \ {m}
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   tomb, released, alive, bwdVars>>

(* A worker dies with its container.  The RPC agents of the other workers   *)
(* (rpc/tensorpipe_agent.cpp) fail the futures of requests it will never   *)
(* answer (the request in flight or being handled); the rest of what was   *)
(* sent to it is lost.                                                      *)
Crash(w) ==
    /\ w \in CrashWorkers
    /\ alive[w]
    /\ alive' = [alive EXCEPT ![w] = FALSE]
    /\ ctxs' = [ctxs EXCEPT ![w] = {}]
    /\ cur' = [cur EXCEPT ![w] = None]
    /\ known' = [known EXCEPT ![w] = {}]
    /\ sends' = [sends EXCEPT ![w] = {}]
    /\ recvs' = [recvs EXCEPT ![w] = {}]
    /\ pending' = [pending EXCEPT ![w] = {}]
    /\ handlers' = {h \in handlers : h.w # w}
    /\ net' = {m \in net : m.dst # w}
              \cup {Msg("RESP", h.ctx, None, h.req, w, h.caller, FALSE) :
                      h \in {x \in handlers : x.w = w}}
              \cup {Msg("RESP", m.ctx, None, m.req, w, m.src, FALSE) :
                      m \in {x \in net : x.dst = w /\ x.type = "FWD_REQ"}}
    /\ execd' = [execd EXCEPT ![w] = {}]
    /\ grads' = [grads EXCEPT ![w] = {}]
    /\ bstate' = [bstate EXCEPT ![w] = {}]
    /\ outst' = [outst EXCEPT ![w] = {}]
    /\ awaiting' = [awaiting EXCEPT ![w] = {}]
    /\ parent' = [parent EXCEPT ![w] = {}]
    /\ echoWait' = [echoWait EXCEPT ![w] = {}]
    /\ UNCHANGED <<nextCtx, nextMsg, tomb, released>>

-----------------------------------------------------------------------------
(* Message handlers and callbacks (weakly fair as a whole)                  *)

(* FORWARD_AUTOGRAD_REQ -> RequestCallbackNoPython::processForwardAutogradReq *)
(* (rpc/request_callback_no_python.cpp): addRecvRpcBackward (getOrCreateContext: *)
(* the callee's copy comes into being here; a RecvRpcBackward if the       *)
(* tensors require grad), then the UDF runs under                           *)
(* DistAutogradContextGuard(contextId).  Reference: an id this worker has   *)
(* released, or saw a cleanup for, is refused with an error response.      *)
ProcessForwardAutogradReq(w, msg) ==
    /\ alive[w]
    /\ msg \in net /\ msg.type = "FWD_REQ" /\ msg.dst = w
    /\ LET c == msg.ctx
       IN IF Fixed("tombstone") /\ c \in tomb[w]
          THEN /\ net' = (net \ {msg}) \cup {Msg("RESP", c, None, msg.req, w, msg.src, FALSE)}
               /\ UNCHANGED <<ctxs, recvs, handlers>>
          ELSE /\ net' = net \ {msg}
               /\ ctxs' = [ctxs EXCEPT ![w] = @ \cup {c}]
               /\ recvs' = IF msg.flag
                           THEN [recvs EXCEPT ![w] = @ \cup
                                   {[ctx |-> c, mid |-> msg.mid, src |-> msg.src, loss |-> FALSE]}]
                           ELSE recvs
               /\ handlers' = handlers \cup
                    {[w |-> w, ctx |-> c, req |-> msg.mid, caller |-> msg.src, grad |-> msg.flag,
                      wait |-> None, called |-> FALSE, nr |-> {}, err |-> FALSE]}
    /\ UNCHANGED <<nextCtx, nextMsg, cur, known, sends, pending, tomb, released, alive,
                   bwdVars>>

(* The UDF has returned: the continuation of processForwardAutogradReq      *)
(* (rpc/request_callback_no_python.cpp), again under the guard, wraps the   *)
(* response with                                                            *)
(* getMessageWithAutograd(fromWorkerId, response, FORWARD_AUTOGRAD_RESP):   *)
(* unwrapped if the result does not require grad; otherwise a message id,  *)
(* a send function and the caller recorded as a known worker -- which needs *)
(* currentContext(), so a context erased mid-request turns the response    *)
(* into an error.                                                           *)
FinishForwardAutogradReq(w, h, respGrad) ==
    /\ alive[w]
    /\ h \in handlers /\ h.w = w /\ h.wait = None
    /\ respGrad \in RespGradChoices(h)
    /\ LET c == h.ctx
           ok == ~h.err /\ (respGrad => c \in ctxs[w])
           wrap == ok /\ respGrad
           m == DrawId(w, nextMsg[w], MaxMsg[w])
           inputs == IF BackwardMode = "off" THEN {}
                     ELSE (IF h.grad THEN {h.req} ELSE {}) \cup h.nr
       IN \* MaxMsg is a model bound (torch's is 2^48 - 1): a model whose budget
          \* is too small leaves the handler stuck, and ForwardTerminatesProp says so
          /\ wrap => CanDraw(w, nextMsg[w], MaxMsg[w])
          /\ handlers' = handlers \ {h}
          /\ IF wrap
             THEN /\ nextMsg' = [nextMsg EXCEPT ![w] = @ + 1]
                  /\ sends' = [sends EXCEPT ![w] = @ \cup
                                 {[ctx |-> c, mid |-> m, dst |-> h.caller, in |-> inputs]}]
                  /\ known' = [known EXCEPT ![w] = @ \cup {<<c, h.caller>>}]
                  /\ net' = net \cup {Msg("FWD_RESP", c, m, h.req, w, h.caller, TRUE)}
             ELSE /\ net' = net \cup {Msg("RESP", c, None, h.req, w, h.caller, ok)}
                  /\ UNCHANGED <<nextMsg, sends, known>>
    /\ UNCHANGED <<nextCtx, ctxs, cur, recvs, pending, tomb, released, alive, bwdVars>>

(* The future of a wrapped request completes with a wrapped response:       *)
(* deserializeResponse (rpc/utils.cpp) calls addRecvRpcBackward, hence      *)
(* getOrCreateContext ON THE CALLER, which re-creates a context the caller  *)
(* has already released (#38513).  Reference: a released id's autograd part *)
(* is dropped and the value is delivered detached.  The caller is the       *)
(* application thread (its future) or a handler waiting on a nested call.  *)
(* loss: whether the application's loss uses this output.                   *)
DeserializeForwardAutogradResp(w, msg, loss) ==
    /\ alive[w]
    /\ msg \in net /\ msg.type = "FWD_RESP" /\ msg.dst = w
    /\ loss \in LossChoices
    /\ LET c == msg.ctx
           drop == Fixed("tombstone") /\ c \in tomb[w]
           app == <<c, msg.req>> \in pending[w]
           hs == {h \in handlers : h.w = w /\ h.wait = msg.req}
       IN /\ app \/ hs # {}
          /\ app \/ loss                      \* a handler has no loss of its own
          /\ net' = net \ {msg}
          /\ ctxs' = IF drop THEN ctxs ELSE [ctxs EXCEPT ![w] = @ \cup {c}]
          /\ recvs' = IF drop THEN recvs
                      ELSE [recvs EXCEPT ![w] = @ \cup
                              {[ctx |-> c, mid |-> msg.mid, src |-> msg.src, loss |-> app /\ loss]}]
          /\ pending' = [pending EXCEPT ![w] = @ \ {<<c, msg.req>>}]
          /\ handlers' = IF app THEN handlers
                         ELSE {IF h \in hs
                               THEN [h EXCEPT !.wait = None,
                                              !.nr = IF drop THEN @ ELSE @ \cup {msg.mid}]
                               ELSE h : h \in handlers}
    /\ UNCHANGED <<nextCtx, nextMsg, cur, known, sends, tomb, released, alive, bwdVars>>

(* The future completes with an unwrapped value or an exception             *)
(* (deserializeResponse, rpc/utils.cpp; a nested call's exception makes the *)
(* UDF fail).                                                               *)
DeserializeResponse(w, msg) ==
    /\ alive[w]
    /\ msg \in net /\ msg.type = "RESP" /\ msg.dst = w
    /\ LET app == <<msg.ctx, msg.req>> \in pending[w]
           hs == {h \in handlers : h.w = w /\ h.wait = msg.req}
       IN /\ app \/ hs # {}
          /\ net' = net \ {msg}
          /\ pending' = [pending EXCEPT ![w] = @ \ {<<msg.ctx, msg.req>>}]
          /\ handlers' = IF app THEN handlers
                         ELSE {IF h \in hs THEN [h EXCEPT !.wait = None, !.err = ~msg.flag]
                               ELSE h : h \in handlers}
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, tomb, released, alive,
                   bwdVars>>

(* CLEANUP_AUTOGRAD_CONTEXT_REQ -> processCleanupAutogradContextReq         *)
(* (rpc/request_callback_no_python.cpp) -> DistAutogradContainer::          *)
(* releaseContextIfPresent (context/container.cpp): absent -> nothing, and  *)
(* nothing forwarded; present -> erase and send a cleanup to every known    *)
(* worker (the cascade; each incarnation forwards at most once).  The       *)
(* response is sent at once (not modelled: nothing waits for it).          *)
(* Reference: waits while a handler of c runs here ("defer"); remembers the *)
(* id even when absent ("tombstone"); does not send back ("skipSender").   *)
ProcessCleanupAutogradContextReq(w, msg) ==
    /\ alive[w]
    /\ msg \in net /\ msg.type = "CLEANUP" /\ msg.dst = w
    /\ Fixed("defer") => HandlersOf(w, msg.ctx) = {}
    /\ LET c == msg.ctx
           to == IF ~Cascade THEN {}
                 ELSE KnownOf(w, c) \ (IF Fixed("skipSender") THEN {msg.src} ELSE {})
       IN IF c \in ctxs[w]
          THEN /\ EraseCtx(w, c)
               /\ net' = (net \ {msg}) \cup CleanupsFor(w, c, to, msg.src)
          ELSE /\ net' = net \ {msg}
               /\ tomb' = IF Fixed("tombstone") THEN [tomb EXCEPT ![w] = @ \cup {c}] ELSE tomb
               /\ UNCHANGED <<ctxs, known, sends, recvs, released, bwdVars>>
    /\ UNCHANGED <<nextCtx, nextMsg, cur, handlers, pending, alive>>

(* Reference (#26379's proposal): a holder whose failure detector reports   *)
(* the creator dead releases the context (after its handlers of it) and     *)
(* cascades the cleanup as releaseContextIfPresent does.                    *)
ReleaseOrphanedContext(w, c) ==
    /\ Fixed("orphan")
    /\ alive[w]
    /\ c \in ctxs[w]
    /\ Creator(c) \in Workers /\ ~alive[Creator(c)]
    /\ HandlersOf(w, c) = {}
    /\ EraseCtx(w, c)
    /\ net' = net \cup CleanupsFor(w, c, KnownOf(w, c), w)
    /\ UNCHANGED <<nextCtx, nextMsg, cur, handlers, pending, alive>>

(* A message to a dead worker: the sender's agent fails the future of a     *)
(* request (or of a gradient request); anything else is lost.               *)
Discard(msg) ==
    /\ msg \in net /\ ~alive[msg.dst]
    /\ net' = (net \ {msg}) \cup
              (IF msg.type = "FWD_REQ"
               THEN {Msg("RESP", msg.ctx, None, msg.req, msg.dst, msg.src, FALSE)}
               ELSE IF msg.type = "BWD_REQ"
               THEN {Msg("BWD_RESP", msg.ctx, msg.mid, None, msg.dst, msg.src, FALSE)}
               ELSE {})
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   tomb, released, alive, bwdVars>>

-----------------------------------------------------------------------------
(* Backward                                                                 *)

(* The graph task of c on w is over.  FAST: every send function executed   *)
(* (the root too, on the root), every recv function with a consumer fired,  *)
(* and the outstanding RPCs answered.  Echo: every function executed,        *)
(* including recv functions nothing consumes, and every flood child done.   *)
(* Drain: nothing ready and no RPC outstanding (unexecuted sends do not     *)
(* hold it up).                                                             *)
ReadyRecv(w, c, r) ==
    /\ r.mid \notin ExecdOf(w, c)
    /\ Consumers(w, c, r) \subseteq ExecdOf(w, c)
    /\ Consumers(w, c, r) # {} \/ EchoPart("zeroDead")
NoOutstanding(w, c) == ~\E e \in outst[w] : e[1] = c
Complete(w, c) ==
    CASE BackwardMode = "FAST" ->
            /\ {s.mid : s \in SendsOf(w, c)} \subseteq ExecdOf(w, c)
            /\ ~\E r \in RecvsOf(w, c) : ReadyRecv(w, c, r)
            /\ NoOutstanding(w, c)
      [] BackwardMode = "Echo" ->
            /\ {s.mid : s \in SendsOf(w, c)} \cup {r.mid : r \in RecvsOf(w, c)} \subseteq ExecdOf(w, c)
            /\ IsRoot(w, c) \/ (\E e \in parent[w] : e[1] = c) \/ ~EchoPart("flood")
            /\ ~\E e \in echoWait[w] : e[1] = c
      [] OTHER -> \* Drain
            /\ ~\E r \in RecvsOf(w, c) : ReadyRecv(w, c, r)
            /\ NoOutstanding(w, c)

(* RecvRpcBackward::apply (functions/recvrpc_backward.cpp): once every      *)
(* consumer has delivered its gradient, send BACKWARD_AUTOGRAD_REQ with it  *)
(* to the worker that sent the tensors and record the future as an         *)
(* outstanding RPC.  The gradient is non-zero iff some consumer's was.     *)
(* FAST and Drain never run a recv function nothing consumes; Echo runs it *)
(* at once with a zero gradient.                                            *)
RecvRpcBackwardApply(w, c, r) ==
    /\ alive[w]
    /\ Running(w, c)
    /\ r \in RecvsOf(w, c)
    /\ ReadyRecv(w, c, r)
    /\ LET real == \E f \in Consumers(w, c, r) : <<c, f>> \in grads[w]
       IN /\ execd' = [execd EXCEPT ![w] = @ \cup {<<c, r.mid>>}]
          /\ net' = net \cup {Msg("BWD_REQ", c, r.mid, r.mid, w, r.src, real)}
          /\ outst' = IF BackwardMode = "Echo" THEN outst
                      ELSE [outst EXCEPT ![w] = @ \cup {<<c, r.mid>>}]
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   tomb, released, alive, grads, bstate, awaiting, parent, echoWait>>

(* BACKWARD_AUTOGRAD_REQ -> processBackwardAutogradReq                      *)
(* (rpc/request_callback_no_python.cpp): retrieveContext and                *)
(* retrieveSendFunction (both throw: the answer is an error), then          *)
(* DistEngine::executeSendFunctionAsync (engine/dist_engine.cpp): the first *)
(* request of the context computes the dependencies (over every send       *)
(* function) and is answered                                                *)
(* only when the graph task and this worker's outstanding RPCs are done;    *)
(* later requests are answered at once.  The send function runs and feeds  *)
(* the leaf.  Drain answers every request on draining; Echo answers none    *)
(* (the flood tracks completion).                                           *)
ProcessBackwardAutogradReq(w, msg) ==
    /\ alive[w]
    /\ msg \in net /\ msg.type = "BWD_REQ" /\ msg.dst = w
    /\ LET c == msg.ctx
           found == c \in ctxs[w] /\ \E s \in SendsOf(w, c) : s.mid = msg.mid
           first == ~Started(w, c)
       IN IF ~found
          THEN /\ net' = (net \ {msg}) \cup
                         (IF BackwardMode = "Echo" THEN {}
                          ELSE {Msg("BWD_RESP", c, msg.mid, None, w, msg.src, FALSE)})
               /\ UNCHANGED <<execd, grads, bstate, awaiting>>
          ELSE /\ execd' = [execd EXCEPT ![w] = @ \cup {<<c, msg.mid>>}]
               /\ grads' = IF msg.flag THEN [grads EXCEPT ![w] = @ \cup {<<c, msg.mid>>}]
                           ELSE grads
               /\ bstate' = IF first THEN [bstate EXCEPT ![w] = @ \cup {<<c, "run">>}]
                            ELSE bstate
               /\ CASE BackwardMode = "FAST" ->
                         IF first
                         THEN /\ awaiting' = [awaiting EXCEPT ![w] = @ \cup {<<c, msg.src, msg.mid>>}]
                              /\ net' = net \ {msg}
                         ELSE /\ net' = (net \ {msg}) \cup
                                        {Msg("BWD_RESP", c, msg.mid, None, w, msg.src, TRUE)}
                              /\ UNCHANGED awaiting
                    [] BackwardMode = "Drain" ->
                         /\ awaiting' = [awaiting EXCEPT ![w] = @ \cup {<<c, msg.src, msg.mid>>}]
                         /\ net' = net \ {msg}
                    [] OTHER ->
                         /\ net' = net \ {msg}
                         /\ UNCHANGED awaiting
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   tomb, released, alive, outst, parent, echoWait>>

(* BACKWARD_AUTOGRAD_RESP completes an outstanding RPC's future             *)
(* (DistAutogradContext::addOutstandingRpc's callback, context/context.cpp; *)
(* deserializeResponse in rpc/utils.cpp); an error fails the               *)
(* graph task, and the error travels on to whoever waits for it.            *)
ProcessBackwardAutogradResp(w, msg) ==
    /\ alive[w]
    /\ msg \in net /\ msg.type = "BWD_RESP" /\ msg.dst = w
    /\ LET c == msg.ctx
       IN /\ outst' = [outst EXCEPT ![w] = @ \ {<<c, msg.mid>>}]
          /\ IF msg.flag \/ ~Running(w, c)
             THEN /\ net' = net \ {msg}
                  /\ UNCHANGED <<bstate, awaiting>>
             ELSE /\ bstate' = [bstate EXCEPT ![w] = (@ \ {<<c, "run">>}) \cup {<<c, "fail">>}]
                  /\ awaiting' = [awaiting EXCEPT ![w] = {e \in @ : e[1] # c}]
                  /\ net' = (net \ {msg}) \cup
                            {Msg("BWD_RESP", c, e[3], None, w, e[2], FALSE) :
                               e \in {x \in awaiting[w] : x[1] = c}}
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   tomb, released, alive, execd, grads, parent, echoWait>>

(* DistEngine::cleanupBackwardPass (engine/dist_engine.cpp) once the graph  *)
(* task is over: on the root                                                *)
(* dist_autograd.backward returns; elsewhere the future of the first        *)
(* request completes (FAST) or every waiting request is answered (Drain,    *)
(* the task staying open), or the flood parent is told (Echo).              *)
CleanupBackwardPass(w, c) ==
    /\ alive[w]
    /\ Running(w, c)
    /\ Complete(w, c)
    /\ LET waiting == {e \in awaiting[w] : e[1] = c}
           answers == {Msg("BWD_RESP", c, e[3], None, w, e[2], TRUE) : e \in waiting}
       IN CASE BackwardMode = "Drain" /\ ~IsRoot(w, c) ->
                 /\ waiting # {}
                 /\ awaiting' = [awaiting EXCEPT ![w] = @ \ waiting]
                 /\ net' = net \cup answers
                 /\ UNCHANGED bstate
            [] BackwardMode = "Echo" ->
                 /\ bstate' = [bstate EXCEPT ![w] = (@ \ {<<c, "run">>}) \cup {<<c, "done">>}]
                 /\ net' = net \cup {Msg("BWD_ACK", c, None, None, w, e[2], TRUE) :
                                       e \in {x \in parent[w] : x[1] = c}}
                 /\ UNCHANGED awaiting
            [] OTHER ->
                 /\ bstate' = [bstate EXCEPT ![w] = (@ \ {<<c, "run">>}) \cup {<<c, "done">>}]
                 /\ awaiting' = [awaiting EXCEPT ![w] = @ \ waiting]
                 /\ net' = net \cup answers
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   tomb, released, alive, execd, grads, outst, parent, echoWait>>

(* Echo (Reference): BACKWARD_START reaches a worker.  The first one makes  *)
(* its sender the parent, starts the graph task if no gradient request has *)
(* yet (so recv functions nothing consumes fire their zero gradient) and is *)
(* passed on to the known workers; any later one is acknowledged at once.  *)
ProcessBackwardStart(w, msg) ==
    /\ alive[w]
    /\ msg \in net /\ msg.type = "BWD_START" /\ msg.dst = w
    /\ LET c == msg.ctx
           engaged == IsRoot(w, c) \/ \E e \in parent[w] : e[1] = c
           to == KnownOf(w, c) \ {msg.src}
       IN IF engaged \/ c \notin ctxs[w]
          THEN /\ net' = (net \ {msg}) \cup {Msg("BWD_ACK", c, None, None, w, msg.src, TRUE)}
               /\ UNCHANGED <<bstate, parent, echoWait>>
          ELSE /\ parent' = [parent EXCEPT ![w] = @ \cup {<<c, msg.src>>}]
               /\ echoWait' = [echoWait EXCEPT ![w] = @ \cup {<<c, x>> : x \in to}]
               /\ bstate' = IF Started(w, c) THEN bstate
                            ELSE [bstate EXCEPT ![w] = @ \cup {<<c, "run">>}]
               /\ net' = (net \ {msg}) \cup {Msg("BWD_START", c, None, None, w, x, TRUE) : x \in to}
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   tomb, released, alive, execd, grads, outst, awaiting>>

(* Echo: a flood child reports that it (and its subtree) is done.           *)
ProcessBackwardAck(w, msg) ==
    /\ alive[w]
    /\ msg \in net /\ msg.type = "BWD_ACK" /\ msg.dst = w
    /\ net' = net \ {msg}
    /\ echoWait' = [echoWait EXCEPT ![w] = @ \ {<<msg.ctx, msg.src>>}]
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   tomb, released, alive, execd, grads, bstate, outst, awaiting, parent>>

-----------------------------------------------------------------------------
(* The next-state relation and the specification                           *)

AppNext ==
    \/ \E w \in Workers : NewContext(w)
    \/ \E p \in Calls : \E g \in BOOLEAN : SendMessageWithAutograd(p[1], p[2], g)
    \/ \E h \in handlers : \E p \in NestCalls : \E g \in BOOLEAN :
          p[1] = h.w /\ NestedSendMessageWithAutograd(h.w, h, p[2], g)
    \/ \E w \in Workers : ReleaseContext(w)
    \/ \E w \in Workers : DistEngineExecute(w)

FaultNext ==
    \/ \E m \in net : RetryCleanup(m)
    \/ \E m \in net : LoseCleanupMsg(m)
    \/ \E w \in CrashWorkers : Crash(w)

\* Message m is taken from the network by its handler, or a callback runs.
SystemNext ==
    \/ \E m \in net : ProcessForwardAutogradReq(m.dst, m)
    \/ \E h \in handlers : \E g \in BOOLEAN : FinishForwardAutogradReq(h.w, h, g)
    \/ \E m \in net : \E l \in BOOLEAN : DeserializeForwardAutogradResp(m.dst, m, l)
    \/ \E m \in net : DeserializeResponse(m.dst, m)
    \/ \E m \in net : ProcessCleanupAutogradContextReq(m.dst, m)
    \/ \E w \in Workers : \E c \in ctxs[w] : ReleaseOrphanedContext(w, c)
    \/ \E m \in net : Discard(m)
    \/ \E w \in Workers : \E r \in recvs[w] : RecvRpcBackwardApply(w, r.ctx, r)
    \/ \E m \in net : ProcessBackwardAutogradReq(m.dst, m)
    \/ \E m \in net : ProcessBackwardAutogradResp(m.dst, m)
    \/ \E w \in Workers : \E e \in bstate[w] : CleanupBackwardPass(w, e[1])
    \/ \E m \in net : ProcessBackwardStart(m.dst, m)
    \/ \E m \in net : ProcessBackwardAck(m.dst, m)

Next == AppNext \/ FaultNext \/ SystemNext

\* Every behaviour has finitely many non-stuttering steps (ids are bounded,
\* each erase sends at most |Workers| cleanups, each cleanup is copied at
\* most once), so weak fairness of the system steps as a whole means "a
\* behaviour stops only where no handler or callback is enabled", and <>[]P
\* means "P holds in the final state".
Spec == Init /\ [][Next]_vars /\ WF_vars(SystemNext)

-----------------------------------------------------------------------------
(* Invariants                                                               *)

SendRec == [ctx : CtxIds, mid : MsgIds, dst : Workers, in : SUBSET MsgIds]
RecvRec == [ctx : CtxIds, mid : MsgIds, src : Workers, loss : BOOLEAN]
HandlerRec == [w : Workers, ctx : CtxIds, req : MsgIds, caller : Workers, grad : BOOLEAN,
               wait : MsgIds \cup {None}, called : BOOLEAN, nr : SUBSET MsgIds,
               err : BOOLEAN]
MsgRec == [type : {"FWD_REQ", "FWD_RESP", "RESP", "CLEANUP", "BWD_REQ", "BWD_RESP",
                   "BWD_START", "BWD_ACK"},
           ctx : CtxIds, mid : MsgIds \cup {None}, req : MsgIds \cup {None},
           src : Workers, dst : Workers, flag : BOOLEAN, trig : Workers \cup {NoWorker},
           dup : 0..2]

(* Every variable has its type.  Ids lie in the id space of an existing     *)
(* worker (its 48-bit range): only the overflow assertion keeps them there. *)
TypeOK ==
    /\ nextCtx \in [Workers -> Nat]
    /\ nextMsg \in [Workers -> Nat]
    /\ ctxs \in [Workers -> SUBSET CtxIds]
    /\ cur \in [Workers -> CtxIds \cup {None}]
    /\ known \in [Workers -> SUBSET (CtxIds \X Workers)]
    /\ sends \in [Workers -> SUBSET SendRec]
    /\ recvs \in [Workers -> SUBSET RecvRec]
    /\ handlers \subseteq HandlerRec
    /\ pending \in [Workers -> SUBSET (CtxIds \X MsgIds)]
    /\ net \subseteq MsgRec
    /\ tomb \in [Workers -> SUBSET CtxIds]
    /\ released \subseteq Workers \X CtxIds
    /\ alive \in [Workers -> BOOLEAN]
    /\ execd \in [Workers -> SUBSET (CtxIds \X Fns)]
    /\ grads \in [Workers -> SUBSET (CtxIds \X Fns)]
    /\ bstate \in [Workers -> SUBSET (CtxIds \X {"run", "done", "fail"})]
    /\ outst \in [Workers -> SUBSET (CtxIds \X MsgIds)]
    /\ awaiting \in [Workers -> SUBSET (CtxIds \X Workers \X MsgIds)]
    /\ parent \in [Workers -> SUBSET (CtxIds \X Workers)]
    /\ echoWait \in [Workers -> SUBSET (CtxIds \X Workers)]

\* id was drawn by the worker it names (its first component), from a counter
\* that has passed it.
DrawnBy(id, ctr) == id[1] \in Workers /\ id[2] < ctr[id[1]]

(* D1: every id in use was drawn by the worker its high bits name: a        *)
(* thread's current context by that thread's worker, a send function's id  *)
(* by the worker holding it; every context and message id in use has been  *)
(* drawn already.  Separate counters keep the two namespaces apart.        *)
UniqueIdsInv ==
    /\ \A w \in Workers : cur[w] # None => cur[w][1] = w /\ DrawnBy(cur[w], nextCtx)
    /\ \A w \in Workers : \A c \in ctxs[w] : DrawnBy(c, nextCtx)
    /\ \A w \in Workers : \A s \in sends[w] : s.mid[1] = w /\ DrawnBy(s.mid, nextMsg)
    /\ \A w \in Workers : \A r \in recvs[w] : DrawnBy(r.mid, nextMsg)

(* D4: at most one recv function per (context, message id) on a worker; a   *)
(* recv function for message m from X names the worker that drew m, and    *)
(* while X holds the context, X has the matching send function (else a     *)
(* gradient request would fail with "Could not find send function").       *)
SendRecvPairingInv ==
    \A w \in Workers : \A r \in recvs[w] :
        /\ \A r2 \in recvs[w] : (r2.ctx = r.ctx /\ r2.mid = r.mid) => r2 = r
        /\ r.mid[1] = r.src
        /\ (alive[r.src] /\ r.ctx \in ctxs[r.src]) =>
              \E s \in sends[r.src] : s.ctx = r.ctx /\ s.mid = r.mid /\ s.dst = w

(* D5, the inductive form of "the cleanup reaches every holder": a worker   *)
(* holding c, other than its creator, is a known worker of some live holder *)
(* of c, or a cleanup for c is on its way to it -- unless c's creator died. *)
CleanupReachesInv ==
    \A w \in Workers : \A c \in ctxs[w] :
        (w # Creator(c) /\ Creator(c) \in Workers /\ alive[Creator(c)]) =>
            \/ \E x \in Workers : x # w /\ alive[x] /\ c \in ctxs[x] /\ <<c, w>> \in known[x]
            \/ \E m \in net : m.type = "CLEANUP" /\ m.ctx = c /\ m.dst = w

(* A3: a context erased on a worker never comes back there.                 *)
NoResurrectionInv ==
    \A e \in released : e[2] \notin ctxs[e[1]]

(* A2: the context a thread runs under exists on its worker: the            *)
(* application thread's current id, and the guarded id of every running   *)
(* handler (else currentContext() throws mid-request).                      *)
CurrentContextValidInv ==
    /\ \A w \in Workers : (alive[w] /\ cur[w] # None) => cur[w] \in ctxs[w]
    /\ \A h \in handlers : h.ctx \in ctxs[h.w]

(* #32497: the cascade never sends a cleanup back to the worker whose       *)
(* cleanup triggered it (an efficiency property: that worker has already    *)
(* erased the context).                                                     *)
NoRedundantCleanupInv ==
    \A m \in net : m.type = "CLEANUP" => m.dst # m.trig

(* The functions of c on the path of the loss's gradient: the root; a recv  *)
(* function with a live consumer; the send function a live recv function   *)
(* answers.  Computed as a fixpoint over the forward graph.                 *)
Live1(c, L) ==
    L \cup UNION {{<<w, r.mid>> : r \in {x \in RecvsOf(w, c) :
                                    \E f \in Consumers(w, c, x) : <<w, f>> \in L}}
                 : w \in Workers}
      \cup UNION {{<<x, s.mid>> : s \in {y \in SendsOf(x, c) :
                                    \E w \in Workers : \E r \in RecvsOf(w, c) :
                                       r.mid = y.mid /\ r.src = x /\ <<w, r.mid>> \in L}}
                 : x \in Workers}
RECURSIVE LiveN(_, _, _)
LiveN(c, L, n) == IF n = 0 THEN L ELSE LiveN(c, Live1(c, L), n - 1)
Live(c) == LiveN(c, {<<Creator(c), RootFn>>},
                 Cardinality(UNION {SendsOf(w, c) \cup RecvsOf(w, c) : w \in Workers}))

(* In a completed pass (the root's backward returned), the contributions    *)
(* accumulated on every worker are exactly those of the functions on the    *)
(* loss's gradient path: none missing, none from a zero gradient.  Each     *)
(* function runs at most once per pass in every variant (BACKWARD_AUTOGRAD_ *)
(* REQ is never retried), so "exactly once" is this equality.              *)
GradientExactlyOnceInv ==
    \A c \in CtxIds :
        (Creator(c) \in Workers /\ <<c, "done">> \in bstate[Creator(c)]) =>
            \A w \in Workers :
                {e[2] : e \in {x \in grads[w] : x[1] = c}} =
                    {e[2] : e \in {x \in Live(c) : x[1] = w /\
                                   (x[2] = RootFn \/ \E s \in SendsOf(w, c) : s.mid = x[2])}}

-----------------------------------------------------------------------------
(* Liveness (under WF_vars(SystemNext)); every behaviour ends in a final    *)
(* state, so <>[]P says P holds there.                                      *)

\* c is dead: its creator released it, or died.
Dead(c) == Creator(c) \in Workers /\ (<<Creator(c), c>> \in released \/ ~alive[Creator(c)])

(* D8: once a context is dead, eventually no worker holds it.              *)
EventualReleaseProp ==
    <>[](\A c \in CtxIds : Dead(c) => \A w \in Workers : c \notin ctxs[w])

(* Every started backward pass eventually completes or fails, on every     *)
(* worker that took part.                                                   *)
BackwardTerminatesProp ==
    <>[](\A w \in Workers : \A e \in bstate[w] : e[2] # "run")

(* Every wrapped RPC eventually gets a value or an error: no future of an   *)
(* application thread or of a handler is left waiting.                      *)
ForwardTerminatesProp ==
    <>[](handlers = {} /\ \A w \in Workers : pending[w] = {})

=============================================================================
