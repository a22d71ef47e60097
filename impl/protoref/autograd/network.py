"""The network's and the agents' steps of DistAutograd.tla: what happens to messages in flight.

The spec's ``net`` is a set of message records; a driver holds it. These pure functions say how
it changes in the steps that are no worker's transition: ``RetryCleanup`` (a retried cleanup's
two copies both arrive), ``Discard`` (a message to a dead worker: the sender's agent fails the
future of a request) and the network part of ``Crash`` (torch's agents fail the futures of the
requests the dead worker will never answer; ``rpc/tensorpipe_agent.cpp``). ``LoseCleanupMsg``
is PyTorch's (exhausted retries), never the Reference's: it has no function here.
"""

from __future__ import annotations

from collections.abc import Iterable

from protoref.autograd.events import Msg
from protoref.errors import ProtocolError

__all__ = ["crash_network", "discard", "retry_cleanup"]


def retry_cleanup(m: Msg) -> tuple[Msg, Msg]:
    """``RetryCleanup(m)``: ``RpcAgent::sendWithRetries`` retried a cleanup whose first attempt
    was delivered after all: the first attempt (``dup = 1``) and the retry (``dup = 2``)."""
    if m.type != "CLEANUP" or m.dup != 0:
        raise ProtocolError(str(m.src), "RetryCleanup", f"{m} is no first-attempt cleanup")
    return m.with_dup(1), m.with_dup(2)


def discard(m: Msg, dst_alive: bool) -> tuple[Msg, ...]:
    """``Discard(msg)``: a message to a dead worker. The sender's agent fails the future of a
    request (an error answer made up in the dead worker's name) or of a gradient request; any
    other message is lost."""
    if dst_alive:
        raise ProtocolError(str(m.src), "Discard", f"worker {m.dst} of {m} is alive")
    if m.type == "FWD_REQ":
        return (Msg.make("RESP", m.ctx, None, m.req, m.dst, m.src, False),)
    if m.type == "BWD_REQ":
        return (Msg.make("BWD_RESP", m.ctx, m.mid, None, m.dst, m.src, False),)
    return ()


def crash_network(net: Iterable[Msg], w: int) -> list[Msg]:
    """The network after ``Crash(w)``: what was sent to ``w`` is gone, and every request in
    flight to it is answered with an error in its name (the caller's agent fails the future).
    The error answers for the requests ``w`` was handling come from
    :func:`protoref.autograd.forward.crash`."""
    kept: list[Msg] = []
    for m in net:
        if m.dst != w:
            kept.append(m)
        elif m.type == "FWD_REQ":
            kept.append(Msg.make("RESP", m.ctx, None, m.req, w, m.src, False))
    return kept
