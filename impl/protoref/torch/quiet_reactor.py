"""A quiet TensorPipe reactor for the torch worker processes protoref starts.

TensorPipe's shared-memory transport runs one polling thread per process (``TP_SHM_reactor``)
that spins on ``sched_yield()`` while its inbox is empty: a three-process torch session on two
cores burns about three times the CPU its protocol needs (49 CPU-s against 15 for the torch-rref
campaign's session, most of it in the kernel; docs/performance.md). ``quiet_reactor.c`` is a
small ``LD_PRELOAD`` library that makes that one thread sleep 200 us instead of yielding, and
leaves every other thread alone. It changes no message and no order, only how soon an idle
reactor looks again, so what the black-box campaigns observe of torch's protocol is unchanged
(the same traces are accepted with and without it); torch cannot be told to skip the transport
(``FaultyTensorPipeRpcBackendOptions`` has no ``_transports``).

The library is compiled on first use with the machine's C compiler (``$CC``, else ``cc``,
``gcc`` or ``clang`` on PATH) into a cache folder (``$PROTOREF_CACHE``, else
``$XDG_CACHE_HOME/protoref``, else ``~/.cache/protoref``), once per source digest and machine,
written under a private name and renamed into place so concurrent first uses never load half a
file. Without a compiler, off Linux, or with ``PROTOREF_QUIET_REACTOR=0`` the workers run as
torch ships them (correct, only busier). Benchmarks that time torch against protoref never use
it: there torch's spinning is part of torch's speed.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Final

__all__ = ["CACHE_ENV", "SWITCH_ENV", "describe", "library", "preload_env"]

CACHE_ENV: Final = "PROTOREF_CACHE"
#: ``0`` turns the shim off (the workers then spin as torch ships them)
SWITCH_ENV: Final = "PROTOREF_QUIET_REACTOR"
_SOURCE: Final = "quiet_reactor.c"
#: seconds a compile may take before it is given up (the source is 40 lines)
_COMPILE_TIMEOUT: Final = 60.0


def _cache_root() -> Path:
    if root := os.environ.get(CACHE_ENV):
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "protoref"


def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and (found := shutil.which(name)):
            return found
    return None


@cache
def library() -> Path | None:
    """The compiled shim (compiling it now if need be), or None where it cannot be had."""
    if not sys.platform.startswith("linux") or os.environ.get(SWITCH_ENV) == "0":
        return None
    source = importlib.resources.files("protoref.torch").joinpath(_SOURCE).read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    target = _cache_root() / f"quiet_reactor-{digest}-{platform.machine()}.so"
    if target.is_file():
        return target
    compiler = _compiler()
    if compiler is None:
        return None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".quiet_reactor-") as tmp:
            src = Path(tmp) / _SOURCE
            src.write_bytes(source)
            built = Path(tmp) / "quiet_reactor.so"
            done = subprocess.run(
                [compiler, "-O2", "-shared", "-fPIC", "-o", str(built), str(src)],
                capture_output=True,
                timeout=_COMPILE_TIMEOUT,
                check=False,
            )
            if done.returncode != 0 or not built.is_file():
                return None
            built.replace(target)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return target


def preload_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the shim first on ``LD_PRELOAD``, or a plain copy where there is none."""
    out = dict(env)
    lib = library()
    if lib is None:
        return out
    preload = out.get("LD_PRELOAD", "")
    parts = [p for p in preload.replace(":", " ").split() if p]
    if str(lib) not in parts:
        out["LD_PRELOAD"] = " ".join([str(lib), *parts])
    return out


def describe() -> str:
    """One line for ``make tools``: the shim torch's workers get, or why they get none."""
    lib = library()
    if lib is not None:
        return f"torch workers: quiet TensorPipe reactor {lib}"
    if not sys.platform.startswith("linux"):
        why = "not Linux"
    elif os.environ.get(SWITCH_ENV) == "0":
        why = f"{SWITCH_ENV}=0"
    elif _compiler() is None:
        why = "no C compiler"
    else:
        why = "the compile failed"
    return f"torch workers: TensorPipe's reactor spins as shipped ({why})"
