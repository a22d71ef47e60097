"""RRefs inside payloads: forked when sent (``PrepareChildFork``), unpickled when received.

RRef arguments and results are forked into ``PYTHON_CALL`` records (one per RRef) and referenced
from the JSON payload by index (codec.py); a received record becomes a handle through
``GetOrCreateRRef``. Outcomes (values or the callee's exception) travel as ``Result`` frames.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Sequence
from typing import Any

from protoref.errors import ProtocolError
from protoref.ids import WorkerId
from protoref.rpc.codec import decode_value, encode_value
from protoref.rpc.errors import CodecError, RemoteError, remote_error, remote_type_name
from protoref.rref.core import events as ev
from protoref.rref.core.machine import step as core_step
from protoref.rref.runtime import frames as rf
from protoref.rref.runtime.handle import RRef
from protoref.rref.runtime.node_core import NodeCore, settle

__all__ = ["Payload", "error_result"]


def error_result(exc: BaseException) -> rf.Result:
    if isinstance(exc, RemoteError):
        return rf.Result(ok=False, error_type=exc.remote_type, error=exc.remote_message)
    return rf.Result(ok=False, error_type=remote_type_name(exc), error=str(exc))


class Payload:
    """Encoding and decoding of call payloads and outcomes for one worker's node (a part of
    :class:`~.node.Node`)."""

    def __init__(self, node: NodeCore) -> None:
        self.node = node

    # ------------------------------------------------------------------ encoding RRefs

    def encode(self, value: Any, dst: WorkerId, path: str) -> tuple[Any, tuple[ev.PythonCall, ...]]:
        (data,), forks = self.encode_parts([(value, path)], dst)
        return data, forks

    def encode_parts(
        self, parts: Sequence[tuple[Any, str]], dst: WorkerId
    ) -> tuple[list[Any], tuple[ev.PythonCall, ...]]:
        """Encode payload parts for ``dst``; their RRefs are forked (``PrepareChildFork``) only
        after every part encoded and every fork was dry-run on a copy of the state, so a
        refused payload leaves no pending child behind."""
        with self.node.lock:  # the dry run and the forks see one state
            return self._encode_parts(parts, dst)

    def _encode_parts(
        self, parts: Sequence[tuple[Any, str]], dst: WorkerId
    ) -> tuple[list[Any], tuple[ev.PythonCall, ...]]:
        found: list[RRef[Any]] = []

        def on_rref(h: Any) -> int:
            if h._agent is not self.node.agent:
                raise CodecError(f"{h!r} belongs to worker {h._agent.name}, not {self.node.me}")
            found.append(h)
            return len(found) - 1

        datas = [  # trusted: call and result frames go only over authenticated links
            encode_value(
                v,
                self.node.codecs,
                on_rref,
                path=p,
                is_rref=lambda x: isinstance(x, RRef),
                trusted=True,
            )
            for v, p in parts
        ]
        inputs = [
            ev.PrepareChildFork(dst=dst, r=h.rref_id, parent=h.fork_id or h.rref_id) for h in found
        ]
        scratch = self.node.ctx
        for inp in inputs:
            scratch = core_step(scratch, inp).state
        forks: list[ev.PythonCall] = []
        for inp in inputs:
            sent = self.node.apply(inp, send=False).sent
            forks += [m for m in sent if isinstance(m, ev.PythonCall)]
        return datas, tuple(forks)

    def decode(self, data: Any, forks: Sequence[ev.PythonCall], stamp: int, path: str) -> Any:
        handles = [self.unpickle(m, stamp) for m in forks]
        return decode_value(data, self.node.codecs, lambda i: handles[i], path=path, trusted=True)

    def decode_call(self, body: rf.CallBody, stamp: int) -> tuple[list[Any], dict[str, Any]]:
        handles = [self.unpickle(m, stamp) for m in body.forks]
        # trusted: a call frame arrives only on a link whose handshake proved the secret
        codecs = self.node.codecs
        args = decode_value(body.args, codecs, handles.__getitem__, path="args", trusted=True)
        kwargs = decode_value(body.kwargs, codecs, handles.__getitem__, path="kwargs", trusted=True)
        return list(args), dict(kwargs)

    def encode_call(
        self, fn: str, args: Sequence[Any], kwargs: dict[str, Any], dst: WorkerId
    ) -> rf.CallBody:
        (a, k), forks = self.encode_parts([(list(args), "args"), (dict(kwargs), "kwargs")], dst)
        return rf.CallBody(fn=fn, args=a, kwargs=k, forks=forks)

    def unpickle(self, m: ev.PythonCall, stamp: int) -> RRef[Any]:
        """``GetOrCreateRRef``: an RRef received in a call or reply becomes a handle here."""
        self.node.apply(m, stamp)
        if m.owner == self.node.me:
            box = self.node.boxes.get(m.rref)
            if box is None:
                box = cf.Future()
                box.set_exception(RemoteError("RPCError", f"OwnerRRef {m.rref} no longer exists"))
            return RRef._owner_side(self.node.agent, m.rref, box, held=False)
        return RRef._user_side(self.node.agent, m.owner, m.rref, m.fork)

    def _result_of(self, done: cf.Future[Any], dst: WorkerId, *, allow_rrefs: bool) -> rf.Result:
        exc = done.exception()
        if exc is not None:
            return error_result(exc)
        try:
            if allow_rrefs:
                value, forks = self.encode(done.result(), dst, "result")
                return rf.Result(ok=True, value=value, forks=forks)
            value = encode_value(
                done.result(),
                self.node.codecs,
                None,
                path="result",
                is_rref=lambda v: isinstance(v, RRef),
                trusted=True,
            )
            return rf.Result(ok=True, value=value)
        except (ProtocolError, Exception) as err:  # the result is refused, not the link
            return error_result(err)

    def outcome(
        self, result: rf.Result, stamp: int, target: cf.Future[Any] | None, *decoded: Any
    ) -> None:
        """Complete ``target`` with the reply's value (``decoded``: already decoded, once)."""
        if result.ok:
            value = (
                decoded[0] if decoded else self.decode(result.value, result.forks, stamp, "result")
            )
            settle(target, value, None)
        else:
            settle(target, None, remote_error(result.error_type, result.error))
