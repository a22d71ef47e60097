"""Benchmark: time until the last of N nodes returns from ``next_rendezvous``, ours vs torch 2.13.

Two tables. Threads: every node a thread of this process, all released by one barrier; ours on
the in-memory store and on the file store, torch's ``DynamicRendezvousHandler`` on the C10d
backend over a ``TCPStore`` on loopback (each node its own client). Processes: every node its own
OS process (:mod:`benches.rendezvous_procs`); ours on the file store and on a throwaway local
etcd, torch on a TCPStore. min = max = N, keep-alive 1 s, other timeouts at torch's defaults.
torch and etcd are optional: without them their columns say why.
``python -m benches.rendezvous [--sizes 2 4 ...] [--out FILE]`` prints the tables and,
with ``--out``, writes them into FILE between ``<!-- bench:rendezvous:start -->``
markers (replacing an earlier run's section, leaving the rest of the file alone).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any, Final

from benches.rendezvous_procs import RunTimeoutError, measure_processes
from protoref.rendezvous.adapters.store import FileStore, InMemoryStore, RendezvousStore
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings
from protoref.rendezvous.runtime.handler import DynamicRendezvousHandler

__all__ = ["main", "measure_ours", "measure_torch"]

START: Final = "<!-- bench:rendezvous:start -->"
END: Final = "<!-- bench:rendezvous:end -->"
KEEP_ALIVE: Final = 1.0

#: A node: made before the barrier, ``run()`` after it; ``stop()`` afterwards.
Node = tuple[Callable[[], object], Callable[[], object]]


def _race(nodes: Sequence[Node]) -> float:
    """Release every node at once; seconds until the last one returned."""
    barrier = threading.Barrier(len(nodes) + 1)
    ends: list[float] = []
    errors: list[BaseException] = []

    def go(run: Callable[[], object]) -> None:
        barrier.wait()
        try:
            run()
        except BaseException as err:  # reported after the race
            errors.append(err)
        ends.append(time.perf_counter())

    threads = [threading.Thread(target=go, args=(run,), daemon=True) for run, _ in nodes]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join(120)
    for _, stop in nodes:
        stop()
    if errors or len(ends) != len(nodes):
        raise RuntimeError(f"{len(errors)} nodes failed: {errors[:1]!r}")
    return max(ends) - start


def measure_ours(n: int, make_store: Callable[[], RendezvousStore]) -> float:
    store = make_store()
    cfg = RendezvousSettings(
        run_id=f"bench{n}", min_nodes=n, max_nodes=n, keep_alive_interval=KEEP_ALIVE
    )
    handlers = [
        DynamicRendezvousHandler(store, cfg, node=NodeDesc("127.0.0.1", os.getpid(), i))
        for i in range(n)
    ]
    return _race([(h.next_rendezvous, h._heartbeats.close) for h in handlers])


def torch_missing() -> str | None:
    """Why torch cannot be benchmarked, or None."""
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return "torch is not importable (pip install torch==2.13.0 to compare)"
    version = str(torch.__version__)
    return None if version.startswith("2.13") else f"torch {version} is not 2.13"


def measure_torch(n: int) -> float:
    dist: Any = importlib.import_module("torch.distributed")
    dyn: Any = importlib.import_module("torch.distributed.elastic.rendezvous.dynamic_rendezvous")
    c10d: Any = importlib.import_module(
        "torch.distributed.elastic.rendezvous.c10d_rendezvous_backend"
    )
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    port, run_id = server.port, f"bench{n}"
    nodes: list[Node] = []
    for _ in range(n):
        client = dist.TCPStore("127.0.0.1", port, is_master=False)
        handler = dyn.DynamicRendezvousHandler.from_backend(
            run_id=run_id,
            store=client,
            backend=c10d.C10dRendezvousBackend(client, run_id),
            min_nodes=n,
            max_nodes=n,
            local_addr="127.0.0.1",
            timeout=dyn.RendezvousTimeout(join=timedelta(seconds=600)),
            keep_alive_interval=int(KEEP_ALIVE),
        )
        nodes.append((handler.next_rendezvous, handler._stop_heartbeats))
    took = _race(nodes)
    del server
    return took


def _median(fn: Callable[[], float], repeats: int) -> float:
    return statistics.median(fn() for _ in range(repeats))


def _file_store(parent: str) -> FileStore:
    return FileStore(tempfile.mkdtemp(dir=parent))


def run(sizes: Sequence[int], repeats: int) -> list[str]:
    """The markdown table (one row per N) and a note; prints rows as they come."""
    missing = torch_missing()
    rows = [
        "| N | torch 2.13, TCPStore (s) | ours, in-memory (s) | ours, file store (s) "
        "| torch / ours (in-memory) | torch / ours (file) |",
        "|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            mem = _median(partial(measure_ours, n, InMemoryStore), repeats)
            fresh_dir = partial(_file_store, tmp)
            fil = _median(partial(measure_ours, n, fresh_dir), repeats)
            if missing is None:
                t = measure_torch(n)
                row = f"| {n} | {t:.3f} | {mem:.4f} | {fil:.4f} | {t / mem:.0f}x | {t / fil:.0f}x |"
            else:
                row = f"| {n} | skipped | {mem:.4f} | {fil:.4f} | - | - |"
            print(row, flush=True)
            rows.append(row)
    if missing is not None:
        rows.append(f"\ntorch skipped: {missing}.")
    return rows


def _etcd_missing() -> str | None:
    try:
        from protoref.rendezvous.adapters.etcd_server import find_etcd  # noqa: PLC0415 - optional

        find_etcd()
    except Exception as err:
        return str(err)
    return None


def _cell(took: float | None) -> str:
    return "-" if took is None else f"{took:.3f}"


def _ratio(torch_s: float | None, ours: float | None) -> str:
    return "-" if torch_s is None or ours is None else f"{torch_s / ours:.0f}x"


def _file_url(parent: str) -> str:
    return f"file:{tempfile.mkdtemp(dir=parent)}"


def _etcd_url(server: str) -> str:
    return f"{server}/bench{time.monotonic_ns()}"  # a fresh key prefix per run


def _ours_in_processes(n: int, store_url: Callable[[], str]) -> float:
    return measure_processes("ours", n, store_url(), f"p{n}")


def run_processes(sizes: Sequence[int], repeats: int, args_timeout: float = 300.0) -> list[str]:
    """The multi-process table: each node its own OS process (see :mod:`.procbench`)."""
    missing, etcd_missing = torch_missing(), _etcd_missing()
    rows = [
        "| N | torch 2.13, TCPStore (s) | ours, file store (s) | ours, etcd (s) "
        "| torch / ours (file) | torch / ours (etcd) |",
        "|---|---|---|---|---|---|",
    ]
    failures: list[str] = []
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        etcd_url: str | None = None
        if etcd_missing is None:
            from protoref.rendezvous.adapters.etcd_server import EtcdServer  # noqa: PLC0415 - optional

            etcd_url = stack.enter_context(EtcdServer()).url
        server: Any = None
        if missing is None:
            dist: Any = importlib.import_module("torch.distributed")
            server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
        for n in sizes:
            fil = _median(partial(_ours_in_processes, n, partial(_file_url, tmp)), repeats)
            etc: float | None = None
            if etcd_url is not None:
                try:
                    etc = _median(
                        partial(_ours_in_processes, n, partial(_etcd_url, etcd_url)), repeats
                    )
                except RuntimeError as err:  # reported under the table, the run goes on
                    failures.append(f"etcd, N = {n}: {err}")
            t: float | None = None
            if server is not None:
                try:
                    t = measure_processes(
                        "torch-tcp", n, f"127.0.0.1:{server.port}", f"p{n}", args_timeout
                    )
                except RunTimeoutError as err:  # torch stalls under load: say so, go on
                    failures.append(f"torch, N = {n}: {err}")
            row = (
                f"| {n} | {_cell(t)} | {fil:.3f} | {_cell(etc)} "
                f"| {_ratio(t, fil)} | {_ratio(t, etc)} |"
            )
            print(row, flush=True)
            rows.append(row)
    if missing is not None:
        rows.append(f"\ntorch skipped: {missing}.")
    if etcd_missing is not None:
        rows.append(f"\netcd skipped: {etcd_missing}.")
    rows += [f"\nfailed: {f}" for f in failures]
    return rows


def write_section(
    path: Path,
    threads: Sequence[str],
    processes: Sequence[str],
    args: argparse.Namespace,
) -> None:
    """Replace (or append) this benchmark's section of ``path``."""
    procs = " ".join(map(str, args.process_sizes))
    body = "\n".join(
        [
            START,
            "## Rendezvous: time to complete a round",
            "",
            "Time from releasing N nodes until the last one returns from `next_rendezvous`;",
            "min = max = N, keep-alive 1 s, torch's default timeouts. Generated by",
            "`python -m benches.rendezvous --out docs/performance.md` "
            f"(thread sizes {' '.join(map(str, args.sizes))}, process sizes {procs}) on "
            f"{os.cpu_count()} cores shared with other jobs (load average "
            f"{os.getloadavg()[0]:.0f} when written).",
            "",
            "### Threads of one process",
            "",
            f"One barrier releases every node. Ours: median of {args.repeats} runs; torch: one",
            "run on a TCPStore on loopback (each node its own client).",
            "",
            *threads,
            "",
            "### One OS process per node",
            "",
            "Each node is a process (`benches.rendezvous_procs`) that imports, builds its",
            "handler and blocks on stdin; the parent stamps `time.monotonic()` and writes `go`",
            "to every worker; each stamps its return (CLOCK_MONOTONIC is system-wide, so stamps",
            "are comparable). Ranks are checked to be a permutation of 0..N-1. Ours: median of",
            f"{args.process_repeats} runs on the file store and on a throwaway local etcd;",
            "torch: one run on a TCPStore served by the parent.",
            "",
            *processes,
            END,
        ]
    )
    text = path.read_text(encoding="utf-8") if path.exists() else "# Performance\n"
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + body + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + body + "\n"
    path.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benches.rendezvous", description=__doc__)
    p.add_argument("--sizes", type=int, nargs="*", default=[2, 4, 8, 16, 32, 64])
    p.add_argument("--repeats", type=int, default=5, help="runs of ours per size (median)")
    p.add_argument(
        "--process-sizes",
        type=int,
        nargs="*",
        default=[2, 4, 8, 16, 32],
        help="N for the one-process-per-node table (empty: skip it)",
    )
    p.add_argument("--process-repeats", type=int, default=3, help="runs of ours per size")
    p.add_argument(
        "--torch-timeout", type=float, default=300.0, help="seconds before a torch run is killed"
    )
    p.add_argument("--out", type=Path, default=None, help="write the section into this file")
    args = p.parse_args(argv)
    missing = torch_missing()
    if missing:
        print(f"note: {missing}; only our handler is measured", flush=True)
    threads = run(args.sizes, args.repeats)
    processes = run_processes(args.process_sizes, args.process_repeats, args.torch_timeout)
    if args.out is not None:
        failed = [r.strip() for r in processes if r.strip().startswith("failed:")]
        if failed:  # a failed run is never written into the docs
            print(f"not written to {args.out}: {'; '.join(failed)}", flush=True)
            return 1
        write_section(args.out, threads, processes, args)
        print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
