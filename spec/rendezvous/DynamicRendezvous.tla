-------------------------- MODULE DynamicRendezvous --------------------------
(***************************************************************************)
(* PyTorch 2.13 dynamic rendezvous (torch.distributed.elastic.rendezvous.  *)
(* dynamic_rendezvous) over a compare-and-set store (the C10d backend).    *)
(*                                                                         *)
(* What is modelled                                                        *)
(*  - The shared _RendezvousState kept in one store key: round, complete,  *)
(*    the last-call deadline, closed, participants (node -> rank),         *)
(*    wait list, redundancy list, last heartbeats.  The store starts at a  *)
(*    sentinel (NoState), as C10dRendezvousBackend's constructor leaves it.*)
(*  - The store token.  In 2.13 the token is the raw stored value and      *)
(*    set_state's compare_set compares bytes.  Every real write carries    *)
(*    fresh timestamps, so a token matches iff no other write landed since *)
(*    the node's last sync: tokenCurrent[n] records exactly that.  A CAS   *)
(*    succeeds iff the token is current (or the store already holds        *)
(*    exactly the bytes written, which set_state also reports as success). *)
(*  - Per node (_BackendRendezvousStateHolder): the local copy, the dirty  *)
(*    flag, its token, and whether the 1 s read cache is still valid.      *)
(*  - The executor loop (_DistributedRendezvousOpExecutor.run) as steps:   *)
(*    a Sync step (write by CAS when dirty, else read or cache hit; a lost *)
(*    CAS drops the local change and loads the winner's state; sanitize    *)
(*    runs on the syncing node's copy after every real sync), then one     *)
(*    step that decides (the op's rules, in 2.13's order) and applies the  *)
(*    chosen business function to the local copy.  Deciding and applying  *)
(*    are one step: both only touch the node's own copy, so splitting them *)
(*    adds interleavings no other node can observe.                        *)
(*  - The ops: exit, join (2.13 rule order, incl. the redundancy list),    *)
(*    close, keep-alive; next_rendezvous runs exit then join with one op   *)
(*    deadline; the heartbeat timer; set_closed; crashes.                  *)
(*  - Time as discrete ticks (Tick).  Deadlines and heartbeats are stored  *)
(*    relative to now: a deadline is the number of ticks left (-1 = it has *)
(*    passed), a heartbeat is its age in ticks.  Ages saturate at          *)
(*    HeartbeatExpiry + 1 (expired), deadlines at -1 and op deadlines just *)
(*    below the rollback window: no rule can tell the saturated values     *)
(*    apart.  One tick is also the length of the 1 s delay of the SYNC     *)
(*    action, and the read cache lasts CacheTicks ticks (1, or 2 for       *)
(*    torch's inclusive 1 s test on a whole-second clock).                 *)
(*                                                                         *)
(* What is abstracted away                                                 *)
(*  - Node descriptors: only their order matters (addr as string, pid,     *)
(*    local_id), given by NodeIndex; model nodes are naturals.             *)
(*  - Pickling/base64; store errors and RendezvousConnectionError; the     *)
(*    random 0-0.3 s start delay (time may pass anywhere anyway);          *)
(*    shutdown is modelled as set_closed; the bootstrap store (TCPStore    *)
(*    sharing) and the PrefixStore, which live outside the shared state.   *)
(*    is_closed / num_nodes_waiting are read-only syncs (ReadOnlySync,     *)
(*    when ReadOnlySyncs); the elastic agent is modelled only by when it   *)
(*    calls next_rendezvous again (ElasticAgent), not its workers.         *)
(*  - Clocks: one true time for every host unless a model overrides the    *)
(*    clock points (MCDynamicRendezvousClocks: per-host offsets).          *)
(*  - Token values: a write that happens to restore an earlier value      *)
(*    still outdates every other token here (ABA cannot happen), while in  *)
(*    2.13 identical bytes would match; with fresh timestamps in every     *)
(*    write, identical bytes do not occur in practice.                     *)
(*  - Unless TimerFiresAnyTime, the heartbeat timer is modelled only when  *)
(*    it has work to do (the node's stored heartbeat is due; other firings *)
(*    are read-only syncs); unless CloseAnyTime, set_closed is called only *)
(*    by an idle node while the store is open.  Trace specs of torch's     *)
(*    handler set both: its timer fires every interval, its agent closes   *)
(*    whenever it likes, and the op decides on the node's copy.            *)
(*  - Dead copies: when a tick passes, a node that will overwrite its copy *)
(*    by a read before using it (idle, sleeping or about to sync, nothing  *)
(*    pending) has its copy reset to the empty state.                      *)
(*                                                                         *)
(* Two variants, selected by the constant Variant:                         *)
(*  "PyTorch"   2.13 as it ships.  A participant that leaves a complete    *)
(*              round (its exit op, or another node's sanitize) leaves the *)
(*              round complete at the same number with the rest, and       *)
(*              next_rendezvous returns the current membership             *)
(*              (_get_world): a node still on its way out of the join op   *)
(*              returns a rank not below its world size (the notes,        *)
(*              Findings of 2026-11-26), and survivors of a dead           *)
(*              participant are never asked to re-rendezvous               *)
(*              (pytorch#111646).                                          *)
(*  "Reference" what protoref implements: a participant leaving a complete *)
(*              round ends it (Epilogue): the round advances and the       *)
(*              remaining participants move to the wait list, so their     *)
(*              agents see num_nodes_waiting() > 0 and re-rendezvous.  A   *)
(*              complete round therefore never changes its membership:     *)
(*              every node returning from it gets the same world.          *)
(*                                                                         *)
(* Timing: Spec lets a tick fall between any two steps.  FastSafetySpec    *)
(* and FastSpec (liveness) assume executor steps take no time compared to  *)
(* a tick: time passes only while every running node waits.                *)
(*                                                                         *)
(* Guarantees served (cited by the actions):                               *)
(*  G1 one agreed membership and rank assignment per round (ranks 0..n-1   *)
(*     in node order, min <= n <= max at completion);                      *)
(*  G2 no lost update: every successful write is based on the latest state;*)
(*  G3 progress: enough live, joining nodes complete a round;              *)
(*  G4 close is final and ends every join;                                 *)
(*  G5 dead nodes are eventually removed (heartbeat expiry), and the       *)
(*     survivors of a complete round then form a new round without them.   *)
(***************************************************************************)
EXTENDS Naturals, Integers, FiniteSets

CONSTANTS
    Variant,            \* "PyTorch" (2.13 as it ships) | "Reference" (protoref)
    Nodes,              \* node descriptors; NodeIndex orders them
    MinNodes,           \* RendezvousSettings.min_nodes
    MaxNodes,           \* RendezvousSettings.max_nodes
    Closers,            \* nodes whose agent may call set_closed()
    MaxCrashes,         \* at most this many nodes crash
    JoinTimeout,        \* timeout.join, in ticks (600 s in 2.13)
    LastCallTimeout,    \* timeout.last_call (30 s)
    CloseTimeout,       \* timeout.close (30 s)
    HeartbeatTimeout,   \* timeout.heartbeat: the keep-alive op deadline (5 s)
    KeepAliveInterval,  \* keep_alive_interval (5 s)
    KeepAliveMaxAttempt,\* keep_alive_max_attempt (3)
    RollbackPeriod,     \* the join op's rollback window after its deadline (5 s)
    NoState,            \* the store's sentinel before the first write (a model value)
    NoDeadline          \* state.deadline = None (a model value)

(* The _NodeDesc order as numbers: a node's position in that order.  Model  *)
(* nodes are naturals and their own index; a trace spec, whose nodes are   *)
(* descriptor strings, overrides NodeIndex (cfg: NodeIndex <- ...).        *)
NodeIndex == [m \in Nodes |-> m]
Before(a, b) == NodeIndex[a] < NodeIndex[b]   \* a < b as _NodeDesc

(* How a node waiting after SYNC wakes up.  FALSE: 2.13's fixed 1 s sleep  *)
(* (it syncs again after a Tick).  TRUE: protoref's handler, which waits   *)
(* on the store's change (or the next moment time could change the op's    *)
(* decision, or a short poll), invalidates its read cache and reads the    *)
(* store: a sleeper may sync at any moment.  Overridden by trace specs.    *)
SleeperWakesEarly == FALSE

(* Whether an idle (or stopped) node may sync outside any op: torch's      *)
(* is_closed() and num_nodes_waiting() take the heartbeat lock and call    *)
(* sync() (ReadOnlySync).  FALSE in the models (a read that changes no     *)
(* shared state and no decision: it only refreshes the node's own copy);   *)
(* TRUE in traces of the real handler, whose callers may ask any time.     *)
ReadOnlySyncs == FALSE

(* How a node that returned from next_rendezvous calls it again.  FALSE:   *)
(* at any moment (an agent whose workers failed restarts them).  TRUE:     *)
(* only as torch's elastic agent does for a healthy group                  *)
(* (SimpleElasticAgent._invoke_run): it restarts its workers and           *)
(* re-rendezvouses when num_nodes_waiting() > 0, i.e. when its copy, just  *)
(* refreshed by a ReadOnlySync (or served from the read cache), has a      *)
(* non-empty wait list.  Needs ReadOnlySyncs.                              *)
ElasticAgent == FALSE

(* Cross-host clocks.  torch stamps heartbeats and the last-call deadline  *)
(* with the writing host's datetime.now(utc) and compares them with the    *)
(* reading host's clock.  The spec keeps true ages; the override points    *)
(* Expired, ArmedDeadline and DeadlinePassed below say how a reader sees a *)
(* stamp, and MaxClockSkew (ticks; 0: one clock) widens the saturation     *)
(* bounds so that no skewed reader can tell saturated values apart.        *)
(* MCDynamicRendezvousClocks sets them.                                    *)
MaxClockSkew == 0

(* How long a sync's read cache serves, in Ticks.  1: until the next Tick   *)
(* (a cache shorter than a tick).  2: torch 2.13's inclusive test          *)
(* (now - last_sync <= 1 s, _BackendRendezvousStateHolder.sync) on a clock *)
(* of whole 1 s ticks: a sync at tick t also serves at tick t + 1, so a    *)
(* node waking from its 1 s SYNC sleep decides on the stale copy once more *)
(* and polls every second tick.  fresh[n] counts the Ticks its cache has   *)
(* left.  Overridden by trace specs.                                       *)
CacheTicks == 1

(* When the heartbeat timer fires.  FALSE: only when it has work (the      *)
(* node's stored heartbeat is due; other firings are read-only syncs): a   *)
(* smaller state space for the models.  TRUE: torch's _PeriodicTimer, every*)
(* keep_alive_interval whatever the state; the keep-alive op decides on    *)
(* the node's copy (KEEP_ALIVE when due, else FINISH).                     *)
TimerFiresAnyTime == FALSE

(* When set_closed() / shutdown() may be called.  FALSE: on an open store  *)
(* by an idle node (no repeated no-op calls).  TRUE: any time the node is  *)
(* idle or stopped (torchrun's launcher calls shutdown() in its finally,   *)
(* also after RendezvousClosedError); the close op decides on the node's   *)
(* copy, so a stale copy decides MARK_RENDEZVOUS_CLOSED and loses the CAS. *)
CloseAnyTime == FALSE

ASSUME /\ Variant \in {"PyTorch", "Reference"}
       /\ NodeIndex \in [Nodes -> Nat] /\ Nodes # {}
       /\ CacheTicks \in {1, 2}
       /\ MinNodes \in Nat \ {0} /\ MaxNodes \in Nat /\ MinNodes <= MaxNodes
       /\ Closers \subseteq Nodes /\ MaxCrashes \in Nat
       /\ {JoinTimeout, LastCallTimeout, CloseTimeout, HeartbeatTimeout,
           KeepAliveInterval, KeepAliveMaxAttempt, RollbackPeriod} \subseteq Nat

Reference == Variant = "Reference"

HeartbeatExpiry == KeepAliveInterval * KeepAliveMaxAttempt
HbCap == HeartbeatExpiry + 1 + MaxClockSkew   \* saturated age: expired for every reader
MaxDeadline == LastCallTimeout + MaxClockSkew  \* largest stored last-call value
OpDeadlineFloor == -(RollbackPeriod + 1)  \* saturated op deadline: past the rollback window

VARIABLES
    store,   \* the value under torch.rendezvous.<run_id>: NoState or a state record
    tokenCurrent, \* tokenCurrent[n]: n's token (the value it last read or wrote)
             \*   is still the store's value, so n's compare_set would match
    local,   \* local[n]: n's copy of the state (_BackendRendezvousStateHolder._state)
    dirty,   \* dirty[n]: n changed its copy since its last sync
    fresh,   \* fresh[n]: Ticks n's read cache still serves (0: expired; CacheTicks
             \*   right after a sync)
    pc,      \* pc[n]: "idle" | "sync" | "decide" | "sleep" | "stopped" | "crashed"
    op,      \* op[n]: "none" | "exit" | "join" | "close" | "keepalive"
    opDl,    \* opDl[n]: ticks left until the running op's deadline (< 0: passed)
    result,  \* result[n]: outcome of n's last next_rendezvous:
             \*   "none" (never called, or running) | "ok" | "timeout" | "closed" | "gracefulExit"
    view     \* view[n]: round and ranks n returned from its last successful next_rendezvous

vars == <<store, tokenCurrent, local, dirty, fresh, pc, op, opDl, result, view>>

-----------------------------------------------------------------------------
(* Helpers: partial functions stand for Python dicts.                      *)
EmptyFn == [m \in {} |-> 0]
Put(f, k, v) == [m \in DOMAIN f \cup {k} |-> IF m = k THEN v ELSE f[m]]
Del(f, k) == [m \in DOMAIN f \ {k} |-> f[m]]
Restrict(f, D) == [m \in DOMAIN f \ D |-> f[m]]
MinOf(a, b) == IF a < b THEN a ELSE b
MaxOf(a, b) == IF a > b THEN a ELSE b

(* _RendezvousState() *)
EmptyState == [round |-> 0, complete |-> FALSE, deadline |-> NoDeadline,
               closed |-> FALSE, participants |-> EmptyFn, waitList |-> {},
               redundancyList |-> {}, lastHeartbeats |-> EmptyFn]

NoView == [round |-> -1, ranks |-> EmptyFn]

(* get_state: the sentinel decodes to a fresh, empty state. *)
Load(v) == IF v = NoState THEN EmptyState ELSE v

Parts(s) == DOMAIN s.participants
Count(s) == Cardinality(Parts(s))

(* The current shared state. *)
Cur == Load(store)

\* n's read cache serves: a sync now returns n's copy without a store call.
Cached(n) == fresh[n] > 0

-----------------------------------------------------------------------------
(* Points a must-fail model may override (cfg: Op <- BrokenOp).            *)

\* compare_set's comparison: the store still holds the value n last saw.
CasMatches(n) == tokenCurrent[n]
\* The rank _add_to_participants writes before completion (2.13: 0).
InitialRank(s) == 0
\* The rank _mark_rendezvous_complete gives m: its position in sorted(participants).
CompletionRank(s, m) == Cardinality({k \in Parts(s) : Before(k, m)})
\* _add_to_participants arms the last-call deadline when the count becomes exactly this.
LastCallArmedAt == MinNodes
\* The join op's count test for MARK_RENDEZVOUS_COMPLETE.
CompletionAllowed(c) == MinNodes <= c /\ c <= MaxNodes
\* _add_to_participants completes the round when the count becomes exactly this.
CompletesAtCount(c) == c = MaxNodes
\* _add_to_participants: the joining node leaves the wait list.
WaitListAfterJoin(n, s) == s.waitList \ {n}
\* The epilogue disarms the last call of an incomplete round below min_nodes.
LastCallDisarmed(s) == [s EXCEPT !.deadline = NoDeadline]
\* The round a round advances to (a liveness model may forget round numbers:
\* MCDynamicRendezvous's SameRound).
NextRound(r) == r + 1
\* _sanitize on reader n's host: m's heartbeat, true age `age`, is expired.
Expired(n, m, age) == age > HeartbeatExpiry
\* The last-call value n stores when it arms it (now + last_call on n's clock).
ArmedDeadline(n) == LastCallTimeout
\* n compares a stored last-call value d with its own clock: d < now.
DeadlinePassed(n, d) == d < 0
\* The join op reads `closed` (rule 1) from n's copy.
IsClosed(n) == local[n].closed
\* The join op may count every participant of n's copy as alive, so it may
\* complete the round (rules 6 and 7).  TRUE on one clock, where a copy just
\* sanitized holds no expired heartbeat; protoref's cross-domain clocks
\* (MCDynamicRendezvousClocksDomains) count a participant stamped on another
\* clock only once the reader has bounded its age.
AllCounted(n) == TRUE

-----------------------------------------------------------------------------
(* Time.                                                                   *)
AgeState(s) ==
    [s EXCEPT !.deadline = IF @ = NoDeadline THEN @ ELSE MaxOf(@ - 1, -1),
              !.lastHeartbeats = [m \in DOMAIN @ |-> MinOf(@[m] + 1, HbCap)]]
Age(v) == IF v = NoState THEN v ELSE AgeState(v)

PastOpDeadline(n) == opDl[n] < 0                     \* time.monotonic() > deadline
InRollbackWindow(n) == opDl[n] >= -RollbackPeriod    \* now <= deadline + rollback_period
LastCallPassed(n) == local[n].deadline # NoDeadline /\ DeadlinePassed(n, local[n].deadline)  \* deadline < now (UTC)

(* _should_keep_alive: n has a heartbeat entry at least keep_alive_interval old. *)
KeepAliveDue(n) ==
    /\ n \in DOMAIN local[n].lastHeartbeats
    /\ local[n].lastHeartbeats[n] >= KeepAliveInterval

\* The heartbeat timer is due: n's stored heartbeat is keep_alive_interval old
\* (the timer's period is keep_alive_interval).
HeartbeatDue(n) ==
    n \in DOMAIN Cur.lastHeartbeats /\ Cur.lastHeartbeats[n] >= KeepAliveInterval

-----------------------------------------------------------------------------
(* _remove_participant_epilogue, after a participant left (exit op,        *)
(* rollback or sanitize).  PyTorch: a complete round advances only when    *)
(* its last participant leaves; until then it stays complete, at the same  *)
(* number, with the rest.  Reference: any leave ends a complete round: it  *)
(* advances and the remaining participants move to the wait list (their   *)
(* ranks are void), so every node returning from a complete round returns *)
(* the membership it completed with (G1), and the survivors of a dead      *)
(* participant count as waiting, so their agents re-rendezvous (G5).       *)
Epilogue(s) ==
    IF s.complete
    THEN IF Parts(s) = {}
         THEN [s EXCEPT !.complete = FALSE, !.round = NextRound(@)]
         ELSE IF Reference
         THEN [s EXCEPT !.complete = FALSE, !.round = NextRound(@),
                        !.participants = EmptyFn, !.waitList = @ \cup Parts(s)]
         ELSE s
    ELSE IF Count(s) < MinNodes THEN LastCallDisarmed(s) ELSE s

(* _BackendRendezvousStateHolder._sanitize on node n's copy s: drop nodes  *)
(* whose last heartbeat is older than keep_alive_interval *                *)
(* keep_alive_max_attempt (as n's clock sees it).                          *)
Sanitize(n, s) ==
    LET D == {m \in DOMAIN s.lastHeartbeats : Expired(n, m, s.lastHeartbeats[m])}
        t == [s EXCEPT !.lastHeartbeats = Restrict(s.lastHeartbeats, D),
                       !.participants = Restrict(s.participants, D),
                       !.waitList = s.waitList \ D,
                       !.redundancyList = s.redundancyList \ D]
    IN IF D \cap Parts(s) # {} THEN Epilogue(t) ELSE t

-----------------------------------------------------------------------------
(* Business functions of _DistributedRendezvousOpExecutor, on a copy s.    *)
KeepAliveFn(n, s) == [s EXCEPT !.lastHeartbeats = Put(@, n, 0)]

MarkCompleteFn(s) ==
    [s EXCEPT !.complete = TRUE, !.deadline = NoDeadline,
              !.participants = [m \in Parts(s) |-> CompletionRank(s, m)]]

AddToParticipantsFn(n, s) ==
    LET s1 == [s EXCEPT !.waitList = WaitListAfterJoin(n, s),
                        !.participants = Put(@, n, InitialRank(s)),
                        !.lastHeartbeats = Put(@, n, 0)]
        s2 == IF Count(s1) = LastCallArmedAt
              THEN [s1 EXCEPT !.deadline = ArmedDeadline(n)] ELSE s1
    IN IF CompletesAtCount(Count(s2)) THEN MarkCompleteFn(s2) ELSE s2

AddToWaitListFn(n, s) ==
    [s EXCEPT !.redundancyList = @ \ {n}, !.waitList = @ \cup {n},
              !.lastHeartbeats = Put(@, n, 0)]

AddToRedundancyListFn(n, s) ==
    [s EXCEPT !.redundancyList = @ \cup {n}, !.lastHeartbeats = Put(@, n, 0)]

RemoveFromParticipantsFn(n, s) ==
    Epilogue([s EXCEPT !.participants = Del(@, n), !.lastHeartbeats = Del(@, n)])

RemoveFromWaitListFn(n, s) ==
    [s EXCEPT !.waitList = @ \ {n}, !.lastHeartbeats = Del(@, n)]

RemoveFromRedundancyListFn(n, s) ==
    [s EXCEPT !.redundancyList = @ \ {n}, !.lastHeartbeats = Del(@, n)]

MarkClosedFn(s) == [s EXCEPT !.closed = TRUE]

-----------------------------------------------------------------------------
(* The ops: which _Action each one picks from n's local copy.  The first   *)
(* matching rule wins (IF ... ELSE IF ...).  Results are the names of the  *)
(* TLA+ actions below: SYNC is "Delay", FINISH "Finish", and the join op's *)
(* RendezvousGracefulExitError "GracefulExit".                             *)

\* Rule conditions of the join op, named as in 2.13's _RendezvousJoinOp
\* (IsClosed is an override point, above).
InRedundancyList(n) == n \in local[n].redundancyList
InWaitList(n) == n \in local[n].waitList
IsParticipant(n) == n \in Parts(local[n])
IsComplete(n) == local[n].complete
RoundFull(n) == Count(local[n]) = MaxNodes          \* len(participants) == max_nodes
RoundHasRoom(n) == Count(local[n]) < MaxNodes        \* len(participants) < max_nodes
CanComplete(n) == CompletionAllowed(Count(local[n])) /\ local[n].deadline # NoDeadline
\* Joining would complete the round (max_nodes) with a participant n cannot count.
JoinCompletesUncounted(n) == CompletesAtCount(Count(local[n]) + 1) /\ ~AllCounted(n)

(* _RendezvousExitOp *)
ExitDecision(n) ==
    IF IsParticipant(n)
    THEN IF PastOpDeadline(n) THEN "ErrorTimeout" ELSE "RemoveFromParticipants"
    ELSE "Finish"

(* _RendezvousJoinOp (2.13).  gen_join_diagram.py renders this operator.   *)
JoinDecision(n) ==
    IF IsClosed(n)
    THEN IF InRedundancyList(n) THEN "GracefulExit" ELSE "ErrorClosed"
    ELSE IF InRedundancyList(n)
    THEN IF RoundFull(n)
         THEN IF KeepAliveDue(n) THEN "KeepAlive" ELSE "Delay"
         ELSE "RemoveFromRedundancyList"
    ELSE IF IsComplete(n) /\ IsParticipant(n)
    THEN "Finish"
    ELSE IF PastOpDeadline(n)
    THEN IF InRollbackWindow(n) /\ IsParticipant(n) THEN "RemoveFromParticipants"
         ELSE IF InRollbackWindow(n) /\ InWaitList(n) THEN "RemoveFromWaitList"
         ELSE "ErrorTimeout"
    ELSE IF IsComplete(n) /\ RoundHasRoom(n) /\ ~InWaitList(n)
    THEN "AddToWaitList"
    ELSE IF IsComplete(n) /\ ~RoundHasRoom(n) /\ ~InWaitList(n)
    THEN "AddToRedundancyList"
    ELSE IF ~IsComplete(n) /\ IsParticipant(n) /\ CanComplete(n) /\ LastCallPassed(n) /\ AllCounted(n)
    THEN "MarkRendezvousComplete"
    ELSE IF ~IsComplete(n) /\ ~IsParticipant(n) /\ ~JoinCompletesUncounted(n)
    THEN "AddToParticipants"
    ELSE IF KeepAliveDue(n)
    THEN "KeepAlive"
    ELSE "Delay"

(* _RendezvousCloseOp *)
CloseDecision(n) ==
    IF IsClosed(n) THEN "Finish"
    ELSE IF PastOpDeadline(n) THEN "ErrorTimeout"
    ELSE "MarkRendezvousClosed"

(* _RendezvousKeepAliveOp *)
KeepAliveOpDecision(n) ==
    IF KeepAliveDue(n)
    THEN IF PastOpDeadline(n) THEN "ErrorTimeout" ELSE "KeepAlive"
    ELSE "Finish"

Decision(n) ==
    CASE op[n] = "exit"      -> ExitDecision(n)
      [] op[n] = "join"      -> JoinDecision(n)
      [] op[n] = "close"     -> CloseDecision(n)
      [] op[n] = "keepalive" -> KeepAliveOpDecision(n)

Decides(n, a) == pc[n] = "decide" /\ Decision(n) = a

-----------------------------------------------------------------------------
(* Handler actions: an op starts.                                          *)

(* DynamicRendezvousHandler.next_rendezvous: stop heartbeats, one deadline *)
(* now + join timeout for the exit op and then the join op.  Under        *)
(* ElasticAgent a node that returned restarts only when its agent saw      *)
(* num_nodes_waiting() > 0 (its fresh copy has a wait list).  G1, G3, G5.  *)
AgentSeesWaiting(n) == fresh[n] > 0 /\ local[n].waitList # {}

NextRendezvous(n) ==
    /\ pc[n] = "idle"
    /\ result[n] \in {"none", "ok", "timeout"}
    /\ ElasticAgent /\ result[n] = "ok" => AgentSeesWaiting(n)
    /\ pc' = [pc EXCEPT ![n] = "sync"]
    /\ op' = [op EXCEPT ![n] = "exit"]
    /\ opDl' = [opDl EXCEPT ![n] = JoinTimeout]
    /\ result' = [result EXCEPT ![n] = "none"]
    /\ UNCHANGED <<store, tokenCurrent, local, dirty, fresh, view>>

(* The heartbeat timer of a node that returned from next_rendezvous:      *)
(* DynamicRendezvousHandler._keep_alive runs the keep-alive op with        *)
(* deadline now + timeout.heartbeat.  G5.                                  *)
KeepAliveTimer(n) ==
    /\ pc[n] = "idle"
    /\ result[n] = "ok"
    /\ TimerFiresAnyTime \/ HeartbeatDue(n)  \* else a firing with nothing due is a read-only sync
    /\ pc' = [pc EXCEPT ![n] = "sync"]
    /\ op' = [op EXCEPT ![n] = "keepalive"]
    /\ opDl' = [opDl EXCEPT ![n] = HeartbeatTimeout]
    /\ UNCHANGED <<store, tokenCurrent, local, dirty, fresh, result, view>>

(* DynamicRendezvousHandler.set_closed (and shutdown): the close op with   *)
(* deadline now + timeout.close.  G4.                                      *)
SetClosed(n) ==
    /\ IF CloseAnyTime THEN pc[n] \in {"idle", "stopped"}
       ELSE pc[n] = "idle" /\ ~Cur.closed  \* an open rendezvous (no repeated no-op calls)
    /\ n \in Closers
    /\ pc' = [pc EXCEPT ![n] = "sync"]
    /\ op' = [op EXCEPT ![n] = "close"]
    /\ opDl' = [opDl EXCEPT ![n] = CloseTimeout]
    /\ UNCHANGED <<store, tokenCurrent, local, dirty, fresh, result, view>>

-----------------------------------------------------------------------------
(* Sync steps: _BackendRendezvousStateHolder.sync.                         *)
\* A sleeper wakes once a Tick passed since it went to sleep (right after a sync).
SyncReady(n) ==
    pc[n] = "sync" \/ (pc[n] = "sleep" /\ (fresh[n] < CacheTicks \/ SleeperWakesEarly))
\* protoref's handler invalidates a waking sleeper's cache (SleeperWakesEarly).
Invalidated(n) == pc[n] = "sleep" /\ SleeperWakesEarly

AfterSync(n, s) ==
    /\ tokenCurrent' = [tokenCurrent EXCEPT ![n] = TRUE]
    /\ local' = [local EXCEPT ![n] = Sanitize(n, s)]
    /\ dirty' = [dirty EXCEPT ![n] = FALSE]
    /\ fresh' = [fresh EXCEPT ![n] = CacheTicks]
    /\ pc' = [pc EXCEPT ![n] = "decide"]

(* Not dirty, cache expired (or a sleeper invalidated it): get_state, then  *)
(* sanitize the copy.  G5.                                                 *)
SyncRead(n) ==
    /\ SyncReady(n) /\ ~dirty[n] /\ (~Cached(n) \/ Invalidated(n))
    /\ AfterSync(n, Load(store))
    /\ UNCHANGED <<store, op, opDl, result, view>>

(* Not dirty, the read cache still serves (CacheTicks): no store call and *)
(* no sanitize.                                                            *)
SyncCached(n) ==
    /\ SyncReady(n) /\ ~dirty[n] /\ Cached(n) /\ ~Invalidated(n)
    /\ pc' = [pc EXCEPT ![n] = "decide"]
    /\ UNCHANGED <<store, tokenCurrent, local, dirty, fresh, op, opDl, result, view>>

(* Dirty: set_state(local, token) is one compare_set; it reports success   *)
(* iff the store now holds exactly the bytes written.  G2.                 *)
SyncWriteWon(n) ==
    /\ SyncReady(n) /\ dirty[n]
    /\ CasMatches(n) \/ store = local[n]
    /\ store' = local[n]
    /\ local' = [local EXCEPT ![n] = Sanitize(n, local[n])]
    /\ dirty' = [dirty EXCEPT ![n] = FALSE]
    /\ fresh' = [fresh EXCEPT ![n] = CacheTicks]
    /\ pc' = [pc EXCEPT ![n] = "decide"]
    \* n's token is now the new value; every other token is outdated
    /\ tokenCurrent' = [m \in Nodes |-> m = n \/ (store' = store /\ tokenCurrent[m])]
    /\ UNCHANGED <<op, opDl, result, view>>

(* Dirty, CAS lost: the local change is discarded and the winner's state   *)
(* is loaded (and sanitized); the op decides again.  G2.                   *)
SyncWriteLost(n) ==
    /\ SyncReady(n) /\ dirty[n]
    /\ ~(CasMatches(n) \/ store = local[n])
    /\ AfterSync(n, Load(store))
    /\ UNCHANGED <<store, op, opDl, result, view>>

(* is_closed() / num_nodes_waiting() of an idle or stopped handler: sync() *)
(* outside any op (torch: under the heartbeat lock, so never during an op; *)
(* never dirty then).  Cached within the tick, else get_state + sanitize.  *)
(* Only the node's own copy changes.  Enabled by ReadOnlySyncs.  G5.       *)
ReadOnlySync(n) ==
    /\ ReadOnlySyncs
    /\ pc[n] \in {"idle", "stopped"} /\ ~dirty[n]
    /\ IF Cached(n)
       THEN UNCHANGED <<tokenCurrent, local, fresh>>
       ELSE /\ tokenCurrent' = [tokenCurrent EXCEPT ![n] = TRUE]
            /\ local' = [local EXCEPT ![n] = Sanitize(n, Load(store))]
            /\ fresh' = [fresh EXCEPT ![n] = CacheTicks]
    /\ UNCHANGED <<store, dirty, pc, op, opDl, result, view>>

-----------------------------------------------------------------------------
(* Decide-and-apply steps: the op picked the action; the business function *)
(* changes the local copy, which is marked dirty for the next sync.        *)
Apply(n, s) ==
    /\ local' = [local EXCEPT ![n] = s]
    /\ dirty' = [dirty EXCEPT ![n] = TRUE]
    /\ pc' = [pc EXCEPT ![n] = "sync"]
    /\ UNCHANGED <<store, tokenCurrent, fresh, op, result, view>>

(* KEEP_ALIVE: _DistributedRendezvousOpExecutor._keep_alive.  G5. *)
KeepAlive(n) ==
    /\ Decides(n, "KeepAlive")
    /\ Apply(n, KeepAliveFn(n, local[n]))
    /\ UNCHANGED opDl

(* ADD_TO_PARTICIPANTS: _add_to_participants.  G1. *)
AddToParticipants(n) ==
    /\ Decides(n, "AddToParticipants")
    /\ Apply(n, AddToParticipantsFn(n, local[n]))
    /\ UNCHANGED opDl

(* ADD_TO_WAIT_LIST: _add_to_wait_list.  G1. *)
AddToWaitList(n) ==
    /\ Decides(n, "AddToWaitList")
    /\ Apply(n, AddToWaitListFn(n, local[n]))
    /\ UNCHANGED opDl

(* ADD_TO_REDUNDANCY_LIST: _add_to_redundancy_list.  G1. *)
AddToRedundancyList(n) ==
    /\ Decides(n, "AddToRedundancyList")
    /\ Apply(n, AddToRedundancyListFn(n, local[n]))
    /\ UNCHANGED opDl

(* REMOVE_FROM_PARTICIPANTS: _remove_from_participants (exit op, or the    *)
(* join op's rollback).  G1, G3. *)
RemoveFromParticipants(n) ==
    /\ Decides(n, "RemoveFromParticipants")
    /\ Apply(n, RemoveFromParticipantsFn(n, local[n]))
    /\ UNCHANGED opDl

(* REMOVE_FROM_WAIT_LIST: _remove_from_wait_list (join op rollback).  G3. *)
RemoveFromWaitList(n) ==
    /\ Decides(n, "RemoveFromWaitList")
    /\ Apply(n, RemoveFromWaitListFn(n, local[n]))
    /\ UNCHANGED opDl

(* REMOVE_FROM_REDUNDANCY_LIST: _remove_from_redundancy_list; run() then   *)
(* restarts the join op's deadline (update_deadline).  G3. *)
RemoveFromRedundancyList(n) ==
    /\ Decides(n, "RemoveFromRedundancyList")
    /\ Apply(n, RemoveFromRedundancyListFn(n, local[n]))
    /\ opDl' = [opDl EXCEPT ![n] = JoinTimeout]

(* MARK_RENDEZVOUS_COMPLETE: _mark_rendezvous_complete.  G1. *)
MarkRendezvousComplete(n) ==
    /\ Decides(n, "MarkRendezvousComplete")
    /\ Apply(n, MarkCompleteFn(local[n]))
    /\ UNCHANGED opDl

(* MARK_RENDEZVOUS_CLOSED: _mark_rendezvous_closed.  G4. *)
MarkRendezvousClosed(n) ==
    /\ Decides(n, "MarkRendezvousClosed")
    /\ Apply(n, MarkClosedFn(local[n]))
    /\ UNCHANGED opDl

(* SYNC: run() sleeps 1 s (_delay); the node syncs again after a tick. G3. *)
Delay(n) ==
    /\ Decides(n, "Delay")
    /\ pc' = [pc EXCEPT ![n] = "sleep"]
    /\ UNCHANGED <<store, tokenCurrent, local, dirty, fresh, op, opDl, result, view>>

(* FINISH: the op ends.  After the exit op the join op starts (same        *)
(* deadline); after the join op next_rendezvous returns rank =             *)
(* participants[n] and world size = len(participants) of round, and the    *)
(* heartbeat timer starts.  G1. *)
Finish(n) ==
    /\ Decides(n, "Finish")
    /\ IF op[n] = "exit"
       THEN /\ op' = [op EXCEPT ![n] = "join"]
            /\ pc' = [pc EXCEPT ![n] = "sync"]
            /\ UNCHANGED <<opDl, result, view>>
       ELSE /\ op' = [op EXCEPT ![n] = "none"]
            /\ pc' = [pc EXCEPT ![n] = "idle"]
            /\ opDl' = [opDl EXCEPT ![n] = 0]
            /\ IF op[n] = "join"
               THEN /\ result' = [result EXCEPT ![n] = "ok"]
                    /\ view' = [view EXCEPT ![n] =
                                  [round |-> local[n].round, ranks |-> local[n].participants]]
               ELSE UNCHANGED <<result, view>>
    /\ UNCHANGED <<store, tokenCurrent, local, dirty, fresh>>

(* The node's next_rendezvous stops for good.  torch's holder keeps its    *)
(* copy, its token and its read cache, and is_closed() / num_nodes_waiting()*)
(* answer from them (ReadOnlySync).  Without read-only syncs nobody reads  *)
(* the copy again, so it is forgotten at once (a reduction, as Dead).  (A  *)
(* part of the actions ErrorClosed and GracefulExit, which say UNCHANGED   *)
(* themselves so that each logged action is one named definition.)        *)
Stop(n, r) ==
    /\ pc' = [pc EXCEPT ![n] = "stopped"]
    /\ op' = [op EXCEPT ![n] = "none"]
    /\ opDl' = [opDl EXCEPT ![n] = 0]
    /\ result' = [result EXCEPT ![n] = r]
    /\ IF ReadOnlySyncs
       THEN UNCHANGED <<local, tokenCurrent, fresh>>
       ELSE /\ local' = [local EXCEPT ![n] = EmptyState]
            /\ tokenCurrent' = [tokenCurrent EXCEPT ![n] = TRUE]
            /\ fresh' = [fresh EXCEPT ![n] = 0]

(* ERROR_CLOSED: run() raises RendezvousClosedError; the agent stops.  G4. *)
ErrorClosed(n) ==
    /\ Decides(n, "ErrorClosed")
    /\ Stop(n, "closed")
    /\ UNCHANGED <<store, dirty, view>>

(* Join op, closed while n is in the redundancy list: the op raises        *)
(* RendezvousGracefulExitError.  G4. *)
GracefulExit(n) ==
    /\ Decides(n, "GracefulExit")
    /\ Stop(n, "gracefulExit")
    /\ UNCHANGED <<store, dirty, view>>

(* ERROR_TIMEOUT: run() raises RendezvousTimeoutError.  next_rendezvous    *)
(* and set_closed fail; the keep-alive timer logs and swallows it.  G3.    *)
ErrorTimeout(n) ==
    /\ Decides(n, "ErrorTimeout")
    /\ op' = [op EXCEPT ![n] = "none"]
    /\ pc' = [pc EXCEPT ![n] = "idle"]
    /\ opDl' = [opDl EXCEPT ![n] = 0]
    /\ result' = [result EXCEPT ![n] = IF op[n] \in {"exit", "join"} THEN "timeout" ELSE @]
    /\ UNCHANGED <<store, tokenCurrent, local, dirty, fresh, view>>

-----------------------------------------------------------------------------
(* Environment.                                                            *)

(* A node crashes: it stops acting and heartbeating; its entries stay in   *)
(* the store until some node's sanitize removes them.  G5.                 *)
Crash(n) ==
    /\ pc[n] \notin {"crashed", "stopped"}
    /\ Cardinality({m \in Nodes : pc[m] = "crashed"}) < MaxCrashes
    /\ pc' = [pc EXCEPT ![n] = "crashed"]
    /\ op' = [op EXCEPT ![n] = "none"]
    /\ opDl' = [opDl EXCEPT ![n] = 0]
    /\ local' = [local EXCEPT ![n] = EmptyState]
    /\ tokenCurrent' = [tokenCurrent EXCEPT ![n] = TRUE]
    /\ dirty' = [dirty EXCEPT ![n] = FALSE]
    /\ fresh' = [fresh EXCEPT ![n] = 0]
    /\ UNCHANGED <<store, result, view>>

(* A copy is dead once its read cache expires (at this Tick) and nothing  *)
(* local is pending: the node's next use of it is a SyncRead that          *)
(* overwrites it.                                                          *)
Dead(n) == ~dirty[n] /\ pc[n] \in {"idle", "sleep", "sync"} /\ fresh[n] <= 1

(* One tick of time passes: every stored and copied timestamp ages, every  *)
(* running op's deadline comes closer, read caches expire, sleeps end.     *)
(* Copies that become dead are reset to the empty state (forgetting them   *)
(* changes no behaviour and keeps the state space small).                  *)
Tick ==
    /\ store' = Age(store)
    /\ tokenCurrent' = [n \in Nodes |-> Dead(n) \/ tokenCurrent[n]]
    /\ local' = [n \in Nodes |-> IF Dead(n) THEN EmptyState ELSE AgeState(local[n])]
    /\ opDl' = [n \in Nodes |-> IF op[n] = "none" THEN opDl[n]
                                ELSE MaxOf(opDl[n] - 1, OpDeadlineFloor)]
    /\ fresh' = [n \in Nodes |-> MaxOf(fresh[n] - 1, 0)]
    /\ UNCHANGED <<dirty, pc, op, result, view>>

-----------------------------------------------------------------------------
Init ==
    /\ store = NoState
    /\ tokenCurrent = [n \in Nodes |-> TRUE]   \* empty token: expects the sentinel
    /\ local = [n \in Nodes |-> EmptyState]
    /\ dirty = [n \in Nodes |-> FALSE]
    /\ fresh = [n \in Nodes |-> 0]
    /\ pc = [n \in Nodes |-> "idle"]
    /\ op = [n \in Nodes |-> "none"]
    /\ opDl = [n \in Nodes |-> 0]
    /\ result = [n \in Nodes |-> "none"]
    /\ view = [n \in Nodes |-> NoView]

SyncStep(n) == SyncRead(n) \/ SyncCached(n) \/ SyncWriteWon(n) \/ SyncWriteLost(n)

DecideStep(n) ==
    \/ KeepAlive(n) \/ AddToParticipants(n) \/ AddToWaitList(n)
    \/ AddToRedundancyList(n) \/ RemoveFromParticipants(n)
    \/ RemoveFromWaitList(n) \/ RemoveFromRedundancyList(n)
    \/ MarkRendezvousComplete(n) \/ MarkRendezvousClosed(n)
    \/ Delay(n) \/ Finish(n) \/ ErrorClosed(n) \/ GracefulExit(n) \/ ErrorTimeout(n)

NodeNext(n) ==
    \/ NextRendezvous(n) \/ KeepAliveTimer(n) \/ SetClosed(n)
    \/ SyncStep(n) \/ DecideStep(n) \/ Crash(n) \/ ReadOnlySync(n)

Next == Tick \/ \E n \in Nodes : NodeNext(n)

(* Any timing: time may pass between any two steps.  All safety           *)
(* properties are checked against Spec.                                    *)
Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Liveness assumptions.  Executor steps take no time compared to a tick:  *)
(* time passes only while every running node waits (sleeping after SYNC,   *)
(* idle, crashed, stopped).  "Keep joining": a node whose next_rendezvous  *)
(* timed out calls it again at once; a member's heartbeat timer fires as   *)
(* soon as its heartbeat is due; a node that never joined joins eventually.*)
\* Under ElasticAgent the agent of a returned node polls num_nodes_waiting()
\* at least once a tick (torch: every monitor_interval, 0.1 s by default) and
\* restarts at once when it sees a waiting node.
AgentPolls(n) == ElasticAgent /\ pc[n] = "idle" /\ result[n] = "ok" /\ fresh[n] = 0
AgentRestarts(n) == ElasticAgent /\ pc[n] = "idle" /\ result[n] = "ok" /\ AgentSeesWaiting(n)

Busy(n) ==
    \/ pc[n] \in {"sync", "decide"}
    \/ pc[n] = "sleep" /\ fresh[n] < CacheTicks
    \/ pc[n] = "idle" /\ result[n] = "timeout"
    \/ pc[n] = "idle" /\ result[n] = "ok" /\ HeartbeatDue(n)
    \/ AgentPolls(n) \/ AgentRestarts(n)

FastTick == Tick /\ \A n \in Nodes : ~Busy(n)

FastNext == FastTick \/ \E n \in Nodes : NodeNext(n)

NodeProgress(n) ==
    \/ SyncStep(n) \/ DecideStep(n)
    \/ result[n] \in {"none", "timeout"} /\ NextRendezvous(n)
    \/ HeartbeatDue(n) /\ KeepAliveTimer(n)
    \/ AgentPolls(n) /\ ReadOnlySync(n)
    \/ AgentRestarts(n) /\ NextRendezvous(n)

\* The same timing assumption without fairness: a smaller state graph for
\* quick safety checks (its behaviours are a subset of Spec's).
FastSafetySpec == Init /\ [][FastNext]_vars

FastSpec ==
    /\ Init /\ [][FastNext]_vars
    /\ \A n \in Nodes : WF_vars(NodeProgress(n))
    /\ WF_vars(FastTick)

-----------------------------------------------------------------------------
(* Properties.                                                             *)
Up == {n \in Nodes : pc[n] \notin {"crashed", "stopped"}}
Ranks(s) == s.participants
SortedRanks(s) == [m \in Parts(s) |-> Cardinality({k \in Parts(s) : Before(k, m)})]

IsState(s) ==
    /\ DOMAIN s = {"round", "complete", "deadline", "closed", "participants",
                   "waitList", "redundancyList", "lastHeartbeats"}
    /\ s.round \in Nat /\ s.complete \in BOOLEAN /\ s.closed \in BOOLEAN
    /\ s.deadline = NoDeadline \/ s.deadline \in -1..MaxDeadline
    /\ Parts(s) \subseteq Nodes
    /\ \A m \in Parts(s) : s.participants[m] \in 0..(MaxNodes - 1)
    /\ s.waitList \subseteq Nodes /\ s.redundancyList \subseteq Nodes
    /\ DOMAIN s.lastHeartbeats \subseteq Nodes
    /\ \A m \in DOMAIN s.lastHeartbeats : s.lastHeartbeats[m] \in 0..HbCap

TypeOK ==
    /\ store = NoState \/ IsState(store)
    /\ \A n \in Nodes :
        /\ tokenCurrent[n] \in BOOLEAN
        /\ IsState(local[n])
        /\ dirty[n] \in BOOLEAN /\ fresh[n] \in 0..CacheTicks
        /\ pc[n] \in {"idle", "sync", "decide", "sleep", "stopped", "crashed"}
        /\ op[n] \in {"none", "exit", "join", "close", "keepalive"}
        /\ opDl[n] \in OpDeadlineFloor..MaxOf(JoinTimeout, MaxOf(CloseTimeout, HeartbeatTimeout))
        /\ result[n] \in {"none", "ok", "timeout", "closed", "gracefulExit"}
        /\ view[n].round \in Nat \cup {-1}

\* Never more than max_nodes participants.  G1.
ParticipantsAtMostMaxInv == Count(Cur) <= MaxNodes

\* No node is in two of participants, wait list and redundancy list, in the
\* store or in any node's copy.  G1.
Disjoint(s) ==
    /\ Parts(s) \cap s.waitList = {}
    /\ Parts(s) \cap s.redundancyList = {}
    /\ s.waitList \cap s.redundancyList = {}
ListsDisjointInv == Disjoint(Cur) /\ \A n \in Nodes : Disjoint(local[n])

\* Ranks of a complete round are distinct and increase with the node order.
\* (At completion they are exactly 0..n-1, see CompletionRanksProp; in 2.13,
\* when participants leave a complete round the rest keep their ranks, so
\* gaps appear, but these two parts still hold.)  "Below max_nodes" is part
\* of TypeOK.  G1.
RanksDistinctInv ==
    Cur.complete =>
        \A x, y \in Parts(Cur) : x # y => Cur.participants[x] # Cur.participants[y]
RanksFollowNodeOrderInv ==
    Cur.complete =>
        \A x, y \in Parts(Cur) : Before(x, y) => Cur.participants[x] < Cur.participants[y]

\* The last-call deadline is set exactly while an incomplete round has at
\* least min_nodes participants.
DeadlineArmedInv ==
    /\ Cur.complete => Cur.deadline = NoDeadline
    /\ ~Cur.complete => (Cur.deadline # NoDeadline <=> Count(Cur) >= MinNodes)

\* What next_rendezvous returned to n (_get_world): rank view[n].ranks[n],
\* world size the number of members of view[n].ranks.
Returned(n) == view[n].round >= 0
HasRank(n) == n \in DOMAIN view[n].ranks
WorldSize(n) == Cardinality(DOMAIN view[n].ranks)

\* A node returns a rank below the world size it returns (a trainer with
\* RANK >= WORLD_SIZE cannot start).  NOT what 2.13 does (Variant "PyTorch":
\* a node still in its join op when a participant leaves the complete round
\* returns the shrunk membership with its old rank).  G1.
RankBelowWorldInv ==
    \A n \in Nodes : Returned(n) => HasRank(n) /\ view[n].ranks[n] < WorldSize(n)

\* Nodes returning from the same round return the same world: the same
\* members with the same ranks.  NOT what 2.13 does (see RankBelowWorldInv).
\* G1.
WorldAgreementInv ==
    \A m, n \in Nodes :
        Returned(m) /\ view[m].round = view[n].round => view[m].ranks = view[n].ranks

\* Two nodes returning from the same round never return the same rank.  What
\* G2 (no lost update) buys: if a write based on a stale copy could win, two
\* nodes that each added themselves to an empty round could each complete it
\* alone.  G1, G2.
ReturnedRanksDistinctInv ==
    \A m, n \in Nodes :
        m # n /\ Returned(m) /\ view[m].round = view[n].round /\ HasRank(m) /\ HasRank(n)
            => view[m].ranks[m] # view[n].ranks[n]

\* (Difference 6) A wait-listed node of a complete round has room to join:
\* NOT guaranteed by 2.13, checked by a must-fail model.
WaitListHasRoomInv == Cur.complete /\ Cur.waitList # {} => Count(Cur) < MaxNodes

\* ---- Action properties (checked as [][A]_store). ----
Completes == Cur'.complete /\ (~Cur.complete \/ Cur'.round # Cur.round)

\* closed never goes back.  G4.
ClosedStableProp == [][Cur.closed => Cur'.closed]_store
\* The round never decreases.  G1.
RoundMonotoneProp == [][Cur'.round >= Cur.round]_store
\* The round advances only past a complete round, by one.  G1.
RoundAdvanceProp == [][Cur'.round # Cur.round => Cur.complete /\ Cur'.round = Cur.round + 1]_store
\* A round completes with min..max participants.  G1.
CompletionCountProp == [][Completes => MinNodes <= Count(Cur') /\ Count(Cur') <= MaxNodes]_store
\* A round completes with ranks exactly 0..n-1 in sorted node order.  G1.
CompletionRanksProp == [][Completes => Ranks(Cur') = SortedRanks(Cur')]_store
\* A complete round keeps its members and their ranks until it advances:
\* nobody leaves it, joins it or is re-ranked, so every node returning from
\* it returns the world it completed with.  NOT what 2.13 does (Variant
\* "PyTorch": a leaving participant keeps the round complete, shrunk).  G1.
CompleteRoundFrozenProp ==
    [][Cur.complete /\ Cur'.round = Cur.round =>
         Cur'.complete /\ Cur'.participants = Cur.participants]_store

\* Nobody but the node itself takes an up node out of the rendezvous: a
\* sanitize drops only nodes that crashed or stopped, because every node
\* that is up heartbeats in time (under FastSafetySpec's timing).  The
\* converse of G5; what cross-host clock skew breaks
\* (MCDynamicRendezvousClocks).  G5.
Members(s) == Parts(s) \cup s.waitList \cup s.redundancyList
LiveNodeKeptProp ==
    [][\A m \in Nodes :
         m \in Members(Cur) /\ m \notin Members(Cur') /\ pc[m] \notin {"crashed", "stopped"}
            => dirty[m] /\ ~dirty'[m]]_vars

\* ---- Liveness (under FastSpec). ----
\* G3: while enough nodes are up and the rendezvous is open, an incomplete
\* round eventually completes.
RoundCompletesProp ==
    ~Cur.complete ~> (Cur.complete \/ Cur.closed \/ Cardinality(Up) < MinNodes)
\* G5: a crashed node eventually leaves the rendezvous: a survivor's
\* sanitize drops it and that survivor's next write (its heartbeat, at the
\* latest) publishes it, unless no node is left up to write.
DeadNodeRemovedProp ==
    \A d \in Nodes :
        (pc[d] = "crashed" /\ d \in Members(Cur)) ~> (d \notin Members(Cur) \/ Up = {})
\* G5: a node that returned a world containing a crashed node eventually
\* returns a world without it (the survivors form a new round), unless it
\* stops or crashes, the rendezvous closes, or fewer than min_nodes are up.
\* NOT what 2.13 does (pytorch#111646): sanitize drops the dead participant
\* from the complete round but adds nobody to the wait list, so an elastic
\* agent (which re-rendezvouses only when num_nodes_waiting() > 0) never does.
SurvivorsRegroupProp ==
    \A d, s \in Nodes :
        (pc[d] = "crashed" /\ pc[s] \notin {"crashed", "stopped"} /\ d \in DOMAIN view[s].ranks)
            ~> (\/ d \notin DOMAIN view[s].ranks \/ pc[s] \in {"crashed", "stopped"}
                \/ Cur.closed \/ Cardinality(Up) < MinNodes)
\* G4: after a close, every running next_rendezvous eventually returns.
ClosedJoinEndsProp ==
    \A n \in Nodes : (Cur.closed /\ op[n] \in {"exit", "join"}) ~> (op[n] \notin {"exit", "join"})
\* G4: a next_rendezvous still in its exit op when the store is closed (every
\* call that starts after the close) ends closed or with the graceful exit,
\* unless the node crashes.  (A call already in its join op may return
\* normally: its copy may show a round that completed before the close.)
ClosedJoinResultProp ==
    \A n \in Nodes :
        (Cur.closed /\ op[n] = "exit") ~> (result[n] \in {"closed", "gracefulExit"} \/ pc[n] = "crashed")
=============================================================================
