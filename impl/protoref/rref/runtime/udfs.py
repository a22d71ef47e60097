"""Functions the demo, the benchmark and the tests call remotely (importable by name anywhere).

The receiving UDF of the design note's scenarios (``def func(rref): pass``) is :func:`take`:
it receives the RRef and lets it go, which is what drives ``DropRRef``/``DelUser`` on the callee.
"""

from __future__ import annotations

import threading
from typing import Any

from protoref.rref.runtime.handle import RRef

__all__ = ["add", "close_gate", "echo", "fail", "fetch", "gate", "make_rref", "open_gate", "take"]

_gate = threading.Event()


def add(a: int, b: int) -> int:
    return a + b


def echo(value: Any) -> Any:
    return value


def fail(message: str) -> None:
    raise ValueError(message)


def take(rref: RRef[Any]) -> str:
    """Receive an RRef and drop it (the note's ``func(rref): pass``)."""
    return rref.owner_name()


def fetch(rref: RRef[Any]) -> Any:
    """to_here on the callee, then drop the RRef."""
    return rref.to_here()


def make_rref(value: Any) -> RRef[Any]:
    """Return an RRef owned by the callee (an RRef as a return value)."""
    return RRef(value)


def gate(value: Any) -> Any:
    """Block until :func:`open_gate` runs in this process (tests use it to hold a UDF)."""
    _gate.wait(30)
    return value


def open_gate() -> None:
    _gate.set()


def close_gate() -> None:
    _gate.clear()
