---- MODULE Assume ----
EXTENDS Naturals
CONSTANT N
ASSUME NPositive == N > 0
VARIABLE x
Init == x = N
Next == UNCHANGED x
====
