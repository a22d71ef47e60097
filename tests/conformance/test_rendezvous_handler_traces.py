"""Traces of the real handler (threads on the in-memory store, processes on the file store and
on a local etcd) are accepted by TLC; a planted handler bug is rejected.

The handlers run with real threads, real waits and a :class:`TickClock`; see
:mod:`protoref.rendezvous.runtime.handler_trace` for why their traces replay (ticks, step lock,
merge).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from protoref.rendezvous.adapters.etcd_server import EtcdServer
from protoref.rendezvous.adapters.store import FileStore, InMemoryStore
from protoref.rendezvous.core import actions, statecheck
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings, RendezvousState
from protoref.rendezvous.runtime.clock import TickClock
from protoref.rendezvous.runtime.handler import DynamicRendezvousHandler
from protoref.rendezvous.runtime.handler_trace import (
    HandlerTracer,
    TraceMergeError,
    handler_header,
    merge,
)
from protoref.rendezvous.sim.faults import ranks_any_order
from tracecheck.protocols.rendezvous import RENDEZVOUS
from tracecheck.replay.artifacts import failure_note
from tracecheck.replay.validate import validate_traces
from tracecheck.replay.verdicts import ValidationReport
from tracecheck.traces.load import load_trace

ROOT = Path(__file__).resolve().parent.parent.parent
SPEC_ROOT = ROOT / "spec"
TICK = 2.0**-4
LIMIT = 60.0  # seconds a node may take before the test fails (never reached)


def _settings(n: int) -> RendezvousSettings:
    return RendezvousSettings(
        run_id="traced",
        min_nodes=n,
        max_nodes=n,
        keep_alive_interval=4 * TICK,
        heartbeat_timeout=8 * TICK,
        cache_duration=TICK,
        join_timeout=64.0,
    )


def _threads(n: int, tmp: Path) -> Path:
    """n handler threads rendezvous, ask is_closed / num_nodes_waiting, one closes."""
    cfg, store = _settings(n), InMemoryStore()
    tracer = HandlerTracer(tmp / "raw.jsonl", TICK)
    nodes = [NodeDesc(f"10.0.0.{8 + i}", 7, i) for i in range(n)]
    hs = [
        DynamicRendezvousHandler(store, cfg, node=d, clock=TickClock(TICK), tracer=tracer)
        for d in nodes
    ]
    errors: list[BaseException] = []

    def go(h: DynamicRendezvousHandler) -> None:
        try:
            h.next_rendezvous()
            h.num_nodes_waiting()
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=go, args=(h,)) for h in hs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(LIMIT)
    assert not errors, errors
    threading.Event().wait(6 * TICK)  # long enough for heartbeats to fire
    hs[0].set_closed()
    assert hs[1].is_closed()
    for h in hs:
        h._heartbeats.close()
    tracer.close()
    out = tmp / "threads.ndjson"
    merge([tmp / "raw.jsonl"], handler_header(cfg, nodes, TICK), out)
    return out


def _validate(paths: list[Path]) -> ValidationReport:
    return validate_traces([load_trace(p) for p in paths], RENDEZVOUS, SPEC_ROOT)


#: One node per process on a shared file store; the step lock is a file of the run.
_NODE = """
import sys
from pathlib import Path
from protoref.rendezvous.runtime.clock import TickClock
from protoref.rendezvous.adapters.etcd_server import EtcdServer
from protoref.rendezvous.runtime.handler import DynamicRendezvousHandler
from protoref.rendezvous.runtime.handler_trace import HandlerTracer
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings
from protoref.rendezvous.runtime.node_main import store_from_url
tick, store_url, run_dir = 2.0**-4, sys.argv[1], Path(sys.argv[2])
index, n = int(sys.argv[3]), int(sys.argv[4])
cfg = RendezvousSettings(run_id="traced", min_nodes=n, max_nodes=n, keep_alive_interval=4 * tick,
    heartbeat_timeout=8 * tick, cache_duration=tick, join_timeout=64.0)
tracer = HandlerTracer(run_dir / f"raw{index}.jsonl", tick, lock=run_dir / "step.lock")
node = NodeDesc("127.0.0.1", 100 + index, 0)
h = DynamicRendezvousHandler(store_from_url(store_url), cfg, node=node, clock=TickClock(tick),
    tracer=tracer)
info = h.next_rendezvous()
h.num_nodes_waiting()
h._heartbeats.close()
tracer.close()
print(info.rank)
"""


def _processes(n: int, tmp: Path, store_url: str) -> Path:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _NODE, store_url, str(tmp), str(i), str(n)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(n)
    ]
    ranks = sorted(int(p.communicate(timeout=LIMIT)[0]) for p in procs)
    assert ranks == list(range(n))
    nodes = [NodeDesc("127.0.0.1", 100 + i, 0) for i in range(n)]
    out = tmp / "processes.ndjson"
    raws = [tmp / f"raw{i}.jsonl" for i in range(n)]
    merge(raws, handler_header(_settings(n), nodes, TICK), out)
    return out


def _reversed_ranks(s: RendezvousState) -> RendezvousState:
    """Planted bug: ranks in the reverse of the _NodeDesc order (G1 broken)."""
    order = sorted(s.participants, reverse=True)
    return s.replace(complete=True, deadline=None, participants={m: r for r, m in enumerate(order)})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    made: dict[str, Callable[[], Path]] = {
        "threads": lambda: _threads(3, tmp_path_factory.mktemp("threads")),
        "file": lambda: _file_run(3, tmp_path_factory.mktemp("file")),
        "etcd": lambda: _etcd_run(3, tmp_path_factory.mktemp("etcd")),
    }
    return {name: make() for name, make in made.items()}


def _file_run(n: int, tmp: Path) -> Path:
    store_dir = tmp / "store"
    store_dir.mkdir()
    out = _processes(n, tmp, f"file:{store_dir}")
    assert FileStore(store_dir).get("torch.rendezvous.traced") is not None
    return out


def _etcd_run(n: int, tmp: Path) -> Path:
    """Processes on a throwaway local etcd (Debian's etcd-server; a missing binary fails)."""
    with EtcdServer() as etcd:
        return _processes(n, tmp, f"{etcd.url}/traced")


def test_real_handler_traces_are_accepted(runs: dict[str, Path]) -> None:
    paths = list(runs.values())
    report = _validate(paths)
    for path, verdict in zip(paths, report.verdicts, strict=True):
        note = failure_note([load_trace(path)], report, RENDEZVOUS, SPEC_ROOT)
        assert verdict.accepted, note
    events = {e.event for p in paths for e in load_trace(p).events}
    # the run exercised waiting, the read-only syncs and time
    assert {"Delay", "ReadOnlySync", "Tick", "MarkRendezvousClosed", "Finish"} <= events


def test_planted_handler_bug_is_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actions, "mark_rendezvous_complete", _reversed_ranks)
    # the holders' own rank check would refuse the reversed ranks before the checker sees them
    monkeypatch.setattr(statecheck, "complete_ranks_problem", ranks_any_order)
    path = _threads(3, tmp_path)
    report = _validate([path])
    (verdict,) = report.verdicts
    assert not verdict.accepted
    assert verdict.rejection is not None
    bad = verdict.rejection.event
    # the completing join is the first step no spec behaviour explains
    assert bad.event == "AddToParticipants"
    assert bad.post["local"]["complete"] is True


def test_merge_refuses_records_that_contradict_the_store(tmp_path: Path) -> None:
    _threads(2, tmp_path)
    lines = (tmp_path / "raw.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    writes = [i for i, r in enumerate(records) if r["event"]["event"] == "SyncWriteWon"]
    nodes = [NodeDesc(f"10.0.0.{8 + i}", 7, i) for i in range(2)]
    header = handler_header(_settings(2), nodes, TICK)

    def merged(edited: list[dict[str, object]], name: str) -> None:
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in edited), encoding="utf-8")
        merge([path], header, tmp_path / "out.ndjson")

    # A "new" write of a version older than the latest: refused at that write.
    old = [dict(r) for r in records]
    old[writes[2]]["token"] = old[writes[0]]["token"]
    with pytest.raises(TraceMergeError, match=r"old.jsonl:\d+: a won write of token"):
        merged(old, "old.jsonl")
    # A won write that leaves the latest version (set_state's success when the store already
    # holds exactly the bytes written, CasMatches(n) \/ store = local[n]) is a store history...
    records.insert(writes[1] + 1, {**records[writes[1]], "stamp": records[writes[1]]["stamp"] + 1})
    merged(records, "same.jsonl")
    # ... but a read must still see the latest version.
    stale = [dict(r) for r in records]
    read = next(i for i, r in enumerate(stale) if r["event"]["event"] == "SyncRead")
    stale[read]["token"] = "elsewhere"
    with pytest.raises(TraceMergeError, match=r"stale.jsonl:\d+: SyncRead saw token"):
        merged(stale, "stale.jsonl")


def test_header_names_a_setting_that_is_not_whole_ticks() -> None:
    cfg = _settings(2).model_copy(update={"last_call_timeout": 0.1})
    with pytest.raises(ValueError, match=r"last_call_timeout = 0\.1 s"):
        handler_header(cfg, [NodeDesc("h", 1, 0)], TICK)
