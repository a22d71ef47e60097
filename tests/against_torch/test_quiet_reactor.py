"""The quiet-reactor shim (protoref.torch.quiet_reactor): it compiles, only the thread named
``TP_SHM_reactor`` sleeps instead of yielding, every other thread yields as before, and it can
be turned off. A sleep blocks its thread, so each shimmed call is one more voluntary context
switch; a real ``sched_yield`` never is (the kernel counts a yield as involuntary, or not at
all when nothing else is runnable): the counts tell the two branches apart without a clock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from protoref.torch import quiet_reactor

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or quiet_reactor._compiler() is None,
    reason="the shim is Linux-only and needs a C compiler",
)

CALLS = 200

#: names a thread as TensorPipe does, calls sched_yield CALLS times through libc (which the
#: preloaded shim overrides) and prints the thread's voluntary context switches meanwhile
_PROBE = """
import ctypes, json, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
def switches():
    for line in open("/proc/thread-self/status"):
        if line.startswith("voluntary_ctxt_switches"):
            return int(line.split()[1])
out = {}
def run(name):
    libc.prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME
    before = switches()
    for _ in range(int(sys.argv[1])):
        assert libc.sched_yield() == 0
    out[name] = switches() - before
for name in ("TP_SHM_reactor", "pt_thread_pool"):
    t = threading.Thread(target=run, args=(name,))
    t.start()
    t.join()
print(json.dumps(out))
"""


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    cache = tmp_path / "cache"
    monkeypatch.setenv(quiet_reactor.CACHE_ENV, str(cache))
    monkeypatch.delenv(quiet_reactor.SWITCH_ENV, raising=False)
    quiet_reactor.library.cache_clear()
    yield cache
    quiet_reactor.library.cache_clear()


def _probe(env: dict[str, str]) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(CALLS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return dict(json.loads(done.stdout))


def test_only_the_reactor_thread_sleeps(fresh_cache: Path) -> None:
    lib = quiet_reactor.library()
    assert lib is not None
    assert lib.parent == fresh_cache
    assert lib.is_file()
    shimmed = _probe(quiet_reactor.preload_env(os.environ))
    assert shimmed["TP_SHM_reactor"] >= CALLS  # every call slept (blocked)
    assert shimmed["pt_thread_pool"] < CALLS // 2  # the real system call
    # without the shim the reactor-named thread yields like any other
    plain = _probe({k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    assert plain["TP_SHM_reactor"] < CALLS // 2


def test_compiled_once_then_reused(fresh_cache: Path) -> None:
    first = quiet_reactor.library()
    assert first is not None
    stamp = first.stat().st_mtime_ns
    quiet_reactor.library.cache_clear()
    assert quiet_reactor.library() == first
    assert first.stat().st_mtime_ns == stamp
    # nothing half-written is left beside it
    assert sorted(p.name for p in fresh_cache.iterdir()) == [first.name]


def test_preload_keeps_what_was_there(fresh_cache: Path) -> None:
    env = quiet_reactor.preload_env({"LD_PRELOAD": "libother.so", "X": "1"})
    lib = str(quiet_reactor.library())
    assert env["LD_PRELOAD"].split() == [lib, "libother.so"]
    assert env["X"] == "1"
    assert quiet_reactor.preload_env(env)["LD_PRELOAD"] == env["LD_PRELOAD"]  # not twice


def test_off_switch_and_no_compiler(
    fresh_cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(quiet_reactor.SWITCH_ENV, "0")
    assert quiet_reactor.library() is None
    assert "LD_PRELOAD" not in quiet_reactor.preload_env({})
    assert "PROTOREF_QUIET_REACTOR=0" in quiet_reactor.describe()
    monkeypatch.delenv(quiet_reactor.SWITCH_ENV)
    quiet_reactor.library.cache_clear()
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert quiet_reactor.library() is None
    assert "no C compiler" in quiet_reactor.describe()
    assert not fresh_cache.exists()


def test_a_broken_compiler_leaves_nothing(
    fresh_cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "bin" / "cc"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho broken >&2\nexit 1\n", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    assert quiet_reactor.library() is None
    assert "the compile failed" in quiet_reactor.describe()
    assert list(fresh_cache.iterdir()) == []  # the private build folder went with the failure
