---- MODULE Counter ----
\* A purpose-built spec for the runner's tests: each cfg drives one verdict path.
EXTENDS Naturals, Sequences
CONSTANTS Limit, Nodes
VARIABLES x, log, who

vars == <<x, log, who>>

Init == x = 0 /\ log = <<>> /\ who = [n \in Nodes |-> 0]

Inc(n) == /\ x < Limit
          /\ x' = x + 1
          /\ log' = Append(log, [node |-> n, val |-> x + 1])
          /\ who' = [who EXCEPT ![n] = @ + 1]

Reset == /\ x = Limit
         /\ x' = 0 /\ log' = <<>> /\ who' = [n \in Nodes |-> 0]

Next == (\E n \in Nodes : Inc(n)) \/ Reset
Stop == \E n \in Nodes : Inc(n)

Spec == Init /\ [][Next]_vars /\ WF_vars(Next)
StopSpec == Init /\ [][Stop]_vars

TypeOK == x \in 0..Limit
SmallInv == x < 2
ReachesLimitProp == <>(x = Limit)
NeverResetProp == [](x = 0 => [](x = 0))
StepProp == [][x' > x]_vars
====
