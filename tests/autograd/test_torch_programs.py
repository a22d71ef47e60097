"""torch programs on torch tensors, run on protoref's distributed autograd with only their
imports changed (issue 26 §1 and §5).

Each program in tests/autograd/programs/ named here imports ``protoref.autograd`` and
``protoref.rpc`` (and ``protoref.optim``'s DistributedOptimizer, ``protoref.nn``'s
RemoteModule) where a torch program imports torch's; the local graph is torch's own autograd,
the distributed part (contexts, send/recv functions, cleanup, the Echo backward) protoref's.
With torch's imports the same text runs on torch 2.13 and must print the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pytest

from support.programs import HAS_TORCH, program_env, run
from support.rref_runtime import SPEC_ROOT
from tracecheck.protocols.autograd import AUTOGRAD
from tracecheck.protocols.rref import RREF
from tracecheck.replay.validate import validate_traces
from tracecheck.traces.load import Trace, load_trace, merge_traces

pytestmark = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (the [torch] extra)")

PROGRAMS: Final = Path(__file__).resolve().parent / "programs"
#: protoref's import -> torch's: the only lines that differ between the two runs.
IMPORTS: Final = {
    "import protoref.autograd as dist_autograd\n": "import torch.distributed.autograd as "
    "dist_autograd\n",
    "import protoref.rpc as rpc\n": "import torch.distributed.rpc as rpc\n",
    "from protoref.optim import DistributedOptimizer\n": "from torch.distributed.optim import "
    "DistributedOptimizer\n",
    "from protoref.nn import RemoteModule\n": "from torch.distributed.nn import RemoteModule\n",
}


def torch_text(program: str) -> str:
    text = (PROGRAMS / program).read_text(encoding="utf-8")
    assert text.count("import protoref.rpc as rpc\n") == 1
    for ours, theirs in IMPORTS.items():
        text = text.replace(ours, theirs)
    assert "protoref" not in text.split('"""', 2)[2], f"{program} names protoref beyond imports"
    return text


TORCH_CASES: dict[str, Any] = {
    "simple": [[True, False], 2, [1.0] * 9, [1.0] * 9, True],
    "nested": [[8.0, 12.0], [10.0, 16.0], [2.0, 4.0]],  # ret = 2(t1+t2); d(ret.t1) = 4t1+2t2
    "several_passes": [
        [[2.0, 2.0, 2.0], [1.0, 2.0, 3.0]],
        [[4.0, 4.0, 4.0], [2.0, 4.0, 6.0]],
        True,
    ],
    "local_and_remote_leaves": [[[1.0, -1.0], [1.0, -1.0], [4.5, 3.0]], [4.5, 3.0], [1.0, -1.0]],
    "remote_and_to_here": [[3.0, 6.0], [18.0, 36.0]],
}
#: Three training steps per trainer (torch 2.13 prints the same: its DistributedOptimizer
#: steps functional optimizers, which leave .grad alone, as ours does).
PARAMETER_SERVER: dict[str, Any] = {
    "grad_untouched": True,
    "parameters": [
        [0.0007, 0.2595, -0.4091, -0.3679],
        [-0.3298, -0.2264, -0.3445, -0.4856],
        [0.0233, -0.1726, 0.0609, -0.3248],
        [0.1984, -0.0619, 0.0264],
    ],
    "trainer1": [1.1365, 1.2024, 1.027],
    "trainer2": [1.2072, 1.0067, 1.0245],
}
RNN: dict[str, Any] = {
    "decoder": [0.0925, -0.0992, 0.1122, -0.0227],
    "local_leaves_with_gradients": 4,
    "losses": [2.405, 2.3559, 2.3293],
    "lstm": [-0.405, -0.3216, -0.1749, -0.3865],
}
PIPELINE: dict[str, Any] = {
    "losses": [0.9345, 0.9846, 0.7199],
    "shard2_weight": [0.1781, -0.1872, -0.1108, 0.1856],
}
BATCH: dict[str, Any] = {
    "losses": [[0.8965, 0.9775, 1.0447], [1.1213, 1.0001, 1.0053]],
    "weight": [0.1481, 0.2232, -0.3602, -0.3219, -0.0846, 0.1393],
}
RL: dict[str, Any] = {
    "episodes": [
        [8.0159, 0.7122, ["ndarray", "ndarray"]],
        [6.8662, -0.0514, ["ndarray", "ndarray"]],
        [7.6894, -0.5995, ["ndarray", "ndarray"]],
    ],
    "head": [-0.0035, -0.1681, 0.0598, -0.3337],
}
#: Each trainer's losses and its DDP-averaged Linear weight (the same on both trainers).
DDP_RPC: dict[str, Any] = {
    "trainers": [
        [[0.498, 0.7943, 0.9996], [0.0136, 0.2589, -0.3629, -0.3188]],
        [[1.3021, 1.5956, 0.3914], [0.0136, 0.2589, -0.3629, -0.3188]],
    ]
}
EXPECTED: Final = {
    "torch_cases.py": (3, TORCH_CASES),
    "parameter_server.py": (3, PARAMETER_SERVER),
    "rnn.py": (3, RNN),
    "pipeline.py": (3, PIPELINE),
    "batch.py": (3, BATCH),
    "rl.py": (3, RL),
    "ddp_rpc.py": (3, DDP_RPC),
}


#: The programs that open distributed autograd contexts (the others trace RRefs only).
WITH_CONTEXTS: Final = {
    "torch_cases.py",
    "parameter_server.py",
    "rnn.py",
    "pipeline.py",
    "ddp_rpc.py",
}


def merged(files: list[Path]) -> Trace:
    assert files, "the run wrote no trace"
    return merge_traces([load_trace(f) for f in sorted(files)])


@pytest.mark.parametrize("program", sorted(EXPECTED))
def test_program_runs_on_protoref(tmp_path: Path, program: str) -> None:
    """The program prints torch's output, and the traces its run writes (RRef and, with a
    context, autograd) are accepted by RRef.tla and DistAutograd.tla (issue 26 §4)."""
    ranks, expected = EXPECTED[program]
    traces = tmp_path / "traces"
    env = program_env(tmp_path / "home", PROTOREF_RPC_TRACE_DIR=str(traces))
    assert run(PROGRAMS / program, ranks, env)[0] == expected
    checks = [(RREF, list(traces.glob("*.ndjson")))]
    if program in WITH_CONTEXTS:
        checks.append((AUTOGRAD, list((traces / "autograd").glob("*.ndjson"))))
    for mapping, files in checks:
        report = validate_traces([merged(files)], mapping, SPEC_ROOT)
        (one,) = report.verdicts
        assert one.accepted, (mapping.protocol, one.rejection)


@pytest.mark.parametrize("program", sorted(EXPECTED))
def test_the_same_text_prints_the_same_on_torch(tmp_path: Path, program: str) -> None:
    ranks, expected = EXPECTED[program]
    script = tmp_path / program
    script.write_text(torch_text(program), encoding="utf-8")
    assert run(script, ranks, program_env(tmp_path / "home"))[0] == expected
