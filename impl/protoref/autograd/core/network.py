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

from protoref.autograd.core.events import Msg
from protoref.errors import ProtocolError

__all__ = ["crash_network", "discard", "error_answer", "retry_cleanup"]


def retry_cleanup(m: Msg) -> tuple[Msg, Msg]:
    """``RetryCleanup(m)``: ``RpcAgent::sendWithRetries`` retried a cleanup whose first attempt
    was delivered after all: the first attempt (``dup = 1``) and the retry (``dup = 2``)."""
    if m.type != "CLEANUP" or m.dup != 0:
        raise ProtocolError(str(m.src), "RetryCleanup", f"{m} is no first-attempt cleanup")
    return m.with_dup(1), m.with_dup(2)


def error_answer(m: Msg) -> tuple[Msg, ...]:
    """``ErrorAnswer(m)``: what an agent makes up when request ``m`` meets a dead worker (its
    connections closed: ``Detect``): the future fails; Echo's failure detector answers a
    ``BWD_START`` the dead worker will never acknowledge."""
    if m.type == "FWD_REQ":
        return (Msg.make("RESP", m.ctx, None, m.req, m.dst, m.src, False),)
    if m.type == "BWD_REQ":
        return (Msg.bwd("BWD_RESP", m.ctx, m.mid, m.pass_, m.dst, m.src, False),)
    if m.type == "BWD_START":
        return (Msg.bwd("BWD_ACK", m.ctx, None, m.pass_, m.dst, m.src, False),)
    return ()


def discard(m: Msg, dst_alive: bool, waited_for: bool = False) -> tuple[Msg, ...]:
    """``Discard(msg)``: the agent disposes of a message nobody will handle: one to a dead
    worker (a request's future fails: :func:`error_answer`; anything else is lost), or an
    answer whose future is gone (it timed out: ``waited_for`` is False) -- dropped."""
    if not dst_alive:
        return error_answer(m)
    if m.type not in ("FWD_RESP", "RESP"):
        raise ProtocolError(str(m.dst), "Discard", f"worker {m.dst} of {m} is alive")
    if waited_for:
        raise ProtocolError(str(m.dst), "Discard", f"a future still waits for {m}")
    return ()


def crash_network(net: Iterable[Msg], w: int) -> list[Msg]:
    """The network after ``Crash(w)``: what was sent to ``w`` is gone, and every request in
    flight to it is answered with an error in its name (:func:`error_answer`). The answers for
    what ``w`` itself was doing come from :func:`protoref.autograd.core.forward.crash`."""
    kept: list[Msg] = []
    for m in net:
        if m.dst != w:
            kept.append(m)
        else:
            kept.extend(error_answer(m))
    return kept
