---------------------------- MODULE MCDistAutograd ----------------------------
(***************************************************************************)
(* Finite instances of DistAutograd for TLC: id budgets and call patterns. *)
(* The MCDistAutograd_*.cfg files pick one of these per model.  Workers    *)
(* are ranks; worker 0 is the creator (the application that opens          *)
(* contexts), 1 and 2 are callees.  A budget is a model bound standing for *)
(* torch's 2^48 - 1; every pass model gives each worker enough ids for     *)
(* every call its peers can make of it (a short budget would leave a       *)
(* handler stuck, which ForwardTerminatesProp reports).                     *)
(***************************************************************************)
EXTENDS DistAutograd

\* Context budgets: worker 0 opens one context.
Ctx1 == [w \in Workers |-> IF w = 0 THEN 1 ELSE 0]
\* Worker 0 opens two contexts (two threads, or one thread twice).
Ctx2 == [w \in Workers |-> IF w = 0 THEN 2 ELSE 0]
\* Every worker opens one context (the overflow models).
CtxAll1 == [w \in Workers |-> 1]

\* Message-id budgets (one id per wrapped request or wrapped response).
\* 0 calls 1 once; 1 wraps its answer.
MsgOne == [w \in Workers |-> 1]
\* 0 calls twice (1, or 1 and 2, or itself and 1); each callee wraps up to
\* two answers or makes a nested call and wraps its answer.
MsgTwo == [w \in Workers |-> 2]
\* 0 calls 1 once; 1's handler calls 2 (nested) and wraps its answer; 2 wraps.
MsgNest == [w \in Workers |-> IF w = 1 THEN 2 ELSE 1]
\* 0 calls 1 once; 1's handler calls 2 twice and wraps its answer; 2 wraps twice.
MsgNest2 == [w \in Workers |-> IF w = 1 THEN 3 ELSE IF w = 2 THEN 2 ELSE 1]
\* 0 calls 1 twice; each of 1's handlers nests once and wraps; 2 wraps twice.
MsgDeep == [w \in Workers |-> IF w = 1 THEN 4 ELSE 2]

\* Call patterns.  The creator 0 calls 1 (and 2, or itself); 1's handler
\* calls 2, a worker reached only through a nested RPC (#28124); 2's handler
\* may call back to the creator.
Calls01 == {<<0, 1>>}
Calls012 == {<<0, 1>>, <<0, 2>>}
Calls00 == {<<0, 0>>}
Nest12 == {<<1, 2>>}
Nest120 == {<<1, 2>>, <<2, 0>>}
NoCalls == {}

=============================================================================
