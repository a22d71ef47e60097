"""The RRef runtime as a plug-in of :mod:`protoref.rpc`: one :class:`~.node.Node` per worker.

:class:`RRefPlugin` is what the RPC agent composes: the node's frames (protocol messages, calls,
replies, transport acks) routed to it, its Welcome state and retries on redialed links, dead
peers, its Lamport clock for the barriers, and its part of graceful shutdown (:mod:`.sweep`).
The application's calls are :class:`~.calls.Calls`'s; ``exports`` gives :mod:`protoref.rpc` its
``RRef``, ``remote`` and ``rpc_async``. Another plug-in's part of each call (distributed
autograd's context) comes through its :class:`~protoref.rpc.hooks.CallHook`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, ClassVar, cast

from pydantic import JsonValue

from protoref.rpc import frames as fr
from protoref.rpc.agent import Agent
from protoref.rpc.hooks import BasePlugin, Plugin, Swept, Until
from protoref.rpc.link import Link
from protoref.rref.core import events as ev
from protoref.rref.core.machine import step as core_step
from protoref.rref.runtime import frames as rf
from protoref.rref.runtime import sweep
from protoref.rref.runtime.calls import Calls, RpcFuture
from protoref.rref.runtime.handle import RRef, WorkerInfo, worker_calls
from protoref.rref.runtime.node import Node
from protoref.rref.trace import WaitAllWorkersArgs, make_event
from protoref.tracing import JsonlSink, NullSink, TraceHeader, TraceSink, tla_set

__all__ = ["BARRIER", "RRefPlugin", "current_calls", "header", "remote", "rpc_async"]

#: The environment actor that logs the global shutdown barrier (RRef.tla ``WaitAllWorkers``),
#: as the simulator does; only the master logs it.
BARRIER = "barrier"


def header(names: tuple[str, ...], workload: str) -> TraceHeader:
    """The header every worker of a run writes (identical, so the logs merge)."""
    links: list[JsonValue] = [[a, b] for a in names for b in names if a != b]
    settings: dict[str, JsonValue] = {
        "Variant": "Reference",
        "SelfRemote": True,
        "Duplicates": True,
        "DeleteLast": True,  # RRef.tla DeleteLast: no tombstones (issue 28)
        "Timeouts": True,
        "RemoteDsts": tla_set(list(names)),
        "G1": True,
        "G2Workers": tla_set(list(names)),
        "Shutdown": True,
        "Links": tla_set(links),
        "workload": workload,
        "driver": "runtime",
    }
    return TraceHeader(
        protocol="rref", nodes=names, settings=settings, seed=0, environment=(BARRIER,)
    )


def current_calls() -> Calls:
    """The calling thread's worker's RRef calls."""
    return cast(Calls, worker_calls())


def remote(
    to: str | int | WorkerInfo,
    func: Callable[..., Any] | str,
    args: Sequence[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    timeout: float = -1,
) -> RRef[Any]:
    """rpc.remote on the calling thread's worker."""
    calls = current_calls()
    return calls.remote(calls.agent.to_name(to), func, args or (), kwargs or {}, timeout)


def rpc_async(
    to: str | int | WorkerInfo,
    func: Callable[..., Any] | str,
    args: Sequence[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    timeout: float = -1,
) -> RpcFuture[Any]:
    """rpc.rpc_async on the calling thread's worker."""
    calls = current_calls()
    return calls.rpc_async(calls.agent.to_name(to), func, args or (), kwargs or {}, timeout)


class RRefPlugin(BasePlugin):
    """One worker's RRef runtime, composed into its agent."""

    name: ClassVar[str] = "rref"
    order: ClassVar[int] = 10
    exports: ClassVar[Mapping[str, object]] = {
        "RRef": RRef,
        "RpcFuture": RpcFuture,
        "remote": remote,
        "rpc_async": rpc_async,
    }

    def __init__(self, agent: Agent) -> None:
        super().__init__()
        self.agent = agent
        self.sink: TraceSink = NullSink()
        self.node = Node(
            me=agent.name,
            send_frame=self._send,
            run_udf=agent.pool.run_udf,
            codecs=agent.codecs,  # the agent's list: every plug-in's codecs, filled at start
            rpc_timeout=agent.options.rpc_timeout,
            queue=agent.queue,
        )
        self.calls = Calls(agent, self.node)
        self.node.agent = self.calls
        for kind in (rf.Proto, fr.Ack, rf.UserCall, rf.Refetch, rf.UserReply):
            self.handlers[kind] = self._on_frame

    def attached(self, plugins: Sequence[Plugin]) -> None:
        """Every plug-in is made: the first one with a call hook rides on these calls."""
        rider = next((p for p in plugins if p.call_hook is not None), None)
        if rider is not None:
            self.node.wraps.use(rider.call_hook, rider.name)

    def _send(self, peer: str, cls: type[fr.Frame], **fields: Any) -> int:
        ctl = fields.get("ctl")
        node = self.node
        written = None if ctl is None else lambda generation: node.sent_on(ctl, generation)
        return self.agent.send_frame(peer, cls, written, **fields)

    def _on_frame(self, link: Link, frame: fr.Frame) -> None:
        self.node.on_frame(link.peer, frame, lambda ctl: link.ack(ctl, self._lamport))

    def _lamport(self) -> int:
        return self.node.clock.lamport

    # ------------------------------------------------------------------ the agent's hooks

    def started(self, peers: Sequence[fr.PeerInfo]) -> None:
        o = self.agent.options
        if o.trace is not None:
            # PROTOREF_RPC_TRACE_DIR may name a folder that does not exist yet (as autograd's)
            o.trace.parent.mkdir(parents=True, exist_ok=True)
            self.sink = JsonlSink(o.trace)
            self.sink.header(header(tuple(p.name for p in peers), o.workload))
            self.node.sink = self.sink

    def welcome(self, peer: str) -> tuple[int, tuple[int, ...]] | None:
        return self.node.welcome_state(peer)

    def link_ready(self, peer: str, welcome: fr.Welcome, generation: int) -> None:
        self.node.on_link_ready(peer, welcome, generation)

    def peer_dead(self, peer: str, error: BaseException) -> None:
        self.node.peer_dead(peer, error)

    def lamport(self) -> int:
        return self.node.clock.lamport

    def observe(self, stamp: int) -> None:
        with self.node.lock:
            self.node.clock.lamport = max(self.node.clock.lamport, stamp)

    def poll(self) -> None:
        self.node.apply_drops()

    def idle(self, dead: Collection[str]) -> bool:
        return self.node.calls_quiet(gone=dead)

    def barrier_logged(self, phase: int, seq: int, lamport: int) -> None:
        """WaitAllWorkers is one global step: logged once by the master, above every
        arrival's clock, under the environment actor."""
        if phase == 1 and self.sink.enabled:
            with self.node.lock:
                post_state = core_step(self.node.ctx, ev.WaitAllWorkers()).state
                event = make_event(WaitAllWorkersArgs(), BARRIER, seq, lamport, post_state)
                self.sink.emit(event)

    def barrier_passed(self, phase: int) -> None:
        if phase == 1:
            self.node.pass_barrier()

    async def sweep(self, until: Until) -> Swept | None:
        return await sweep.sweep(self.node, until, lambda: bool(self.agent.dead))

    async def destroy(self, until: Until) -> Swept:
        return await sweep.destroy(self.node, until)

    def leftovers(self) -> Mapping[str, Sequence[str]]:
        with self.node.lock:
            return sweep.grouped(sweep.leftovers(self.node.ctx))

    def closing(self) -> None:
        self.node.frozen = True

    def close(self) -> None:
        self.sink.close()
