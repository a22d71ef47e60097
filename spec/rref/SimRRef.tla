------------------------------- MODULE SimRRef -------------------------------
(***************************************************************************)
(* RRef for TLC's random simulation, with a ghost variable that records   *)
(* which action the last step took, its parameters and the acting worker,  *)
(* so that a simulated behaviour can be written out as a trace in our      *)
(* JSON lines (tracecheck.campaigns.simtraces), replayed by the checker.   *)
(* Traces produced by the spec itself must be accepted: that is the        *)
(* checker's completeness test against an independent trace producer.     *)
(*                                                                         *)
(* SimNext is RRef's Next disjunct by disjunct, with the same quantifiers  *)
(* and the spec's own actions; each disjunct only adds the ghost's update. *)
(* The ghost is read by nothing, so it changes no behaviour of RRef.       *)
(***************************************************************************)
EXTENDS MCRRef

\* The depth at which a behaviour is cut and printed (SimDepthInv fails).
CONSTANT SimDepth

VARIABLE simLast  \* <<action name, acting worker, <<parameters in order>>>>

simVars == <<vars, simLast>>

Did(name, actor, params) == simLast' = <<name, actor, params>>

SimInit == Init /\ simLast = <<"Init", "", <<>>>>

SimApp ==
    \/ \E w \in Workers : CreateLocalRRef(w) /\ Did("CreateLocalRRef", w, <<w>>)
    \/ \E w, d \in Workers : Remote(w, d) /\ Did("Remote", w, <<w, d>>)
    \/ \E w, d \in Workers : \E r \in ownerHeld[w] \cup owners[w] :
          PrepareChildFork(w, d, r, r) /\ Did("PrepareChildFork", w, <<w, d, r, r>>)
    \/ \E d \in Workers : \E u \in Users :
          /\ PrepareChildFork(u.on, d, u.rref, u.fork)
          /\ Did("PrepareChildFork", u.on, <<u.on, d, u.rref, u.fork>>)
    \/ \E u \in Users : ToHere(u.on, u.fork) /\ Did("ToHere", u.on, <<u.on, u.fork>>)
    \/ \E u \in Users : DropRRef(u.on, u.fork) /\ Did("DropRRef", u.on, <<u.on, u.fork>>)
    \/ \E w \in Workers : \E r \in ownerHeld[w] :
          DropOwnerRRef(w, r) /\ Did("DropOwnerRRef", w, <<w, r>>)

\* A retry is sendWithRetries on the sender: the implementation logs it there.
SimFault ==
    \/ \E m \in net : RetrySend(m) /\ Did("RetrySend", m.src, <<m>>)
    \/ \E m \in net : LoseFirstAttempt(m) /\ Did("LoseFirstAttempt", m.src, <<m>>)
    \/ \E u \in Users : TimeOutRemote(u.on, u.rref, u.fork)
                        /\ Did("TimeOutRemote", u.on, <<u.on, u.rref, u.fork>>)
    \/ \E w \in Workers : \E r \in selfCalls[w] :
          TimeOutRemote(w, r, r) /\ Did("TimeOutRemote", w, <<w, r, r>>)
    \/ \E u \in Users : TimeOutToHere(u.on, u.fork)
                        /\ Did("TimeOutToHere", u.on, <<u.on, u.fork>>)

\* RRef's ReceiveNext, one disjunct per message type.
SimReceive ==
    \E m \in net :
        \/ m.type = "PYTHON_REMOTE_CALL" /\ AssignOwnerRRef(m.dst, m.rref, m.fork)
           /\ Did("AssignOwnerRRef", m.dst, <<m.dst, m.rref, m.fork>>)
        \/ m.type = "REMOTE_RET" /\ m.fork # m.rref /\ ConfirmPendingUser(m.dst, m.rref, m.fork)
           /\ Did("ConfirmPendingUser", m.dst, <<m.dst, m.rref, m.fork>>)
        \/ m.type = "REMOTE_RET" /\ m.fork = m.rref /\ FinishCreatingOwnerRRef(m.dst, m.rref)
           /\ Did("FinishCreatingOwnerRRef", m.dst, <<m.dst, m.rref>>)
        \/ m.type = "PYTHON_RREF_FETCH_CALL" /\ RetrieveOwnerRRef(m.dst, m.rref, m.fork)
           /\ Did("RetrieveOwnerRRef", m.dst, <<m.dst, m.rref, m.fork>>)
        \/ m.type = "PYTHON_RREF_FETCH_RET" /\ ReceiveFetchRet(m.dst, m.rref, m.fork)
           /\ Did("ReceiveFetchRet", m.dst, <<m.dst, m.rref, m.fork>>)
        \/ m.type = "PYTHON_CALL" /\ GetOrCreateRRef(m.dst, m.rref, m.fork)
           /\ Did("GetOrCreateRRef", m.dst, <<m.dst, m.rref, m.fork>>)
        \/ m.type = "RREF_FORK_REQUEST" /\ AddForkOfOwnerIfNotPresent(m.dst, m.rref, m.fork)
           /\ Did("AddForkOfOwnerIfNotPresent", m.dst, <<m.dst, m.rref, m.fork>>)
        \/ m.type = "RREF_ACK" /\ FinishForkRequest(m.dst, m.rref, m.fork)
           /\ Did("FinishForkRequest", m.dst, <<m.dst, m.rref, m.fork>>)
        \/ m.type = "RREF_CHILD_ACCEPT" /\ DelPendingChild(m.dst, m.rref, m.fork)
           /\ Did("DelPendingChild", m.dst, <<m.dst, m.rref, m.fork>>)
        \/ m.type = "RREF_USER_DELETE" /\ DelForkOfOwner(m.dst, m.rref, m.fork)
           /\ Did("DelForkOfOwner", m.dst, <<m.dst, m.rref, m.fork>>)

SimSystem ==
    \/ SimReceive
    \/ \E u \in Users : DelUser(u.on, u.fork) /\ Did("DelUser", u.on, <<u.on, u.fork>>)

\* The shutdown actions are left out: SimRRef models run with Shutdown = FALSE, where
\* RRef's ShutdownNext and WaitAllWorkers are never enabled; so are the PyTorch-only faults
\* FailRemote and ExhaustRetries (the Reference variant, UnknownErrors = RetryExhaustion = FALSE).
SimNext == SimApp \/ SimFault \/ SimSystem

\* Fails at SimDepth, so that TLC prints the behaviour so far.
SimDepthInv == TLCGet("level") < SimDepth

\* Id budget of every worker in simulation models.
CONSTANT SimIds
SimMaxLocalId == [w \in Workers |-> SimIds]

=============================================================================
