"""What every transition of the RRef core returns (:class:`Step`) and the guards they share.

The transitions themselves: :mod:`.app_actions` (application calls, the remote timeout, the
UserRRef destructor), :mod:`.handlers` (message handlers), :mod:`.shutdown_actions`
(graceful shutdown); :mod:`.machine` dispatches an input to them.
"""

from __future__ import annotations

from typing import NamedTuple

from protoref.errors import ProtocolError
from protoref.ids import GloballyUniqueId
from protoref.rref.core import events as ev
from protoref.rref.core.state import Leak, RRefContext, UserRRef
from protoref.rref.trace import args as tr

__all__ = ["Gid", "Step", "addressed", "app_guard", "del_fork_locally", "fail", "user_of"]

Gid = GloballyUniqueId


class Step(NamedTuple):
    """A transition's result: the new context, the messages to send, the action performed and,
    for the shutdown steps, what was found left behind (:class:`Leak`, PyTorch's warnings).
    A named tuple: built once per transition, three times cheaper than a frozen dataclass."""

    state: RRefContext
    sent: tuple[ev.Message, ...]
    action: tr.ActionArgs
    leaks: tuple[Leak, ...] = ()


def fail(ctx: RRefContext, action: str, reason: str) -> ProtocolError:
    return ProtocolError(ctx.me, action, reason)


def user_of(ctx: RRefContext, action: str, f: Gid) -> UserRRef:
    u = ctx.users.get(f)
    if u is None:
        raise fail(ctx, action, f"no UserRRef with ForkId {f} on this worker")
    return u


def addressed(ctx: RRefContext, action: str, m: ev.MessageBase) -> None:
    if m.dst != ctx.me:
        raise fail(ctx, action, f"message for {m.dst} delivered to {ctx.me}")
    if ctx.phase == "destroyed":
        # R11 ShutdownOrderInv: no message reaches a destroyed context (the spec's
        # DestroyInstance waits until none is in flight), so one that does is refused.
        raise fail(ctx, action, f"{m.type} delivered after destroyInstance")


def app_guard(ctx: RRefContext, action: str) -> None:
    # RRef.tla AppCanAct(w): no new user call, fork or fetch once _wait_all_workers passed.
    if not ctx.app_can_act():
        raise fail(ctx, action, f"shutdown in progress (phase {ctx.phase}, barrier passed)")


def del_fork_locally(ctx: RRefContext, r: Gid, f: Gid) -> RRefContext:
    """RRef.tla ``DelForkLocally`` = delForkOfOwner(r, f): a missing fork is only logged; the
    OwnerRRef is erased with its last fork."""
    if (r, f) not in ctx.forks:
        return ctx
    rest = ctx.forks - {(r, f)}
    last = not any(e[0] == r for e in rest)
    return ctx.evolve(forks=rest, owners=ctx.owners - {r} if last else ctx.owners)
