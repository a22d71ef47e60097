---- MODULE Ledger ----
\* A purpose-built protocol for the trace checker's tests: deposits, transfers through an
\* unordered network, and receives. Small, but with guards, parameters and a network.
EXTENDS Naturals, FiniteSets
CONSTANTS Nodes, Max
VARIABLES balance, inbox
vars == <<balance, inbox>>

Init == balance = [n \in Nodes |-> 0] /\ inbox = {}

Deposit(n, a) ==
  /\ a \in 1..Max
  /\ balance[n] + a <= Max
  /\ balance' = [balance EXCEPT ![n] = @ + a]
  /\ UNCHANGED inbox

Transfer(n, to, a) ==
  /\ n # to
  /\ a \in 1..balance[n]
  /\ balance' = [balance EXCEPT ![n] = @ - a]
  /\ inbox' = inbox \cup {<<to, a>>}

Receive(n, a) ==
  /\ <<n, a>> \in inbox
  /\ balance[n] + a <= Max
  /\ balance' = [balance EXCEPT ![n] = @ + a]
  /\ inbox' = inbox \ {<<n, a>>}

Next == \E n \in Nodes, a \in 1..Max :
          \/ Deposit(n, a)
          \/ Receive(n, a)
          \/ \E to \in Nodes : Transfer(n, to, a)

TypeOK == balance \in [Nodes -> 0..Max]
====
