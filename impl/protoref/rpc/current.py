"""Which worker the calling thread acts for, and what a handle needs from a worker.

torch keeps one RPC agent per process (``_get_current_rpc_agent``); several of our workers may
live in one process, each bound to the threads that act for it (its init_rpc thread, its UDF
threads, its loop thread). The plug-ins' handles (the RRef handle) and the module-level API reach
their worker through :func:`current_worker` and the :class:`Worker` protocol below, so they need
not import the agent: the runtime's modules form no import circle.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from protoref.rpc.errors import RPCError

__all__ = ["Worker", "WorkerInfo", "bind", "current_worker", "register", "unbind", "unregister"]


class WorkerInfo:
    """torch.distributed.rpc.WorkerInfo: a worker's ``name`` and ``id`` (its rank)."""

    __slots__ = ("id", "name")

    def __init__(self, name: str, id: int) -> None:
        self.name = name
        self.id = id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WorkerInfo) and other.name == self.name and other.id == self.id

    def __hash__(self) -> int:
        return hash((self.name, self.id))

    def __repr__(self) -> str:
        return f"WorkerInfo(id={self.id}, name={self.name})"  # torch's text


class Worker(Protocol):
    """What the module-level API and the plug-ins' handles find for the calling thread
    (implemented by :class:`~protoref.rpc.agent.Agent`)."""

    name: str
    closed: bool

    def maybe_plugin(self, name: str) -> Any: ...


class _Bound(threading.local):
    agent: Worker | None = None


_bound = _Bound()
#: Workers started in this process, newest last: the fallback for threads bound to none.
_started: list[Worker] = []


def current_worker() -> Worker:
    """The calling thread's worker (set by init_rpc and in UDF threads), else the process's
    newest live one."""
    agent = _bound.agent or (_started[-1] if _started else None)
    if agent is None or agent.closed:
        raise RPCError("RPC is not initialised on this thread: call init_rpc first")
    return agent


def bound() -> Worker | None:
    return _bound.agent


def bind(agent: Worker | None) -> None:
    _bound.agent = agent


def unbind(agent: Worker) -> None:
    if _bound.agent is agent:
        _bound.agent = None


def register(agent: Worker) -> None:
    _started.append(agent)


def unregister(agent: Worker) -> None:
    if agent in _started:
        _started.remove(agent)
