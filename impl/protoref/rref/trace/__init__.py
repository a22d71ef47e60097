"""Trace events of the RRef protocol: one model per RRef.tla action, one discriminated union.

Each event is ``{"kind": "event", "event": <action>, "node", "seq", "lamport", "args", "post"}``.
``args`` holds the action's parameters under their TLA+ names (``w``, ``dst``, ``r``, ``f``,
``c``, ``parent``, ``m``). ``post`` holds the acting node's post-state of every spec variable the
action may touch (``net`` excepted: the messages follow from the action and its arguments; the
history variables ``removedForks``/``erasedOwners`` are not protocol state). For the spec's
global sets about UserRRefs (``held``, ``fetching``) ``post`` holds the part about UserRRefs
living on the acting node, i.e. ``{f \\in held' : UserOn(node, f) # {}}``.

Five variables only grow (RRef.tla ``HistoryGrowsProp``, model-checked): ``users``,
``fetched``, ``deleted``, ``timedOut`` and the owner's ``tombstones``. For them ``post`` holds
what the step added, under ``<variable>Added`` (``usersAdded``: the UserRRef records the step
created). Every step that grows one of them logs it, so the whole value is the union of what the
events logged; written out whole, those slices made a trace's size quadratic in its length
(schema version 2; version 1 logged them whole).

Every other set of ``post`` (``owners``, ``pendingOwners``, ``forks``, ``pendingUsers``,
``confirmedUsers``, ``pendingChildren``, ``ownerHeld``, ``selfCalls``, ``held``, ``fetching``:
each a per-node set) is logged as a delta, ``{"#add": [...], "#del": [...]}``
(:class:`protoref.tracing.SetDelta`): what the node's slice gained and lost since the node last
logged that variable (since the empty set, before its first event that logs it). Every step that
changes a slice logs it (``post`` holds every variable the action may touch), so that is also
the change from the step's pre-state, which is how :func:`make_event` computes it. The sets grow
along a trace and were logged again at every event of the node, about 31 elements per event of
which about one was new: as deltas a trace's size is linear in its length, a checker no longer
diffs whole sets to find what changed (about half of its Python time per event), and a tracer no
longer re-joins every set's JSON at each step (schema version 3). A reader takes a whole
``{"#set": [...]}`` there too, as the node's new value: the models accept both forms.
"""

from protoref.rref.trace.args import (
    ActionArgs,
    AddForkOfOwnerIfNotPresentArgs,
    AssignOwnerRRefArgs,
    ConfirmPendingUserArgs,
    CreateLocalRRefArgs,
    DelAllUsersAndUnforkedOwnersArgs,
    DelForkOfOwnerArgs,
    DelPendingChildArgs,
    DelUserArgs,
    DestroyInstanceArgs,
    DropOwnerRRefArgs,
    DropRRefArgs,
    FinishCreatingOwnerRRefArgs,
    FinishForkRequestArgs,
    GetOrCreateRRefArgs,
    LoseFirstAttemptArgs,
    PrepareChildForkArgs,
    ReceiveFetchRetArgs,
    RemoteArgs,
    RetrieveOwnerRRefArgs,
    RetrySendArgs,
    TimeOutRemoteArgs,
    ToHereArgs,
    WaitAllWorkersArgs,
)
from protoref.rref.trace.encoder import EventEncoder
from protoref.rref.trace.events import (
    ACTION_ARGS,
    DELTAS,
    EVENT_ADAPTER,
    EVENT_MODELS,
    HISTORY,
    RRefTraceEvent,
    make_event,
)
from protoref.rref.trace.post import IdSet

__all__ = [
    "ACTION_ARGS",
    "DELTAS",
    "EVENT_ADAPTER",
    "EVENT_MODELS",
    "HISTORY",
    "ActionArgs",
    "AddForkOfOwnerIfNotPresentArgs",
    "AssignOwnerRRefArgs",
    "ConfirmPendingUserArgs",
    "CreateLocalRRefArgs",
    "DelAllUsersAndUnforkedOwnersArgs",
    "DelForkOfOwnerArgs",
    "DelPendingChildArgs",
    "DelUserArgs",
    "DestroyInstanceArgs",
    "DropOwnerRRefArgs",
    "DropRRefArgs",
    "EventEncoder",
    "FinishCreatingOwnerRRefArgs",
    "FinishForkRequestArgs",
    "GetOrCreateRRefArgs",
    "IdSet",
    "LoseFirstAttemptArgs",
    "PrepareChildForkArgs",
    "RRefTraceEvent",
    "ReceiveFetchRetArgs",
    "RemoteArgs",
    "RetrieveOwnerRRefArgs",
    "RetrySendArgs",
    "TimeOutRemoteArgs",
    "ToHereArgs",
    "WaitAllWorkersArgs",
    "make_event",
]
