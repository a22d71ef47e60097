"""Multi-process runs: one torch handler per process on a TCPStore or a FileStore, real SIGKILLs.

The driver hosts the TCPStore server (or names the FileStore's file), starts one
:mod:`protoref.torch.node` process per node with a plan, reads what each prints, and kills a
node with SIGKILL when the scenario's trigger line appears. The kill is the node's ``Crash``
step: the driver takes the run's step lock (an ``flock``), so no node is in the middle of a
step, kills, waits for the process to be gone, and records ``Crash`` at that tick in its own
raw file. Every process's raw records are then merged into one trace, as for threads.

The node processes fork from a fork server (:mod:`protoref.torch.forked`) that imported torch
once, instead of each importing it (about 1.8 CPU-s a node): one server per
:func:`run_processes` call, or one for every call inside :func:`node_processes` (a campaign).
``PROTOREF_NODE_FORKSERVER=0`` starts every node with ``Popen`` instead, as does a server that
may not fork (it has more than one thread).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NamedTuple

from protoref.rendezvous.runtime.handler_trace import HandlerTracer
from protoref.torch.compat import require_torch
from protoref.torch.driver import ScenarioRun
from protoref.torch.forked import ForkedProcess, ForkServer
from protoref.torch.observe import StepContext, crash_event
from protoref.torch.run import STORE_TIMEOUT, torch_header, write_trace
from protoref.torch.timing import TickTime
from protoref.torch.values import TorchSettings

__all__ = [
    "FORKSERVER_ENV",
    "PROCESS_SCENARIOS",
    "ProcessScenario",
    "node_processes",
    "run_processes",
]

#: Real seconds per tick: processes on a loaded 2-core machine are descheduled for hundreds of
#: milliseconds; a heartbeat must not expire for that (settings below: expiry 15 ticks = 3 s).
PROCESS_TICK: Final = 0.2
#: Real seconds a node may take to print the line the driver waits for.
_WAIT: Final = 120.0
#: ``0``: start every node with ``Popen``, each importing torch (no fork server).
FORKSERVER_ENV: Final = "PROTOREF_NODE_FORKSERVER"


class _Desc(NamedTuple):
    addr: str
    pid: int
    local_id: int


@dataclass(frozen=True, slots=True)
class Kill:
    """SIGKILL node ``node`` once it printed a line starting with ``after``."""

    node: int
    after: str


@dataclass(frozen=True, slots=True)
class ProcessScenario:
    """Nodes with their plans. Every process starts at once and waits until all have imported
    torch (seconds of CPU each); then each begins its plan, except that node ``i`` of
    ``gates`` begins ``gates[i]`` ticks after the kills."""

    name: str
    store: str
    cfg: TorchSettings
    plans: tuple[tuple[Any, ...], ...]
    kills: tuple[Kill, ...] = ()
    gates: dict[int, int] = field(default_factory=dict)


class _Launcher:
    """Starts node processes: forked from one fork server (started with the first node), or
    with ``Popen`` (disabled by :data:`FORKSERVER_ENV`, or the server would not fork)."""

    def __init__(self) -> None:
        self._server: ForkServer | None = None
        self._popen = os.environ.get(FORKSERVER_ENV, "1") == "0"

    def start(self, args: dict[str, Any]) -> subprocess.Popen[str] | ForkedProcess:
        if not self._popen:
            if self._server is None:
                self._server = ForkServer()
            forked = self._server.spawn(args)
            if forked is not None:
                return forked
            self._popen = True  # the server said why, once
            self.close()
        return subprocess.Popen(
            [sys.executable, "-m", "protoref.torch.node", json.dumps(args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None


#: The launchers of the :func:`node_processes` blocks being run (the innermost last).
_SHARED: list[_Launcher] = []


@contextlib.contextmanager
def node_processes() -> Iterator[None]:
    """Inside, every :func:`run_processes` forks its nodes from one fork server, started with
    the first node and ended (with any child left) at the block's end."""
    launcher = _Launcher()
    _SHARED.append(launcher)
    try:
        yield
    finally:
        _SHARED.remove(launcher)
        launcher.close()


class _Node:
    """A node process and the lines it printed."""

    def __init__(self, launcher: _Launcher, args: dict[str, Any]) -> None:
        self.proc = launcher.start(args)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.name: str | None = None
        self.ended = False  # its output ended
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("")  # end of output

    def wait_for(self, prefix: str) -> bool:
        """Read lines until one starts with ``prefix`` (False: the process ended first)."""
        if any(s.startswith(prefix) for s in self.seen):
            return True
        deadline = time.monotonic() + _WAIT
        while not self.ended and time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            if line == "":
                self.ended = True
                return False
            self.seen.append(line)
            if line.startswith("node "):
                self.name = line.split(" ", 1)[1]
            if line.startswith(prefix):
                return True
        if self.ended:
            return False
        raise TimeoutError(
            f"no line {prefix!r} from pid {self.proc.pid} in {_WAIT} s; seen {self.seen[-5:]}"
        )

    def open_gate(self) -> None:
        """Let a gated node begin its plan."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self) -> None:
        self.wait_for("\0")  # drain to the end
        self.proc.wait(_WAIT)

    def close(self) -> None:
        """Kill the process if it still runs, reap it and close its pipes."""
        try:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(_WAIT)
        finally:
            self._reader.join(_WAIT)  # its stdout ends with the process
            for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    with contextlib.suppress(OSError):  # stdin of a dead process: broken pipe
                        pipe.close()


def run_processes(
    scenario: ProcessScenario, seed: int, folder: Path, *, tick_real: float = PROCESS_TICK
) -> ScenarioRun:
    """Run ``scenario``'s processes; the merged trace goes to ``folder``."""
    require_torch()
    dist: Any = importlib.import_module("torch.distributed")

    work = folder / f"{scenario.name}-seed{seed}"
    shutil.rmtree(work, ignore_errors=True)  # the same run made again replaces its files
    work.mkdir(parents=True)
    lock = work / "step.lock"
    clock = TickTime(time.monotonic_ns(), tick_real)
    servers: list[Any] = []  # the TCPStore server lives until the trace is written
    if scenario.store == "tcp":
        servers.append(
            dist.TCPStore(
                "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=STORE_TIMEOUT
            )
        )
        store: dict[str, Any] = {"kind": "tcp", "port": servers[0].port}
    else:
        store = {"kind": "file", "path": str(work / "store")}
    cfg = scenario.cfg
    base = {
        "store": store,
        "origin_ns": clock.origin_ns,
        "tick_real": tick_real,
        "cfg": {f: getattr(cfg, f) for f in cfg.__dataclass_fields__},
        "folder": str(work),
        "lock": str(lock),
    }
    tracer = HandlerTracer(work / "driver.jsonl", 1.0, lock=lock)
    launcher = _SHARED[-1] if _SHARED else _Launcher()
    nodes: dict[int, _Node] = {}
    try:
        for i, plan in enumerate(scenario.plans):
            nodes[i] = _Node(
                launcher,
                {
                    **base,
                    "addr": f"127.0.0.{i + 1}",
                    "seed": seed * 100 + i,
                    "raw": f"raw{i}.jsonl",
                    "gate": True,
                    "plan": list(plan),
                },
            )
        problems = _drive(scenario, nodes, StepContext(tracer, clock, cfg))
    finally:
        try:
            for node in nodes.values():
                node.close()
        finally:
            tracer.close()
            if launcher not in _SHARED:
                launcher.close()
    descs = [_desc(n.name) for n in nodes.values() if n.name is not None]
    header = torch_header(
        cfg,
        descs,
        seed=seed,
        tick_real=tick_real,
        store=scenario.store,
        scenario=scenario.name,
        processes=True,
    )
    raws = [work / "driver.jsonl", *(work / f"raw{i}.jsonl" for i in nodes)]
    out = folder / f"{scenario.name}-seed{seed}.ndjson"
    events = write_trace(raws, header, out)
    servers.clear()
    return ScenarioRun(
        scenario=scenario.name,
        seed=seed,
        store=scenario.store,
        trace=out,
        events=events,
        defect=None,
        outcomes={n.name or str(i): _outcomes(n) for i, n in nodes.items()},
        waiting={n.name or str(i): _waiting(n) for i, n in nodes.items()},
        problems=problems,
    )


def _drive(scenario: ProcessScenario, nodes: dict[int, _Node], ctx: StepContext) -> list[str]:
    """Start the plans, kill, open the late gates, wait for every node; the problems seen."""
    problems: list[str] = []
    for i, node in nodes.items():
        if not node.wait_for("node "):
            problems.append(f"node {i} ended before it started: {_stderr(node)}")
    for i, node in nodes.items():
        if i not in scenario.gates:
            node.open_gate()
    for kill in scenario.kills:
        node = nodes[kill.node]
        if not node.wait_for(kill.after):
            problems.append(f"node {kill.node} ended before {kill.after!r}")
            continue
        with ctx.step():  # no node is inside a step while the driver holds the lock
            node.proc.send_signal(signal.SIGKILL)
            node.proc.wait(_WAIT)
            assert node.name is not None
            ctx.record(crash_event(node.name))
    for delay in sorted(set(scenario.gates.values())):
        ctx.clock.sleep(delay)
        for i, d in scenario.gates.items():
            if d == delay:
                nodes[i].open_gate()
    for i, node in sorted(nodes.items()):
        node.finish()
        if node.proc.returncode not in (0, -signal.SIGKILL):
            problems.append(f"node {i} exited {node.proc.returncode}: {_stderr(node)}")
    return problems


def _desc(name: str) -> _Desc:
    addr, pid, local_id = name.rsplit("_", 2)
    return _Desc(addr, int(pid), int(local_id))


def _outcomes(node: _Node) -> list[str]:
    out = []
    for line in node.seen:
        if line.startswith("joined "):
            rank, world, rnd = line.split()[1:]
            out.append(f"{rank}/{world}@{rnd}")
        elif line.startswith("outcome "):
            out.append(line.split()[1])
    return out + (["killed"] if node.proc.returncode == -signal.SIGKILL else [])


def _waiting(node: _Node) -> list[int]:
    return [int(line.split()[1]) for line in node.seen if line.startswith("waiting ")]


def _stderr(node: _Node) -> str:
    if node.proc.poll() is None or node.proc.stderr is None:
        return ""
    return node.proc.stderr.read()[-2000:]


#: join timeout 600 ticks (torch's default 600 s) = 120 real s: on a 2-core machine under a
#: load of ~28, 200 ticks (40 s) were once not enough for the late joiners of the FileStore
#: run, and the first node timed out of its join
_SETTINGS: Final = {"join": 600, "keep_alive_interval": 3, "keep_alive_max_attempt": 5}
_EXPIRY_PLUS: Final = 3 * 5 + 3  # keep_alive_interval x max attempts, + 3 ticks

PROCESS_SCENARIOS: Final[dict[str, ProcessScenario]] = {
    s.name: s
    for s in (
        # min 2, max 3 on a TCPStore: three complete; one is SIGKILLed; the survivors' sanitize
        # drops it, num_nodes_waiting() stays 0, and their agents re-rendezvous (round 1).
        ProcessScenario(
            "processes_tcp_kill_after_completion",
            "tcp",
            TorchSettings(min_nodes=2, max_nodes=3, **_SETTINGS),
            plans=(
                ("join", ["poll_waiting", _EXPIRY_PLUS], "join", "shutdown"),
                ("join", ["poll_waiting", _EXPIRY_PLUS], "join", ["poll_closed", 10], "shutdown"),
                ("join", "hold"),
            ),
            kills=(Kill(2, "joined"),),
        ),
        # min = max = 3 on a FileStore: two join, one is SIGKILLed while it waits; two more
        # join after its heartbeat expired; the round completes without it.
        ProcessScenario(
            "processes_file_kill_in_join",
            "file",
            TorchSettings(min_nodes=3, max_nodes=3, **_SETTINGS),
            plans=(
                ("join", ["poll_closed", 20], "shutdown"),
                ("join", "hold"),
                ("join", ["sleep", 2], "shutdown"),
                ("join", ["poll_closed", 20], "shutdown"),
            ),
            kills=(Kill(1, "event Delay"),),
            gates={2: _EXPIRY_PLUS, 3: _EXPIRY_PLUS},
        ),
    )
}
