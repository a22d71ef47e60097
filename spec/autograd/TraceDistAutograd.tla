-------------------------- MODULE TraceDistAutograd -------------------------
(***************************************************************************)
(* Trace validation against DistAutograd.tla: tracecheck replays an        *)
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
EXTENDS DistAutograd, TLC, Naturals, Sequences, FiniteSets, TraceOps
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
            /\ nextCtx = tvS[2]
            /\ nextMsg = tvS[3]
            /\ ctxs = tvS[4]
            /\ cur = tvS[5]
            /\ known = tvS[6]
            /\ sends = tvS[7]
            /\ recvs = tvS[8]
            /\ handlers = tvS[9]
            /\ pending = tvS[10]
            /\ detached = tvS[11]
            /\ net = tvS[12]
            /\ tomb = tvS[13]
            /\ released = tvS[14]
            /\ late = tvS[15]
            /\ alive = tvS[16]
            /\ execd = tvS[17]
            /\ fired = tvS[18]
            /\ grads = tvS[19]
            /\ bstate = tvS[20]
            /\ results = tvS[21]
            /\ freed = tvS[22]
            /\ outst = tvS[23]
            /\ awaiting = tvS[24]
            /\ parent = tvS[25]
            /\ echoWait = tvS[26]
     ELSE tvHidden = 0 /\ Init

IsNewContext ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "NewContext"
     /\ NewContext(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 1)
            tvV2 == TVLogged(tvE, 2, 2)
            tvV3 == TVLogged(tvE, 3, 3)
        IN
        /\ nextCtx'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ ctxs'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ {<<tvT, cur'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])][tvT]>> : tvT \in {tvU \in Threads : cur'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])][tvU] # None}} = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(1, tvE[2])] = IF TVDelta[1] THEN tvV1 ELSE @,
                            ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV2 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsSendMessageWithAutograd ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "SendMessageWithAutograd"
     /\ SendMessageWithAutograd(tvE[3][1], tvE[3][2], tvE[3][3], tvE[3][4])
     /\ LET tvV1 == TVLogged(tvE, 1, 4)
            tvV2 == TVLogged(tvE, 2, 5)
            tvV3 == TVLogged(tvE, 3, 6)
            tvV4 == TVLogged(tvE, 4, 7)
        IN
        /\ nextMsg'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ sends'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ known'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV3
        /\ pending'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV4
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(4, tvE[2])] = IF TVDelta[4] THEN tvV1 ELSE @,
                            ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV2 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV3 ELSE @,
                            ![TVSlot(7, tvE[2])] = IF TVDelta[7] THEN tvV4 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsNestedSendMessageWithAutograd ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "NestedSendMessageWithAutograd"
     /\ NestedSendMessageWithAutograd(tvE[3][1], tvE[3][2], tvE[3][3], tvE[3][4], tvE[3][5])
     /\ LET tvV1 == TVLogged(tvE, 1, 4)
            tvV2 == TVLogged(tvE, 2, 5)
            tvV3 == TVLogged(tvE, 3, 6)
            tvV4 == TVLogged(tvE, 4, 8)
            tvV5 == TVLogged(tvE, 5, 9)
        IN
        /\ nextMsg'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ sends'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ known'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV3
        /\ {tvH \in handlers' : tvH.w = (CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])} = tvV4
        /\ detached'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV5
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(4, tvE[2])] = IF TVDelta[4] THEN tvV1 ELSE @,
                            ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV2 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV3 ELSE @,
                            ![TVSlot(8, tvE[2])] = IF TVDelta[8] THEN tvV4 ELSE @,
                            ![TVSlot(9, tvE[2])] = IF TVDelta[9] THEN tvV5 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsReleaseContext ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "ReleaseContext"
     /\ ReleaseContext(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 10)
            tvV2 == TVLogged(tvE, 2, 11)
            tvV3 == TVLogged(tvE, 3, 12)
            tvV4 == TVLogged(tvE, 4, 13)
            tvV5 == TVLogged(tvE, 5, 14)
            tvV6 == TVLogged(tvE, 6, 15)
            tvV7 == TVLogged(tvE, 7, 16)
            tvV8 == TVLogged(tvE, 8, 2)
            tvV9 == TVLogged(tvE, 9, 6)
            tvV10 == TVLogged(tvE, 10, 5)
            tvV11 == TVLogged(tvE, 11, 17)
            tvV12 == TVLogged(tvE, 12, 18)
            tvV13 == TVLogged(tvE, 13, 19)
            tvV14 == TVLogged(tvE, 14, 3)
        IN
        /\ execd'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ fired'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ bstate'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV3
        /\ outst'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV4
        /\ awaiting'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV5
        /\ parent'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV6
        /\ echoWait'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV7
        /\ ctxs'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV8
        /\ known'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV9
        /\ sends'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV10
        /\ recvs'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV11
        /\ grads'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV12
        /\ TombIds(tomb'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])]) = tvV13
        /\ {<<tvT, cur'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])][tvT]>> : tvT \in {tvU \in Threads : cur'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])][tvU] # None}} = tvV14
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(10, tvE[2])] = IF TVDelta[10] THEN tvV1 ELSE @,
                            ![TVSlot(11, tvE[2])] = IF TVDelta[11] THEN tvV2 ELSE @,
                            ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV3 ELSE @,
                            ![TVSlot(13, tvE[2])] = IF TVDelta[13] THEN tvV4 ELSE @,
                            ![TVSlot(14, tvE[2])] = IF TVDelta[14] THEN tvV5 ELSE @,
                            ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV6 ELSE @,
                            ![TVSlot(16, tvE[2])] = IF TVDelta[16] THEN tvV7 ELSE @,
                            ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV8 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV9 ELSE @,
                            ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV10 ELSE @,
                            ![TVSlot(17, tvE[2])] = IF TVDelta[17] THEN tvV11 ELSE @,
                            ![TVSlot(18, tvE[2])] = IF TVDelta[18] THEN tvV12 ELSE @,
                            ![TVSlot(19, tvE[2])] = IF TVDelta[19] THEN tvV13 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV14 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsDistEngineExecute ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "DistEngineExecute"
     /\ DistEngineExecute(tvE[3][1], tvE[3][2], tvE[3][3])
     /\ LET tvV1 == TVLogged(tvE, 1, 10)
            tvV2 == TVLogged(tvE, 2, 11)
            tvV3 == TVLogged(tvE, 3, 12)
            tvV4 == TVLogged(tvE, 4, 13)
            tvV5 == TVLogged(tvE, 5, 14)
            tvV6 == TVLogged(tvE, 6, 15)
            tvV7 == TVLogged(tvE, 7, 16)
            tvV8 == TVLogged(tvE, 8, 18)
        IN
        /\ execd'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ fired'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ bstate'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV3
        /\ outst'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV4
        /\ awaiting'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV5
        /\ parent'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV6
        /\ echoWait'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV7
        /\ grads'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV8
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(10, tvE[2])] = IF TVDelta[10] THEN tvV1 ELSE @,
                            ![TVSlot(11, tvE[2])] = IF TVDelta[11] THEN tvV2 ELSE @,
                            ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV3 ELSE @,
                            ![TVSlot(13, tvE[2])] = IF TVDelta[13] THEN tvV4 ELSE @,
                            ![TVSlot(14, tvE[2])] = IF TVDelta[14] THEN tvV5 ELSE @,
                            ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV6 ELSE @,
                            ![TVSlot(16, tvE[2])] = IF TVDelta[16] THEN tvV7 ELSE @,
                            ![TVSlot(18, tvE[2])] = IF TVDelta[18] THEN tvV8 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsRetrieveContext ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "RetrieveContext"
     /\ RetrieveContext(tvE[3][1], tvE[3][2])
     /\ UNCHANGED tvLog
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsFetchStoredValue ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "FetchStoredValue"
     /\ FetchStoredValue(tvE[3][1], tvE[3][2], tvE[3][3])
     /\ LET tvV1 == TVLogged(tvE, 1, 8)
        IN
        /\ {tvH \in handlers' : tvH.w = (CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])} = tvV1
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(8, tvE[2])] = IF TVDelta[8] THEN tvV1 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsUdfRaises ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "UdfRaises"
     /\ UdfRaises(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 8)
        IN
        /\ {tvH \in handlers' : tvH.w = (CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])} = tvV1
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(8, tvE[2])] = IF TVDelta[8] THEN tvV1 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsRetryCleanup ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "RetryCleanup"
     /\ RetryCleanup(tvE[3][1])
     /\ UNCHANGED tvLog
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsLoseCleanupMsg ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "LoseCleanupMsg"
     /\ LoseCleanupMsg(tvE[3][1])
     /\ UNCHANGED tvLog
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsCrash ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "Crash"
     /\ Crash(tvE[3][1])
     /\ LET tvV1 == TVLogged(tvE, 1, 10)
            tvV2 == TVLogged(tvE, 2, 11)
            tvV3 == TVLogged(tvE, 3, 12)
            tvV4 == TVLogged(tvE, 4, 13)
            tvV5 == TVLogged(tvE, 5, 14)
            tvV6 == TVLogged(tvE, 6, 15)
            tvV7 == TVLogged(tvE, 7, 16)
            tvV8 == TVLogged(tvE, 8, 20)
            tvV9 == TVLogged(tvE, 9, 2)
            tvV10 == TVLogged(tvE, 10, 3)
            tvV11 == TVLogged(tvE, 11, 6)
            tvV12 == TVLogged(tvE, 12, 5)
            tvV13 == TVLogged(tvE, 13, 17)
            tvV14 == TVLogged(tvE, 14, 7)
            tvV15 == TVLogged(tvE, 15, 9)
            tvV16 == TVLogged(tvE, 16, 8)
            tvV17 == TVLogged(tvE, 17, 18)
        IN
        /\ execd'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ fired'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ bstate'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV3
        /\ outst'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV4
        /\ awaiting'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV5
        /\ parent'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV6
        /\ echoWait'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV7
        /\ alive'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV8
        /\ ctxs'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV9
        /\ {<<tvT, cur'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])][tvT]>> : tvT \in {tvU \in Threads : cur'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])][tvU] # None}} = tvV10
        /\ known'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV11
        /\ sends'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV12
        /\ recvs'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV13
        /\ pending'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV14
        /\ detached'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV15
        /\ {tvH \in handlers' : tvH.w = (CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])} = tvV16
        /\ grads'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV17
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(10, tvE[2])] = IF TVDelta[10] THEN tvV1 ELSE @,
                            ![TVSlot(11, tvE[2])] = IF TVDelta[11] THEN tvV2 ELSE @,
                            ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV3 ELSE @,
                            ![TVSlot(13, tvE[2])] = IF TVDelta[13] THEN tvV4 ELSE @,
                            ![TVSlot(14, tvE[2])] = IF TVDelta[14] THEN tvV5 ELSE @,
                            ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV6 ELSE @,
                            ![TVSlot(16, tvE[2])] = IF TVDelta[16] THEN tvV7 ELSE @,
                            ![TVSlot(20, tvE[2])] = IF TVDelta[20] THEN tvV8 ELSE @,
                            ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV9 ELSE @,
                            ![TVSlot(3, tvE[2])] = IF TVDelta[3] THEN tvV10 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV11 ELSE @,
                            ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV12 ELSE @,
                            ![TVSlot(17, tvE[2])] = IF TVDelta[17] THEN tvV13 ELSE @,
                            ![TVSlot(7, tvE[2])] = IF TVDelta[7] THEN tvV14 ELSE @,
                            ![TVSlot(9, tvE[2])] = IF TVDelta[9] THEN tvV15 ELSE @,
                            ![TVSlot(8, tvE[2])] = IF TVDelta[8] THEN tvV16 ELSE @,
                            ![TVSlot(18, tvE[2])] = IF TVDelta[18] THEN tvV17 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsPeerDied ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "PeerDied"
     /\ PeerDied(tvE[3][1], tvE[3][2])
     /\ UNCHANGED tvLog
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsBackwardError ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "BackwardError"
     /\ BackwardError(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 13)
            tvV2 == TVLogged(tvE, 2, 12)
            tvV3 == TVLogged(tvE, 3, 14)
        IN
        /\ outst'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ bstate'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ awaiting'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(13, tvE[2])] = IF TVDelta[13] THEN tvV1 ELSE @,
                            ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV2 ELSE @,
                            ![TVSlot(14, tvE[2])] = IF TVDelta[14] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsProcessForwardAutogradReq ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "ProcessForwardAutogradReq"
     /\ ProcessForwardAutogradReq(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 2)
            tvV2 == TVLogged(tvE, 2, 17)
            tvV3 == TVLogged(tvE, 3, 8)
        IN
        /\ ctxs'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ recvs'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ {tvH \in handlers' : tvH.w = (CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])} = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV1 ELSE @,
                            ![TVSlot(17, tvE[2])] = IF TVDelta[17] THEN tvV2 ELSE @,
                            ![TVSlot(8, tvE[2])] = IF TVDelta[8] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsFinishForwardAutogradReq ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "FinishForwardAutogradReq"
     /\ FinishForwardAutogradReq(tvE[3][1], tvE[3][2], tvE[3][3])
     /\ LET tvV1 == TVLogged(tvE, 1, 8)
            tvV2 == TVLogged(tvE, 2, 4)
            tvV3 == TVLogged(tvE, 3, 5)
            tvV4 == TVLogged(tvE, 4, 6)
        IN
        /\ {tvH \in handlers' : tvH.w = (CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])} = tvV1
        /\ nextMsg'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ sends'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV3
        /\ known'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV4
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(8, tvE[2])] = IF TVDelta[8] THEN tvV1 ELSE @,
                            ![TVSlot(4, tvE[2])] = IF TVDelta[4] THEN tvV2 ELSE @,
                            ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV3 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV4 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsDeserializeForwardAutogradResp ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "DeserializeForwardAutogradResp"
     /\ DeserializeForwardAutogradResp(tvE[3][1], tvE[3][2], tvE[3][3])
     /\ LET tvV1 == TVLogged(tvE, 1, 2)
            tvV2 == TVLogged(tvE, 2, 17)
            tvV3 == TVLogged(tvE, 3, 7)
            tvV4 == TVLogged(tvE, 4, 9)
            tvV5 == TVLogged(tvE, 5, 8)
        IN
        /\ ctxs'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ recvs'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ pending'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV3
        /\ detached'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV4
        /\ {tvH \in handlers' : tvH.w = (CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])} = tvV5
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV1 ELSE @,
                            ![TVSlot(17, tvE[2])] = IF TVDelta[17] THEN tvV2 ELSE @,
                            ![TVSlot(7, tvE[2])] = IF TVDelta[7] THEN tvV3 ELSE @,
                            ![TVSlot(9, tvE[2])] = IF TVDelta[9] THEN tvV4 ELSE @,
                            ![TVSlot(8, tvE[2])] = IF TVDelta[8] THEN tvV5 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsDeserializeResponse ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "DeserializeResponse"
     /\ DeserializeResponse(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 7)
            tvV2 == TVLogged(tvE, 2, 9)
            tvV3 == TVLogged(tvE, 3, 8)
        IN
        /\ pending'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ detached'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ {tvH \in handlers' : tvH.w = (CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])} = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(7, tvE[2])] = IF TVDelta[7] THEN tvV1 ELSE @,
                            ![TVSlot(9, tvE[2])] = IF TVDelta[9] THEN tvV2 ELSE @,
                            ![TVSlot(8, tvE[2])] = IF TVDelta[8] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsPollTimeoutRpcs ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "PollTimeoutRpcs"
     /\ PollTimeoutRpcs(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 7)
            tvV2 == TVLogged(tvE, 2, 9)
            tvV3 == TVLogged(tvE, 3, 8)
        IN
        /\ pending'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ detached'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ {tvH \in handlers' : tvH.w = (CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])} = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(7, tvE[2])] = IF TVDelta[7] THEN tvV1 ELSE @,
                            ![TVSlot(9, tvE[2])] = IF TVDelta[9] THEN tvV2 ELSE @,
                            ![TVSlot(8, tvE[2])] = IF TVDelta[8] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsProcessCleanupAutogradContextReq ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "ProcessCleanupAutogradContextReq"
     /\ ProcessCleanupAutogradContextReq(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 10)
            tvV2 == TVLogged(tvE, 2, 11)
            tvV3 == TVLogged(tvE, 3, 12)
            tvV4 == TVLogged(tvE, 4, 13)
            tvV5 == TVLogged(tvE, 5, 14)
            tvV6 == TVLogged(tvE, 6, 15)
            tvV7 == TVLogged(tvE, 7, 16)
            tvV8 == TVLogged(tvE, 8, 2)
            tvV9 == TVLogged(tvE, 9, 6)
            tvV10 == TVLogged(tvE, 10, 5)
            tvV11 == TVLogged(tvE, 11, 17)
            tvV12 == TVLogged(tvE, 12, 18)
            tvV13 == TVLogged(tvE, 13, 19)
        IN
        /\ execd'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ fired'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ bstate'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV3
        /\ outst'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV4
        /\ awaiting'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV5
        /\ parent'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV6
        /\ echoWait'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV7
        /\ ctxs'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV8
        /\ known'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV9
        /\ sends'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV10
        /\ recvs'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV11
        /\ grads'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV12
        /\ TombIds(tomb'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])]) = tvV13
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(10, tvE[2])] = IF TVDelta[10] THEN tvV1 ELSE @,
                            ![TVSlot(11, tvE[2])] = IF TVDelta[11] THEN tvV2 ELSE @,
                            ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV3 ELSE @,
                            ![TVSlot(13, tvE[2])] = IF TVDelta[13] THEN tvV4 ELSE @,
                            ![TVSlot(14, tvE[2])] = IF TVDelta[14] THEN tvV5 ELSE @,
                            ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV6 ELSE @,
                            ![TVSlot(16, tvE[2])] = IF TVDelta[16] THEN tvV7 ELSE @,
                            ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV8 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV9 ELSE @,
                            ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV10 ELSE @,
                            ![TVSlot(17, tvE[2])] = IF TVDelta[17] THEN tvV11 ELSE @,
                            ![TVSlot(18, tvE[2])] = IF TVDelta[18] THEN tvV12 ELSE @,
                            ![TVSlot(19, tvE[2])] = IF TVDelta[19] THEN tvV13 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsReleaseOrphanedContext ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "ReleaseOrphanedContext"
     /\ ReleaseOrphanedContext(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 10)
            tvV2 == TVLogged(tvE, 2, 11)
            tvV3 == TVLogged(tvE, 3, 12)
            tvV4 == TVLogged(tvE, 4, 13)
            tvV5 == TVLogged(tvE, 5, 14)
            tvV6 == TVLogged(tvE, 6, 15)
            tvV7 == TVLogged(tvE, 7, 16)
            tvV8 == TVLogged(tvE, 8, 2)
            tvV9 == TVLogged(tvE, 9, 6)
            tvV10 == TVLogged(tvE, 10, 5)
            tvV11 == TVLogged(tvE, 11, 17)
            tvV12 == TVLogged(tvE, 12, 18)
            tvV13 == TVLogged(tvE, 13, 19)
        IN
        /\ execd'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ fired'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ bstate'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV3
        /\ outst'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV4
        /\ awaiting'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV5
        /\ parent'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV6
        /\ echoWait'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV7
        /\ ctxs'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV8
        /\ known'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV9
        /\ sends'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV10
        /\ recvs'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV11
        /\ grads'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV12
        /\ TombIds(tomb'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])]) = tvV13
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(10, tvE[2])] = IF TVDelta[10] THEN tvV1 ELSE @,
                            ![TVSlot(11, tvE[2])] = IF TVDelta[11] THEN tvV2 ELSE @,
                            ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV3 ELSE @,
                            ![TVSlot(13, tvE[2])] = IF TVDelta[13] THEN tvV4 ELSE @,
                            ![TVSlot(14, tvE[2])] = IF TVDelta[14] THEN tvV5 ELSE @,
                            ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV6 ELSE @,
                            ![TVSlot(16, tvE[2])] = IF TVDelta[16] THEN tvV7 ELSE @,
                            ![TVSlot(2, tvE[2])] = IF TVDelta[2] THEN tvV8 ELSE @,
                            ![TVSlot(6, tvE[2])] = IF TVDelta[6] THEN tvV9 ELSE @,
                            ![TVSlot(5, tvE[2])] = IF TVDelta[5] THEN tvV10 ELSE @,
                            ![TVSlot(17, tvE[2])] = IF TVDelta[17] THEN tvV11 ELSE @,
                            ![TVSlot(18, tvE[2])] = IF TVDelta[18] THEN tvV12 ELSE @,
                            ![TVSlot(19, tvE[2])] = IF TVDelta[19] THEN tvV13 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsDiscard ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "Discard"
     /\ Discard(tvE[3][1])
     /\ UNCHANGED tvLog
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsRecvRpcBackwardApply ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "RecvRpcBackwardApply"
     /\ RecvRpcBackwardApply(tvE[3][1], tvE[3][2], tvE[3][3])
     /\ LET tvV1 == TVLogged(tvE, 1, 11)
            tvV2 == TVLogged(tvE, 2, 13)
        IN
        /\ fired'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ outst'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(11, tvE[2])] = IF TVDelta[11] THEN tvV1 ELSE @,
                            ![TVSlot(13, tvE[2])] = IF TVDelta[13] THEN tvV2 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsProcessBackwardAutogradReq ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "ProcessBackwardAutogradReq"
     /\ ProcessBackwardAutogradReq(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 10)
            tvV2 == TVLogged(tvE, 2, 11)
            tvV3 == TVLogged(tvE, 3, 12)
            tvV4 == TVLogged(tvE, 4, 13)
            tvV5 == TVLogged(tvE, 5, 14)
            tvV6 == TVLogged(tvE, 6, 15)
            tvV7 == TVLogged(tvE, 7, 16)
            tvV8 == TVLogged(tvE, 8, 18)
        IN
        /\ execd'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ fired'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ bstate'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV3
        /\ outst'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV4
        /\ awaiting'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV5
        /\ parent'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV6
        /\ echoWait'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV7
        /\ grads'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV8
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(10, tvE[2])] = IF TVDelta[10] THEN tvV1 ELSE @,
                            ![TVSlot(11, tvE[2])] = IF TVDelta[11] THEN tvV2 ELSE @,
                            ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV3 ELSE @,
                            ![TVSlot(13, tvE[2])] = IF TVDelta[13] THEN tvV4 ELSE @,
                            ![TVSlot(14, tvE[2])] = IF TVDelta[14] THEN tvV5 ELSE @,
                            ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV6 ELSE @,
                            ![TVSlot(16, tvE[2])] = IF TVDelta[16] THEN tvV7 ELSE @,
                            ![TVSlot(18, tvE[2])] = IF TVDelta[18] THEN tvV8 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsProcessBackwardAutogradResp ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "ProcessBackwardAutogradResp"
     /\ ProcessBackwardAutogradResp(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 13)
            tvV2 == TVLogged(tvE, 2, 12)
            tvV3 == TVLogged(tvE, 3, 14)
        IN
        /\ outst'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ bstate'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ awaiting'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV3
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(13, tvE[2])] = IF TVDelta[13] THEN tvV1 ELSE @,
                            ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV2 ELSE @,
                            ![TVSlot(14, tvE[2])] = IF TVDelta[14] THEN tvV3 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsCleanupBackwardPass ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "CleanupBackwardPass"
     /\ CleanupBackwardPass(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 12)
            tvV2 == TVLogged(tvE, 2, 14)
        IN
        /\ bstate'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ awaiting'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV1 ELSE @,
                            ![TVSlot(14, tvE[2])] = IF TVDelta[14] THEN tvV2 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsProcessBackwardStart ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "ProcessBackwardStart"
     /\ ProcessBackwardStart(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 10)
            tvV2 == TVLogged(tvE, 2, 11)
            tvV3 == TVLogged(tvE, 3, 12)
            tvV4 == TVLogged(tvE, 4, 15)
            tvV5 == TVLogged(tvE, 5, 16)
        IN
        /\ execd'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ fired'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ bstate'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV3
        /\ parent'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV4
        /\ echoWait'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV5
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(10, tvE[2])] = IF TVDelta[10] THEN tvV1 ELSE @,
                            ![TVSlot(11, tvE[2])] = IF TVDelta[11] THEN tvV2 ELSE @,
                            ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV3 ELSE @,
                            ![TVSlot(15, tvE[2])] = IF TVDelta[15] THEN tvV4 ELSE @,
                            ![TVSlot(16, tvE[2])] = IF TVDelta[16] THEN tvV5 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsProcessBackwardAck ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "ProcessBackwardAck"
     /\ ProcessBackwardAck(tvE[3][1], tvE[3][2])
     /\ LET tvV1 == TVLogged(tvE, 1, 12)
            tvV2 == TVLogged(tvE, 2, 16)
        IN
        /\ bstate'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV1
        /\ echoWait'[(CHOOSE tvW \in Workers : ToString(tvW) = tvE[2])] = tvV2
        /\ tvLog' = [tvLog EXCEPT ![TVSlot(12, tvE[2])] = IF TVDelta[12] THEN tvV1 ELSE @,
                            ![TVSlot(16, tvE[2])] = IF TVDelta[16] THEN tvV2 ELSE @]
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

IsNewContextRefused ==
  /\ tvCursor <= Len(Traces[tvTrace])
  /\ LET tvE == Traces[tvTrace][tvCursor] IN
     /\ tvE[1] = "NewContextRefused"
     /\ NewContextRefused(tvE[3][1], tvE[3][2])
     /\ UNCHANGED tvLog
  /\ tvCursor' = tvCursor + 1 /\ tvHidden' = 0 /\ UNCHANGED <<tvTrace, tvInit>>

TraceNext == IsNewContext \/ IsSendMessageWithAutograd \/ IsNestedSendMessageWithAutograd \/ IsReleaseContext \/ IsDistEngineExecute \/ IsRetrieveContext \/ IsFetchStoredValue \/ IsUdfRaises \/ IsRetryCleanup \/ IsLoseCleanupMsg \/ IsCrash \/ IsPeerDied \/ IsBackwardError \/ IsProcessForwardAutogradReq \/ IsFinishForwardAutogradReq \/ IsDeserializeForwardAutogradResp \/ IsDeserializeResponse \/ IsPollTimeoutRpcs \/ IsProcessCleanupAutogradContextReq \/ IsReleaseOrphanedContext \/ IsDiscard \/ IsRecvRpcBackwardApply \/ IsProcessBackwardAutogradReq \/ IsProcessBackwardAutogradResp \/ IsCleanupBackwardPass \/ IsProcessBackwardStart \/ IsProcessBackwardAck \/ IsNewContextRefused

\* Per trace, the furthest cursor reached; each new maximum is printed. In a window of
\* a longer trace (TVPrintEnds), every state that consumed it is printed too.
ASSUME \A i \in 1..Len(Traces) : TLCSet(i, 0)
TraceWatch ==
  /\ (tvCursor > TLCGet(tvTrace) => (TLCSet(tvTrace, tvCursor) /\ PrintT(<<"tv_max", tvTrace, tvCursor>>)))
  /\ (TVPrintEnds /\ tvCursor > TVLen(tvTrace) => PrintT(<<"tv_state", tvHidden, <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending, detached, net, tomb, released, late, alive, execd, fired, grads, bstate, results, freed, outst, awaiting, parent, echoWait>>>>))

\* Simulation pass: trace after trace in one behaviour, the spec reset in between
\* (a window of a long trace: one of TVStart's states, and its end state printed).
SimInit ==
  /\ tvTrace = 1 /\ tvCursor = 1 /\ tvLog = TVLog0
  /\ IF TVFromStart
     THEN \E tvS \in TVStart :
            /\ tvHidden = tvS[1]
            /\ nextCtx = tvS[2]
            /\ nextMsg = tvS[3]
            /\ ctxs = tvS[4]
            /\ cur = tvS[5]
            /\ known = tvS[6]
            /\ sends = tvS[7]
            /\ recvs = tvS[8]
            /\ handlers = tvS[9]
            /\ pending = tvS[10]
            /\ detached = tvS[11]
            /\ net = tvS[12]
            /\ tomb = tvS[13]
            /\ released = tvS[14]
            /\ late = tvS[15]
            /\ alive = tvS[16]
            /\ execd = tvS[17]
            /\ fired = tvS[18]
            /\ grads = tvS[19]
            /\ bstate = tvS[20]
            /\ results = tvS[21]
            /\ freed = tvS[22]
            /\ outst = tvS[23]
            /\ awaiting = tvS[24]
            /\ parent = tvS[25]
            /\ echoWait = tvS[26]
     ELSE tvHidden = 0 /\ Init
  /\ tvInit = vars
TraceReset == tvCursor > TVLen(tvTrace) /\ tvTrace < Len(Traces)
  /\ tvTrace' = tvTrace + 1 /\ tvCursor' = 1 /\ tvHidden' = 0
  /\ nextCtx' = tvInit[1] /\ nextMsg' = tvInit[2] /\ ctxs' = tvInit[3] /\ cur' = tvInit[4] /\ known' = tvInit[5] /\ sends' = tvInit[6] /\ recvs' = tvInit[7] /\ handlers' = tvInit[8] /\ pending' = tvInit[9] /\ detached' = tvInit[10] /\ net' = tvInit[11] /\ tomb' = tvInit[12] /\ released' = tvInit[13] /\ late' = tvInit[14] /\ alive' = tvInit[15] /\ execd' = tvInit[16] /\ fired' = tvInit[17] /\ grads' = tvInit[18] /\ bstate' = tvInit[19] /\ results' = tvInit[20] /\ freed' = tvInit[21] /\ outst' = tvInit[22] /\ awaiting' = tvInit[23] /\ parent' = tvInit[24] /\ echoWait' = tvInit[25] /\ tvLog' = TVLog0 /\ UNCHANGED tvInit
SimNext == TraceNext \/ TraceReset
\* An invariant that always holds and prints when a trace is consumed.
TraceDone == tvCursor > TVLen(tvTrace) =>
  /\ PrintT(<<"tv_done", tvTrace>>)
  /\ (TVPrintEnds => PrintT(<<"tv_state", tvHidden, <<nextCtx, nextMsg, ctxs, cur, known, sends, recvs, handlers, pending, detached, net, tomb, released, late, alive, execd, fired, grads, bstate, results, freed, outst, awaiting, parent, echoWait>>>>))
=============================================================================
