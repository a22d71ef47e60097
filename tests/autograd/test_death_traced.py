"""A worker killed (SIGKILL) mid-backward, traced (issue 26 s4e): the survivors report the
death they detect (``PeerDied``), the dead worker's trace keeps every event it logged (one
write per line), and the merged autograd traces of the three processes are accepted by TLC
(the header declares every worker crashable). One wrong observation is rejected: a survivor
that says it acknowledged the dead worker's part of the pass as done."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from support.autograd_programs import PROGRAMS
from support.programs import finish, program_env, start, stop
from support.rref_runtime import SPEC_ROOT
from tracecheck.protocols.autograd import AUTOGRAD
from tracecheck.replay.validate import validate_traces
from tracecheck.replay.verdicts import TraceVerdict
from tracecheck.traces.load import load_trace, merge_traces

#: The survivors must end within this.
BOUND_S = 90.0
NAMES = ("worker0", "worker1", "worker2")


def _verdict(folder: Path) -> tuple[TraceVerdict, dict[str, int]]:
    trace = merge_traces([load_trace(folder / f"{n}.ndjson") for n in NAMES])
    report = validate_traces([trace], AUTOGRAD, SPEC_ROOT)
    (one,) = report.verdicts
    return one, dict(report.coverage)


def test_a_traced_run_with_a_death_is_accepted(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    env = program_env(tmp_path, PROTOREF_RPC_TRACE_DIR=str(traces))
    procs = start(PROGRAMS / "dead_traced.py", 3, env)
    try:
        out = procs[0].stdout
        assert out is not None
        assert out.readline().strip() == "READY"
        os.kill(procs[2].pid, signal.SIGKILL)
        assert procs[2].wait(30) == -signal.SIGKILL
        outs = finish(procs[:2], timeout=BOUND_S)
    finally:
        stop(procs)
    driver = json.loads(outs[0].strip().splitlines()[-1])
    assert "died" in driver["backward_error"], driver
    assert driver["new_context_grad"] == 3.0
    folder = traces / "autograd"
    one, coverage = _verdict(folder)
    assert one.accepted, (one.rejection, one.explanation)
    assert coverage["PeerDied"] == 2  # each survivor reports it
    # the failed acknowledgement Crash(worker2) makes up for the pass waiting on it
    assert coverage["ProcessBackwardAck"] >= 1

    path = folder / "worker1.ndjson"
    lines = path.read_text("utf-8").splitlines()
    for i, line in enumerate(lines):
        record: dict[str, Any] = json.loads(line)
        if record.get("event") == "ProcessBackwardAck" and record["args"]["msg"]["src"] == 2:
            assert record["args"]["msg"]["flag"] is False
            record["args"]["msg"]["flag"] = True  # "the dead worker's part went well"
            lines[i] = json.dumps(record)
            break
    else:
        raise AssertionError("worker1 took no acknowledgement of worker2's")
    path.write_text("\n".join(lines) + "\n", "utf-8")
    wrong, _ = _verdict(folder)
    assert not wrong.accepted
    assert wrong.rejection is not None
    assert wrong.rejection.event is not None
    assert wrong.rejection.event.event == "ProcessBackwardAck"
