"""The RRef handle application code holds (torch.distributed.rpc.RRef's shape).

A handle is either the owner's (it holds the value's box) or a user's (it holds a ForkId).
Its lifetime is Python's: ``weakref.finalize`` tells the worker when the last reference went,
which is RRef.tla's ``DropRRef`` (user) or ``DropOwnerRRef`` (owner); the worker then runs the
destructor (``DelUser``) when G2 allows. Handles are never pickled: they cross processes only
as arguments or results of rpc calls, where the protocol forks them.
"""

from __future__ import annotations

import concurrent.futures as cf
import weakref
from typing import Any, Generic, Protocol, TypeVar

from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rpc.current import WorkerInfo, current_worker
from protoref.rpc.errors import RPCError
from protoref.rpc.futures import as_torch_future
from protoref.rref.runtime.proxy import RRefProxy

__all__ = ["RRef", "Worker", "WorkerInfo", "worker_calls"]

T = TypeVar("T")
Gid = GloballyUniqueId


class Worker(Protocol):
    """What a handle calls on its worker's RRef runtime (implemented by ``calls.Calls``)."""

    @property
    def name(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    def create_local(self, value: Any) -> tuple[Gid, cf.Future[Any]]: ...

    def release_user(self, f: Gid) -> None: ...

    def release_owner(self, r: Gid) -> None: ...

    def worker_info(self, name: str | int | None = None) -> WorkerInfo: ...

    def proxy_call(
        self,
        rref: Any,
        mode: str,
        method: str,
        args: Any,
        kwargs: dict[str, Any],
        *,
        timeout: float | None,
    ) -> Any: ...

    def confirmed(self, f: Gid) -> bool: ...

    def fetch(self, f: Gid, r: Gid, timeout: float | None) -> Any: ...

    def backward(self, rref: Any, context_id: int, retain_graph: bool) -> None: ...


def worker_calls() -> Worker:
    """The calling thread's worker's RRef runtime (its ``rref`` plug-in's calls)."""
    plugin = current_worker().maybe_plugin("rref")
    if plugin is None:
        raise RPCError("this worker runs no RRef plug-in")
    calls: Worker = plugin.calls
    return calls


class RRef(Generic[T]):
    """A reference to a value owned by one worker. ``RRef(value)`` makes a local OwnerRRef."""

    __slots__ = ("__weakref__", "_agent", "_box", "_finalizer", "fork_id", "owner_id", "rref_id")
    _finalizer: weakref.finalize[[Gid], RRef[Any]] | None

    def __init__(self, value: T) -> None:
        agent = worker_calls()
        r, box = agent.create_local(value)
        self._init(agent, agent.name, r, None, box)
        self._finalizer = weakref.finalize(self, agent.release_owner, r)

    def _init(
        self,
        agent: Worker,
        owner: WorkerId,
        r: Gid,
        f: Gid | None,
        box: cf.Future[Any] | None,
    ) -> None:
        self._agent = agent
        self.owner_id = owner
        self.rref_id = r
        self.fork_id = f
        self._box = box

    @classmethod
    def _owner_side(cls, agent: Worker, r: Gid, box: cf.Future[Any], *, held: bool) -> RRef[Any]:
        h: RRef[Any] = object.__new__(cls)
        h._init(agent, agent.name, r, None, box)
        # Only OwnerRRefs the core counts as held by the application (ownerHeld: rpc.RRef(obj),
        # self remote) have a DropOwnerRRef; one unpickled on its owner is a plain reference.
        h._finalizer = weakref.finalize(h, agent.release_owner, r) if held else None
        return h

    @classmethod
    def _user_side(cls, agent: Worker, owner: WorkerId, r: Gid, f: Gid) -> RRef[Any]:
        h: RRef[Any] = object.__new__(cls)
        h._init(agent, owner, r, f, None)
        h._finalizer = weakref.finalize(h, agent.release_user, f)
        return h

    # ------------------------------------------------------------------ torch's API

    def is_owner(self) -> bool:
        return self.fork_id is None

    def owner(self) -> WorkerInfo:
        return self._agent.worker_info(self.owner_id)

    def owner_name(self) -> str:
        return self.owner_id

    def confirmed_by_owner(self) -> bool:
        """An OwnerRRef is always confirmed; a UserRRef once it left pendingUsers_."""
        return self.fork_id is None or self._agent.confirmed(self.fork_id)

    def local_value(self) -> T:
        """The value, on the owner only (blocks until a remote UDF has produced it)."""
        if self._box is None:
            raise RuntimeError(
                f"local_value() on a UserRRef: {self.rref_id} is owned by {self.owner_id}"
            )
        return self._box.result()  # type: ignore[no-any-return]

    def to_here(self, timeout: float | None = None) -> T:
        """The value: locally on the owner, else fetched (PYTHON_RREF_FETCH_CALL). ``timeout``
        as torch's: None or negative, the worker's rpc_timeout; 0, none."""
        if self._box is not None:
            wait = None if timeout is None or timeout <= 0 else timeout
            return self._box.result(wait)  # type: ignore[no-any-return]
        assert self.fork_id is not None
        return self._agent.fetch(self.fork_id, self.rref_id, timeout)  # type: ignore[no-any-return]

    def rpc_sync(self, timeout: float = -1.0) -> Any:
        """``rref.rpc_sync().f(*args)``: run method ``f`` of the value on its owner, wait."""
        return self._proxy("sync", timeout)

    def rpc_async(self, timeout: float = -1.0) -> Any:
        """``rref.rpc_async().f(*args)``: the same, a Future of its result."""
        return self._proxy("async", timeout)

    def remote(self, timeout: float = -1.0) -> Any:
        """``rref.remote().f(*args)``: the same, an RRef to its result (owned by the owner)."""
        return self._proxy("remote", timeout)

    def _proxy(self, mode: str, timeout: float) -> RRefProxy:
        def call(mode: str, method: str, args: Any, kwargs: dict[str, Any]) -> Any:
            out = self._agent.proxy_call(self, mode, method, args, kwargs, timeout=timeout)
            # as rpc.rpc_async's: a torch future when torch is loaded (torch.futures.wait_all)
            return as_torch_future(out) if mode == "async" else out

        return RRefProxy(call, mode)

    def backward(self, dist_autograd_ctx_id: int = -1, retain_graph: bool = False) -> None:
        """torch's RRef.backward: a backward pass from the value (a scalar tensor): local on
        the owner (-1, gradients in ``.grad``) or distributed in the given context. The pass
        is the call hook's (distributed autograd's plug-in, wraps.py): the RRef runtime knows
        no autograd."""
        self._agent.backward(self, dist_autograd_ctx_id, retain_graph)

    def __reduce__(self) -> Any:
        raise TypeError("an RRef is never pickled: pass it as an rpc argument or return value")

    def __repr__(self) -> str:
        kind = "OwnerRRef" if self.is_owner() else f"UserRRef(fork={self.fork_id})"
        return f"{kind}(rref={self.rref_id}, owner={self.owner_id})"
