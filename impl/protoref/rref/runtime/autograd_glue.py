"""Distributed autograd on the RPC runtime: one :class:`~protoref.autograd.node.AutogradNode`
per worker, fed by the runtime's frames.

A call, a ``remote`` or a fetch (``to_here``) made under a context is wrapped: its frame
carries the spec's message (:class:`~protoref.autograd.frames.AutogradMeta`), and its answer
does too. On the callee the UDF runs under the caller's context (the node's guard on the UDF's
thread, so its own calls are nested calls); the answer is wrapped when its tensors require
grad. Cleanups and the backward pass's messages travel as :class:`~.frames.Autograd` frames.
Scalar tensors cross as :class:`~protoref.autograd.payload.TensorCodec` values, never pickled.
This mixin keeps, per wrapped request, what its answer must be matched with: the call id, the
RRef of a ``remote``, the fork of a fetch (caller side), the handler key (callee side).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from protoref import autograd as _autograd_api  # noqa: F401 - the package's API and codec
from protoref.autograd import current as ag_current
from protoref.autograd.frames import AutogradFrame, AutogradMeta
from protoref.autograd.node import AutogradNode, Refused, Wrapped
from protoref.ids import GloballyUniqueId
from protoref.rref.runtime import current
from protoref.rref.runtime import frames as fr
from protoref.rref.runtime.link import corked
from protoref.tracing import JsonlSink, TraceHeader, tla_set

__all__ = ["AutogradGlue", "HandlerKey", "autograd_header"]

Gid = GloballyUniqueId
HandlerKey = tuple[Any, Any]
log = logging.getLogger("protoref.rref.runtime")


def _resolve() -> AutogradNode | None:
    worker = current.bound()
    if worker is None:
        try:
            worker = current.current_worker()
        except Exception:
            return None
    node: AutogradNode | None = getattr(worker, "autograd", None)
    return node


ag_current.set_resolver(_resolve)


def autograd_header(ranks: list[int]) -> TraceHeader:
    """The header of a runtime's autograd trace: its workers (nodes are their decimal ranks),
    any worker may call any other (itself too: a self-RPC), nesting (every nested call awaited:
    the runtime cannot tell a forgotten future), the Reference with the Echo backward, backward
    functions that may raise, calls that fail without an answer (``PollTimeoutRpcs``), calls
    after a block; no crash (a dead worker logs nothing, so a run with one is outside what its
    traces can show)."""
    workers: list[JsonValue] = [*sorted(ranks)]
    pairs: list[JsonValue] = [[a, b] for a in sorted(ranks) for b in sorted(ranks)]
    settings: dict[str, JsonValue] = {
        "Workers": tla_set(workers),
        "Calls": tla_set(pairs),
        "NestCalls": tla_set(pairs),
        "FireAndForget": False,
        "Variant": "Reference",
        "RefAblations": tla_set([]),
        "Watermark": False,
        "Horizon": True,
        "LateForward": True,
        "DupCleanup": True,
        "LoseCleanup": False,
        "CrashWorkers": tla_set([]),
        "Detect": True,
        "RpcTimeout": True,
        "Cascade": True,
        "KnownOnlyOnGrad": False,
        "NestingUnchecked": False,
        "BackwardMode": "Echo",
        "UnusedSends": True,
        "ErrorWorkers": tla_set(workers),
        "LateCalls": True,
        "UncheckedIds": tla_set([]),
        "driver": "runtime",
    }
    return TraceHeader(
        protocol="autograd", nodes=tuple(str(r) for r in sorted(ranks)), settings=settings, seed=0
    )


class _Transport:
    """The autograd node's control frames on the worker's links."""

    def __init__(self, glue: AutogradGlue) -> None:
        self.glue = glue

    def batch(self) -> AbstractContextManager[None]:
        """What is sent inside leaves together, one write per link (link.corked)."""
        return corked()

    def send(self, dst: int, frame: AutogradFrame) -> None:
        glue = self.glue
        name = glue.name_of_rank(dst)
        if dst == glue.rank:  # to itself: after this step, on the loop (as the core's messages)
            glue.node.handoff(glue.autograd.on_frame, frame)
            return
        try:
            glue._send_frame(name, fr.Autograd, body=frame)
        except Exception as err:
            log.warning("%s: autograd frame to %s lost: %s", glue.name, name, err)
            glue.autograd.discard(frame)


class AutogradGlue:
    """The agent's distributed autograd (mixed into :class:`~.agent.Agent`)."""

    name: str
    rank: int
    ranks: dict[str, int]
    node: Any
    _send_frame: Callable[..., int]

    def _init_autograd(self) -> None:
        self.autograd = AutogradNode(self.rank, _Transport(self))
        #: caller side: call id / RRef id / fork id -> the wrapped request waiting there
        self._ag_calls: dict[int, Wrapped] = {}
        self._ag_remotes: dict[Gid, Wrapped] = {}
        self._ag_fetches: dict[Gid, Wrapped] = {}
        #: callee side: an RRef being created / a fork being fetched -> its handler's key
        self._ag_creating: dict[Gid, HandlerKey] = {}
        self._ag_serving: dict[Gid, HandlerKey] = {}

    def trace_autograd(self, path: Path, ranks: list[int]) -> None:
        """Write this worker's autograd trace to ``path``: every worker of a run writes the
        same header (DistAutograd.tla's constants for the Reference), so the logs merge."""
        path.parent.mkdir(parents=True, exist_ok=True)
        sink = JsonlSink(path)
        sink.header(autograd_header(ranks))
        self.autograd.sink = sink

    def close_autograd_trace(self) -> None:
        self.autograd.sink.close()

    def on_autograd_frame(self, peer: str, frame: AutogradFrame) -> None:
        """A cleanup or backward-pass message from ``peer`` (on the loop thread)."""
        if frame.msg.src != self.ranks.get(peer) or frame.msg.dst != self.rank:
            log.warning(
                "%s: autograd frame %s arrived on %s's link: dropped", self.name, frame.msg, peer
            )
            return
        try:
            self.autograd.on_frame(frame)
        except Exception as err:
            log.warning("%s: autograd frame %s refused: %s", self.name, frame.msg, err)

    def name_of_rank(self, rank: int) -> str:
        for name, r in self.ranks.items():
            if r == rank:
                return name
        raise KeyError(f"no worker of rank {rank}")

    # ------------------------------------------------------------------ caller side

    def ag_wrap(self, to: str, args: object) -> Wrapped | None:
        """The request to ``to`` the calling thread makes, wrapped if it runs under a context."""
        return self.autograd.wrap_request(self.ranks[to], args)

    def ag_answered(
        self, wrapped: Wrapped | None, meta: AutogradMeta | None, value: object
    ) -> None:
        """The answer to ``wrapped`` (``meta`` None: the call failed without one)."""
        if wrapped is not None:
            self.autograd.on_answer(wrapped, meta, value)

    def ag_call_done(self, call_id: int, meta: AutogradMeta | None, value: object) -> None:
        self.ag_answered(self._ag_calls.pop(call_id, None), meta, value)

    def ag_remote_done(self, r: Gid, meta: AutogradMeta | None) -> None:
        self.ag_answered(self._ag_remotes.pop(r, None), meta, None)

    def ag_fetch_done(self, f: Gid, meta: AutogradMeta | None, value: object) -> None:
        self.ag_answered(self._ag_fetches.pop(f, None), meta, value)

    # ------------------------------------------------------------------ callee side

    def ag_request(self, meta: AutogradMeta | None, args: object) -> HandlerKey | None:
        """A wrapped request arrived: its handler's key (None: not wrapped). Raises
        :class:`~protoref.autograd.node.Refused` for a context this worker released."""
        if meta is None:
            return None
        return self.autograd.on_request(meta, args)

    def ag_guarded(self, key: HandlerKey | None, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn`` to run under the request's context (DistAutogradContextGuard)."""
        if key is None:
            return fn
        guard = self.autograd.guard

        def run() -> Any:
            with guard(key):
                return fn()

        return run

    def ag_finish(self, key: HandlerKey | None, value: object, raised: bool) -> AutogradMeta | None:
        """The request's UDF returned (or raised): the answer's autograd part."""
        if key is None:
            return None
        return self.autograd.finish_request(key, value, raised)

    def ag_refused(self, refused: Refused) -> fr.Result:
        return fr.Result(ok=False, error_type="RuntimeError", error=str(refused))
