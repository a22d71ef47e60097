"""Traces of the real handler (threads, processes, a real clock) that TLC can replay.

Three things make a run of :class:`~protoref.rendezvous.runtime.handler.DynamicRendezvousHandler`
replayable through DynamicRendezvous.tla:

- **Time in ticks.** The handler runs on a :class:`~protoref.rendezvous.runtime.clock.TickClock`, so
  every time-based decision is taken on a whole tick, as in the spec; settings are whole
  ticks and the read cache lasts one tick (``fresh`` = synced during the current tick).
- **One step at a time.** Every handler step (an op start, a sync with the decision after it,
  a read-only sync) runs under a step lock: a thread lock, plus an ``flock`` on a file shared
  by the processes of a run. The clock is read inside the lock, so the order in which steps
  take the lock is an order in which the store saw them and in which time went forward. Waits
  (for a store change, a deadline) happen outside it: nodes still interleave freely between
  steps.
- **One merge.** Each process appends raw records (the event, its tick, the token it saw, a
  ``time.monotonic_ns()`` stamp taken inside the lock: CLOCK_MONOTONIC is system-wide) to its
  own file; :func:`merge` sorts them by stamp, inserts a ``Tick`` for every tick boundary,
  renumbers ``seq`` and ``lamport``, and checks that the store tokens seen follow the order
  (each won write brings a new token, each read sees the latest), so a merge that does not
  match the store's history is an error rather than a trace.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from protoref.errors import ProtorefError
from protoref.rendezvous.core.codec import decode_state
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings, RendezvousState
from protoref.rendezvous.runtime.executor import NodeRunner
from protoref.rendezvous.trace.events import CLOCK_NODE, EVENT_ADAPTER, make_event
from protoref.tracing import TraceHeader, encode_line, tla_set

__all__ = ["HandlerTracer", "TraceMergeError", "handler_header", "merge"]

_STORE_SYNCS = frozenset({"SyncRead", "SyncWriteLost"})


class TraceMergeError(ProtorefError):
    """Raw handler records that do not form one trace (names the record and why)."""


def _ticks(seconds: float, tick: float, name: str) -> int:
    count = seconds / tick
    if count != math.floor(count):
        raise ValueError(f"{name} = {seconds} s is not a whole number of {tick} s ticks")
    return int(count)


def handler_header(
    settings: RendezvousSettings, nodes: Sequence[NodeDesc], tick: float
) -> TraceHeader:
    """The trace header of a handler run: the settings as spec constants, in ticks."""
    if settings.cache_duration != tick:
        raise ValueError(
            f"cache_duration = {settings.cache_duration} s must be one tick ({tick} s): the "
            "spec's read cache lasts until the next Tick"
        )
    ordered = [str(n) for n in sorted(nodes)]
    constants: dict[str, JsonValue] = {
        "Variant": "Reference",  # protoref's epilogue (DynamicRendezvous.tla, Variant)
        "MinNodes": settings.min_nodes,
        "MaxNodes": settings.max_nodes,
        "Closers": tla_set(list(ordered)),  # any handler may call set_closed / shutdown
        "MaxCrashes": 0,
        "JoinTimeout": _ticks(settings.join_timeout, tick, "join_timeout"),
        "LastCallTimeout": _ticks(settings.last_call_timeout, tick, "last_call_timeout"),
        "CloseTimeout": _ticks(settings.close_timeout, tick, "close_timeout"),
        "HeartbeatTimeout": _ticks(settings.heartbeat_timeout, tick, "heartbeat_timeout"),
        "KeepAliveInterval": _ticks(settings.keep_alive_interval, tick, "keep_alive_interval"),
        "KeepAliveMaxAttempt": settings.keep_alive_max_attempt,
        "RollbackPeriod": _ticks(settings.rollback_period, tick, "rollback_period"),
        "SleeperWakesEarly": True,  # the handler waits on store changes, not a 1-tick sleep
        "ReadOnlySyncs": True,  # is_closed() / num_nodes_waiting() may be called
        "tick_us": round(tick * 1e6),  # the tick in microseconds (settings are TLA+ values)
    }
    return TraceHeader(
        protocol="rendezvous",
        nodes=tuple(ordered),
        settings=constants,
        seed=0,
        environment=(CLOCK_NODE,),
    )


class HandlerTracer:
    """The observer and step lock of the traced handlers of one process.

    ``raw`` is this process's record file (appended to); ``lock`` the step-lock file shared by
    every process of the run (``None``: threads of this process only).
    """

    def __init__(self, raw: Path | str, tick: float, lock: Path | str | None = None) -> None:
        self.tick = tick
        self._raw = Path(raw).open("a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._thread_lock = threading.RLock()
        self._lock_path = None if lock is None else Path(lock)

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        """Hold the step lock (reentrant within a thread)."""
        with self._thread_lock:
            if self._lock_path is None:
                yield
                return
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def observe(self, event: str, runner: NodeRunner, now: float) -> None:
        """One step's record (called by the runner under the step lock)."""
        holder = runner.holder
        store_state: RendezvousState | None = None
        if event == "SyncWriteWon":
            got = holder.store.get(holder.key)  # the step lock keeps every other writer out
            assert got is not None
            store_state = decode_state(got.value, holder.key, holder.settings.run_id)
        ev = make_event(event, runner, 1, 1, now=now, store_state=store_state, tick=self.tick)
        self.record(ev.model_dump(mode="json"), round(now / self.tick), holder.token)

    def record(self, event: dict[str, Any], tick: int, token: int | str | None) -> None:
        """One step's raw record, from any observed handler (this package's, or torch's through
        :mod:`protoref.torch.observe`): the event (its ``seq`` and ``lamport`` are renumbered by
        :func:`merge`), the tick it happened at, and the store token the node holds after it
        (any value that changes with every write: a version number, a digest of the value).
        Called under the step lock."""
        record = {"stamp": time.monotonic_ns(), "tick": tick, "token": token, "event": event}
        with self._thread_lock:
            self._raw.write(json.dumps(record) + "\n")
            self._raw.flush()

    def close(self) -> None:
        self._raw.close()


def _records(raws: Sequence[Path]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in raws:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                rec = json.loads(line)
                out.append({**rec, "where": f"{path.name}:{i}"})
            except (json.JSONDecodeError, TypeError) as err:
                raise TraceMergeError(f"{path}:{i}: not a raw handler record: {err}") from err
    return sorted(out, key=lambda r: r["stamp"])


def _check_token(
    rec: dict[str, Any], latest: int | str | None, seen: set[int | str]
) -> int | str | None:
    """The store token after ``rec``; raises if it does not fit the store's history.

    A store's tokens only promise to change with every write (the file store counts 1, 2, ...;
    etcd's are global revisions; torch's C10d backend's token is the stored value, recorded as a
    digest), so a won write must bring a token not seen before, or be the write of exactly the
    value the store already holds (a lost compare-and-set that set_state reports as success,
    the spec's ``store = local[n]``: nothing changed).
    """
    name, token = rec["event"]["event"], rec["token"]
    if name == "SyncWriteWon":
        if token is None or (token in seen and token != latest):
            raise TraceMergeError(
                f"{rec['where']}: a won write of token {token}, which is not a new version"
            )
        new: int | str = token
        seen.add(new)
        return new
    if name in _STORE_SYNCS and token != latest:
        raise TraceMergeError(f"{rec['where']}: {name} saw token {token}, the store held {latest}")
    return latest


def merge(raws: Sequence[Path | str], header: TraceHeader, out: Path | str) -> int:
    """Merge raw records into one trace file at ``out``; returns its number of events."""
    records = _records([Path(p) for p in raws])
    lines = [encode_line(header)]
    seqs: dict[str, int] = {}
    lamport = 0
    latest: int | str | None = None
    seen: set[int | str] = set()
    current = records[0]["tick"] if records else 0

    def emit(event: dict[str, Any]) -> None:
        nonlocal lamport
        node = event["node"]
        seqs[node] = seqs.get(node, 0) + 1
        lamport += 1
        parsed = EVENT_ADAPTER.validate_python({**event, "seq": seqs[node], "lamport": lamport})
        lines.append(encode_line(parsed))

    for rec in records:
        if rec["tick"] < current:
            raise TraceMergeError(f"{rec['where']}: tick {rec['tick']} after tick {current}")
        while current < rec["tick"]:
            current += 1
            emit({"kind": "event", "event": "Tick", "node": CLOCK_NODE, "args": {}, "post": {}})
        latest = _check_token(rec, latest, seen)
        emit(rec["event"])
    Path(out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lamport
