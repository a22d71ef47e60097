------------------------- MODULE MCDynamicRendezvous -------------------------
(***************************************************************************)
(* Finite instances of DynamicRendezvous for TLC.                          *)
(*                                                                         *)
(* The only unbounded variable of the spec is the round number (ages and   *)
(* deadlines saturate, tokens are state values).  Safety models bound it   *)
(* with the state constraint RoundBound.  Liveness models instead forget   *)
(* it (NextRound <- SameRound, no constraint), which is exact for their    *)
(* properties; see SameRound.  Node ids are naturals in the cfg because    *)
(* rank order is node order.  No symmetry reduction: permuting nodes       *)
(* changes the rank assignment, so no two nodes are interchangeable.       *)
(*                                                                         *)
(* The Broken* operators are planted faults for must-fail models; a cfg    *)
(* substitutes one for the spec's operator (e.g. CasMatches <- ...).       *)
(***************************************************************************)
EXTENDS DynamicRendezvous, TLC

CONSTANT MaxRound   \* bound on the store's round (safety models)

RoundBound == Cur.round <= MaxRound

(* Liveness models: the round number is not tracked (every round is       *)
(* numbered as the one before).  Exact for properties that do not mention  *)
(* round numbers (RoundCompletesProp, ClosedJoin*, DeadNodeRemovedProp,    *)
(* SurvivorsRegroupProp), because no action reads a round's value: only    *)
(* the Epilogue writes it, and SyncWriteWon/SyncWriteLost compare whole    *)
(* records (store = local[n]), where two states that differ only in round *)
(* numbers lead both ways to the same successor (the store unchanged, the  *)
(* node's token current, its copy the store's sanitized value).  So        *)
(* forgetting rounds maps every behaviour, with its fairness, onto one of  *)
(* this model and back: the state space is finite without a constraint.   *)
SameRound(r) == r

\* compare_set that ignores the token: every write wins (lost update).
BrokenCasIgnoresToken(n) == TRUE

\* Ranks by arrival order: _add_to_participants writes the arrival index
\* (len(participants) before the add) and completion keeps it, as if
\* _mark_rendezvous_complete enumerated the dict instead of sorted(...).
BrokenArrivalInitialRank(s) == Count(s)
BrokenArrivalCompletionRank(s, m) == s.participants[m]

\* Completing below min: the last call is armed by the first participant
\* and the join op does not test min_nodes.
BrokenLastCallArmedAtFirst == 1
BrokenCompletionIgnoresMin(c) == c <= MaxNodes

\* Only the min test removed (the last call still armed at min_nodes).
NoMinTestCompletionAllowed(c) == c <= MaxNodes

\* Ranks are not assigned at completion: every participant keeps the 0
\* _add_to_participants wrote.
BrokenNoRankAssignment(s, m) == s.participants[m]

\* One-based ranks: the position in sorted(participants) plus one.
BrokenOneBasedRank(s, m) == Cardinality({k \in Parts(s) : Before(k, m)}) + 1

\* A node's rank is its position among all nodes, not among the round's
\* participants (the round's ranks then have gaps).
BrokenGlobalRank(s, m) == Cardinality({k \in Nodes : Before(k, m)})

\* _add_to_participants never completes the round at max_nodes.
BrokenNeverCompletesAtMax(c) == FALSE

\* _add_to_participants leaves the node in the wait list.
BrokenWaitListKept(n, s) == s.waitList

\* The epilogue leaves the last call armed when an incomplete round drops
\* below min_nodes.
BrokenLastCallKept(s) == s

\* A round advances by two.
BrokenRoundSkips(r) == r + 2

\* Heartbeats never expire: _sanitize drops nobody.
BrokenNeverExpires(n, m, age) == FALSE

\* The join op ignores `closed` (rule 1 never fires).
BrokenClosedIgnored(n) == FALSE

\* A node in the redundancy list does not look at `closed`: rule 1 fires
\* only for the others, so a redundant node of a full round waits on.
BrokenRedundantIgnoresClosed(n) == local[n].closed /\ n \notin local[n].redundancyList
=============================================================================
