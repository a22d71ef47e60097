------------------------------- MODULE MCRRef -------------------------------
(***************************************************************************)
(* Finite instances of RRef for TLC: worker model values, id bounds,       *)
(* communication patterns, symmetry, and the reachability witness for the  *)
(* design note's "as if it never existed" argument.  The MCRRef_*.cfg      *)
(* files pick one of these per model.                                      *)
(***************************************************************************)
EXTENDS RRef, TLC

CONSTANTS w1, w2, w3, w4   \* worker model values

\* Id budgets: one rpc.remote draws 2 ids (RRefId, ForkId), each fork 1.
Ids2 == [w \in Workers |-> 2]
Ids3 == [w \in Workers |-> 3]
Ids4 == [w \in Workers |-> 4]
\* Asymmetric budget: w1 can create an RRef and fork it; the others fork.
IdsLead3 == [w \in Workers |-> IF w = w1 THEN 3 ELSE 1]
IdsQuick == [w \in Workers |-> IF w = w1 THEN 3 ELSE 0]
IdsLead3Two == [w \in Workers |-> IF w = w1 THEN 3 ELSE 2]

\* One rpc.remote (or a local RRef and a fork) on w1 only.
IdsOne2 == [w \in Workers |-> IF w = w1 THEN 2 ELSE 0]
\* One rpc.remote and two forks on w1 only.
IdsFour1 == [w \in Workers |-> IF w = w1 THEN 4 ELSE 0]
\* The chain: the owner w1 creates and forks once, A and Y fork once each.
IdsChain == [w \in Workers |-> IF w \in {w1} THEN 2 ELSE IF w \in {w2, w3} THEN 1 ELSE 0]

\* Deep rooted at rpc.remote: w1 creates on w2 and can fork once, w3 can fork
\* once, back to w1: the chain creator(w1) -> w3 -> w1 (three UserRRefs).
\* (With one more fork on w1 the model did not finish in 10 minutes.)
IdsDeep == [w \in Workers |-> IF w = w1 THEN 3 ELSE IF w = w3 THEN 1 ELSE 0]
DeepLinks == {<<w1, w3>>, <<w3, w1>>}

\* Deep chain on three workers: the owner w1 creates a local RRef and shares
\* it with A = w2, A with Y = w3, Y with Z back on w2: OwnerRRef -> A -> Y -> Z.
IdsChain3 == [w \in Workers |-> IF w = w1 THEN 2 ELSE 1]
Chain3Links == {<<w1, w2>>, <<w2, w3>>, <<w3, w2>>}

AllLinks == {p \in Workers \X Workers : p[1] # p[2]}
NoLinks == {}
\* The design note's chain OwnerRRef -> A -> Y -> Z with owner w1,
\* A = w2, Y = w3, Z = w4: each worker only talks to the next one.
ChainLinks == {<<w1, w2>>, <<w2, w3>>, <<w3, w4>>}
\* user-to-user sharing only: w2 creates on owner w1 and shares with w3.
UserToUserLinks == {<<w2, w1>>, <<w2, w3>>}
\* the creator w1 of an RRef owned by w2 shares it with user w3 only (S4).
CreatorToUser == {<<w1, w3>>}
\* user-to-owner sharing (S1/S2) plus user-to-user.
UserLinks == {<<w2, w1>>, <<w2, w3>>, <<w3, w1>>}

\* State constraint: at most one RRef exists.  The RRefs of a worker are
\* independent of each other in the protocol (no message, map entry or
\* guard relates two RRefIds), so one RRef with a long fork chain covers
\* more of the protocol than two short ones, at a fraction of the states.
AllRRefs == {u.rref : u \in Users} \cup UNION {ownerHeld[w] \cup owners[w] : w \in Workers}
                                   \cup {m.rref : m \in net}
OneRRef == Cardinality(AllRRefs) <= 1

\* Deep-model bounds (state constraints, i.e. exhaustive within the bound):
\* one RRef, at most one to_here in the whole run, at most one retry copy
\* in flight at a time.
DeepBounds ==
    /\ OneRRef
    /\ Cardinality(fetched) <= 1
    /\ Cardinality({m \in net : m.dup = 2}) <= 1
\* ... and no OwnerRRef held by application code: with SelfRemote off this
\* prunes rpc.RRef(obj), leaving the RRef that rpc.remote creates.
DeepBoundsRemote == DeepBounds /\ \A w \in Workers : ownerHeld[w] = {}

\* Worker permutations.  Sound for safety when the constants are symmetric
\* (uniform id budget, AllLinks); never used with liveness.
Sym == Permutations(Workers)

(* Reachability witness.  "No fork of r has been registered and deleted at *)
(* the owner while r's rpc.remote call is still in flight": violated      *)
(* exactly when the owner has seen a UserRRef come and go before the       *)
(* OwnerRRef's data exists -- the design note's "as if it never existed".  *)
NeverExistedNotReachedInv ==
    \A w \in Workers : \A e \in removedForks[w] :
        ~\E m \in net : m.type = "PYTHON_REMOTE_CALL" /\ m.rref = e[1] /\ m.dst = w

(* Teeth for HistoryGrowsProp: an owner that garbage-collects its          *)
(* tombstones at any moment (no rule yet says when a tombstone can go), a  *)
(* step the trace format could not describe as "what was added".          *)
ForgetTombstones(w) ==
    /\ tombstones[w] # {}
    /\ tombstones' = [tombstones EXCEPT ![w] = {}]
    /\ UNCHANGED <<nextId, owners, pendingOwners, forks, pendingUsers, confirmedUsers,
                   pendingChildren, ownerHeld, selfCalls, users, held, fetching,
                   fetched, deleted, timedOut, remoteErrors, net, phase, stopping,
                   removedForks, erasedOwners>>
ForgetTombstonesSpec ==
    Init /\ [][Next \/ \E w \in Workers : ForgetTombstones(w)]_vars

(* Planted fault for UniqueIdsInv (the implementation's reuse-ids fault,  *)
(* protoref.rref.sim.faults): rpc.remote advances nextLocalId_ by one only, so  *)
(* the creator's ForkId is also the next RRefId.  cfg: RemoteIds <- OneId.  *)
OneId == 1

(* #31893 undone: agent.join does not wait for the RREF_USER_DELETEs of the *)
(* sweep, so a context is destroyed with messages to it still in flight.    *)
(* cfg: JoinDone <- JoinNotAwaited.                                          *)
JoinNotAwaited(w) == TRUE

\* Children fork again: the creator w1 (rpc.remote on w2) shares with w3, which
\* shares on with the creator or the owner (IdsDeep: w1 3 ids, w3 1).
GrandchildLinks == {<<w1, w3>>, <<w3, w1>>, <<w3, w2>>}
\* Two RRefs shared at once: w1 and w3 each create an RRef on w2 and share it with
\* the other (DeepLinks).
IdsTwoCreators == [w \in Workers |-> IF w \in {w1, w3} THEN 3 ELSE 0]
\* Bounds of the two-RRef models (a state constraint: exhaustive within it): no
\* OwnerRRef held by application code, which prunes rpc.RRef(obj) so that both RRefs
\* come from rpc.remote, and no to_here (with one to_here allowed the Reference model
\* had not finished after 1.39 million distinct states and 25 minutes).
TwoRRefBounds ==
    /\ \A w \in Workers : ownerHeld[w] = {}
    /\ fetched = {}
\* w1 and w3 play the same part in the two-RRef models (same id budget, DeepLinks,
\* both create on w2): swapping them is a symmetry of those instances (safety only).
SymCreators == Permutations({w1, w3})
\* Self sharing: w1 creates an RRef on w2 and may share it with itself; the owner
\* w2 may share its OwnerRRef with itself.
IdsSelfShare == [w \in Workers |-> IF w = w1 THEN 3 ELSE 1]

\* Sending an RRef to oneself in a user RPC (torch allows it; protoref refuses it).
SelfLinks == {<<w, w>> : w \in Workers}
AllAndSelfLinks == AllLinks \cup SelfLinks

=============================================================================
