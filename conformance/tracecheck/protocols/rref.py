"""The RRef mapping: every event of protoref's RRef traces as a step of spec/rref/RRef.tla.

Parameters are the spec action's, in order, logged under their TLA+ names. Post-state checks
compare the acting worker's slice of each variable the action touches: per-worker variables are
indexed by the worker; for the global sets of UserRRefs (``held``, ``fetching``) the slice is
the part that lives on the worker, as the implementation logs it. The five variables that only
grow (``users``, ``fetched``, ``deleted``, ``timedOut``, ``tombstones``) are logged as what the
step added (``usersAdded``, ...). ``net`` and the history variables ``removedForks`` and
``erasedOwners`` are not logged: the parameters pin every step down, so TLC computes them.

Graceful shutdown: ``WaitAllWorkers`` is one global barrier with no parameter, logged by the
header's environment actor ``"barrier"`` with the global ``stopping`` after it; the sweep and
``DestroyInstance`` are per-worker steps like the others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from tracecheck.protocols.mapping import ActionMap, ProtocolMap, WindowIds
from tracecheck.tla.values import Record, TLAFunction, TLAValue, format_value
from tracecheck.traces.load import Trace

__all__ = ["RREF", "window_start"]

#: TLA+ expression of each logged post field: the acting worker's (``@``) slice of a variable
#: after the step, or what the step added to a variable that only grows.
_SLICE = {
    "nextId": "nextId'[@]",
    "owners": "owners'[@]",
    "pendingOwners": "pendingOwners'[@]",
    "forks": "forks'[@]",
    "pendingUsers": "pendingUsers'[@]",
    "confirmedUsers": "confirmedUsers'[@]",
    "pendingChildren": "pendingChildren'[@]",
    "ownerHeld": "ownerHeld'[@]",
    "selfCalls": "selfCalls'[@]",
    "phase": "phase'[@]",
    # Global: the barrier is one step for all workers, logged by an environment actor.
    "stopping": "stopping'",
    # The message a handler took from the network: which copy of a retried message it was.
    # net \ net' (TraceOps!TVMinus: natively one merge of the two sets, sorted; TLC's own \
    # looked every message of net up in net', once TVNorm had sorted it).
    "delivered": "TVMinus(net, net')",
    # {f \in X' : \E u \in users' : u.fork = f /\ u.on = @}, which is TraceOps!TVSliceBy:
    # {f \in X' : f \in DOMAIN users' /\ users'[f].on = @}, each fork of X' (a set of
    # UserRRefs by ForkId) looked up in users', a function, so one walk of X' and no search
    # (over a set of records this took |X| * |users| steps).
    **{name: f"TVSliceBy({name}', users', \"on\", @)" for name in ("held", "fetching")},
    # Variables that only grow (RRef.tla HistoryGrowsProp, checked by TLC on the models): the
    # event logs what the step added, and every step that grows one logs it (a test holds the
    # table to the spec), so checking each step's growth checks the whole value, and a trace's
    # size stays linear in its length. The growth is global: a step is one worker's, and what
    # it adds lives on that worker. users is a function ForkId -> UserRRef record, grown by
    # AddEntry(users, f, ...): its new entries (TraceOps; nothing when the step left it alone).
    "usersAdded": "TVNewEntries(users, users')",
    **{f"{name}Added": f"TVMinus({name}', {name})" for name in ("fetched", "deleted", "timedOut")},
    "tombstonesAdded": "TVMinus(tombstones'[@], tombstones[@])",
}

#: event -> (spec parameters in order, logged post-state variables)
_TABLE: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "CreateLocalRRef": (("w",), ("nextId", "ownerHeld")),
    "Remote": (
        ("w", "dst"),
        (
            "nextId",
            "owners",
            "forks",
            "ownerHeld",
            "selfCalls",
            "pendingUsers",
            "usersAdded",
            "held",
        ),
    ),
    "PrepareChildFork": (
        ("w", "dst", "r", "parent"),
        ("nextId", "forks", "owners", "pendingChildren"),
    ),
    "ToHere": (("w", "f"), ("fetching", "fetchedAdded")),
    "DropRRef": (("w", "f"), ("held",)),
    "DropOwnerRRef": (("w", "r"), ("ownerHeld",)),
    "RetrySend": (("m",), ()),
    "LoseFirstAttempt": (("m",), ()),
    "TimeOutRemote": (
        ("w", "r", "f"),
        ("pendingUsers", "confirmedUsers", "timedOutAdded", "selfCalls", "forks", "owners"),
    ),
    "TimeOutToHere": (("w", "f"), ("fetching",)),
    "DelUser": (("w", "f"), ("deletedAdded", "confirmedUsers")),
    "AssignOwnerRRef": (("w", "r", "f"), ("delivered", "owners", "forks", "pendingOwners")),
    "ConfirmPendingUser": (("w", "r", "f"), ("delivered", "pendingUsers", "confirmedUsers")),
    "FinishCreatingOwnerRRef": (("w", "r"), ("delivered", "selfCalls", "forks", "owners")),
    "RetrieveOwnerRRef": (
        ("w", "r", "f"),
        (
            "delivered",
            "pendingOwners",
        ),
    ),
    "ReceiveFetchRet": (
        ("w", "r", "f"),
        (
            "delivered",
            "fetching",
        ),
    ),
    "GetOrCreateRRef": (
        ("w", "r", "c"),
        (
            "delivered",
            "owners",
            "pendingOwners",
            "usersAdded",
            "held",
            "pendingUsers",
            "confirmedUsers",
        ),
    ),
    "AddForkOfOwnerIfNotPresent": (
        ("w", "r", "c"),
        (
            "delivered",
            "forks",
        ),
    ),
    "FinishForkRequest": (("w", "r", "c"), ("delivered", "pendingUsers", "confirmedUsers")),
    "DelPendingChild": (
        ("w", "r", "c"),
        (
            "delivered",
            "pendingChildren",
        ),
    ),
    "DelForkOfOwner": (("w", "r", "f"), ("delivered", "forks", "owners", "tombstonesAdded")),
    "WaitAllWorkers": ((), ("stopping",)),
    "DelAllUsersAndUnforkedOwners": (("w",), ("deletedAdded", "confirmedUsers", "owners", "phase")),
    "DestroyInstance": (("w",), ("phase", "pendingOwners")),
}


def _max_local_ids(traces: Sequence[Trace]) -> Mapping[str, str]:
    """MaxLocalId for a batch: per worker, the most ids any of the traces drew (a bound only
    has to be large enough; the logged ids pin every step down)."""
    top = dict.fromkeys(traces[0].header.nodes, 0)
    for trace in traces:
        for event in trace.events:
            if "nextId" in event.post:
                top[event.node] = max(top[event.node], int(event.post["nextId"]) - 1)
    body = " @@ ".join(f"{format_value(w)} :> {n}" for w, n in sorted(top.items()))
    return {"MaxLocalId": f"({body})"}


#: Who takes each step: the worker ``w`` of every worker action; a retry or a lost first
#: attempt is the sender's (``m.src``); the barrier is the environment actor ``barrier``.
_ACTOR = {"RetrySend": "m.src", "LoseFirstAttempt": "m.src", "WaitAllWorkers": "env:barrier"}

#: Quiescence of a run that finished (its trace's end line), by name: RRef.tla's state when
#: the workload is over and every message was handled. A graceful shutdown has destroyed every
#: context (ShutdownCompletesProp's goal); without one, nothing is left half done.
QUIESCENCE = {
    "nothing in flight (net = {})": "net = {}",
    "no pending user (pendingUsers)": "\\A tvW \\in Workers : pendingUsers[tvW] = {}",
    "no pending child (pendingChildren)": "\\A tvW \\in Workers : pendingChildren[tvW] = {}",
    "no fetch outstanding (fetching, pendingOwners)": (
        "fetching = {} /\\ \\A tvW \\in Workers : pendingOwners[tvW] = {}"
    ),
    "no self-remote call pending (selfCalls)": "\\A tvW \\in Workers : selfCalls[tvW] = {}",
    "every context destroyed after the shutdown barrier (phase)": (
        'stopping => \\A tvW \\in Workers : phase[tvW] = "destroyed"'
    ),
}

#: The variables that grow with every RRef ever created (RRef.tla): what a window's start
#: state drops of the RRefs that are over.
_GROWN = frozenset(
    {
        "users",
        "fetched",
        "deleted",
        "timedOut",
        "remoteErrors",
        "tombstones",
        "removedForks",
        "erasedOwners",
    }
)


def _ids_in(value: object, out: set[object]) -> None:
    """Every id ``<<node, n>>`` in ``value`` (a TLA+ value as TLC printed it) added to ``out``."""
    if isinstance(value, tuple):
        if len(value) == 2 and type(value[0]) is str and type(value[1]) is int:
            out.add(value)
            return
        for part in value:
            _ids_in(part, out)
    elif isinstance(value, frozenset):
        for part in value:
            _ids_in(part, out)
    elif isinstance(value, Mapping):
        for key, part in value.items():
            _ids_in(key, out)
            _ids_in(part, out)


def _per_worker(value: object, keep: Callable[[Any], bool]) -> object:
    """A ``[Workers -> SUBSET X]`` with each set cut to what ``keep`` keeps (same type)."""
    assert isinstance(value, Record | TLAFunction)
    cut: dict[Any, TLAValue] = {}
    for w, part in value.items():
        assert isinstance(part, frozenset)
        cut[w] = frozenset(x for x in part if keep(x))
    return Record(cut) if isinstance(value, Record) else TLAFunction(cut)


def window_start(state: Mapping[str, object]) -> tuple[dict[str, object], WindowIds]:
    """RRef.tla's state with the RRefs that are over left out: a window's start (issue 28 §8).

    The variables in :data:`_GROWN` hold every UserRRef ever created; everything else holds
    what is live. An id is *live* when a variable outside :data:`_GROWN` names it (an owner,
    a parked fetch, a fork, a pending or confirmed user, a pending child, an OwnerRRef held,
    a self-remote call, a UserRRef held or fetching, any field of a message in ``net``). A
    UserRRef f is kept when f is live, or not deleted, or the parent of a kept UserRRef; the
    rest are *over*: f is deleted, and nothing live names it. Live ids then include each kept
    UserRRef's record (its RRef, its parent). The start state keeps of ``users``,
    ``fetched``, ``deleted``, ``timedOut``, ``remoteErrors`` and ``erasedOwners`` the live
    ids, and of the pairs ``<<r, f>>`` of ``tombstones`` and ``removedForks`` those with r or
    f live; nothing else changes.

    Why the verdicts are the whole run's (every read of these variables in RRef.tla and
    TraceRRef.tla, checked for this): a step reads ``users`` through ``UserOn(w, f)`` (f in
    its domain), and ``fetched``/``deleted``/``timedOut``/``remoteErrors`` only of an f with
    ``UserOn(w, f) # {}``, of a message's fork or parent, or (DelAllUsersAndUnforkedOwners)
    of the users not yet deleted; ``tombstones`` only for the ``<<r, f>>`` of a message being
    handled (AssignOwnerRRef, AddForkOfOwnerIfNotPresent); ``removedForks`` and
    ``erasedOwners`` only in invariants, which trace validation does not check. Every step
    that names an id needs it live (in ``held``, ``fetching``, ``pendingUsers``, ``owners``,
    ``ownerHeld``, ``selfCalls``, or a message in ``net``) or not deleted, so a UserRRef that
    is over enables no step in either state, and the ones it is dropped from agree on every
    other step and its successor, up to the same projection. The logged post values are the
    acting worker's slices of live sets and what a step *added* to a grown one
    (``usersAdded``, ...), which a step adds only for live ids, so they agree too. Ids come
    from each worker's ``nextId``, so none is ever created again.

    Returned with the state: the ids below each worker's ``nextId`` the state names nowhere,
    as runs of the counter; none of them can be named by a step again (being named needs
    being live, and a step makes an id live only by drawing it or from a live one), so a
    later event that names one is rejected (tracecheck.replay.stream)."""
    live: set[object] = set()
    for name, value in state.items():
        if name not in _GROWN:
            _ids_in(value, live)
    users = state["users"]
    deleted = state["deleted"]
    assert isinstance(deleted, frozenset)
    entries: Mapping[object, object] = users if isinstance(users, Mapping) else {}
    kept = {f for f in entries if f in live or f not in deleted}
    todo = list(kept)
    while todo:  # the parents of kept UserRRefs (records name them), transitively
        record = entries[todo.pop()]
        assert isinstance(record, Mapping)
        parent = record["parent"]
        if parent in entries and parent not in kept:
            kept.add(parent)
            todo.append(parent)
    for f in kept:
        _ids_in(entries[f], live)
    projected = dict(state)
    projected["users"] = (
        TLAFunction({f: cast("TLAValue", v) for f, v in entries.items() if f in kept})
        if kept
        else ()
    )
    for name in ("fetched", "deleted", "timedOut", "remoteErrors"):
        value = state[name]
        assert isinstance(value, frozenset)
        projected[name] = frozenset(value & live)
    for name in ("tombstones", "removedForks"):
        projected[name] = _per_worker(state[name], lambda p: p[0] in live or p[1] in live)
        _ids_in(projected[name], live)
    projected["erasedOwners"] = _per_worker(state["erasedOwners"], lambda r: r in live)
    return projected, _unnamed(state["nextId"], live)


def _unnamed(next_id: object, live: set[object]) -> dict[str, list[tuple[int, int]]]:
    """Per worker, the runs of ids ``1..nextId[w] - 1`` that ``live`` does not hold."""
    assert isinstance(next_id, Mapping)
    named: dict[str, list[int]] = {}
    for node, n in (i for i in live if isinstance(i, tuple)):
        named.setdefault(node, []).append(n)
    runs: dict[str, list[tuple[int, int]]] = {}
    for node, top in next_id.items():
        assert type(node) is str
        assert type(top) is int
        first, out = 1, []
        for n in sorted(set(named.get(node, ()))):
            if n >= top:
                break
            if n > first:
                out.append((first, n - 1))
            first = max(first, n + 1)
        if first <= top - 1:
            out.append((first, top - 1))
        runs[node] = out
    return runs


RREF = ProtocolMap(
    protocol="rref",
    module="RRef",
    constants={
        "Workers": "{nodes}",
        **{
            name: f"{{settings[{name}]}}"
            for name in (
                "Variant",
                "Links",
                "RemoteDsts",
                "SelfRemote",
                "Duplicates",
                "Timeouts",
                "G1",
                "G2Workers",
                "Shutdown",
                "DeleteLast",
            )
        },
        # PyTorch-only faults (RRef.tla FailRemote, ExhaustRetries): never in a Reference trace.
        "UnknownErrors": "FALSE",
        "RetryExhaustion": "FALSE",
    },
    # a trace from before issue 28 says nothing of DeleteLast: the owner kept tombstones
    setting_defaults={"DeleteLast": False},
    derive=_max_local_ids,
    actions=tuple(
        ActionMap(
            event=event,
            params=params,
            post={v: _SLICE[v] for v in post},
            actor=_ACTOR.get(event, "w"),
            receives="delivered" in post,
        )
        for event, (params, post) in _TABLE.items()
    ),
    hidden={
        "FailRemote": "PyTorch-only fault (an UNKNOWN error of rpc.remote leaves the creator "
        "pending): the Reference stores any failure of the call in the OwnerRRef, so its "
        "implementation has no such step",
        "ExhaustRetries": "PyTorch-only fault (sendWithRetries gives up): the Reference retries "
        "a control message until it is delivered, so its implementation has no such step",
    },
    arg_kinds={
        "w": "node",
        "dst": "node",
        "r": "id",
        "f": "id",
        "c": "id",
        "parent": "id",
        "m": "message",
    },
    quiescence=QUIESCENCE,
    window_start=window_start,
)
