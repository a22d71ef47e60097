---- MODULE LedgerAudit ----
\* The Ledger with audit invariants its actions do not guarantee, for the tests of
\* tracecheck.replay.witness: traces that the transition relation accepts and an invariant rejects.
EXTENDS Ledger, FiniteSets

\* "At most one node holds money": false as soon as a transfer is received while the sender
\* keeps a balance (no Ledger guard forbids that).
SingleHolderInv == Cardinality({n \in Nodes : balance[n] > 0}) <= 1
\* "Someone holds money": false in the initial state, where every balance is 0.
FundedInv == \E n \in Nodes : balance[n] > 0
====
