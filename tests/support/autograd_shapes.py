"""UDFs of the programs in the shapes the autograd spec was widened to (issue 26 s4):
importable by name, as remote functions must be."""

from __future__ import annotations

from protoref import rpc
from protoref.autograd import Tensor


def fails(x: Tensor) -> Tensor:
    """A UDF that raises by itself (no nested call failed)."""
    raise ValueError(f"refusing {float(x)}")


def fire_and_return(x: Tensor, via: str) -> Tensor:
    """Leaves an rpc_async unawaited: the UDF returns while its nested call runs."""
    rpc.rpc_async(via, _times2, (x,))
    return x * 3


def _times2(x: Tensor) -> Tensor:
    return x * 2


def scale(w: object, x: Tensor) -> Tensor:
    """A parameter server's forward: the parameter held in RRef ``w`` (local here) times x."""
    return x * w.local_value()  # type: ignore[attr-defined]
