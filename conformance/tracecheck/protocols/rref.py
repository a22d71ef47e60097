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

from collections.abc import Mapping, Sequence

from tracecheck.protocols.mapping import ActionMap, ProtocolMap
from tracecheck.tla.values import format_value
from tracecheck.traces.load import Trace

__all__ = ["RREF"]

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
)
