------------------------ MODULE TraceDistAutogradTorch ------------------------
(***************************************************************************)
(* Black-box trace validation of torch's own distributed autograd (C++,    *)
(* driven from Python over the FAULTY_TENSORPIPE agent), in the PyTorch    *)
(* variant of DistAutograd.tla (FAST-mode backward).                       *)
(*                                                                         *)
(* A trace holds only what the programs saw: context enter / exit (and a   *)
(* refused nested context), rpc_sync / rpc_async with autograd from the    *)
(* block and from a UDF (its nested calls), each call's outcome (a value,  *)
(* an error, a timeout), backward and its outcome, get_gradients in the    *)
(* block and after it, and dist_autograd._get_debug_info() sampled at      *)
(* quiet points.  torch's internal steps (the handlers of FORWARD_AUTOGRAD  *)
(* _REQ/_RESP, the cleanup cascade, the backward requests and answers, a   *)
(* backward function raising) are not logged: between two observed events *)
(* at most TVHidden unobserved DistAutograd.tla steps may run (Cirstea,    *)
(* Kuppe, Loillier, Merz 2024).  An observed event is one spec action with *)
(* the event's parameters, or a condition on the state that changes        *)
(* nothing; a counter must equal the spec's projection of the worker's    *)
(* state.                                                                   *)
(*                                                                         *)
(* Context ids are visible to a program (worker_id << 48 | n: the event's  *)
(* cw and cn), so an observed id must be the one the spec draws.  Message  *)
(* ids are not: a call is named by a label the program picks, bound to the *)
(* id the spec draws at the call.  Each worker runs one context block at a *)
(* time: one application thread (TVT).                                      *)
(*                                                                         *)
(* Verdict: accepted iff some behaviour consumes every event (a state      *)
(* violating TVNotDoneInv); TVMax prints the furthest cursor reached.      *)
(***************************************************************************)
EXTENDS DistAutograd, Sequences, TLC

CONSTANTS
    TVTrace,   \* the observed events, a sequence of records (tracecheck renders it)
    TVHidden,  \* at most this many unobserved spec steps between two observed events
    TVEager,   \* BOOLEAN: unobserved steps only where the next observed event cannot be taken
    TVRank     \* worker name (the trace's nodes) -> rank (the spec's workers)

VARIABLES
    tvCursor,  \* the next observed event
    tvHidden,  \* unobserved steps taken since the last observed event
    tvCall,    \* label -> [w, mid]: the worker and the request id of each of the program's calls
    tvDone,    \* <<worker, request id, "ok" | "error">>: the futures torch completed
    tvAct      \* the DistAutograd.tla action the last step took ("probe": an observation
               \* only); left out of TVView, so it costs no states: it reports coverage

tvVars == <<tvCursor, tvHidden, tvCall, tvDone, tvAct>>
TVView == <<vars, tvCursor, tvHidden, tvCall, tvDone>>

TVT == CHOOSE t \in Threads : TRUE
Rk(e) == TVRank[e.node]
Ctx(e) == <<e.cw, e.cn>>
InBlock(e) == cur[Rk(e)][TVT] = Ctx(e)

TVInit ==
    /\ Init
    /\ tvCursor = 1
    /\ tvHidden = 0
    /\ tvCall = <<>>
    /\ tvDone = {}
    /\ tvAct = "Init"

-----------------------------------------------------------------------------
(* Observed events                                                          *)

\* `with dist_autograd.context() as id`: the id the program saw is the one drawn.
ObsContextEnter(e) ==
    /\ e.op = "ContextEnter"
    /\ e.cw = Rk(e) /\ e.cn = nextCtx[Rk(e)]
    /\ NewContext(Rk(e), TVT)

\* A nested `with dist_autograd.context()` raised ("Already have an autograd context id").
ObsContextRefused(e) ==
    /\ e.op = "ContextRefused"
    /\ InBlock(e)
    /\ NewContextRefused(Rk(e), TVT)

Bind(e) == tvCall' = tvCall @@ (e.label :> [w |-> Rk(e), mid |-> <<Rk(e), nextMsg[Rk(e)]>>])

\* rpc_async from the block (its future is awaited at CallDone).
ObsCall(e) ==
    /\ e.op = "Call"
    /\ e.label \notin DOMAIN tvCall
    /\ InBlock(e)
    /\ SendMessageWithAutograd(Rk(e), TVT, TVRank[e.peer], e.grad)
    /\ Bind(e)

\* rpc_async from a UDF running under the caller's context (wait: it awaits the call).
ObsNestedCall(e) ==
    /\ e.op = "NestedCall"
    /\ e.label \notin DOMAIN tvCall
    /\ \E h \in handlers :
          /\ h.w = Rk(e) /\ h.ctx = Ctx(e)
          /\ NestedSendMessageWithAutograd(Rk(e), h, TVRank[e.peer], e.grad, e.wait)
    /\ Bind(e)

\* The program's wait on a call's future returned ("ok") or raised ("error"): torch
\* completed the future (an unobserved Deserialize* step recorded it in tvDone); or it raised
\* a timeout: the agent's poller failed the future there (PollTimeoutRpcs).
ObsCallDone(e) ==
    /\ e.op = "CallDone"
    /\ e.label \in DOMAIN tvCall
    /\ LET m == tvCall[e.label]
       IN /\ m.w = Rk(e)
          /\ IF e.outcome = "timeout"
             THEN PollTimeoutRpcs(m.w, m.mid)
             ELSE /\ e.outcome \in {"ok", "error"}
                  /\ <<m.w, m.mid, e.outcome>> \in tvDone
                  /\ UNCHANGED vars

ObsContextExit(e) ==
    /\ e.op = "ContextExit"
    /\ InBlock(e)
    /\ ReleaseContext(Rk(e), TVT)

ObsBackward(e) ==
    /\ e.op = "Backward"
    /\ InBlock(e)
    /\ DistEngineExecute(Rk(e), TVT, e.retain)

\* dist_autograd.backward returned or raised: the creator's pass (its latest) is over.
ObsBackwardDone(e) ==
    /\ e.op = "BackwardDone"
    /\ InBlock(e)
    /\ <<Ctx(e), PassOf(Rk(e), Ctx(e)), IF e.outcome = "ok" THEN "done" ELSE "fail">>
          \in results
    /\ e.outcome \in {"ok", "error"}
    /\ UNCHANGED vars

\* get_gradients in the block: the leaf's value counts the spec's contributions (the
\* root and the send functions of the context on this worker, every pass apart; the
\* programs make each one add exactly 1).  A pass that succeeded counts whole.  One that
\* failed counts anything from none to all of its contributions: torch accumulates a local
\* execution's gradients into the context when that execution ends
\* (runEngineAndAccumulateGradients), and a pass's error may end it first, while the spec
\* adds each contribution at its step (docs/divergences.md, "A failed pass's gradients").
PassTokens(w, c, outcome) ==
    {g \in grads[w] : g[1] = c /\ <<c, g[2], outcome>> \in results}
ObsGradients(e) ==
    /\ e.op = "Gradients"
    /\ InBlock(e)
    /\ LET w == Rk(e)
           done == Cardinality(PassTokens(w, Ctx(e), "done"))
       IN done <= e.grad /\ e.grad <= done + Cardinality(PassTokens(w, Ctx(e), "fail"))
    /\ UNCHANGED vars

\* get_gradients after the block (#40880): retrieveContext finds the id or throws.
ObsLateGradients(e) ==
    /\ e.op = "LateGradients"
    /\ RetrieveContext(Rk(e), Ctx(e))
    /\ <<Ctx(e), e.outcome>> \in late'

\* backward after the block begins with retrieveContext too: it raises ("error") unless the
\* id is held; one that ran ("ok") needs the context found (the pass itself is not followed,
\* as in RetrieveContext).
ObsLateBackward(e) ==
    /\ e.op = "LateBackward"
    /\ e.outcome \in {"ok", "error"}
    /\ RetrieveContext(Rk(e), Ctx(e))
    /\ <<Ctx(e), IF e.outcome = "ok" THEN "found" ELSE "error">> \in late'

\* dist_autograd._get_debug_info() on e.node: num_autograd_contexts = the container's
\* contexts; num_current_backward_passes = initializedContextIds_ (graph tasks running,
\* kept by PyTorch even after their context is erased).
ObsCounters(e) ==
    /\ e.op = "Counters"
    /\ Cardinality(ctxs[Rk(e)]) = e.contexts
    /\ Cardinality({x \in bstate[Rk(e)] : x[3] \in {"run", "err"}}) = e.passes
    /\ UNCHANGED vars

\* A quiet point: every worker's counters held still for 1.5 s (longer than any UDF's sleep
\* and the agent's re-send of a failed cleanup): nothing of torch's is in flight and no UDF
\* runs.  Every message of the spec can be consumed, so the gap before it drains them.
ObsQuiet(e) ==
    /\ e.op = "Quiet"
    /\ net = {}
    /\ handlers = {}
    /\ UNCHANGED vars

\* rpc.shutdown() (no autograd state: the containers live until the process ends).
ObsShutdown(e) ==
    /\ e.op \in {"ShutdownCalled", "ShutdownDone"}
    /\ UNCHANGED vars

Observed(e) ==
    \/ ObsContextEnter(e)
    \/ ObsContextRefused(e)
    \/ ObsCall(e)
    \/ ObsNestedCall(e)
    \/ ObsCallDone(e)
    \/ ObsContextExit(e)
    \/ ObsBackward(e)
    \/ ObsBackwardDone(e)
    \/ ObsGradients(e)
    \/ ObsLateGradients(e)
    \/ ObsLateBackward(e)
    \/ ObsCounters(e)
    \/ ObsQuiet(e)
    \/ ObsShutdown(e)

\* The DistAutograd.tla action an observed event took, for coverage.
TVActOf(e) ==
    CASE e.op = "ContextEnter" -> "NewContext"
      [] e.op = "ContextRefused" -> "NewContextRefused"
      [] e.op = "Call" -> "SendMessageWithAutograd"
      [] e.op = "NestedCall" -> "NestedSendMessageWithAutograd"
      [] e.op = "CallDone" -> IF e.outcome = "timeout" THEN "PollTimeoutRpcs" ELSE "probe"
      [] e.op = "ContextExit" -> "ReleaseContext"
      [] e.op = "Backward" -> "DistEngineExecute"
      [] e.op \in {"LateGradients", "LateBackward"} -> "RetrieveContext"
      [] OTHER -> "probe"

ObservedStep ==
    /\ tvCursor <= Len(TVTrace)
    /\ LET e == TVTrace[tvCursor] IN
        /\ Observed(e)
        /\ e.op \notin {"Call", "NestedCall"} => UNCHANGED tvCall
    /\ tvCursor' = tvCursor + 1
    /\ tvHidden' = 0
    /\ UNCHANGED tvDone
    /\ tvAct' = TVActOf(TVTrace[tvCursor])

-----------------------------------------------------------------------------
(* Unobserved steps: torch's own, which no program sees                      *)

\* The message handlers and callbacks of SystemNext (PyTorch's: no orphan release), and a
\* backward function raising on a worker whose UDF the program made raise (ErrorWorkers).
\* Not searched: timeouts (observed at CallDone), cleanup retries (FAULTY_TENSORPIPE fails
\* a first attempt before writing it, so torch's re-send is the single delivery, later:
\* DupCleanup is FALSE), lost cleanups and crashes (the sessions inject none).
Named(A, name) == A /\ tvAct' = name
Quiet(A, name) == Named(A, name) /\ UNCHANGED tvDone
\* A future completes: who waits for it sees the outcome (recorded for ObsCallDone).
Completes(w, msg, outcome) == tvDone' = tvDone \cup {<<w, msg.req, outcome>>}
HiddenNext ==
    \/ \E m \in net :
        \/ Quiet(ProcessForwardAutogradReq(m.dst, m), "ProcessForwardAutogradReq")
        \/ \E l \in BOOLEAN :
              /\ Named(DeserializeForwardAutogradResp(m.dst, m, l),
                       "DeserializeForwardAutogradResp")
              /\ Completes(m.dst, m, "ok")
        \/ /\ Named(DeserializeResponse(m.dst, m), "DeserializeResponse")
           /\ Completes(m.dst, m, IF m.flag THEN "ok" ELSE "error")
        \/ Quiet(ProcessCleanupAutogradContextReq(m.dst, m), "ProcessCleanupAutogradContextReq")
        \/ Quiet(Discard(m), "Discard")
        \/ Quiet(ProcessBackwardAutogradReq(m.dst, m), "ProcessBackwardAutogradReq")
        \/ Quiet(ProcessBackwardAutogradResp(m.dst, m), "ProcessBackwardAutogradResp")
    \/ \E h \in handlers : \E g \in BOOLEAN :
          Quiet(FinishForwardAutogradReq(h.w, h, g), "FinishForwardAutogradReq")
    \/ \E w \in Workers : \E r \in recvs[w] :
          Quiet(RecvRpcBackwardApply(w, r.ctx, r), "RecvRpcBackwardApply")
    \/ \E w \in Workers : \E x \in bstate[w] :
          Quiet(CleanupBackwardPass(w, x[1]), "CleanupBackwardPass")
    \/ \E w \in ErrorWorkers : \E c \in ctxs[w] : Quiet(BackwardError(w, c), "BackwardError")

\* With TVEager the search is the observed-first one: every behaviour it finds is one of
\* the full search, but it cannot prove a rejection: tracecheck runs the full search
\* (TVEager = FALSE) on every trace it does not accept.
HiddenStep ==
    /\ tvHidden < TVHidden
    /\ TVEager => ~ENABLED ObservedStep
    /\ HiddenNext
    /\ tvHidden' = tvHidden + 1
    /\ UNCHANGED <<tvCursor, tvCall>>

TVNext == ObservedStep \/ HiddenStep

-----------------------------------------------------------------------------
(* Verdict                                                                   *)

\* Violated exactly when every observed event has been consumed: acceptance.
TVNotDoneInv == tvCursor <= Len(TVTrace)

\* A state constraint that is always TRUE: it prints each new furthest cursor.
ASSUME TLCSet(1, 0)
TVMax ==
    IF tvCursor > TLCGet(1)
      THEN TLCSet(1, tvCursor) /\ PrintT(<<"tv_max", tvCursor>>)
      ELSE TRUE
=============================================================================
