--------------------- MODULE MCDynamicRendezvousBootstrap ---------------------
(***************************************************************************)
(* Finite instances of DynamicRendezvousBootstrap for TLC: the round bound *)
(* (see MCDynamicRendezvous) and a candidate fix of Difference 7.  No      *)
(* symmetry: ranks follow node order.                                      *)
(***************************************************************************)
EXTENDS DynamicRendezvousBootstrap, TLC

CONSTANT MaxRound

RoundBound == Cur.round <= MaxRound

\* Candidate fix: a node that is rank 0 publishes MASTER_ADDR for every
\* round it returns from (reusing its server), not only on its first build.
FixRepublishRebuilds(n, rank) == ~infoBuilt[n] \/ rank = 0
=============================================================================
