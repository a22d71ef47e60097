"""torch tensors as call arguments and results, for torch programs run unchanged.

:class:`TensorCodec` is registered on every worker after the codecs init_rpc was given. It never
imports torch itself unless a tensor is to be decoded: it handles a value whose type is
``torch.Tensor`` (a program that made one has torch loaded), and a worker receiving one imports
torch then (a torch program has it). A tensor travels as ``{"dtype", "shape", "requires_grad",
"data"}``, ``data`` its bytes in the host's order, base64: a dense CPU tensor, copied (as
torch's pickler copies it). Decoding checks everything before building anything: the dtype
against a fixed list, the shape (at most 32 non-negative dimensions), the byte count against
shape and dtype. Sparse, quantized, CUDA and other special tensors are refused with a
CodecError; ``requires_grad`` is kept as the flag torch keeps (there is no distributed autograd
here, so no graph travels with it).
"""

from __future__ import annotations

import base64
import binascii
import importlib
import math
import sys
from typing import Any, Final

from pydantic import JsonValue

from protoref.rpc.errors import CodecError

__all__ = ["TensorCodec"]

#: dtype names a tensor may have on the wire (torch.<name>).
DTYPES: Final = frozenset(
    {
        "float64",
        "float32",
        "float16",
        "bfloat16",
        "complex64",
        "complex128",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint8",
        "bool",
    }
)
MAX_DIMS: Final = 32


class TensorCodec:
    """torch.Tensor <-> JSON (see the module's docstring)."""

    name = "torch.Tensor"

    def handles(self, value: object) -> bool:
        torch = sys.modules.get("torch")  # no tensor exists where torch was never imported
        return torch is not None and isinstance(value, torch.Tensor)

    def encode(self, value: Any) -> JsonValue:
        torch = sys.modules["torch"]
        if value.layout != torch.strided or value.device.type != "cpu" or value.is_quantized:
            raise CodecError(
                f"a {value.layout} tensor on {value.device} cannot be sent: only dense CPU "
                "tensors travel (move it to the CPU first)"
            )
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype not in DTYPES:
            raise CodecError(f"a tensor of dtype {dtype} cannot be sent")
        flat = value.detach().contiguous().reshape(-1)
        raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
        return {
            "dtype": dtype,
            "shape": list(value.shape),
            "requires_grad": bool(value.requires_grad),
            "data": base64.b64encode(raw).decode("ascii"),
        }

    def decode(self, data: JsonValue) -> Any:
        if not isinstance(data, dict) or set(data) != {"dtype", "shape", "requires_grad", "data"}:
            raise CodecError("a tensor must be {dtype, shape, requires_grad, data}")
        dtype, shape, grad, text = data["dtype"], data["shape"], data["requires_grad"], data["data"]
        if dtype not in DTYPES:
            raise CodecError(f"tensor dtype {dtype!r} is not one of {sorted(DTYPES)}")
        if (
            not isinstance(shape, list)
            or len(shape) > MAX_DIMS
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
        ):
            raise CodecError(f"tensor shape {shape!r} is not a list of at most {MAX_DIMS} sizes")
        sizes = [n for n in shape if isinstance(n, int)]  # all of them (checked above)
        if not isinstance(grad, bool) or not isinstance(text, str):
            raise CodecError("tensor requires_grad must be a bool and data a base64 string")
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as err:
            raise CodecError(f"tensor data is not base64: {err}") from err
        try:
            torch: Any = importlib.import_module("torch")
        except ImportError as err:
            raise CodecError("a tensor arrived but torch is not installed here") from err
        kind = getattr(torch, dtype)
        size = torch.empty((), dtype=kind).element_size()
        if len(raw) != math.prod(sizes) * size:
            raise CodecError(
                f"tensor data holds {len(raw)} bytes; shape {sizes} of {dtype} needs "
                f"{math.prod(sizes) * size}"
            )
        if not raw:
            tensor = torch.empty(sizes, dtype=kind)
        else:
            tensor = torch.frombuffer(bytearray(raw), dtype=kind).reshape(sizes)
        if not (grad and tensor.is_floating_point()):
            return tensor
        # not a view of the buffer: distributed autograd makes it a recv function's output in
        # place (protoref.autograd.runtime.torch_engine.attach), which torch refuses on a view
        return (tensor.clone() if tensor._is_view() else tensor).requires_grad_(True)
