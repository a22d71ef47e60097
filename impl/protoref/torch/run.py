"""One traced run of torch's handlers in this process: clock, timing hooks, tracer, handlers.

A run is ``with TorchRun(...) as run:``: torch's ``dynamic_rendezvous`` is put on the run's
tick clock (:mod:`protoref.torch.timing`) for the block; :meth:`TorchRun.handler` builds an
unchanged ``DynamicRendezvousHandler.from_backend(...)`` over a ``C10dRendezvousBackend`` on the
given store and attaches a :class:`~protoref.torch.observe.NodeObserver`. Each process of a
run has its own :class:`TorchRun` (same origin, tick and lock file, its own raw file);
:func:`write_trace` merges the raw files of every process into one trace with
:func:`protoref.rendezvous.runtime.handler_trace.merge`.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, Final

from pydantic import JsonValue

from protoref.rendezvous.runtime.handler_trace import HandlerTracer, merge
from protoref.rendezvous.trace.events import CLOCK_NODE
from protoref.torch.compat import require_torch, torch_version
from protoref.torch.observe import NodeObserver, StepContext
from protoref.torch.timing import DelayHook, TickTime, torch_timing
from protoref.torch.values import ROLLBACK_PERIOD, TorchSettings, desc_order
from protoref.tracing import TraceHeader, tla_set

__all__ = [
    "RUN_ID",
    "TorchRun",
    "next_local_id",
    "restart_local_ids",
    "torch_header",
    "write_trace",
]

RUN_ID: Final = "traced"
#: Real seconds a store call may block (a TCPStore ``get`` of a key nobody writes).
STORE_TIMEOUT: Final = timedelta(seconds=30)


class TorchRun:
    """The torch side of one traced run in this process (see the module docstring)."""

    def __init__(
        self,
        folder: Path,
        cfg: TorchSettings,
        *,
        seed: int,
        tick_real: float,
        origin_ns: int | None = None,
        raw_name: str = "raw.jsonl",
        lock: Path | None = None,
        hook: DelayHook | None = None,
    ) -> None:
        self.dr: ModuleType = require_torch()
        import torch.distributed as dist  # noqa: PLC0415 - after require_torch
        from torch.distributed.elastic.rendezvous import (  # noqa: PLC0415
            c10d_rendezvous_backend as c10d,
        )

        self.dist: Any = dist
        self._c10d: Any = c10d
        self.folder = folder
        self.cfg = cfg
        self.seed = seed
        self.rng = random.Random(seed)
        self.clock = TickTime(time.monotonic_ns() if origin_ns is None else origin_ns, tick_real)
        self.tracer = HandlerTracer(folder / raw_name, 1.0, lock=lock)
        self.ctx = StepContext(self.tracer, self.clock, cfg)
        self.observers: list[NodeObserver] = []
        #: the delay hook of a forced schedule (settable once the scenario's stage exists)
        self.hook = hook
        self._timing = torch_timing(self.dr, self.clock, self.rng, self._on_delay)
        self._env: str | None = None

    def _on_delay(self, node: str | None, seconds: float) -> bool:
        return self.hook is not None and self.hook(node, seconds)

    def __enter__(self) -> TorchRun:
        self._timing.__enter__()
        # The bootstrap store (TCPStore sharing on rank 0) lives outside the shared state and
        # the spec; with sharing, a non-zero rank whose first round is not 0 waits for a
        # MASTER_ADDR nobody writes (the notes, difference 7). Each call publishes its own.
        self._env = os.environ.get("TORCH_DISABLE_SHARE_RDZV_TCP_STORE")
        os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for observer in self.observers:
            observer.handler._stop_heartbeats()
        self.tracer.close()
        if self._env is None:
            os.environ.pop("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", None)
        else:
            os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = self._env
        self._timing.__exit__(kind, value, tb)

    # ------------------------------------------------------------------ stores

    def hash_store(self) -> Any:
        store = self.dist.HashStore()
        store.set_timeout(STORE_TIMEOUT)
        return store

    def tcp_server(self) -> Any:
        """A TCPStore server on loopback, on a free port (``.port``)."""
        return self.dist.TCPStore(
            "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=STORE_TIMEOUT
        )

    def tcp_client(self, port: int) -> Any:
        return self.dist.TCPStore("127.0.0.1", port, is_master=False, timeout=STORE_TIMEOUT)

    def file_store(self, path: Path) -> Any:
        store = self.dist.FileStore(str(path), -1)
        store.set_timeout(STORE_TIMEOUT)
        return store

    # ------------------------------------------------------------------ handlers

    def handler(self, store: Any, addr: str, state_store: Any = None) -> NodeObserver:
        """An unchanged torch handler over ``C10dRendezvousBackend(state_store)``, observed;
        ``store`` is the store ``next_rendezvous`` returns (and bootstraps through).

        torchrun passes one store client for both. Here a node of a TCPStore or FileStore
        run gets two clients of the same store: a client serves one request at a time, and a
        non-zero rank's bootstrap ``get`` of ``MASTER_ADDR`` blocks until rank 0 publishes it,
        so the heartbeat's sync, queued behind it, would hold the run's step lock and stop
        rank 0 from ever publishing (until the store's timeout)."""
        cfg, dr = self.cfg, self.dr
        backend = self._c10d.C10dRendezvousBackend(
            store if state_store is None else state_store, RUN_ID
        )
        timeout = dr.RendezvousTimeout(
            join=timedelta(seconds=cfg.join),
            last_call=timedelta(seconds=cfg.last_call),
            close=timedelta(seconds=cfg.close),
            heartbeat=timedelta(seconds=cfg.heartbeat),
        )
        handler = dr.DynamicRendezvousHandler.from_backend(
            RUN_ID,
            store,
            backend,
            cfg.min_nodes,
            cfg.max_nodes,
            local_addr=addr,
            timeout=timeout,
            keep_alive_interval=cfg.keep_alive_interval,
            keep_alive_max_attempt=cfg.keep_alive_max_attempt,
        )
        observer = NodeObserver(self.ctx, handler, backend)
        self.observers.append(observer)
        return observer


def next_local_id() -> int:
    """The local id torch gives this process's next handler (``addr_pid_localid``): one
    class-wide counter, ``DynamicRendezvousHandler._node_desc_generator``."""
    generator = require_torch().DynamicRendezvousHandler._node_desc_generator
    with generator._lock:
        return int(generator._local_id)


def restart_local_ids(first: int) -> None:
    """Make ``first`` the local id of this process's next handler (:func:`next_local_id`).

    A campaign restarts the counter before each run, as a fresh agent process of torchrun
    would have it: runs of one scenario then name their nodes alike, so their traces have
    the same spec constants and share one TLC run (traces batch when their constants agree,
    :mod:`tracecheck.replay.validate`). Ids need only be unique within a run's process."""
    generator = require_torch().DynamicRendezvousHandler._node_desc_generator
    with generator._lock:
        generator._local_id = first


def torch_header(
    cfg: TorchSettings, descs: Sequence[Any], *, seed: int, tick_real: float, **meta: JsonValue
) -> TraceHeader:
    """The trace header of a torch run. ``nodes`` are in torch's ``_NodeDesc`` order (the
    contract: the header lists nodes in the implementation's rank order)."""
    nodes = desc_order(descs)
    settings: dict[str, JsonValue] = {
        "MinNodes": cfg.min_nodes,
        "MaxNodes": cfg.max_nodes,
        "Closers": tla_set(list(nodes)),  # set_closed / shutdown on any handler
        "MaxCrashes": len(nodes),
        "JoinTimeout": cfg.join,
        "LastCallTimeout": cfg.last_call,
        "CloseTimeout": cfg.close,
        "HeartbeatTimeout": cfg.heartbeat,
        "KeepAliveInterval": cfg.keep_alive_interval,
        "KeepAliveMaxAttempt": cfg.keep_alive_max_attempt,
        "RollbackPeriod": ROLLBACK_PERIOD,
        "SleeperWakesEarly": False,  # SYNC sleeps 1 s = 1 tick
        "ReadOnlySyncs": True,  # is_closed() / num_nodes_waiting()
        "Variant": "PyTorch",  # 2.13 as it ships
        "CacheTicks": 2,  # torch's inclusive 1 s read cache on whole-second ticks
        "TimerFiresAnyTime": True,  # _PeriodicTimer fires every keep_alive_interval
        "CloseAnyTime": True,  # set_closed() / shutdown() whenever the agent calls them
        "tick_us": round(tick_real * 1e6),  # real microseconds per tick (= torch second)
        "implementation": f"torch {torch_version()}",
        **meta,
    }
    return TraceHeader(
        protocol="rendezvous",
        nodes=tuple(nodes),
        settings=settings,
        seed=seed,
        environment=(CLOCK_NODE,),
    )


def write_trace(raws: Sequence[Path], header: TraceHeader, out: Path) -> int:
    """Merge the raw records of a run's processes into the trace ``out``; its event count."""
    return merge([p for p in raws if p.exists()], header, out)
