"""What the RRef plug-in's calls carry for another plug-in: its requests waiting for answers.

A call, a ``remote`` or a fetch (``to_here``) made while a :class:`~protoref.rpc.hooks.CallHook`
says so (distributed autograd: under a context) is wrapped: its frame carries the hook's part,
and its answer does too. This keeps, per wrapped request, what its answer must be matched with:
the call id, the RRef of a ``remote``, the fork of a fetch (caller side), the handler key
(callee side); without a hook nothing is ever wrapped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protoref.ids import GloballyUniqueId
from protoref.rpc.errors import RPCError
from protoref.rpc.hooks import CallHook, Ext

__all__ = ["Wraps"]

Gid = GloballyUniqueId


class _NeverRefusedError(Exception):
    """The refusal of a worker without a call hook: never raised."""


class Wraps:
    """The wrapped requests of one worker's RRef plug-in, through ``hook`` (None: no hook)."""

    def __init__(self, hook: CallHook | None, name: str = "") -> None:
        self.use(hook, name)
        #: caller side: call id / RRef id / fork id -> the wrapped request waiting there
        self.calls: dict[int, Any] = {}
        self.remotes: dict[Gid, Any] = {}
        self.fetches: dict[Gid, Any] = {}
        #: callee side: an RRef being created / a fork being fetched -> its handler's key
        self.creating: dict[Gid, Any] = {}
        self.serving: dict[Gid, Any] = {}

    def use(self, hook: CallHook | None, name: str = "") -> None:
        """Ride on ``hook`` (plug-in ``name``, its key in a frame's ext) from now on (set once,
        before the worker's first call)."""
        self.hook = hook
        self.name = name
        #: The hook's refusal (a released context): a request it refuses raises this.
        self.refused: type[Exception] = _NeverRefusedError if hook is None else hook.refused

    # ------------------------------------------------------------------ on the wire

    def ext(self, meta: Any) -> dict[str, object] | None:
        """A frame's ext for the hook's part ``meta`` (None: nothing rides on it)."""
        if meta is None or self.hook is None:
            return None
        return {self.name: self.hook.dump(meta)}

    def load(self, peer: str, ext: Ext | None) -> Any:
        """The hook's part of an arriving frame (None: none), checked before anything of the
        frame is applied (a bad one raises the hook's FrameError); parts of plug-ins this
        worker does not run are ignored, as a worker without the hook ignores the hook's."""
        if ext is None or self.hook is None or self.name not in ext:
            return None
        return self.hook.load(peer, ext[self.name])

    def answer_copied(self, meta: Any) -> bool:
        return meta is not None and self.hook is not None and self.hook.answer_copied(meta)

    def rref_backward(self, rref: Any, context_id: int, retain_graph: bool) -> None:
        if self.hook is None:
            raise RPCError("RRef.backward needs distributed autograd; this worker runs none")
        self.hook.rref_backward(rref, context_id, retain_graph)

    # ------------------------------------------------------------------ caller side

    def wrap(self, to: str, args: object) -> Any:
        """The request to ``to`` the calling thread makes, wrapped if the hook says so."""
        return None if self.hook is None else self.hook.wrap(to, args)

    def answered(self, wrapped: Any, meta: Any, value: object) -> None:
        """The answer to ``wrapped`` (``meta`` None: the call failed without one)."""
        if wrapped is not None and self.hook is not None:
            self.hook.answered(wrapped, meta, value)

    def call_done(self, call_id: int, meta: Any, value: object) -> None:
        self.answered(self.calls.pop(call_id, None), meta, value)

    def remote_done(self, r: Gid, meta: Any) -> None:
        self.answered(self.remotes.pop(r, None), meta, None)

    def fetch_done(self, f: Gid, meta: Any, value: object) -> None:
        self.answered(self.fetches.pop(f, None), meta, value)

    # ------------------------------------------------------------------ callee side

    def request(self, meta: Any, args: object) -> Any:
        """A request arrived: its handler's key (None: not wrapped). Raises :attr:`refused`
        for a request the hook refuses."""
        if meta is None or self.hook is None:
            return None
        return self.hook.request(meta, args)

    def key_or_refusal(self, meta: Any, args: object) -> Any:
        """The handler key of a wrapped request, or the refusal itself; None for a request
        that is not wrapped."""
        try:
            return self.request(meta, args)
        except self.refused as refused:
            return refused

    def is_refusal(self, key: Any) -> bool:
        return isinstance(key, self.refused)

    def guarded(self, key: Any, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn`` to run under the request's context."""
        if key is None or self.hook is None:
            return fn
        return self.hook.guarded(key, fn)

    def finish(self, key: Any, value: object, raised: bool) -> Any:
        """The request's UDF returned (or raised): the answer's part (None: not wrapped)."""
        if key is None or self.hook is None:
            return None
        return self.hook.finish(key, value, raised)
