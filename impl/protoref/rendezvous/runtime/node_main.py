"""One rendezvous node as an OS process: ``python -m protoref.rendezvous.runtime.node_main``.

    python -m protoref.rendezvous.runtime.node_main --store etcd://127.0.0.1:2379/jobs/ \\
        --run-id job7 --min-nodes 4 --max-nodes 4
    python -m protoref.rendezvous.runtime.node_main --store file:/tmp/rdzv --run-id job7 ...

Each ``next_rendezvous`` result is printed as one JSON line on stdout (``node``, ``rank``,
``world_size``, ``round``, ``store_prefix``, ``run_id``); ``--rounds R`` joins R rounds in a row
(each call exits the previous round first, as torch's agent does on a restart). A rendezvous
error prints ``{"error": <type>, "message": ...}`` and exits 1; bad arguments exit 2.

``--simulate-clock-offset S`` (testing aid) reads this node's clock S seconds ahead, as another
host's clock would, in a clock domain of its own; with ``--simulate-same-clock`` the skewed stamps
claim the host's domain, which is what trusting a skewed wall clock amounts to.

``--trace-dir DIR`` records the run for the conformance checker: the handler runs on a
:class:`~protoref.rendezvous.runtime.clock.TickClock` (``--tick``, the read cache one tick) and
appends raw records to ``DIR/raw-<pid>.jsonl`` under a step lock shared through ``DIR/step.lock``
(processes of one host); :func:`protoref.rendezvous.runtime.handler_trace.merge` makes them one
trace.

Stores: ``etcd://host:port[/prefix]`` (``etcds://`` for TLS, with ``--etcd-ca-cert``,
``--etcd-cert``, ``--etcd-key``; ``--etcd-user`` with the password in ``$PROTOREF_ETCD_PASSWORD``,
never on the command line where ``ps`` shows it) and ``file:DIR``. The in-memory store cannot
span processes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from protoref.rendezvous.adapters.etcd_store import DEFAULT_PREFIX, EtcdStore
from protoref.rendezvous.adapters.store import FileStore, RendezvousStore
from protoref.rendezvous.core.errors import RendezvousError
from protoref.rendezvous.core.state import RendezvousSettings
from protoref.rendezvous.runtime.clock import Clock, MonotonicClock, OffsetClock, TickClock
from protoref.rendezvous.runtime.handler import DynamicRendezvousHandler, new_node_desc
from protoref.rendezvous.runtime.handler_trace import HandlerTracer

__all__ = ["PASSWORD_ENV", "main", "store_from_url"]

PASSWORD_ENV: Final = "PROTOREF_ETCD_PASSWORD"


def store_from_url(
    url: str,
    *,
    request_timeout: float = 5.0,
    ca_cert: str | None = None,
    client_cert: str | None = None,
    client_key: str | None = None,
    username: str | None = None,
    password: str | None = None,
) -> RendezvousStore:
    """``etcd://host:port[/prefix]``, ``etcds://...`` (TLS) or ``file:DIR`` -> a store.

    Raises ``ValueError`` naming what is wrong with ``url``.
    """
    if url.startswith("file:"):
        directory = url.removeprefix("file:").removeprefix("//")
        if not directory:
            raise ValueError(f"store {url!r}: file:DIR needs a directory")
        return FileStore(Path(directory))
    parts = urlsplit(url)
    if parts.scheme not in ("etcd", "etcds"):
        raise ValueError(f"store {url!r}: expected etcd://host:port[/prefix] or file:DIR")
    if not parts.netloc:
        raise ValueError(f"store {url!r}: no host:port")
    path = parts.path.strip("/")
    prefix = f"/{path}/" if path else DEFAULT_PREFIX
    scheme = "https" if parts.scheme == "etcds" else "http"
    return EtcdStore(
        f"{scheme}://{parts.netloc}",
        prefix=prefix,
        request_timeout=request_timeout,
        ca_cert=ca_cert,
        client_cert=client_cert,
        client_key=client_key,
        username=username,
        password=password,
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m protoref.rendezvous.runtime.node_main",
        description="Join a dynamic rendezvous as one node; print each result as JSON.",
    )
    p.add_argument("--store", required=True, help="etcd://host:port[/prefix] or file:DIR")
    p.add_argument("--run-id", required=True)
    p.add_argument("--min-nodes", type=int, required=True)
    p.add_argument("--max-nodes", type=int, required=True)
    p.add_argument("--rounds", type=int, default=1, help="next_rendezvous calls in a row")
    p.add_argument("--addr", default=None, help="this node's address (default: the FQDN)")
    p.add_argument("--join-timeout", type=float, default=600.0)
    p.add_argument("--last-call-timeout", type=float, default=30.0)
    p.add_argument("--keep-alive-interval", type=float, default=5.0)
    p.add_argument("--request-timeout", type=float, default=5.0, help="etcd: per request")
    p.add_argument("--etcd-ca-cert", default=None, help="etcds: CA bundle")
    p.add_argument("--etcd-cert", default=None, help="etcds: client certificate (mutual TLS)")
    p.add_argument("--etcd-key", default=None, help="etcds: client key (mutual TLS)")
    p.add_argument("--etcd-user", default=None, help=f"etcd user (password: ${PASSWORD_ENV})")
    p.add_argument(
        "--close",
        action="store_true",
        help="close the rendezvous when done (nodes still finishing their join then see it "
        "closed: for the last node of a job)",
    )
    p.add_argument(
        "--simulate-clock-offset",
        type=float,
        default=None,
        metavar="S",
        help="testing: read this node's clock S seconds ahead, as another host's",
    )
    p.add_argument(
        "--simulate-same-clock",
        action="store_true",
        help="testing: the skewed clock claims this host's clock domain (trusted)",
    )
    p.add_argument("--trace-dir", type=Path, default=None, help="record a trace (raw records)")
    p.add_argument("--tick", type=float, default=2.0**-4, help="--trace-dir: seconds per tick")
    return p


def _settings(p: argparse.ArgumentParser, args: argparse.Namespace) -> RendezvousSettings:
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    if args.simulate_same_clock and args.simulate_clock_offset is None:
        p.error("--simulate-same-clock needs --simulate-clock-offset")
    try:
        return RendezvousSettings(
            run_id=args.run_id,
            min_nodes=args.min_nodes,
            max_nodes=args.max_nodes,
            join_timeout=args.join_timeout,
            last_call_timeout=args.last_call_timeout,
            keep_alive_interval=args.keep_alive_interval,
            # traced: the spec's read cache lasts until the next Tick (handler_trace)
            **({"cache_duration": args.tick} if args.trace_dir is not None else {}),
        )
    except ValueError as err:  # pydantic's ValidationError names the field
        p.error(str(err))


def _run(args: argparse.Namespace, store: RendezvousStore, settings: RendezvousSettings) -> None:
    node = new_node_desc(args.addr)
    tracer = None
    if args.trace_dir is not None:
        raw = args.trace_dir / f"raw-{os.getpid()}.jsonl"
        tracer = HandlerTracer(raw, args.tick, lock=args.trace_dir / "step.lock")
    clock: Clock = TickClock(args.tick) if tracer is not None else MonotonicClock()
    if args.simulate_clock_offset is not None:
        same = clock.domain if args.simulate_same_clock else None
        clock = OffsetClock(clock, args.simulate_clock_offset, domain=same)
    handler = DynamicRendezvousHandler(store, settings, node=node, clock=clock, tracer=tracer)
    try:
        _rounds(args, handler)
    finally:
        # Stop heartbeats before exiting: a heartbeat cut off by the exit could leave a write
        # in the store without its trace record. (The handler has no public stop without
        # closing the rendezvous; shutdown() closes it.)
        handler._stop_heartbeats()
        if tracer is not None:
            tracer.close()


def _rounds(args: argparse.Namespace, handler: DynamicRendezvousHandler) -> None:
    node = handler.node
    for _ in range(args.rounds):
        info = handler.next_rendezvous()
        result = {
            "node": str(node),
            "rank": info.rank,
            "world_size": info.world_size,
            "round": info.round,
            "store_prefix": info.store_prefix,
            "run_id": handler.get_run_id(),
        }
        print(json.dumps(result), flush=True)
    if args.close and not handler.shutdown():
        raise RendezvousError(f"closing rendezvous {args.run_id!r} failed")


def main(argv: Sequence[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    settings = _settings(p, args)
    if args.etcd_user is not None and PASSWORD_ENV not in os.environ:
        p.error(f"--etcd-user needs the password in ${PASSWORD_ENV}")
    try:
        store = store_from_url(
            args.store,
            request_timeout=args.request_timeout,
            ca_cert=args.etcd_ca_cert,
            client_cert=args.etcd_cert,
            client_key=args.etcd_key,
            username=args.etcd_user,
            password=None if args.etcd_user is None else os.environ.get(PASSWORD_ENV),
        )
    except ValueError as err:
        p.error(str(err))
    except RendezvousError as err:  # a missing file store directory
        return _failed(err)
    try:
        _run(args, store, settings)
    except RendezvousError as err:
        return _failed(err)
    return 0


def _failed(err: RendezvousError) -> int:
    print(json.dumps({"error": type(err).__name__, "message": str(err)}), flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
