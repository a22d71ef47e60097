-------------------------------- MODULE RRef --------------------------------
(***************************************************************************)
(* The lifecycle of PyTorch's remote references (torch.distributed.rpc     *)
(* RRef), modelled at the level of the RRefContext singleton of each       *)
(* worker.                                                                 *)
(*                                                                         *)
(* What is modelled                                                        *)
(*  - Workers, each with an id counter (nextLocalId_) from which RRefIds   *)
(*    and ForkIds are drawn as <<worker, counter>> pairs.                  *)
(*  - The per-worker maps of RRefContext: owners_, pendingOwners_ (with    *)
(*    the fetches parked on it), forks_, pendingUsers_, confirmedUsers_,   *)
(*    pendingChildren_; the UserRRef objects and what keeps them alive     *)
(*    (an application reference, a pending-user or pending-child entry,   *)
(*    a to_here in progress); the OwnerRRefs held by application code.     *)
(*  - An unordered network (a set of message records).  Retried control    *)
(*    messages (RREF_FORK_REQUEST, RREF_CHILD_ACCEPT, RREF_USER_DELETE)    *)
(*    are delivered at least once: with Duplicates a second copy may be    *)
(*    delivered at any later time (RetrySend), and a first attempt that    *)
(*    was retried may be lost for good (LoseFirstAttempt).  User calls     *)
(*    (PYTHON_REMOTE_CALL, PYTHON_RREF_FETCH_CALL, a PYTHON_CALL carrying  *)
(*    an RRef argument or return value) and their responses are delivered *)
(*    at most once and never retried.                                      *)
(*  - rpc.remote() to another worker and to self, rpc.RRef(obj), to_here, *)
(*    sharing an RRef in all four scenarios of the design note, the fork   *)
(*    request and its RREF_ACK, the child accept, the application dropping *)
(*    a reference, the UserRRef destructor (G1), OwnerRRef deletion, the   *)
(*    timeouts of rpc.remote and to_here (with late processing), and the   *)
(*    graceful-shutdown sweep (constant Shutdown).                         *)
(*                                                                         *)
(* Two variants, selected by the constant Variant:                         *)
(*  - "PyTorch": what PyTorch 2.13 does (no tombstones, timeouts with late *)
(*    processing, fetches after delete park in pendingOwners_, the owner   *)
(*    creates an empty OwnerRRef when it unpickles its own RRef, self-     *)
(*    remote timeouts delete the self fork), with two faults of its own,  *)
(*    each behind a constant: an UNKNOWN error of rpc.remote leaves the    *)
(*    creator pending for ever (UnknownErrors), and sendWithRetries gives  *)
(*    up on a control message (RetryExhaustion).                           *)
(*  - "Reference": the protocol our implementation follows; every          *)
(*    difference is marked IF Reference and justified in docs/rref.md by   *)
(*    a counterexample of the PyTorch variant.                             *)
(* Ablations: G1 = FALSE drops the USER_DELETE of a destroyed UserRRef;   *)
(* workers outside G2Workers do not keep a parent alive until its child   *)
(* is accepted; MCRRef cfgs override RemoteIds or JoinDone for the planted *)
(* faults of MCRRef_reuseIds and MCRRef_pytorch31893.                      *)
(*                                                                         *)
(* What is abstracted away                                                 *)
(*  - Values, types, the UDFs themselves (a received RRef is simply held   *)
(*    by application code), TorchScript, profiling and autograd wrappers.  *)
(*  - Request/response pairing of user RPCs: PYTHON_CALL stands for any    *)
(*    user message that pickles an RRef (argument or return value); the    *)
(*    gating of UDFs on pending users (#34497) is not modelled, which only *)
(*    adds behaviours (return values are never gated in PyTorch); a call   *)
(*    carries one RRef, so the coupling gating creates between two RRefs   *)
(*    of one call under PyTorch's faults is argued in docs/rref.md ("One   *)
(*    RRef at a time"), not modelled.  Links may hold <<w, w>>: an RRef    *)
(*    sent to oneself.                                                      *)
(*  - Thread scheduling: each handler runs atomically under the context    *)
(*    mutex; callbacks are separate steps.                                 *)
(*  - Real time: a timeout may fire at any moment while its future is      *)
(*    incomplete.  Crashes and lost user calls are out of scope (the      *)
(*    design note's assumptions); retry exhaustion is in scope only as     *)
(*    the PyTorch fault above.                                             *)
(*  - Each UserRRef calls to_here at most once and each control message   *)
(*    is duplicated at most once, so every behaviour is finite; this keeps *)
(*    the liveness properties checkable under one weak-fairness condition. *)
(***************************************************************************)
EXTENDS Integers, FiniteSets, TLC  \* TLC: :> and @@ extend the function users

CONSTANTS
    Workers,      \* the RPC workers, each with one RRefContext
    MaxLocalId,   \* [Workers -> Nat]: bound of each worker's nextLocalId_
    Variant,      \* "PyTorch" | "Reference"
    Links,        \* pairs <<src, dst>>, src # dst, over which applications
                  \* send RRefs in user RPCs (a model bound)
    RemoteDsts,   \* workers that rpc.remote may target (a model bound)
    SelfRemote,   \* BOOLEAN: rpc.remote(self) is used
    Duplicates,   \* BOOLEAN: retried control messages may arrive twice
    Timeouts,     \* BOOLEAN: rpc.remote and to_here may time out
    G1,           \* BOOLEAN: a destroyed UserRRef sends RREF_USER_DELETE
    G2Workers,    \* workers that keep a parent UserRRef until its child is accepted
    Shutdown,     \* BOOLEAN: the graceful shutdown (rpc.shutdown) is modelled
    UnknownErrors, \* BOOLEAN, PyTorch only: rpc.remote may fail with an UNKNOWN error
    RetryExhaustion \* BOOLEAN, PyTorch only: sendWithRetries may give up

VARIABLES
    nextId,          \* [Workers -> Nat]: RRefContext::nextLocalId_
    owners,          \* [Workers -> SUBSET Id]: keys of owners_
    pendingOwners,   \* [Workers -> SUBSET (Id \X Id \X Workers)]: parked fetches
                     \* <<rrefId, forkId of the fetching UserRRef, its worker>>;
                     \* the keys of pendingOwners_ are their first components
    forks,           \* [Workers -> SUBSET (Id \X Id)]: forks_ as pairs <<rrefId, forkId>>
    pendingUsers,    \* [Workers -> SUBSET Id]: keys (ForkIds) of pendingUsers_
    confirmedUsers,  \* [Workers -> SUBSET Id]: keys of confirmedUsers_
    pendingChildren, \* [Workers -> SUBSET (Id \X Id)]: <<child ForkId, parent ForkId>>
    ownerHeld,       \* [Workers -> SUBSET Id]: OwnerRRefs held by application code
    selfCalls,       \* [Workers -> SUBSET Id]: self-remote creation futures not yet completed
    tombstones,      \* [Workers -> SUBSET (Id \X Id)]: Reference only: forks whose
                     \* RREF_USER_DELETE the owner has processed
    users,           \* [ForkId -> [fork, rref, owner, on, parent]]: every UserRRef
                     \* created, by its ForkId (a function, not a set of records, so
                     \* that finding a UserRRef is a lookup, not a search)
    held,            \* SUBSET Id: UserRRefs (by ForkId) that application code holds
    fetching,        \* SUBSET Id: UserRRefs with a fetch (to_here) outstanding
    fetched,         \* SUBSET Id: UserRRefs that have called to_here (once each)
    deleted,         \* SUBSET Id: UserRRefs destroyed / deletedOnOwner_ set
    timedOut,        \* SUBSET Id: UserRRefs whose rpc.remote timed out (timedOut_)
    remoteErrors,    \* SUBSET Id: UserRRefs whose rpc.remote future failed with an
                     \* UNKNOWN error (PyTorch records it nowhere: the callback threw)
    net,             \* set of message records in flight
    phase,           \* [Workers -> {"running", "swept", "destroyed"}]: shutdown progress
    stopping,        \* BOOLEAN: _wait_all_workers has passed; no new user calls
    removedForks,    \* history: [Workers -> SUBSET (Id \X Id)] forks removed from forks_
    erasedOwners     \* history: [Workers -> SUBSET Id] owners erased from owners_

vars == <<nextId, owners, pendingOwners, forks, pendingUsers, confirmedUsers,
          pendingChildren, ownerHeld, selfCalls, tombstones, users, held,
          fetching, fetched, deleted, timedOut, remoteErrors, net, phase, stopping,
          removedForks, erasedOwners>>

-----------------------------------------------------------------------------
(* Identifiers and messages                                                 *)

Id == UNION {{<<w, n>> : n \in 1..MaxLocalId[w]} : w \in Workers}  \* GloballyUniqueId
NoId == <<>>                 \* "no parent": the root UserRRef of rpc.remote
Reference == Variant = "Reference"

\* Tombstones bounded (issue 28): definitions a model overrides in its cfg
\* (`DeleteLast = TRUE`), so the other models keep their state space, figures
\* and counterexamples; trace headers name them (old traces: FALSE).
\* DeleteLast, Reference only: an RREF_USER_DELETE is the last message about
\* its fork that can reach the owner, so the owner keeps no tombstone at all
\* (TombstoneBoundInv).  Two waits on the user's side make it so (each has an
\* ablation in DeleteLastAblate, checked by DeleteIsLastInv):
\*  "remote": a creator whose rpc.remote timed out stays pending (pinned)
\*            until the late REMOTE_RET, so its delete follows the owner's
\*            AssignOwnerRRef (the one PYTHON_REMOTE_CALL, never retried);
\*  "fork":   a UserRRef is not destroyed while a copy of its own
\*            RREF_FORK_REQUEST is in flight (its retry layer knows: the copy
\*            is unacknowledged), so no duplicate follows its delete.
\* Duplicate RREF_USER_DELETEs need nothing: the fork is gone, and nothing
\* that could register it again can still arrive.
DeleteLast == FALSE
DeleteLastAblate == {}
NoTombstones == Reference /\ DeleteLast
PinTimedOut == NoTombstones /\ "remote" \notin DeleteLastAblate
AwaitForkCopies == NoTombstones /\ "fork" \notin DeleteLastAblate
\* A copy of f's own RREF_FORK_REQUEST is in flight (AwaitForkCopies keeps f alive).
ForkRequestOut(f) == \E m \in net : m.type = "RREF_FORK_REQUEST" /\ m.fork = f

MsgTypes == {"PYTHON_REMOTE_CALL", "REMOTE_RET", "PYTHON_RREF_FETCH_CALL",
             "PYTHON_RREF_FETCH_RET", "PYTHON_CALL", "RREF_FORK_REQUEST",
             "RREF_ACK", "RREF_CHILD_ACCEPT", "RREF_USER_DELETE"}
Retried == {"RREF_FORK_REQUEST", "RREF_CHILD_ACCEPT", "RREF_USER_DELETE"}

\* One record shape for every message.  owner is the RRef's owner; parent is
\* the ForkId of the parent RRef for PYTHON_CALL (the RRefId when the owner
\* is the parent) and NoId otherwise: PyTorch's RRefForkData carries only the
\* parent's worker (= src), the parent ForkId is history used by ForkTreeInv.
\* dup: 0 = first attempt, 1 = first attempt already retried, 2 = the retry's
\* copy (at most one copy per message keeps behaviours finite).
Msg(t, s, d, r, o, f, p) ==
    [type |-> t, src |-> s, dst |-> d, rref |-> r, owner |-> o, fork |-> f,
     parent |-> p, dup |-> 0]

InFlight(t, d, r, f) ==
    {m \in net : m.type = t /\ m.dst = d /\ m.rref = r /\ m.fork = f}

\* fn with one more entry, x :> e (fn's own entry if x is already in its domain).
\* users grows only through it. Named so that trace validation can compute it natively
\* (tracecheck's TLCOverrides: one sorted insertion, where TLC's @@ copies the whole function
\* and scans its domain at every step that creates a UserRRef); model checking and every run
\* without tracecheck's Java classes evaluate this definition.
AddEntry(fn, x, e) == fn @@ (x :> e)

\* Every UserRRef created, as a set of records.
Users == {users[f] : f \in DOMAIN users}
UserOn(w, f) == IF f \in DOMAIN users /\ users[f].on = w THEN {users[f]} ELSE {}
UserOf(f) == users[f]

\* A UserRRef object is alive while something holds a strong reference:
\* application code, pendingUsers_, a pendingChildren_ entry (G2), or a
\* to_here in progress.
Referenced(w, f) ==
    \/ f \in held
    \/ f \in pendingUsers[w]
    \/ \E e \in pendingChildren[w] : e[2] = f
    \/ f \in fetching

Running(w) == phase[w] = "running"
AppCanAct(w) == ~stopping /\ Running(w)

-----------------------------------------------------------------------------
(* Owner-side helper: RRefContext::delForkOfOwner(r, f), run inside a       *)
(* handler.  A missing fork is only logged; the OwnerRRef is erased when    *)
(* its last fork goes.                                                      *)
DelForkLocally(w, r, f) ==
    LET present == <<r, f>> \in forks[w]
        rest    == forks[w] \ {<<r, f>>}
        last    == present /\ ~\E e \in rest : e[1] = r
    IN /\ forks' = [forks EXCEPT ![w] = rest]
       /\ removedForks' = IF present
                            THEN [removedForks EXCEPT ![w] = @ \cup {<<r, f>>}]
                            ELSE removedForks
       /\ owners' = IF last THEN [owners EXCEPT ![w] = @ \ {r}] ELSE owners
       /\ erasedOwners' = IF last /\ r \in owners[w]
                            THEN [erasedOwners EXCEPT ![w] = @ \cup {r}]
                            ELSE erasedOwners

\* Replies to every fetch of r parked on w (pendingOwners_ future completed).
ParkedFetches(w, r) == {p \in pendingOwners[w] : p[1] = r}
FetchReplies(w, r) ==
    {Msg("PYTHON_RREF_FETCH_RET", w, p[3], r, w, p[2], NoId) : p \in ParkedFetches(w, r)}

-----------------------------------------------------------------------------
(* Initial state                                                            *)

Init ==
    /\ nextId = [w \in Workers |-> 1]
    /\ owners = [w \in Workers |-> {}]
    /\ pendingOwners = [w \in Workers |-> {}]
    /\ forks = [w \in Workers |-> {}]
    /\ pendingUsers = [w \in Workers |-> {}]
    /\ confirmedUsers = [w \in Workers |-> {}]
    /\ pendingChildren = [w \in Workers |-> {}]
    /\ ownerHeld = [w \in Workers |-> {}]
    /\ selfCalls = [w \in Workers |-> {}]
    /\ tombstones = [w \in Workers |-> {}]
    /\ users = <<>>
    /\ held = {}
    /\ fetching = {}
    /\ fetched = {}
    /\ deleted = {}
    /\ timedOut = {}
    /\ remoteErrors = {}
    /\ net = {}
    /\ phase = [w \in Workers |-> "running"]
    /\ stopping = FALSE
    /\ removedForks = [w \in Workers |-> {}]
    /\ erasedOwners = [w \in Workers |-> {}]

-----------------------------------------------------------------------------
(* Application actions (no fairness: the application may never act)         *)

(* rpc.RRef(obj) on w: RRefContext::createOwnerRRef.  The OwnerRRef is not  *)
(* put into owners_ until it is first forked (so an unshared local RRef     *)
(* never leaks).                                                            *)
CreateLocalRRef(w) ==
    /\ AppCanAct(w)
    /\ nextId[w] <= MaxLocalId[w]
    /\ nextId' = [nextId EXCEPT ![w] = @ + 1]
    /\ ownerHeld' = [ownerHeld EXCEPT ![w] = @ \cup {<<w, nextId[w]>>}]
    /\ UNCHANGED <<owners, pendingOwners, forks, pendingUsers, confirmedUsers,
                   pendingChildren, selfCalls, tombstones, users, held, fetching,
                   fetched, deleted, timedOut, remoteErrors, net, phase, stopping,
                   removedForks, erasedOwners>>

(* createUserRRef draws the RRefId and then the ForkId from the worker's one *)
(* counter: two ids per rpc.remote to another worker.  (A planted fault     *)
(* overrides it: MCRRef_reuseIds.)                                          *)
RemoteIds == 2

(* rpc.remote(dst, f) on w (api.py remote -> pyRemotePythonUdf).            *)
(* dst # w: a UserRRef with a fresh RRefId then a fresh ForkId; send        *)
(* PYTHON_REMOTE_CALL(r, f); addPendingUser(f) keeps the UserRRef alive     *)
(* until REMOTE_RET (G2: the OwnerRRef is the child of the creator).        *)
(* dst = w: createOwnerRRef + addSelfAsFork (owners_[r], forks_[r] = {r}),  *)
(* send PYTHON_REMOTE_CALL(r, r) to self; the caller gets the OwnerRRef.    *)
Remote(w, dst) ==
    /\ AppCanAct(w)
    /\ \/ dst \in RemoteDsts \ {w}
       \/ SelfRemote /\ dst = w
    /\ LET r == <<w, nextId[w]>>
       IN IF dst # w
          THEN LET f == <<w, nextId[w] + 1>>
               IN /\ nextId[w] + 1 <= MaxLocalId[w]
                  /\ nextId' = [nextId EXCEPT ![w] = @ + RemoteIds]
                  /\ users' = AddEntry(users, f, [fork |-> f, rref |-> r, owner |-> dst,
                                                    on |-> w, parent |-> NoId])
                  /\ held' = held \cup {f}
                  /\ pendingUsers' = [pendingUsers EXCEPT ![w] = @ \cup {f}]
                  /\ net' = net \cup {Msg("PYTHON_REMOTE_CALL", w, dst, r, dst, f, NoId)}
                  /\ UNCHANGED <<owners, forks, ownerHeld, selfCalls>>
          ELSE /\ nextId[w] <= MaxLocalId[w]
               /\ nextId' = [nextId EXCEPT ![w] = @ + 1]
               /\ owners' = [owners EXCEPT ![w] = @ \cup {r}]
               /\ forks' = [forks EXCEPT ![w] = @ \cup {<<r, r>>}]
               /\ ownerHeld' = [ownerHeld EXCEPT ![w] = @ \cup {r}]
               /\ selfCalls' = [selfCalls EXCEPT ![w] = @ \cup {r}]
               /\ net' = net \cup {Msg("PYTHON_REMOTE_CALL", w, w, r, w, r, NoId)}
               /\ UNCHANGED <<users, held, pendingUsers>>
    /\ UNCHANGED <<pendingOwners, confirmedUsers, pendingChildren, tombstones,
                   fetching, fetched, deleted, timedOut, remoteErrors, phase, stopping,
                   removedForks, erasedOwners>>

(* Pickling an RRef into a user RPC to dst (an argument of rpc_sync/        *)
(* rpc_async, or a return value): RRefContext::prepareChildFork.  A fresh    *)
(* child ForkId c is drawn on the sender.  parent = r means the sender is    *)
(* the owner (its OwnerRRef is the parent): addForkOfOwner(r, c) and         *)
(* owners_[r] are registered at once ("Early Fork Registration").           *)
(* Otherwise parent is the sender's UserRRef: addPendingChild(c, parent)     *)
(* keeps the parent alive until RREF_CHILD_ACCEPT (G2).  A timed-out or      *)
(* deleted UserRRef cannot be forked (fork() raises).                       *)
PrepareChildFork(w, dst, r, parent) ==
    /\ AppCanAct(w)
    /\ <<w, dst>> \in Links
    /\ nextId[w] <= MaxLocalId[w]
    /\ LET c == <<w, nextId[w]>>
       IN IF parent = r
          THEN /\ r \in ownerHeld[w] \cup owners[w]
               /\ forks' = [forks EXCEPT ![w] = @ \cup {<<r, c>>}]
               /\ owners' = [owners EXCEPT ![w] = @ \cup {r}]
               /\ net' = net \cup {Msg("PYTHON_CALL", w, dst, r, w, c, r)}
               /\ UNCHANGED pendingChildren
          ELSE \E u \in UserOn(w, parent) :
               /\ u.rref = r
               /\ parent \in held
               /\ parent \notin timedOut
               /\ parent \notin deleted
               /\ pendingChildren' =
                    IF w \in G2Workers
                      THEN [pendingChildren EXCEPT ![w] = @ \cup {<<c, parent>>}]
                      ELSE pendingChildren
               /\ net' = net \cup {Msg("PYTHON_CALL", w, dst, r, u.owner, c, parent)}
               /\ UNCHANGED <<forks, owners>>
    /\ nextId' = [nextId EXCEPT ![w] = @ + 1]
    /\ UNCHANGED <<pendingOwners, pendingUsers, confirmedUsers, ownerHeld,
                   selfCalls, tombstones, users, held, fetching, fetched,
                   deleted, timedOut, remoteErrors, phase, stopping, removedForks, erasedOwners>>

(* UserRRef.to_here() on a user: send PYTHON_RREF_FETCH_CALL(r) to the      *)
(* owner; the call keeps the UserRRef alive while it runs (#28885/#29306).  *)
(* Raises if the RRef timed out or was deleted.                             *)
ToHere(w, f) ==
    /\ AppCanAct(w)
    /\ \E u \in UserOn(w, f) :
        /\ f \in held
        /\ f \notin fetched
        /\ f \notin timedOut
        /\ f \notin deleted
        /\ fetching' = fetching \cup {f}
        /\ fetched' = fetched \cup {f}
        /\ net' = net \cup {Msg("PYTHON_RREF_FETCH_CALL", w, u.owner, u.rref, u.owner, f, NoId)}
    /\ UNCHANGED <<nextId, owners, pendingOwners, forks, pendingUsers,
                   confirmedUsers, pendingChildren, ownerHeld, selfCalls,
                   tombstones, users, held, deleted, timedOut, remoteErrors, phase, stopping,
                   removedForks, erasedOwners>>

(* Python drops its last reference to a UserRRef (garbage collection).      *)
DropRRef(w, f) ==
    /\ UserOn(w, f) # {}
    /\ f \in held
    /\ held' = held \ {f}
    /\ UNCHANGED <<nextId, owners, pendingOwners, forks, pendingUsers,
                   confirmedUsers, pendingChildren, ownerHeld, selfCalls,
                   tombstones, users, fetching, fetched, deleted, timedOut, remoteErrors,
                   net, phase, stopping, removedForks, erasedOwners>>

(* Python drops an OwnerRRef it holds.  Deletion from owners_ never depends *)
(* on this; the object merely stops being forkable from application code.  *)
DropOwnerRRef(w, r) ==
    /\ r \in ownerHeld[w]
    /\ ownerHeld' = [ownerHeld EXCEPT ![w] = @ \ {r}]
    /\ UNCHANGED <<nextId, owners, pendingOwners, forks, pendingUsers,
                   confirmedUsers, pendingChildren, selfCalls, tombstones,
                   users, held, fetching, fetched, deleted, timedOut, remoteErrors, net,
                   phase, stopping, removedForks, erasedOwners>>

-----------------------------------------------------------------------------
(* Environment faults (no fairness)                                         *)

(* sendWithRetries re-sends a control message whose first attempt has not  *)
(* been acknowledged; the first attempt may still be processed, so a copy   *)
(* can arrive at any later time (at-least-once delivery).                   *)
RetrySend(m) ==
    /\ Duplicates
    /\ m \in net
    /\ m.type \in Retried
    /\ m.dup = 0
    /\ net' = (net \ {m}) \cup {[m EXCEPT !.dup = 1], [m EXCEPT !.dup = 2]}
    /\ UNCHANGED <<nextId, owners, pendingOwners, forks, pendingUsers,
                   confirmedUsers, pendingChildren, ownerHeld, selfCalls,
                   tombstones, users, held, fetching, fetched, deleted,
                   timedOut, remoteErrors, phase, stopping, removedForks, erasedOwners>>

(* A first attempt that was retried is lost for good: the connection it    *)
(* was written on broke before the receiver applied it (a runtime that      *)
(* redials learns this from the new link and retries then, so RetrySend     *)
(* comes first).  Only the retry's copy can still arrive.                   *)
LoseFirstAttempt(m) ==
    /\ Duplicates
    /\ m \in net
    /\ m.type \in Retried
    /\ m.dup = 1
    /\ net' = net \ {m}
    /\ UNCHANGED <<nextId, owners, pendingOwners, forks, pendingUsers,
                   confirmedUsers, pendingChildren, ownerHeld, selfCalls,
                   tombstones, users, held, fetching, fetched, deleted,
                   timedOut, remoteErrors, phase, stopping, removedForks, erasedOwners>>

(* The future of rpc.remote(timeout=...) fails with TIMEOUT while the call  *)
(* may still be processed later.  f # r: confirmPendingUser's error path   *)
(* marks the UserRRef timed out and still moves it to confirmedUsers_, so  *)
(* it becomes deletable.  f = r (self remote): finishCreatingOwnerRRef's    *)
(* error path; PyTorch then calls delForkOfOwner(r, r), which may erase    *)
(* the OwnerRRef before the delayed call runs (#71029, #73294); the        *)
(* Reference keeps the self fork until the call has been processed.        *)
(* PinTimedOut (DeleteLast): f # r is marked timed out but stays pending,  *)
(* so it is not deleted before the owner has processed its call.          *)
TimeOutRemote(w, r, f) ==
    /\ Timeouts
    /\ IF f # r
       THEN \E u \in UserOn(w, f) :
            /\ u.rref = r /\ u.parent = NoId
            /\ f \in pendingUsers[w]
            /\ f \notin remoteErrors  \* the future already failed (FailRemote)
            /\ f \notin timedOut      \* a future fails once (PinTimedOut keeps f pending)
            \* PinTimedOut: f stays pending until the late REMOTE_RET confirms it
            /\ pendingUsers' = IF PinTimedOut THEN pendingUsers
                               ELSE [pendingUsers EXCEPT ![w] = @ \ {f}]
            /\ confirmedUsers' = IF PinTimedOut THEN confirmedUsers
                                 ELSE [confirmedUsers EXCEPT ![w] = @ \cup {f}]
            /\ timedOut' = timedOut \cup {f}
            /\ UNCHANGED <<selfCalls, forks, owners, removedForks, erasedOwners>>
       ELSE /\ r \in selfCalls[w]
            /\ selfCalls' = [selfCalls EXCEPT ![w] = @ \ {r}]
            /\ IF Reference
                 THEN UNCHANGED <<forks, owners, removedForks, erasedOwners>>
                 ELSE DelForkLocally(w, r, r)
            /\ UNCHANGED <<pendingUsers, confirmedUsers, timedOut>>
    /\ UNCHANGED <<nextId, pendingOwners, pendingChildren, ownerHeld,
                   tombstones, users, held, fetching, fetched, deleted, net,
                   phase, stopping, remoteErrors>>

(* to_here(timeout=...) raises TIMEOUT; the FETCH may still be processed.   *)
(* PyTorch: the call returns, so the UserRRef is no longer kept alive by it *)
(* and may be deleted before the owner sees the fetch (#40141).  Reference: *)
(* the UserRRef stays pinned until the reply arrives, which changes no      *)
(* protocol state, so the step exists only in the PyTorch variant.          *)
TimeOutToHere(w, f) ==
    /\ Timeouts
    /\ ~Reference
    /\ UserOn(w, f) # {}
    /\ f \in fetching
    /\ fetching' = fetching \ {f}
    /\ UNCHANGED <<nextId, owners, pendingOwners, forks, pendingUsers,
                   confirmedUsers, pendingChildren, ownerHeld, selfCalls,
                   tombstones, users, held, fetched, deleted, timedOut, remoteErrors, net,
                   phase, stopping, removedForks, erasedOwners>>

(* rpc.remote's future fails with an error other than a timeout            *)
(* (RPCErrorType::UNKNOWN_ERROR): the callee could not deserialize or run   *)
(* the request before assignOwnerRRef (say, it cannot import the function), *)
(* answers EXCEPTION and creates no OwnerRRef; the PYTHON_REMOTE_CALL is    *)
(* consumed and the caller's callback runs in the same step.  PyTorch's     *)
(* callbacks (callback::confirmPendingUser for f # r,                       *)
(* callback::finishCreatingOwnerRRef for f = r) call RRef::handleError,     *)
(* whose UNKNOWN handler throws (RRefContext::handleException) before       *)
(* delPendingUser / delForkOfOwner: the creator stays in pendingUsers_ for  *)
(* ever (never deletable; the shutdown sweep waits out its timeout), and a  *)
(* self remote keeps its self fork, so its OwnerRRef leaks.  The RRef is    *)
(* not marked timed out: to_here and forks go on, and a fetch parks on the  *)
(* owner for ever.  A future that already timed out drops the error.        *)
(* PyTorch only: the Reference stores any failure of the call in the        *)
(* OwnerRRef and answers REMOTE_RET, as for an exception the function       *)
(* raises, so its future fails only by timeout (TimeOutRemote, which        *)
(* confirms).  Reproduced on torch 2.13 in docs/rref.md, section 6.         *)
FailRemote(w, r, f) ==
    /\ UnknownErrors
    /\ ~Reference
    /\ \E m \in net :
        /\ m.type = "PYTHON_REMOTE_CALL" /\ m.src = w /\ m.rref = r /\ m.fork = f
        /\ net' = net \ {m}
    /\ IF f # r
       THEN IF f \in pendingUsers[w] /\ f \notin remoteErrors
            THEN remoteErrors' = remoteErrors \cup {f}
            ELSE UNCHANGED remoteErrors
       ELSE UNCHANGED remoteErrors
    /\ selfCalls' = IF f = r THEN [selfCalls EXCEPT ![w] = @ \ {r}] ELSE selfCalls
    /\ UNCHANGED <<nextId, owners, pendingOwners, forks, pendingUsers,
                   confirmedUsers, pendingChildren, ownerHeld, tombstones, users,
                   held, fetching, fetched, deleted, timedOut, phase, stopping,
                   removedForks, erasedOwners>>

(* sendWithRetries gives up: every attempt of a retried control message     *)
(* failed, so it is never delivered (RpcAgent::retryExpiredRpcs fails the   *)
(* future once maxRetries, 5, are used up, 1 s x 1.5^k apart, each attempt   *)
(* with the RPC timeout).  The callbacks throw (handleException) before     *)
(* doing anything: after RREF_FORK_REQUEST, finishForkRequest never runs    *)
(* (the child stays in pendingUsers_ and its parent never gets              *)
(* RREF_CHILD_ACCEPT); after RREF_CHILD_ACCEPT the parent keeps its         *)
(* pendingChildren_ entry; after RREF_USER_DELETE the owner keeps the fork. *)
(* PyTorch only: the Reference retries until the message is delivered (the *)
(* design note assumes every worker stays reachable; the implementation    *)
(* re-sends on every new connection).  Only a message not yet retried       *)
(* (dup = 0) is taken: all its attempts are lost.                           *)
ExhaustRetries(m) ==
    /\ RetryExhaustion
    /\ ~Reference
    /\ m \in net
    /\ m.type \in Retried
    /\ m.dup = 0
    /\ net' = net \ {m}
    /\ UNCHANGED <<nextId, owners, pendingOwners, forks, pendingUsers,
                   confirmedUsers, pendingChildren, ownerHeld, selfCalls,
                   tombstones, users, held, fetching, fetched, deleted,
                   timedOut, remoteErrors, phase, stopping, removedForks, erasedOwners>>

-----------------------------------------------------------------------------
(* Protocol steps (weakly fair): message handlers and callbacks             *)

(* The UserRRef's refcount reaches zero: UserRRef::tryDel -> delUser.       *)
(* G1: send RREF_USER_DELETE(r, f) to the owner (with retries), unless the  *)
(* context is destroyed; set deletedOnOwner_; erase confirmedUsers_[f].    *)
DelUser(w, f) ==
    /\ \E u \in UserOn(w, f) :
        /\ f \notin deleted
        /\ ~Referenced(w, f)
        /\ AwaitForkCopies => ~ForkRequestOut(f)
        /\ deleted' = deleted \cup {f}
        /\ confirmedUsers' = [confirmedUsers EXCEPT ![w] = @ \ {f}]
        /\ net' = IF G1 /\ phase[w] # "destroyed"
                    THEN net \cup {Msg("RREF_USER_DELETE", w, u.owner, u.rref, u.owner, f, NoId)}
                    ELSE net
    /\ UNCHANGED <<nextId, owners, pendingOwners, forks, pendingUsers,
                   pendingChildren, ownerHeld, selfCalls, tombstones, users,
                   held, fetching, fetched, timedOut, remoteErrors, phase, stopping,
                   removedForks, erasedOwners>>

(* Owner w processes PYTHON_REMOTE_CALL(r, f): the UDF runs, then          *)
(* assignOwnerRRef, then REMOTE_RET is sent.                                *)
(* f = r (self remote): getOwnerRRef(r, forceCreated=true) asserts that    *)
(* owners_[r] exists (SelfRemoteOwnerInv); if it does not, the call fails  *)
(* and its error reply is dropped by the already failed future.  The       *)
(* Reference removes the self fork here, after the value is set.           *)
(* f # r: getOrCreateOwnerRRef (completing parked fetches) and              *)
(* addForkOfOwner(r, f).  The Reference does not register a creator fork   *)
(* whose RREF_USER_DELETE was already processed (tombstone; #41217) and    *)
(* creates the OwnerRRef only if someone can still use it.                 *)
AssignOwnerRRef(w, r, f) ==
    \E m \in InFlight("PYTHON_REMOTE_CALL", w, r, f) :
    /\ IF f = r
       THEN IF r \in owners[w]
            THEN /\ net' = (net \ {m}) \cup {Msg("REMOTE_RET", w, w, r, w, r, NoId)}
                 /\ IF Reference
                      THEN DelForkLocally(w, r, r)
                      ELSE UNCHANGED <<forks, owners, removedForks, erasedOwners>>
            ELSE /\ net' = net \ {m}
                 /\ UNCHANGED <<forks, owners, removedForks, erasedOwners>>
       ELSE LET stale == Reference /\ <<r, f>> \in tombstones[w]
                needed == \/ ~stale
                          \/ \E e \in forks[w] : e[1] = r
            IN /\ owners' = IF needed THEN [owners EXCEPT ![w] = @ \cup {r}] ELSE owners
               /\ forks' = IF stale THEN forks ELSE [forks EXCEPT ![w] = @ \cup {<<r, f>>}]
               /\ net' = (net \ {m}) \cup FetchReplies(w, r)
                          \cup {Msg("REMOTE_RET", w, m.src, r, w, f, NoId)}
               /\ UNCHANGED <<removedForks, erasedOwners>>
    /\ pendingOwners' = IF f = r THEN pendingOwners
                        ELSE [pendingOwners EXCEPT ![w] = @ \ ParkedFetches(w, r)]
    /\ UNCHANGED <<nextId, pendingUsers, confirmedUsers, pendingChildren,
                   ownerHeld, selfCalls, tombstones, users, held, fetching,
                   fetched, deleted, timedOut, remoteErrors, phase, stopping>>

(* Creator w processes REMOTE_RET(r, f), f # r: confirmPendingUser ->      *)
(* delPendingUser(f) moves the UserRRef to confirmedUsers_.  A late reply  *)
(* (the future already timed out) is dropped.                              *)
ConfirmPendingUser(w, r, f) ==
    /\ f # r
    /\ \E m \in InFlight("REMOTE_RET", w, r, f) :
        /\ net' = net \ {m}
        /\ IF f \in pendingUsers[w]
             THEN /\ pendingUsers' = [pendingUsers EXCEPT ![w] = @ \ {f}]
                  /\ confirmedUsers' = [confirmedUsers EXCEPT ![w] = @ \cup {f}]
             ELSE UNCHANGED <<pendingUsers, confirmedUsers>>
    /\ UNCHANGED <<nextId, owners, pendingOwners, forks, pendingChildren,
                   ownerHeld, selfCalls, tombstones, users, held, fetching,
                   fetched, deleted, timedOut, remoteErrors, phase, stopping, removedForks,
                   erasedOwners>>

(* Self-remote caller w processes REMOTE_RET(r, r): finishCreatingOwnerRRef *)
(* -> delForkOfOwner(r, r) (PyTorch).  The Reference already removed the    *)
(* self fork when the call was processed.  A late reply is dropped.         *)
FinishCreatingOwnerRRef(w, r) ==
    /\ \E m \in InFlight("REMOTE_RET", w, r, r) :
        /\ net' = net \ {m}
        /\ IF r \in selfCalls[w]
             THEN /\ selfCalls' = [selfCalls EXCEPT ![w] = @ \ {r}]
                  /\ IF Reference
                       THEN UNCHANGED <<forks, owners, removedForks, erasedOwners>>
                       ELSE DelForkLocally(w, r, r)
             ELSE UNCHANGED <<selfCalls, forks, owners, removedForks, erasedOwners>>
    /\ UNCHANGED <<nextId, pendingOwners, pendingUsers, confirmedUsers,
                   pendingChildren, ownerHeld, tombstones, users, held,
                   fetching, fetched, deleted, timedOut, remoteErrors, phase, stopping>>

(* Owner w processes PYTHON_RREF_FETCH_CALL(r) from UserRRef f:            *)
(* retrieveOwnerRRef -> getOwnerRRef(r).  If owners_[r] exists the value is *)
(* returned (PYTHON_RREF_FETCH_RET); otherwise the fetch parks on           *)
(* pendingOwners_[r] until getOrCreateOwnerRRef(r) runs, possibly never     *)
(* (#40141, FetchAnsweredProp).                                             *)
RetrieveOwnerRRef(w, r, f) ==
    /\ \E m \in InFlight("PYTHON_RREF_FETCH_CALL", w, r, f) :
        IF r \in owners[w]
          THEN /\ net' = (net \ {m}) \cup {Msg("PYTHON_RREF_FETCH_RET", w, m.src, r, w, f, NoId)}
               /\ UNCHANGED pendingOwners
          ELSE /\ net' = net \ {m}
               /\ pendingOwners' = [pendingOwners EXCEPT ![w] = @ \cup {<<r, f, m.src>>}]
    /\ UNCHANGED <<nextId, owners, forks, pendingUsers, confirmedUsers,
                   pendingChildren, ownerHeld, selfCalls, tombstones, users,
                   held, fetching, fetched, deleted, timedOut, remoteErrors, phase, stopping,
                   removedForks, erasedOwners>>

(* User w receives the value: the to_here future completes (a late reply   *)
(* after a timeout is dropped).                                             *)
ReceiveFetchRet(w, r, f) ==
    /\ \E m \in InFlight("PYTHON_RREF_FETCH_RET", w, r, f) :
        /\ net' = net \ {m}
        /\ fetching' = fetching \ {f}
    /\ UNCHANGED <<nextId, owners, pendingOwners, forks, pendingUsers,
                   confirmedUsers, pendingChildren, ownerHeld, selfCalls,
                   tombstones, users, held, fetched, deleted, timedOut, remoteErrors, phase,
                   stopping, removedForks, erasedOwners>>

(* Worker w unpickles an RRef (r, child ForkId c) from a user RPC:         *)
(* getOrCreateRRef + notifyOwnerAndParentOfFork.                            *)
(*  - w is the owner (user -> owner): PyTorch getOrCreateOwnerRRef creates  *)
(*    an empty OwnerRRef in owners_ if absent and completes the fetches    *)
(*    parked on it (they then wait for its value, abstracted here); the    *)
(*    Reference leaves owners_ alone (the UDF waits like a fetch); send    *)
(*    RREF_CHILD_ACCEPT(c) to the parent.                                  *)
(*    c is never added to forks_ ("Useful Phantom Fork ID").               *)
(*  - the parent is the owner (owner -> user): addConfirmedUser(c).        *)
(*  - otherwise (user -> user): send RREF_FORK_REQUEST(r, c) to the owner  *)
(*    and addPendingUser(c).                                                *)
(*  - the owner sent its own RRef to itself (Links holds <<w, w>>):         *)
(*    delForkOfOwner(r, c) undoes prepareChildFork's early registration    *)
(*    (both variants).  A user sending to itself is the user -> user case.  *)
GetOrCreateRRef(w, r, c) ==
    /\ \E m \in InFlight("PYTHON_CALL", w, r, c) :
        IF m.owner = w /\ m.src = w
        THEN /\ net' = net \ {m}
             /\ DelForkLocally(w, r, c)
             /\ UNCHANGED <<pendingOwners, users, held, pendingUsers, confirmedUsers>>
        ELSE IF m.owner = w
        THEN /\ owners' = IF Reference THEN owners
                          ELSE [owners EXCEPT ![w] = @ \cup {r}]
             /\ pendingOwners' = IF Reference THEN pendingOwners
                                 ELSE [pendingOwners EXCEPT ![w] = @ \ ParkedFetches(w, r)]
             /\ net' = (net \ {m}) \cup
                       {Msg("RREF_CHILD_ACCEPT", w, m.src, r, w, c, NoId)} \cup
                       (IF Reference THEN {} ELSE FetchReplies(w, r))
             /\ UNCHANGED <<users, held, pendingUsers, confirmedUsers, forks, removedForks,
                            erasedOwners>>
        ELSE /\ users' = AddEntry(users, c, [fork |-> c, rref |-> r, owner |-> m.owner,
                                               on |-> w, parent |-> m.parent])
             /\ held' = held \cup {c}
             /\ IF m.src = m.owner
                  THEN /\ confirmedUsers' = [confirmedUsers EXCEPT ![w] = @ \cup {c}]
                       /\ net' = net \ {m}
                       /\ UNCHANGED pendingUsers
                  ELSE /\ pendingUsers' = [pendingUsers EXCEPT ![w] = @ \cup {c}]
                       /\ net' = (net \ {m}) \cup
                            {Msg("RREF_FORK_REQUEST", w, m.owner, r, m.owner, c, NoId)}
                       /\ UNCHANGED confirmedUsers
             /\ UNCHANGED <<owners, pendingOwners, forks, removedForks, erasedOwners>>
    /\ UNCHANGED <<nextId, pendingChildren, ownerHeld, selfCalls, tombstones, fetching,
                   fetched, deleted, timedOut, remoteErrors, phase, stopping>>

(* Owner w processes RREF_FORK_REQUEST(r, c): addForkOfOwnerIfNotPresent,  *)
(* then RREF_ACK.  It does not require owners_[r] to exist.  PyTorch keeps *)
(* no tombstones, so a late duplicate re-inserts a deleted fork (#26759);   *)
(* the Reference ignores a fork it has a tombstone for.                     *)
AddForkOfOwnerIfNotPresent(w, r, c) ==
    /\ \E m \in InFlight("RREF_FORK_REQUEST", w, r, c) :
        /\ forks' = IF Reference /\ <<r, c>> \in tombstones[w]
                      THEN forks
                      ELSE [forks EXCEPT ![w] = @ \cup {<<r, c>>}]
        /\ net' = (net \ {m}) \cup {[Msg("RREF_ACK", w, m.src, r, w, c, NoId)
                                       EXCEPT !.dup = IF m.dup = 2 THEN 2 ELSE 0]}
    /\ UNCHANGED <<nextId, owners, pendingOwners, pendingUsers, confirmedUsers,
                   pendingChildren, ownerHeld, selfCalls, tombstones, users,
                   held, fetching, fetched, deleted, timedOut, remoteErrors, phase, stopping,
                   removedForks, erasedOwners>>

(* Child w processes the RREF_ACK of its fork request: finishForkRequest   *)
(* -> delPendingUser(c) (confirmed), then send RREF_CHILD_ACCEPT(c) to the *)
(* parent's worker, which is c's createdOn.  Later acks are dropped.       *)
FinishForkRequest(w, r, c) ==
    /\ \E m \in InFlight("RREF_ACK", w, r, c) :
        IF c \in pendingUsers[w]
          THEN /\ pendingUsers' = [pendingUsers EXCEPT ![w] = @ \ {c}]
               /\ confirmedUsers' = [confirmedUsers EXCEPT ![w] = @ \cup {c}]
               /\ net' = (net \ {m}) \cup
                         {Msg("RREF_CHILD_ACCEPT", w, c[1], r, m.src, c, NoId)}
          ELSE /\ net' = net \ {m}
               /\ UNCHANGED <<pendingUsers, confirmedUsers>>
    /\ UNCHANGED <<nextId, owners, pendingOwners, forks, pendingChildren,
                   ownerHeld, selfCalls, tombstones, users, held, fetching,
                   fetched, deleted, timedOut, remoteErrors, phase, stopping, removedForks,
                   erasedOwners>>

(* Parent w processes RREF_CHILD_ACCEPT(c): delPendingChild(c) drops the   *)
(* strong reference to the parent (idempotent).                             *)
DelPendingChild(w, r, c) ==
    /\ \E m \in InFlight("RREF_CHILD_ACCEPT", w, r, c) :
        /\ net' = net \ {m}
        /\ pendingChildren' = [pendingChildren EXCEPT ![w] = {e \in @ : e[1] # c}]
    /\ UNCHANGED <<nextId, owners, pendingOwners, forks, pendingUsers,
                   confirmedUsers, ownerHeld, selfCalls, tombstones, users,
                   held, fetching, fetched, deleted, timedOut, remoteErrors, phase, stopping,
                   removedForks, erasedOwners>>

(* Owner w processes RREF_USER_DELETE(r, f): delForkOfOwner(r, f), which   *)
(* tolerates unknown ids and erases owners_[r] with the last fork.  The    *)
(* Reference also records a tombstone for (r, f), unless DeleteLast: then  *)
(* nothing that could register (r, f) again can still arrive.             *)
DelForkOfOwner(w, r, f) ==
    /\ \E m \in InFlight("RREF_USER_DELETE", w, r, f) :
        /\ net' = net \ {m}
        /\ DelForkLocally(w, r, f)
        /\ tombstones' = IF Reference /\ ~DeleteLast
                           THEN [tombstones EXCEPT ![w] = @ \cup {<<r, f>>}]
                           ELSE tombstones
    /\ UNCHANGED <<nextId, pendingOwners, pendingUsers, confirmedUsers,
                   pendingChildren, ownerHeld, selfCalls, users, held,
                   fetching, fetched, deleted, timedOut, remoteErrors, phase, stopping>>

-----------------------------------------------------------------------------
(* Graceful shutdown (rpc.shutdown(graceful=True)), enabled by Shutdown     *)

(* _wait_all_workers: the barrier after which no user calls are issued.    *)
(* Its precondition (PyTorch assumes it, we make it explicit): the          *)
(* application has waited for its user calls, so none is in flight.  A     *)
(* PYTHON_CALL delivered after its receiver swept would create a UserRRef   *)
(* that nobody deletes (the destroyed context sends no USER_DELETE).        *)
UserCallTypes == {"PYTHON_REMOTE_CALL", "REMOTE_RET", "PYTHON_RREF_FETCH_CALL",
                  "PYTHON_RREF_FETCH_RET", "PYTHON_CALL"}
WaitAllWorkers ==
    /\ Shutdown
    /\ ~stopping
    /\ ~\E m \in net : m.type \in UserCallTypes
    /\ stopping' = TRUE
    /\ UNCHANGED <<nextId, owners, pendingOwners, forks, pendingUsers,
                   confirmedUsers, pendingChildren, ownerHeld, selfCalls,
                   tombstones, users, held, fetching, fetched, deleted,
                   timedOut, remoteErrors, net, phase, removedForks, erasedOwners>>

(* delAllUsersAndUnforkedOwners on w, after pendingUsers_ and              *)
(* pendingChildren_ drained: send RREF_USER_DELETE for every confirmed      *)
(* UserRRef still alive (even if the application holds it), erase the       *)
(* owners that have no forks.  The Reference also waits for outstanding     *)
(* fetches of its UserRRefs (see TimeOutToHere).                            *)
DelAllUsersAndUnforkedOwners(w) ==
    /\ stopping
    /\ Running(w)
    /\ pendingUsers[w] = {}
    /\ pendingChildren[w] = {}
    /\ Reference => \A f \in fetching : UserOn(w, f) = {}
    /\ AwaitForkCopies => ~\E m \in net : m.type = "RREF_FORK_REQUEST" /\ m.src = w
    /\ LET victims == {u \in Users : u.on = w /\ u.fork \in confirmedUsers[w]
                                     /\ u.fork \notin deleted}
           unforked == {r \in owners[w] : ~\E e \in forks[w] : e[1] = r}
       IN /\ deleted' = deleted \cup {u.fork : u \in victims}
          /\ net' = net \cup {Msg("RREF_USER_DELETE", w, u.owner, u.rref, u.owner, u.fork, NoId)
                              : u \in victims}
          /\ owners' = [owners EXCEPT ![w] = @ \ unforked]
          /\ erasedOwners' = [erasedOwners EXCEPT ![w] = @ \cup unforked]
    /\ confirmedUsers' = [confirmedUsers EXCEPT ![w] = {}]
    /\ phase' = [phase EXCEPT ![w] = "swept"]
    /\ UNCHANGED <<nextId, pendingOwners, forks, pendingUsers, pendingChildren,
                   ownerHeld, selfCalls, tombstones, users, held, fetching,
                   fetched, timedOut, remoteErrors, stopping, removedForks>>

(* agent.join(shutdown=True) returns once no worker has a client call      *)
(* active (PR #31893 made it wait for the sweep's RREF_USER_DELETEs before   *)
(* the contexts are destroyed): no message to or from w is in flight.       *)
(* (Ablated by MCRRef_pytorch31893.)                                         *)
JoinDone(w) == ~\E m \in net : m.src = w \/ m.dst = w

(* agent.join then destroyInstance on w: once every worker has swept, owners_ *)
(* is empty and no message to or from w is in flight (join waits for all    *)
(* client calls).  PyTorch clears owners_ and pendingOwners_, dropping       *)
(* parked fetches without completing them.                                  *)
DestroyInstance(w) ==
    /\ phase[w] = "swept"
    /\ \A v \in Workers : phase[v] # "running"
    /\ owners[w] = {}
    /\ JoinDone(w)
    /\ \A f \in fetching : UserOn(w, f) = {}
    /\ phase' = [phase EXCEPT ![w] = "destroyed"]
    /\ pendingOwners' = [pendingOwners EXCEPT ![w] = {}]
    /\ UNCHANGED <<nextId, owners, forks, pendingUsers, confirmedUsers,
                   pendingChildren, ownerHeld, selfCalls, tombstones, users,
                   held, fetching, fetched, deleted, timedOut, remoteErrors, net, stopping,
                   removedForks, erasedOwners>>

-----------------------------------------------------------------------------
(* The next-state relation and the specification                           *)

AppNext ==
    \/ \E w \in Workers : CreateLocalRRef(w)
    \/ \E w, d \in Workers : Remote(w, d)
    \/ \E w, d \in Workers : \E r \in ownerHeld[w] \cup owners[w] :
          PrepareChildFork(w, d, r, r)
    \/ \E d \in Workers : \E u \in Users : PrepareChildFork(u.on, d, u.rref, u.fork)
    \/ \E u \in Users : ToHere(u.on, u.fork)
    \/ \E u \in Users : DropRRef(u.on, u.fork)
    \/ \E w \in Workers : \E r \in ownerHeld[w] : DropOwnerRRef(w, r)

FaultNext ==
    \/ \E m \in net : RetrySend(m)
    \/ \E m \in net : LoseFirstAttempt(m)
    \/ \E u \in Users : TimeOutRemote(u.on, u.rref, u.fork)
    \/ \E w \in Workers : \E r \in selfCalls[w] : TimeOutRemote(w, r, r)
    \/ \E u \in Users : TimeOutToHere(u.on, u.fork)
    \/ \E m \in net : m.type = "PYTHON_REMOTE_CALL" /\ FailRemote(m.src, m.rref, m.fork)
    \/ \E m \in net : ExhaustRetries(m)

\* Message m is taken from the network by its handler.
ReceiveNext ==
    \/ \E m \in net : m.type = "PYTHON_REMOTE_CALL" /\ AssignOwnerRRef(m.dst, m.rref, m.fork)
    \/ \E m \in net : m.type = "REMOTE_RET" /\ m.fork # m.rref /\ ConfirmPendingUser(m.dst, m.rref, m.fork)
    \/ \E m \in net : m.type = "REMOTE_RET" /\ m.fork = m.rref /\ FinishCreatingOwnerRRef(m.dst, m.rref)
    \/ \E m \in net : m.type = "PYTHON_RREF_FETCH_CALL" /\ RetrieveOwnerRRef(m.dst, m.rref, m.fork)
    \/ \E m \in net : m.type = "PYTHON_RREF_FETCH_RET" /\ ReceiveFetchRet(m.dst, m.rref, m.fork)
    \/ \E m \in net : m.type = "PYTHON_CALL" /\ GetOrCreateRRef(m.dst, m.rref, m.fork)
    \/ \E m \in net : m.type = "RREF_FORK_REQUEST" /\ AddForkOfOwnerIfNotPresent(m.dst, m.rref, m.fork)
    \/ \E m \in net : m.type = "RREF_ACK" /\ FinishForkRequest(m.dst, m.rref, m.fork)
    \/ \E m \in net : m.type = "RREF_CHILD_ACCEPT" /\ DelPendingChild(m.dst, m.rref, m.fork)
    \/ \E m \in net : m.type = "RREF_USER_DELETE" /\ DelForkOfOwner(m.dst, m.rref, m.fork)

ShutdownNext ==
    \/ \E w \in Workers : DelAllUsersAndUnforkedOwners(w)
    \/ \E w \in Workers : DestroyInstance(w)

\* The protocol's own steps: deliveries, the destructor callback and, once
\* shutdown has begun, its phases.  Weak fairness of this disjunction is
\* enough because every behaviour has finitely many non-stuttering steps:
\* a behaviour may stop only where no delivery and no destructor is enabled.
SystemNext ==
    \/ ReceiveNext
    \/ \E u \in Users : DelUser(u.on, u.fork)
    \/ ShutdownNext

Next == AppNext \/ FaultNext \/ SystemNext \/ WaitAllWorkers

Spec == Init /\ [][Next]_vars /\ WF_vars(SystemNext)

-----------------------------------------------------------------------------
(* Invariants                                                               *)

Pairs == Id \X Id
UserRec == [fork : Id, rref : Id, owner : Workers, on : Workers, parent : Id \cup {NoId}]
MsgRec == [type : MsgTypes, src : Workers, dst : Workers, rref : Id, owner : Workers,
           fork : Id, parent : Id \cup {NoId}, dup : 0..2]

TypeOK ==
    /\ nextId \in [Workers -> Nat]
    /\ \A w \in Workers : nextId[w] <= MaxLocalId[w] + 1
    /\ owners \in [Workers -> SUBSET Id]
    /\ pendingOwners \in [Workers -> SUBSET (Id \X Id \X Workers)]
    /\ forks \in [Workers -> SUBSET Pairs]
    /\ pendingUsers \in [Workers -> SUBSET Id]
    /\ confirmedUsers \in [Workers -> SUBSET Id]
    /\ pendingChildren \in [Workers -> SUBSET Pairs]
    /\ ownerHeld \in [Workers -> SUBSET Id]
    /\ selfCalls \in [Workers -> SUBSET Id]
    /\ tombstones \in [Workers -> SUBSET Pairs]
    /\ DOMAIN users \subseteq Id /\ users \in [DOMAIN users -> UserRec]
    /\ \A f \in DOMAIN users : users[f].fork = f
    /\ held \subseteq Id /\ fetching \subseteq Id /\ fetched \subseteq Id
    /\ deleted \subseteq Id /\ timedOut \subseteq Id /\ remoteErrors \subseteq Id
    /\ net \subseteq MsgRec
    /\ phase \in [Workers -> {"running", "swept", "destroyed"}]
    /\ stopping \in BOOLEAN
    /\ removedForks \in [Workers -> SUBSET Pairs]
    /\ erasedOwners \in [Workers -> SUBSET Id]

OwnerOf(r) == {u.owner : u \in {v \in Users : v.rref = r}}

\* A UserRRef that can still be used: alive and not deleted on the owner.
LiveUsers(r) == {u \in Users : u.rref = r /\ u.fork \notin deleted
                              /\ Referenced(u.on, u.fork)}

\* Messages that need r's OwnerRRef (or its registration) to exist: those
\* sent for a UserRRef that has not been deleted (a stale retry of a deleted
\* UserRRef's fork request needs nothing).
NeedsOwner(r) == {m \in net : m.rref = r /\ m.fork \notin deleted /\ m.type \in
                    {"PYTHON_CALL", "RREF_FORK_REQUEST", "PYTHON_RREF_FETCH_CALL"}}

(* R1 (G1 + G2): an OwnerRRef that has been erased from owners_ is not      *)
(* needed: no live undeleted UserRRef of it, no message in flight that       *)
(* carries it, asks for its fork or fetches it.                             *)
NoPrematureDeleteInv ==
    \A w \in Workers : \A r \in erasedOwners[w] \ owners[w] :
        /\ \A u \in LiveUsers(r) : u.owner # w
        /\ \A m \in NeedsOwner(r) : m.owner # w

(* R1b: no fetch is parked on an OwnerRRef that has been erased (it would   *)
(* wait for a getOrCreateOwnerRRef that never comes; #40141).               *)
NoFetchAfterDeleteInv ==
    \A w \in Workers : \A r \in erasedOwners[w] \ owners[w] : ParkedFetches(w, r) = {}

(* R2 (G2): while a child fork of a user parent is not yet known to the     *)
(* owner (its PYTHON_CALL or RREF_FORK_REQUEST in flight, or the child      *)
(* still pending), the parent keeps a pendingChildren_ entry for it and so  *)
(* is not deleted; a child accept is sent only for a registered (or since   *)
(* deleted) fork, or by the owner itself.                                    *)
ParentHeldInv ==
    /\ \A m \in net :
         m.type = "PYTHON_CALL" /\ m.parent # m.rref =>
            /\ <<m.fork, m.parent>> \in pendingChildren[m.src]
            /\ m.parent \notin deleted
    /\ \A u \in Users :
         (u.parent \notin {NoId, u.rref} /\ u.fork \in pendingUsers[u.on]) =>
            /\ <<u.fork, u.parent>> \in pendingChildren[u.fork[1]]
            /\ u.parent \notin deleted
    /\ \A m \in net :
         (m.type = "RREF_CHILD_ACCEPT" /\ m.src # m.owner) =>
            <<m.rref, m.fork>> \in forks[m.owner] \cup removedForks[m.owner]
                                   \cup tombstones[m.owner]

(* R1c: a fetch parked on pendingOwners_[r] waits only while owners_[r] is *)
(* absent: whatever inserts owners_[r] completes the fetches parked on it  *)
(* (getOrCreateOwnerRRef does; PyTorch's prepareChildFork, re-registering  *)
(* a local OwnerRRef it shares again, does not, so a fetch parked by       *)
(* #40141 stays stranded even once the OwnerRRef is back).                  *)
NoStrandedFetchInv ==
    \A w \in Workers : \A p \in pendingOwners[w] : p[1] \notin owners[w]

(* R6: RRefIds and ForkIds are drawn from one counter per worker: every id  *)
(* in use was drawn already, and no ForkId equals an RRefId, so             *)
(* forkId == rrefId keeps meaning "a call to self" (assignOwnerRRef,        *)
(* REMOTE_RET).  (That each UserRRef is filed under its own ForkId is part  *)
(* of TypeOK.)                                                               *)
UniqueIdsInv ==
    /\ \A u \in Users : u.fork[2] < nextId[u.fork[1]] /\ u.rref[2] < nextId[u.rref[1]]
    /\ \A u, v \in Users : u.fork # v.rref

(* R7: a fork removed from forks_ never re-enters it.                       *)
NoForkResurrectionInv ==
    \A w \in Workers : removedForks[w] \cap forks[w] = {}

(* R8: the fork relation is a tree per RRef: each UserRRef has one parent,  *)
(* which is the root (rpc.remote's creator has none; the OwnerRRef is       *)
(* denoted by the RRefId) or another UserRRef of the same RRef living on the *)
(* worker that drew the child's ForkId; following parents reaches the root.  *)
RECURSIVE Depth(_, _)
Depth(f, n) ==
    IF n = 0 THEN -1
    ELSE LET u == UserOf(f) IN
         IF u.parent \in {NoId, u.rref} THEN 0
         ELSE LET d == Depth(u.parent, n - 1) IN IF d < 0 THEN -1 ELSE d + 1
ForkTreeInv ==
    \A u \in Users :
        /\ u.parent \notin {NoId, u.rref} =>
              \E v \in UserOn(u.fork[1], u.parent) : v.rref = u.rref
        /\ u.parent = NoId => u.fork[1] = u.on
        /\ u.parent = u.rref => u.fork[1] = u.owner
        /\ Depth(u.fork, Cardinality(DOMAIN users)) >= 0

(* R9: leak-free quiescence.  When nothing is in flight, no application     *)
(* code holds an RRef and no destructor is pending, every context is empty  *)
(* ("no Leaking RRef warning").                                              *)
Quiescent ==
    /\ net = {}
    /\ held = {}
    /\ \A w \in Workers : ownerHeld[w] = {}
    /\ \A u \in Users : u.fork \in deleted \/ Referenced(u.on, u.fork)
LeakFreeQuiescenceInv ==
    Quiescent =>
        \A w \in Workers :
            /\ owners[w] = {} /\ forks[w] = {} /\ pendingOwners[w] = {}
            /\ pendingUsers[w] = {} /\ pendingChildren[w] = {}
            /\ confirmedUsers[w] = {}

(* R10: a self PYTHON_REMOTE_CALL(r, r) finds owners_[r] when processed     *)
(* (getOwnerRRef(r, forceCreated=true) asserts it).                         *)
SelfRemoteOwnerInv ==
    \A m \in net : (m.type = "PYTHON_REMOTE_CALL" /\ m.fork = m.rref) =>
                      m.rref \in owners[m.dst]

(* R11: no message is in flight to or from a destroyed context, and a       *)
(* destroyed context has no parked fetch (they would never complete).       *)
ShutdownOrderInv ==
    \A w \in Workers : phase[w] = "destroyed" =>
        /\ ~\E m \in net : m.src = w \/ m.dst = w
        /\ \A p \in UNION {pendingOwners[v] : v \in Workers} : p[3] # w

(* R12 (DeleteLast): a UserRRef's RREF_USER_DELETE is the last message     *)
(* about it that can reach its owner: once it is deleted, no                *)
(* PYTHON_REMOTE_CALL and no copy of an RREF_FORK_REQUEST for it is in      *)
(* flight, so nothing can register the fork again and the owner needs no    *)
(* tombstone (what the Reference's tombstones guarded against: #41217,      *)
(* #26759).                                                                  *)
DeleteIsLastInv ==
    NoTombstones =>
        \A m \in net : m.type \in {"PYTHON_REMOTE_CALL", "RREF_FORK_REQUEST"} =>
                        m.fork \notin deleted

(* R13 (issue 28): what an owner keeps for the forks it deleted is bounded:  *)
(* the Reference keeps nothing (no tombstone), so an owner's memory does not *)
(* grow with the UserRRefs ever deleted (MCRRef_refTombstones: a tombstone  *)
(* per deleted fork).                                                         *)
TombstoneBoundInv == Reference => \A w \in Workers : tombstones[w] = {}

-----------------------------------------------------------------------------
(* Liveness (under WF_vars(SystemNext)).  Every behaviour is finite up to    *)
(* final stuttering, so "eventually always" is "in the final state".        *)

(* RL1: pending users are eventually cleared.                               *)
PendingUsersClearedProp == <>[](\A w \in Workers : pendingUsers[w] = {})

(* RL2: pending children are eventually cleared.                            *)
PendingChildrenClearedProp == <>[](\A w \in Workers : pendingChildren[w] = {})

(* RL3: an OwnerRRef that no application code can reach any more (no held  *)
(* UserRRef or OwnerRRef, no RRef-carrying message in flight) is eventually  *)
(* deleted, with its forks.                                                  *)
Abandoned(r) ==
    /\ ~\E u \in Users : u.rref = r /\ u.fork \in held
    /\ \A w \in Workers : r \notin ownerHeld[w]
    /\ ~\E m \in net : m.type = "PYTHON_CALL" /\ m.rref = r
OwnerDeletedProp ==
    <>[](\A w \in Workers : \A r \in owners[w] \cup {e[1] : e \in forks[w]} :
            ~Abandoned(r))

(* RL4: every fetch is eventually answered and every parked fetch resolved. *)
FetchAnsweredProp ==
    <>[](fetching = {} /\ \A w \in Workers : pendingOwners[w] = {})

(* RL5 (shutdown model): once the barrier has passed, every context is     *)
(* eventually destroyed (neither wait of the sweep has to time out).       *)
ShutdownCompletesProp == stopping ~> (\A w \in Workers : phase[w] = "destroyed")

-----------------------------------------------------------------------------
(* Action property: the history only grows.  users gains entries and never *)
(* changes one; fetched, deleted, timedOut and each owner's tombstones only *)
(* gain elements.  Trace validation relies on it: implementations log what  *)
(* a step added to these variables (usersAdded, ...), not their whole value *)
(* (which made a trace's size quadratic in its length), and the union of    *)
(* what the events logged is then the whole value.                          *)
HistoryGrowsProp ==
    [][/\ DOMAIN users \subseteq DOMAIN users'
       /\ \A f \in DOMAIN users : users'[f] = users[f]
       /\ fetched \subseteq fetched'
       /\ deleted \subseteq deleted'
       /\ timedOut \subseteq timedOut'
       /\ \A w \in Workers : tombstones[w] \subseteq tombstones'[w]]_vars

=============================================================================
