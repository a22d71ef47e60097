------------------------------ MODULE TraceRRef -----------------------------
(***************************************************************************)
(* Trace validation against RRef.tla: tracecheck replays an                *)
(* implementation's trace by conjoining each event with the spec action it *)
(* names, with the event's parameters and its logged post-state            *)
(* (docs/conformance.md). A trace is accepted iff some behaviour consumes  *)
(* every event (and a finished run's end step); the furthest cursor TLC    *)
(* reaches names the first event no behaviour explains.                    *)
(*                                                                         *)
(* Generated from the protocol's mapping table (tracecheck.protocols) by   *)
(*     python -m tracecheck.replay.fixedspec --write                       *)
(* and checked against it before each TLC run and by tests: do not edit.   *)
(* The traces, and what depends on them (which logged sets are             *)
(* differences, the nodes, the end steps, a window's start), are in the    *)
(* generated module TraceData; the constants in the generated root.        *)
(***************************************************************************)
EXTENDS RRef, TLC, Naturals, Sequences, FiniteSets, TraceOps
INSTANCE TraceData
\* which trace, its cursor, hidden steps since the last event, the logged sets rebuilt
\* (tvLog), and the spec's initial values (tvInit, the simulation pass's resets)
VARIABLES tvTrace, tvCursor, tvHidden, tvLog, tvInit

\* TVNorm(S) = S; the test sorts S in place so that lookups in it are binary searches.
TVNorm(S) == IF Cardinality(S) >= 0 THEN S ELSE S
\* A trace is consumed once its cursor passes its events and its end step, if any.
TVLen(t) == Len(Traces[t]) + TVEndSteps[t]
\* tvLog is a tuple with one slot per (post expression k, node), key-major.
TVSlot(k, n) == (k - 1) * TVNodes + 1 + TVNode[n]
\* Post field i of event e (expression k) as logged: whole, or when TVDelta[k] the
\* node's last value patched with <<removed, added>>.
TVLogged(e, i, k) ==
  IF TVDelta[k] THEN TVPatch(tvLog[TVSlot(k, e[2])], e[4][i][1], e[4][i][2]) ELSE e[4][i]

\* Breadth-first search: any trace of the run; a window goes on from TVStart.
TraceInit ==
  /\ tvTrace \in 1..Len(Traces) /\ tvCursor = 1 /\ tvLog = TVLog0 /\ tvInit = <<>>
  /\ IF TVFromStart
     THEN \E tvS \in TVStart :
            /\ tvHidden = tvS[1]
            /\ nextId = tvS[2]
            /\ owners = tvS[3]
            /\ pendingOwners = tvS[4]
            /\ forks = tvS[5]
            /\ pendingUsers = tvS[6]
            /\ confirmedUsers = tvS[7]
            /\ pendingChildren = tvS[8]
            /\ ownerHeld = tvS[9]
            /\ selfCalls = tvS[10]
            /\ tombstones = tvS[11]
            /\ users = tvS[12]
            /\ held = tvS[13]
            /\ fetching = tvS[14]
            /\ fetched = tvS[15]
            /\ deleted = tvS[16]
            /\ timedOut = tvS[17]
            /\ remoteErrors = tvS[18]
            /\ net = tvS[19]
            /\ phase = tvS[20]
            /\ stopping = tvS[21]
            /\ removedForks = tvS[22]
            /\ erasedOwners = tvS[23]
     ELSE tvHidden = 0 /\ Init

IsCreateLocalRRef ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "CreateLocalRRef"
     /\ CreateLocalRRef(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 1)
            tvV2 == TVLogged(tvE, 2, 2)
        IN
        /\ nextId'[tvE[2]] = tvV1
        /\ ownerHeld'[tvE[2]] = tvV2
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV1 ELSE @,
                            ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV2 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsRemote ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "Remote"
     /\ Remote(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 1)
            tvV2 == TVLogged(tvE, 2, 3)
            tvV3 == TVLogged(tvE, 3, 4)
            tvV4 == TVLogged(tvE, 4, 2)
            tvV5 == TVLogged(tvE, 5, 5)
            tvV6 == TVLogged(tvE, 6, 6)
            tvV7 == TVLogged(tvE, 7, 7)
            tvV8 == TVLogged(tvE, 8, 8)
        IN
        /\ nextId'[tvE[2]] = tvV1
        /\ owners'[tvE[2]] = tvV2
        /\ forks'[tvE[2]] = tvV3
        /\ ownerHeld'[tvE[2]] = tvV4
        /\ selfCalls'[tvE[2]] = tvV5
        /\ pendingUsers'[tvE[2]] = tvV6
        /\ TVNewEntries(users, users') = tvV7
        /\ TVSliceBy(held', users', "on", tvE[2]) = tvV8
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV1 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV2 ELSE @,
                            ![TVSlot(4, tvE[2])] = IF TVDelta[4] THEN tvV3 ELSE @,
                            ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV4 ELSE @,
                            ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV5 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV6 ELSE @,
                            ![TVSlot(7, tvE[2])] = IF TVDelta[7] THEN tvV7 ELSE @,
                            ![TVSlot(8, tvE[2])] = IF TVDelta[8] THEN tvV8 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsPrepareChildFork ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "PrepareChildFork"
     /\ PrepareChildFork(tvE[3][1], tvE[3][2], tvE[3][3], tvE[3][4])
     /\ LET tvV1 == TVLogged(tvE, 1, 1)
            tvV2 == TVLogged(tvE, 2, 4)
            tvV3 == TVLogged(tvE, 3, 3)
            tvV4 == TVLogged(tvE, 4, 9)
        IN
        /\ nextId'[tvE[2]] = tvV1
        /\ forks'[tvE[2]] = tvV2
        /\ owners'[tvE[2]] = tvV3
        /\ pendingChildren'[tvE[2]] = tvV4
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV1 ELSE @,
                            ![TVSlot(4, tvE[2])] = IF TVDelta[4] THEN tvV2 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV3 ELSE @,
                            ![TVSlot(9, tvE[2])] = IF TVDelta[9] THEN tvV4 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsToHere ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "ToHere"
     /\ ToHere(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 10)
            tvV2 == TVLogged(tvE, 2, 11)
        IN
        /\ TVSliceBy(fetching', users', "on", tvE[2]) = tvV1
        /\ TVMinus(fetched', fetched) = tvV2
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(10, tvE[2])] = IF TVDelta[10] THEN tvV1 ELSE @,
                            ![TVSlot(11, tvE[2])] = IF TVDelta[11] THEN tvV2 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsDropRRef ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "DropRRef"
     /\ DropRRef(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 8)
        IN
        /\ TVSliceBy(held', users', "on", tvE[2]) = tvV1
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(8, tvE[2])] = IF TVDelta[8] THEN tvV1 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsDropOwnerRRef ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "DropOwnerRRef"
     /\ DropOwnerRRef(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 2)
        IN
        /\ ownerHeld'[tvE[2]] = tvV1
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV1 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsRetrySend ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "RetrySend"
     /\ RetrySend(tvE[3][1])
     /\ UNCHANGED tvLog
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsLoseFirstAttempt ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "LoseFirstAttempt"
     /\ LoseFirstAttempt(tvE[3][1])
     /\ UNCHANGED tvLog
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsTimeOutRemote ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "TimeOutRemote"
     /\ TimeOutRemote(tvE[3][1], tvE[3][2], tvE[3][3])
     /\ LET tvV1 == TVLogged(tvE, 1, 6)
            tvV2 == TVLogged(tvE, 2, 12)
            tvV3 == TVLogged(tvE, 3, 13)
            tvV4 == TVLogged(tvE, 4, 5)
            tvV5 == TVLogged(tvE, 5, 4)
            tvV6 == TVLogged(tvE, 6, 3)
        IN
        /\ pendingUsers'[tvE[2]] = tvV1
        /\ confirmedUsers'[tvE[2]] = tvV2
        /\ TVMinus(timedOut', timedOut) = tvV3
        /\ selfCalls'[tvE[2]] = tvV4
        /\ forks'[tvE[2]] = tvV5
        /\ owners'[tvE[2]] = tvV6
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV1 ELSE @,
                            ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV2 ELSE @,
                            ![TVSlot(13, tvE[2])] = IF TVDelta[13] THEN tvV3 ELSE @,
                            ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV4 ELSE @,
                            ![TVSlot(4, tvE[2])] = IF TVDelta[4] THEN tvV5 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV6 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsTimeOutToHere ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "TimeOutToHere"
     /\ TimeOutToHere(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 10)
        IN
        /\ TVSliceBy(fetching', users', "on", tvE[2]) = tvV1
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(10, tvE[2])] = IF TVDelta[10] THEN tvV1 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsDelUser ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "DelUser"
     /\ DelUser(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 14)
            tvV2 == TVLogged(tvE, 2, 12)
        IN
        /\ TVMinus(deleted', deleted) = tvV1
        /\ confirmedUsers'[tvE[2]] = tvV2
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(14, tvE[2])] = IF TVDelta[14] THEN tvV1 ELSE @,
                            ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV2 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsAssignOwnerRRef ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "AssignOwnerRRef"
     /\ AssignOwnerRRef(tvE[3][1], tvE[3][2], tvE[3][3])
     /\ LET tvV1 == TVLogged(tvE, 1, 15)
            tvV2 == TVLogged(tvE, 2, 3)
            tvV3 == TVLogged(tvE, 3, 4)
            tvV4 == TVLogged(tvE, 4, 16)
        IN
        /\ TVMinus(net, net') = tvV1
        /\ owners'[tvE[2]] = tvV2
        /\ forks'[tvE[2]] = tvV3
        /\ pendingOwners'[tvE[2]] = tvV4
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV1 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV2 ELSE @,
                            ![TVSlot(4, tvE[2])] = IF TVDelta[4] THEN tvV3 ELSE @,
                            ![TVSlot(16, tvE[2])] = IF TVDelta[16] THEN tvV4 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsConfirmPendingUser ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "ConfirmPendingUser"
     /\ ConfirmPendingUser(tvE[3][1], tvE[3][2], tvE[3][3])
     /\ LET tvV1 == TVLogged(tvE, 1, 15)
            tvV2 == TVLogged(tvE, 2, 6)
            tvV3 == TVLogged(tvE, 3, 12)
        IN
        /\ TVMinus(net, net') = tvV1
        /\ pendingUsers'[tvE[2]] = tvV2
        /\ confirmedUsers'[tvE[2]] = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV1 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV2 ELSE @,
                            ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsFinishCreatingOwnerRRef ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "FinishCreatingOwnerRRef"
     /\ FinishCreatingOwnerRRef(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 15)
            tvV2 == TVLogged(tvE, 2, 5)
            tvV3 == TVLogged(tvE, 3, 4)
            tvV4 == TVLogged(tvE, 4, 3)
        IN
        /\ TVMinus(net, net') = tvV1
        /\ selfCalls'[tvE[2]] = tvV2
        /\ forks'[tvE[2]] = tvV3
        /\ owners'[tvE[2]] = tvV4
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV1 ELSE @,
                            ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV2 ELSE @,
                            ![TVSlot(4, tvE[2])] = IF TVDelta[4] THEN tvV3 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV4 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsRetrieveOwnerRRef ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "RetrieveOwnerRRef"
     /\ RetrieveOwnerRRef(tvE[3][1], tvE[3][2], tvE[3][3])
     /\ LET tvV1 == TVLogged(tvE, 1, 15)
            tvV2 == TVLogged(tvE, 2, 16)
        IN
        /\ TVMinus(net, net') = tvV1
        /\ pendingOwners'[tvE[2]] = tvV2
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV1 ELSE @,
                            ![TVSlot(16, tvE[2])] = IF TVDelta[16] THEN tvV2 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsReceiveFetchRet ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "ReceiveFetchRet"
     /\ ReceiveFetchRet(tvE[3][1], tvE[3][2], tvE[3][3])
     /\ LET tvV1 == TVLogged(tvE, 1, 15)
            tvV2 == TVLogged(tvE, 2, 10)
        IN
        /\ TVMinus(net, net') = tvV1
        /\ TVSliceBy(fetching', users', "on", tvE[2]) = tvV2
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV1 ELSE @,
                            ![TVSlot(10, tvE[2])] = IF TVDelta[10] THEN tvV2 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsGetOrCreateRRef ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "GetOrCreateRRef"
     /\ GetOrCreateRRef(tvE[3][1], tvE[3][2], tvE[3][3])
     /\ LET tvV1 == TVLogged(tvE, 1, 15)
            tvV2 == TVLogged(tvE, 2, 3)
            tvV3 == TVLogged(tvE, 3, 16)
            tvV4 == TVLogged(tvE, 4, 7)
            tvV5 == TVLogged(tvE, 5, 8)
            tvV6 == TVLogged(tvE, 6, 6)
            tvV7 == TVLogged(tvE, 7, 12)
        IN
        /\ TVMinus(net, net') = tvV1
        /\ owners'[tvE[2]] = tvV2
        /\ pendingOwners'[tvE[2]] = tvV3
        /\ TVNewEntries(users, users') = tvV4
        /\ TVSliceBy(held', users', "on", tvE[2]) = tvV5
        /\ pendingUsers'[tvE[2]] = tvV6
        /\ confirmedUsers'[tvE[2]] = tvV7
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV1 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV2 ELSE @,
                            ![TVSlot(16, tvE[2])] = IF TVDelta[16] THEN tvV3 ELSE @,
                            ![TVSlot(7, tvE[2])] = IF TVDelta[7] THEN tvV4 ELSE @,
                            ![TVSlot(8, tvE[2])] = IF TVDelta[8] THEN tvV5 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV6 ELSE @,
                            ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV7 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsAddForkOfOwnerIfNotPresent ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "AddForkOfOwnerIfNotPresent"
     /\ AddForkOfOwnerIfNotPresent(tvE[3][1], tvE[3][2], tvE[3][3])
     /\ LET tvV1 == TVLogged(tvE, 1, 15)
            tvV2 == TVLogged(tvE, 2, 4)
        IN
        /\ TVMinus(net, net') = tvV1
        /\ forks'[tvE[2]] = tvV2
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV1 ELSE @,
                            ![TVSlot(4, tvE[2])] = IF TVDelta[4] THEN tvV2 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsFinishForkRequest ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "FinishForkRequest"
     /\ FinishForkRequest(tvE[3][1], tvE[3][2], tvE[3][3])
     /\ LET tvV1 == TVLogged(tvE, 1, 15)
            tvV2 == TVLogged(tvE, 2, 6)
            tvV3 == TVLogged(tvE, 3, 12)
        IN
        /\ TVMinus(net, net') = tvV1
        /\ pendingUsers'[tvE[2]] = tvV2
        /\ confirmedUsers'[tvE[2]] = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV1 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV2 ELSE @,
                            ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsDelPendingChild ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "DelPendingChild"
     /\ DelPendingChild(tvE[3][1], tvE[3][2], tvE[3][3])
     /\ LET tvV1 == TVLogged(tvE, 1, 15)
            tvV2 == TVLogged(tvE, 2, 9)
        IN
        /\ TVMinus(net, net') = tvV1
        /\ pendingChildren'[tvE[2]] = tvV2
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV1 ELSE @,
                            ![TVSlot(9, tvE[2])] = IF TVDelta[9] THEN tvV2 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsDelForkOfOwner ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "DelForkOfOwner"
     /\ DelForkOfOwner(tvE[3][1], tvE[3][2], tvE[3][3])
     /\ LET tvV1 == TVLogged(tvE, 1, 15)
            tvV2 == TVLogged(tvE, 2, 4)
            tvV3 == TVLogged(tvE, 3, 3)
            tvV4 == TVLogged(tvE, 4, 17)
        IN
        /\ TVMinus(net, net') = tvV1
        /\ forks'[tvE[2]] = tvV2
        /\ owners'[tvE[2]] = tvV3
        /\ TVMinus(tombstones'[tvE[2]], tombstones[tvE[2]]) = tvV4
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV1 ELSE @,
                            ![TVSlot(4, tvE[2])] = IF TVDelta[4] THEN tvV2 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV3 ELSE @,
                            ![TVSlot(17, tvE[2])] = IF TVDelta[17] THEN tvV4 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsWaitAllWorkers ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "WaitAllWorkers"
     /\ WaitAllWorkers
     /\ LET tvV1 == TVLogged(tvE, 1, 18)
        IN
        /\ stopping' = tvV1
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(18, tvE[2])] = IF TVDelta[18] THEN tvV1 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsDelAllUsersAndUnforkedOwners ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "DelAllUsersAndUnforkedOwners"
     /\ DelAllUsersAndUnforkedOwners(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 14)
            tvV2 == TVLogged(tvE, 2, 12)
            tvV3 == TVLogged(tvE, 3, 3)
            tvV4 == TVLogged(tvE, 4, 19)
        IN
        /\ TVMinus(deleted', deleted) = tvV1
        /\ confirmedUsers'[tvE[2]] = tvV2
        /\ owners'[tvE[2]] = tvV3
        /\ phase'[tvE[2]] = tvV4
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(14, tvE[2])] = IF TVDelta[14] THEN tvV1 ELSE @,
                            ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV2 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV3 ELSE @,
                            ![TVSlot(19, tvE[2])] = IF TVDelta[19] THEN tvV4 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsDestroyInstance ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "DestroyInstance"
     /\ DestroyInstance(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 19)
            tvV2 == TVLogged(tvE, 2, 16)
        IN
        /\ phase'[tvE[2]] = tvV1
        /\ pendingOwners'[tvE[2]] = tvV2
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(19, tvE[2])] = IF TVDelta[19] THEN tvV1 ELSE @,
                            ![TVSlot(16, tvE[2])] = IF TVDelta[16] THEN tvV2 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

\* A run that says it finished (its end line) ends quiescent: one more step, at
\* the trace's end, that changes nothing and needs every condition below.
TVQuiet1 == net = {}
TVQuiet2 == \A tvW \in Workers : pendingUsers[tvW] = {}
TVQuiet3 == \A tvW \in Workers : pendingChildren[tvW] = {}
TVQuiet4 == fetching = {} /\ \A tvW \in Workers : pendingOwners[tvW] = {}
TVQuiet5 == \A tvW \in Workers : selfCalls[tvW] = {}
TVQuiet6 == stopping => \A tvW \in Workers : phase[tvW] = "destroyed"
IsTVEnd ==
  /\ tvCursor = Len(Traces[tvTrace]) + 1 /\ TVEndSteps[tvTrace] = 1
  /\ TVQuiet1 /\ TVQuiet2 /\ TVQuiet3 /\ TVQuiet4 /\ TVQuiet5 /\ TVQuiet6
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0
  /\ UNCHANGED <<vars, tvLog>> /\ UNCHANGED <<tvTrace, tvInit>>

TraceNext == IsCreateLocalRRef \/ IsRemote \/ IsPrepareChildFork \/ IsToHere \/ IsDropRRef \/ IsDropOwnerRRef \/ IsRetrySend \/ IsLoseFirstAttempt \/ IsTimeOutRemote \/ IsTimeOutToHere \/ IsDelUser \/ IsAssignOwnerRRef \/ IsConfirmPendingUser \/ IsFinishCreatingOwnerRRef \/ IsRetrieveOwnerRRef \/ IsReceiveFetchRet \/ IsGetOrCreateRRef \/ IsAddForkOfOwnerIfNotPresent \/ IsFinishForkRequest \/ IsDelPendingChild \/ IsDelForkOfOwner \/ IsWaitAllWorkers \/ IsDelAllUsersAndUnforkedOwners \/ IsDestroyInstance \/ IsTVEnd

\* Per trace, the furthest cursor reached; each new maximum is printed. In a window of
\* a longer trace (TVPrintEnds), every state that consumed it is printed too.
ASSUME \A i \in 1..Len(Traces) : TLCSet(i, 0)
TraceWatch ==
  /\ (tvCursor > TLCGet(tvTrace) => (TLCSet(tvTrace, tvCursor) /\ PrintT(<<"tv_max", tvTrace, tvCursor>>)))
  /\ (TVPrintEnds /\ tvCursor > TVLen(tvTrace) => PrintT(<<"tv_state", tvHidden, <<nextId, owners, pendingOwners, forks, pendingUsers, confirmedUsers, pendingChildren, ownerHeld, selfCalls, tombstones, users, held, fetching, fetched, deleted, timedOut, remoteErrors, net, phase, stopping, removedForks, erasedOwners>>>>))

\* Simulation pass: trace after trace in one behaviour, the spec reset in between
\* (a window of a long trace: one of TVStart's states, and its end state printed).
SimInit ==
  /\ tvTrace = 1 /\ tvCursor = 1 /\ tvLog = TVLog0
  /\ IF TVFromStart
     THEN \E tvS \in TVStart :
            /\ tvHidden = tvS[1]
            /\ nextId = tvS[2]
            /\ owners = tvS[3]
            /\ pendingOwners = tvS[4]
            /\ forks = tvS[5]
            /\ pendingUsers = tvS[6]
            /\ confirmedUsers = tvS[7]
            /\ pendingChildren = tvS[8]
            /\ ownerHeld = tvS[9]
            /\ selfCalls = tvS[10]
            /\ tombstones = tvS[11]
            /\ users = tvS[12]
            /\ held = tvS[13]
            /\ fetching = tvS[14]
            /\ fetched = tvS[15]
            /\ deleted = tvS[16]
            /\ timedOut = tvS[17]
            /\ remoteErrors = tvS[18]
            /\ net = tvS[19]
            /\ phase = tvS[20]
            /\ stopping = tvS[21]
            /\ removedForks = tvS[22]
            /\ erasedOwners = tvS[23]
     ELSE tvHidden = 0 /\ Init
  /\ tvInit = vars
TraceReset == tvCursor > TVLen(tvTrace) /\ tvTrace < Len(Traces)
  /\ tvTrace' = tvTrace + 1 /\ tvCursor' = 1 /\ tvHidden' = 0
  /\ nextId' = tvInit[1] /\ owners' = tvInit[2] /\ pendingOwners' = tvInit[3] /\ forks' = tvInit[4] /\ pendingUsers' = tvInit[5] /\ confirmedUsers' = tvInit[6] /\ pendingChildren' = tvInit[7] /\ ownerHeld' = tvInit[8] /\ selfCalls' = tvInit[9] /\ tombstones' = tvInit[10] /\ users' = tvInit[11] /\ held' = tvInit[12] /\ fetching' = tvInit[13] /\ fetched' = tvInit[14] /\ deleted' = tvInit[15] /\ timedOut' = tvInit[16] /\ remoteErrors' = tvInit[17] /\ net' = tvInit[18] /\ phase' = tvInit[19] /\ stopping' = tvInit[20] /\ removedForks' = tvInit[21] /\ erasedOwners' = tvInit[22] /\ tvLog' = TVLog0 /\ UNCHANGED tvInit
SimNext == TraceNext \/ TraceReset
\* An invariant that always holds and prints when a trace is consumed.
TraceDone == tvCursor > TVLen(tvTrace) =>
  /\ PrintT(<<"tv_done", tvTrace>>)
  /\ (TVPrintEnds => PrintT(<<"tv_state", tvHidden, <<nextId, owners, pendingOwners, forks, pendingUsers, confirmedUsers, pendingChildren, ownerHeld, selfCalls, tombstones, users, held, fetching, fetched, deleted, timedOut, remoteErrors, net, phase, stopping, removedForks, erasedOwners>>>>))
=============================================================================
