"""Distributed autograd as a plug-in of :mod:`protoref.rpc`: one
:class:`~protoref.autograd.runtime.node.AutogradNode` per worker, fed by the RPC layer's frames.

A call, a ``remote`` or a fetch (``to_here``) made under a context is wrapped: its frame carries the
spec's message (:class:`~protoref.autograd.runtime.frames.AutogradMeta`), and its answer does too.
On the callee the UDF runs under the caller's context (the node's guard on the UDF's thread, so its
own calls are nested calls); the answer is wrapped when its tensors require grad. Cleanups and the
backward pass's messages travel as :class:`~.frames.Autograd` frames. Scalar tensors cross as
:class:`~protoref.autograd.runtime.payload.TensorCodec` values, never pickled. The plug-in is the
:class:`~protoref.rpc.hooks.CallHook` of the worker's calls (the RRef plug-in's, which keeps
each wrapped request until its answer comes).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar

from pydantic import JsonValue, ValidationError

from protoref import autograd as _autograd_api  # noqa: F401 - the package's API and codec
from protoref.autograd.runtime import current as ag_current
from protoref.autograd.runtime.frames import Autograd, AutogradFrame, AutogradMeta
from protoref.autograd.runtime.node import AutogradNode, Refused, Wrapped
from protoref.autograd.runtime.payload import TensorCodec
from protoref.autograd.runtime.rref_backward import rref_backward
from protoref.autograd.runtime.serial import Serial
from protoref.rpc import current
from protoref.rpc import frames as fr
from protoref.rpc.agent import Agent
from protoref.rpc.errors import MalformedFrameError
from protoref.rpc.hooks import BasePlugin
from protoref.rpc.link import Link, corked
from protoref.tracing import JsonlSink, TraceHeader, tla_set

__all__ = ["AutogradPlugin", "HandlerKey", "autograd_header"]

HandlerKey = tuple[Any, Any]
log = logging.getLogger("protoref.autograd.runtime")


def _resolve() -> AutogradNode | None:
    worker = current.bound()
    if worker is None:
        try:
            worker = current.current_worker()
        except Exception:
            return None
    plugin = worker.maybe_plugin(AutogradPlugin.name)
    node: AutogradNode | None = None if plugin is None else plugin.autograd
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
        # any worker may die; the survivors report it (PeerDied), a dead worker logs nothing
        "CrashWorkers": tla_set(workers),
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
        # the shapes of real programs (issue 26 s4): a call after a pass, a value one request
        # stored and another returned, a UDF that raises by itself
        "ForwardAfterPass": True,
        "StoredValues": True,
        "UdfErrors": True,
        "ReportedDeaths": True,
        "driver": "runtime",
    }
    return TraceHeader(
        protocol="autograd", nodes=tuple(str(r) for r in sorted(ranks)), settings=settings, seed=0
    )


class _Transport:
    """The autograd node's control frames on the worker's links."""

    def __init__(self, plugin: AutogradPlugin) -> None:
        self.plugin = plugin

    def batch(self) -> AbstractContextManager[None]:
        """What is sent inside leaves together, one write per link (link.corked)."""
        return corked()

    def send(self, dst: int, frame: AutogradFrame) -> None:
        plugin = self.plugin
        agent = plugin.agent
        name = agent.peers.name_of_rank(dst)
        if dst == agent.rank:  # to itself: after this step, on the frames' thread
            plugin.serial.submit(plugin.autograd.on_frame, frame)
            return
        try:
            agent.send_frame(name, Autograd, body=frame)
        except Exception as err:
            log.warning("%s: autograd frame to %s lost: %s", agent.name, name, err)
            plugin.autograd.discard(frame)


class AutogradPlugin(BasePlugin):
    """One worker's distributed autograd, composed into its agent; the call hook of its calls."""

    name: ClassVar[str] = "autograd"
    order: ClassVar[int] = 20
    exports: ClassVar[Mapping[str, object]] = {}
    refused = Refused

    def __init__(self, agent: Agent) -> None:
        super().__init__()
        self.agent = agent
        self.autograd = AutogradNode(agent.rank, _Transport(self))
        #: Control frames run here, in arrival order, not on the loop (a local pass may be
        #: torch's autograd: issue 26 §1).
        self.serial = Serial(f"{agent.name}-autograd")
        self.codecs.append(TensorCodec())  # protoref's scalar tensors in payloads
        self.handlers[Autograd] = self._on_frame
        self.call_hook = self

    # ------------------------------------------------------------------ the agent's hooks

    def started(self, peers: Sequence[fr.PeerInfo]) -> None:
        path = self.agent.options.autograd_trace
        if path is not None:
            self.trace(path, [p.rank for p in peers])

    def trace(self, path: Path, ranks: list[int]) -> None:
        """Write this worker's autograd trace to ``path``: every worker of a run writes the
        same header (DistAutograd.tla's constants for the Reference), so the logs merge."""
        path.parent.mkdir(parents=True, exist_ok=True)
        # one write per line: a worker killed mid-run keeps every event it logged, each before
        # what it sent (the survivors' traces take those messages: PeerDied)
        sink = JsonlSink(path, buffer_bytes=1)
        sink.header(autograd_header(ranks))
        self.autograd.sink = sink

    def close(self) -> None:
        self.serial.close()
        self.autograd.sink.close()

    def peer_dead(self, peer: str, error: BaseException) -> None:
        """``peer`` was declared dead (loop thread): the backward passes waiting on it fail
        and the contexts it created are released here (AutogradNode.peer_died)."""
        super().peer_dead(peer, error)
        rank = self.agent.ranks.get(peer)
        if rank is not None:
            self.serial.submit(self.autograd.peer_died, rank, peer)

    def _on_frame(self, link: Link, frame: Autograd) -> None:
        """A cleanup or backward-pass message from the link's peer (on the loop thread)."""
        msg, peer = frame.body.msg, link.peer
        if msg.src != self.agent.ranks.get(peer) or msg.dst != self.agent.rank:
            log.warning(
                "%s: autograd frame %s arrived on %s's link: dropped", self.agent.name, msg, peer
            )
            return
        # only a gradient request runs a local pass (torch's autograd, maybe long): the others
        # run here when nothing before them waits on the frames' thread
        self.serial.run(msg.type != "BWD_REQ", self._deliver, frame.body)

    def _deliver(self, body: AutogradFrame) -> None:
        """A control frame, on the frames' thread."""
        try:
            self.autograd.on_frame(body)
        except Exception as err:
            log.warning("%s: autograd frame %s refused: %s", self.agent.name, body.msg, err)

    # ------------------------------------------------------------------ the call hook: caller

    def wrap(self, to: str, args: object) -> Wrapped | None:
        """The request to ``to`` the calling thread makes, wrapped if it runs under a context."""
        return self.autograd.wrap_request(self.agent.ranks[to], args)

    def answered(self, wrapped: Wrapped, meta: AutogradMeta | None, value: object) -> None:
        """The answer to ``wrapped`` (``meta`` None: the call failed without one)."""
        self.autograd.on_answer(wrapped, meta, value)

    # ------------------------------------------------------------------ the call hook: callee

    def request(self, meta: AutogradMeta, args: object) -> HandlerKey:
        """A wrapped request arrived: its handler's key. Raises
        :class:`~protoref.autograd.runtime.node.Refused` for a context this worker released."""
        return self.autograd.on_request(meta, args)

    def guarded(self, key: HandlerKey, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn`` to run under the request's context (DistAutogradContextGuard)."""
        guard = self.autograd.guard

        def run() -> Any:
            with guard(key):
                return fn()

        return run

    def finish(self, key: HandlerKey, value: object, raised: bool) -> AutogradMeta | None:
        """The request's UDF returned (or raised): the answer's autograd part."""
        return self.autograd.finish_request(key, value, raised)

    # ------------------------------------------------------------------ the call hook: the wire

    def dump(self, meta: AutogradMeta) -> object:
        """The part a call frame's ext carries (the model: serialized with the frame)."""
        return meta

    def load(self, peer: str, value: JsonValue) -> AutogradMeta:
        """A frame's autograd part, validated before anything of the frame is applied."""
        try:
            return AutogradMeta.model_validate(value)
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            where = f"ext.{self.name}" + (f".{loc}" if loc else "")
            raise MalformedFrameError(peer, f"field {where}: {first['msg']}") from err

    def answer_copied(self, meta: AutogradMeta) -> bool:
        """An answer whose tensors require grad (FWD_RESP) is a copy on a call to oneself too."""
        return meta.msg.type == "FWD_RESP"

    def rref_backward(self, rref: Any, context_id: int, retain_graph: bool) -> None:
        """torch's RRef.backward (:mod:`~protoref.autograd.runtime.rref_backward`)."""
        rref_backward(rref, context_id, retain_graph)
