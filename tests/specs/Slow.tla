---- MODULE Slow ----
\* A state space far too large to finish: for the runner's timeout test.
EXTENDS Naturals
VARIABLES a, b, c
Init == a = 0 /\ b = 0 /\ c = 0
Next == \/ a' = (a + 1) % 1000 /\ UNCHANGED <<b, c>>
        \/ b' = (b + 1) % 1000 /\ UNCHANGED <<a, c>>
        \/ c' = (c + 1) % 1000 /\ UNCHANGED <<a, b>>
====
