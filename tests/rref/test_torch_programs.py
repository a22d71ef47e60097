"""torch RPC programs run on protoref.rpc with only the import changed (issue #20 section 3).

Each program in tests/rref/programs/ is written as a torch user writes one (functions in the
script, ``rpc.init_rpc(name, rank=..., world_size=...)``, MASTER_ADDR/MASTER_PORT, no secret
configured) and runs as one process per rank. Where torch is installed, the very same text with
``import torch.distributed.rpc as rpc`` instead of ours runs on torch too, and both must print
the same results. The traces the protoref runs write (PROTOREF_RPC_TRACE_DIR) go through TLC.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from support.programs import HAS_TORCH, PROGRAMS, program_env, run, torch_text
from support.rref_runtime import merged_trace, validate_rref

#: What worker 0 of shapes.py prints (torch 2.13 prints the same: see the torch test).
SHAPES: dict[str, Any] = {
    "worker_info": ["worker0", 0, "worker1", 1],
    "value_returned": [3, 7, 11, 15, 19],
    "rref_argument_user_to_owner": "worker1",
    "user_to_user": 5,
    "owner_to_user": [1, 2, 3],
    "rref_returned": ["worker1", False, {"k": 1}],
    "then_chain": 30,
    "async_execution": [6, 10],
    "rref_helpers": [11, 13, 16, 116, 6],
    "remote_error": "ValueError",
    "called_worker_name": "worker2",
}
DROP_MANY_VALUES = {"rrefs": 200, "values": 1115000, "shared_sum": 208930}
#: What worker 0 of tensors.py prints (torch 2.13 prints the same).
TENSORS: dict[str, Any] = {
    "rpc_sync": ["torch.float32", [4.0, 4.0]],
    "rpc_async": ["torch.int64", [1, 3, 5, 7]],
    "remote": ["torch.float32", [[2.0, 1.0], [1.0, 2.0]]],
    "rref_argument": ["torch.float32", 1.5],
    "bool_and_empty": [["torch.bool", [False, True]], ["torch.float32", []]],
}
#: What worker 0 of values.py prints (torch 2.13 prints the same): torch's value semantics.
VALUES: dict[str, Any] = {
    "method_as_value": [15, 16],
    "class_as_value": 7,
    "numpy": ["ndarray", [0.0, 2.0, 4.0, 6.0], "float32"],
    "module": ["Linear", [2.5]],
    "sets": [1, 2, 3],
    "user_exception_value": ["MyError", ["as a value"]],
    "user_exception_raised": True,
    "rref_in_argument": ["mine", [1, 2, 3], "worker0"],
    "rref_in_result": ["made on worker1", {"k": 4}, "worker1"],
    "rrefs_fetched": [["worker2", 5], ["worker2", 6]],
    "wait_all": [10, 11, 12, 13],
    "collect_all": [10, 11, 12, 13],
}


def test_shapes_run_unchanged_and_their_traces_are_accepted(tmp_path: Path) -> None:
    home, traces = tmp_path / "home", tmp_path / "traces"
    traces.mkdir()
    env = program_env(home, PROTOREF_RPC_TRACE_DIR=str(traces))
    out = run(PROGRAMS / "shapes.py", 3, env)
    assert out[0] == SHAPES
    # Nobody configured a secret: the per-user one was made, private to its user.
    secret = home / "protoref" / "rpc-secret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE(secret.parent.stat().st_mode) == 0o700
    for rank in range(3):
        (traces / f"worker{rank}.ndjson").rename(traces / f"w{rank}.ndjson")
    trace = merged_trace(traces, 3)
    events = {e.event for e in trace.events}
    assert {"Remote", "PrepareChildFork", "AddForkOfOwnerIfNotPresent", "DestroyInstance"} <= events
    report = validate_rref(trace)
    assert report.all_accepted, [v.rejection for v in report.verdicts]


def test_two_hundred_rrefs_dropped_then_a_graceful_shutdown_is_leak_free(tmp_path: Path) -> None:
    out = run(PROGRAMS / "drop_many.py", 2, program_env(tmp_path))
    assert {k: out[0][k] for k in DROP_MANY_VALUES} == DROP_MANY_VALUES
    for worker in out:
        assert worker["report"] == {"leak_free": True, "leaks": {}, "problems": []}


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install torch==2.13.0)")
def test_tensors_travel_as_in_torch_programs(tmp_path: Path) -> None:
    out = run(PROGRAMS / "tensors.py", 2, program_env(tmp_path))
    assert out[0] == TENSORS


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install torch==2.13.0)")
def test_values_travel_as_torch_carries_them_and_the_traces_are_accepted(tmp_path: Path) -> None:
    """Issue 26 §2: functions and classes by name, other values pickled between authenticated
    workers, RRefs inside any value both ways, torch.futures.wait_all on rpc_async's futures."""
    traces = tmp_path / "traces"
    traces.mkdir()
    out = run(PROGRAMS / "values.py", 3, program_env(tmp_path, PROTOREF_RPC_TRACE_DIR=str(traces)))
    assert out[0] == VALUES
    for rank in range(3):
        (traces / f"worker{rank}.ndjson").rename(traces / f"w{rank}.ndjson")
    report = validate_rref(merged_trace(traces, 3))
    assert report.all_accepted, [v.rejection for v in report.verdicts]


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install torch==2.13.0)")
@pytest.mark.parametrize(
    ("program", "ranks"),
    [("shapes.py", 3), ("drop_many.py", 2), ("tensors.py", 2), ("values.py", 3)],
)
def test_the_same_program_text_gives_the_same_results_on_torch(
    tmp_path: Path, program: str, ranks: int
) -> None:
    script = tmp_path / program
    script.write_text(torch_text(program), encoding="utf-8")
    out = run(script, ranks, program_env(tmp_path / "home"))
    if program == "shapes.py":
        assert out[0] == SHAPES
    elif program == "tensors.py":
        assert out[0] == TENSORS
    elif program == "values.py":
        assert out[0] == VALUES
    else:  # torch's shutdown reports nothing (it returns None)
        assert {k: out[0][k] for k in DROP_MANY_VALUES} == DROP_MANY_VALUES
        assert [w["report"] for w in out] == [None, None]


#: What worker 0 of remote_module.py prints (torch 2.13 prints the same).
REMOTE_MODULE: dict[str, Any] = {
    "forward": [9.5, 19.0],
    "forward_async": 9.5,
    "parameters": [["worker1", [3.0, 3.0]], ["worker1", 0.5]],
    "module_rref": "worker1",
    "by_rank": [4.0, "worker2"],
}
OUR_REMOTE_MODULE = "from protoref.nn import RemoteModule\n"
TORCH_REMOTE_MODULE = "from torch.distributed.nn import RemoteModule\n"


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install torch==2.13.0)")
def test_remote_module_runs_on_protoref(tmp_path: Path) -> None:
    """Issue 26 §3: protoref.nn.RemoteModule in place of torch.distributed.nn's."""
    assert run(PROGRAMS / "remote_module.py", 3, program_env(tmp_path))[0] == REMOTE_MODULE


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install torch==2.13.0)")
def test_remote_module_program_prints_the_same_on_torch(tmp_path: Path) -> None:
    text = torch_text("remote_module.py")
    assert text.count(OUR_REMOTE_MODULE) == 1
    script = tmp_path / "remote_module.py"
    script.write_text(text.replace(OUR_REMOTE_MODULE, TORCH_REMOTE_MODULE), encoding="utf-8")
    assert run(script, 3, program_env(tmp_path / "home"))[0] == REMOTE_MODULE


#: What worker 0 of process_group.py prints (torch 2.13 prints the same).
PROCESS_GROUP = [{"all_reduce": 33.0, "rpc": [11, 13]}, {"all_reduce": 63.0, "rpc": [21, 23]}]


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install torch==2.13.0)")
@pytest.mark.parametrize("on", ["protoref", "torch"])
def test_init_rpc_after_init_process_group_on_the_same_port(tmp_path: Path, on: str) -> None:
    """Issue 26 §3: the process group's store holds MASTER_PORT; RPC shares it (before:
    "address already in use"), twice in one process group's life."""
    script = PROGRAMS / "process_group.py"
    if on == "torch":
        script = tmp_path / "process_group.py"
        script.write_text(torch_text("process_group.py"), encoding="utf-8")
    assert run(script, 3, program_env(tmp_path / "home"))[0] == PROCESS_GROUP
