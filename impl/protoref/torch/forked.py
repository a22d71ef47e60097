"""The client of :mod:`protoref.torch.forkserver`: node processes forked from one server.

:class:`ForkServer` starts the server (``python -m protoref.torch.forkserver``) on a Unix
socket in a private temporary folder (``mkdtemp``: mode 0700), removes the folder once the
server connected, and reads the server's answers in one thread. :meth:`ForkServer.spawn`
makes the child's three pipes, sends their far ends with the node's arguments and returns a
:class:`ForkedProcess`, a ``Popen``-like handle (``pid``, ``stdin``, ``stdout``, ``stderr``,
``poll``, ``wait``, ``kill``, ``send_signal``, ``returncode``), or None when the server
would not fork (more than one thread in it: the caller then uses ``Popen``, and the server
says so once on stderr).

A child has exited when the server says so (it reaps its children). If the server dies, every
handle still waiting for an exit and every request waiting for a pid fails at once with
:class:`ForkServerError`; its children die with it (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Final

from protoref.errors import ProtorefError
from protoref.torch.forkserver import MAX_PACKET

__all__ = ["SERVER_COMMAND", "ForkServer", "ForkServerError", "ForkedProcess"]

#: The server's command line, the socket's path appended.
SERVER_COMMAND: Final = (sys.executable, "-m", "protoref.torch.forkserver")
#: numpy's OpenBLAS starts a worker thread at import on a machine of two cores or more: one
#: thread each keeps the server single-threaded, hence able to fork (the nodes do no maths).
_ONE_THREAD: Final = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
#: Real seconds the server may take to connect, or to answer a request (its torch import
#: comes first: seconds on a loaded 2-core machine).
_ANSWER: Final = 120.0


class ForkServerError(ProtorefError):
    """The fork server rejected a request, answered nonsense, or is gone."""


class _Exit:
    """A child's exit, as the server reports it (or the server's end, as an error)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.code: int | None = None
        self.error: ForkServerError | None = None


class ForkedProcess:
    """A node process forked by the server: what the driver uses of ``Popen``."""

    def __init__(
        self, pid: int, exit_: _Exit, stdin: IO[str], stdout: IO[str], stderr: IO[str]
    ) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self._exit = exit_

    @property
    def returncode(self) -> int | None:
        return self._exit.code

    def poll(self) -> int | None:
        """The exit code, None while it runs; :class:`ForkServerError` if the server died."""
        if self._exit.error is not None:
            raise self._exit.error
        return self._exit.code

    def wait(self, timeout: float | None = None) -> int:
        if not self._exit.done.wait(timeout):
            raise subprocess.TimeoutExpired(f"forked node {self.pid}", timeout or 0.0)
        if self._exit.error is not None:
            raise self._exit.error
        assert self._exit.code is not None
        return self._exit.code

    def send_signal(self, sig: int) -> None:
        if self._exit.done.is_set():
            return  # reaped: the pid may be another process's by now (as Popen)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """One fork server process and the connection to it (see the module docstring)."""

    def __init__(self, command: Sequence[str] = SERVER_COMMAND) -> None:
        folder = Path(tempfile.mkdtemp(prefix="protoref-forkserver-"))
        path = folder / "socket"
        self._replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._exits: dict[int, _Exit] = {}
        self._lock = threading.Lock()
        self._next = 0
        self._dead: ForkServerError | None = None
        self._fallback_said = False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as listener:
                listener.bind(str(path))
                listener.listen(1)
                self.process = subprocess.Popen(
                    [*command, str(path)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    env={**os.environ, **_ONE_THREAD},
                )
                self._conn = self._accept(listener)
        finally:
            shutil.rmtree(folder, ignore_errors=True)  # connected or failed: nobody else
        self._reader = threading.Thread(target=self._read, name="forkserver-reader", daemon=True)
        self._reader.start()

    def _accept(self, listener: socket.socket) -> socket.socket:
        listener.settimeout(0.1)
        deadline = time.monotonic() + _ANSWER
        while time.monotonic() < deadline:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                if self.process.poll() is not None:
                    raise ForkServerError(
                        f"the fork server exited {self.process.returncode} before it connected"
                    ) from None
                continue
            conn.settimeout(None)
            return conn
        self.process.kill()
        self.process.wait()
        raise ForkServerError(f"the fork server did not connect in {_ANSWER} s")

    def spawn(self, args: dict[str, Any]) -> ForkedProcess | None:
        """Fork a node with ``args``; None: the server would not fork (use ``Popen``)."""
        pipes = [os.pipe() for _ in range(3)]  # stdin, stdout, stderr: (read, write)
        theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]
        ours = [pipes[0][1], pipes[1][0], pipes[2][0]]
        try:
            with self._lock:
                if self._dead is not None:
                    raise self._dead
                rid = self._next
                self._next += 1
                answer: queue.Queue[dict[str, Any]] = queue.Queue()
                self._replies[rid] = answer
                data = json.dumps({"id": rid, "args": args}).encode("utf-8")
                try:
                    socket.send_fds(self._conn, [data], theirs)
                except OSError as err:
                    raise ForkServerError(f"the fork server is gone: {err}") from None
        except BaseException:
            for fd in theirs + ours:
                os.close(fd)
            raise
        for fd in theirs:
            os.close(fd)
        try:
            msg = answer.get(timeout=_ANSWER)
        except queue.Empty:
            msg = {"error": f"no answer in {_ANSWER} s"}
        finally:
            with self._lock:
                self._replies.pop(rid, None)
        if "pid" not in msg:
            for fd in ours:
                os.close(fd)
            if "fallback" in msg:
                self._say_fallback(str(msg["fallback"]))
                return None
            raise ForkServerError(f"the fork server: {msg.get('error', msg)}")
        pid = int(msg["pid"])
        with self._lock:
            exit_ = self._exits[pid]
        return ForkedProcess(
            pid,
            exit_,
            os.fdopen(ours[0], "w", encoding="utf-8"),  # closed by the handle's user, as Popen's
            os.fdopen(ours[1], encoding="utf-8"),
            os.fdopen(ours[2], encoding="utf-8"),
        )

    def _say_fallback(self, why: str) -> None:
        if not self._fallback_said:
            self._fallback_said = True
            print(f"protoref: {why}; node processes start with Popen", file=sys.stderr)

    def _read(self) -> None:
        """Hand the server's answers to their waiters; at its end, fail them all."""
        why = "the fork server closed its socket"
        try:
            while True:
                data = self._conn.recv(MAX_PACKET)
                if not data:
                    break
                msg = json.loads(data.decode("utf-8"))
                if not isinstance(msg, dict):
                    raise ValueError(f"not an object: {msg!r}")
                self._take(msg)
        except (OSError, ValueError, KeyError, TypeError) as err:  # a broken or garbled answer
            why = f"the fork server's answers ended: {type(err).__name__}: {err}"
        code = self.process.poll()
        if code is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self.process.wait(1.0)
        self._fail(ForkServerError(f"{why} (server pid {self.process.pid}, exit {code})"))

    def _take(self, msg: dict[str, Any]) -> None:
        with self._lock:
            if "exit" in msg:
                exit_ = self._exits.pop(int(msg["exit"]))
                exit_.code = int(msg["code"])
                exit_.done.set()
                return
            if "pid" in msg:  # before its waiter hears it, so that no exit can come first
                self._exits[int(msg["pid"])] = _Exit()
            waiter = self._replies.get(msg.get("id", -1))
        if waiter is not None:
            waiter.put(msg)

    def _fail(self, err: ForkServerError) -> None:
        with self._lock:
            self._dead = err
            for exit_ in self._exits.values():
                exit_.error = err
                exit_.done.set()
            self._exits.clear()
            for waiter in self._replies.values():
                waiter.put({"error": str(err)})

    def close(self) -> None:
        """End the server: it kills and reaps the children left, then exits."""
        with contextlib.suppress(OSError):
            self._conn.shutdown(socket.SHUT_RDWR)
        self._reader.join(_ANSWER)
        self._conn.close()
        try:
            self.process.wait(_ANSWER)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
