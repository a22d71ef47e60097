"""One worker's machinery: its event-loop thread, transport, driver, UDF pool and rendezvous.

Peers are found through a master (rank 0) at ``master_addr:master_port``, as torch's
MASTER_ADDR/MASTER_PORT: every other worker listens on a port of its own (0: the OS picks),
dials the master, sends a ``Join`` and receives the peer table once ``world_size`` workers have
joined. Application threads step the core themselves under the node's lock (the loop thread
takes the same lock for arriving frames, a UDF thread for its remote call's completion) and
write their frames themselves (Link.send); reads, dials and timers belong to the loop thread,
which other threads reach through ``Node.handoff`` (one loop wake-up per batch).

:class:`WorkerCore` is the base of ``Agent`` (agent.py), which adds the calls (calls.py) and
the shutdown (shutdown.py) and routes the transport's frames.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, Self, TypeVar, cast

from pydantic import JsonValue

from protoref.autograd.runtime.payload import TensorCodec as ScalarTensorCodec
from protoref.rpc import current, futures
from protoref.rpc import frames as fr
from protoref.rpc.current import WorkerInfo
from protoref.rpc.errors import FrameError, PeerDiscoveryError, RPCError
from protoref.rpc.futures import outcome
from protoref.rpc.link import Link, corked
from protoref.rpc.options import RpcOptions, local_address_toward, new_loop
from protoref.rpc.shared_store import master_from_store, publish_master, shared_store
from protoref.rpc.tensors import TensorCodec
from protoref.rpc.transport import Transport
from protoref.rref.runtime.node import PENDING, Node
from protoref.tracing import FrozenModel, JsonlSink, NullSink, TraceHeader, TraceSink, tla_set

__all__ = ["BARRIER", "MASTER", "WorkerCore"]

T = TypeVar("T")
log = logging.getLogger("protoref.rref.runtime")
MASTER = "<master>"  # dial key of the master before its name is known
#: The environment actor that logs the global shutdown barrier (RRef.tla ``WaitAllWorkers``),
#: as the simulator does; only the master logs it.
BARRIER = "barrier"


class WorkerCore:
    """A worker's threads, transport, driver and peer table (torch's RpcAgent)."""

    def __init__(self, name: str, rank: int, world_size: int, options: RpcOptions) -> None:
        if not 0 <= rank < world_size:
            raise PeerDiscoveryError(f"rank {rank} is outside 0..{world_size - 1}")
        if not options.secret:
            raise PeerDiscoveryError("an empty shared secret authenticates nobody")
        self.name, self.rank, self.world_size, self.options = name, rank, world_size, options
        self.closed = False
        self.closing = False  # its links are being closed: losing them says nothing of peers
        self.stopping = False
        self.ranks: dict[str, int] = {}
        self.loop = new_loop(options.event_loop)
        self.thread = threading.Thread(target=self._run_loop, name=f"rpc-{name}", daemon=True)
        self.executor = cf.ThreadPoolExecutor(
            options.num_worker_threads, f"udf-{name}", initializer=self._bind_thread
        )
        self.udfs_running = 0
        self._udf_lock = threading.Lock()
        self.sink: TraceSink = NullSink()
        self.node = Node(
            me=name,
            send_frame=self._send_frame,
            run_udf=self._run_udf,
            # tensors for torch programs unchanged; protoref's scalars for distributed autograd
            codecs=(*options.codecs, TensorCodec(), ScalarTensorCodec()),
            rpc_timeout=options.rpc_timeout,
            agent=self,
        )
        self.transport = Transport(
            name, options.secret, self, options.max_frame_bytes, options.connect_timeout
        )
        self.discovery_errors: list[PeerDiscoveryError] = []
        self._joined: dict[str, tuple[fr.PeerInfo, Link | None]] = {}
        self._peers: asyncio.Future[tuple[fr.PeerInfo, ...]] | None = None

    # ------------------------------------------------------------------ lifecycle

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        self._bind_thread()
        # Futures an RPC reply completes here run their callbacks on the RPC pool (futures.py).
        futures.divert_callbacks(self._run_callback)
        self.loop.run_forever()

    def _run_callback(self, callback: Callable[[], None]) -> None:
        def run() -> None:
            try:
                callback()
            except Exception:  # as concurrent.futures and torch do: logged, not raised
                log.exception("%s: exception calling a future's callback", self.name)

        try:
            self.executor.submit(run)
        except RuntimeError:  # the pool is shut down: nobody else will run it
            run()

    def _bind_thread(self) -> None:
        current.bind(cast(current.Worker, self))  # an Agent: this is its base

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
        self.node.loop, self.node.loop_thread = self.loop, self.thread.ident
        future = asyncio.run_coroutine_threadsafe(self._init(), self.loop)
        try:
            future.result(self.options.connect_timeout + 5)
        except BaseException:
            future.cancel()
            self._stop_loop()
            raise
        self._bind_thread()
        current.register(cast(current.Worker, self))

    async def _init(self) -> None:
        self._peers = self.loop.create_future()
        o = self.options
        host = o.host or local_address_toward(o.master_addr, o.master_port)
        shared = shared_store()  # torch's process group holds MASTER_PORT: share its store
        if self.rank == 0:
            port = await self.transport.serve(host, 0 if shared else o.master_port)
            if shared:
                await self.loop.run_in_executor(None, publish_master, *shared, host, port)
            me = fr.PeerInfo(name=self.name, rank=0, host=host, port=port)
            self._joined[self.name] = (me, None)
            self._maybe_complete()
        else:
            port = await self.transport.serve(host, 0)
            self.transport.addresses[MASTER] = (
                (o.master_addr, o.master_port)
                if shared is None
                else await self.loop.run_in_executor(None, master_from_store, *shared)
            )
            me = fr.PeerInfo(name=self.name, rank=self.rank, host=host, port=port)
            self.transport.send(MASTER, fr.Join, info=me)
        try:
            peers = await asyncio.wait_for(self._peers, o.connect_timeout)
        except TimeoutError as err:
            raise PeerDiscoveryError(
                f"{self.name}: the peer table was not complete within {o.connect_timeout} s "
                f"(master {o.master_addr}:{o.master_port}, world_size {self.world_size})"
            ) from err
        for p in peers:
            self.ranks[p.name] = p.rank
            if p.name != self.name:
                self.transport.addresses[p.name] = (p.host, p.port)
        if o.autograd_trace is not None:
            self.trace_autograd(o.autograd_trace, [p.rank for p in peers])
        if o.trace is not None:
            self.sink = JsonlSink(o.trace)
            self.sink.header(self.header(tuple(p.name for p in peers), o.workload))
            self.node.sink = self.sink

    @staticmethod
    def header(names: tuple[str, ...], workload: str) -> TraceHeader:
        """The header every worker of a run writes (identical, so the logs merge)."""
        links: list[JsonValue] = [[a, b] for a in names for b in names if a != b]
        settings: dict[str, JsonValue] = {
            "Variant": "Reference",
            "SelfRemote": True,
            "Duplicates": True,
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

    def _stop_loop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.loop.is_running():
            self.loop.close()
        self.executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ transport handler

    def on_frame(self, link: Link, frame: fr.Frame) -> None:
        """Route a frame the transport delivered (agent.Agent)."""
        raise NotImplementedError

    def trace_autograd(self, path: Any, ranks: list[int]) -> None:
        """Write this worker's distributed autograd trace to ``path`` (autograd_glue)."""
        raise NotImplementedError

    def close_autograd_trace(self) -> None:
        """Close this worker's distributed autograd trace, if it writes one (autograd_glue)."""

    def on_link_lost(self, peer: str) -> None:
        """A link to ``peer`` broke (liveness.Liveness)."""
        raise NotImplementedError

    def on_unreachable(self, peer: str, error: BaseException) -> None:
        """Dialing ``peer`` failed for good (liveness.Liveness)."""
        raise NotImplementedError

    def _clock_now(self) -> int:
        return self.node.clock.lamport

    def on_rejected(self, error: FrameError) -> None:
        # Kept without its traceback: its frames hold the connection's reader and whatever
        # junk it buffered (a flood of bad handshakes kept ~350 KiB each alive through them).
        error.__context__ = error.__cause__ = None
        self.node.rejected.append(error.with_traceback(None))
        log.warning("%s: %s", self.name, error)

    def welcome_state(self, peer: str) -> tuple[int, tuple[int, ...]]:
        return self.node.welcome_state(peer)

    def on_link_ready(self, peer: str, welcome: fr.Welcome, generation: int) -> None:
        self.node.on_link_ready(peer, welcome, generation)

    def _send_frame(self, peer: str, cls: type[FrozenModel], **fields: Any) -> int:
        """Write on the loop thread; from another thread write on the live link, or hand the
        frame to the loop when the link must be dialed first. The generation of the link a
        handed-off frame goes out on is known only then: until the loop has sent it, a retried
        message is PENDING (Node.sent_on), and a new link does not re-send it."""
        if threading.get_ident() == self.thread.ident:
            return self.transport.send(peer, cls, **fields)
        generation = self.transport.send_now(peer, cls, **fields)
        if generation is not None:
            return generation
        ctl = fields.get("ctl")

        def send_later() -> None:
            sent_on = self.transport.send(peer, cls, **fields)
            if ctl is not None:
                self.node.sent_on(ctl, sent_on)

        self.node.handoff(send_later)
        return PENDING

    # ------------------------------------------------------------------ rendezvous

    def _on_join(self, link: Link, info: fr.PeerInfo) -> None:
        problem = None
        if self.rank != 0:
            problem = f"{info.name} sent a Join to {self.name}, which is not the master"
        elif info.name != link.peer:
            problem = f"{link.peer} joined under another name, {info.name}"
        elif not 0 < info.rank < self.world_size:
            problem = f"{info.name} has rank {info.rank}, outside 1..{self.world_size - 1}"
        elif info.name in self._joined or any(
            p.rank == info.rank for p, _ in self._joined.values()
        ):
            problem = f"{info.name} (rank {info.rank}): name or rank already taken"
        if problem is not None:
            err = PeerDiscoveryError(problem)
            self.discovery_errors.append(err)
            log.error("%s: %s", self.name, err)
            link.close()
            return
        self._joined[info.name] = (info, link)
        self._maybe_complete()

    def _maybe_complete(self) -> None:
        if len(self._joined) < self.world_size or self._peers is None:
            return
        table = tuple(sorted((p for p, _ in self._joined.values()), key=lambda p: p.rank))
        for _, link in self._joined.values():
            if link is not None:
                link.send(fr.Peers, peers=table)
        self._peers.set_result(table)

    # ------------------------------------------------------------------ helpers

    def act(self, fn: Callable[[], T]) -> T:
        """Run an application operation on the calling thread under the core's lock: the step
        happens here, only the socket writes go to the loop. (Waking the loop thread and
        waiting for it doubled the latency of every call on a busy machine.)"""
        if self.closed:
            raise RPCError(f"RPC on {self.name} is shut down")
        node = self.node
        with corked(), node.lock:  # its frames (and the drops') leave in one write per peer
            node.apply_drops()  # a safe point: RRefs the application dropped go first
            return fn()

    def _run_udf(self, fn: Callable[[], Any], asynchronous: bool = False) -> cf.Future[Any]:
        """Run a UDF on the pool (as torch's RPC thread pool); its future completes on the pool
        thread, so its callbacks (the reply) run there too. (Submitting it only once the frames
        that came with its call were applied, to keep the loop from holding the GIL while the
        pool thread wakes, measured slower.) The count has a lock of its own: the pool thread
        must not wait for the core's lock, which the loop holds while it applies frames.

        ``asynchronous`` (rpc.functions.async_execution): ``fn`` returns a Future and the UDF is
        done when that completes; the pool thread is free meanwhile."""
        with self._udf_lock:
            self.udfs_running += 1
        future: cf.Future[Any] = cf.Future()
        try:
            self.executor.submit(self._udf_body, fn, future, asynchronous)
        except RuntimeError as err:  # the pool is shut down
            self._udf_settle(future, None, err)
        return future

    def _udf_body(self, fn: Callable[[], Any], future: cf.Future[Any], asynchronous: bool) -> None:
        try:
            result = fn()
        except BaseException as err:  # the UDF's own failure goes to its caller
            self._udf_settle(future, None, err)
            return
        if not asynchronous:
            self._udf_settle(future, result, None)
        elif not callable(getattr(result, "add_done_callback", None)):
            kind = f"{type(result).__module__}.{type(result).__qualname__}"
            self._udf_settle(
                future,
                None,
                RPCError(
                    "Functions decorated with @rpc.functions.async_execution must return a "
                    f"Future object (protoref's, torch's or concurrent's), but got {kind}"
                ),
            )
        else:
            result.add_done_callback(lambda done: self._udf_settle(future, *outcome(done)))

    def _udf_settle(self, future: cf.Future[Any], result: Any, exc: BaseException | None) -> None:
        with self._udf_lock:
            self.udfs_running -= 1
        if exc is None:
            future.set_result(result)
        else:
            future.set_exception(exc)

    def worker_info(self, name: str | int | None = None) -> WorkerInfo:
        """torch's get_worker_info: by name, by rank (id), or this worker's (None)."""
        if name is None:
            return WorkerInfo(self.name, self.rank)
        if isinstance(name, int) and not isinstance(name, bool):
            for worker, rank in self.ranks.items():
                if rank == name:
                    return WorkerInfo(worker, rank)
        elif name in self.ranks:
            return WorkerInfo(name, self.ranks[name])
        raise RPCError(  # torch's text
            f"name:{self.name},rank:{self.rank} could not find destination name {name}"
        )

    def to_name(self, to: str | int | WorkerInfo) -> str:
        """The name of a call's destination given as torch allows: name, rank or WorkerInfo."""
        if isinstance(to, WorkerInfo):
            return to.name
        if isinstance(to, str | int) and not isinstance(to, bool):
            return self.worker_info(to).name
        raise ValueError(f"Cannot get WorkerInfo from name {to}")  # torch's text
