"""TLC's own distributed mode: a ``tlc2.tool.distributed.TLCServer`` holds the queue and the
fingerprint set, and ``TLCWorker`` processes, on this machine or others, compute successors.

``tracecheck check --distributed N`` starts the server and N local workers; workers on other
hosts join with the command :func:`worker_command` prints (the server ships the spec to them:
they need only Java and the jar). TLC 2.15's distributed mode has limits of its own, measured on
the jar (docs/performance.md):

- **No liveness.** The server checks no temporal property and says nothing about it: a model
  whose ``PROPERTY`` is violated reports "No error has been found". Models with properties
  are therefore never run distributed (:func:`distributable` says why; ``check`` runs them
  locally).
- **Errors without a name.** A violated invariant and a deadlock both come back as a bare
  "The behavior up to this point is" and a counterexample, without the message that names
  the invariant (the deadlock's counterexample is its last state alone). A distributed run
  that finds an error is therefore re-checked locally (:func:`run_distributed` does it), and
  that run's verdict is the result, so the verdict is always a local run's.
- Server and workers talk Java RMI: the server's registry on ``port`` (TLC's default 10997)
  and objects on ephemeral ports of both sides. When everything runs on this machine, both
  are started through ``tracecheck.Loopback`` (``runner/java``), which binds every RMI server
  socket to the loopback address; for workers on other hosts ``host`` must be the server's
  reachable address, and its sockets listen on every interface.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from tracecheck.errors import ToolchainError
from tracecheck.runner.javac import LOOPBACK, helper_classes
from tracecheck.runner.outcome import ResultBuilder
from tracecheck.runner.results import Progress, TLCResult, Verdict
from tracecheck.runner.tlc import (
    TLCOptions,
    forget_tlc,
    kill_group,
    run_tlc,
    start_tlc,
    temp_folder,
    with_watchdog,
)
from tracecheck.runner.toolchain import Toolchain, toolchain
from tracecheck.runner.tooloutput import Message, ToolOutputReader
from tracecheck.tla import cfgfile

__all__ = [
    "DEFAULT_PORT",
    "Distribution",
    "distributable",
    "run_distributed",
    "server_command",
    "worker_command",
]

#: TLC's own default port of the server's RMI registry.
DEFAULT_PORT = 10997
_SERVER = "tlc2.tool.distributed.TLCServer"
_WORKER = "tlc2.tool.distributed.TLCWorker"
_PORT_PROPERTY = "-Dtlc2.tool.distributed.TLCServer.port"
_THREADS_PROPERTY = "-Dtlc2.tool.distributed.TLCWorker.threadCount"
#: The messages TLCServer prints once its initial states are computed and workers may join,
#: and when a worker registered.
_READY = 7000
_REGISTERED = 7001


class Distribution(BaseModel):
    """Where and how a model is checked by TLC's distributed mode."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Workers started on this machine (0: only workers that join from other hosts).
    workers: int = Field(default=1, ge=0)
    #: Threads per local worker (TLC's default is every core of the worker's machine).
    worker_threads: int | None = Field(default=None, ge=1)
    #: The server's registry port; 0 picks a free one (local workers only).
    port: int = Field(default=0, ge=0, le=65535)
    #: The address workers reach the server at; None: loopback, every worker on this machine.
    host: str | None = None
    #: Seconds to wait for the first worker before giving up.
    join_timeout: float = Field(default=600.0, gt=0)


def distributable(cfg_text: str) -> str | None:
    """Why a model cannot be checked in TLC 2.15's distributed mode, or None when it can."""
    properties = cfgfile.properties(cfg_text)
    if properties:
        return (
            f"it checks temporal properties ({', '.join(properties)}), which TLC 2.15's "
            "distributed mode skips without a word"
        )
    return None


def _loopback() -> Path:
    found = helper_classes(LOOPBACK)
    if found is None:
        raise ToolchainError(
            "distributed TLC on this machine needs javac (a JDK) to build its loopback launcher"
        )
    return found


def _java_prefix(
    tools: Toolchain, dist: Distribution, port: int, tmp: Path, main: str
) -> list[str]:
    """The java command up to TLC's arguments: ``main`` under the watchdog (the process ends
    with tracecheck) and, on loopback, under ``tracecheck.Loopback``."""
    cmd = tools.base_command()
    host = dist.host or "127.0.0.1"
    extra = [f"{_PORT_PROPERTY}={port}", f"-Djava.rmi.server.hostname={host}"]
    extra.append(f"-Djava.io.tmpdir={tmp}")
    at = cmd.index("-cp")
    cmd[at:at] = extra
    if dist.host is None:  # everything on this machine: RMI on loopback only
        cmd[cmd.index("-cp") + 1] += os.pathsep + str(_loopback())
        return [*with_watchdog(cmd, "tracecheck.Loopback"), main]
    return with_watchdog(cmd, main)


def server_command(
    spec: Path, cfg: Path | None, options: TLCOptions, dist: Distribution, *, port: int, tmp: Path
) -> list[str]:
    """The server's command line (run from the spec's folder)."""
    tools = toolchain()
    cmd = _java_prefix(tools, dist, port, tmp, _SERVER)
    if options.library:
        cmd.insert(1, "-DTLA-Library=" + os.pathsep.join(str(p) for p in options.library))
    cmd += ["-tool", "-metadir", str(tmp / "meta")]
    if cfg is not None:
        cmd += ["-config", str(cfg)]
    if options.check_deadlock is False:
        cmd.append("-deadlock")
    return [*cmd, *options.extra, spec.name]


def worker_command(dist: Distribution, port: int, tmp: Path | None = None) -> list[str]:
    """A worker's command line; with ``tmp`` None, the one to run on another host (the jar at
    the path it has here; the server's address as ``host``)."""
    tools = toolchain()
    if tmp is None:
        return [
            "java",
            f"{_PORT_PROPERTY}={port}",
            "-XX:+UseParallelGC",
            "-cp",
            str(tools.jar),
            _WORKER,
            dist.host or "SERVER_HOST",
        ]
    cmd = _java_prefix(tools, dist, port, tmp, _WORKER)
    if dist.worker_threads is not None:
        cmd.insert(1, f"{_THREADS_PROPERTY}={dist.worker_threads}")
    return [*cmd, dist.host or "127.0.0.1"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def run_distributed(
    spec: Path,
    cfg: Path | None,
    options: TLCOptions,
    dist: Distribution,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    on_ready: Callable[[list[str]], None] | None = None,
) -> TLCResult:
    """Check ``spec`` with a TLCServer and ``dist.workers`` local TLCWorkers; ``on_ready`` gets
    the command a worker on another host would run, once the server accepts workers.

    A run that finds an error is re-checked locally (the server does not say which invariant,
    nor tell an invariant from a deadlock), and the local result is returned with the
    distributed run's figures in ``printed``.
    """
    spec = spec.resolve()
    cfg = cfg.resolve() if cfg is not None else None
    cfg_text = (cfg or spec.with_suffix(".cfg")).read_text(encoding="utf-8")
    why = distributable(cfg_text)
    if why is not None:
        raise ToolchainError(f"{spec.name}: not distributable: {why}")
    port = dist.port or _free_port()
    tmp = temp_folder("tlc-dist-")
    try:
        result = _serve(spec, cfg, options, dist, port, tmp, on_progress, on_ready)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if result.verdict is Verdict.SUCCESS or result.verdict is Verdict.TIMEOUT:
        return result
    local = run_tlc(spec, cfg, options)
    note = (
        f"the distributed run stopped with an error ({result.summary}); TLC 2.15's server names "
        "no invariant, so this verdict is a local run's"
    )
    return local.model_copy(update={"printed": [note, *local.printed]})


def _serve(  # noqa: PLR0917 - one run's parts
    spec: Path,
    cfg: Path | None,
    options: TLCOptions,
    dist: Distribution,
    port: int,
    tmp: Path,
    on_progress: Callable[[Progress], None] | None,
    on_ready: Callable[[list[str]], None] | None,
) -> TLCResult:
    cmd = server_command(spec, cfg, options, dist, port=port, tmp=tmp)
    builder = ResultBuilder(cmd, on_progress)
    crew = _Crew(dist, port, tmp, on_ready)

    def message(msg: Message) -> None:
        crew.heard(msg.code)
        builder.message(msg)

    reader = ToolOutputReader(message, builder.text)
    server = start_tlc(
        cmd,
        spec.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
        errors="replace",
    )
    timer = threading.Timer(options.timeout or 0, crew.time_out, [server])
    try:
        if options.timeout is not None:
            timer.start()
        crew.start(server)
        assert server.stdout is not None
        for line in server.stdout:
            reader.feed(line)
        reader.close()
        exit_code = server.wait()
    except BaseException:
        kill_group(server)
        raise
    finally:
        timer.cancel()
        crew.stop()
        forget_tlc(server)
        if server.stdout is not None:
            server.stdout.close()
    if crew.alone:
        builder.text(f"no worker joined within {dist.join_timeout:.0f} s")
    return builder.finish(exit_code, timed_out=crew.timed_out)


class _Crew:
    """The local workers: started once the server is ready, stopped when it is done; and the
    watch on the server (no worker within ``join_timeout``, the run's timeout)."""

    def __init__(
        self,
        dist: Distribution,
        port: int,
        tmp: Path,
        on_ready: Callable[[list[str]], None] | None,
    ) -> None:
        self.dist, self.port, self.tmp, self.on_ready = dist, port, tmp, on_ready
        self.ready = threading.Event()
        self.joined = threading.Event()
        self.done = threading.Event()
        self.workers: list[subprocess.Popen[str]] = []
        self.alone = self.timed_out = False
        self._thread: threading.Thread | None = None

    def heard(self, code: int) -> None:
        if code == _READY:
            self.ready.set()
        elif code == _REGISTERED:
            self.joined.set()

    def time_out(self, server: subprocess.Popen[str]) -> None:
        self.timed_out = True
        kill_group(server)

    def start(self, server: subprocess.Popen[str]) -> None:
        self._thread = threading.Thread(
            target=self._launch, args=(server,), name="tracecheck-tlc-workers", daemon=True
        )
        self._thread.start()

    def _launch(self, server: subprocess.Popen[str]) -> None:
        while not self.ready.wait(0.2):
            if self.done.is_set():
                return  # the server ended before it was ready (a parse error, say)
        if self.on_ready is not None:
            self.on_ready(worker_command(self.dist, self.port))
        for number in range(self.dist.workers):
            if self.done.is_set():
                return
            folder = self.tmp / f"worker{number}"
            folder.mkdir()
            with (folder / "worker.log").open("w", encoding="utf-8") as log:
                cmd = worker_command(self.dist, self.port, folder)
                self.workers.append(start_tlc(cmd, folder, stdout=log, stderr=log, text=True))
        if not self.joined.wait(self.dist.join_timeout) and not self.done.is_set():
            self.alone = True
            kill_group(server)

    def stop(self) -> None:
        self.done.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        for worker in self.workers:
            try:
                worker.wait(timeout=10)  # they leave by themselves once the server is done
            except subprocess.TimeoutExpired:
                kill_group(worker)
                worker.wait()
            forget_tlc(worker)
