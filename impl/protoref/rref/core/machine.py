"""Pure transitions of the Reference RRef protocol: ``(context, input) -> Step``.

One function per RRef.tla action (``Variant = "Reference"``), named after it in snake case and
following its guard and effect line by line; each cites the PyTorch function it models and the
guarantee it serves. No I/O, clocks, randomness or logging. An input the spec does not enable
raises :class:`ProtocolError`; the context is immutable, so the caller's state is unchanged.
``RetrySend`` belongs to the network (the driver duplicates a message), so it has no function
here.

The transitions live in :mod:`.app_actions`, :mod:`.handlers` and :mod:`.shutdown_actions`
(re-exported here under their old names); :func:`step` dispatches an input to its transition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple

from protoref.rref.core import events as ev
from protoref.rref.core.app_actions import (
    create_local_rref,
    del_user,
    drop_owner_rref,
    drop_rref,
    prepare_child_fork,
    remote,
    time_out_remote,
    to_here,
)
from protoref.rref.core.handlers import (
    add_fork_of_owner_if_not_present,
    assign_owner_rref,
    confirm_pending_user,
    del_fork_of_owner,
    del_pending_child,
    finish_creating_owner_rref,
    finish_fork_request,
    get_or_create_rref,
    receive_fetch_ret,
    retrieve_owner_rref,
)
from protoref.rref.core.shutdown_actions import (
    del_all_users_and_unforked_owners,
    destroy_instance,
    wait_all_workers,
)
from protoref.rref.core.state import RRefContext
from protoref.rref.core.transition import Step

__all__ = [
    "ACTION_TABLE",
    "ActionRow",
    "Step",
    "action_table_markdown",
    "add_fork_of_owner_if_not_present",
    "assign_owner_rref",
    "confirm_pending_user",
    "create_local_rref",
    "del_all_users_and_unforked_owners",
    "del_fork_of_owner",
    "del_pending_child",
    "del_user",
    "destroy_instance",
    "drop_owner_rref",
    "drop_rref",
    "finish_creating_owner_rref",
    "finish_fork_request",
    "get_or_create_rref",
    "prepare_child_fork",
    "receive_fetch_ret",
    "remote",
    "retrieve_owner_rref",
    "step",
    "time_out_remote",
    "to_here",
    "wait_all_workers",
]


# --------------------------------------------------------------------------- dispatch


def _on_remote_ret(ctx: RRefContext, m: ev.RemoteRet) -> Step:
    # RRef.tla Receive: REMOTE_RET(r, r) completes a self remote, REMOTE_RET(r, f) a user.
    if m.fork == m.rref:
        return finish_creating_owner_rref(ctx, m)
    return confirm_pending_user(ctx, m)


_DISPATCH: Final[dict[type[Any], Callable[[RRefContext, Any], Step]]] = {
    ev.PythonRemoteCall: assign_owner_rref,
    ev.RemoteRet: _on_remote_ret,
    ev.RRefFetchCall: retrieve_owner_rref,
    ev.RRefFetchRet: receive_fetch_ret,
    ev.PythonCall: get_or_create_rref,
    ev.ForkRequest: add_fork_of_owner_if_not_present,
    ev.RRefAck: finish_fork_request,
    ev.ChildAccept: del_pending_child,
    ev.UserDelete: del_fork_of_owner,
    ev.CreateLocalRRef: lambda ctx, _i: create_local_rref(ctx),
    ev.Remote: lambda ctx, i: remote(ctx, i.dst),
    ev.PrepareChildFork: lambda ctx, i: prepare_child_fork(ctx, i.dst, i.r, i.parent),
    ev.ToHere: lambda ctx, i: to_here(ctx, i.f),
    ev.DropRRef: lambda ctx, i: drop_rref(ctx, i.f),
    ev.DropOwnerRRef: lambda ctx, i: drop_owner_rref(ctx, i.r),
    ev.TimeOutRemote: lambda ctx, i: time_out_remote(ctx, i.r, i.f),
    ev.DelUser: lambda ctx, i: del_user(ctx, i.f),
    ev.WaitAllWorkers: lambda ctx, i: wait_all_workers(ctx, i.user_calls_in_flight),
    ev.DelAllUsersAndUnforkedOwners: lambda ctx, i: del_all_users_and_unforked_owners(
        ctx, force=i.force
    ),
    ev.DestroyInstance: lambda ctx, i: destroy_instance(
        ctx, i.active_calls, i.peers_swept, force=i.force
    ),
}


def step(ctx: RRefContext, inp: ev.RRefInput) -> Step:
    """Apply one input (a delivered message, an application call, a timer or a destructor)."""
    return _DISPATCH[type(inp)](ctx, inp)


# --------------------------------------------------------------------------- crosswalk


class ActionRow(NamedTuple):
    """One row of docs/rref.md's crosswalk."""

    tla_action: str
    python: str
    pytorch: str


_M = "protoref.rref.core.machine."
#: RRef.tla action -> Python transition -> PyTorch function; the trace event is the action name.
ACTION_TABLE: Final[tuple[ActionRow, ...]] = (
    ActionRow("CreateLocalRRef", _M + "create_local_rref", "rpc.RRef(obj) / createOwnerRRef"),
    ActionRow("Remote", _M + "remote", "rpc.remote / pyRemotePythonUdf"),
    ActionRow("PrepareChildFork", _M + "prepare_child_fork", "RRefContext::prepareChildFork"),
    ActionRow("ToHere", _M + "to_here", "UserRRef::toHere"),
    ActionRow("DropRRef", _M + "drop_rref", "Python GC releases a UserRRef"),
    ActionRow("DropOwnerRRef", _M + "drop_owner_rref", "Python GC releases an OwnerRRef"),
    ActionRow("RetrySend", "protoref.rref.sim.simulator.Simulator.retry_send", "sendWithRetries"),
    ActionRow(
        "LoseFirstAttempt",
        "protoref.rref.sim.simulator.Simulator.lose_first_attempt",
        "a retried message lost with its connection",
    ),
    ActionRow(
        "TimeOutRemote",
        _M + "time_out_remote",
        "confirmPendingUser / finishCreatingOwnerRRef error path",
    ),
    ActionRow("DelUser", _M + "del_user", "UserRRef::tryDel / RRefContext::delUser"),
    ActionRow("AssignOwnerRRef", _M + "assign_owner_rref", "assignOwnerRRef"),
    ActionRow("ConfirmPendingUser", _M + "confirm_pending_user", "confirmPendingUser"),
    ActionRow(
        "FinishCreatingOwnerRRef", _M + "finish_creating_owner_rref", "finishCreatingOwnerRRef"
    ),
    ActionRow("RetrieveOwnerRRef", _M + "retrieve_owner_rref", "retrieveOwnerRRef / getOwnerRRef"),
    ActionRow("ReceiveFetchRet", _M + "receive_fetch_ret", "to_here future completes"),
    ActionRow(
        "GetOrCreateRRef", _M + "get_or_create_rref", "getOrCreateRRef + notifyOwnerAndParentOfFork"
    ),
    ActionRow(
        "AddForkOfOwnerIfNotPresent",
        _M + "add_fork_of_owner_if_not_present",
        "addForkOfOwnerIfNotPresent",
    ),
    ActionRow("FinishForkRequest", _M + "finish_fork_request", "finishForkRequest"),
    ActionRow("DelPendingChild", _M + "del_pending_child", "delPendingChild"),
    ActionRow("DelForkOfOwner", _M + "del_fork_of_owner", "delForkOfOwner"),
    ActionRow("WaitAllWorkers", _M + "wait_all_workers", "_wait_all_workers"),
    ActionRow(
        "DelAllUsersAndUnforkedOwners",
        _M + "del_all_users_and_unforked_owners",
        "_delete_all_user_and_unforked_owner_rrefs",
    ),
    ActionRow("DestroyInstance", _M + "destroy_instance", "agent.join + destroyInstance"),
)


def action_table_markdown() -> str:
    """The crosswalk as a Markdown table (PyTorch | TLA+ action | Python | trace event)."""
    lines = [
        "| PyTorch | TLA+ action | Python function | trace event |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {r.pytorch} | `{r.tla_action}` | `{r.python}` | `{r.tla_action}` |"
        for r in ACTION_TABLE
    ]
    return "\n".join(lines)
