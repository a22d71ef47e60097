"""A fork server for node processes: ``python -m protoref.torch.forkserver <socket>``.

A node process spends most of its CPU importing torch (about 1.8 CPU-s each). The server
imports ``torch.distributed`` and :mod:`protoref.torch.node` once and forks a node per
request: the children share the imported modules' pages and start at once.

It connects to the client's ``SOCK_SEQPACKET`` Unix socket (one packet per message, so each
request's descriptors arrive with its own JSON). A request is one JSON object
``{"id": <int>, "args": {...}}`` with three descriptors attached (``SCM_RIGHTS``): the child's
stdin, stdout and stderr; ``args`` is the node's JSON argument. The answers, one JSON object
a packet:

- ``{"id": n, "pid": p}``: the child runs; later ``{"exit": p, "code": c}``, ``c`` as
  ``Popen.returncode`` (``-9`` for a SIGKILL), once the server reaped it;
- ``{"id": n, "fallback": why}``: the server does not fork (it has more than one thread, and
  fork copies only the calling one: a lock held by another would stay held in the child); the
  client starts that node with ``Popen``;
- ``{"id": n | null, "error": why}``: a malformed request, nothing started.

Nothing here is unpickled: requests are JSON. The server is single-threaded (the guard
above), so it watches its children with pidfds in the same ``select`` as the socket. At the
socket's end (the client closed it, or died) it SIGKILLs the children still running, reaps
them and exits; a child dies with the server too (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import selectors
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, NoReturn

__all__ = [
    "MAX_PACKET",
    "RequestError",
    "Spawn",
    "main",
    "parse_request",
    "serve",
    "threads_besides_main",
]

#: The largest message either side sends (a node's arguments are a few kilobytes).
MAX_PACKET: Final = 1 << 20
#: The descriptors a request carries: the child's stdin, stdout, stderr.
_FDS: Final = 3
_PR_SET_PDEATHSIG: Final = 1

#: What a child runs: the node's arguments -> its exit code.
Spawn = Callable[[dict[str, Any]], int]


class RequestError(ValueError):
    """A malformed request."""


def parse_request(data: bytes, fds: list[int], flags: int) -> tuple[int, dict[str, Any]]:
    """A request's id and node arguments, or :class:`RequestError` saying what is wrong."""
    if flags & socket.MSG_TRUNC:
        raise RequestError(f"request longer than {MAX_PACKET} bytes")
    if flags & socket.MSG_CTRUNC or len(fds) != _FDS:
        raise RequestError(f"a request carries {_FDS} descriptors (stdin, stdout, stderr)")
    try:
        msg = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RequestError(f"request is not JSON: {err}") from None
    if not isinstance(msg, dict) or set(msg) != {"id", "args"}:
        raise RequestError('a request is {"id": <int>, "args": {...}}')
    rid, args = msg["id"], msg["args"]
    if not isinstance(rid, int) or isinstance(rid, bool) or not isinstance(args, dict):
        raise RequestError('a request is {"id": <int>, "args": {...}}')
    return rid, args


def threads_besides_main() -> str | None:
    """Why this process may not fork (other threads, Python's or native), or None."""
    python = threading.active_count()
    native = sum(1 for _ in Path("/proc/self/task").iterdir())
    if python == 1 and native == 1:
        return None
    return f"the fork server has {python} Python and {native} OS threads"


def _send(conn: socket.socket, msg: dict[str, Any]) -> None:
    conn.send(json.dumps(msg).encode("utf-8"))


def _request_id(data: bytes) -> int | None:
    """The id of a malformed request, when it can be read (the client's waiter gets the
    error)."""
    try:
        msg = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    rid = msg.get("id") if isinstance(msg, dict) else None
    return rid if isinstance(rid, int) and not isinstance(rid, bool) else None


def _child(
    server: int, fds: list[int], args: dict[str, Any], inherited: list[int], spawn: Spawn
) -> NoReturn:
    """In the forked child of ``server``: the request's descriptors become 0, 1, 2; run the
    node; exit."""
    code = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != server:  # the server died before the call above took effect
            os._exit(1)
        # as Popen's restore_signals: the node sees SIGPIPE and SIGXFSZ as a fresh process
        for name in ("SIGPIPE", "SIGXFSZ"):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        for fd in inherited:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        code = spawn(args)
    except SystemExit as end:
        code = end.code if isinstance(end.code, int) else 1
    except BaseException:  # the child's last act: report and exit
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)  # no interpreter teardown (torch's store threads; the server's state)


def serve(conn: socket.socket, spawn: Spawn) -> None:
    """Answer ``conn``'s requests until it ends, then kill and reap the children left."""
    sel = selectors.DefaultSelector()
    sel.register(conn, selectors.EVENT_READ, None)
    children: dict[int, int] = {}  # pidfd -> pid
    try:
        while True:
            for key, _ in sel.select():
                if key.data is not None:
                    pid = int(key.data)
                    _, status = os.waitpid(pid, 0)
                    sel.unregister(key.fd)
                    os.close(int(key.fd))
                    del children[int(key.fd)]
                    _send(conn, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})
                    continue
                data, fds, flags, _ = socket.recv_fds(conn, MAX_PACKET, _FDS + 1)
                if not data and not fds:
                    return  # the client closed the socket (or died)
                try:
                    rid, args = parse_request(data, fds, flags)
                except RequestError as err:
                    for fd in fds:
                        os.close(fd)
                    _send(conn, {"id": _request_id(data), "error": str(err)})
                    continue
                why = threads_besides_main()
                if why is not None:
                    for fd in fds:
                        os.close(fd)
                    _send(conn, {"id": rid, "fallback": why})
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                server = os.getpid()
                pid = os.fork()
                if pid == 0:
                    # the server's own descriptors: the child must not hold them open
                    epoll = getattr(sel, "fileno", None)
                    mine = [conn.fileno(), *children, *([epoll()] if epoll else [])]
                    _child(server, fds, args, mine, spawn)
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                children[pidfd] = pid
                sel.register(pidfd, selectors.EVENT_READ, pid)
                _send(conn, {"id": rid, "pid": pid})
    except ConnectionError:
        return  # the client is gone: nobody to answer
    finally:
        for pidfd, pid in children.items():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(pidfd)
        sel.close()


def _node_main(args: dict[str, Any]) -> int:
    node: Any = importlib.import_module("protoref.torch.node")
    return int(node.main([json.dumps(args)]))


def serve_at(path: str, spawn: Spawn, *, before: Callable[[], object] | None = None) -> None:
    """Connect to the client's socket at ``path``, call ``before`` (the imports the children
    share), then :func:`serve`."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    conn.connect(path)  # at once: the client removes the socket's folder when connected
    with conn:
        if before is not None:
            before()
        serve(conn, spawn)


def _imports() -> None:
    importlib.import_module("torch.distributed")
    importlib.import_module("protoref.torch.node")


def main(argv: list[str] | None = None) -> int:
    (path,) = argv if argv is not None else sys.argv[1:]
    serve_at(path, _node_main, before=_imports)
    return 0


if __name__ == "__main__":
    sys.exit(main())
