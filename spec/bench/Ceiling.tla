------------------------------ MODULE Ceiling ------------------------------
(***************************************************************************)
(* TLC's ceiling on this machine: a spec whose states are three small      *)
(* integers and whose actions are single increments.  It costs TLC almost   *)
(* nothing per state beyond hashing and queueing, so its distinct states    *)
(* per second are the most any spec can get.  `make bench` divides every   *)
(* deep model's rate by this one, measured in the same run, so a spec      *)
(* change that makes TLC slower per state shows up as a lower ratio.        *)
(***************************************************************************)
EXTENDS Naturals
CONSTANT N
VARIABLES a, b, c
vars == <<a, b, c>>

Init == a = 0 /\ b = 0 /\ c = 0

Next == \/ a' = (a + 1) % N /\ UNCHANGED <<b, c>>
        \/ b' = (b + 1) % N /\ UNCHANGED <<a, c>>
        \/ c' = (c + 1) % N /\ UNCHANGED <<a, b>>

TypeOK == a \in 0..(N - 1) /\ b \in 0..(N - 1) /\ c \in 0..(N - 1)
=============================================================================
