"""Faults and attacks on the RPC runtime (issue #20 section 4), with separate processes.

A flood of unauthenticated connections costs the worker a bounded amount of memory (figures
printed: resident set before, during, after); a killed worker fails the calls pending on it and
later calls to it (figures printed: how long each took), and the survivors' graceful shutdown
reports it instead of raising. Behaviour is asserted (bounded, failed with PeerDeadError,
reported); times are only printed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from protoref.rpc.options import free_port
from support.programs import PROGRAMS, finish, program_env, start, stop
from tracecheck.replay.validate import validate_traces
from tracecheck.traces.load import load_trace, merge_traces

SPEC_ROOT = Path(__file__).resolve().parents[2] / "spec"
MIB = 1 << 20
FLOOD_CONNECTIONS = 100
FLOOD_MIB = 15
FLOOD_ROUNDS = 3
#: A flooded worker may grow by this much at most over every round (before the handshake
#: limits one round took it from 47 MiB to 2.7 GB, and 1.1 GB stayed; keeping the rejections'
#: tracebacks cost 35 MiB per round, also caught by this bound).
RSS_BOUND_MIB = 16


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def wait_listening(port: int, proc: subprocess.Popen[str]) -> None:
    for _ in range(600):
        if proc.poll() is not None:
            raise AssertionError(f"the worker exited: {proc.communicate()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("the worker never listened")


def flood_one(port: int) -> socket.socket:
    """One unauthenticated connection announcing and sending a 15 MiB 'handshake'."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        sock.sendall((FLOOD_MIB * MIB).to_bytes(4, "big"))
        chunk = bytes(MIB)
        for _ in range(FLOOD_MIB):
            sock.sendall(chunk)
    except OSError:  # the worker cut it off
        pass
    return sock


def test_a_flood_of_unauthenticated_connections_costs_bounded_memory(tmp_path: Path) -> None:
    port = free_port()
    env = {**program_env(tmp_path), "MASTER_PORT": str(port)}
    script = str(PROGRAMS / "flooded.py")
    master = subprocess.Popen(
        [sys.executable, script, "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    procs = [master]
    try:
        assert master.stdout is not None
        pid = json.loads(master.stdout.readline())["pid"]
        wait_listening(port, master)
        figures = [rss_mib(pid)]
        for _ in range(FLOOD_ROUNDS):
            with ThreadPoolExecutor(20) as pool:
                socks = list(pool.map(lambda _: flood_one(port), range(FLOOD_CONNECTIONS)))
            figures.append(rss_mib(pid))  # during: the connections are still open
            for sock in socks:
                sock.close()
            time.sleep(0.5)  # let the worker see them go (nothing is asserted about time)
            figures.append(rss_mib(pid))
        print(
            f"\n{FLOOD_ROUNDS} floods of {FLOOD_CONNECTIONS} connections x {FLOOD_MIB} MiB: "
            "worker RSS before, then during / after each: "
            + ", ".join(f"{mib:.1f}" for mib in figures)
            + " MiB"
        )
        assert max(figures) - figures[0] < RSS_BOUND_MIB
        procs.append(
            subprocess.Popen(
                [sys.executable, script, "1"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
        outs = finish(procs)
    finally:
        stop(procs)
    results = [json.loads(out.strip().splitlines()[-1]) for out in outs]
    assert results == [{"call": 42, "leak_free": True}, {"leak_free": True}]


def _run_with_a_victim(tmp_path: Path, victim: int) -> tuple[list[dict[str, Any]], Path]:
    traces = tmp_path / "traces"
    traces.mkdir()
    env = {
        **program_env(tmp_path / "home", PROTOREF_RPC_TRACE_DIR=str(traces)),
        "MASTER_PORT": str(free_port()),
        "VICTIM": str(victim),
    }
    driver = 2 if victim == 0 else 0
    procs = [
        subprocess.Popen(
            [sys.executable, str(PROGRAMS / "dead_peer.py"), str(rank)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(3)
    ]
    try:
        out = procs[driver].stdout
        assert out is not None
        assert out.readline().strip() == "READY"
        os.kill(procs[victim].pid, signal.SIGKILL)
        assert procs[victim].wait(30) == -signal.SIGKILL
        stdin = procs[driver].stdin
        assert stdin is not None
        stdin.write("killed\n")
        stdin.flush()
        survivors = [p for rank, p in enumerate(procs) if rank != victim]
        outs = finish(survivors)
    finally:
        stop(procs)
    return [json.loads(o.strip().splitlines()[-1]) for o in outs], traces


@pytest.mark.parametrize("victim", [1, 0], ids=["a worker", "the master"])
def test_a_killed_worker_fails_its_calls_at_once_and_is_reported(
    tmp_path: Path, victim: int
) -> None:
    results, traces = _run_with_a_victim(tmp_path, victim)
    driver = results[1] if victim == 0 else results[0]
    dead = f"worker{victim}"
    print(
        f"\n{dead} killed: the call pending on it failed after "
        f"{driver['pending_failed_after_s']:.3f} s, a later call after "
        f"{driver['later_call_failed_after_s']:.3f} s (rpc_timeout 60 s)"
    )
    for what in ("pending", "creation", "later_call"):
        assert driver[what][0] == "PeerDeadError", (what, driver[what])
        assert dead in driver[what][1]
    assert driver["survivor"] == 4
    for survivor in results:
        report = survivor["report"]
        assert report["dead_peers"] == [dead], survivor
        assert any(p.startswith("graceful shutdown incomplete") for p in report["problems"])
    # The survivors' traces (and the victim's, as far as it was written) are a prefix of a
    # behaviour of the spec: no step was logged that the dead worker made impossible.
    files = sorted(traces.glob("*.ndjson"))
    assert [p.stem for p in files if p.stem != dead] == [
        f"worker{r}" for r in range(3) if r != victim
    ]
    loaded = [load_trace(p) for p in files if len(p.read_text().splitlines()) > 1]
    merged = merge_traces(loaded)
    assert "WaitAllWorkers" not in {e.event for e in merged.events}
    report = validate_traces([merged], _rref(), SPEC_ROOT)
    assert report.all_accepted, [v.rejection for v in report.verdicts]


def _rref() -> Any:
    from tracecheck.protocols.rref import RREF  # noqa: PLC0415 - only these tests need TLC

    return RREF


#: Runs of the non-master kill in the test below (issue 28 s2 saw the wrong name in 5 of 10).
NAMING_RUNS = 4


def _kill_worker1_unlinked(tmp_path: Path) -> list[list[str]]:
    env = program_env(tmp_path / "home")
    procs = start(PROGRAMS / "dead_peer_unlinked.py", 3, env, stdin=subprocess.PIPE)
    try:
        out, stdin = procs[2].stdout, procs[2].stdin
        assert out is not None
        assert stdin is not None
        assert out.readline().strip() == "READY"
        os.kill(procs[1].pid, signal.SIGKILL)
        assert procs[1].wait(30) == -signal.SIGKILL
        stdin.write("killed\n")
        stdin.flush()
        outs = finish([procs[0], procs[2]])
    finally:
        stop(procs)
    return [json.loads(o.strip().splitlines()[-1])["dead_peers"] for o in outs]


def test_shutdown_after_a_worker_is_killed_names_only_that_worker(tmp_path: Path) -> None:
    """Issue 28 s2: after worker1 is SIGKILLed, worker2's graceful shutdown named the live
    master dead too: the master passed the barrier without worker1 and closed (its shutdown
    over) while its BarrierGo to worker2, a worker it had no link to, still waited for the
    dial; worker2 then saw the master go. Every survivor must name worker1 alone, run after
    run."""
    named = []
    for run in range(NAMING_RUNS):
        named.append(_kill_worker1_unlinked(tmp_path / f"run{run}"))
    wrong = [n for n in named if n != [["worker1"], ["worker1"]]]
    print(f"\n{NAMING_RUNS - len(wrong)} of {NAMING_RUNS} runs named worker1 alone: {named}")
    assert wrong == []


def test_graceful_shutdown_waits_for_a_master_still_calling(tmp_path: Path) -> None:
    """Issue 28 s3: followers that call rpc.shutdown() at once used to leave after the 60 s
    shutdown_timeout while the master still called them; torch waits. Graceful shutdown is now
    unbounded unless the caller asks (a death ends it: the kill tests above), so the master's
    calls go on succeeding for 61 s and every worker shuts down cleanly."""
    env = {**program_env(tmp_path / "home"), "CALL_FOR": "61"}
    procs = start(PROGRAMS / "followers_leave_at_once.py", 3, env)
    try:
        outs = finish(procs, timeout=240)
    finally:
        stop(procs)
    results = [json.loads(o.strip().splitlines()[-1]) for o in outs]
    master = results[0]
    print(f"\nthe master's calls over 61 s: {master['ok']} ok, first failure {master['failed']}")
    assert master["failed"] is None
    assert master["ok"] > 0
    assert [r["leak_free"] for r in results] == [True, True, True], results
