"""The throwaway etcd: start, health, stop and clean-up; a binary that is missing or fails."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from protoref.rendezvous.adapters.etcd_server import (
    EtcdNotInstalledError,
    EtcdServer,
    EtcdStartError,
    find_etcd,
)
from protoref.rendezvous.adapters.etcd_store import EtcdStore

LIMIT = 60.0


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie still answers kill(0); its state in /proc says it is dead.
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().split(")")[-1].split()[0] == "Z"


def test_start_serve_stop_and_clean_up(etcd_server: EtcdServer, etcd_binary: Path) -> None:
    """A second server next to the session's: its own ports, its own data, nothing left."""
    with EtcdServer(etcd_binary) as other:
        assert other.client_port != etcd_server.client_port
        workdir = other._workdir
        assert workdir is not None
        assert workdir.is_dir()
        with EtcdStore(other.endpoint, prefix="/t/") as store:
            ok, _ = store.compare_set("k", None, b"v")
            assert ok
        with EtcdStore(etcd_server.endpoint, prefix="/t/") as store:
            assert store.get("k") is None  # the other server's data is its own
        pid = other.pid
    assert _gone(pid)
    assert not workdir.exists()
    with pytest.raises(EtcdStartError, match="not started"):
        _ = other.endpoint


def test_a_binary_asked_for_must_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(EtcdNotInstalledError, match="not an executable"):
        find_etcd(tmp_path / "no-etcd")
    monkeypatch.setenv("PROTOREF_ETCD", str(tmp_path / "no-etcd"))
    with pytest.raises(EtcdNotInstalledError, match="no-etcd"):
        EtcdServer()


def test_a_binary_that_exits_is_a_start_error(tmp_path: Path) -> None:
    fake = tmp_path / "etcd"
    fake.write_text("#!/bin/sh\necho 'flag provided but not defined' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(EtcdStartError, match=r"exited with 3.*flag provided"):
        EtcdServer(fake).start()


def test_the_command_line_runs_etcd_until_sigterm(etcd_binary: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "protoref.rendezvous.adapters.etcd_server",
        "--etcd",
        str(etcd_binary),
    ]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            where = json.loads(proc.stdout.readline())
            assert where["url"].startswith("etcd://127.0.0.1:")
            with EtcdStore(where["endpoint"]) as store:
                assert store.get("anything") is None  # it serves
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=LIMIT) == 0
    assert _gone(where["pid"])
