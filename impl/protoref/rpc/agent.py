"""One RPC worker (torch's RpcAgent), composed of parts and of its protocols' plug-ins.

The parts: its event-loop thread and the loop's queue (:mod:`.handoff`), the transport
(:mod:`.transport`), the peer table (:mod:`.peers`), the UDF pool (:mod:`.pool`), dead-peer
detection (:mod:`.liveness`) and the shutdown barriers (:mod:`.shutdown`). The plug-ins
(:mod:`.hooks`, loaded by :mod:`.plugins`) say what their frames do on arrival, what their
calls carry and what shutdown waits for; the agent routes frames to them by kind and tells them
about links, peers and barriers. Application threads write their frames themselves
(``send_frame`` on a live link); reads, dials and timers belong to the loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any, Final, Self, cast

from protoref.rpc import current, futures
from protoref.rpc import frames as fr
from protoref.rpc.codec import Codec
from protoref.rpc.errors import (
    AuthenticationRefusedError,
    FrameError,
    PeerDiscoveryError,
    RPCError,
)
from protoref.rpc.handoff import PENDING, LoopQueue
from protoref.rpc.hooks import Handler, Plugin, PluginClass
from protoref.rpc.link import Link
from protoref.rpc.liveness import Liveness
from protoref.rpc.options import RpcOptions, local_address_toward, new_loop
from protoref.rpc.peers import MASTER, PeerTable
from protoref.rpc.pool import UdfPool
from protoref.rpc.shared_store import master_from_store, publish_master, shared_store
from protoref.rpc.shutdown import Barriers, ShutdownReport
from protoref.rpc.shutdown import graceful as graceful_shutdown
from protoref.rpc.tensors import TensorCodec
from protoref.rpc.transport import Transport
from protoref.tracing import FrozenModel

__all__ = ["KEEP_ERRORS", "Agent", "RpcOptions", "ShutdownReport", "current_agent"]

log = logging.getLogger("protoref.rpc")
#: The most closing the links takes once graceful shutdown is over (its dials included).
CLOSE_SECONDS: Final = 30.0
#: How many rejected frames an agent keeps for inspection.
KEEP_ERRORS: Final = 256


class Agent:
    """One worker: its parts, its plug-ins, and the routing between them."""

    def __init__(
        self,
        name: str,
        rank: int,
        world_size: int,
        options: RpcOptions,
        plugins: Sequence[PluginClass] = (),
    ) -> None:
        if not 0 <= rank < world_size:
            raise PeerDiscoveryError(f"rank {rank} is outside 0..{world_size - 1}")
        if not options.secret:
            raise PeerDiscoveryError("an empty shared secret authenticates nobody")
        self.name, self.rank, self.world_size, self.options = name, rank, world_size, options
        self.closed = False
        self.closing = False  # its links are being closed: losing them says nothing of peers
        self.stopping = False
        self.loop = new_loop(options.event_loop)
        self.thread = threading.Thread(target=self._run_loop, name=f"rpc-{name}", daemon=True)
        self.queue = LoopQueue()
        self.pool = UdfPool(name, options.num_worker_threads, self._bind_thread)
        self.peers = PeerTable(name, rank, world_size)
        self.transport = Transport(
            name, options.secret, self, options.max_frame_bytes, options.connect_timeout
        )
        self.barriers = Barriers(self, self._declare_dead)
        self.liveness = Liveness(self, self.barriers.on_peer_dead, self.barriers.go_done)
        self.rejected: deque[FrameError] = deque(maxlen=KEEP_ERRORS)
        #: Payload codecs: the application's, torch tensors', then the plug-ins' (one list,
        #: shared with the plug-ins that encode payloads, filled before any runs).
        self.codecs: list[Codec] = [*options.codecs, TensorCodec()]
        self.plugins: list[Plugin] = []
        self._by_name: dict[str, Plugin] = {}
        self._handlers: dict[type[fr.Frame], Handler] = {
            fr.Join: lambda link, f: self.peers.on_join(link, f.info),
            fr.Peers: lambda _link, f: self.peers.on_peers(f.peers),
            fr.Barrier: self.barriers.on_frame,
            fr.BarrierGo: self.barriers.on_frame,
        }
        for cls in sorted(plugins, key=lambda c: c.order):
            plugin = cls(self)
            self.plugins.append(plugin)
            self._by_name[cls.name] = plugin
            self.codecs.extend(plugin.codecs)
            self._handlers.update(plugin.handlers)
        for plugin in self.plugins:
            plugin.attached(self.plugins)

    def plugin(self, name: str) -> Plugin:
        """The plug-in ``name`` of this worker (RPCError if it runs none)."""
        try:
            return self._by_name[name]
        except KeyError:
            raise RPCError(f"{self.name} runs no {name!r} plug-in") from None

    def maybe_plugin(self, name: str) -> Plugin | None:
        return self._by_name.get(name)

    def _declare_dead(self, peer: str, reason: str) -> None:
        self.liveness.declare_dead(peer, reason)

    @property
    def dead(self) -> dict[str, str]:
        """Dead peer -> why it was declared dead (liveness.py)."""
        return self.liveness.dead

    @property
    def ranks(self) -> dict[str, int]:
        return self.peers.ranks

    # ------------------------------------------------------------------ lifecycle

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        self._bind_thread()
        # Futures an RPC reply completes here run their callbacks on the RPC pool (futures.py).
        futures.divert_callbacks(self.pool.run_callback)
        self.loop.run_forever()

    def _bind_thread(self) -> None:
        current.bind(self)

    @contextlib.contextmanager
    def use(self) -> Iterator[Self]:
        """Make this worker the calling thread's for the module-level API (several workers in
        one process: each thread acts for one of them)."""
        before = current.bound()
        self._bind_thread()
        try:
            yield self
        finally:
            current.bind(before)

    def start(self) -> None:
        self.thread.start()
        self.queue.loop, self.queue.loop_thread = self.loop, self.thread.ident
        future = asyncio.run_coroutine_threadsafe(self._init(), self.loop)
        try:
            future.result(self.options.connect_timeout + 5)
        except BaseException:
            future.cancel()
            self._stop_loop()
            raise
        self._bind_thread()
        current.register(self)

    async def _init(self) -> None:
        self.peers.open(self.loop)
        o = self.options
        host = o.host or local_address_toward(o.master_addr, o.master_port)
        shared = shared_store(o.master_port)  # a process group on MASTER_PORT: share its store
        if self.rank == 0:
            port = await self.transport.serve(host, 0 if shared else o.master_port)
            if shared:
                await self.loop.run_in_executor(None, publish_master, *shared, host, port)
            self.peers.join_self(fr.PeerInfo(name=self.name, rank=0, host=host, port=port))
        else:
            port = await self.transport.serve(host, 0)
            self.transport.addresses[MASTER] = (
                (o.master_addr, o.master_port)
                if shared is None
                else await self.loop.run_in_executor(None, master_from_store, *shared)
            )
            me = fr.PeerInfo(name=self.name, rank=self.rank, host=host, port=port)
            self.transport.send(MASTER, fr.Join, info=me)
        assert self.peers.complete is not None
        try:
            peers = await asyncio.wait_for(self.peers.complete, o.connect_timeout)
        except TimeoutError as err:
            raise PeerDiscoveryError(
                f"{self.name}: the peer table was not complete within {o.connect_timeout} s "
                f"(master {o.master_addr}:{o.master_port}, world_size {self.world_size})"
            ) from err
        self.peers.learn(peers)
        for p in peers:
            if p.name != self.name:
                self.transport.addresses[p.name] = (p.host, p.port)
        for plugin in self.plugins:
            plugin.started(peers)

    def _stop_loop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.loop.is_running():
            self.loop.close()
        self.pool.shutdown(wait=False, cancel=True)

    async def _close(self) -> None:
        self.closing = True
        for plugin in self.plugins:
            plugin.closing()
        await self.transport.close()
        for plugin in self.plugins:
            plugin.close()
        me = asyncio.current_task()
        rest = [t for t in asyncio.all_tasks() if t is not me]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def shutdown(self, graceful: bool = True, timeout: float | None = None) -> ShutdownReport:
        """torch's rpc.shutdown: graceful waits for the others and reports leaks. ``timeout``
        > 0 bounds the graceful part (else ``shutdown_timeout``; None, the default, waits as
        torch does, as long as every peer it waits for is alive: a death ends the wait)."""
        if self.closed:
            raise RPCError(f"RPC on {self.name} is already shut down")
        if timeout is not None and timeout > 0:
            self.options = replace(self.options, shutdown_timeout=timeout)
        report = ShutdownReport(self.name)
        bound = self.options.shutdown_timeout
        limit = None if bound is None else bound + 10
        if graceful:
            report = asyncio.run_coroutine_threadsafe(
                graceful_shutdown(self, self.barriers), self.loop
            ).result(limit)
        self.stopping = True
        limit = CLOSE_SECONDS if limit is None else limit
        asyncio.run_coroutine_threadsafe(self._close(), self.loop).result(limit)
        self.closed = True
        self.pool.shutdown(wait=graceful)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(limit)
        self.loop.close()
        current.unbind(self)
        current.unregister(self)
        return report

    # ------------------------------------------------------------------ transport handler

    def on_frame(self, link: Link, frame: fr.Frame) -> None:
        """The transport's handler: each frame to what its kind does (the agent's own parts,
        or the plug-in that registered it)."""
        handler = self._handlers.get(type(frame))
        if handler is None:
            log.warning("%s: no handler for a %s frame from %s", self.name, frame.kind, link.peer)
            return
        handler(link, frame)

    def on_link_lost(self, peer: str) -> None:
        self.liveness.on_link_lost(peer)

    def on_unreachable(self, peer: str, error: BaseException) -> None:
        self.liveness.on_unreachable(peer, error)

    def on_rejected(self, error: FrameError) -> None:
        # Kept without its traceback: its frames hold the connection's reader and whatever
        # junk it buffered (a flood of bad handshakes kept ~350 KiB each alive through them).
        error.__context__ = error.__cause__ = None
        self.rejected.append(error.with_traceback(None))
        log.warning("%s: %s", self.name, error)
        if isinstance(error, AuthenticationRefusedError):
            self.peers.refused(error)  # while joining: say so at once (issue 28 s4)

    def welcome_state(self, peer: str) -> tuple[int, tuple[int, ...]]:
        for plugin in self.plugins:
            state = plugin.welcome(peer)
            if state is not None:
                return state
        return 0, ()

    def on_link_ready(self, peer: str, welcome: fr.Welcome, generation: int) -> None:
        for plugin in self.plugins:
            plugin.link_ready(peer, welcome, generation)

    def send_frame(
        self, peer: str, cls: type[FrozenModel], written: Any = None, **fields: Any
    ) -> int:
        """Write on the loop thread; from another thread write on the live link, or hand the
        frame to the loop when the link must be dialed first: the generation of the link a
        handed-off frame goes out on is known only then, so this returns PENDING and
        ``written(generation)`` is called once the loop sent it."""
        if threading.get_ident() == self.thread.ident:
            return self.transport.send(peer, cls, **fields)
        generation = self.transport.send_now(peer, cls, **fields)
        if generation is not None:
            return generation

        def send_later() -> None:
            sent_on = self.transport.send(peer, cls, **fields)
            if written is not None:
                written(sent_on)

        self.queue.handoff(send_later)
        return PENDING

    # ------------------------------------------------------------------ the API's plumbing

    def check_open(self) -> None:
        if self.closed:
            raise RPCError(f"RPC on {self.name} is shut down")

    def worker_info(self, name: str | int | None = None) -> current.WorkerInfo:
        """torch's get_worker_info: by name, by rank (id), or this worker's (None)."""
        return self.peers.worker_info(name)

    def to_name(self, to: str | int | current.WorkerInfo) -> str:
        return self.peers.to_name(to)


def current_agent() -> Agent:
    """The calling thread's worker (set by init_rpc and in UDF threads), else the process's."""
    return cast(Agent, current.current_worker())
