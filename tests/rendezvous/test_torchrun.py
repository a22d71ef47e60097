"""``torchrun --rdzv-backend=protoref``: real torchrun agents as separate processes on loopback,
each worker calling ``init_process_group("gloo")`` and an all-reduce
(``tests/support/torchrun_worker.py``), on the file store and on etcd; and the handler through
torch's own registry in this process.

Times are modest on purpose (keep-alive 1 s, short last calls); no test asserts a duration.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protoref.rendezvous.adapters.etcd_server import EtcdServer

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "support" / "torchrun_worker.py"
LIMIT = 240.0  # seconds a job may take before the test fails (never reached when correct)
CONF = "join_timeout=120,keep_alive_interval=1,heartbeat_timeout=2,read_timeout=60"


def _descendants(root: int) -> list[int]:
    """Every process below ``root`` (from /proc; Linux, as the tests' loopback set-up)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Agent:
    """One ``torchrun`` agent in a session of its own (so its workers can be killed with it)."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], logs: Path) -> None:
        self.name = name
        self.log = logs / f"{name}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "torch.distributed.run", *args, str(WORKER)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def wait(self, timeout: float = LIMIT) -> int:
        return self.proc.wait(timeout=timeout)

    def kill_node(self) -> None:
        """SIGKILL the agent and its workers: the node is gone. torch starts each worker in a
        session of its own, so the workers are found as the agent's descendants first."""
        workers = _descendants(self.proc.pid)
        os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()

    def tail(self) -> str:
        lines = self.log.read_text(errors="replace").splitlines()
        return f"--- {self.name} ---\n" + "\n".join(lines[-25:])


@pytest.fixture
def job(tmp_path: Path, torch_version: str) -> Iterator[dict[str, Any]]:
    """A job's folders; every agent still running at the end is killed with its workers."""
    (tmp_path / "out").mkdir()
    (tmp_path / "logs").mkdir()
    state: dict[str, Any] = {"tmp": tmp_path, "agents": []}
    yield state
    for agent in state["agents"]:
        if agent.proc.poll() is None:
            agent.kill_node()


def _start(
    job: dict[str, Any],
    name: str,
    endpoint: str,
    nnodes: str,
    *,
    conf: str = CONF,
    max_restarts: int = 0,
    env: dict[str, str] | None = None,
) -> Agent:
    tmp: Path = job["tmp"]
    args = [
        "--rdzv-backend=protoref",
        f"--rdzv-endpoint={endpoint}",
        f"--rdzv-id=job-{tmp.name}",
        f"--nnodes={nnodes}",
        "--nproc-per-node=1",
        "--local-addr=127.0.0.1",
        "--monitor-interval=0.2",
        f"--max-restarts={max_restarts}",
        f"--rdzv-conf={conf}",
    ]
    full = {
        **os.environ,
        "PROTOREF_TEST_OUT": str(tmp / "out"),
        "PROTOREF_TEST_TAG": name,
        "GLOO_SOCKET_IFNAME": "lo",
        "PYTHONWARNINGS": "ignore",
        **(env or {}),
    }
    agent = Agent(name, args, full, tmp / "logs")
    job["agents"].append(agent)
    return agent


def _results(job: dict[str, Any]) -> list[dict[str, Any]]:
    out: Path = job["tmp"] / "out"
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(out.glob("worker-*.json"))]


def _finish(job: dict[str, Any]) -> list[dict[str, Any]]:
    """Every agent exits 0; the workers' result lines."""
    agents: list[Agent] = job["agents"]
    codes = [a.wait() for a in agents if a.proc.returncode is None or a.proc.returncode >= 0]
    logs = "\n".join(a.tail() for a in agents)
    assert all(c == 0 for c in codes), f"agents exited {codes}\n{logs}"
    return _results(job)


def _one_group(results: list[dict[str, Any]], world: int) -> None:
    """The results are one group of ``world`` workers that all-reduced together."""
    assert sorted(r["rank"] for r in results) == list(range(world)), results
    for r in results:
        assert r["world"] == r["env_world"] == r["group_world"] == world, r
        assert 0 <= r["rank"] == r["env_rank"] < r["world"], r
        assert r["sum"] == world * (world + 1) // 2, r  # every rank took part
    assert len({r["master"] for r in results}) == 1, results


def _wait_for(job: dict[str, Any], test: Any, what: str) -> list[dict[str, Any]]:
    end = time.monotonic() + LIMIT
    while not test(results := _results(job)):
        if time.monotonic() > end:
            logs = "\n".join(a.tail() for a in job["agents"])
            pytest.fail(f"no {what} after {LIMIT:.0f} s: {results}\n{logs}")
        time.sleep(0.2)
    return results


def test_two_node_job_on_the_file_store(job: dict[str, Any]) -> None:
    endpoint = f"file:{job['tmp'] / 'rdzv'}"
    for name in ("a", "b"):
        _start(job, name, endpoint, "2", conf=CONF + ",last_call_timeout=1")
    results = _finish(job)
    _one_group(results, 2)
    assert {r["agent_store"] for r in results} == {"True"}  # workers share rank 0's TCPStore


def test_two_node_job_on_etcd_without_store_sharing(
    job: dict[str, Any], etcd_server: EtcdServer
) -> None:
    """etcd (the several-hosts store), and ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: rank 0's
    worker serves the workers' store on a port its agent chose, as torch does."""
    endpoint = f"{etcd_server.url}/torchrun-{job['tmp'].name}"
    env = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    for name in ("a", "b"):
        _start(job, name, endpoint, "2", conf=CONF + ",last_call_timeout=1", env=env)
    results = _finish(job)
    _one_group(results, 2)
    assert {r["agent_store"] for r in results} == {"False"}


def test_a_worker_that_fails_at_once_is_restarted(job: dict[str, Any]) -> None:
    """Node a's worker exits 1 at once; its agent re-rendezvouses (--max-restarts=1), node b's
    agent sees it waiting and joins too. With ``TORCH_ELASTIC_WORKER_IDENTICAL=1`` (no store
    exchange between the agents, the ranks straight from the rendezvous) this is the schedule
    of the notes where torch 2.13 hands out rank 1 in a world of 1: every worker here must get
    a rank below its world size, in one group."""
    endpoint = f"file:{job['tmp'] / 'rdzv'}"
    identical = {"TORCH_ELASTIC_WORKER_IDENTICAL": "1"}
    conf = CONF + ",last_call_timeout=1"
    _start(
        job,
        "a",
        endpoint,
        "2",
        conf=conf,
        max_restarts=1,
        env={**identical, "PROTOREF_TEST_FAIL": "1"},
    )
    _start(job, "b", endpoint, "2", conf=conf, max_restarts=1, env=identical)
    results = _finish(job)
    _one_group(results, 2)
    assert {r["tag"]: r["restart"] for r in results}["a"] == 1  # a's worker ran a second time


def test_the_survivor_of_a_killed_agent_re_rendezvouses(job: dict[str, Any]) -> None:
    """``--nnodes=1:2``: both agents run a 2-node group; agent b and its worker are SIGKILLed.
    b's heartbeats stop; a's handler drops b and counts a as waiting, so a's agent restarts its
    workers in a new round of one node (torch 2.13 never does: pytorch#111646)."""
    tmp: Path = job["tmp"]
    endpoint = f"file:{tmp / 'rdzv'}"
    env = {"PROTOREF_TEST_HOLD": str(tmp)}
    conf = CONF + ",last_call_timeout=2"
    _start(job, "a", endpoint, "1:2", conf=conf, env=env)
    b = _start(job, "b", endpoint, "1:2", conf=conf, env=env)

    def both(results: list[dict[str, Any]]) -> bool:
        group = [r for r in results if r["group_world"] == 2]
        return len(group) == 2 and len({r["master"] for r in group}) == 1

    before = [r for r in _wait_for(job, both, "2-node group") if r["group_world"] == 2]
    _one_group(before, 2)
    b.kill_node()
    (tmp / "release").touch()  # a held worker of a 1-node group may now finish

    def alone(results: list[dict[str, Any]]) -> bool:
        return any(r["tag"] == "a" and r["group_world"] == 1 for r in results)

    after = [r for r in _wait_for(job, alone, "1-node group") if r["group_world"] == 1]
    _one_group(after, 1)
    assert job["agents"][0].wait() == 0, job["agents"][0].tail()


def test_the_handler_through_torchs_registry(tmp_path: Path, torch_version: str) -> None:
    """torch's registry finds the entry point; the handler's answers and errors are torch's."""
    from torch.distributed.elastic.rendezvous import api  # noqa: PLC0415 - torch is optional
    from torch.distributed.elastic.rendezvous.registry import get_rendezvous_handler  # noqa: PLC0415

    def params(endpoint: str, **conf: object) -> Any:
        return api.RendezvousParameters(
            "protoref", endpoint, "reg", 1, 1, local_addr="127.0.0.1", **conf
        )

    h = get_rendezvous_handler(params(f"file:{tmp_path}", keep_alive_interval="1"))
    assert isinstance(h, api.RendezvousHandler)
    assert h.get_backend() == "protoref"
    assert h.use_agent_store
    info = h.next_rendezvous()
    assert (info.rank, info.world_size) == (0, 1)
    info.store.set("k", b"v")
    assert info.store.get("k") == b"v"
    assert info.bootstrap_store_info.master_addr == "127.0.0.1"
    assert h.num_nodes_waiting() == 0
    h.set_closed()
    assert h.is_closed()
    with pytest.raises(api.RendezvousClosedError):
        h.next_rendezvous()
    assert h.shutdown()
    with pytest.raises(ValueError, match="unknown key"):
        get_rendezvous_handler(params(f"file:{tmp_path}", join_timout="1"))
    with pytest.raises(ValueError, match="not host:port"):
        get_rendezvous_handler(params("nowhere"))
