"""Several OS processes rendezvous through etcd and through the file store (node_main)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from protoref.rendezvous.adapters.etcd_server import EtcdServer
from protoref.rendezvous.adapters.etcd_store import DEFAULT_PREFIX, EtcdStore
from protoref.rendezvous.adapters.store import FileStore
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings
from protoref.rendezvous.runtime.handler_trace import handler_header, merge
from protoref.rendezvous.runtime.node_main import main, store_from_url
from tracecheck.protocols.rendezvous import RENDEZVOUS
from tracecheck.replay.artifacts import failure_note
from tracecheck.replay.validate import validate_traces
from tracecheck.traces.load import load_trace

SPEC_ROOT = Path(__file__).resolve().parent.parent.parent / "spec"

LIMIT = 120.0  # seconds a node process may take before the test fails (never reached)


def _node(store: str, run_id: str, n: int, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "protoref.rendezvous.runtime.node_main", "--store", store]
    cmd += ["--run-id", run_id, "--min-nodes", str(n), "--max-nodes", str(n)]
    cmd += ["--addr", "127.0.0.1", "--join-timeout", str(LIMIT), *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _results(procs: list[subprocess.Popen[str]]) -> list[list[dict[str, Any]]]:
    """Each process's JSON lines; every process must exit 0."""
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=LIMIT)
        assert p.returncode == 0, f"node exited {p.returncode}: {stdout} {stderr}"
        out.append([json.loads(line) for line in stdout.splitlines()])
    return out


def _check_round(results: list[list[dict[str, Any]]], n: int, round_: int) -> None:
    assert all(len(lines) == 1 for lines in results), results
    got = [lines[0] for lines in results]
    assert sorted(g["rank"] for g in got) == list(range(n)), got  # distinct ranks 0..n-1
    assert {g["world_size"] for g in got} == {n}, got
    assert {g["round"] for g in got} == {round_}, got  # one round, the same for everyone
    # ranks follow the sorted node descriptors "addr_pid_localid" (one addr here: by pid)
    pids = [int(g["node"].split("_")[1]) for g in sorted(got, key=lambda g: g["rank"])]
    assert pids == sorted(pids)
    assert len(set(pids)) == n


def test_processes_rendezvous_through_etcd(etcd_server: EtcdServer, etcd_prefix: str) -> None:
    """Round 0 by four processes; they exit without leaving; four new ones find them dead
    (heartbeats expired), sanitize them away, and complete round 1 (an elastic restart)."""
    n = 4
    url = f"{etcd_server.url}{etcd_prefix}"
    # Dead after 3 missed beats (3 s): short enough for the test, long enough that a live but
    # CPU-starved node (2 shared cores) is not taken for dead.
    beat = ("--keep-alive-interval", "1.0")
    first = _results([_node(url, "mp-etcd", n, *beat) for _ in range(n)])
    _check_round(first, n, 0)
    second = _results([_node(url, "mp-etcd", n, *beat) for _ in range(n)])
    _check_round(second, n, 1)
    # The state sits under the run's prefix, as JSON, never pickled
    with EtcdStore(etcd_server.endpoint, prefix=etcd_prefix) as store:
        got = store.get("torch.rendezvous.mp-etcd")
    assert got is not None
    assert json.loads(got.value)["round"] == 1  # (how many remain depends on exit timing)


def test_processes_rendezvous_through_the_file_store(tmp_path: Path) -> None:
    n = 3
    procs = [_node(f"file:{tmp_path}", "mp-file", n) for _ in range(n)]
    _check_round(_results(procs), n, 0)


def _args(store: str, n: int = 1, *extra: str) -> list[str]:
    return ["--store", store, "--run-id", "r", "--min-nodes", str(n), "--max-nodes", str(n), *extra]


def test_unreachable_etcd_is_a_json_error_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(_args(f"etcd://127.0.0.1:{port}", 1, "--request-timeout", "2")) == 1
    error = json.loads(capsys.readouterr().out)
    assert error["error"] == "RendezvousConnectionError"
    assert f"http://127.0.0.1:{port}" in error["message"]


def test_missing_file_store_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args(f"file:{tmp_path / 'missing'}")) == 1
    assert json.loads(capsys.readouterr().out)["error"] == "RendezvousConnectionError"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (_args("memory"), "expected etcd://"),
        (_args("etcd://"), "no host:port"),
        (_args("file:"), "needs a directory"),
        (_args("etcd://h:1", 1, "--min-nodes", "3"), "min_nodes"),  # min 3 > max 1
        (_args("etcd://h:1", 1, "--rounds", "0"), "--rounds"),
        (_args("etcd://h:1", 1, "--request-timeout", "0"), "request_timeout"),
    ],
)
def test_bad_arguments_exit_2(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert needle in capsys.readouterr().err


def test_store_from_url(tmp_path: Path) -> None:
    etcd = store_from_url("etcd://10.1.2.3:2379/jobs/seven")
    assert isinstance(etcd, EtcdStore)
    assert (etcd.endpoint, etcd.prefix) == ("http://10.1.2.3:2379", "/jobs/seven/")
    plain = store_from_url("etcds://h:2379")
    assert isinstance(plain, EtcdStore)
    assert (plain.endpoint, plain.prefix) == ("https://h:2379", DEFAULT_PREFIX)
    files = store_from_url(f"file:{tmp_path}")
    assert isinstance(files, FileStore)
    assert files.directory == tmp_path


# --------------------------------------------------------------------------- traced runs

TICK = 2.0**-4


def _traced_run(store: str, run_dir: Path, n: int = 3) -> Path:
    """n traced node processes; their raw records merged into one trace."""
    # heartbeats every 16 ticks (1 s): a CPU-starved node is not taken for dead (3 s)
    extra = ("--keep-alive-interval", str(16 * TICK), "--trace-dir", str(run_dir))
    got = _results([_node(store, "traced", n, *extra) for _ in range(n)])
    _check_round(got, n, 0)
    nodes = []
    for lines in got:
        addr, pid, local_id = lines[0]["node"].rsplit("_", 2)
        nodes.append(NodeDesc(addr, int(pid), int(local_id)))
    cfg = RendezvousSettings(
        run_id="traced",
        min_nodes=n,
        max_nodes=n,
        join_timeout=LIMIT,
        keep_alive_interval=16 * TICK,
        cache_duration=TICK,
    )
    out = run_dir / "trace.ndjson"
    merge(sorted(run_dir.glob("raw-*.jsonl")), handler_header(cfg, nodes, TICK), out)
    return out


def test_traced_processes_on_the_file_store_are_accepted_by_tlc(tmp_path: Path) -> None:
    store_dir, run_dir = tmp_path / "store", tmp_path / "run"
    store_dir.mkdir()
    run_dir.mkdir()
    trace = _traced_run(f"file:{store_dir}", run_dir)
    report = validate_traces([load_trace(trace)], RENDEZVOUS, SPEC_ROOT)
    (verdict,) = report.verdicts
    assert verdict.accepted, failure_note([load_trace(trace)], report, RENDEZVOUS, SPEC_ROOT)


def test_traced_processes_on_etcd_merge(
    etcd_server: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    trace = _traced_run(f"{etcd_server.url}{etcd_prefix}", tmp_path)
    report = validate_traces([load_trace(trace)], RENDEZVOUS, SPEC_ROOT)
    assert report.verdicts[0].accepted
