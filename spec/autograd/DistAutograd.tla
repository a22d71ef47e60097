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
(*  - Several application threads per worker (Threads), each with its     *)
(*    thread-local current context (current_context_id_); newContext      *)
(*    refuses nesting (removed under the NestingUnchecked ablation);       *)
(*    contexts of different threads live side by side in one container.   *)
(*  - Sender wrapping (getMessageWithAutograd): a message id from the      *)
(*    sender's counter, a send function when the tensors require grad,    *)
(*    the destination recorded in knownWorkerIds_ (only for grad messages *)
(*    under the KnownOnlyOnGrad ablation, as before PR #30914).  Python    *)
(*    UDF calls are always wrapped (forced recording) inside a context.    *)
(*    A worker may call itself (a self-RPC is wrapped like any other).     *)
(*  - The receiver's passive creation of its copy (getOrCreateContext in   *)
(*    addRecvRpcBackward), its recv function; the callee running under    *)
(*    the caller's context (DistAutogradContextGuard); a UDF makes up to   *)
(*    MaxNested nested RPCs, each awaited or fired and forgotten          *)
(*    (rpc_async without wait), recorded in its own known workers; the    *)
(*    response wrapped only if its result requires grad; the caller's      *)
(*    recv registration (which re-creates a context the caller already    *)
(*    released: #38513).                                                   *)
(*  - Release on the creator and the cleanup cascade                       *)
(*    (releaseContext / releaseContextIfPresent, sendReleaseContextRpc):   *)
(*    fire and forget with retries (a copy may arrive twice; PyTorch may   *)
(*    exhaust the retries), each holder erases and forwards once, a        *)
(*    receiver without the context does nothing.                           *)
(*  - RPC futures: a dead peer fails them when the agent notices (Detect), *)
(*    and the RPC timeout fails them at any time (RpcTimeout); a late      *)
(*    answer to a future that timed out is dropped by the agent.           *)
(*  - FAST-mode backward (DistEngine): dependencies counted over the root  *)
(*    and every send function of the context; RecvRpcBackward sends        *)
(*    BACKWARD_AUTOGRAD_REQ; a non-root answers its first request when its *)
(*    graph task and its own outstanding RPCs are done, later requests at  *)
(*    once.  Up to MaxPasses passes per context (retain_graph=True keeps   *)
(*    the graph; a pass over a freed graph raises and adds nothing); a     *)
(*    backward function may raise (ErrorWorkers) and the error travels     *)
(*    back through the futures.  Gradients are tokens <<ctx, pass, fn>>    *)
(*    accumulated into the worker's leaf (accumulatedGrads_), never        *)
(*    values: several passes add up, each pass's tokens apart.             *)
(*  - backward / get_gradients called with the id of a context the thread  *)
(*    has left (LateCalls; #40880: e.g. in a future's callback): both      *)
(*    begin with retrieveContext, which throws unless the id is held.      *)
(*  - Crashes of the workers in CrashWorkers (#26379), also mid-backward.  *)
(*                                                                         *)
(* Two variants, selected by the constant Variant:                         *)
(*  - "PyTorch": torch 2.13 as it behaves, bugs included.                  *)
(*  - "Reference": the protocol protoref implements.  Its fixes, each      *)
(*    named and removable through RefAblations to show it is needed:       *)
(*      "tombstone"  a worker remembers the ids it released (or saw a      *)
(*                   cleanup for) and getOrCreateContext refuses them      *)
(*                   (kept as a per-creator watermark under Watermark,     *)
(*                   the research note's alternative; bounded by the       *)
(*                   creators' horizons under Horizon, issue 28);          *)
(*      "defer"      a cleanup, and the creator's own release, wait until  *)
(*                   the worker's running handlers of the context finish; *)
(*      "skipSender" the cascade sends the cleanup neither back to the     *)
(*                   worker it came from (#32497) nor to itself;           *)
(*      "orphan"     a holder releases a context whose creator crashed     *)
(*                   (needs a failure detector; #26379);                   *)
(*      "passTag"    backward messages carry their pass, and one of a pass *)
(*                   the worker has finished is dropped (a request sent   *)
(*                   by a worker before it died must not restart a task); *)
(*      "joinNested" a UDF's answer waits for the nested calls it fired    *)
(*                   and forgot (else the graph can still grow on a worker *)
(*                   the backward flood has passed).                       *)
(*    Backward is chosen separately (BackwardMode): "FAST" is torch's,     *)
(*    "Echo" the Reference's (dead recv functions fire a zero gradient at  *)
(*    graph-task start, and so do the recv functions of a failed graph    *)
(*    task; a BACKWARD_START flood along the known workers, acknowledged   *)
(*    with the subtree's outcome once a worker's graph task is over, tells *)
(*    the root when every worker is done and whether one failed; its      *)
(*    parts "zeroDead", "flood" and "ackErrors" are removable through      *)
(*    RefAblations too), "Drain" the research note's proposal (a graph    *)
(*    task answers when its ready queue and its RPCs drain).               *)
(*                                                                         *)
(* What is abstracted away                                                 *)
(*  - Tensors and values: a message carries or does not carry grad; a      *)
(*    recv function on the caller is used by the loss or not; every send   *)
(*    function and the root also feed the worker's one leaf parameter;    *)
(*    every local graph saves tensors (so a freed graph always raises).   *)
(*  - The sharded map and its locks: each handler runs atomically; the     *)
(*    response callback is a separate step.  Device maps, CUDA streams,    *)
(*    profiling, TorchScript, the DistributedOptimizer (no protocol state). *)
(*  - Backward passes are started by the creator's thread in its block     *)
(*    once its forward RPCs have returned, and no forward RPC follows the  *)
(*    first pass; a nested call's answer feeds the UDF's result.           *)
(*  - Unwrapped RPCs (builtin ops without grad, calls outside a context)   *)
(*    touch no autograd state and are left out.                            *)
(***************************************************************************)
EXTENDS Integers, FiniteSets

CONSTANTS
    Workers,         \* ranks of the RPC workers (naturals), one container each
    Threads,         \* application threads of every worker (naturals)
    MaxCtx,          \* [Workers -> Nat]: contexts w's application threads may create
    MaxMsg,          \* [Workers -> Nat]: autograd message ids w may draw
    Calls,           \* pairs <<w, dst>>: w's application threads may call dst (dst = w: self-RPC)
    NestCalls,       \* pairs <<w, dst>>: a request handler on w may call dst
    MaxNested,       \* nested calls a UDF may make
    FireAndForget,   \* BOOLEAN: a UDF may leave a nested call unawaited
    Variant,         \* "PyTorch" | "Reference"
    RefAblations,    \* Reference fixes left out (a subset of the names above)
    Watermark,       \* BOOLEAN: Reference tombstones kept as a per-creator watermark
    LateForward,     \* BOOLEAN: the `with` block may exit with its RPCs in flight
    DupCleanup,      \* BOOLEAN: a retried cleanup may be delivered twice
    LoseCleanup,     \* BOOLEAN: a cleanup may exhaust its retries (PyTorch only)
    CrashWorkers,    \* workers that may crash
    Detect,          \* BOOLEAN: the RPC agents notice a dead peer (its connections close)
    RpcTimeout,      \* BOOLEAN: RPC futures time out (FALSE: rpc_timeout 0, none)
    Cascade,         \* BOOLEAN: FALSE = ablation (#28124, #25525): no forwarding
    KnownOnlyOnGrad, \* BOOLEAN: ablation: known workers only for grad messages
    NestingUnchecked,\* BOOLEAN: ablation: newContext does not refuse a nested context
    BackwardMode,    \* "off" | "FAST" | "Drain" | "Echo"
    UnusedSends,     \* BOOLEAN: an RPC's output may not reach the loss
    MaxPasses,       \* backward passes a context may run
    ErrorWorkers,    \* workers whose backward functions may raise
    LateCalls,       \* BOOLEAN: backward / get_gradients may be called after the block exited
    UncheckedIds     \* ablation: workers whose counters overflow unchecked

VARIABLES
    nextCtx,   \* [Workers -> Nat]: next_context_id_ (low bits)
    nextMsg,   \* [Workers -> Nat]: next_autograd_message_id_ (low bits)
    ctxs,      \* [Workers -> SUBSET CtxIds]: keys of the container's map
    cur,       \* [Workers -> [Threads -> CtxIds \cup {None}]]: each thread's current_context_id_
    known,     \* [Workers -> SUBSET (CtxIds \X Workers)]: <<c, x>>: x in knownWorkerIds_ of c
    sends,     \* [Workers -> SUBSET SendRec]: sendAutogradFunctions_ (and their next edges)
    recvs,     \* [Workers -> SUBSET RecvRec]: recvAutogradFunctions_
    handlers,  \* set of HandlerRec: requests being processed under the guard
    pending,   \* [Workers -> SUBSET (CtxIds \X MsgIds)]: the application threads' futures
    detached,  \* [Workers -> SUBSET (CtxIds \X MsgIds)]: futures of nested calls no UDF awaits
    net,       \* set of MsgRec: messages in flight (retry copies are distinct records)
    tomb,      \* [Workers -> SUBSET CtxIds]: Reference: ids released here or cleaned up;
               \* under Horizon a record [ids, hz]: those ids, and per creator x the newest
               \* horizon <<n, open>> of x the worker heard (every id of x below n but those
               \* in open is dead); a record, not a new variable, so that the models without
               \* Horizon keep their state space, figures and counterexamples
    released,  \* history: <<w, c>>: w erased c at least once
    late,      \* history: <<c, "error"|"found">>: a call with c after its block exited
    alive,     \* [Workers -> BOOLEAN]
    execd,     \* [Workers -> SUBSET (CtxIds \X Fns)]: root and send functions the graph task ran
    fired,     \* [Workers -> SUBSET (CtxIds \X MsgIds)]: recv functions the graph task ran
               \* (apart from execd: after a self-RPC both of a message id live on one worker)
    grads,     \* [Workers -> SUBSET (CtxIds \X Nat \X Fns)]: gradient contributions
               \* accumulated into the worker's leaf (accumulatedGrads_): <<c, pass, fn>>
    bstate,    \* [Workers -> SUBSET (CtxIds \X Nat \X TaskStates)]: the latest graph task
               \* of each context (its pass and state; "run"/"err": initializedContextIds_)
    results,   \* history: <<c, pass, "done"|"fail">>: what the creator's backward call returned
    freed,     \* contexts whose graph a pass without retain_graph has freed
    outst,     \* [Workers -> SUBSET (CtxIds \X MsgIds)]: outStandingRpcs_ (FAST, Drain)
    awaiting,  \* [Workers -> SUBSET (CtxIds \X Workers \X MsgIds)]: backward requests
               \* whose answer waits for the graph task (FAST: the first; Drain: all)
    parent,    \* [Workers -> SUBSET (CtxIds \X Workers)]: Echo: the flood's parent
    echoWait   \* [Workers -> SUBSET (CtxIds \X Workers)]: Echo: children not yet done

vars == <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending, detached, net,
          tomb, released, late, alive, execd, fired, grads, bstate, results, freed, outst,
          awaiting, parent, echoWait>>
bwdVars == <<execd, fired, grads, bstate, results, freed, outst, awaiting, parent, echoWait>>
taskVars == <<outst, awaiting, parent, echoWait>>

-----------------------------------------------------------------------------
(* Identifiers, records and messages.  Files are under                      *)
(* torch/csrc/distributed/ in torch 2.13.                                   *)

None == <<>>                  \* no context (current_context_id_ = -1), no message id
NoWorker == -1
RootFn == <<-1, 0>>           \* the graph root (the loss) among a context's functions
TaskStates == {"run", "err", "done", "fail"}
Reference == Variant = "Reference"
Fixed(f) == Reference /\ f \notin RefAblations
\* Tombstones bounded by horizons (issue 28 section 7; see Covered below):
\* definitions a model overrides in its cfg (`Horizon = TRUE`), so models
\* without the scheme keep their constants.
Horizon == FALSE
HorizonOpen == TRUE
NoHorizon == <<0, {}>>
\* The parts of the Echo backward, removable the same way: "zeroDead" (a
\* recv function nothing consumes, or one of a failed graph task, fires a
\* zero gradient), "flood" (the BACKWARD_START flood and its
\* acknowledgements), "ackErrors" (an acknowledgement carries its subtree's
\* outcome).
EchoPart(f) == BackwardMode = "Echo" /\ f \notin RefAblations
\* The shapes real programs take beyond the spec's first rounds (issue 26
\* section 4; docs/divergences.md 64 lists them): definitions a model, or a
\* trace's header, overrides in its cfg (`ForwardAfterPass = TRUE`), FALSE by
\* default so that the models without them keep their state spaces.
\*  ForwardAfterPass  (a) the block's thread calls again once its pass is over
\*                    (a DistributedOptimizer.step inside the block);
\*  StoredValues      (b) a UDF returns a value an earlier request of the
\*                    context stored on its worker (`remote`, then `to_here`);
\*  UdfErrors         (c) a UDF raises by itself (no nested call failed);
\*  ReportedDeaths    (e) a worker's death is taken when a survivor reports it
\*                    (PeerDied: a dead worker logs nothing).
ForwardAfterPass == FALSE
StoredValues == FALSE
UdfErrors == FALSE
ReportedDeaths == FALSE

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
\* the gradient is non-zero.  BWD_RESP: flag = ok.  BWD_START, BWD_ACK: Echo
\* (BWD_ACK: flag = the subtree's pass is ok).  pass: the backward pass a
\* BWD_* message belongs to (for the model's accounting; torch's messages
\* carry none), 0 otherwise.  dup: 0 = first attempt, 1 = retried, 2 = the
\* retry's copy.
Msg(t, c, m, rq, s, d, f) ==
    [type |-> t, ctx |-> c, mid |-> m, req |-> rq, src |-> s, dst |-> d, flag |-> f,
     trig |-> NoWorker, pass |-> 0, dup |-> 0]
BwdMsg(t, c, m, p, s, d, f) == [Msg(t, c, m, None, s, d, f) EXCEPT !.pass = p]
\* Horizon: a cleanup also carries hz, its creator's horizon (HorizonOf).
CleanupMsg(c, s, d, tr, hz) ==
    IF Horizon
    THEN [type |-> "CLEANUP", ctx |-> c, mid |-> None, req |-> None, src |-> s, dst |-> d,
          flag |-> TRUE, trig |-> tr, pass |-> 0, dup |-> 0, hz |-> hz]
    ELSE [type |-> "CLEANUP", ctx |-> c, mid |-> None, req |-> None, src |-> s, dst |-> d,
          flag |-> TRUE, trig |-> tr, pass |-> 0, dup |-> 0]

KnownOf(w, c) == {e[2] : e \in {x \in known[w] : x[1] = c}}
SendsOf(w, c) == {s \in sends[w] : s.ctx = c}
RecvsOf(w, c) == {r \in recvs[w] : r.ctx = c}
ExecdOf(w, c) == {e[2] : e \in {x \in execd[w] : x[1] = c}}
FiredOf(w, c) == {e[2] : e \in {x \in fired[w] : x[1] = c}}
Started(w, c) == \E e \in bstate[w] : e[1] = c
Task(w, c) == {e \in bstate[w] : e[1] = c}            \* at most one element
Running(w, c) == \E e \in Task(w, c) : e[3] \in {"run", "err"}
TaskIn(w, c, s) == \E e \in Task(w, c) : e[3] = s
PassOf(w, c) == IF Task(w, c) = {} THEN 0 ELSE (CHOOSE e \in Task(w, c) : TRUE)[2]
HandlersOf(w, c) == {h \in handlers : h.w = w /\ h.ctx = c}
IsRoot(w, c) == <<c, RootFn>> \in execd[w]
RootRunning(w, c) == Running(w, c) /\ IsRoot(w, c)
\* (a) The block's thread may call again under c once c's pass on w is over
\* (ForwardAfterPass): a DistributedOptimizer.step, or any RPC after backward
\* returned.  Never while a pass runs here (the thread is in backward).
AfterPass(w, c) == ForwardAfterPass /\ Started(w, c) /\ ~Running(w, c)
\* The passes of c its creator has finished (one result per backward call).
Finished(c) == {e \in results : e[1] = c}

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
\* (a) An answer the application receives once a pass of c has started on w
\* is one to a call made after the pass (DistEngineExecute waits for every
\* answer: ForwardAfterPass): the loss of the passes already run cannot use
\* it, so its recv function is not the root's, whatever LossChoices says (the
\* graph those passes had to reach, which GradientExactlyOnceInv recomputes
\* from the current graph, stays theirs).  "passLoss" in RefAblations drops
\* the rule, to show the invariant notices (MCDistAutograd_afterPassLoss).
AnswerLossChoices(w, msg) ==
    IF /\ <<msg.ctx, msg.req>> \in pending[w] /\ \E e \in bstate[w] : e[1] = msg.ctx
       /\ "passLoss" \notin RefAblations
    THEN {FALSE} ELSE LossChoices

\* The ids a tombstone for c covers: c itself, or (Watermark) every id of
\* c's creator up to c's (one number per creator: "every id below n is dead").
Tombs(c) ==
    IF Watermark THEN {x \in CtxIds : x[1] = c[1] /\ x[2] <= c[2]} ELSE {c}
\* The Horizon scheme (issue 28, section 7): tombstones bounded.  A set of
\* every released id grows by one per context; a watermark per creator is
\* unsound with two threads (MCDistAutograd_refWatermark).  Instead each
\* cleanup carries its creator's horizon at the release, <<nextCtx, the
\* creator's contexts still open>>: every id below the counter that is not
\* open is dead, and stays dead.  A worker keeps the newest horizon of each
\* creator (the larger counter; equal counters: the smaller open set) and drops
\* the tombstones it covers, so what it remembers per creator is at most one
\* open context per thread (HorizonBoundInv), and explicit tombstones are
\* left only for contexts of crashed creators (TombBoundInv).  HorizonOpen =
\* FALSE is the ablation "every id below the counter is dead" (the low
\* watermark without the open set), which refuses a live context
\* (MCDistAutograd_refHorizonNoOpen: RefusedOnlyDeadInv).
\* The horizon of w's own contexts after w erased c (ReleaseContext): its
\* counter and the contexts of its threads still open.
OwnHorizon(w, c) ==
    <<nextCtx[w], IF HorizonOpen THEN {x \in ctxs[w] \ {c} : Creator(x) = w} ELSE {}>>
\* The newer of two horizons of one creator (counters only grow; the open set
\* of a later horizon with the same counter is a subset of the earlier one's).
NewerHorizon(h, m) ==
    IF m[1] > h[1] THEN m ELSE IF m[1] = h[1] THEN <<h[1], h[2] \cap m[2]>> ELSE h
\* c is dead by the horizon hw (w's horizons, a function of the creators).
Covered(hw, c) ==
    /\ Horizon /\ Creator(c) \in Workers
    /\ c[2] < hw[Creator(c)][1] /\ c \notin hw[Creator(c)][2]
\* What w keeps of a set of tombstones once its horizons are hw.
Compact(S, hw) == {x \in S : ~Covered(hw, x)}
\* The explicit tombstones of a worker's tomb (a set, or under Horizon its ids).
TombIds(t) == IF Horizon THEN t.ids ELSE t
\* w's horizons (Horizon only; an empty tuple, never read, otherwise).
HorizonsOf(w) == IF Horizon THEN tomb[w].hz ELSE <<>>
\* w's tomb holding the tombstones S and the horizons hw, compacted.
NewTomb(S, hw) == IF Horizon THEN [ids |-> Compact(S, hw), hz |-> hw] ELSE S
Refused(w, c) ==
    Fixed("tombstone") /\ (c \in TombIds(tomb[w]) \/ (Horizon /\ Covered(tomb[w].hz, c)))
\* w's horizons after taking in the one a cleanup carries (its hz field).
Heard(w, msg) ==
    IF Horizon /\ Creator(msg.ctx) \in Workers
    THEN [tomb[w].hz EXCEPT ![Creator(msg.ctx)] = NewerHorizon(@, msg.hz)]
    ELSE HorizonsOf(w)

\* Erase c on w (eraseContextIdAndReset): the context and everything it held.
\* The graph task lives in the context, but PyTorch's DistEngine keeps the id
\* in initializedContextIds_ until cleanupBackwardPass: a release does not
\* end a running pass there (observed on torch 2.13: num_current_backward_passes
\* stays 1 on a worker whose context is gone).
EraseCtx(w, c, hw) ==
    /\ ctxs' = [ctxs EXCEPT ![w] = @ \ {c}]
    /\ known' = [known EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ sends' = [sends EXCEPT ![w] = {s \in @ : s.ctx # c}]
    /\ recvs' = [recvs EXCEPT ![w] = {r \in @ : r.ctx # c}]
    /\ execd' = [execd EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ fired' = [fired EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ grads' = [grads EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ bstate' = [bstate EXCEPT ![w] = {e \in @ : e[1] # c \/ (~Reference /\ e[3] = "run")}]
    /\ outst' = [outst EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ awaiting' = [awaiting EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ parent' = [parent EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ echoWait' = [echoWait EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ freed' = IF w = Creator(c) THEN freed \ {c} ELSE freed
    /\ released' = released \cup {<<w, c>>}
    /\ tomb' = IF Fixed("tombstone")
               THEN [tomb EXCEPT ![w] = NewTomb(TombIds(@) \cup Tombs(c), hw)]
               ELSE tomb

\* Where w's erase of c sends cleanups (sendReleaseContextRpc): every known
\* worker; the Reference skips the worker the cleanup came from and itself.
CascadeTo(w, c, from) ==
    KnownOf(w, c) \ (IF Fixed("skipSender") THEN {from, w} ELSE {})
\* Cleanups sent by sendReleaseContextRpc after w erased c, on behalf of trig.
\* hz: the horizon of c's creator the cleanups carry (Horizon).
CleanupsFor(w, c, to, tr, hz) == {CleanupMsg(c, w, x, tr, hz) : x \in to}
\* w's horizons after its release of its own c: its own horizon is its live state.
Released(w, c) ==
    IF Horizon THEN [tomb[w].hz EXCEPT ![w] = OwnHorizon(w, c)] ELSE HorizonsOf(w)
\* The horizon of c's creator as w knows it (what a cascade or orphan release sends on).
HorizonOf(hw, c) == IF Horizon /\ Creator(c) \in Workers THEN hw[Creator(c)] ELSE NoHorizon

-----------------------------------------------------------------------------
(* Initial state: init_rpc has called _init(rank) on every worker.          *)

Init ==
    /\ nextCtx = [w \in Workers |-> 0]
    /\ nextMsg = [w \in Workers |-> 0]
    /\ ctxs = [w \in Workers |-> {}]
    /\ cur = [w \in Workers |-> [t \in Threads |-> None]]
    /\ known = [w \in Workers |-> {}]
    /\ sends = [w \in Workers |-> {}]
    /\ recvs = [w \in Workers |-> {}]
    /\ handlers = {}
    /\ pending = [w \in Workers |-> {}]
    /\ detached = [w \in Workers |-> {}]
    /\ net = {}
    /\ tomb = [w \in Workers |-> IF Horizon THEN [ids |-> {}, hz |-> [x \in Workers |-> NoHorizon]]
                                 ELSE {}]
    /\ released = {}
    /\ late = {}
    /\ alive = [w \in Workers |-> TRUE]
    /\ execd = [w \in Workers |-> {}]
    /\ fired = [w \in Workers |-> {}]
    /\ grads = [w \in Workers |-> {}]
    /\ bstate = [w \in Workers |-> {}]
    /\ results = {}
    /\ freed = {}
    /\ outst = [w \in Workers |-> {}]
    /\ awaiting = [w \in Workers |-> {}]
    /\ parent = [w \in Workers |-> {}]
    /\ echoWait = [w \in Workers |-> {}]

-----------------------------------------------------------------------------
(* Application actions (no fairness: an application may stop at any time)   *)

(* `with dist_autograd.context()` enters on thread t: _new_context ->       *)
(* DistAutogradContainer::newContext (context/container.cpp).  Refused if   *)
(* the thread already has a context ("Already have an autograd context id  *)
(* for this thread"; NewContextRefused): one context per thread, no        *)
(* nesting.  Under NestingUnchecked (ablation) the check is gone and the    *)
(* new id overwrites the thread-local.                                      *)
NewContext(w, t) ==
    /\ alive[w]
    /\ cur[w][t] = None \/ NestingUnchecked
    /\ CanDraw(w, nextCtx[w], MaxCtx[w])
    /\ LET c == DrawId(w, nextCtx[w], MaxCtx[w])
       IN /\ nextCtx' = [nextCtx EXCEPT ![w] = @ + 1]
          /\ ctxs' = [ctxs EXCEPT ![w] = @ \cup {c}]
          /\ cur' = [cur EXCEPT ![w][t] = c]
    /\ UNCHANGED <<nextMsg, known, sends, recvs, handlers, pending, detached, net, tomb,
                   released, late, alive, bwdVars>>

(* The refusal itself: newContext raises and nothing changes (the thread    *)
(* keeps its context).  A step the implementation traces; TLC sees it as   *)
(* stuttering.                                                              *)
NewContextRefused(w, t) ==
    /\ alive[w]
    /\ ~NestingUnchecked
    /\ cur[w][t] # None
    /\ UNCHANGED vars

(* rpc_sync / rpc_async of a Python UDF inside thread t's block:            *)
(* sendMessageWithAutograd -> getMessageWithAutograd (autograd/utils.cpp),  *)
(* recording forced: a message id from w's counter, addSendRpcBackward if  *)
(* the tensors require grad, addKnownWorkerId(dst) (since PR #30914 for     *)
(* every wrapped message; dst may be w itself), FORWARD_AUTOGRAD_REQ.  The  *)
(* future is pending.                                                       *)
SendMessageWithAutograd(w, t, dst, grad) ==
    /\ alive[w]
    /\ <<w, dst>> \in Calls
    /\ cur[w][t] # None
    /\ cur[w][t] \in ctxs[w]                  \* currentContext() finds it
    /\ ~Started(w, cur[w][t])                 \* forward before the backward passes
       \/ AfterPass(w, cur[w][t])             \* ... or once they are over (ForwardAfterPass)
    /\ CanDraw(w, nextMsg[w], MaxMsg[w])
    /\ LET c == cur[w][t]
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
    /\ UNCHANGED <<nextCtx, ctxs, cur, recvs, handlers, detached, tomb, released, late,
                   alive, bwdVars>>

(* The UDF running on a handler thread calls on (nesting): the guard makes   *)
(* getMessageWithAutograd (autograd/utils.cpp) wrap it in the caller's      *)
(* context and record dst in THIS worker's known workers.  currentContext() *)
(* must find the context: if a cleanup erased it mid-request, the call      *)
(* raises ("Couldn't find autograd context data for current autograd        *)
(* context id") and the UDF can only fail (FinishForwardAutogradReq answers *)
(* with the error).  The UDF awaits the call (rpc_sync, or rpc_async then   *)
(* wait) or fires and forgets it (await = FALSE: the future is detached and *)
(* the UDF may return first).  Its inputs: the request's tensors and the    *)
(* answers of its earlier nested calls.                                     *)
NestedSendMessageWithAutograd(w, h, dst, grad, await) ==
    /\ alive[w]
    /\ h \in handlers /\ h.w = w /\ h.wait = None /\ ~h.err /\ h.called < MaxNested
    /\ <<w, dst>> \in NestCalls
    /\ h.ctx \in ctxs[w]
    /\ CanDraw(w, nextMsg[w], MaxMsg[w])
    /\ LET c == h.ctx
           m == DrawId(w, nextMsg[w], MaxMsg[w])
           inputs == IF BackwardMode = "off" THEN {}
                     ELSE (IF h.grad THEN {h.req} ELSE {}) \cup h.nr
       IN /\ nextMsg' = [nextMsg EXCEPT ![w] = @ + 1]
          /\ sends' = IF grad
                      THEN [sends EXCEPT ![w] = @ \cup
                              {[ctx |-> c, mid |-> m, dst |-> dst, in |-> inputs]}]
                      ELSE sends
          /\ known' = IF grad \/ ~KnownOnlyOnGrad
                      THEN [known EXCEPT ![w] = @ \cup {<<c, dst>>}] ELSE known
          /\ net' = net \cup {Msg("FWD_REQ", c, m, m, w, dst, grad)}
          /\ handlers' = (handlers \ {h}) \cup
                           {[h EXCEPT !.wait = IF await THEN m ELSE None, !.called = @ + 1,
                                      !.forgot = IF await THEN @ ELSE @ \cup {m}]}
          /\ detached' = IF await THEN detached
                         ELSE [detached EXCEPT ![w] = @ \cup {<<c, m>>}]
    /\ UNCHANGED <<nextCtx, ctxs, cur, recvs, pending, tomb, released, late, alive, bwdVars>>

(* (b) The UDF of handler h reads a value an earlier request of its context  *)
(* stored on this worker: `rpc.remote` keeps its UDF's result in the        *)
(* owner's RRef (OwnerRRef::setValue) and a later `to_here` (or a call      *)
(* taking the RRef, `rref.local_value()`) returns it, so this handler's     *)
(* result, and what it sends on, depend on the recv functions that value    *)
(* reached: the remote request's own, or its nested answers'.  Its inputs   *)
(* (nr: what FinishForwardAutogradReq and NestedSendMessageWithAutograd     *)
(* feed the new send function from) gain r, so the gradient of the fetched  *)
(* value flows back through the request that stored it (StoredValues).      *)
FetchStoredValue(w, h, r) ==
    /\ StoredValues
    /\ alive[w]
    /\ h \in handlers /\ h.w = w /\ h.wait = None /\ ~h.err
    /\ h.ctx \in ctxs[w]
    /\ r \in RecvsOf(w, h.ctx) /\ r.mid # h.req /\ r.mid \notin h.nr
    /\ handlers' = (handlers \ {h}) \cup {[h EXCEPT !.nr = @ \cup {r.mid}]}
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, pending, detached, net,
                   tomb, released, late, alive, bwdVars>>

(* (c) The UDF of handler h raises by itself (a user exception; no nested   *)
(* call failed): processForwardAutogradReq's continuation answers with the  *)
(* error (FinishForwardAutogradReq, the handler marked failed, as a failed  *)
(* nested call marks it), and the caller's future fails.  A UDF that has    *)
(* raised calls nothing more (UdfErrors).                                   *)
UdfRaises(w, h) ==
    /\ UdfErrors
    /\ alive[w]
    /\ h \in handlers /\ h.w = w /\ h.wait = None /\ ~h.err
    /\ handlers' = (handlers \ {h}) \cup {[h EXCEPT !.err = TRUE]}
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, pending, detached, net,
                   tomb, released, late, alive, bwdVars>>

(* `with` exits on thread t: _release_context(id) ->                        *)
(* DistAutogradContainer::releaseContext (context/container.cpp): the id    *)
(* must exist; snapshot knownWorkerIds_, erase, reset the calling thread's  *)
(* current id (eraseContextIdAndReset), sendReleaseContextRpc (fire and     *)
(* forget).  PyTorch does not wait for the block's RPCs (LateForward: it   *)
(* may exit with them in flight; otherwise the application awaited them or *)
(* they timed out).  The thread's own backward pass ran on this thread, so  *)
(* it is over.  Reference ("defer"): the release also waits for this        *)
(* worker's running handlers of the context (a nested call back to the     *)
(* creator, a self-RPC), as a cleanup does.                                 *)
ReleaseContext(w, t) ==
    /\ alive[w]
    /\ cur[w][t] # None
    /\ LET c == cur[w][t]
       IN /\ c \in ctxs[w]
          /\ LateForward \/ ~\E p \in pending[w] : p[1] = c
          /\ ~RootRunning(w, c)
          /\ Fixed("defer") => HandlersOf(w, c) = {}
          /\ EraseCtx(w, c, Released(w, c))
          /\ cur' = [cur EXCEPT ![w][t] = None]
          /\ net' = net \cup CleanupsFor(w, c, CascadeTo(w, c, w), w,
                                         HorizonOf(Released(w, c), c))
    /\ UNCHANGED <<nextCtx, nextMsg, handlers, pending, detached, late, alive, results>>

(* dist_autograd.backward(context_id, [loss], retain_graph) ->              *)
(* DistEngine::execute (engine/dist_engine.cpp) on thread t, inside the     *)
(* block, once the results the loss needs have arrived: retrieveContext,    *)
(* then (initializedContextIds_ must not hold the id: TORCH_INTERNAL_ASSERT) *)
(* the graph task (computeDependencies over the root and every send        *)
(* function; clearOutstandingRpcs), the root runs and feeds the leaf.  A    *)
(* pass without retain_graph frees the graph: the next pass raises at once  *)
(* ("Trying to backward through the graph a second time") and adds         *)
(* nothing.  Echo also starts the BACKWARD_START flood.                     *)
DistEngineExecute(w, t, retain) ==
    /\ BackwardMode # "off"
    /\ alive[w]
    /\ cur[w][t] # None
    /\ LET c == cur[w][t]
           p == Cardinality(Finished(c)) + 1
           to == KnownOf(w, c) \ {w}
       IN /\ c \in ctxs[w]
          /\ ~\E q \in pending[w] : q[1] = c
          /\ ~Running(w, c)
          /\ p <= MaxPasses
          /\ retain \in (IF p < MaxPasses THEN BOOLEAN ELSE {FALSE})
          /\ IF c \in freed
             THEN /\ bstate' = [bstate EXCEPT ![w] = {e \in @ : e[1] # c} \cup {<<c, p, "fail">>}]
                  /\ results' = results \cup {<<c, p, "fail">>}
                  /\ UNCHANGED <<execd, fired, grads, freed, taskVars, net>>
             ELSE /\ bstate' = [bstate EXCEPT ![w] = {e \in @ : e[1] # c} \cup {<<c, p, "run">>}]
                  /\ execd' = [execd EXCEPT ![w] = {e \in @ : e[1] # c} \cup {<<c, RootFn>>}]
                  /\ fired' = [fired EXCEPT ![w] = {e \in @ : e[1] # c}]
                  /\ grads' = [grads EXCEPT ![w] = @ \cup {<<c, p, RootFn>>}]
                  /\ freed' = IF retain THEN freed ELSE freed \cup {c}
                  /\ outst' = [outst EXCEPT ![w] = {e \in @ : e[1] # c}]
                  /\ awaiting' = [awaiting EXCEPT ![w] = {e \in @ : e[1] # c}]
                  /\ parent' = [parent EXCEPT ![w] = {e \in @ : e[1] # c}]
                  /\ IF EchoPart("flood")
                     THEN /\ echoWait' = [echoWait EXCEPT ![w] =
                                            {e \in @ : e[1] # c} \cup {<<c, x>> : x \in to}]
                          /\ net' = net \cup {BwdMsg("BWD_START", c, None, p, w, x, TRUE) : x \in to}
                     ELSE UNCHANGED <<echoWait, net>>
                  /\ UNCHANGED results
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   detached, tomb, released, late, alive>>

(* backward(c, ...) or get_gradients(c) called with the id of a context    *)
(* w's thread created and has left (#40880: e.g. in a callback of a future  *)
(* that completes after the block): both begin with                         *)
(* DistAutogradContainer::retrieveContext (context/container.cpp), which    *)
(* throws "Could not find autograd context with id" unless w holds the id.  *)
(* The outcome of the first such call per context is recorded; a found      *)
(* context would then run a pass, which the model does not follow.          *)
RetrieveContext(w, c) ==
    /\ LateCalls
    /\ alive[w]
    /\ Creator(c) = w /\ <<w, c>> \in released
    /\ ~\E e \in late : e[1] = c
    /\ late' = late \cup {<<c, IF c \in ctxs[w] THEN "found" ELSE "error">>}
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   detached, net, tomb, released, alive, bwdVars>>

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
                   detached, tomb, released, late, alive, bwdVars>>

(* The cleanup's 20 retries are exhausted (sendReleaseContextRpc's callback *)
(* in context/container.cpp logs "Could not release Dist Autograd Context   *)
(* on node ...").  The Reference retries until the        *)
(* destination acknowledges or is known to be dead.                        *)
LoseCleanupMsg(m) ==
    /\ LoseCleanup /\ ~Reference
    /\ m \in net /\ m.type = "CLEANUP"
    /\ net' = net \ {m}
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   detached, tomb, released, late, alive, bwdVars>>

(* The answers the agents give when a request meets a dead worker (its      *)
(* connections closed: Detect): the futures fail; Echo's failure detector   *)
(* answers a BACKWARD_START the dead worker will never acknowledge.         *)
ErrorAnswer(m) ==
    CASE m.type = "FWD_REQ" -> {Msg("RESP", m.ctx, None, m.req, m.dst, m.src, FALSE)}
      [] m.type = "BWD_REQ" -> {BwdMsg("BWD_RESP", m.ctx, m.mid, m.pass, m.dst, m.src, FALSE)}
      [] m.type = "BWD_START" -> {BwdMsg("BWD_ACK", m.ctx, None, m.pass, m.dst, m.src, FALSE)}
      [] OTHER -> {}

(* A worker dies with its container.  With Detect the RPC agents of the     *)
(* other workers (rpc/tensorpipe_agent.cpp) fail the futures of requests it *)
(* will never answer (in flight, being handled, or a backward request      *)
(* waiting for its graph task; Echo: the flood parent of a graph task still *)
(* running is told); the rest of what was sent to it is lost.  Without      *)
(* Detect (a worker that stops without closing its connections: SIGSTOP, a  *)
(* hung or partitioned host) nobody notices: only an RPC timeout ends those *)
(* futures.                                                                 *)
Crash(w) ==
    /\ w \in CrashWorkers
    /\ alive[w]
    /\ LET inflight == {m \in net : m.dst = w}
           failures ==
               UNION {ErrorAnswer(m) : m \in inflight}
               \cup {Msg("RESP", h.ctx, None, h.req, w, h.caller, FALSE) :
                       h \in {x \in handlers : x.w = w}}
               \cup {BwdMsg("BWD_RESP", e[1], e[3], PassOf(w, e[1]), w, e[2], FALSE) :
                       e \in awaiting[w]}
               \cup {BwdMsg("BWD_ACK", e[1], None, PassOf(w, e[1]), w, e[2], FALSE) :
                       e \in {x \in parent[w] : Running(w, x[1])}}
       IN net' = (net \ inflight) \cup (IF Detect THEN failures ELSE {})
    /\ alive' = [alive EXCEPT ![w] = FALSE]
    /\ ctxs' = [ctxs EXCEPT ![w] = {}]
    /\ cur' = [cur EXCEPT ![w] = [t \in Threads |-> None]]
    /\ known' = [known EXCEPT ![w] = {}]
    /\ sends' = [sends EXCEPT ![w] = {}]
    /\ recvs' = [recvs EXCEPT ![w] = {}]
    /\ pending' = [pending EXCEPT ![w] = {}]
    /\ detached' = [detached EXCEPT ![w] = {}]
    /\ handlers' = {h \in handlers : h.w # w}
    /\ execd' = [execd EXCEPT ![w] = {}]
    /\ fired' = [fired EXCEPT ![w] = {}]
    /\ grads' = [grads EXCEPT ![w] = {}]
    /\ bstate' = [bstate EXCEPT ![w] = {}]
    /\ outst' = [outst EXCEPT ![w] = {}]
    /\ awaiting' = [awaiting EXCEPT ![w] = {}]
    /\ parent' = [parent EXCEPT ![w] = {}]
    /\ echoWait' = [echoWait EXCEPT ![w] = {}]
    /\ UNCHANGED <<nextCtx, nextMsg, tomb, released, late, results, freed>>

(* (e) Survivor w's failure detector reports worker x dead (the RPC agent   *)
(* declares a peer dead once its connections closed: Detect).  A dead       *)
(* worker logs nothing, so a run's trace shows its death only through the   *)
(* survivors' reports (ReportedDeaths): the first report is x's Crash (what *)
(* Crash(x) does to the network and to x's state happens then, from the     *)
(* trace's point of view), a later one changes nothing.  What each survivor *)
(* does about the death is the spec's own steps that follow Crash(x): the   *)
(* failed answers it takes (ProcessBackwardAck, PollTimeoutRpcs), the       *)
(* orphans it releases (ReleaseOrphanedContext).                            *)
PeerDied(w, x) ==
    /\ ReportedDeaths /\ Detect
    /\ x \in CrashWorkers /\ x # w
    /\ alive[w]
    /\ IF alive[x] THEN Crash(x) ELSE UNCHANGED vars

(* c's graph task on w fails: FAST and Drain end it (DistEngine's error    *)
(* path: cleanupBackwardPass, the waiting requests answered with the error, *)
(* "Error on Node w: ..."; on the root backward raises); Echo marks it      *)
(* failed ("err") and lets it drain, so the outcome travels up the flood.  *)
(* consumed: the message whose handling failed it (taken from the net).     *)
FailTask(w, c, consumed) ==
    LET p == PassOf(w, c)
        waiting == {e \in awaiting[w] : e[1] = c}
    IN IF BackwardMode = "Echo"
       THEN /\ bstate' = [bstate EXCEPT ![w] = (@ \ Task(w, c)) \cup {<<c, p, "err">>}]
            /\ net' = net \ consumed
            /\ UNCHANGED <<results, awaiting, outst>>
       ELSE /\ bstate' = [bstate EXCEPT ![w] = (@ \ Task(w, c)) \cup {<<c, p, "fail">>}]
            /\ results' = IF IsRoot(w, c) THEN results \cup {<<c, p, "fail">>} ELSE results
            /\ awaiting' = [awaiting EXCEPT ![w] = @ \ waiting]
            /\ outst' = [outst EXCEPT ![w] = {e \in @ : e[1] # c}]
            /\ net' = (net \ consumed) \cup
                      {BwdMsg("BWD_RESP", c, e[3], p, w, e[2], FALSE) : e \in waiting}

(* A backward function of c's graph task on w raises (a custom Function's   *)
(* backward, a hook, a shape check): engine_.thread_on_exception and        *)
(* exit_on_error mark the graph task failed (engine/dist_engine.cpp).       *)
BackwardError(w, c) ==
    /\ w \in ErrorWorkers
    /\ alive[w]
    /\ c \in ctxs[w]
    /\ TaskIn(w, c, "run")
    /\ FailTask(w, c, {})
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   detached, tomb, released, late, alive, execd, fired, grads, freed, parent,
                   echoWait>>

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
       IN IF Refused(w, c)
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
                      wait |-> None, called |-> 0, nr |-> {}, forgot |-> {}, err |-> FALSE]}
    /\ UNCHANGED <<nextCtx, nextMsg, cur, known, sends, pending, detached, tomb, released,
                   late, alive, bwdVars>>

(* The UDF has returned: the continuation of processForwardAutogradReq      *)
(* (rpc/request_callback_no_python.cpp), again under the guard, wraps the   *)
(* response with                                                            *)
(* getMessageWithAutograd(fromWorkerId, response, FORWARD_AUTOGRAD_RESP):   *)
(* unwrapped if the result does not require grad; otherwise a message id,  *)
(* a send function and the caller recorded as a known worker -- which needs *)
(* currentContext(), so a context erased mid-request turns the response    *)
(* into an error.  Nested calls fired and forgotten may still be running;   *)
(* the Reference answers only once they are over ("joinNested": the RPC     *)
(* layer awaits every future a UDF created under the guard).                *)
FinishForwardAutogradReq(w, h, respGrad) ==
    /\ alive[w]
    /\ h \in handlers /\ h.w = w /\ h.wait = None
    /\ Fixed("joinNested") => \A m \in h.forgot : <<h.ctx, m>> \notin detached[w]
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
    /\ UNCHANGED <<nextCtx, ctxs, cur, recvs, pending, detached, tomb, released, late, alive,
                   bwdVars>>

\* The futures of w waiting for the answer to request rq of context c.
AppWaits(w, c, rq) == <<c, rq>> \in pending[w]
DetachedWaits(w, c, rq) == <<c, rq>> \in detached[w]
HandlersWaiting(w, rq) == {h \in handlers : h.w = w /\ h.wait = rq}
SomeoneWaits(w, c, rq) ==
    AppWaits(w, c, rq) \/ DetachedWaits(w, c, rq) \/ HandlersWaiting(w, rq) # {}

(* The future of a wrapped request completes with a wrapped response:       *)
(* deserializeResponse (rpc/utils.cpp) calls addRecvRpcBackward, hence      *)
(* getOrCreateContext ON THE CALLER, which re-creates a context the caller  *)
(* has already released (#38513).  Reference: a released id's autograd part *)
(* is dropped and the value is delivered detached.  The caller is an        *)
(* application thread (its future), a handler waiting on a nested call, or  *)
(* a nested call nobody awaits.  loss: whether the application's loss uses  *)
(* this output.                                                             *)
DeserializeForwardAutogradResp(w, msg, loss) ==
    /\ alive[w]
    /\ msg \in net /\ msg.type = "FWD_RESP" /\ msg.dst = w
    /\ loss \in AnswerLossChoices(w, msg)
    /\ LET c == msg.ctx
           drop == Refused(w, c)
           app == AppWaits(w, c, msg.req)
           det == DetachedWaits(w, c, msg.req)
           hs == HandlersWaiting(w, msg.req)
       IN /\ app \/ det \/ hs # {}
          /\ app \/ loss                      \* only the application has a loss
          /\ net' = net \ {msg}
          /\ ctxs' = IF drop THEN ctxs ELSE [ctxs EXCEPT ![w] = @ \cup {c}]
          /\ recvs' = IF drop THEN recvs
                      ELSE [recvs EXCEPT ![w] = @ \cup
                              {[ctx |-> c, mid |-> msg.mid, src |-> msg.src, loss |-> app /\ loss]}]
          /\ pending' = [pending EXCEPT ![w] = @ \ {<<c, msg.req>>}]
          /\ detached' = [detached EXCEPT ![w] = @ \ {<<c, msg.req>>}]
          /\ handlers' = IF app \/ det THEN handlers
                         ELSE {IF h \in hs
                               THEN [h EXCEPT !.wait = None,
                                              !.nr = IF drop THEN @ ELSE @ \cup {msg.mid}]
                               ELSE h : h \in handlers}
    /\ UNCHANGED <<nextCtx, nextMsg, cur, known, sends, tomb, released, late, alive, bwdVars>>

(* The future completes with an unwrapped value or an exception             *)
(* (deserializeResponse, rpc/utils.cpp; a nested call's exception makes the *)
(* UDF fail).                                                               *)
DeserializeResponse(w, msg) ==
    /\ alive[w]
    /\ msg \in net /\ msg.type = "RESP" /\ msg.dst = w
    /\ LET app == AppWaits(w, msg.ctx, msg.req)
           det == DetachedWaits(w, msg.ctx, msg.req)
           hs == HandlersWaiting(w, msg.req)
       IN /\ app \/ det \/ hs # {}
          /\ net' = net \ {msg}
          /\ pending' = [pending EXCEPT ![w] = @ \ {<<msg.ctx, msg.req>>}]
          /\ detached' = [detached EXCEPT ![w] = @ \ {<<msg.ctx, msg.req>>}]
          /\ handlers' = IF app \/ det THEN handlers
                         ELSE {IF h \in hs THEN [h EXCEPT !.wait = None, !.err = ~msg.flag]
                               ELSE h : h \in handlers}
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, tomb, released, late,
                   alive, bwdVars>>

(* TensorPipeAgent's timeout poller (pollTimeoutRpcs, rpc/tensorpipe_agent.cpp) *)
(* fails the future of request m of worker w: "RPC ran for more than set    *)
(* timeout".  It may fire at any time (a slow callee looks like a dead one); *)
(* the callee keeps running, and its late answer is dropped (Discard).      *)
PollTimeoutRpcs(w, m) ==
    /\ RpcTimeout
    /\ alive[w]
    /\ LET inApp == {p \in pending[w] : p[2] = m}
           inDet == {p \in detached[w] : p[2] = m}
           hs == HandlersWaiting(w, m)
       IN /\ inApp \cup inDet # {} \/ hs # {}
          /\ pending' = [pending EXCEPT ![w] = @ \ inApp]
          /\ detached' = [detached EXCEPT ![w] = @ \ inDet]
          /\ handlers' = {IF h \in hs THEN [h EXCEPT !.wait = None, !.err = TRUE] ELSE h
                            : h \in handlers}
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, net, tomb, released,
                   late, alive, bwdVars>>

(* CLEANUP_AUTOGRAD_CONTEXT_REQ -> processCleanupAutogradContextReq         *)
(* (rpc/request_callback_no_python.cpp) -> DistAutogradContainer::          *)
(* releaseContextIfPresent (context/container.cpp): absent -> nothing, and  *)
(* nothing forwarded; present -> erase and send a cleanup to every known    *)
(* worker (the cascade; each incarnation forwards at most once).  The       *)
(* response is sent at once (not modelled: nothing waits for it).          *)
(* Reference: waits while a handler of c runs here ("defer"); remembers the *)
(* id even when absent ("tombstone"); sends neither back nor to itself     *)
(* ("skipSender").                                                          *)
ProcessCleanupAutogradContextReq(w, msg) ==
    /\ alive[w]
    /\ msg \in net /\ msg.type = "CLEANUP" /\ msg.dst = w
    /\ Fixed("defer") => HandlersOf(w, msg.ctx) = {}
    /\ LET c == msg.ctx
           to == IF ~Cascade THEN {} ELSE CascadeTo(w, c, msg.src)
       IN IF c \in ctxs[w]
          THEN /\ EraseCtx(w, c, Heard(w, msg))
               /\ net' = (net \ {msg}) \cup
                          CleanupsFor(w, c, to, msg.src, HorizonOf(Heard(w, msg), c))
          ELSE /\ net' = net \ {msg}
               /\ tomb' = IF Fixed("tombstone")
                          THEN [tomb EXCEPT ![w] =
                                  NewTomb(TombIds(@) \cup Tombs(c), Heard(w, msg))]
                          ELSE tomb
               /\ UNCHANGED <<ctxs, known, sends, recvs, released, execd, fired, grads, bstate,
                              freed, taskVars>>
    /\ UNCHANGED <<nextCtx, nextMsg, cur, handlers, pending, detached, late, alive, results>>

(* Reference (#26379's proposal): a holder whose failure detector reports   *)
(* the creator dead releases the context (after its handlers of it) and     *)
(* cascades the cleanup as releaseContextIfPresent does.                    *)
ReleaseOrphanedContext(w, c) ==
    /\ Fixed("orphan") /\ Detect
    /\ alive[w]
    /\ c \in ctxs[w]
    /\ Creator(c) \in Workers /\ ~alive[Creator(c)]
    /\ HandlersOf(w, c) = {}
    /\ EraseCtx(w, c, HorizonsOf(w))
    /\ net' = net \cup CleanupsFor(w, c, CascadeTo(w, c, w), w, HorizonOf(HorizonsOf(w), c))
    /\ UNCHANGED <<nextCtx, nextMsg, cur, handlers, pending, detached, late, alive, results>>

(* The agent disposes of a message nobody will handle: one sent to a dead   *)
(* worker (with Detect a request's future fails, ErrorAnswer; anything else *)
(* is lost), or an answer whose future has already timed out (dropped).    *)
Discard(msg) ==
    /\ msg \in net
    /\ \/ /\ ~alive[msg.dst]
          /\ net' = (net \ {msg}) \cup (IF Detect THEN ErrorAnswer(msg) ELSE {})
       \/ /\ alive[msg.dst]
          /\ msg.type \in {"FWD_RESP", "RESP"}
          /\ ~SomeoneWaits(msg.dst, msg.ctx, msg.req)
          /\ net' = net \ {msg}
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   detached, tomb, released, late, alive, bwdVars>>

-----------------------------------------------------------------------------
(* Backward                                                                 *)

(* The graph task of c on w is over.  FAST: every send function executed   *)
(* (the root too, on the root), every recv function with a consumer fired,  *)
(* and the outstanding RPCs answered.  Echo: every function executed,        *)
(* including recv functions nothing consumes (a send function whose recv   *)
(* function died with its worker counts as executed: the failure detector), *)
(* and every flood child done.  Drain: nothing ready and no RPC outstanding *)
(* (unexecuted sends do not hold it up).                                    *)
ReadyRecv(w, c, r) ==
    /\ r.mid \notin FiredOf(w, c)
    /\ \/ /\ Consumers(w, c, r) \subseteq ExecdOf(w, c)
          /\ Consumers(w, c, r) # {} \/ EchoPart("zeroDead")
       \/ TaskIn(w, c, "err") /\ EchoPart("zeroDead")
NoOutstanding(w, c) == ~\E e \in outst[w] : e[1] = c
\* Reference ("passTag"): a backward message of pass p is stale on w if w has
\* finished pass p of c, or is on a later one.
StalePass(w, c, p) ==
    /\ Fixed("passTag")
    /\ Task(w, c) # {}
    /\ \/ p < PassOf(w, c)
       \/ p = PassOf(w, c) /\ ~Running(w, c)
Complete(w, c) ==
    CASE BackwardMode = "FAST" ->
            /\ {s.mid : s \in SendsOf(w, c)} \subseteq ExecdOf(w, c)
            /\ ~\E r \in RecvsOf(w, c) : ReadyRecv(w, c, r)
            /\ NoOutstanding(w, c)
      [] BackwardMode = "Echo" ->
            /\ {s.mid : s \in {x \in SendsOf(w, c) : alive[x.dst] \/ ~Detect}}
                 \subseteq ExecdOf(w, c)
            /\ {r.mid : r \in RecvsOf(w, c)} \subseteq FiredOf(w, c)
            /\ IsRoot(w, c) \/ (\E e \in parent[w] : e[1] = c) \/ ~EchoPart("flood")
            /\ ~\E e \in echoWait[w] : e[1] = c
      [] OTHER -> \* Drain
            /\ ~\E r \in RecvsOf(w, c) : ReadyRecv(w, c, r)
            /\ NoOutstanding(w, c)

(* RecvRpcBackward::apply (functions/recvrpc_backward.cpp): once every      *)
(* consumer has delivered its gradient, send BACKWARD_AUTOGRAD_REQ with it  *)
(* to the worker that sent the tensors and record the future as an         *)
(* outstanding RPC.  The gradient is non-zero iff some consumer's was (and  *)
(* the graph task has not failed).  FAST and Drain never run a recv         *)
(* function nothing consumes; Echo runs it at once with a zero gradient.   *)
RecvRpcBackwardApply(w, c, r) ==
    /\ alive[w]
    /\ Running(w, c)
    /\ r \in RecvsOf(w, c)
    /\ ReadyRecv(w, c, r)
    /\ LET p == PassOf(w, c)
           real == TaskIn(w, c, "run") /\ \E f \in Consumers(w, c, r) : <<c, p, f>> \in grads[w]
       IN /\ fired' = [fired EXCEPT ![w] = @ \cup {<<c, r.mid>>}]
          /\ net' = net \cup {BwdMsg("BWD_REQ", c, r.mid, p, w, r.src, real)}
          /\ outst' = IF BackwardMode = "Echo" THEN outst
                      ELSE [outst EXCEPT ![w] = @ \cup {<<c, r.mid>>}]
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   detached, tomb, released, late, alive, execd, grads, bstate, results, freed,
                   awaiting, parent, echoWait>>

(* BACKWARD_AUTOGRAD_REQ -> processBackwardAutogradReq                      *)
(* (rpc/request_callback_no_python.cpp): retrieveContext and                *)
(* retrieveSendFunction (both throw: the answer is an error, in every      *)
(* mode), then DistEngine::executeSendFunctionAsync (engine/dist_engine.cpp): *)
(* a request finding no graph task of the context (initializedContextIds_) *)
(* starts one (dependencies over every send function) and, in FAST mode, is *)
(* answered only when the graph task and this worker's outstanding RPCs are *)
(* done; later requests are answered at once.  The send function runs and  *)
(* feeds the leaf.  Drain answers every request on draining; Echo answers   *)
(* none (the flood tracks completion).  Nothing tells a request of an older *)
(* pass from one of the current pass (torch's messages carry no pass); the  *)
(* Reference's do ("passTag"), and a request of a pass this worker has      *)
(* already finished, or of an older one, is dropped.                        *)
ProcessBackwardAutogradReq(w, msg) ==
    /\ alive[w]
    /\ msg \in net /\ msg.type = "BWD_REQ" /\ msg.dst = w
    /\ LET c == msg.ctx
           found == c \in ctxs[w] /\ \E s \in SendsOf(w, c) : s.mid = msg.mid
           first == ~Running(w, c)
           p == IF first THEN msg.pass ELSE PassOf(w, c)
           applies == msg.flag /\ (first \/ TaskIn(w, c, "run"))
       IN IF found /\ StalePass(w, c, msg.pass)
          THEN /\ net' = net \ {msg}
               /\ UNCHANGED <<execd, fired, grads, bstate, taskVars>>
          ELSE IF ~found
          THEN /\ net' = (net \ {msg}) \cup
                         {BwdMsg("BWD_RESP", c, msg.mid, msg.pass, w, msg.src, FALSE)}
               /\ UNCHANGED <<execd, fired, grads, bstate, taskVars>>
          ELSE /\ execd' = [execd EXCEPT ![w] =
                              IF first THEN {e \in @ : e[1] # c} \cup {<<c, msg.mid>>}
                              ELSE @ \cup {<<c, msg.mid>>}]
               /\ fired' = IF first THEN [fired EXCEPT ![w] = {e \in @ : e[1] # c}] ELSE fired
               /\ grads' = IF applies THEN [grads EXCEPT ![w] = @ \cup {<<c, msg.pass, msg.mid>>}]
                           ELSE grads
               /\ bstate' = IF first
                            THEN [bstate EXCEPT ![w] = (@ \ Task(w, c)) \cup {<<c, p, "run">>}]
                            ELSE bstate
               /\ outst' = IF first THEN [outst EXCEPT ![w] = {e \in @ : e[1] # c}] ELSE outst
               /\ parent' = IF first THEN [parent EXCEPT ![w] = {e \in @ : e[1] # c}] ELSE parent
               /\ echoWait' = IF first THEN [echoWait EXCEPT ![w] = {e \in @ : e[1] # c}]
                              ELSE echoWait
               /\ CASE BackwardMode = "FAST" ->
                         IF first
                         THEN /\ awaiting' = [awaiting EXCEPT ![w] =
                                                {e \in @ : e[1] # c} \cup {<<c, msg.src, msg.mid>>}]
                              /\ net' = net \ {msg}
                         ELSE /\ net' = (net \ {msg}) \cup
                                        {BwdMsg("BWD_RESP", c, msg.mid, msg.pass, w, msg.src, TRUE)}
                              /\ UNCHANGED awaiting
                    [] BackwardMode = "Drain" ->
                         /\ awaiting' = [awaiting EXCEPT ![w] = @ \cup {<<c, msg.src, msg.mid>>}]
                         /\ net' = net \ {msg}
                    [] OTHER ->
                         /\ net' = net \ {msg}
                         /\ UNCHANGED awaiting
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   detached, tomb, released, late, alive, results, freed>>

(* BACKWARD_AUTOGRAD_RESP completes an outstanding RPC's future             *)
(* (DistAutogradContext::addOutstandingRpc's callback, context/context.cpp; *)
(* deserializeResponse in rpc/utils.cpp); an error fails the graph task     *)
(* (FailTask), and the error travels on to whoever waits for it.  An answer *)
(* for a graph task that is over is ignored; one of an older pass is not   *)
(* told apart in PyTorch (its callback fails whatever graph task the       *)
(* context holds now), while the Reference ignores it.                     *)
ProcessBackwardAutogradResp(w, msg) ==
    /\ alive[w]
    /\ msg \in net /\ msg.type = "BWD_RESP" /\ msg.dst = w
    /\ LET c == msg.ctx
           stale == Reference /\ msg.pass # PassOf(w, c)
       IN IF msg.flag \/ ~TaskIn(w, c, "run") \/ c \notin ctxs[w] \/ stale
          THEN /\ net' = net \ {msg}
               /\ outst' = [outst EXCEPT ![w] = @ \ {<<c, msg.mid>>}]
               /\ UNCHANGED <<bstate, results, awaiting>>
          ELSE FailTask(w, c, {msg})
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   detached, tomb, released, late, alive, execd, fired, grads, freed, parent,
                   echoWait>>

(* DistEngine::cleanupBackwardPass (engine/dist_engine.cpp) once the graph  *)
(* task is over: on the root dist_autograd.backward returns (or, Echo, a    *)
(* failed pass raises); elsewhere the future of the first request completes *)
(* (FAST) or every waiting request is answered (Drain, the task staying     *)
(* open), or the flood parent is told, with the outcome (Echo).             *)
CleanupBackwardPass(w, c) ==
    /\ alive[w]
    /\ c \in ctxs[w]
    /\ Running(w, c)
    /\ Complete(w, c)
    /\ LET p == PassOf(w, c)
           ok == TaskIn(w, c, "run")
           outcome == IF ok THEN "done" ELSE "fail"
           waiting == {e \in awaiting[w] : e[1] = c}
           answers == {BwdMsg("BWD_RESP", c, e[3], p, w, e[2], TRUE) : e \in waiting}
       IN CASE BackwardMode = "Drain" /\ ~IsRoot(w, c) ->
                 /\ waiting # {}
                 /\ awaiting' = [awaiting EXCEPT ![w] = @ \ waiting]
                 /\ net' = net \cup answers
                 /\ UNCHANGED <<bstate, results>>
            [] BackwardMode = "Echo" ->
                 /\ bstate' = [bstate EXCEPT ![w] = (@ \ Task(w, c)) \cup {<<c, p, outcome>>}]
                 /\ results' = IF IsRoot(w, c) THEN results \cup {<<c, p, outcome>>} ELSE results
                 /\ net' = net \cup {BwdMsg("BWD_ACK", c, None, p, w, e[2],
                                            ok \/ ~EchoPart("ackErrors")) :
                                       e \in {x \in parent[w] : x[1] = c}}
                 /\ UNCHANGED awaiting
            [] OTHER ->
                 /\ bstate' = [bstate EXCEPT ![w] = (@ \ Task(w, c)) \cup {<<c, p, "done">>}]
                 /\ results' = IF IsRoot(w, c) THEN results \cup {<<c, p, "done">>} ELSE results
                 /\ awaiting' = [awaiting EXCEPT ![w] = @ \ waiting]
                 /\ net' = net \cup answers
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   detached, tomb, released, late, alive, execd, fired, grads, freed, outst, parent,
                   echoWait>>

(* Echo (Reference): BACKWARD_START of pass p reaches a worker.  The first  *)
(* one of the pass makes its sender the parent, starts the graph task if no *)
(* gradient request of the pass has (so recv functions nothing consumes     *)
(* fire their zero gradient) and is passed on to the known workers; any     *)
(* later one, or a stale one ("passTag"), is acknowledged at once.          *)
ProcessBackwardStart(w, msg) ==
    /\ alive[w]
    /\ msg \in net /\ msg.type = "BWD_START" /\ msg.dst = w
    /\ LET c == msg.ctx
           p == msg.pass
           samePass == Task(w, c) # {} /\ PassOf(w, c) = p
           engaged == samePass /\ (IsRoot(w, c) \/ \E e \in parent[w] : e[1] = c)
           to == KnownOf(w, c) \ {msg.src, w}
           fresh == ~(samePass /\ Running(w, c))
       IN IF engaged \/ c \notin ctxs[w] \/ StalePass(w, c, p)
          THEN /\ net' = (net \ {msg}) \cup {BwdMsg("BWD_ACK", c, None, p, w, msg.src, TRUE)}
               /\ UNCHANGED <<execd, fired, bstate, parent, echoWait>>
          ELSE /\ parent' = [parent EXCEPT ![w] = {e \in @ : e[1] # c} \cup {<<c, msg.src>>}]
               /\ echoWait' = [echoWait EXCEPT ![w] = {e \in @ : e[1] # c} \cup {<<c, x>> : x \in to}]
               /\ bstate' = IF fresh
                            THEN [bstate EXCEPT ![w] = (@ \ Task(w, c)) \cup {<<c, p, "run">>}]
                            ELSE bstate
               /\ execd' = IF fresh THEN [execd EXCEPT ![w] = {e \in @ : e[1] # c}] ELSE execd
               /\ fired' = IF fresh THEN [fired EXCEPT ![w] = {e \in @ : e[1] # c}] ELSE fired
               /\ net' = (net \ {msg}) \cup {BwdMsg("BWD_START", c, None, p, w, x, TRUE) : x \in to}
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   detached, tomb, released, late, alive, grads, results, freed, outst, awaiting>>

(* Echo: a flood child reports that it (and its subtree) is done; an error  *)
(* fails this worker's pass too ("ackErrors").                              *)
ProcessBackwardAck(w, msg) ==
    /\ alive[w]
    /\ msg \in net /\ msg.type = "BWD_ACK" /\ msg.dst = w
    /\ LET c == msg.ctx
       IN /\ net' = net \ {msg}
          /\ echoWait' = [echoWait EXCEPT ![w] = @ \ {<<c, msg.src>>}]
          /\ bstate' = IF ~msg.flag /\ TaskIn(w, c, "run") /\ PassOf(w, c) = msg.pass
                       THEN [bstate EXCEPT ![w] = (@ \ Task(w, c)) \cup {<<c, msg.pass, "err">>}]
                       ELSE bstate
    /\ UNCHANGED <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending,
                   detached, tomb, released, late, alive, execd, fired, grads, results, freed, outst,
                   awaiting, parent>>

-----------------------------------------------------------------------------
(* The next-state relation and the specification                           *)

AppNext ==
    \/ \E w \in Workers : \E t \in Threads : NewContext(w, t)
    \/ \E p \in Calls : \E t \in Threads : \E g \in BOOLEAN :
          SendMessageWithAutograd(p[1], t, p[2], g)
    \/ \E h \in handlers : \E p \in NestCalls : \E g \in BOOLEAN :
       \E a \in (IF FireAndForget THEN BOOLEAN ELSE {TRUE}) :
          p[1] = h.w /\ NestedSendMessageWithAutograd(h.w, h, p[2], g, a)
    \/ \E w \in Workers : \E t \in Threads : ReleaseContext(w, t)
    \/ \E w \in Workers : \E t \in Threads : \E r \in BOOLEAN : DistEngineExecute(w, t, r)
    \/ \E w \in Workers : \E c \in CtxIds : RetrieveContext(w, c)
    \/ \E h \in handlers : \E r \in recvs[h.w] : FetchStoredValue(h.w, h, r)
    \/ \E h \in handlers : UdfRaises(h.w, h)

FaultNext ==
    \/ \E m \in net : RetryCleanup(m)
    \/ \E m \in net : LoseCleanupMsg(m)
    \/ \E w \in CrashWorkers : Crash(w)
    \/ \E w \in Workers : \E x \in CrashWorkers : PeerDied(w, x)
    \/ \E w \in ErrorWorkers : \E c \in ctxs[w] : BackwardError(w, c)

\* Message m is taken from the network by its handler, or a callback runs.
SystemNext ==
    \/ \E m \in net : ProcessForwardAutogradReq(m.dst, m)
    \/ \E h \in handlers : \E g \in BOOLEAN : FinishForwardAutogradReq(h.w, h, g)
    \/ \E m \in net : \E l \in BOOLEAN : DeserializeForwardAutogradResp(m.dst, m, l)
    \/ \E m \in net : DeserializeResponse(m.dst, m)
    \/ \E w \in Workers : \E m \in MsgIds : PollTimeoutRpcs(w, m)
    \/ \E m \in net : ProcessCleanupAutogradContextReq(m.dst, m)
    \/ \E w \in Workers : \E c \in ctxs[w] : ReleaseOrphanedContext(w, c)
    \/ \E m \in net : Discard(m)
    \/ \E w \in Workers : \E r \in recvs[w] : RecvRpcBackwardApply(w, r.ctx, r)
    \/ \E m \in net : ProcessBackwardAutogradReq(m.dst, m)
    \/ \E m \in net : ProcessBackwardAutogradResp(m.dst, m)
    \/ \E w \in Workers : \E e \in bstate[w] : CleanupBackwardPass(w, e[1])
    \/ \E m \in net : ProcessBackwardStart(m.dst, m)
    \/ \E m \in net : ProcessBackwardAck(m.dst, m)

\* The refusal is stuttering; it is a disjunct so that the implementation's
\* trace event has a step to match.
Next ==
    \/ AppNext \/ FaultNext \/ SystemNext
    \/ \E w \in Workers : \E t \in Threads : NewContextRefused(w, t)

\* Every behaviour has finitely many non-stuttering steps (ids and passes are
\* bounded, each erase sends at most |Workers| cleanups, each cleanup is
\* copied at most once), so weak fairness of the system steps as a whole
\* means "a behaviour stops only where no handler or callback is enabled",
\* and <>[]P means "P holds in the final state".
Spec == Init /\ [][Next]_vars /\ WF_vars(SystemNext)

-----------------------------------------------------------------------------
(* Invariants                                                               *)

SendRec == [ctx : CtxIds, mid : MsgIds, dst : Workers, in : SUBSET MsgIds]
RecvRec == [ctx : CtxIds, mid : MsgIds, src : Workers, loss : BOOLEAN]
HandlerRec == [w : Workers, ctx : CtxIds, req : MsgIds, caller : Workers, grad : BOOLEAN,
               wait : MsgIds \cup {None}, called : 0..MaxNested, nr : SUBSET MsgIds,
               forgot : SUBSET MsgIds, err : BOOLEAN]
Passes == 0..MaxPasses
MsgRec == [type : {"FWD_REQ", "FWD_RESP", "RESP", "CLEANUP", "BWD_REQ", "BWD_RESP",
                   "BWD_START", "BWD_ACK"},
           ctx : CtxIds, mid : MsgIds \cup {None}, req : MsgIds \cup {None},
           src : Workers, dst : Workers, flag : BOOLEAN, trig : Workers \cup {NoWorker},
           pass : Passes, dup : 0..2]
\* Horizon: a cleanup carries its creator's horizon as well (CleanupMsg).
HzCleanupRec == [type : {"CLEANUP"}, ctx : CtxIds, mid : {None}, req : {None},
                 src : Workers, dst : Workers, flag : {TRUE}, trig : Workers \cup {NoWorker},
                 pass : {0}, dup : 0..2, hz : Nat \X SUBSET CtxIds]

(* Every variable has its type.  Ids lie in the id space of an existing     *)
(* worker (its 48-bit range: id >> 48 is a rank): only the overflow         *)
(* assertion keeps them there.                                              *)
TypeOK ==
    /\ nextCtx \in [Workers -> Nat]
    /\ nextMsg \in [Workers -> Nat]
    /\ ctxs \in [Workers -> SUBSET CtxIds]
    /\ cur \in [Workers -> [Threads -> CtxIds \cup {None}]]
    /\ known \in [Workers -> SUBSET (CtxIds \X Workers)]
    /\ sends \in [Workers -> SUBSET SendRec]
    /\ recvs \in [Workers -> SUBSET RecvRec]
    /\ handlers \subseteq HandlerRec
    /\ pending \in [Workers -> SUBSET (CtxIds \X MsgIds)]
    /\ detached \in [Workers -> SUBSET (CtxIds \X MsgIds)]
    /\ net \subseteq MsgRec \cup (IF Horizon THEN HzCleanupRec ELSE {})
    /\ tomb \in [Workers -> IF Horizon
                            THEN [ids : SUBSET CtxIds, hz : [Workers -> Nat \X SUBSET CtxIds]]
                            ELSE SUBSET CtxIds]
    /\ released \subseteq Workers \X CtxIds
    /\ late \subseteq CtxIds \X {"error", "found"}
    /\ alive \in [Workers -> BOOLEAN]
    /\ execd \in [Workers -> SUBSET (CtxIds \X Fns)]
    /\ fired \in [Workers -> SUBSET (CtxIds \X MsgIds)]
    /\ grads \in [Workers -> SUBSET (CtxIds \X Passes \X Fns)]
    /\ bstate \in [Workers -> SUBSET (CtxIds \X Passes \X TaskStates)]
    /\ results \subseteq CtxIds \X Passes \X {"done", "fail"}
    /\ freed \subseteq CtxIds
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
    /\ \A w \in Workers : \A t \in Threads :
          cur[w][t] # None => cur[w][t][1] = w /\ DrawnBy(cur[w][t], nextCtx)
    /\ \A w \in Workers : \A c \in ctxs[w] : DrawnBy(c, nextCtx)
    /\ \A w \in Workers : \A s \in sends[w] : s.mid[1] = w /\ DrawnBy(s.mid, nextMsg)
    /\ \A w \in Workers : \A r \in recvs[w] : DrawnBy(r.mid, nextMsg)

(* D6, one current context per application thread, stated as what it       *)
(* guarantees: every context a worker created and has not released is the   *)
(* current context of exactly one of its threads.  So no thread has two      *)
(* contexts open (a thread-local holds one id), no context is shared by two *)
(* threads, and every wrapped RPC a thread makes in its block goes into the *)
(* block's own context: different threads' gradients never mix.            *)
OneContextPerThreadInv ==
    \A w \in Workers : alive[w] =>
        \A c \in ctxs[w] : (Creator(c) = w /\ <<w, c>> \notin released) =>
            Cardinality({t \in Threads : cur[w][t] = c}) = 1

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

(* A2: the context a thread runs under exists on its worker: each           *)
(* application thread's current id, and the guarded id of every running     *)
(* handler (else currentContext() throws mid-request).                      *)
CurrentContextValidInv ==
    /\ \A w \in Workers : \A t \in Threads :
          (alive[w] /\ cur[w][t] # None) => cur[w][t] \in ctxs[w]
    /\ \A h \in handlers : h.ctx \in ctxs[h.w]

(* #32497: the cascade never sends a cleanup back to the worker whose       *)
(* cleanup triggered it (an efficiency property: that worker has already    *)
(* erased the context); for a release, the trigger is the releasing worker  *)
(* itself (known after a self-RPC).                                         *)
NoRedundantCleanupInv ==
    \A m \in net : m.type = "CLEANUP" => m.dst # m.trig

(* A1: backward and get_gradients on a released or unknown context fail     *)
(* cleanly.  A gradient contribution exists only for a function its worker  *)
(* holds in a context it holds (a request for a missing context or send     *)
(* function is answered with an error, never applied), and a call with the  *)
(* id of a context its thread has left never finds it: retrieveContext      *)
(* throws.                                                                  *)
BackwardNeedsContextInv ==
    /\ \A w \in Workers : \A e \in grads[w] :
          /\ e[1] \in ctxs[w]
          /\ e[3] = RootFn \/ \E s \in SendsOf(w, e[1]) : s.mid = e[3]
    /\ \A e \in late : e[2] = "error"

(* Reachability witness (#40880), not a safety property: "no backward or     *)
(* get_gradients is ever called after its block exited".  A model that      *)
(* breaks it shows such a call happening (and, with the other invariants,   *)
(* failing cleanly).                                                        *)
LateCallNotReachedInv == late = {}

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
\* The contributions a complete pass of c makes on w: the live root and send
\* functions there.
LiveFns(c, w) ==
    {e[2] : e \in {x \in Live(c) : x[1] = w /\
                   (x[2] = RootFn \/ \E s \in SendsOf(w, c) : s.mid = x[2])}}
\* The creator still holds c as it created it (neither released nor crashed).
Held(c) == Creator(c) \in Workers /\ alive[Creator(c)] /\ c \in ctxs[Creator(c)]
           /\ <<Creator(c), c>> \notin released

(* For every pass the root's backward returned from (not raised), the       *)
(* contributions of that pass accumulated on every worker are exactly those *)
(* of the functions on the loss's gradient path: none missing, none from a  *)
(* zero gradient.  Passes are told apart by their tokens; a function runs  *)
(* at most once per graph task (BACKWARD_AUTOGRAD_REQ is never retried), so *)
(* "exactly once per completed pass" is this equality, pass by pass.  It is *)
(* checked while the creator holds the context and no worker has crashed (a *)
(* crash takes that worker's part of the graph, and its leaf, with it).     *)
GradientExactlyOnceInv ==
    \A e \in results : (e[3] = "done" /\ Held(e[1]) /\ \A x \in Workers : alive[x]) =>
        \A w \in Workers :
            {x[3] : x \in {y \in grads[w] : y[1] = e[1] /\ y[2] = e[2]}} = LiveFns(e[1], w)

(* When the root's backward returns or raises, its pass is over everywhere: *)
(* no graph task of that pass still runs on a live worker and no gradient   *)
(* request of it is on its way between live workers, so nothing of it is    *)
(* applied afterwards (an error does not leave the rest of the pass         *)
(* running, and get_gradients after backward reads a stable value).  A      *)
(* request a worker sent before it died may still arrive: it must not start *)
(* a graph task again (the Reference drops it: "passTag").                  *)
PassQuiescentInv ==
    \A e \in results :
        /\ \A w \in Workers : alive[w] =>
              \A x \in bstate[w] : (x[1] = e[1] /\ x[2] = e[2]) => x[3] \in {"done", "fail"}
        /\ ~\E m \in net : /\ m.type = "BWD_REQ" /\ m.ctx = e[1] /\ m.pass = e[2]
                           /\ alive[m.src] /\ alive[m.dst]

(* Errors travel back: the root's backward returns normally only from a      *)
(* pass in which no graph task failed anywhere.                             *)
ErrorsReachRootInv ==
    \A e \in results : e[3] = "done" =>
        \A w \in Workers : \A x \in bstate[w] :
            (x[1] = e[1] /\ x[2] = e[2]) => x[3] \in {"run", "done"}

\* c is dead: its creator released it, or died.
Dead(c) == Creator(c) \in Workers /\ (<<Creator(c), c>> \in released \/ ~alive[Creator(c)])

(* Tombstones refuse only the dead: a worker refuses an id (a late request  *)
(* gets an error, a late answer's autograd part is dropped) only once the   *)
(* context's creator has released it or died.  A refused live context would *)
(* fail its own block's next call (the research note's watermark, and a     *)
(* horizon without its open set, both do this with two threads).           *)
RefusedOnlyDeadInv ==
    \A w \in Workers : \A c \in CtxIds : Refused(w, c) => Dead(c)

(* The bound on what tombstones cost (Horizon, issue 28 section 7): beyond  *)
(* one horizon per creator, a worker keeps an explicit tombstone only for a *)
(* context whose creator crashed (an orphan release hears no horizon), so   *)
(* its memory does not grow with the contexts a live creator has released.  *)
TombBoundInv ==
    \A w \in Workers : \A c \in TombIds(tomb[w]) :
        Creator(c) \in Workers /\ ~alive[Creator(c)]

(* ... and a horizon names at most one open context per application thread *)
(* of its creator.                                                          *)
HorizonBoundInv ==
    Horizon =>
        \A w \in Workers : \A x \in Workers :
            /\ Cardinality(tomb[w].hz[x][2]) <= Cardinality(Threads)
            /\ \A c \in tomb[w].hz[x][2] : Creator(c) = x

-----------------------------------------------------------------------------
(* Action properties                                                         *)

(* D7, cleanup idempotent and never creating a context: processing a        *)
(* cleanup for c acts on c alone (no other context of the worker appears,   *)
(* disappears or becomes refused), and on a worker without c it creates    *)
(* nothing, changes nothing but the Reference's memory of c, and sends      *)
(* nothing; where c is present it is erased, so each incarnation forwards   *)
(* at most once and a second copy finds it absent.                          *)
CleanupIdempotentProp ==
    [][\A m \in net : \A w \in Workers :
          ProcessCleanupAutogradContextReq(w, m) =>
              LET c == m.ctx
              IN /\ \A c2 \in CtxIds \ {c} :
                        /\ (c2 \in ctxs'[w]) = (c2 \in ctxs[w])
                        \* Horizon: the horizon a cleanup carries may make other
                        \* contexts refused, but only dead ones, and none unrefused.
                        /\ IF Horizon
                           THEN /\ Refused(w, c2) => Refused(w, c2)'
                                /\ Refused(w, c2)' => Refused(w, c2) \/ Dead(c2)
                           ELSE (c2 \in tomb'[w]) = (c2 \in tomb[w])
                 /\ c \notin ctxs'[w]
                 /\ c \notin ctxs[w] =>
                       /\ net' = net \ {m}
                       /\ known'[w] = known[w] /\ sends'[w] = sends[w] /\ recvs'[w] = recvs[w]
      ]_vars

-----------------------------------------------------------------------------
(* Liveness (under WF_vars(SystemNext)); every behaviour ends in a final    *)
(* state, so <>[]P says P holds there.                                      *)

(* D8: once a context is dead, eventually no worker holds it.              *)
EventualReleaseProp ==
    <>[](\A c \in CtxIds : Dead(c) => \A w \in Workers : c \notin ctxs[w])

(* Every started graph task eventually completes or fails, on every live    *)
(* worker that took part (in PyTorch a released context's running task     *)
(* stays in initializedContextIds_).                                        *)
BackwardTerminatesProp ==
    <>[](\A w \in Workers : alive[w] => \A e \in bstate[w] : e[3] \in {"done", "fail"})

(* Every wrapped RPC eventually gets a value or an error: no future of an   *)
(* application thread, of a handler or of a forgotten nested call is left   *)
(* waiting.                                                                 *)
ForwardTerminatesProp ==
    <>[](handlers = {} /\ \A w \in Workers : pending[w] = {} /\ detached[w] = {})

=============================================================================
