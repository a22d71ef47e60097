"""torch distributed-autograd programs run on protoref with only their imports changed.

tests/autograd/programs/training.py is written as a torch user writes one (functions in the
script, ``init_rpc`` by rank, MASTER_ADDR/MASTER_PORT) and runs as three processes: forward
across three workers with rpc_sync, remote and to_here and a nested call, hand-computed
gradients, a leaf reached by two paths, retain_graph passes and a freed graph, six threads'
contexts at once, DistributedOptimizer on remote parameters, the context gone from every
worker after the block. With torch installed, the same text with torch's imports runs on torch
2.13 and must print the same. reference.py runs where torch misbehaves (#38513, FAST mode's
hang) and shows the Reference's behaviour.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.autograd_programs import PROGRAMS, torch_text
from support.programs import HAS_TORCH, program_env, run

GONE = "Could not find autograd context with id:"
TRAINING: dict[str, Any] = {
    "three_workers": [255.0, 180.0, 66.0, True],  # (3p^2 + q) 3q; 6p * 3q; 3q + (3p^2 + q) 3
    "worker_bits": 0,
    "after_exit": [f"{GONE} 0", f"{GONE} 0"],
    "gone_everywhere": [GONE] * 3,
    "two_paths": 10.0,  # d(3x + x^2 + x)/dx at 3
    "retain_graph": [
        12.0,
        24.0,
        "Error on Node 0: Trying to backward through the graph a seco",
        24.0,
    ],
    "threads": [2.0 * k * 3 ** (k % 3) for k in range(1, 7)],
    "optimizer": [round(2.0 - 0.1 * 1.5 * 3.0, 6), round(3.0 - 0.1 * 1.5 * 2.0, 6)],
}


def test_training_runs_on_protoref_with_hand_computed_gradients(tmp_path: Path) -> None:
    out = run(PROGRAMS / "training.py", 3, program_env(tmp_path / "home"))
    assert out[0] == TRAINING


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (the [torch] extra)")
def test_the_same_text_with_torchs_imports_prints_the_same_on_torch(tmp_path: Path) -> None:
    script = tmp_path / "training_torch.py"
    script.write_text(torch_text("training.py"), encoding="utf-8")
    out = run(script, 3, program_env(tmp_path / "home"))
    assert out[0] == TRAINING


def test_where_torch_misbehaves_protoref_follows_the_reference(tmp_path: Path) -> None:
    out = run(PROGRAMS / "reference.py", 3, program_env(tmp_path / "home"))
    # the late answer's value arrives detached; no worker holds the context again
    assert out[0]["late_rpc"] == [4.0, True, [True, True, True]]
    # backward returns with an unused output and a None-returning UDF in the context
    assert out[0]["unused_outputs"] == 4.0
