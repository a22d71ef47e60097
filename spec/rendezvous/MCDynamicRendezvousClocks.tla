---------------------- MODULE MCDynamicRendezvousClocks ----------------------
(***************************************************************************)
(* Cross-host clocks.  torch 2.13 stamps heartbeats (_keep_alive) and the  *)
(* last-call deadline (_add_to_participants) with the writing host's       *)
(* datetime.now(timezone.utc), and _sanitize and the join op compare them  *)
(* with the reading host's clock.  Here every host's clock runs at the     *)
(* true rate but offset[n] ticks ahead of true time, 0..Skew (only         *)
(* differences matter, so offsets from 0 up cover every skew up to Skew);  *)
(* the offsets are chosen once, at the start.                              *)
(*                                                                         *)
(* The spec keeps true ages and true ticks left; the override points of   *)
(* DynamicRendezvous say how a host reads them:                            *)
(*  - reader n sees m's heartbeat (stamped by m) as                        *)
(*    age + offset[n] - offset[m] old (SkewedExpired);                     *)
(*  - the armer w stores the deadline on its own clock: true ticks left    *)
(*    + offset[w] (SkewedArmedDeadline), and reader n finds it passed when *)
(*    that value - offset[n] < 0 (SkewedDeadlinePassed);                   *)
(*  - saturation bounds widen by Skew (MaxClockSkew), so that no reader    *)
(*    can tell saturated values apart.                                    *)
(* Own timestamps (_should_keep_alive, the heartbeat timer, op deadlines   *)
(* on time.monotonic()) are read on the host that wrote them: no skew.     *)
(*                                                                         *)
(* armedBy is a ghost for LastCallKeptProp: the host whose clock stamped  *)
(* the store's last call (0 while none is armed).  A write that arms it is *)
(* always the armer's own (CAS: its copy is the store plus its own         *)
(* change), and under FastSafetySpec's timing it lands in the tick it was  *)
(* armed in, so the stored value is exact.                                 *)
(***************************************************************************)
EXTENDS MCDynamicRendezvous

CONSTANTS
    Skew,        \* any two hosts' clocks differ by at most this many ticks
    AssumedSkew  \* LastCallKeptProp allows the last call to end this early

VARIABLES offset, armedBy

clockVars == <<vars, offset, armedBy>>

SkewedExpired(n, m, age) == age + offset[n] - offset[m] > HeartbeatExpiry
SkewedArmedDeadline(n) == LastCallTimeout + offset[n]
SkewedDeadlinePassed(n, d) == d - offset[n] < 0
SkewBound == Skew

\* The writer of the step (SyncWriteWon): the node whose pending change cleared.
Writer == CHOOSE n \in Nodes : dirty[n] /\ ~dirty'[n] /\ pc'[n] = "decide"

ClockStep ==
    /\ UNCHANGED offset
    /\ armedBy' = IF Cur'.deadline = NoDeadline THEN 0
                  ELSE IF Cur.deadline = NoDeadline THEN Writer
                  ELSE armedBy

ClockSpec ==
    /\ Init /\ offset \in [Nodes -> 0..Skew] /\ armedBy = 0
    /\ [][FastNext /\ ClockStep]_clockVars

\* True ticks left of the store's last call (-1: passed; as stored, saturated).
TrueLeft == Cur.deadline - offset[armedBy]

\* A round that completes below max_nodes (so by MARK_RENDEZVOUS_COMPLETE,
\* after its last call) does so with fewer than AssumedSkew true ticks of
\* the last call left: the last call ends at most AssumedSkew ticks early
\* (AssumedSkew = 0: not early at all).
LastCallKeptProp ==
    [][Completes /\ Count(Cur') < MaxNodes => Cur.deadline # NoDeadline /\ TrueLeft < AssumedSkew]_clockVars
=============================================================================
