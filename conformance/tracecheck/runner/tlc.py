"""Running TLC and SANY as subprocesses; their ``-tool`` output becomes a TLCResult through
:mod:`tracecheck.runner.outcome`.

Each run gets its own temporary metadir (TLC's ``states/`` folder), because two runs started in
the same second otherwise collide, and the repository stays clean; its own ``java.io.tmpdir``
too, because TLC 2.15 copies the standard modules (Sequences.tla, ...) into the temporary
folder and deletes them on exit, which made concurrent runs fail with "Cannot find source file
for module Sequences". The process is read line by
line so progress reaches the caller while TLC works; a timeout kills TLC's whole process group.

TLC runs in a session of its own (so that group can be killed), which also keeps it from the
signals of tracecheck's terminal; it is started under ``tracecheck.Watchdog``
(``runner/java``), which ends the JVM when its standard input, a pipe tracecheck never writes,
closes: when tracecheck ends, however it ends (a SIGKILL too), its TLC ends with it. The
temporary folders of a tracecheck that was killed are named by its process id and removed by
the next run (:func:`sweep_stale`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from tracecheck.errors import TracecheckError
from tracecheck.runner import aotcache
from tracecheck.runner.aotcache import classes_jar
from tracecheck.runner.javac import WATCHDOG, helper_classes
from tracecheck.runner.outcome import ResultBuilder, sany_error
from tracecheck.runner.results import Progress, TLCError, TLCResult, Verdict
from tracecheck.runner.toolchain import Toolchain, toolchain
from tracecheck.runner.tooloutput import ToolOutputReader
from tracecheck.tla import cfgfile

__all__ = [
    "TLCInterruptedError",
    "TLCOptions",
    "cores",
    "forget_tlc",
    "kill_group",
    "resume",
    "run_sany",
    "run_tlc",
    "start_tlc",
    "stop_all",
    "sweep_stale",
    "temp_folder",
    "tlc_command",
    "watchdog_classes",
    "with_watchdog",
]

ProgressCallback = Callable[[Progress], None]


class TLCOptions(BaseModel):
    """How to run TLC. The defaults suit the quick models: one worker, deterministic counts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Worker threads, at least 1; ``"auto"``: one per core this process may run on
    #: (:func:`cores`). TLC 2.15 takes only a number (``-workers auto`` is an error there).
    workers: int | str = 1
    #: Seconds before TLC is killed; ``None`` waits forever.
    timeout: float | None = None
    #: JVM heap, e.g. ``"4g"``; ``None`` keeps TLC's default (a quarter of memory).
    heap: str | None = None
    #: Random simulation instead of exhaustive breadth-first search.
    simulate: bool = False
    #: Simulation: the length of each behaviour.
    depth: int | None = None
    #: Simulation: how many behaviours (``-simulate num=K``); ``None`` runs until stopped.
    traces: int | None = None
    #: TLC's seed (simulation and fingerprint choices), for reproducible runs.
    seed: int | None = None
    #: Report states without successors as deadlocks. ``None``: as the cfg's ``CHECK_DEADLOCK``
    #: says, and on when it says nothing (TLC 2.15 cannot read that setting itself: the runner
    #: reads it, and gives TLC the cfg without it and ``-deadlock`` when it is FALSE).
    check_deadlock: bool | None = None
    #: Extra TLA+ library folders (``-DTLA-Library``), e.g. ``spec/common``.
    library: tuple[Path, ...] = ()
    #: Flags passed to TLC verbatim, after ours.
    extra: tuple[str, ...] = ()
    #: Flags for the JVM, before the class name (e.g. ``-XX:TieredStopAtLevel=1``).
    jvm: tuple[str, ...] = ()
    #: Folders appended to the jar on the classpath (operator overrides such as the trace
    #: reader of :mod:`tracecheck.replay.javareader`).
    classpath: tuple[Path, ...] = ()
    #: Name the culprit of a temporal violation by re-checking properties one at a time.
    attribute_properties: bool = True

    @field_validator("workers")
    @classmethod
    def _workers(cls, value: int | str) -> int | str:
        if value == "auto" or (isinstance(value, int) and value >= 1):
            return value
        raise ValueError(f"workers is a number from 1 or auto, not {value!r}")

    @property
    def worker_count(self) -> int:
        """The number of worker threads TLC gets (``"auto"`` resolved)."""
        return cores() if self.workers == "auto" else int(self.workers)


def cores() -> int:
    """The cores this process may run on (its CPU affinity, which a container or ``taskset``
    may narrow), what ``--workers auto`` means."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (no affinity on macOS)
        return os.cpu_count() or 1


def watchdog_classes() -> Path | None:
    """The classpath folder of ``tracecheck.Watchdog`` (shipped with the package)."""
    return helper_classes(WATCHDOG)


def with_watchdog(cmd: list[str], main_class: str, *, as_jar: bool = False) -> list[str]:
    """``cmd`` (a java command up to its main class, ``-cp`` included) with the watchdog put
    before ``main_class``, when its classes can be had; the process must get a pipe on stdin.
    With ``as_jar`` its classes go in as a jar right after the first classpath entry (TLC's
    jar), as Java's AOT cache needs (:mod:`tracecheck.runner.aotcache`)."""
    folder = watchdog_classes()
    if folder is None:
        return [*cmd, main_class]
    cmd = list(cmd)
    at = cmd.index("-cp") + 1
    if as_jar:
        first, sep, rest = cmd[at].partition(os.pathsep)
        cmd[at] = os.pathsep.join([first, str(classes_jar(folder)), *([rest] if sep else [])])
    else:
        cmd[at] = os.pathsep.join([cmd[at], str(folder)])
    return [*cmd, "tracecheck.Watchdog", main_class]


#: The prefix of the temporary folders of a run; the process id that follows says whose it is.
TEMP_PREFIX = "tlc-meta-"


def temp_folder(prefix: str = TEMP_PREFIX) -> Path:
    """A new temporary folder named ``<prefix><pid>-...``: :func:`sweep_stale` removes it if
    this process dies before it could."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


#: Prefixes of the temporary folders tracecheck makes with :func:`temp_folder`.
STALE_PREFIXES = ("tlc-meta-", "tlc-dist-", "tracecheck-spool-")


def sweep_stale(root: Path | None = None) -> list[Path]:
    """Remove the temporary folders (``tlc-meta-<pid>-...`` and the like) whose process is gone:
    what a tracecheck killed by SIGKILL left. Returns what was removed."""
    base = root or Path(tempfile.gettempdir())
    removed = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return []
    for entry in entries:
        prefix = next((p for p in STALE_PREFIXES if entry.name.startswith(p)), None)
        if prefix is None:
            continue
        pid_text = entry.name[len(prefix) :].split("-", 1)[0]
        if not pid_text.isdigit() or _alive(int(pid_text)):
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir() and not entry.is_symlink() and entry.stat().st_uid == os.getuid():
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def tlc_command(
    spec: Path,
    cfg: Path | None,
    options: TLCOptions,
    metadir: Path,
    tools: Toolchain | None = None,
    *,
    watchdog: bool = False,
    aot: tuple[str, ...] = (),
) -> list[str]:
    """The exact command line :func:`run_tlc` runs (run from the spec's folder); with
    ``watchdog``, under ``tracecheck.Watchdog`` (as :func:`run_tlc` runs it, stdin a pipe);
    ``aot``: the JVM flags of Java's AOT cache (:func:`tracecheck.runner.aotcache.plan`), which
    put the watchdog in as a jar."""
    tools = tools or toolchain()
    cmd = tools.base_command(options.heap)
    if options.library:
        cmd.insert(1, "-DTLA-Library=" + os.pathsep.join(str(p) for p in options.library))
    if options.classpath:
        at = cmd.index("-cp") + 1
        cmd[at] = os.pathsep.join([cmd[at], *(str(p) for p in options.classpath)])
    cmd.insert(cmd.index("-cp"), f"-Djava.io.tmpdir={metadir.parent}")
    cmd[1:1] = [*aot, *options.jvm]
    cmd = with_watchdog(cmd, "tlc2.TLC", as_jar=bool(aot)) if watchdog else [*cmd, "tlc2.TLC"]
    cmd += ["-tool", "-workers", str(options.worker_count), "-metadir", str(metadir)]
    if cfg is not None:
        cmd += ["-config", str(cfg)]
    if options.check_deadlock is False:
        cmd.append("-deadlock")  # in TLC 2.15 this flag *disables* deadlock checking
    if options.simulate:
        cmd += ["-simulate"] + ([f"num={options.traces}"] if options.traces else [])
        if options.depth is not None:
            cmd += ["-depth", str(options.depth)]
    if options.seed is not None:
        cmd += ["-seed", str(options.seed)]
    cmd += list(options.extra)
    cmd.append(spec.name)
    return cmd


def run_tlc(
    spec: Path,
    cfg: Path | None = None,
    options: TLCOptions | None = None,
    on_progress: ProgressCallback | None = None,
) -> TLCResult:
    """Model-check ``spec`` with ``cfg`` (default: the cfg of the same name) and return the result.

    A temporal violation in a model with several properties is attributed by re-running TLC
    once per property (``options.attribute_properties``): 2.15 does not say which one failed.
    """
    options = options or TLCOptions()
    spec = spec.resolve()
    cfg = cfg.resolve() if cfg is not None else None
    result = _run_once(spec, cfg, options, on_progress)
    if (
        result.verdict is Verdict.PROPERTY
        and result.violated is None
        and options.attribute_properties
    ):
        result = _attribute_property(spec, cfg, options, result)
    return result


def _run_once(
    spec: Path, cfg: Path | None, options: TLCOptions, on_progress: ProgressCallback | None
) -> TLCResult:
    metadir = temp_folder()
    tools = toolchain()
    # the JVM cannot write an AOT cache with a folder on the classpath (the trace reader's)
    aot = aotcache.plan(tools, options.jvm, may_train=not options.classpath)
    ok = False
    try:
        cfg, options = _deadlock_setting(spec, cfg, options, metadir)
        cmd = tlc_command(spec, cfg, options, metadir / "m", tools, watchdog=True, aot=aot.flags)
        result = _execute(cmd, spec.parent, options.timeout, on_progress)
        ok = True  # (the cache is kept only if the JVM wrote it: not after a kill)
        return result
    finally:
        aot.finish(ok)
        shutil.rmtree(metadir, ignore_errors=True)


def _deadlock_setting(
    spec: Path, cfg: Path | None, options: TLCOptions, folder: Path
) -> tuple[Path | None, TLCOptions]:
    """The cfg TLC 2.15 can read and the options with deadlock checking decided: a cfg's
    ``CHECK_DEADLOCK`` is cut out into a copy in ``folder`` and becomes the option, unless the
    option was given."""
    path = cfg or spec.with_suffix(".cfg")
    if not path.is_file():
        return cfg, options
    text = path.read_text(encoding="utf-8", errors="replace")
    setting = cfgfile.check_deadlock(text)
    if setting is None:
        return cfg, options
    copy = folder / path.name
    copy.write_text(cfgfile.without_check_deadlock(text), encoding="utf-8")
    if options.check_deadlock is None:
        options = options.model_copy(update={"check_deadlock": setting})
    return copy, options


def _attribute_property(
    spec: Path, cfg: Path | None, options: TLCOptions, first: TLCResult
) -> TLCResult:
    cfg_path = cfg or spec.with_suffix(".cfg")
    names = cfgfile.properties(cfg_path.read_text(encoding="utf-8"))
    if len(names) == 1:
        return first.model_copy(update={"violated": names[0]})
    single = options.model_copy(update={"attribute_properties": False})
    for name in names:
        tmp = temp_folder()
        try:
            one = tmp / cfg_path.name
            one.write_text(
                cfgfile.with_only_property(cfg_path.read_text(encoding="utf-8"), name),
                encoding="utf-8",
            )
            attempt = _run_once(spec, one, single, None)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if attempt.verdict is Verdict.PROPERTY:
            return first.model_copy(update={"violated": name})
    return first


def run_sany(spec: Path, tools: Toolchain | None = None) -> TLCResult:
    """Parse and check ``spec`` with SANY alone (no model): success, parse or semantic error."""
    tools = tools or toolchain()
    spec = spec.resolve()
    cmd = [*tools.base_command(), "tla2sany.SANY", spec.name]
    started = time.monotonic()
    proc = subprocess.run(
        cmd, cwd=spec.parent, capture_output=True, text=True, check=False, timeout=600
    )
    lines = (proc.stdout + proc.stderr).splitlines()
    error = sany_error(lines) or _sany_failure(lines, proc.returncode)
    verdict = Verdict.SUCCESS if error is None else error[0]
    return TLCResult(
        verdict=verdict,
        summary="SANY finished" if error is None else error[1].message,
        errors=[] if error is None else [error[1]],
        wall_seconds=time.monotonic() - started,
        command=cmd,
        exit_code=proc.returncode,
        printed=lines,
    )


def _sany_failure(lines: list[str], exit_code: int) -> tuple[Verdict, TLCError] | None:
    """What SANY's classified messages miss: a non-zero exit (a fatal error while parsing, a
    missing file) or a run that never printed SANY's banner (the jar is not TLA+'s tools)."""
    banner = any(line.startswith("****** SANY2 Version") for line in lines)
    if exit_code == 0 and banner:
        return None
    said = [line.strip() for line in lines if line.strip() and not line.startswith("******")]
    detail = " / ".join(said[-3:])[:500] or f"exit code {exit_code}"
    if not banner:
        return Verdict.CRASH, TLCError(
            message=f"this is not SANY (is the jar TLA+'s tools?): {detail}"
        )
    return Verdict.PARSE_ERROR, TLCError(message=detail)


def _execute(
    cmd: list[str], cwd: Path, timeout: float | None, on_progress: ProgressCallback | None
) -> TLCResult:
    builder = ResultBuilder(cmd, on_progress)
    reader = ToolOutputReader(builder.message, builder.text)
    with _RUNNING.start(
        cmd,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
        errors="replace",
        start_new_session=True,  # so a timeout can kill the JVM and anything it started
    ) as proc:
        killer = _Killer(proc, timeout)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                reader.feed(line)
            reader.close()
            exit_code = proc.wait()
        except BaseException:
            # an interrupt (or any error) while TLC runs: TLC must not outlive us
            _kill_group(proc)
            raise
        finally:
            killer.cancel()
            _RUNNING.forget(proc)
    if _RUNNING.stopped:
        raise TLCInterruptedError("stopped by a signal")
    return builder.finish(exit_code, timed_out=killer.fired)


class TLCInterruptedError(TracecheckError):
    """TLC was stopped because tracecheck got SIGINT, SIGTERM or SIGHUP (:func:`stop_all`)."""


class _Running:
    """The TLC processes this process started and has not reaped: what :func:`stop_all` kills."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[str]] = set()
        self.stopped = False

    def start(self, cmd: list[str], **kwargs: Any) -> subprocess.Popen[str]:
        with self._lock:
            if self.stopped:  # a thread about to start TLC after a signal: it does not
                raise TLCInterruptedError("stopped by a signal")
            # the watchdog's pipe: never written, closed by the kernel when this process ends
            kwargs.setdefault("stdin", subprocess.PIPE)
            proc: subprocess.Popen[str] = subprocess.Popen(cmd, **kwargs)
            self._procs.add(proc)
            return proc

    def forget(self, proc: subprocess.Popen[str]) -> None:
        """The process ended (or was killed): its watchdog pipe is closed here."""
        with self._lock:
            self._procs.discard(proc)
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()

    def resume(self) -> None:
        with self._lock:
            self.stopped = False

    def stop(self) -> int:
        """Kill every running TLC's process group; no TLC starts afterwards."""
        with self._lock:
            self.stopped = True
            procs = list(self._procs)
        for proc in procs:
            _kill_group(proc)
        return len(procs)


_RUNNING = _Running()


def stop_all() -> int:
    """Kill every TLC this process is running (their whole process groups) and refuse to start
    more: what tracecheck does on SIGINT, SIGTERM or SIGHUP, before it unwinds (each run's temporary
    folders are removed as its ``finally`` blocks run). Returns how many were running."""
    return _RUNNING.stop()


def start_tlc(cmd: list[str], cwd: Path, **popen: Any) -> subprocess.Popen[str]:
    """Start a TLC process in its own session (so its whole group can be killed), registered
    for :func:`stop_all` until :func:`forget_tlc`; ``popen`` goes to :class:`subprocess.Popen`."""
    popen.setdefault("start_new_session", True)
    return _RUNNING.start(cmd, cwd=cwd, **popen)


def forget_tlc(proc: subprocess.Popen[str]) -> None:
    """A process of :func:`start_tlc` is done: :func:`stop_all` no longer kills it."""
    _RUNNING.forget(proc)


def kill_group(proc: subprocess.Popen[str]) -> None:
    """Kill a TLC process and everything it started."""
    _kill_group(proc)


def resume() -> None:
    """Allow TLC runs again after :func:`stop_all` (a long-lived caller, such as a test run
    calling the command line again)."""
    _RUNNING.resume()


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class _Killer:
    """Kills the process group after ``timeout`` seconds."""

    def __init__(self, proc: subprocess.Popen[str], timeout: float | None) -> None:
        self.fired = False
        self._proc = proc
        self._timer: threading.Timer | None = None
        if timeout is not None:
            self._timer = threading.Timer(timeout, self._kill)
            self._timer.daemon = True
            self._timer.start()

    def _kill(self) -> None:
        self.fired = True
        _kill_group(self._proc)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
