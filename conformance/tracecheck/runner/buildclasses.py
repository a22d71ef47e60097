"""Build the classes tracecheck ships (``make classes``): each Java helper of
:data:`tracecheck.runner.javac.HELPERS` compiled for Java 11 into ``java/classes/<stem>/`` beside
its source, with a stamp (``<stem>.json``) naming the source's digest, the jar's (for a helper
compiled against TLC) and the compiler. javac writes no time into a class file, so the same
source, jar and compiler give the same bytes (``tests/conformance/test_javaclasses.py`` checks
it where the recorded compiler is at hand, and that every stamp matches its source).

Run it after editing a ``.java`` file: ``.venv/bin/python -m tracecheck.runner.buildclasses``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tracecheck.errors import ToolchainError
from tracecheck.runner.javac import HELPERS, RELEASE, JavaHelper, digest, javac
from tracecheck.runner.toolchain import toolchain

__all__ = ["build", "compile_helper", "javac_version", "main"]


def javac_version(compiler: str) -> str:
    """``javac 17.0.15``: what the stamp records."""
    proc = subprocess.run(
        [compiler, "-version"], capture_output=True, text=True, timeout=60, check=False
    )
    return (proc.stdout + proc.stderr).strip().splitlines()[0]


def compile_helper(helper: JavaHelper, compiler: str, jar: Path, out: Path) -> None:
    """Compile ``helper`` for Java :data:`RELEASE` into the empty folder ``out``."""
    cmd = [compiler, "--release", str(RELEASE), "-nowarn", "-encoding", "UTF-8", "-d", str(out)]
    if helper.needs_jar:
        cmd += ["-cp", str(jar)]
    cmd.append(str(helper.source_path()))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0 or not (out / helper.class_file).is_file():
        raise ToolchainError(f"javac failed on {helper.name}: {proc.stderr.strip()[-2000:]}")


def build(helpers: Sequence[JavaHelper] = HELPERS) -> list[Path]:
    """Compile every helper into its shipped folder and write its stamp; returns the stamps."""
    tools = toolchain()
    compiler = javac(tools)
    if compiler is None:
        raise ToolchainError("building the shipped classes needs javac (a JDK)")
    jar = tools.jar.resolve()
    version = javac_version(compiler)
    written = []
    for helper in helpers:
        with tempfile.TemporaryDirectory(prefix="tracecheck-classes-") as tmp:
            out = Path(tmp) / "classes"
            compile_helper(helper, compiler, jar, out)
            folder = helper.shipped_folder()
            shutil.rmtree(folder, ignore_errors=True)
            folder.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(out, folder)
        stamp = {
            "source": "/".join(helper.source),
            "source_sha256": digest(helper.source_path()),
            "jar_sha256": digest(jar) if helper.needs_jar else None,
            "javac": version,
            "release": RELEASE,
        }
        helper.stamp_path().write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
        written.append(helper.stamp_path())
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.parse_args(argv)
    for stamp in build():
        print(f"wrote {stamp.parent / stamp.stem}/ and {stamp.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
