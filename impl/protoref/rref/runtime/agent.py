"""One RPC worker: its event-loop thread, transport, driver, UDF pool, rendezvous and shutdown.

Peers are found through a master (rank 0) at ``master_addr:master_port``, as torch's
MASTER_ADDR/MASTER_PORT: every other worker listens on a port of its own (0: the OS picks),
dials the master, sends a ``Join`` and receives the peer table once ``world_size`` workers have
joined. Application threads step the core themselves under the node's lock (the loop thread
takes the same lock for arriving frames, a UDF thread for its remote call's completion) and
write their frames themselves (Link.send); reads, dials and timers belong to the loop thread,
which other threads reach through ``Node.handoff`` (one loop wake-up per batch).

Graceful shutdown follows PyTorch's: ``_wait_all_workers`` (barrier 1, after this worker's own
user calls and UDFs finished), then ``delAllUsersAndUnforkedOwners`` (wait until pendingUsers_,
pendingChildren_ and this worker's fetches drained; delete every confirmed UserRRef still
alive, held ones included; wait for every retried control message to be acked), barrier 2,
then the leak report (what RRefContext still holds) and the links close.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import importlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import JsonValue

from protoref.ids import GloballyUniqueId
from protoref.rref import events as ev
from protoref.rref.machine import step as core_step
from protoref.rref.runtime import frames as fr
from protoref.rref.runtime.codec import Codec
from protoref.rref.runtime.errors import (
    FrameError,
    PeerDiscoveryError,
    RPCError,
    RPCTimeoutError,
)
from protoref.rref.runtime.handle import RRef, WorkerInfo
from protoref.rref.runtime.node import PENDING, Node
from protoref.rref.runtime.transport import Link, Transport, corked
from protoref.rref.runtime.udf import qualified_name
from protoref.rref.runtime.wire import DEFAULT_MAX_FRAME_BYTES
from protoref.rref.state import Leak
from protoref.rref.trace import WaitAllWorkersArgs, make_event
from protoref.tracing import (
    FrozenModel,
    JsonlSink,
    NodeClock,
    NullSink,
    TraceHeader,
    TraceSink,
    tla_set,
)

__all__ = ["Agent", "RpcFuture", "RpcOptions", "ShutdownReport", "current_agent"]

Gid = GloballyUniqueId
T = TypeVar("T")
log = logging.getLogger("protoref.rref.runtime")
MASTER = "<master>"  # dial key of the master before its name is known
#: The environment actor that logs the global shutdown barrier (RRef.tla ``WaitAllWorkers``),
#: as the simulator does; only the master logs it.
BARRIER = "barrier"
_local = threading.local()
_default: list[Agent] = []


def new_loop(kind: str = "auto") -> asyncio.AbstractEventLoop:
    """A fresh event loop of ``kind`` (see RpcOptions.event_loop). uvloop runs the same code
    (streams, timers, add_writer) with its loop machinery in C: less CPU per round trip."""
    if kind not in ("auto", "asyncio", "uvloop"):
        raise RPCError(f"event_loop must be auto, asyncio or uvloop, not {kind!r}")
    if kind != "asyncio":
        try:
            uvloop: Any = importlib.import_module("uvloop")
        except ImportError as err:
            if kind == "uvloop":
                raise RPCError("event_loop='uvloop' but uvloop is not installed") from err
        else:
            return uvloop.new_event_loop()  # type: ignore[no-any-return]
    return asyncio.new_event_loop()


def current_agent() -> Agent:
    """The calling thread's worker (set by init_rpc and in UDF threads), else the process's."""
    agent: Agent | None = getattr(_local, "agent", None) or (_default[-1] if _default else None)
    if agent is None or agent.closed:
        raise RPCError("RPC is not initialised on this thread: call init_rpc first")
    return agent


@dataclass(frozen=True)
class RpcOptions:
    """The runtime's knobs (torch's ``rpc_backend_options`` plus ours)."""

    secret: bytes
    master_addr: str = "127.0.0.1"
    master_port: int = 29500
    host: str = "127.0.0.1"  # where this worker listens and is reached
    rpc_timeout: float = 60.0
    connect_timeout: float = 30.0
    shutdown_timeout: float = 60.0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    num_worker_threads: int = 4
    codecs: Sequence[Codec] = ()
    trace: Path | None = None  # write this worker's trace (JSON lines) here
    workload: str = "runtime"  # trace header label; equal on every worker of a run
    #: The worker's event loop: ``"auto"`` takes uvloop when it is installed (the optional
    #: ``fast`` extra), else asyncio's own; ``"asyncio"`` / ``"uvloop"`` insist.
    event_loop: Literal["auto", "asyncio", "uvloop"] = "auto"


class RpcFuture(cf.Future[T]):
    """rpc_async's future: ``wait()`` as torch.futures.Future, ``result()`` as concurrent's."""

    def wait(self, timeout: float | None = None) -> T:
        try:
            return self.result(timeout)
        except RPCTimeoutError:
            raise  # the call's own timeout fired (cf.TimeoutError is TimeoutError: 3.11)
        except cf.TimeoutError as err:
            raise RPCTimeoutError(f"no result within {timeout} s") from err


@dataclass(frozen=True)
class ShutdownReport:
    """What graceful shutdown found: RRefContext entries left behind are leaks."""

    worker: str
    leaks: dict[str, list[str]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    @property
    def leak_free(self) -> bool:
        return not self.leaks and not self.problems


class Agent:
    """One worker (torch's RpcAgent + RRefContext + the Python RPC API's plumbing)."""

    def __init__(self, name: str, rank: int, world_size: int, options: RpcOptions) -> None:
        if not 0 <= rank < world_size:
            raise PeerDiscoveryError(f"rank {rank} is outside 0..{world_size - 1}")
        if not options.secret:
            raise PeerDiscoveryError("an empty shared secret authenticates nobody")
        self.name, self.rank, self.world_size, self.options = name, rank, world_size, options
        self.closed = False
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
            codecs=tuple(options.codecs),
            rpc_timeout=options.rpc_timeout,
            agent=self,
        )
        self.transport = Transport(
            name, options.secret, self, options.max_frame_bytes, options.connect_timeout
        )
        self.discovery_errors: list[PeerDiscoveryError] = []
        self._joined: dict[str, tuple[fr.PeerInfo, Link]] = {}
        self._peers: asyncio.Future[tuple[fr.PeerInfo, ...]] | None = None
        self._arrived: dict[int, dict[str, int]] = {}
        self.barrier_clock = NodeClock()
        self._go: dict[int, asyncio.Future[None]] = {}

    # ------------------------------------------------------------------ lifecycle

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def _bind_thread(self) -> None:
        _local.agent = self

    @contextlib.contextmanager
    def use(self) -> Iterator[Agent]:
        """Make this worker the calling thread's for the module-level API (several workers in
        one process: each thread acts for one of them)."""
        before = getattr(_local, "agent", None)
        _local.agent = self
        try:
            yield self
        finally:
            _local.agent = before

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
        _default.append(self)

    async def _init(self) -> None:
        self._peers = self.loop.create_future()
        o = self.options
        if self.rank == 0:
            await self.transport.serve(o.host, o.master_port)
            me = fr.PeerInfo(name=self.name, rank=0, host=o.host, port=o.master_port)
            self._joined[self.name] = (me, None)  # type: ignore[assignment]
            self._maybe_complete()
        else:
            port = await self.transport.serve(o.host, 0)
            self.transport.addresses[MASTER] = (o.master_addr, o.master_port)
            me = fr.PeerInfo(name=self.name, rank=self.rank, host=o.host, port=port)
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
        if isinstance(frame, fr.Join):
            self._on_join(link, frame.info)
        elif isinstance(frame, fr.Peers):
            if self._peers is not None and not self._peers.done():
                self._peers.set_result(frame.peers)
        elif isinstance(frame, fr.Barrier):
            self._arrive(frame.phase, frame.name, frame.stamp)
        elif isinstance(frame, fr.BarrierGo):
            self._pass(frame.phase, frame.stamp)
        else:
            self.node.on_frame(
                link.peer,
                frame,
                lambda ctl: link.ack(ctl, self._clock_now),
            )

    def _clock_now(self) -> int:
        return self.node.clock.lamport

    def on_rejected(self, error: FrameError) -> None:
        self.node.rejected.append(error)
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

    def _run_udf(self, fn: Callable[[], Any]) -> cf.Future[Any]:
        """Run a UDF on the pool (as torch's RPC thread pool); its future completes on the pool
        thread, so its callbacks (the reply) run there too. (Submitting it only once the frames
        that came with its call were applied, to keep the loop from holding the GIL while the
        pool thread wakes, measured slower.) The count has a lock of its own: the pool thread
        must not wait for the core's lock, which the loop holds while it applies frames."""
        with self._udf_lock:
            self.udfs_running += 1
        future: cf.Future[Any] = cf.Future()
        self._submit_udf(fn, future)
        return future

    def _submit_udf(self, fn: Callable[[], Any], future: cf.Future[Any]) -> None:
        try:
            self.executor.submit(self._udf_body, fn, future)
        except RuntimeError as err:  # the pool is shut down
            self._udf_settle(future, None, err)

    def _udf_body(self, fn: Callable[[], Any], future: cf.Future[Any]) -> None:
        try:
            result = fn()
        except BaseException as err:  # the UDF's own failure goes to its caller
            self._udf_settle(future, None, err)
        else:
            self._udf_settle(future, result, None)

    def _udf_settle(self, future: cf.Future[Any], result: Any, exc: BaseException | None) -> None:
        with self._udf_lock:
            self.udfs_running -= 1
        if exc is None:
            future.set_result(result)
        else:
            future.set_exception(exc)

    def worker_info(self, name: str) -> WorkerInfo:
        return WorkerInfo(name, self.ranks[name])

    def _check_call(self, to: str) -> None:
        if self.stopping:
            raise RPCError(f"{self.name} is shutting down: no new calls")
        if to not in self.ranks:
            raise RPCError(f"unknown worker {to!r}; known: {sorted(self.ranks)}")

    # ------------------------------------------------------------------ API plumbing

    def create_local(self, value: Any) -> tuple[Gid, cf.Future[Any]]:
        def run() -> tuple[Gid, cf.Future[Any]]:
            r = self.node.ctx.new_id()
            self.node.apply(ev.CreateLocalRRef())
            box: cf.Future[Any] = cf.Future()
            box.set_result(value)
            self.node.boxes[r] = box
            return r, box

        return self.act(run)

    def remote(
        self, to: str, fn: Callable[..., Any] | str, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> RRef[Any]:
        name = qualified_name(fn)

        def run() -> RRef[Any]:
            self._check_call(to)
            node = self.node
            body = node.encode_call(name, args, kwargs, to)
            r = node.ctx.new_id()
            f = node.ctx.new_id(1) if to != self.name else r
            step = node.apply(ev.Remote(dst=to), send=False)
            for m in step.sent:
                node.emit(m, node.clock.lamport, call=body)
            node.remote_timer(r, f)
            if to == self.name:
                box = node.boxes.setdefault(r, cf.Future())
                return RRef._owner_side(self, r, box, held=True)
            return RRef._user_side(self, to, r, f)

        return self.act(run)

    def rpc_async(
        self,
        to: str,
        fn: Callable[..., Any] | str,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        timeout: float | None,
    ) -> RpcFuture[Any]:
        name = qualified_name(fn)
        future: RpcFuture[Any] = RpcFuture()
        limit = self.options.rpc_timeout if timeout is None else timeout

        def run() -> None:
            self._check_call(to)
            node = self.node
            body = node.encode_call(name, args, kwargs, to)
            if to == self.name:  # no RRefs (the core refuses sharing with oneself): run here
                a, k = node.decode_call(body, node.clock.lamport)
                from protoref.rref.runtime.udf import resolve  # noqa: PLC0415

                fn_ = resolve(name)
                udf = self._run_udf(lambda: fn_(*a, **k))
                udf.add_done_callback(lambda d: self._settle(future, d))
                return
            call_id = node.next_id()
            node.calls[call_id] = future
            self._send_frame(to, fr.UserCall, stamp=node.clock.lamport, call_id=call_id, body=body)
            self._expire(call_id, limit)

        self.act(run)
        return future

    @staticmethod
    def _settle(target: cf.Future[Any], done: cf.Future[Any]) -> None:
        exc = done.exception()
        if exc is None:
            target.set_result(done.result())
        else:
            target.set_exception(exc)

    def _expire(self, call_id: int, limit: float) -> None:
        def fire() -> None:
            with self.node.lock:
                future = self.node.calls.pop(call_id, None)
            if future is not None and not future.done():
                future.set_exception(RPCTimeoutError(f"call {call_id} timed out after {limit} s"))
            self.node.on_step()

        if limit > 0:
            self.node.later(lambda: self.loop.call_later(limit, fire))

    def fetch(self, f: Gid, r: Gid, timeout: float | None) -> Any:
        limit = self.options.rpc_timeout if timeout is None else timeout
        future: cf.Future[Any] = cf.Future()
        owner: list[str] = []

        def run() -> None:
            node = self.node
            user = node.ctx.users[f]
            owner.append(user.owner)
            if f in node.ctx.fetched:  # the spec's bound: later fetches are plain calls
                call_id = node.next_id()
                node.calls[call_id] = future
                self._send_frame(
                    user.owner, fr.Refetch, stamp=node.clock.lamport, call_id=call_id, rref=tuple(r)
                )
                self._expire(call_id, limit)
                return
            node.apply(ev.ToHere(f=f))
            node.fetches[f] = future

        self.act(run)
        try:
            return future.result(limit if limit > 0 else None)
        except RPCTimeoutError:
            raise
        except cf.TimeoutError as err:
            raise RPCTimeoutError(
                f"to_here of {f} (owner {owner[0]}) timed out after {limit} s"
            ) from err

    def release_user(self, f: Gid) -> None:
        """weakref.finalize of a UserRRef handle (any thread): DropRRef on the loop."""
        if not self.closed:  # else nothing is left to tell
            self.node.note_drop(self.node.drop_user, f)

    def release_owner(self, r: Gid) -> None:
        if not self.closed:
            self.node.note_drop(self.node.drop_owner, r)

    # ------------------------------------------------------------------ shutdown

    async def _until(self, what: str, pred: Callable[[], bool], deadline: float) -> str | None:
        while True:
            self.node.apply_drops()
            if pred():
                return None
            if time.monotonic() > deadline:
                return f"timed out waiting for {what}"
            await asyncio.sleep(0.002)

    async def _barrier(self, phase: int, deadline: float) -> str | None:
        go = self._go.setdefault(phase, self.loop.create_future())
        stamp = self.node.clock.lamport
        if self.rank == 0:
            self._arrive(phase, self.name, stamp)
        else:
            master = next(n for n, k in self.ranks.items() if k == 0)
            self._send_frame(master, fr.Barrier, phase=phase, name=self.name, stamp=stamp)
        try:
            await asyncio.wait_for(go, max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            return f"barrier {phase}: not every worker arrived"
        return None

    def _arrive(self, phase: int, name: str, stamp: int) -> None:
        arrived = self._arrived.setdefault(phase, {})
        arrived[name] = stamp
        if len(arrived) < self.world_size:
            return
        seq, lamport = self.barrier_clock.receive(max(arrived.values()))
        if phase == 1 and self.sink.enabled:
            # WaitAllWorkers is one global step: logged once, above every arrival's clock.
            with self.node.lock:
                post_state = core_step(self.node.ctx, ev.WaitAllWorkers()).state
                event = make_event(WaitAllWorkersArgs(), BARRIER, seq, lamport, post_state)
                self.sink.emit(event)
        for other in self.ranks:
            if other != self.name:
                self._send_frame(other, fr.BarrierGo, phase=phase, stamp=lamport)
        self._pass(phase, lamport)

    def _pass(self, phase: int, stamp: int) -> None:
        with self.node.lock:
            self.node.clock.lamport = max(self.node.clock.lamport, stamp)
        if phase == 1:
            # From here on no new user call (AppCanAct): until every worker arrived, this
            # worker's UDFs may still call out on behalf of callers that have not arrived.
            self.stopping = True
            self.node.pass_barrier()
        go = self._go.setdefault(phase, self.loop.create_future())
        if not go.done():
            go.set_result(None)

    async def _graceful(self) -> ShutdownReport:
        """rpc.shutdown(graceful=True) as RRef.tla's three shutdown actions."""
        deadline = time.monotonic() + self.options.shutdown_timeout
        node = self.node
        problems: list[str | None] = []
        leaks: list[Leak] = []
        calls_done = lambda: node.calls_quiet() and not self.udfs_running  # noqa: E731
        problems.append(await self._until("this worker's user calls", calls_done, deadline))
        problems.append(await self._barrier(1, deadline))  # WaitAllWorkers
        waited = await self._until("pending users, children and fetches", node.quiet, deadline)
        problems.append(waited)
        # DelAllUsersAndUnforkedOwners: forced (and reported) only if the wait timed out.
        leaks += node.apply(ev.DelAllUsersAndUnforkedOwners(force=waited is not None)).leaks
        problems.append(
            await self._until("acks of control messages", lambda: not node.unacked, deadline)
        )
        problems.append(await self._barrier(2, deadline))  # every worker swept, deletes applied
        owners_gone = await self._until(
            "OwnerRRefs to be deleted", lambda: not node.ctx.owners, deadline
        )
        problems.append(owners_gone)
        destroy = ev.DestroyInstance(
            active_calls=0, peers_swept=True, force=owners_gone is not None
        )
        leaks += node.apply(destroy).leaks
        grouped: dict[str, list[str]] = {}
        for leak in leaks:
            grouped.setdefault(leak.kind, []).append(str(leak))
        report = ShutdownReport(self.name, grouped, tuple(p for p in problems if p))
        if not report.leak_free:
            log.warning(
                "%s: graceful shutdown: leaks %s, problems %s", self.name, grouped, report.problems
            )
        return report

    async def _close(self) -> None:
        self.node.frozen = True
        await self.transport.close()
        self.sink.close()
        me = asyncio.current_task()
        rest = [t for t in asyncio.all_tasks() if t is not me]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def shutdown(self, graceful: bool = True) -> ShutdownReport:
        """torch's rpc.shutdown: graceful waits for the others and reports leaks."""
        if self.closed:
            raise RPCError(f"RPC on {self.name} is already shut down")
        report = ShutdownReport(self.name)
        limit = self.options.shutdown_timeout + 10
        if graceful:
            report = asyncio.run_coroutine_threadsafe(self._graceful(), self.loop).result(limit)
        self.stopping = True
        asyncio.run_coroutine_threadsafe(self._close(), self.loop).result(limit)
        self.closed = True
        self.executor.shutdown(wait=graceful)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(limit)
        self.loop.close()
        if getattr(_local, "agent", None) is self:
            _local.agent = None
        if self in _default:
            _default.remove(self)
        return report
