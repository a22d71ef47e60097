"""Java 25's ahead-of-time cache (JEP 483, 514, 515) for TLC's jar: the classes TLC loads,
linked, with their method profiles, kept in one file that every later JVM maps instead of
reading, verifying and linking ``tla2tools.jar`` again.

Why: ``make check`` starts about 110 TLC JVMs, most on models of seconds; on the smoke model
(59 states) start-up is nearly all of the 3.2 CPU seconds, and the cache with the client
compiler cuts it to about 1.3 (docs/performance.md, "The main job"). Only Java 25+ has
``-XX:AOTCache``; an older Java (the system's 17) runs as before.

Only runs on the client compiler alone (:data:`CLIENT_COMPILER`, the small models') use it: the
cache also carries the training run's method profiles, which the optimising compiler replays,
and on the large models that run on it the cache cost CPU instead of saving it (measured side
by side: ``MCRRef_quick`` and ``MCRRef_selfShare``, 101,599 and 57,209 states, about 129 CPU
seconds with the cache against about 77 without, in two full runs stopped after the same 850 s
and the same CPU). Start-up is a small share of those runs anyway.

The cache is trained by the first TLC run that finds none (``-XX:AOTCacheOutput``: that run
costs about 3 CPU seconds more, once), written to a private name and renamed into place, so
concurrent runs and processes never map half a file. It lives in tracecheck's cache folder
(:func:`tracecheck.runner.javac.cache_root`, never in the repository), named by the java binary
and the jar (path, size, modification time): another Java or another jar trains its own. A cache
the JVM cannot use (other flags, a changed file) is ignored by the JVM, silently (its ``aot``
and ``cds`` logs are off: TLC's output is parsed). ``TRACECHECK_AOT=0`` turns it off.

The JVM refuses to write a cache while a directory is on the classpath, so the watchdog
(``runner/java``) goes in as a jar built beside the cache, right after TLC's jar; extra folders
(the trace reader) may follow at run time (the cache needs only its classpath as a prefix), but
a run with them does not train.
"""

from __future__ import annotations

import hashlib
import os
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracecheck.runner.javac import cache_root
from tracecheck.runner.toolchain import Toolchain

__all__ = [
    "AOT_ENV",
    "CLIENT_COMPILER",
    "MIN_AOT_JAVA",
    "AotRun",
    "aot_file",
    "classes_jar",
    "plan",
]

AOT_ENV = "TRACECHECK_AOT"
#: ``-XX:AOTCache`` and the one-step ``-XX:AOTCacheOutput`` (JEP 514) arrived in Java 25.
MIN_AOT_JAVA = 25
#: The JVM flag of a run on the client compiler alone (C1): the runs that use the cache.
CLIENT_COMPILER = "-XX:TieredStopAtLevel=1"
#: The JVM's own messages about the cache go to standard output, which tracecheck parses.
QUIET = ("-Xlog:aot=off", "-Xlog:cds=off")

_training = threading.Lock()  # one training run per process at a time
_failed: set[Path] = set()  # caches whose training failed here: not tried again


def enabled(tools: Toolchain) -> bool:
    return tools.java_version >= MIN_AOT_JAVA and os.environ.get(AOT_ENV, "1") != "0"


def _folder() -> Path:
    return cache_root() / "aot"


def aot_file(tools: Toolchain) -> Path | None:
    """The cache file for this java and jar, or None when the cache is not used."""
    if not enabled(tools):
        return None
    java = Path(tools.java).resolve()
    parts = [str(java), str(tools.jar.resolve())]
    for path in (java, tools.jar):
        info = path.stat()
        parts += [str(info.st_size), str(info.st_mtime_ns)]
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    return _folder() / f"tla2tools-java{tools.java_version}-{key}.aot"


def classes_jar(folder: Path) -> Path:
    """A jar of the classes below ``folder`` (the watchdog's), built once beside the caches and
    named by their content."""
    files = sorted(p for p in folder.rglob("*.class") if p.is_file())
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    jar = _folder() / f"{folder.name}-{digest.hexdigest()[:16]}.jar"
    if jar.is_file():
        return jar
    jar.parent.mkdir(parents=True, exist_ok=True)
    tmp = jar.with_name(f".{jar.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        with zipfile.ZipFile(tmp, "w") as out:
            for path in files:
                # a fixed date: the same classes give the same bytes
                info = zipfile.ZipInfo(path.relative_to(folder).as_posix(), (1980, 1, 1, 0, 0, 0))
                out.writestr(info, path.read_bytes())
        tmp.replace(jar)
    finally:
        tmp.unlink(missing_ok=True)
    return jar


@dataclass(frozen=True)
class AotRun:
    """The JVM flags of one run, and what to do when it ends (``ok``: it exited cleanly)."""

    flags: tuple[str, ...]
    finish: Callable[[bool], None]


def _nothing(_ok: bool) -> None:
    return None


def plan(tools: Toolchain, jvm: tuple[str, ...], *, may_train: bool) -> AotRun:
    """For a run with the JVM flags ``jvm`` on the client compiler: use the cache when it
    exists; else, when ``may_train`` and no other run of this process is training, train it
    with this run. Other runs get no flags."""
    path = aot_file(tools) if CLIENT_COMPILER in jvm else None
    if path is None:
        return AotRun((), _nothing)
    if path.is_file():
        return AotRun((f"-XX:AOTCache={path}", *QUIET), _nothing)
    if not may_train or path in _failed or not _training.acquire(blocking=False):
        return AotRun((), _nothing)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        _failed.add(path)
        _training.release()
        return AotRun((), _nothing)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")

    def finish(ok: bool) -> None:
        try:
            if ok and tmp.is_file() and tmp.stat().st_size > 0:
                tmp.replace(path)
            else:
                _failed.add(path)
        except OSError:
            _failed.add(path)
        finally:
            tmp.unlink(missing_ok=True)
            _training.release()

    return AotRun((f"-XX:AOTCacheOutput={tmp}", *QUIET), finish)
