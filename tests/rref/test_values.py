"""torch's value semantics in the codec (issue 26 §2; docs/rref.md §10): functions and classes
travel by module and name; between authenticated workers (``trusted``) any other value is
pickled, its RRefs forked through persistent ids; untrusted data is never unpickled; JSON-able
values never pickle (the fast path)."""

from __future__ import annotations

import base64
import io
import json
import pickle
import threading
from typing import Any

import pytest

from protoref.rpc.codec import copy_value, decode_value, encode_value
from protoref.rpc.errors import CodecError
from protoref.rref.runtime.udfs import add


class Marker:
    """Stands for an RRef (the codec is told which values are RRefs)."""


class Holder:
    def __init__(self, inner: Any) -> None:
        self.inner = inner


def is_marker(value: object) -> bool:
    return isinstance(value, Marker)


def test_functions_and_classes_travel_by_name() -> None:
    data = encode_value([add, Holder, len], (), None)
    assert data == [
        {"#fn": "protoref.rref.runtime.udfs:add"},
        {"#fn": f"{Holder.__module__}:Holder"},
        {"#fn": "builtins:len"},
    ]
    assert decode_value(data, (), None, trusted=True) == [add, Holder, len]
    with pytest.raises(CodecError, match=r"value\[0\]: a #fn value is loaded only from"):
        decode_value(data, (), None)  # untrusted: nothing is imported
    with pytest.raises(CodecError, match="lambdas"):
        encode_value(lambda: 1, (), None, trusted=True)


def test_json_values_never_pickle_and_containers_pickle_only_what_json_cannot_carry() -> None:
    value = {"a": [1, 2.5, "s", None, True], "t": (1, 2)}
    assert encode_value(value, (), None, trusted=True) == encode_value(value, (), None)
    data = encode_value([1, {3, 4}], (), None, trusted=True)
    assert isinstance(data, list)
    assert data[0] == 1
    assert isinstance(data[1], dict)
    assert set(data[1]) == {"#pickle"}
    assert json.loads(json.dumps(data)) == data  # still a JSON frame
    assert decode_value(data, (), None, trusted=True) == [1, {3, 4}]


def test_rrefs_inside_pickled_values_are_fork_indices() -> None:
    marker = Marker()
    forked: list[object] = []

    def on_rref(h: object) -> int:
        forked.append(h)
        return 40 + len(forked) - 1

    data = encode_value(Holder([marker, marker]), (), on_rref, is_rref=is_marker, trusted=True)
    assert forked == [marker, marker]  # forked, never pickled
    back = decode_value(data, (), lambda i: f"rref{i}", trusted=True)
    assert isinstance(back, Holder)
    assert back.inner == ["rref40", "rref41"]
    with pytest.raises(CodecError, match="cannot be sent here"):
        encode_value(Holder(marker), (), None, is_rref=is_marker, trusted=True)


def test_copy_value_hands_rrefs_over_as_they_are() -> None:
    marker = Marker()
    value = [Holder(marker), {"k": (marker, 1)}]
    copy = copy_value(value, (), is_rref=is_marker)
    assert copy[0] is not value[0]
    assert copy[0].inner is marker
    assert copy[1]["k"][0] is marker


def test_untrusted_data_is_never_unpickled_and_bad_pickles_are_typed_errors() -> None:
    data = encode_value({1, 2}, (), None, trusted=True)
    with pytest.raises(CodecError, match="loaded only from an authenticated peer"):
        decode_value(data, (), None)
    with pytest.raises(CodecError, match="neither JSON-able nor picklable"):
        encode_value(Holder(threading.Lock()), (), None, trusted=True)
    with pytest.raises(CodecError, match="not base64"):
        decode_value({"#pickle": "!!"}, (), None, trusted=True)
    with pytest.raises(CodecError, match="cannot be loaded here"):
        decode_value({"#pickle": base64.b64encode(b"junk").decode()}, (), None, trusted=True)

    class Forged(pickle.Pickler):
        def persistent_id(self, obj: Any) -> Any:
            return ("file", "/etc/passwd") if obj == "x" else None

    out = io.BytesIO()
    Forged(out).dump(["x"])
    forged = {"#pickle": base64.b64encode(out.getvalue()).decode()}
    with pytest.raises(CodecError, match="not one of its RRefs"):
        decode_value(forged, (), lambda i: i, trusted=True)
    with pytest.raises(CodecError, match="a set is not JSON-able"):
        encode_value({1}, (), None)  # untrusted: never pickled
