------------------------- MODULE MCDynamicRendezvous -------------------------
(***************************************************************************)
(* Finite instances of DynamicRendezvous for TLC.                          *)
(*                                                                         *)
(* The only unbounded variable of the spec is the round number (ages and   *)
(* deadlines saturate, tokens are state values), so every model bounds it *)
(* with the state constraint RoundBound.  Node ids are naturals in the cfg *)
(* because rank order is node order.  No symmetry reduction: permuting     *)
(* nodes changes the rank assignment, so no two nodes are interchangeable. *)
(*                                                                         *)
(* The Broken* operators are planted faults for must-fail models; a cfg    *)
(* substitutes one for the spec's operator (e.g. CasMatches <- ...).       *)
(***************************************************************************)
EXTENDS DynamicRendezvous, TLC

CONSTANT MaxRound   \* bound on the store's round

RoundBound == Cur.round <= MaxRound

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
=============================================================================
