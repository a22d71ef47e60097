"""Small Java helpers tracecheck ships as source and compiles on first use, against the jar TLC
runs from: the trace reader (:mod:`tracecheck.replay.javareader`) and the loopback launcher of
distributed TLC (:mod:`tracecheck.runner.distributed`).

Each is compiled once per source, jar and Java version, into a cache folder
(``$TRACECHECK_CACHE``, else ``$XDG_CACHE_HOME/tracecheck``, else ``~/.cache/tracecheck``), in a
private folder renamed into place, so concurrent first uses never see a half-written class.
Without a Java compiler (a JRE-only machine) :func:`compiled` returns None.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from tracecheck.runner.toolchain import Toolchain, toolchain

__all__ = ["CACHE_ENV", "cache_root", "compiled", "javac"]

CACHE_ENV = "TRACECHECK_CACHE"


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
def compiled(name: str, source: bytes, class_file: Path, root: Path) -> Path | None:
    """The classpath folder of ``source`` (a ``.java`` file called ``name``) compiled, with
    ``class_file`` (its main class, relative to the folder) in it; None where it cannot be had."""
    tools = toolchain()
    compiler = javac(tools)
    if compiler is None:
        return None
    jar = tools.jar.resolve()
    key = hashlib.sha256(
        source + str(jar).encode() + str(jar.stat().st_size).encode() + bytes([tools.java_version])
    ).hexdigest()[:16]
    target = root / f"{Path(name).stem.lower()}-{key}"
    if (target / class_file).is_file():
        return target
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
