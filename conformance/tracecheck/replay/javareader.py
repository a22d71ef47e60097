"""The trace reader that TLC loads as a Java override, compiled on first use.

SANY needs seconds per megabyte to parse and level-check a trace written as a TLA+ constant
module (a 2.9 MB batch of 30 traces: 3.4 s of parsing and 5.7 s of semantic processing, against
3 s for TLC to replay its 13,708 events). ``java/tlc2/overrides/TLCOverrides.java`` replaces
the operator ``TraceIO!TVRead(path)`` (TLC 2.15's ``@TLAPlusOperator`` overrides) and builds
the same values from a text file with one event per line, in milliseconds.

The class is compiled against the jar TLC runs from, once per source, jar and Java version, into
a cache folder (``$TRACECHECK_CACHE``, else ``$XDG_CACHE_HOME/tracecheck``, else
``~/.cache/tracecheck``). Without a Java compiler (a JRE-only machine) or with
``TRACECHECK_JAVA_READER=0``, :func:`reader_classes` returns ``None`` and traces are rendered as
TLA+ constant modules, as before: slower, same verdicts (tests run both ways).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from tracecheck.runner.toolchain import Toolchain, toolchain

__all__ = ["CACHE_ENV", "READER_ENV", "cache_root", "reader_classes"]

#: Set to ``0`` to render traces as TLA+ constant modules even where the reader compiles.
READER_ENV = "TRACECHECK_JAVA_READER"
CACHE_ENV = "TRACECHECK_CACHE"
_SOURCE = ("java", "tlc2", "overrides", "TLCOverrides.java")
_CLASS = Path("tlc2", "overrides", "TLCOverrides.class")


def cache_root() -> Path:
    """Where compiled helpers are kept."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "tracecheck"


def _javac(tools: Toolchain) -> str | None:
    """The compiler beside the java that runs TLC, else ``javac`` on PATH."""
    beside = Path(tools.java).resolve().parent / "javac"
    if os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("javac")


def reader_classes() -> Path | None:
    """The classpath folder holding the compiled reader, or ``None`` where it cannot be had."""
    if os.environ.get(READER_ENV, "1") == "0":
        return None
    return _compiled(cache_root())


@cache
def _compiled(root: Path) -> Path | None:
    tools = toolchain()
    javac = _javac(tools)
    if javac is None:
        return None
    source = importlib.resources.files("tracecheck.replay").joinpath(*_SOURCE).read_bytes()
    jar = tools.jar.resolve()
    key = hashlib.sha256(
        source + str(jar).encode() + str(jar.stat().st_size).encode() + bytes([tools.java_version])
    ).hexdigest()[:16]
    target = root / f"reader-{key}"
    if (target / _CLASS).is_file():
        return target
    try:
        return _compile(javac, source, jar, root, target)
    except OSError:  # an unwritable cache folder: the slower path still works
        return None


def _compile(javac: str, source: bytes, jar: Path, root: Path, target: Path) -> Path | None:
    root.mkdir(parents=True, exist_ok=True)
    # Compile into a private folder and rename it into place: concurrent first uses (pytest
    # workers, two shells) never see a half-written class.
    with tempfile.TemporaryDirectory(dir=root, prefix="build-") as tmp:
        src = Path(tmp) / "TLCOverrides.java"
        src.write_bytes(source)
        out = Path(tmp) / "classes"
        proc = subprocess.run(
            [javac, "-nowarn", "-encoding", "UTF-8", "-d", str(out), "-cp", str(jar), str(src)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if proc.returncode != 0 or not (out / _CLASS).is_file():
            return None
        try:
            out.rename(target)
        except OSError:
            if not (target / _CLASS).is_file():  # not lost to a concurrent twin: a real failure
                return None
    return target
