--------------------------- MODULE TraceRRefTorch ---------------------------
(***************************************************************************)
(* Black-box trace validation of torch's own RRef protocol (C++, driven    *)
(* from Python through the fault-injecting FAULTY_TENSORPIPE agent).       *)
(*                                                                         *)
(* A trace holds only what the programs saw: the operations each worker   *)
(* performed (rpc.remote, rpc.RRef, sharing an RRef as an argument or a   *)
(* result, receiving one, to_here and its outcome, dropping a reference,  *)
(* the outcome of an rpc.remote future, the end of rpc.shutdown) and the  *)
(* RRefContext debug counters sampled by the program.  torch's internal   *)
(* steps (message handlers, callbacks, the UserRRef destructor, retries,  *)
(* the shutdown sweep) are not logged: between two observed events at    *)
(* most TVHidden unobserved steps of RRef.tla may run (Cirstea, Kuppe,    *)
(* Loillier, Merz 2024: an event may stand for several spec steps).  An   *)
(* observed event is one spec action (or, for an outcome or a counter, a  *)
(* condition on the state that changes nothing) with the event's          *)
(* parameters; a counter must equal the spec's projection of the worker's *)
(* state there.                                                            *)
(*                                                                         *)
(* RRefIds and ForkIds are not visible to a torch program, so the trace    *)
(* names each RRef object by a label the program chose; tvName binds a    *)
(* label to the spec's id at the event that creates the object (the ids   *)
(* the spec draws from nextId, as torch draws them from nextLocalId_).    *)
(*                                                                         *)
(* Verdict: the trace is accepted iff some behaviour consumes every event, *)
(* i.e. TLC finds a state violating TVNotDoneInv; TVMax prints the         *)
(* furthest cursor reached (the first unexplained event on rejection).    *)
(***************************************************************************)
EXTENDS RRef, Sequences, TLC

CONSTANTS
    TVTrace,   \* the observed events, a sequence of records (tracecheck renders it)
    TVHidden,  \* at most this many unobserved spec steps between two observed events
    TVEager,   \* BOOLEAN: unobserved steps only where the next observed event cannot be taken
    TVFailed   \* the message types the session's agent fails once (torch then re-sends)

VARIABLES
    tvCursor,  \* the next observed event
    tvHidden,  \* unobserved steps taken since the last observed event
    tvName,    \* label -> [kind, id, rref]: what each of the program's names denotes
    tvAct      \* the RRef.tla action the last step took ("probe": an observation only);
               \* left out of TVView, so it costs no states: it reports action coverage

tvVars == <<tvCursor, tvHidden, tvName, tvAct>>
TVView == <<vars, tvCursor, tvHidden, tvName>>

\* kind: "user" (a UserRRef, id = its ForkId), "owner" (an OwnerRRef held by the
\* application: rpc.RRef or a self rpc.remote, id = its RRefId), "arg" (an OwnerRRef
\* received as an argument on its owner: usable, not in ownerHeld), "sent" (a child fork
\* in flight, id = the child ForkId, until the receiver's GetOrCreateRRef event).
Handle(k, i, r) == [kind |-> k, id |-> i, rref |-> r]
Bind(l, h) == tvName' = tvName @@ (l :> h)
Rebind(l, h) == tvName' = [tvName EXCEPT ![l] = h]

TVInit ==
    /\ Init
    /\ tvCursor = 1
    /\ tvHidden = 0
    /\ tvName = <<>>
    /\ tvAct = "Init"

-----------------------------------------------------------------------------
(* Observed events                                                          *)

ObsCreateLocalRRef(e) ==
    /\ e.op = "CreateLocalRRef"
    /\ CreateLocalRRef(e.node)
    /\ Bind(e.label, Handle("owner", <<e.node, nextId[e.node]>>, <<e.node, nextId[e.node]>>))

ObsRemote(e) ==
    /\ e.op = "Remote"
    /\ Remote(e.node, e.peer)
    /\ LET r == <<e.node, nextId[e.node]>>
       IN Bind(e.label, IF e.peer # e.node
                          THEN Handle("user", <<e.node, nextId[e.node] + 1>>, r)
                          ELSE Handle("owner", r, r))

\* The program pickles the RRef named e.label into a user RPC to e.peer; the child
\* object will be named e.child on the receiver.
ObsPrepareChildFork(e) ==
    /\ e.op = "PrepareChildFork"
    /\ e.label \in DOMAIN tvName
    /\ e.child \notin DOMAIN tvName
    /\ LET h == tvName[e.label]
       IN /\ h.kind \in {"user", "owner", "arg"}
          /\ PrepareChildFork(e.node, e.peer, h.rref, IF h.kind = "user" THEN h.id ELSE h.rref)
          /\ Bind(e.child, Handle("sent", <<e.node, nextId[e.node]>>, h.rref))

\* The receiving UDF (or the caller, for a returned RRef) holds the unpickled RRef.
ObsGetOrCreateRRef(e) ==
    /\ e.op = "GetOrCreateRRef"
    /\ e.label \in DOMAIN tvName
    /\ tvName[e.label].kind = "sent"
    /\ LET h == tvName[e.label]
       IN \E m \in InFlight("PYTHON_CALL", e.node, h.rref, h.id) :
            /\ GetOrCreateRRef(e.node, h.rref, h.id)
            /\ Rebind(e.label, IF m.owner = e.node THEN Handle("arg", h.rref, h.rref)
                                                  ELSE Handle("user", h.id, h.rref))

UserLabel(e) == e.label \in DOMAIN tvName /\ tvName[e.label].kind = "user"

ObsToHere(e) ==
    /\ e.op = "ToHere"
    /\ UserLabel(e)
    /\ ToHere(e.node, tvName[e.label].id)

\* to_here returned the value: the reply of the fetch still waited for.
ObsToHereOk(e) ==
    /\ e.op = "ToHereOk"
    /\ UserLabel(e)
    /\ LET h == tvName[e.label]
       IN /\ h.id \in fetching
          /\ ReceiveFetchRet(e.node, h.rref, h.id)

ObsToHereTimeout(e) ==
    /\ e.op = "ToHereTimeout"
    /\ UserLabel(e)
    /\ TimeOutToHere(e.node, tvName[e.label].id)

\* to_here raised at once: the UserRRef was deleted or its creation timed out.
ObsToHereRefused(e) ==
    /\ e.op = "ToHereRefused"
    /\ UserLabel(e)
    /\ tvName[e.label].id \in deleted \cup timedOut
    /\ UNCHANGED vars

ObsDropRRef(e) ==
    /\ e.op = "DropRRef"
    /\ e.label \in DOMAIN tvName
    /\ LET h == tvName[e.label]
       IN CASE h.kind = "user" -> DropRRef(e.node, h.id)
            [] h.kind = "owner" -> DropOwnerRRef(e.node, h.id)
            \* an OwnerRRef received as an argument was never application-held
            [] h.kind = "arg" -> UNCHANGED vars
            [] OTHER -> FALSE

\* The future of rpc.remote completed ("ok") or failed with a timeout ("timeout": the
\* spec's TimeOutRemote, observed where the program saw it).
ObsRemoteDone(e) ==
    /\ e.op = "RemoteDone"
    /\ e.label \in DOMAIN tvName
    /\ LET h == tvName[e.label]
       IN IF e.outcome = "timeout"
          THEN IF h.kind = "user"
               THEN TimeOutRemote(e.node, h.rref, h.id)
               ELSE /\ h.kind = "owner"
                    /\ TimeOutRemote(e.node, h.rref, h.rref)
          ELSE /\ e.outcome = "ok"
               /\ IF h.kind = "user"
                  THEN h.id \notin pendingUsers[e.node] \cup timedOut
                  ELSE h.kind = "owner" /\ h.rref \notin selfCalls[e.node]
               /\ UNCHANGED vars

\* rpc._rref_context_get_debug_info() on e.node: num_owner_rrefs = |owners_|,
\* num_pending_users = |pendingUsers_|, num_forks = the forks of all its OwnerRRefs.
\* (num_pending_futures counts unacknowledged control sends, which the spec does not
\* keep: it is logged, not checked.)
ObsCounters(e) ==
    /\ e.op = "Counters"
    /\ Cardinality(owners[e.node]) = e.owners
    /\ Cardinality(pendingUsers[e.node]) = e.users
    /\ Cardinality(forks[e.node]) = e.forks
    /\ UNCHANGED vars

\* The program calls rpc.shutdown() on e.node (the sweep may begin once all have).
ObsShutdownCalled(e) ==
    /\ e.op = "ShutdownCalled"
    /\ UNCHANGED vars

\* rpc.shutdown() returned on e.node: its RRefContext was destroyed.
ObsShutdownDone(e) ==
    /\ e.op = "ShutdownDone"
    /\ phase[e.node] = "destroyed"
    /\ UNCHANGED vars

\* The RRef.tla action an observed event took (its wrapper's), for coverage.
TVActOf(e) ==
    CASE e.op = "ToHereOk" -> "ReceiveFetchRet"
      [] e.op = "ToHereTimeout" -> "TimeOutToHere"
      [] e.op = "DropRRef" ->
            CASE tvName[e.label].kind = "owner" -> "DropOwnerRRef"
              [] tvName[e.label].kind = "user" -> "DropRRef"
              [] OTHER -> "probe"
      [] e.op = "RemoteDone" -> IF e.outcome = "timeout" THEN "TimeOutRemote" ELSE "probe"
      [] e.op \in {"Counters", "ShutdownCalled", "ShutdownDone", "ShutdownFailed",
                    "ToHereRefused"} -> "probe"
      [] OTHER -> e.op

\* rpc.shutdown() failed on e.node (torch's store barrier timed out): the spec's graceful
\* shutdown cannot complete because some OwnerRRef was leaked (MCRRef_pytorch_lateRemoteLeak
\* _shutdown: a fork of an abandoned OwnerRRef keeps owners_ from emptying, so destroyInstance
\* is never reached). Any other reason for a failed shutdown is unexplained.
ObsShutdownFailed(e) ==
    /\ e.op = "ShutdownFailed"
    /\ stopping
    /\ phase[e.node] # "destroyed"
    /\ \E w \in Workers : \E r \in owners[w] : Abandoned(r) /\ \E f \in forks[w] : f[1] = r
    /\ UNCHANGED vars

Observed(e) ==
    \/ ObsShutdownFailed(e)
    \/ ObsCreateLocalRRef(e)
    \/ ObsRemote(e)
    \/ ObsPrepareChildFork(e)
    \/ ObsGetOrCreateRRef(e)
    \/ ObsToHere(e)
    \/ ObsToHereOk(e)
    \/ ObsToHereTimeout(e)
    \/ ObsToHereRefused(e)
    \/ ObsDropRRef(e)
    \/ ObsRemoteDone(e)
    \/ ObsCounters(e)
    \/ ObsShutdownCalled(e)
    \/ ObsShutdownDone(e)

ObservedStep ==
    /\ tvCursor <= Len(TVTrace)
    /\ LET e == TVTrace[tvCursor] IN
        /\ Observed(e)
        \* labels change only where an observed event binds one
        /\ e.op \in {"ToHere", "ToHereOk", "ToHereTimeout", "ToHereRefused", "DropRRef",
                     "RemoteDone", "Counters", "ShutdownCalled", "ShutdownDone",
                     "ShutdownFailed"} => UNCHANGED tvName
    /\ tvCursor' = tvCursor + 1
    /\ tvHidden' = 0
    /\ tvAct' = TVActOf(TVTrace[tvCursor])

-----------------------------------------------------------------------------
(* Unobserved steps: torch's own, which no program sees                      *)

\* The protocol steps (deliveries, callbacks, the destructor, the shutdown
\* phases), the shutdown barrier, and the one fault torch takes without telling the
\* program: sendWithRetries re-sending a control message whose first attempt the agent
\* failed (RetrySend; the failed attempt is never delivered: LoseFirstAttempt).  Only the
\* types the session fails are re-sent: no attempt times out (the agent's timeout is 30 s,
\* every session's step far shorter).  Timeouts of rpc.remote and to_here are observed
\* (RemoteDone, ToHereTimeout), so they are never hidden.
\* The shutdown barrier (_wait_all_workers) passes only once every worker's program has
\* called rpc.shutdown(): TVShutdownAt is the last of those calls in the trace.
TVShutdownCalls == {i \in 1..Len(TVTrace) : TVTrace[i].op = "ShutdownCalled"}
TVShutdownAt ==
    IF TVShutdownCalls = {} THEN Len(TVTrace) + 1
    ELSE CHOOSE i \in TVShutdownCalls : \A j \in TVShutdownCalls : j <= i

\* ReceiveNext, the destructor and ShutdownNext of RRef.tla, disjunct by disjunct, each
\* naming itself in tvAct.
Named(A, name) == A /\ tvAct' = name
HiddenNext ==
    \/ \E m \in net :
        \/ m.type = "PYTHON_REMOTE_CALL" /\ Named(AssignOwnerRRef(m.dst, m.rref, m.fork), "AssignOwnerRRef")
        \/ m.type = "REMOTE_RET" /\ m.fork # m.rref
            /\ Named(ConfirmPendingUser(m.dst, m.rref, m.fork), "ConfirmPendingUser")
        \/ m.type = "REMOTE_RET" /\ m.fork = m.rref
            /\ Named(FinishCreatingOwnerRRef(m.dst, m.rref), "FinishCreatingOwnerRRef")
        \/ m.type = "PYTHON_RREF_FETCH_CALL"
            /\ Named(RetrieveOwnerRRef(m.dst, m.rref, m.fork), "RetrieveOwnerRRef")
        \/ m.type = "PYTHON_RREF_FETCH_RET"
            /\ Named(ReceiveFetchRet(m.dst, m.rref, m.fork), "ReceiveFetchRet")
        \/ m.type = "PYTHON_CALL" /\ Named(GetOrCreateRRef(m.dst, m.rref, m.fork), "GetOrCreateRRef")
        \/ m.type = "RREF_FORK_REQUEST"
            /\ Named(AddForkOfOwnerIfNotPresent(m.dst, m.rref, m.fork), "AddForkOfOwnerIfNotPresent")
        \/ m.type = "RREF_ACK" /\ Named(FinishForkRequest(m.dst, m.rref, m.fork), "FinishForkRequest")
        \/ m.type = "RREF_CHILD_ACCEPT"
            /\ Named(DelPendingChild(m.dst, m.rref, m.fork), "DelPendingChild")
        \/ m.type = "RREF_USER_DELETE"
            /\ Named(DelForkOfOwner(m.dst, m.rref, m.fork), "DelForkOfOwner")
        \/ m.type \in TVFailed /\ Named(RetrySend(m), "RetrySend")
        \/ m.type \in TVFailed /\ Named(LoseFirstAttempt(m), "LoseFirstAttempt")
    \/ \E u \in Users : Named(DelUser(u.on, u.fork), "DelUser")
    \/ \E w \in Workers :
        \/ Named(DelAllUsersAndUnforkedOwners(w), "DelAllUsersAndUnforkedOwners")
        \/ Named(DestroyInstance(w), "DestroyInstance")
    \/ tvCursor > TVShutdownAt /\ Named(WaitAllWorkers, "WaitAllWorkers")

\* With TVEager the search is the observed-first one: a fast way to find an accepting
\* behaviour (every behaviour it finds is one of the full search), which cannot prove a
\* rejection: tracecheck runs the full search (TVEager = FALSE) on every trace it rejects.
HiddenStep ==
    /\ tvHidden < TVHidden
    /\ TVEager => ~ENABLED ObservedStep
    /\ HiddenNext
    /\ tvHidden' = tvHidden + 1
    /\ UNCHANGED <<tvCursor, tvName>>

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
