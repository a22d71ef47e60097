"""What every transition of the autograd core shares: its result, its errors, the erase.

A transition is a pure function ``(container, parameters) -> Step``: the new container, the
messages it sends and the action it performed (the trace event's ``args``). An input the spec
does not enable raises :class:`~protoref.errors.ProtocolError` (or :class:`NotYetError` when the
input will be enabled once something else happens, e.g. a cleanup that waits for a running
handler); the container is immutable, so the caller's state is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from protoref.autograd.core.events import Msg
from protoref.autograd.core.horizon import Horizon, compact
from protoref.autograd.core.ids import AutogradId
from protoref.autograd.core.state import Container
from protoref.autograd.trace.args import ActionArgs
from protoref.errors import ProtocolError

__all__ = ["NotYetError", "Step", "addressed", "alive", "cleanups_for", "erase", "fail"]


class Step(NamedTuple):
    """A transition's result: the new container, the messages to send, the action performed."""

    state: Container
    sent: tuple[Msg, ...]
    action: ActionArgs


class NotYetError(ProtocolError):
    """The action is not enabled now but will be once the worker's other steps run (a cleanup
    or release waiting for the worker's running handlers of the context: the Reference's
    "defer"; a backward pass waiting for the application's futures). A driver retries it."""


def fail(ctn: Container, action: str, reason: str) -> ProtocolError:
    return ProtocolError(str(ctn.me), action, reason)


def alive(ctn: Container, action: str) -> None:
    """``alive[w]``: a crashed worker takes no step."""
    if not ctn.alive:
        raise fail(ctn, action, "the worker has crashed")


def addressed(ctn: Container, action: str, msg: Msg, *types: str) -> None:
    """``msg.type \\in types /\\ msg.dst = w`` (and the worker is alive)."""
    alive(ctn, action)
    if msg.type not in types:
        raise fail(ctn, action, f"a {msg.type} message is not handled by {action}")
    if msg.dst != ctn.me:
        raise fail(ctn, action, f"message for worker {msg.dst} delivered to worker {ctn.me}")


def erase(ctn: Container, c: AutogradId, horizons: Mapping[int, Horizon]) -> Container:
    """DistAutograd.tla ``EraseCtx(w, c)`` (torch ``eraseContextIdAndReset``): the context and
    everything it held go, its graph task too (the Reference's; PyTorch's DistEngine keeps a
    running one); on the creator the graph is no longer ``freed``; the Reference remembers the
    id (``tomb``: "tombstone") unless ``horizons``, the worker's horizons after the step, cover
    it (``EraseCtx(w, c, hw)``). The thread that had it current is reset by ReleaseContext
    itself."""
    own = c.worker == ctn.me
    return ctn.evolve(
        ctxs=ctn.ctxs - {c},
        known=frozenset(e for e in ctn.known if e[0] != c),
        sends=frozenset(s for s in ctn.sends if s.ctx != c),
        recvs=frozenset(r for r in ctn.recvs if r.ctx != c),
        execd=frozenset(e for e in ctn.execd if e[0] != c),
        fired=frozenset(e for e in ctn.fired if e[0] != c),
        grads=frozenset(e for e in ctn.grads if e[0] != c),
        bstate=frozenset(e for e in ctn.bstate if e[0] != c),
        outst=frozenset(e for e in ctn.outst if e[0] != c),
        awaiting=frozenset(e for e in ctn.awaiting if e[0] != c),
        parent=frozenset(e for e in ctn.parent if e[0] != c),
        echo_wait=frozenset(e for e in ctn.echo_wait if e[0] != c),
        freed=ctn.freed - {c} if c.worker == ctn.me else ctn.freed,
        tomb=compact((*ctn.tomb, c), horizons),
        horizon=horizons,
        # The creator's backward results of c only count passes while it holds c (the
        # spec's results is a history the checker keeps): they go with it (issue 28 §7).
        results=frozenset(e for e in ctn.results if e[0] != c) if own else ctn.results,
    )


def cleanups_for(
    ctn: Container, c: AutogradId, to: Iterable[int], trig: int, hz: Horizon
) -> tuple[Msg, ...]:
    """``CleanupsFor(w, c, to, trig)``: the cleanups sendReleaseContextRpc sends after ``w``
    erased ``c``, on behalf of ``trig``; in a deterministic order (the spec's is a set)."""
    return tuple(Msg.cleanup(c, ctn.me, x, trig, hz) for x in sorted(to))
