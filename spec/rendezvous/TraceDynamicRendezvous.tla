----------------------- MODULE TraceDynamicRendezvous -----------------------
(***************************************************************************)
(* Trace validation against DynamicRendezvous.tla: tracecheck replays an   *)
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
EXTENDS DynamicRendezvous, TLC, Naturals, Sequences, FiniteSets, TraceOps
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
            /\ store = tvS[2]
            /\ tokenCurrent = tvS[3]
            /\ local = tvS[4]
            /\ dirty = tvS[5]
            /\ fresh = tvS[6]
            /\ pc = tvS[7]
            /\ op = tvS[8]
            /\ opDl = tvS[9]
            /\ result = tvS[10]
            /\ view = tvS[11]
     ELSE tvHidden = 0 /\ Init

IsTick ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "Tick"
     /\ Tick
     /\ UNCHANGED tvLog
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsNextRendezvous ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "NextRendezvous"
     /\ NextRendezvous(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 1)
            tvV2 == TVLogged(tvE, 2, 2)
            tvV3 == TVLogged(tvE, 3, 3)
            tvV4 == TVLogged(tvE, 4, 4)
        IN
        /\ pc'[tvE[2]] = tvV1
        /\ op'[tvE[2]] = tvV2
        /\ opDl'[tvE[2]] = tvV3
        /\ result'[tvE[2]] = tvV4
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV1 ELSE @,
                            ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV2 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV3 ELSE @,
                            ![TVSlot(4, tvE[2])] = IF TVDelta[4] THEN tvV4 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsKeepAliveTimer ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "KeepAliveTimer"
     /\ KeepAliveTimer(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 1)
            tvV2 == TVLogged(tvE, 2, 2)
            tvV3 == TVLogged(tvE, 3, 3)
        IN
        /\ pc'[tvE[2]] = tvV1
        /\ op'[tvE[2]] = tvV2
        /\ opDl'[tvE[2]] = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV1 ELSE @,
                            ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV2 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsSetClosed ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "SetClosed"
     /\ SetClosed(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 1)
            tvV2 == TVLogged(tvE, 2, 2)
            tvV3 == TVLogged(tvE, 3, 3)
        IN
        /\ pc'[tvE[2]] = tvV1
        /\ op'[tvE[2]] = tvV2
        /\ opDl'[tvE[2]] = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV1 ELSE @,
                            ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV2 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsSyncRead ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "SyncRead"
     /\ SyncRead(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 5)
            tvV2 == TVLogged(tvE, 2, 6)
            tvV3 == TVLogged(tvE, 3, 7)
            tvV4 == TVLogged(tvE, 4, 1)
        IN
        /\ LET tvS == local'[tvE[2]] IN [tvS EXCEPT !.deadline = IF tvS.deadline = NoDeadline THEN <<>> ELSE <<tvS.deadline>>] = tvV1
        /\ dirty'[tvE[2]] = tvV2
        /\ (fresh'[tvE[2]] > 0) = tvV3
        /\ pc'[tvE[2]] = tvV4
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV1 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV2 ELSE @,
                            ![TVSlot(7, tvE[2])] = IF TVDelta[7] THEN tvV3 ELSE @,
                            ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV4 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsSyncCached ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "SyncCached"
     /\ SyncCached(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 1)
        IN
        /\ pc'[tvE[2]] = tvV1
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV1 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsSyncWriteWon ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "SyncWriteWon"
     /\ SyncWriteWon(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 8)
            tvV2 == TVLogged(tvE, 2, 5)
            tvV3 == TVLogged(tvE, 3, 6)
            tvV4 == TVLogged(tvE, 4, 7)
            tvV5 == TVLogged(tvE, 5, 1)
        IN
        /\ LET tvS == store' IN [tvS EXCEPT !.deadline = IF tvS.deadline = NoDeadline THEN <<>> ELSE <<tvS.deadline>>] = tvV1
        /\ LET tvS == local'[tvE[2]] IN [tvS EXCEPT !.deadline = IF tvS.deadline = NoDeadline THEN <<>> ELSE <<tvS.deadline>>] = tvV2
        /\ dirty'[tvE[2]] = tvV3
        /\ (fresh'[tvE[2]] > 0) = tvV4
        /\ pc'[tvE[2]] = tvV5
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(8, tvE[2])] = IF TVDelta[8] THEN tvV1 ELSE @,
                            ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV2 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV3 ELSE @,
                            ![TVSlot(7, tvE[2])] = IF TVDelta[7] THEN tvV4 ELSE @,
                            ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV5 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsSyncWriteLost ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "SyncWriteLost"
     /\ SyncWriteLost(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 5)
            tvV2 == TVLogged(tvE, 2, 6)
            tvV3 == TVLogged(tvE, 3, 7)
            tvV4 == TVLogged(tvE, 4, 1)
        IN
        /\ LET tvS == local'[tvE[2]] IN [tvS EXCEPT !.deadline = IF tvS.deadline = NoDeadline THEN <<>> ELSE <<tvS.deadline>>] = tvV1
        /\ dirty'[tvE[2]] = tvV2
        /\ (fresh'[tvE[2]] > 0) = tvV3
        /\ pc'[tvE[2]] = tvV4
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV1 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV2 ELSE @,
                            ![TVSlot(7, tvE[2])] = IF TVDelta[7] THEN tvV3 ELSE @,
                            ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV4 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsKeepAlive ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "KeepAlive"
     /\ KeepAlive(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 5)
            tvV2 == TVLogged(tvE, 2, 6)
            tvV3 == TVLogged(tvE, 3, 1)
        IN
        /\ LET tvS == local'[tvE[2]] IN [tvS EXCEPT !.deadline = IF tvS.deadline = NoDeadline THEN <<>> ELSE <<tvS.deadline>>] = tvV1
        /\ dirty'[tvE[2]] = tvV2
        /\ pc'[tvE[2]] = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV1 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV2 ELSE @,
                            ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsAddToParticipants ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "AddToParticipants"
     /\ AddToParticipants(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 5)
            tvV2 == TVLogged(tvE, 2, 6)
            tvV3 == TVLogged(tvE, 3, 1)
        IN
        /\ LET tvS == local'[tvE[2]] IN [tvS EXCEPT !.deadline = IF tvS.deadline = NoDeadline THEN <<>> ELSE <<tvS.deadline>>] = tvV1
        /\ dirty'[tvE[2]] = tvV2
        /\ pc'[tvE[2]] = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV1 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV2 ELSE @,
                            ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsAddToWaitList ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "AddToWaitList"
     /\ AddToWaitList(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 5)
            tvV2 == TVLogged(tvE, 2, 6)
            tvV3 == TVLogged(tvE, 3, 1)
        IN
        /\ LET tvS == local'[tvE[2]] IN [tvS EXCEPT !.deadline = IF tvS.deadline = NoDeadline THEN <<>> ELSE <<tvS.deadline>>] = tvV1
        /\ dirty'[tvE[2]] = tvV2
        /\ pc'[tvE[2]] = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV1 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV2 ELSE @,
                            ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsAddToRedundancyList ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "AddToRedundancyList"
     /\ AddToRedundancyList(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 5)
            tvV2 == TVLogged(tvE, 2, 6)
            tvV3 == TVLogged(tvE, 3, 1)
        IN
        /\ LET tvS == local'[tvE[2]] IN [tvS EXCEPT !.deadline = IF tvS.deadline = NoDeadline THEN <<>> ELSE <<tvS.deadline>>] = tvV1
        /\ dirty'[tvE[2]] = tvV2
        /\ pc'[tvE[2]] = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV1 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV2 ELSE @,
                            ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsRemoveFromParticipants ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "RemoveFromParticipants"
     /\ RemoveFromParticipants(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 5)
            tvV2 == TVLogged(tvE, 2, 6)
            tvV3 == TVLogged(tvE, 3, 1)
        IN
        /\ LET tvS == local'[tvE[2]] IN [tvS EXCEPT !.deadline = IF tvS.deadline = NoDeadline THEN <<>> ELSE <<tvS.deadline>>] = tvV1
        /\ dirty'[tvE[2]] = tvV2
        /\ pc'[tvE[2]] = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV1 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV2 ELSE @,
                            ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsRemoveFromWaitList ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "RemoveFromWaitList"
     /\ RemoveFromWaitList(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 5)
            tvV2 == TVLogged(tvE, 2, 6)
            tvV3 == TVLogged(tvE, 3, 1)
        IN
        /\ LET tvS == local'[tvE[2]] IN [tvS EXCEPT !.deadline = IF tvS.deadline = NoDeadline THEN <<>> ELSE <<tvS.deadline>>] = tvV1
        /\ dirty'[tvE[2]] = tvV2
        /\ pc'[tvE[2]] = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV1 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV2 ELSE @,
                            ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsRemoveFromRedundancyList ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "RemoveFromRedundancyList"
     /\ RemoveFromRedundancyList(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 5)
            tvV2 == TVLogged(tvE, 2, 6)
            tvV3 == TVLogged(tvE, 3, 1)
            tvV4 == TVLogged(tvE, 4, 3)
        IN
        /\ LET tvS == local'[tvE[2]] IN [tvS EXCEPT !.deadline = IF tvS.deadline = NoDeadline THEN <<>> ELSE <<tvS.deadline>>] = tvV1
        /\ dirty'[tvE[2]] = tvV2
        /\ pc'[tvE[2]] = tvV3
        /\ opDl'[tvE[2]] = tvV4
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV1 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV2 ELSE @,
                            ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV3 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV4 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsMarkRendezvousComplete ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "MarkRendezvousComplete"
     /\ MarkRendezvousComplete(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 5)
            tvV2 == TVLogged(tvE, 2, 6)
            tvV3 == TVLogged(tvE, 3, 1)
        IN
        /\ LET tvS == local'[tvE[2]] IN [tvS EXCEPT !.deadline = IF tvS.deadline = NoDeadline THEN <<>> ELSE <<tvS.deadline>>] = tvV1
        /\ dirty'[tvE[2]] = tvV2
        /\ pc'[tvE[2]] = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV1 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV2 ELSE @,
                            ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsMarkRendezvousClosed ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "MarkRendezvousClosed"
     /\ MarkRendezvousClosed(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 5)
            tvV2 == TVLogged(tvE, 2, 6)
            tvV3 == TVLogged(tvE, 3, 1)
        IN
        /\ LET tvS == local'[tvE[2]] IN [tvS EXCEPT !.deadline = IF tvS.deadline = NoDeadline THEN <<>> ELSE <<tvS.deadline>>] = tvV1
        /\ dirty'[tvE[2]] = tvV2
        /\ pc'[tvE[2]] = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV1 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV2 ELSE @,
                            ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsDelay ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "Delay"
     /\ Delay(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 1)
        IN
        /\ pc'[tvE[2]] = tvV1
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV1 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsFinish ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "Finish"
     /\ Finish(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 1)
            tvV2 == TVLogged(tvE, 2, 2)
            tvV3 == TVLogged(tvE, 3, 3)
            tvV4 == TVLogged(tvE, 4, 4)
            tvV5 == TVLogged(tvE, 5, 9)
        IN
        /\ pc'[tvE[2]] = tvV1
        /\ op'[tvE[2]] = tvV2
        /\ opDl'[tvE[2]] = tvV3
        /\ result'[tvE[2]] = tvV4
        /\ view'[tvE[2]] = tvV5
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV1 ELSE @,
                            ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV2 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV3 ELSE @,
                            ![TVSlot(4, tvE[2])] = IF TVDelta[4] THEN tvV4 ELSE @,
                            ![TVSlot(9, tvE[2])] = IF TVDelta[9] THEN tvV5 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsErrorClosed ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "ErrorClosed"
     /\ ErrorClosed(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 1)
            tvV2 == TVLogged(tvE, 2, 2)
            tvV3 == TVLogged(tvE, 3, 3)
            tvV4 == TVLogged(tvE, 4, 4)
        IN
        /\ pc'[tvE[2]] = tvV1
        /\ op'[tvE[2]] = tvV2
        /\ opDl'[tvE[2]] = tvV3
        /\ result'[tvE[2]] = tvV4
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV1 ELSE @,
                            ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV2 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV3 ELSE @,
                            ![TVSlot(4, tvE[2])] = IF TVDelta[4] THEN tvV4 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsGracefulExit ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "GracefulExit"
     /\ GracefulExit(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 1)
            tvV2 == TVLogged(tvE, 2, 2)
            tvV3 == TVLogged(tvE, 3, 3)
            tvV4 == TVLogged(tvE, 4, 4)
        IN
        /\ pc'[tvE[2]] = tvV1
        /\ op'[tvE[2]] = tvV2
        /\ opDl'[tvE[2]] = tvV3
        /\ result'[tvE[2]] = tvV4
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV1 ELSE @,
                            ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV2 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV3 ELSE @,
                            ![TVSlot(4, tvE[2])] = IF TVDelta[4] THEN tvV4 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsErrorTimeout ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "ErrorTimeout"
     /\ ErrorTimeout(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 1)
            tvV2 == TVLogged(tvE, 2, 2)
            tvV3 == TVLogged(tvE, 3, 3)
            tvV4 == TVLogged(tvE, 4, 4)
        IN
        /\ pc'[tvE[2]] = tvV1
        /\ op'[tvE[2]] = tvV2
        /\ opDl'[tvE[2]] = tvV3
        /\ result'[tvE[2]] = tvV4
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV1 ELSE @,
                            ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV2 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV3 ELSE @,
                            ![TVSlot(4, tvE[2])] = IF TVDelta[4] THEN tvV4 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsCrash ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "Crash"
     /\ Crash(tvE[3][1])
     /\ UNCHANGED tvLog
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsReadOnlySync ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "ReadOnlySync"
     /\ ReadOnlySync(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 5)
            tvV2 == TVLogged(tvE, 2, 7)
        IN
        /\ LET tvS == local'[tvE[2]] IN [tvS EXCEPT !.deadline = IF tvS.deadline = NoDeadline THEN <<>> ELSE <<tvS.deadline>>] = tvV1
        /\ (fresh'[tvE[2]] > 0) = tvV2
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV1 ELSE @,
                            ![TVSlot(7, tvE[2])] = IF TVDelta[7] THEN tvV2 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

\* A run that says it finished (its end line) ends quiescent: one more step, at
\* the trace's end, that changes nothing and needs every condition below.
TVQuiet1 == \A tvN \in Nodes : pc[tvN] \in {"stopped", "crashed"}
IsTVEnd ==
  /\ tvCursor = Len(Traces[tvTrace]) + 1 /\ TVEndSteps[tvTrace] = 1
  /\ TVQuiet1
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0
  /\ UNCHANGED <<vars, tvLog>> /\ UNCHANGED <<tvTrace, tvInit>>

TraceNext == IsTick \/ IsNextRendezvous \/ IsKeepAliveTimer \/ IsSetClosed \/ IsSyncRead \/ IsSyncCached \/ IsSyncWriteWon \/ IsSyncWriteLost \/ IsKeepAlive \/ IsAddToParticipants \/ IsAddToWaitList \/ IsAddToRedundancyList \/ IsRemoveFromParticipants \/ IsRemoveFromWaitList \/ IsRemoveFromRedundancyList \/ IsMarkRendezvousComplete \/ IsMarkRendezvousClosed \/ IsDelay \/ IsFinish \/ IsErrorClosed \/ IsGracefulExit \/ IsErrorTimeout \/ IsCrash \/ IsReadOnlySync \/ IsTVEnd

\* Per trace, the furthest cursor reached; each new maximum is printed. In a window of
\* a longer trace (TVPrintEnds), every state that consumed it is printed too.
ASSUME \A i \in 1..Len(Traces) : TLCSet(i, 0)
TraceWatch ==
  /\ (tvCursor > TLCGet(tvTrace) => (TLCSet(tvTrace, tvCursor) /\ PrintT(<<"tv_max", tvTrace, tvCursor>>)))
  /\ (TVPrintEnds /\ tvCursor > TVLen(tvTrace) => PrintT(<<"tv_state", tvHidden, <<store, tokenCurrent, local, dirty, fresh, pc, op, opDl, result, view>>>>))

\* Simulation pass: trace after trace in one behaviour, the spec reset in between
\* (a window of a long trace: one of TVStart's states, and its end state printed).
SimInit ==
  /\ tvTrace = 1 /\ tvCursor = 1 /\ tvLog = TVLog0
  /\ IF TVFromStart
     THEN \E tvS \in TVStart :
            /\ tvHidden = tvS[1]
            /\ store = tvS[2]
            /\ tokenCurrent = tvS[3]
            /\ local = tvS[4]
            /\ dirty = tvS[5]
            /\ fresh = tvS[6]
            /\ pc = tvS[7]
            /\ op = tvS[8]
            /\ opDl = tvS[9]
            /\ result = tvS[10]
            /\ view = tvS[11]
     ELSE tvHidden = 0 /\ Init
  /\ tvInit = vars
TraceReset == tvCursor > TVLen(tvTrace) /\ tvTrace < Len(Traces)
  /\ tvTrace' = tvTrace + 1 /\ tvCursor' = 1 /\ tvHidden' = 0
  /\ store' = tvInit[1] /\ tokenCurrent' = tvInit[2] /\ local' = tvInit[3] /\ dirty' = tvInit[4] /\ fresh' = tvInit[5] /\ pc' = tvInit[6] /\ op' = tvInit[7] /\ opDl' = tvInit[8] /\ result' = tvInit[9] /\ view' = tvInit[10] /\ tvLog' = TVLog0 /\ UNCHANGED tvInit
SimNext == TraceNext \/ TraceReset
\* An invariant that always holds and prints when a trace is consumed.
TraceDone == tvCursor > TVLen(tvTrace) =>
  /\ PrintT(<<"tv_done", tvTrace>>)
  /\ (TVPrintEnds => PrintT(<<"tv_state", tvHidden, <<store, tokenCurrent, local, dirty, fresh, pc, op, opDl, result, view>>>>))
=============================================================================
