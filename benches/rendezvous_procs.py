"""Benchmark with N OS processes: time until the last of N nodes returns from ``next_rendezvous``.

Each node is its own Python process (``python -m benches.rendezvous_procs worker ...``). A
worker imports everything, builds its handler, prints ``ready`` and blocks on stdin; once every
worker is ready the parent takes ``t0 = time.monotonic()`` and writes ``go`` to each stdin. Each
worker stamps ``time.monotonic()`` when ``next_rendezvous`` returns and prints it as JSON with its
rank. On Linux CLOCK_MONOTONIC is system-wide, so the stamps of processes of one host are
comparable with ``t0``. Ranks are checked (a permutation of 0..N-1), so a run that did not
rendezvous cannot report a time.

Handlers: ours (``--store ours``) on any store ``node_main.store_from_url`` knows (``file:DIR``,
``etcd://host:port/prefix``); torch 2.13's ``DynamicRendezvousHandler`` (``--store torch-tcp``)
on the C10d backend over a ``TCPStore`` whose server lives in the parent (``host:port``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import IO, Any, Final

__all__ = ["STORES", "RunTimeoutError", "measure_processes"]

KEEP_ALIVE: Final = 1.0
_TIMEOUT: Final = 300.0


def _our_handler(args: argparse.Namespace, store: Any) -> Callable[[], tuple[int, int]]:
    from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings  # noqa: PLC0415
    from protoref.rendezvous.runtime.handler import DynamicRendezvousHandler  # noqa: PLC0415 - in worker

    cfg = RendezvousSettings(
        run_id=args.run_id, min_nodes=args.n, max_nodes=args.n, keep_alive_interval=KEEP_ALIVE
    )
    h = DynamicRendezvousHandler(store, cfg, node=NodeDesc("127.0.0.1", os.getpid(), 0))

    def run() -> tuple[int, int]:
        info = h.next_rendezvous()
        return info.rank, info.world_size

    return run


def _ours(args: argparse.Namespace) -> Callable[[], tuple[int, int]]:
    from protoref.rendezvous.runtime.node_main import store_from_url  # noqa: PLC0415 - in worker

    return _our_handler(args, store_from_url(args.address))


def _torch(args: argparse.Namespace) -> Callable[[], tuple[int, int]]:
    dist: Any = importlib.import_module("torch.distributed")
    dyn: Any = importlib.import_module("torch.distributed.elastic.rendezvous.dynamic_rendezvous")
    c10d: Any = importlib.import_module(
        "torch.distributed.elastic.rendezvous.c10d_rendezvous_backend"
    )
    host, port = args.address.rsplit(":", 1)
    client = dist.TCPStore(host, int(port), is_master=False)
    handler = dyn.DynamicRendezvousHandler.from_backend(
        run_id=args.run_id,
        store=client,
        backend=c10d.C10dRendezvousBackend(client, args.run_id),
        min_nodes=args.n,
        max_nodes=args.n,
        local_addr="127.0.0.1",
        timeout=dyn.RendezvousTimeout(join=timedelta(seconds=600)),
        keep_alive_interval=int(KEEP_ALIVE),
    )

    def run() -> tuple[int, int]:
        info = handler.next_rendezvous()
        return int(info.rank), int(info.world_size)

    return run


#: ``--store`` name -> builds one worker's ``next_rendezvous`` (in the worker process).
STORES: Final[dict[str, Callable[[argparse.Namespace], Callable[[], tuple[int, int]]]]] = {
    "ours": _ours,
    "torch-tcp": _torch,
}


def _worker(args: argparse.Namespace) -> int:
    run = STORES[args.store](args)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 2
    rank, world = run()
    end = time.monotonic()
    print(json.dumps({"end": end, "rank": rank, "world": world}), flush=True)
    # Stay up until every node returned: torch's rank 0 serves the bootstrap TCPStore the
    # others still connect to inside next_rendezvous.
    sys.stdin.readline()
    os._exit(0)  # heartbeat threads (ours, torch's) need no orderly shutdown here


def _spawn(store: str, n: int, address: str, run_id: str, err: IO[bytes]) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "benches.rendezvous_procs", "worker", "--store", store]
    cmd += ["--n", str(n), "--address", address, "--run-id", run_id]
    # benches is a top-level folder, not an installed package: the worker finds it from the
    # folder that holds it, whatever the caller's working directory.
    root = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": path}
    pipe = subprocess.PIPE
    return subprocess.Popen(cmd, stdin=pipe, stdout=pipe, stderr=err, text=True, env=env)


def _tail(err: IO[bytes]) -> str:
    """The last line a failed worker wrote to stderr (its exception)."""
    err.seek(0)
    lines = err.read().decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else "nothing on stderr"


def _result(proc: subprocess.Popen[str], store: str, err: IO[bytes]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the worker's one JSON line (blocks until it returned)
    if not line:
        proc.wait(timeout=_TIMEOUT)
        raise RuntimeError(f"{store} worker {proc.pid} ended without a result: {_tail(err)}")
    result: dict[str, Any] = json.loads(line)
    return result


def _kill_all(procs: Sequence[subprocess.Popen[str]]) -> None:
    for p in procs:
        p.kill()


class RunTimeoutError(RuntimeError):
    """A run did not finish in time (its workers were killed)."""


def measure_processes(
    store: str, n: int, address: str, run_id: str, timeout: float = _TIMEOUT
) -> float:
    """Seconds from ``go`` until the last of ``n`` worker processes returned.

    Workers still running ``timeout`` seconds after ``go`` are killed and
    :class:`RunTimeoutError` is raised.
    """
    errs = [tempfile.TemporaryFile() for _ in range(n)]  # noqa: SIM115 - closed below
    procs = [_spawn(store, n, address, run_id, err) for err in errs]
    try:
        for p, err in zip(procs, errs, strict=True):
            assert p.stdout is not None
            line = p.stdout.readline().strip()
            if line != "ready":
                p.wait(timeout=_TIMEOUT)
                raise RuntimeError(f"{store} worker {p.pid} did not start: {_tail(err)}")
        t0 = time.monotonic()
        killer = threading.Timer(timeout, _kill_all, args=(procs,))
        killer.start()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        try:
            results = [_result(p, store, err) for p, err in zip(procs, errs, strict=True)]
        except RuntimeError as failed:
            if time.monotonic() - t0 >= timeout:
                msg = f"{store}: N = {n} not done after {timeout:.0f} s"
                raise RunTimeoutError(msg) from failed
            raise
        finally:
            killer.cancel()
        for p in procs:
            p.communicate("bye\n", timeout=_TIMEOUT)
    finally:
        for p, err in zip(procs, errs, strict=True):
            if p.poll() is None:
                p.kill()
            p.communicate()  # reaps it and closes its pipes
            err.close()
    ranks = sorted(r["rank"] for r in results)
    if ranks != list(range(n)) or any(r["world"] != n for r in results):
        raise RuntimeError(f"{store}: ranks {ranks} are not a rendezvous of {n} nodes")
    return max(float(r["end"]) for r in results) - t0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benches.rendezvous_procs")
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="one node (started by the benchmark)")
    w.add_argument("--store", choices=sorted(STORES), required=True)
    w.add_argument("--n", type=int, required=True)
    w.add_argument(
        "--address",
        required=True,
        help="ours: a store URL (file:DIR, etcd://...); torch-tcp: host:port",
    )
    w.add_argument("--run-id", required=True)
    args = p.parse_args(argv)
    return _worker(args)


if __name__ == "__main__":
    raise SystemExit(main())
