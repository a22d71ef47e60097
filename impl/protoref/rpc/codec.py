"""User payloads as JSON values: JSON-able by default, other types only through an opt-in codec.

Encoding rules (documented in docs/rref.md): ``None``, bools, ints, finite floats, strings, lists
and dicts with string keys pass through; tuples become ``{"#tuple": [...]}``; an RRef becomes
``{"#rref": i}``, an index into the message's fork records (it is forked by the protocol, never
serialized); a value a registered :class:`Codec` handles becomes ``{"#codec": name, "data": ...}``;
a dict with a key starting with ``#`` is wrapped as ``{"#dict": {...}}`` so it cannot be mistaken
for a tag. Anything else is a :class:`CodecError` naming where in the value it sits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import JsonValue

from protoref.rpc.errors import CodecError

__all__ = ["Codec", "copy_value", "decode_value", "encode_value"]

_TAGS = frozenset({"#tuple", "#rref", "#codec", "#dict"})


@runtime_checkable
class Codec(Protocol):
    """An explicit opt-in for a non-JSON type. Both peers must register the same codecs."""

    name: str

    def handles(self, value: object) -> bool: ...

    def encode(self, value: Any) -> JsonValue: ...

    def decode(self, data: JsonValue) -> Any: ...


def encode_value(
    value: object,
    codecs: Sequence[Codec],
    on_rref: Callable[[Any], int] | None,
    *,
    path: str = "value",
    is_rref: Callable[[object], bool] = lambda _v: False,
) -> JsonValue:
    """Encode ``value``; ``on_rref(rref)`` forks an RRef and returns its index (None: refused)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CodecError(f"{path}: {value} is not a finite float (JSON has no NaN/inf)")
        return value
    if is_rref(value):
        if on_rref is None:
            raise CodecError(f"{path}: an RRef cannot be sent here (only in call args/results)")
        return {"#rref": on_rref(value)}

    def sub(v: object, p: str) -> JsonValue:
        return encode_value(v, codecs, on_rref, path=p, is_rref=is_rref)

    if isinstance(value, list):
        return [sub(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, tuple):
        return {"#tuple": [sub(v, f"{path}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, dict):
        out: dict[str, JsonValue] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise CodecError(f"{path}: dict key {k!r} is not a string")
            out[k] = sub(v, f"{path}[{k!r}]")
        return {"#dict": out} if any(k.startswith("#") for k in out) else out
    for codec in codecs:
        if codec.handles(value):
            return {"#codec": codec.name, "data": codec.encode(value)}
    raise CodecError(
        f"{path}: a {type(value).__qualname__} is not JSON-able; register a Codec for it "
        "(init_rpc(..., codecs=[...])) on both peers"
    )


def decode_value(
    data: JsonValue,
    codecs: Sequence[Codec],
    on_rref: Callable[[int], Any] | None,
    *,
    path: str = "value",
) -> Any:
    """Invert :func:`encode_value`; ``on_rref(i)`` returns the RRef unpickled for fork ``i``."""
    if isinstance(data, list):
        return [decode_value(v, codecs, on_rref, path=f"{path}[{i}]") for i, v in enumerate(data)]
    if not isinstance(data, dict):
        return data
    tags = [k for k in data if k.startswith("#")]
    if not tags:
        return {k: decode_value(v, codecs, on_rref, path=f"{path}[{k!r}]") for k, v in data.items()}
    tag = tags[0]
    if tag not in _TAGS:
        raise CodecError(f"{path}: unknown tag {tag!r}")
    body = data[tag]
    if tag == "#tuple" and isinstance(body, list):
        return tuple(
            decode_value(v, codecs, on_rref, path=f"{path}[{i}]") for i, v in enumerate(body)
        )
    if tag == "#dict" and isinstance(body, dict):
        return {k: decode_value(v, codecs, on_rref, path=f"{path}[{k!r}]") for k, v in body.items()}
    if tag == "#rref" and isinstance(body, int) and not isinstance(body, bool):
        if on_rref is None:
            raise CodecError(f"{path}: an RRef where none may be")
        return on_rref(body)
    if tag == "#codec" and isinstance(body, str):
        for codec in codecs:
            if codec.name == body:
                return codec.decode(data.get("data"))
        raise CodecError(f"{path}: no codec named {body!r} is registered here")
    raise CodecError(f"{path}: malformed {tag} value")


def copy_value(
    value: object,
    codecs: Sequence[Codec],
    *,
    path: str = "value",
    is_rref: Callable[[object], bool] = lambda _v: False,
) -> Any:
    """The copy a call to one's own worker gets (torch serializes those too): the value
    encoded and decoded, its RRefs handed over as they are. A worker never forks an RRef to
    itself (the spec's ``Links`` has no self pair), and the very handle is what the callee
    would get back from its own fork of it."""
    found: list[Any] = []

    def keep(rref: Any) -> int:
        found.append(rref)
        return len(found) - 1

    data = encode_value(value, codecs, keep, path=path, is_rref=is_rref)
    return decode_value(data, codecs, found.__getitem__, path=path)
