"""torch tensors as call values (TensorCodec): round trips, and bad tensors refused whole."""

from __future__ import annotations

import base64
import importlib
from typing import Any

import pytest

from protoref.rpc.codec import decode_value, encode_value
from protoref.rpc.errors import CodecError
from protoref.rpc.tensors import TensorCodec

torch: Any = pytest.importorskip("torch")
CODEC = [TensorCodec()]


def round_trip(value: Any) -> Any:
    return decode_value(encode_value(value, CODEC, None), CODEC, None)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.ones(2, 3),
        lambda: torch.arange(6, dtype=torch.int64).reshape(3, 2),
        lambda: torch.tensor([True, False]),
        lambda: torch.zeros(0, 4),
        lambda: torch.tensor(3.5, dtype=torch.float64),
        lambda: torch.randn(3, dtype=torch.bfloat16),
        lambda: torch.randn(2, dtype=torch.complex64),
        lambda: torch.arange(12).reshape(3, 4).t(),  # not contiguous
        lambda: torch.tensor([-1, 2], dtype=torch.int8),
    ],
)
def test_tensors_round_trip(make: Any) -> None:
    t = make()
    got = round_trip({"t": t, "n": 1})
    assert got["n"] == 1
    assert got["t"].dtype == t.dtype
    assert got["t"].shape == t.shape
    assert torch.equal(got["t"], t)


def test_requires_grad_is_kept_as_a_flag() -> None:
    got = round_trip(torch.ones(2, requires_grad=True))
    assert got.requires_grad
    assert got.grad_fn is None  # no graph travels: there is no distributed autograd here


def test_special_tensors_are_refused() -> None:
    with pytest.raises(CodecError, match="only dense CPU tensors"):
        encode_value(torch.eye(2).to_sparse(), CODEC, None)
    assert not TensorCodec().handles([1.0])


def wire_tensor(**change: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "dtype": "float32",
        "shape": [2],
        "requires_grad": False,
        "data": base64.b64encode(bytes(8)).decode(),
    }
    data.update(change)
    return {"#codec": "torch.Tensor", "data": data}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"dtype": "object"}, "dtype 'object' is not one of"),
        ({"dtype": "float32; import os"}, "is not one of"),
        ({"shape": [-1]}, "is not a list of at most 32 sizes"),
        ({"shape": [True]}, "is not a list"),
        ({"shape": [1] * 33}, "at most 32"),
        ({"shape": [3]}, "holds 8 bytes; shape [3] of float32 needs 12"),
        ({"shape": [10**12]}, "needs 4000000000000"),
        ({"data": "not base64!"}, "not base64"),
        ({"requires_grad": "yes"}, "must be a bool"),
        ({"extra": 1}, "must be {dtype, shape, requires_grad, data}"),
    ],
)
def test_a_bad_tensor_is_refused_before_anything_is_built(
    change: dict[str, Any], words: str
) -> None:
    with pytest.raises(CodecError) as info:
        decode_value(wire_tensor(**change), CODEC, None)
    assert words in str(info.value)


def test_a_worker_without_torch_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def without_torch(name: str, *args: Any) -> Any:
        if name == "torch":
            raise ImportError("No module named 'torch'")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without_torch)
    with pytest.raises(CodecError, match="torch is not installed here"):
        decode_value(wire_tensor(), CODEC, None)
