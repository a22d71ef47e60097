"""The distributed autograd programs (tests/autograd/programs/): their import block is the only
text that differs between a protoref run and a torch run."""

from __future__ import annotations

from pathlib import Path
from typing import Final

PROGRAMS: Final = Path(__file__).resolve().parent.parent / "autograd" / "programs"
OURS: Final = """import protoref.autograd as dist_autograd
import protoref.rpc as rpc
from protoref.autograd import tensor
from protoref.optim import SGD, DistributedOptimizer
"""
TORCH: Final = """import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import tensor
from torch.distributed.optim import DistributedOptimizer
from torch.optim import SGD
"""


def torch_text(program: str) -> str:
    """The program with torch's imports in place of ours: the only lines that change."""
    text = (PROGRAMS / program).read_text(encoding="utf-8")
    assert text.count(OURS) == 1, f"{program} must have the import block exactly once"
    return text.replace(OURS, TORCH)
