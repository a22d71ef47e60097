------------------ MODULE MCDynamicRendezvousClocksDomains ------------------
(***************************************************************************)
(* Clock domains: protoref's time across hosts (docs/torchrun.md, "Time   *)
(* across hosts"; impl/protoref/rendezvous/core/stamps.py).                *)
(*                                                                         *)
(* Every host's clock is its own domain, with any skew and any origin: a   *)
(* reader compares a stamp's value with its clock only when the stamp is   *)
(* of its own domain (then it reads the true age, as DynamicRendezvous's   *)
(* one clock).  A stamp of another domain it can only observe: it sees it  *)
(* appear and change in the store, on its own clock.  What a reader can    *)
(* know of such a stamp's true age is bracketed by two of its readings:   *)
(*  - lo: ticks since the reader first saw this stamp.  The stamp was      *)
(*    written before that read, so its true age is at least lo;           *)
(*  - hi: ticks since the reader's last read before that one (which did    *)
(*    not show the stamp, so it was written after it): the true age is at *)
(*    most hi.  A reader that had not read the store for an expiry, or     *)
(*    ever, knows no bound (hi saturated at HbCap > HeartbeatExpiry).      *)
(* The spec keeps true ages in the store; mem[n][m] is reader n's memory  *)
(* of m's stamp: id, the true age it had when n saw it (a ghost that ages  *)
(* as the stamp does, so an equal age in the store means the same stamp), *)
(* and lo, hi, both aged by Tick.  lastRead[n] counts the ticks since n    *)
(* last read the store (or won a write, which is a read of what it wrote). *)
(* Only stamps of the state n read are remembered (the implementation's    *)
(* memory is bounded the same way).                                        *)
(*                                                                         *)
(* Scheme "FirstSight" (protoref before 2026-12-01): sanitize expires a    *)
(* foreign stamp by lo, and the join op counts every participant.  A node  *)
(* of another domain that died before the others joined is first seen by  *)
(* them with lo = 0: it counts as alive for a full expiry, and a round can *)
(* complete with it (CountedAliveProp fails).                              *)
(* Scheme "Bracketed" (the Reference): sanitize expires by lo (never a    *)
(* live node: LiveNodeKeptProp), and the join op counts a foreign          *)
(* participant only while hi <= HeartbeatExpiry: it completes the round   *)
(* (rules 6 and 7, AllCounted) only when every participant's true age is  *)
(* known to be within the expiry.  Otherwise it waits: a live node's stamp *)
(* changes within keep_alive_interval and is then bounded by the reader's *)
(* interval between reads; a dead one expires by lo.                      *)
(***************************************************************************)
EXTENDS MCDynamicRendezvous

CONSTANTS
    ForeignNodes,  \* the nodes on host "a"; the others share host "b"
    Scheme         \* "FirstSight" | "Bracketed"

ASSUME ForeignNodes \subseteq Nodes /\ Scheme \in {"FirstSight", "Bracketed"}

VARIABLES mem, lastRead

domainVars == <<vars, mem, lastRead>>

Domain(n) == IF n \in ForeignNodes THEN "a" ELSE "b"
Foreign(n, m) == Domain(n) # Domain(m)

\* n's memory of m's stamp when the stamp's true age is `age`, if it is the
\* stamp n saw (same ghost age); else n sees it for the first time now.
Known(n, m, age) == m \in DOMAIN mem[n] /\ mem[n][m].id = age
Lo(n, m, age) == IF Known(n, m, age) THEN mem[n][m].lo ELSE 0
Hi(n, m, age) == IF Known(n, m, age) THEN mem[n][m].hi ELSE lastRead[n]

\* _sanitize on reader n: a stamp of n's domain by its true age, another
\* domain's by what n observed (lo <= true age: no live node is dropped).
DomainExpired(n, m, age) ==
    IF Foreign(n, m) THEN Lo(n, m, age) > HeartbeatExpiry ELSE age > HeartbeatExpiry

\* The join op counts m (a participant of n's copy) as alive.
Counted(n, m) ==
    \/ ~Foreign(n, m)
    \/ Scheme = "FirstSight"
    \/ /\ m \in DOMAIN local[n].lastHeartbeats
       /\ Hi(n, m, local[n].lastHeartbeats[m]) <= HeartbeatExpiry
DomainAllCounted(n) == \A m \in Parts(local[n]) : Counted(n, m)

\* What n remembers after reading state s.
Remember(n, s) ==
    [m \in {k \in DOMAIN s.lastHeartbeats : Foreign(n, k)} |->
        IF Known(n, m, s.lastHeartbeats[m]) THEN mem[n][m]
        ELSE [id |-> s.lastHeartbeats[m], lo |-> 0, hi |-> lastRead[n]]]

Reads(n, s) ==
    /\ mem' = [mem EXCEPT ![n] = Remember(n, s)]
    /\ lastRead' = [lastRead EXCEPT ![n] = 0]

Older(x) == MinOf(x + 1, HbCap)
AgeMemory(f) == [m \in DOMAIN f |-> [id |-> Older(f[m].id), lo |-> Older(f[m].lo),
                                     hi |-> Older(f[m].hi)]]

DomainNext ==
    \/ FastTick /\ mem' = [n \in Nodes |-> AgeMemory(mem[n])]
                /\ lastRead' = [n \in Nodes |-> Older(lastRead[n])]
    \/ \E n \in Nodes :
        \/ (SyncRead(n) \/ SyncWriteLost(n)) /\ Reads(n, Load(store))
        \/ SyncWriteWon(n) /\ Reads(n, local[n])
        \/ ReadOnlySync(n) /\ IF Cached(n) THEN UNCHANGED <<mem, lastRead>>
                              ELSE Reads(n, Load(store))
        \/ Crash(n) /\ mem' = [mem EXCEPT ![n] = EmptyFn]
                    /\ lastRead' = [lastRead EXCEPT ![n] = HbCap]
        \/ (NextRendezvous(n) \/ KeepAliveTimer(n) \/ SetClosed(n) \/ SyncCached(n)
            \/ DecideStep(n)) /\ UNCHANGED <<mem, lastRead>>

DomainSpec ==
    /\ Init /\ mem = [n \in Nodes |-> EmptyFn] /\ lastRead = [n \in Nodes |-> HbCap]
    /\ [][DomainNext]_domainVars

\* A round completes only with participants alive within the expiry: every
\* participant's true heartbeat age is at most keep_alive_interval *
\* keep_alive_max_attempt.  (On one clock a just-sanitized copy guarantees
\* it.)  What fails when a dead node of another domain is counted.  G1, G5.
CountedAliveProp ==
    [][Completes => \A m \in Parts(Cur') :
                        m \in DOMAIN Cur'.lastHeartbeats
                        /\ Cur'.lastHeartbeats[m] <= HeartbeatExpiry]_store

\* A witness, not a guarantee: no round completes with a node of host "a"
\* among its participants.  Its must-fail model
\* (MCDynamicRendezvousClocksDomains_reference_completes) shows that the
\* Reference's wait for a bounded age does not pass by never completing such
\* a round.
NoForeignCompletionInv == ~(Cur.complete /\ ForeignNodes \cap Parts(Cur) # {})
=============================================================================
