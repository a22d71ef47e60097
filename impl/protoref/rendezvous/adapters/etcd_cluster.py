"""A throwaway etcd cluster of several members on loopback (``with EtcdCluster(3) as c:``).

For the tests of failover: each member is ``/usr/bin/etcd`` (or ``$PROTOREF_ETCD``) with its own
free client and peer ports and temporary data directory, started together with one
``--initial-cluster``. :meth:`EtcdCluster.leader` asks every live member who leads;
:meth:`EtcdCluster.kill` SIGKILLs one member (as a machine failure would). On exit every
member is stopped and the directories removed. Like :class:`EtcdServer`, it never touches a
system service.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any

from protoref.rendezvous.adapters.etcd_server import (
    EtcdStartError,
    _free_port,
    _healthy,
    _stop_process,
    _tail,
    etcd_env,
    find_etcd,
)

__all__ = ["EtcdCluster"]

_PAUSE = 0.05  # start-up and leader polling only


class EtcdCluster:
    """``size`` etcd members on ``host``; ``endpoint`` lists them all (``EtcdStore`` fails over
    between them), ``url`` is the same for ``node_main --store``."""

    def __init__(
        self, size: int = 3, *, host: str = "127.0.0.1", start_timeout: float = 60.0
    ) -> None:
        if size < 1:
            raise ValueError(f"an etcd cluster needs a member, got size {size}")
        self.binary = find_etcd()
        self.size, self.host, self.start_timeout = size, host, start_timeout
        self.client_ports: list[int] = []
        self._procs: list[subprocess.Popen[bytes] | None] = []
        self._finalizers: list[weakref.finalize[[subprocess.Popen[bytes]], EtcdCluster]] = []
        self._workdir: Path | None = None

    @property
    def client_port(self) -> int:
        """The first member's client port (a client that talks to one member)."""
        return self.client_ports[0]

    def client_url(self, member: int) -> str:
        return f"http://{self.host}:{self.client_ports[member]}"

    @property
    def endpoint(self) -> str:
        return "http://" + ",".join(f"{self.host}:{p}" for p in self.client_ports)

    @property
    def url(self) -> str:
        return "etcd://" + ",".join(f"{self.host}:{p}" for p in self.client_ports)

    def start(self) -> EtcdCluster:
        self._workdir = Path(tempfile.mkdtemp(prefix="protoref-etcd-cluster-"))
        try:
            self._launch()
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self) -> None:
        assert self._workdir is not None
        self.client_ports = [_free_port(self.host) for _ in range(self.size)]
        peers = [_free_port(self.host) for _ in range(self.size)]
        cluster = ",".join(f"m{i}=http://{self.host}:{p}" for i, p in enumerate(peers))
        for i in range(self.size):
            client, peer = self.client_url(i), f"http://{self.host}:{peers[i]}"
            args = [
                str(self.binary),
                f"--name=m{i}",
                f"--data-dir={self._workdir / f'm{i}'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster={cluster}",
                "--initial-cluster-state=new",
                f"--initial-cluster-token=protoref-{self._workdir.name}",
                "--logger=zap",
                "--log-outputs=stderr",
                "--log-level=warn",
            ]
            with (self._workdir / f"m{i}.log").open("ab") as log:
                proc = subprocess.Popen(
                    args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=etcd_env()
                )
            self._procs.append(proc)
            self._finalizers.append(weakref.finalize(self, _stop_process, proc))
        end = time.monotonic() + self.start_timeout
        for i, member in enumerate(self._procs):
            assert member is not None
            while not _healthy(self.client_url(i), None):
                log_path = self._workdir / f"m{i}.log"
                if member.poll() is not None:
                    raise EtcdStartError(f"etcd member m{i} exited at start: {_tail(log_path)}")
                if time.monotonic() > end:
                    raise EtcdStartError(f"etcd member m{i} not healthy: {_tail(log_path)}")
                time.sleep(_PAUSE)

    def alive(self) -> list[int]:
        return [i for i, p in enumerate(self._procs) if p is not None and p.poll() is None]

    def leader(self, timeout: float = 30.0) -> int:
        """The member that leads, as every live member reports it (waits for an election)."""
        end = time.monotonic() + timeout
        while True:
            ids: dict[int, int] = {}
            leaders: set[int] = set()
            for i in self.alive():
                status = _status(self.client_url(i))
                if status is not None:
                    ids[int(status["header"]["member_id"])] = i
                    leaders.add(int(status.get("leader", 0)))
            if len(leaders) == 1 and (lead := leaders.pop()) in ids:
                return ids[lead]
            if time.monotonic() > end:
                raise EtcdStartError(f"no agreed etcd leader after {timeout:g} s")
            time.sleep(_PAUSE)

    def kill(self, member: int) -> None:
        """SIGKILL one member (its data directory stays until :meth:`stop`)."""
        proc = self._procs[member]
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()

    def stop(self) -> None:
        for fin in self._finalizers:
            fin()
        self._finalizers, self._procs = [], []
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> EtcdCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _status(client: str) -> dict[str, Any] | None:
    """``/v3/maintenance/status`` of one member (None if it does not answer)."""
    request = urllib.request.Request(f"{client}/v3/maintenance/status", data=b"{}", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=2.0) as resp:
            body = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return body if isinstance(body, dict) and "header" in body else None
