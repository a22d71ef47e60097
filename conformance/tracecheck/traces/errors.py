"""The error of a malformed trace (its own module: the path reader and the loader both raise it)."""

from __future__ import annotations

from tracecheck.errors import TracecheckError

__all__ = ["TraceFormatError"]


class TraceFormatError(TracecheckError):
    """A trace file is malformed: says which file, line and field, and what was wrong."""

    def __init__(self, source: str, line: int | None, problem: str) -> None:
        self.source = source
        self.line = line
        self.problem = problem
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {problem}")
