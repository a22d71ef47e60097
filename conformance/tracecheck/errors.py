"""Typed errors of the tracecheck package.

Every error says what was wrong and where, so a user can act on it without reading a stack trace.
"""

from __future__ import annotations

__all__ = [
    "JavaNotFoundError",
    "ManifestError",
    "TLCJarNotFoundError",
    "ToolchainError",
    "TracecheckError",
]


class TracecheckError(Exception):
    """Base class of every error this package raises on purpose."""


class ToolchainError(TracecheckError):
    """Java or TLC is missing or unusable."""


class JavaNotFoundError(ToolchainError):
    """No Java runtime (11 or newer) could be found or run."""


class TLCJarNotFoundError(ToolchainError):
    """tla2tools.jar could not be located."""


class ManifestError(TracecheckError):
    """A model manifest (spec/<protocol>/models.json) is malformed or names missing files."""
