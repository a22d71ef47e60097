"""User payloads as JSON values: JSON-able by default, other types only through an opt-in codec.

Encoding rules (documented in docs/rref.md): ``None``, bools, ints, finite floats, strings, lists
and dicts with string keys pass through; tuples become ``{"#tuple": [...]}``; an RRef becomes
``{"#rref": i}``, an index into the message's fork records (it is forked by the protocol, never
serialized); a value a registered :class:`Codec` handles becomes ``{"#codec": name, "data": ...}``;
a dict with a key starting with ``#`` is wrapped as ``{"#dict": {...}}`` so it cannot be mistaken
for a tag. A function or a class travels by module and name, as a call target does
(``{"#fn": "module:qualname"}``, looked up with :func:`protoref.rpc.udf.resolve`), never as code.

Between authenticated workers (``trusted=True``: the payloads of call and result frames, which
arrive only on links whose handshake proved the shared secret) any other value travels as torch
carries it, pickled (``{"#pickle": base64}``; numpy arrays, ``nn.Module``s, sets, instances of
the program's classes), and RRefs inside it are forked as everywhere else (pickle's persistent
ids name the message's fork records). A worker holding the secret can already call any
importable function on its peer, so unpickling its values adds no power (docs/rref.md §10).
Everything else stays JSON and is never unpickled: ``trusted=False`` refuses a ``#pickle`` tag
and never produces one. JSON stays the fast path: a value JSON can carry is never pickled, and
a container pickles only the elements JSON cannot carry.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import pickle
import types
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import JsonValue

from protoref.rpc.errors import CodecError, UnresolvableFunctionError
from protoref.rpc.udf import qualified_name, resolve

__all__ = ["Codec", "copy_value", "decode_value", "encode_value"]

_TAGS = frozenset({"#tuple", "#rref", "#codec", "#dict", "#fn", "#pickle"})
#: What travels by module and name: functions (a class's ``Cls.method`` is one), builtins, classes.
_NAMED = (types.FunctionType, types.BuiltinFunctionType, type)


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
    trusted: bool = False,
) -> JsonValue:
    """Encode ``value``; ``on_rref(rref)`` forks an RRef and returns its index (None: refused);
    ``trusted``: for an authenticated peer, so values JSON cannot carry are pickled."""
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
        return encode_value(v, codecs, on_rref, path=p, is_rref=is_rref, trusted=trusted)

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
    if isinstance(value, _NAMED):
        try:
            return {"#fn": qualified_name(value)}
        except UnresolvableFunctionError as err:
            raise CodecError(f"{path}: {err}") from None
    for codec in codecs:
        if codec.handles(value):
            return {"#codec": codec.name, "data": codec.encode(value)}
    if trusted:
        return {"#pickle": _pickle(value, on_rref, is_rref, path)}
    raise CodecError(
        f"{path}: a {type(value).__qualname__} is not JSON-able; register a Codec for it "
        "(init_rpc(..., codecs=[...])) on both peers"
    )


def _pickle(
    value: object,
    on_rref: Callable[[Any], int] | None,
    is_rref: Callable[[object], bool],
    path: str,
) -> str:
    """``value`` pickled as torch's RPC pickler does, its RRefs forked (persistent ids)."""

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj: Any) -> Any:
            if is_rref(obj):
                if on_rref is None:
                    raise CodecError(
                        f"{path}: an RRef cannot be sent here (only in call args/results)"
                    )
                return ("rref", on_rref(obj))
            return None

    out = io.BytesIO()
    try:
        Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    except CodecError:
        raise
    except Exception as err:  # pickle's own refusals: a lambda, a lock, an open file, ...
        raise CodecError(
            f"{path}: a {type(value).__qualname__} is neither JSON-able nor picklable: {err}"
        ) from None
    return base64.b64encode(out.getvalue()).decode("ascii")


def _unpickle(text: JsonValue, on_rref: Callable[[int], Any] | None, path: str) -> Any:
    if not isinstance(text, str):
        raise CodecError(f"{path}: malformed #pickle value")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as err:
        raise CodecError(f"{path}: #pickle data is not base64: {err}") from None

    class Unpickler(pickle.Unpickler):
        def persistent_load(self, pid: Any) -> Any:
            if (
                isinstance(pid, tuple)
                and len(pid) == 2
                and pid[0] == "rref"
                and isinstance(pid[1], int)
                and on_rref is not None
            ):
                return on_rref(pid[1])
            raise CodecError(f"{path}: a pickled value names {pid!r}, not one of its RRefs")

    try:
        return Unpickler(io.BytesIO(raw)).load()
    except CodecError:
        raise
    except Exception as err:  # what the peer's pickle needs is missing here, or it is corrupt
        raise CodecError(f"{path}: the pickled value cannot be loaded here: {err}") from None


def decode_value(
    data: JsonValue,
    codecs: Sequence[Codec],
    on_rref: Callable[[int], Any] | None,
    *,
    path: str = "value",
    trusted: bool = False,
) -> Any:
    """Invert :func:`encode_value`; ``on_rref(i)`` returns the RRef unpickled for fork ``i``;
    a ``#pickle`` value is loaded only when ``trusted`` (it came from an authenticated peer)."""

    def sub(v: JsonValue, p: str) -> Any:
        return decode_value(v, codecs, on_rref, path=p, trusted=trusted)

    if isinstance(data, list):
        return [sub(v, f"{path}[{i}]") for i, v in enumerate(data)]
    if not isinstance(data, dict):
        return data
    tags = [k for k in data if k.startswith("#")]
    if not tags:
        return {k: sub(v, f"{path}[{k!r}]") for k, v in data.items()}
    tag = tags[0]
    if tag not in _TAGS:
        raise CodecError(f"{path}: unknown tag {tag!r}")
    body = data[tag]
    if tag == "#tuple" and isinstance(body, list):
        return tuple(sub(v, f"{path}[{i}]") for i, v in enumerate(body))
    if tag == "#dict" and isinstance(body, dict):
        return {k: sub(v, f"{path}[{k!r}]") for k, v in body.items()}
    if tag in ("#fn", "#pickle") and not trusted:
        raise CodecError(f"{path}: a {tag} value is loaded only from an authenticated peer")
    if tag == "#fn" and isinstance(body, str):
        try:
            return resolve(body)
        except UnresolvableFunctionError as err:
            raise CodecError(f"{path}: {err}") from None
    if tag == "#pickle":
        return _unpickle(body, on_rref, path)
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

    data = encode_value(value, codecs, keep, path=path, is_rref=is_rref, trusted=True)
    return decode_value(data, codecs, found.__getitem__, path=path, trusted=True)
