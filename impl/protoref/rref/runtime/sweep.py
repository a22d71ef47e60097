"""The RRef plug-in's part of graceful shutdown: RRef.tla's three shutdown actions.

Between the barriers (protoref.rpc.shutdown): wait until pendingUsers_, pendingChildren_ and
this worker's fetches drained, then ``DelAllUsersAndUnforkedOwners`` (delete every confirmed
UserRRef still alive, held ones included; forced, and reported, only if the wait timed out),
then wait for every retried control message to be acked. After barrier 2: wait for the
OwnerRRefs to be deleted, then ``DestroyInstance`` and the leak report (what RRefContext still
holds). When shutdown cannot complete, :func:`leftovers` lists what the context holds without
taking a step (its trace ends where the protocol stopped).
"""

from __future__ import annotations

from collections.abc import Callable

from protoref.rpc.hooks import Swept, Until
from protoref.rref.core import events as ev
from protoref.rref.core.state import Leak, RRefContext
from protoref.rref.runtime.node import Node

__all__ = ["destroy", "grouped", "leftovers", "sweep"]


def leftovers(ctx: RRefContext) -> list[Leak]:
    """What a context still holds when its shutdown cannot sweep it (pure, no step taken)."""
    alive = sorted(f for f in ctx.users if f not in ctx.deleted)
    return (
        [Leak("pending_user", ctx.users[f].rref, f) for f in sorted(ctx.pending_users)]
        + [Leak("pending_child", ctx.users[p].rref, c) for c, p in sorted(ctx.pending_children)]
        + [Leak("user", ctx.users[f].rref, f) for f in alive if f not in ctx.pending_users]
        + [Leak("owner", r) for r in sorted(ctx.owners | ctx.owner_held)]
        + [Leak("fork", r, f) for r, f in sorted(ctx.forks)]
        + [Leak("parked_fetch", r, f) for r, f, _ in sorted(ctx.pending_owners)]
    )


def grouped(leaks: list[Leak]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for leak in leaks:
        out.setdefault(leak.kind, []).append(str(leak))
    return out


def _problems(*found: str | None) -> tuple[str, ...]:
    return tuple(p for p in found if p)


async def sweep(node: Node, until: Until, dead: Callable[[], bool]) -> Swept | None:
    """Between the barriers; None if a death stopped it (the shutdown is then unfinished)."""
    waited = await until("pending users, children and fetches", node.quiet)
    if dead():
        return None
    leaks = node.apply(ev.DelAllUsersAndUnforkedOwners(force=waited is not None)).leaks
    acked = await until("acks of control messages", lambda: not node.unacked)
    return Swept(_problems(waited, acked), grouped(list(leaks)))


async def destroy(node: Node, until: Until) -> Swept:
    """After barrier 2: DestroyInstance once the OwnerRRefs are deleted (forced on timeout)."""
    owners_gone = await until("OwnerRRefs to be deleted", lambda: not node.ctx.owners)
    destroy = ev.DestroyInstance(active_calls=0, peers_swept=True, force=owners_gone is not None)
    return Swept(_problems(owners_gone), grouped(list(node.apply(destroy).leaks)))
