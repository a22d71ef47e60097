"""Helpers for the runtime tests: N workers in this process, each on its own loop thread."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from protoref import rpc
from protoref.rpc.agent import Agent, ShutdownReport
from protoref.rpc.options import free_port
from tracecheck.protocols.rref import RREF
from tracecheck.replay.validate import validate_traces
from tracecheck.replay.verdicts import ValidationReport
from tracecheck.traces.load import Trace, load_trace, merge_traces

SPEC_ROOT = Path(__file__).resolve().parent.parent.parent / "spec"
SECRET = b"test-secret"
TIMEOUT = 60.0


def start_world(
    n: int, trace_dir: Path | None = None, *, autograd_dir: Path | None = None, **options: Any
) -> list[Agent]:
    """``n`` workers w0, w1, ...; each writes its RRef trace ``w<rank>.ndjson`` to ``trace_dir``
    and its autograd trace ``ag<rank>.ndjson`` to ``autograd_dir`` (``None``: none)."""
    port = free_port()
    base = rpc.RpcOptions(secret=SECRET, master_port=port, connect_timeout=30.0, **options)
    agents: list[Agent | BaseException | None] = [None] * n

    def start(rank: int) -> None:
        trace = None if trace_dir is None else trace_dir / f"w{rank}.ndjson"
        autograd = None if autograd_dir is None else autograd_dir / f"ag{rank}.ndjson"
        opts = replace(base, trace=trace, autograd_trace=autograd)
        try:
            agents[rank] = rpc.init_rpc(f"w{rank}", rank=rank, world_size=n, options=opts)
        except BaseException as err:
            agents[rank] = err

    threads = [threading.Thread(target=start, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    started = [a for a in agents if isinstance(a, Agent)]
    if len(started) != n:
        stop_world(started, graceful=False)
        raise RuntimeError(f"world did not start: {agents}")
    return started


def stop_world(agents: list[Agent], graceful: bool = True) -> list[ShutdownReport]:
    """Shut every worker down at once (graceful shutdown is a barrier across all of them)."""
    reports: list[ShutdownReport | BaseException | None] = [None] * len(agents)

    def stop(i: int) -> None:
        try:
            reports[i] = agents[i].shutdown(graceful)
        except BaseException as err:
            reports[i] = err

    threads = [threading.Thread(target=stop, args=(i,)) for i in range(len(agents))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT + 30)
    done = [r for r in reports if isinstance(r, ShutdownReport)]
    if len(done) != len(agents):
        raise RuntimeError(f"shutdown failed: {reports}")
    return done


@contextlib.contextmanager
def world(n: int = 3, trace_dir: Path | None = None, **options: Any) -> Iterator[list[Agent]]:
    agents = start_world(n, trace_dir, **options)
    try:
        yield agents
    finally:
        if not all(a.closed for a in agents):
            stop_world([a for a in agents if not a.closed], graceful=False)


def eventually(pred: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Wait for a condition another thread establishes (no assertion on how long it took)."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.005)


def merged_trace(folder: Path, n: int) -> Trace:
    """The traces workers ``w0``..``w{n-1}`` of a world wrote into ``folder``, merged into one
    causal order by their clocks."""
    return merge_traces([load_trace(folder / f"w{i}.ndjson") for i in range(n)])


def validate_rref(trace: Trace) -> ValidationReport:
    """TLC's verdict on an RRef trace against spec/rref."""
    return validate_traces([trace], RREF, SPEC_ROOT)
