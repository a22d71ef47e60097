"""Issue 26's two bugs that need no torch tensors, as a torch program (programs/shared.py)
run on protoref and, with torch installed, the same text on torch 2.13: both print the same.

- A value a worker computed once and returned from two separate RPCs, or a value the root's
  loss uses and an RPC's answer reaches too, is one graph node reached by two local runs of
  the same pass: it is freed when the worker's part of the pass ends, not after the first run
  (before: "Trying to backward through the graph a second time").
- DistributedOptimizer over parameter RRefs some of which the building worker owns (before:
  ``ProtocolError ... Links has no self pair``: a call to oneself forked its RRefs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.autograd_programs import PROGRAMS, torch_text
from support.programs import HAS_TORCH, program_env, run

SHARED: dict[str, Any] = {
    "one_value_two_answers": [27.0, 18.0],  # 3 W^2 at W = 3, d/dW = 6 W
    "local_and_sent": [16.0, 16.0],  # 4 x^2 at x = 2, d/dx = 8 x
    "optimizer_with_own_params": [1.7, 2.8, 4.9],  # 2 - 0.1 * 3, 3 - 0.1 * 2, 5 - 0.1
}


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("home")
    return run(PROGRAMS / "shared.py", 3, program_env(home))[0]


def test_a_value_returned_by_two_rpcs_gets_both_gradients(ours: dict[str, Any]) -> None:
    assert ours["one_value_two_answers"] == SHARED["one_value_two_answers"]
    assert ours["local_and_sent"] == SHARED["local_and_sent"]


def test_distributed_optimizer_over_parameters_of_its_own_worker(ours: dict[str, Any]) -> None:
    assert ours["optimizer_with_own_params"] == SHARED["optimizer_with_own_params"]


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (the [torch] extra)")
def test_the_same_text_with_torchs_imports_prints_the_same_on_torch(tmp_path: Path) -> None:
    script = tmp_path / "shared_torch.py"
    script.write_text(torch_text("shared.py"), encoding="utf-8")
    assert run(script, 3, program_env(tmp_path / "home"))[0] == SHARED
