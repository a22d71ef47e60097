"""The node fork server (protoref.torch.forkserver) and its client (protoref.torch.forked).

The servers here run a small test function instead of a torch node (no torch import: each
starts at once): it prints its parent's pid and what it is told to, reads a line when asked,
sleeps, and returns the exit code it is given. The campaign tests run real torch nodes
through the server (the session campaign's process scenarios)."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from protoref.torch import processes
from protoref.torch.forked import ForkedProcess, ForkServer, ForkServerError
from protoref.torch.forkserver import MAX_PACKET, RequestError, parse_request

#: argv[1]: "plain", "thread" (a second thread: the server must not fork), or a file to write
#: the socket folder's mode to; the socket's path comes last
_SERVER = """
import json, os, stat, sys, threading, time
from protoref.torch.forkserver import serve_at

def run(args):
    print("parent", os.getppid(), flush=True)
    if args.get("say"):
        print(args["say"], flush=True)
    if args.get("read"):
        print("read", sys.stdin.readline().strip(), flush=True)
    time.sleep(args.get("sleep", 0))
    return args.get("code", 0)

mode, path = sys.argv[1], sys.argv[-1]
if mode == "thread":
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
elif mode != "plain":
    with open(mode, "w") as out:
        out.write(oct(stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode)))
serve_at(path, run)
"""


def _command(mode: str = "plain") -> list[str]:
    return [sys.executable, "-c", _SERVER, mode]


@pytest.fixture
def server() -> Iterator[ForkServer]:
    with ForkServer(_command()) as fs:
        yield fs


def _spawn(server: ForkServer, **args: object) -> ForkedProcess:
    child = server.spawn(dict(args))
    assert child is not None
    return child


def _ended(child: ForkedProcess) -> bool:
    """The child's stdout ends, once its "parent" line is read (within a minute)."""
    child.stdout.readline()
    ready, _, _ = select.select([child.stdout], [], [], 60)
    return bool(ready) and child.stdout.read() == ""


def _close(child: ForkedProcess) -> None:
    for pipe in (child.stdin, child.stdout, child.stderr):
        pipe.close()


def test_a_forked_node_runs_and_exits_with_its_status(server: ForkServer) -> None:
    child = _spawn(server, say="hello", read=True, code=7)
    assert child.stdout.readline().split() == ["parent", str(server.process.pid)]  # forked
    assert child.stdout.readline() == "hello\n"
    child.stdin.write("go\n")
    child.stdin.flush()
    assert child.stdout.readline() == "read go\n"
    assert child.wait(30) == 7
    assert (child.poll(), child.returncode) == (7, 7)
    assert child.stdout.read() == ""  # its output ended with it
    _close(child)
    second = _spawn(server)  # the server goes on
    assert second.wait(30) == 0
    _close(second)


def test_a_sigkill_is_reported_as_minus_9(server: ForkServer) -> None:
    child = _spawn(server, sleep=600)
    assert child.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(0.01)
    child.kill()
    assert child.wait(30) == -signal.SIGKILL
    assert child.returncode == -signal.SIGKILL
    child.kill()  # reaped: a no-op, not a signal to whoever has the pid now
    _close(child)


def test_parse_request_rejects_malformed_requests() -> None:
    good = json.dumps({"id": 1, "args": {"a": 1}}).encode()
    assert parse_request(good, [10, 11, 12], 0) == (1, {"a": 1})
    bad = [
        (b"not json", [10, 11, 12], 0, "not JSON"),
        (b"\xff", [10, 11, 12], 0, "not JSON"),
        (b"[1]", [10, 11, 12], 0, "a request is"),
        (b'{"id": 1}', [10, 11, 12], 0, "a request is"),
        (b'{"id": true, "args": {}}', [10, 11, 12], 0, "a request is"),
        (b'{"id": 1, "args": []}', [10, 11, 12], 0, "a request is"),
        (b'{"id": 1, "args": {}, "x": 0}', [10, 11, 12], 0, "a request is"),
        (good, [10], 0, "3 descriptors"),
        (good, [10, 11, 12], socket.MSG_CTRUNC, "3 descriptors"),
        (good, [10, 11, 12], socket.MSG_TRUNC, "longer than"),
    ]
    for data, fds, flags, why in bad:
        with pytest.raises(RequestError, match=why):
            parse_request(data, fds, flags)


def test_the_server_answers_a_malformed_request_with_an_error_and_goes_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as listener:
        listener.bind(str(path))
        listener.listen(1)
        proc = subprocess.Popen([*_command(), str(path)])
        conn, _ = listener.accept()
    read, write = os.pipe()
    try:
        with conn:
            for data, fds, rid in (
                (b"{", [write] * 3, None),
                (b'{"id": 4, "args": {}}', [write], 4),
                (b'{"id": 5, "args": 1}', [write] * 3, 5),
            ):
                socket.send_fds(conn, [data], fds)
                answer = json.loads(conn.recv(MAX_PACKET))
                assert answer["id"] == rid
                assert answer["error"]
            os.close(write)
            # the server closed every descriptor it was sent: the pipe's last writer is gone
            assert os.read(read, 1) == b""
            r, w = os.pipe()
            socket.send_fds(conn, [b'{"id": 6, "args": {"code": 3}}'], [r, w, w])
            os.close(r)
            os.close(w)
            assert set(json.loads(conn.recv(MAX_PACKET))) == {"id", "pid"}
            assert json.loads(conn.recv(MAX_PACKET))["code"] == 3
    finally:
        os.close(read)
        assert proc.wait(30) == 0  # the socket's end ends the server


def test_the_server_dying_fails_every_handle_at_once() -> None:
    server = ForkServer(_command())
    try:
        child = _spawn(server, sleep=600)
        waiting = _spawn(server, sleep=600)
        server.process.send_signal(signal.SIGKILL)
        # not a TimeoutExpired: the handle knows the server is gone
        with pytest.raises(ForkServerError, match="fork server"):
            child.wait(60)
        with pytest.raises(ForkServerError, match="fork server"):
            waiting.poll()
        with pytest.raises(ForkServerError, match="fork server"):
            server.spawn({})
        # the children died with their server (PR_SET_PDEATHSIG): their output ended
        assert _ended(child)
        assert _ended(waiting)
    finally:
        server.close()
    _close(child)
    _close(waiting)


def test_closing_the_server_ends_it_its_children_and_its_folder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = Path(tempfile.mkdtemp(prefix="fs-"))  # short: a socket path has 107 bytes at most
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    mode = folder / "mode"
    try:
        server = ForkServer(_command(str(mode)))
        child = _spawn(server, sleep=600)
        server.close()
        assert server.process.returncode == 0
        with pytest.raises(ForkServerError, match="closed"):
            child.wait(0)  # no exit will come: the server is gone
        assert _ended(child)  # killed by the server at its end
        with pytest.raises(ProcessLookupError):
            os.kill(child.pid, 0)  # and reaped
        _close(child)
        assert mode.read_text() == "0o700"  # the socket's folder was private
        assert sorted(p.name for p in folder.iterdir()) == ["mode"]  # and is gone
    finally:
        monkeypatch.undo()
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()


def test_a_server_with_a_second_thread_falls_back_to_popen(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with ForkServer(_command("thread")) as server:
        assert server.spawn({"code": 1}) is None
        assert server.spawn({"code": 1}) is None
    said = capfd.readouterr().err
    assert said.count("node processes start with Popen") == 1, said
    assert "2 Python and 2 OS threads" in said


def test_the_launcher_starts_nodes_with_popen_when_the_server_falls_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(processes, "ForkServer", lambda: ForkServer(_command("thread")))
    launcher = processes._Launcher()
    try:
        proc = launcher.start({})
        assert isinstance(proc, subprocess.Popen)
        proc.kill()
        proc.wait(30)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            assert pipe is not None
            pipe.close()
        assert launcher._server is None  # the server that would not fork is gone
    finally:
        launcher.close()
