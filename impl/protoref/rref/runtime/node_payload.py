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
from protoref.rpc import frames as fr
from protoref.rpc.codec import decode_value, encode_value
from protoref.rpc.errors import CodecError, RemoteError, remote_error, remote_type_name
from protoref.rref.core import events as ev
from protoref.rref.core.machine import step as core_step
from protoref.rref.runtime.handle import RRef
from protoref.rref.runtime.node_core import NodeCore, settle

__all__ = ["NodePayload", "error_result"]


def error_result(exc: BaseException) -> fr.Result:
    if isinstance(exc, RemoteError):
        return fr.Result(ok=False, error_type=exc.remote_type, error=exc.remote_message)
    return fr.Result(ok=False, error_type=remote_type_name(exc), error=str(exc))


class NodePayload(NodeCore):
    """Encoding and decoding of call payloads and outcomes for one worker."""

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
        with self.lock:  # the dry run and the forks see one state
            return self._encode_parts(parts, dst)

    def _encode_parts(
        self, parts: Sequence[tuple[Any, str]], dst: WorkerId
    ) -> tuple[list[Any], tuple[ev.PythonCall, ...]]:
        found: list[RRef[Any]] = []

        def on_rref(h: Any) -> int:
            if h._agent is not self.agent:
                raise CodecError(f"{h!r} belongs to worker {h._agent.name}, not {self.me}")
            found.append(h)
            return len(found) - 1

        datas = [  # trusted: call and result frames go only over authenticated links
            encode_value(
                v, self.codecs, on_rref, path=p, is_rref=lambda x: isinstance(x, RRef), trusted=True
            )
            for v, p in parts
        ]
        inputs = [
            ev.PrepareChildFork(dst=dst, r=h.rref_id, parent=h.fork_id or h.rref_id) for h in found
        ]
        scratch = self.ctx
        for inp in inputs:
            scratch = core_step(scratch, inp).state
        forks: list[ev.PythonCall] = []
        for inp in inputs:
            sent = self.apply(inp, send=False).sent
            forks += [m for m in sent if isinstance(m, ev.PythonCall)]
        return datas, tuple(forks)

    def decode(self, data: Any, forks: Sequence[ev.PythonCall], stamp: int, path: str) -> Any:
        handles = [self.unpickle(m, stamp) for m in forks]
        return decode_value(data, self.codecs, lambda i: handles[i], path=path, trusted=True)

    def decode_call(self, body: fr.CallBody, stamp: int) -> tuple[list[Any], dict[str, Any]]:
        handles = [self.unpickle(m, stamp) for m in body.forks]
        # trusted: a call frame arrives only on a link whose handshake proved the secret
        args = decode_value(body.args, self.codecs, handles.__getitem__, path="args", trusted=True)
        kwargs = decode_value(
            body.kwargs, self.codecs, handles.__getitem__, path="kwargs", trusted=True
        )
        return list(args), dict(kwargs)

    def encode_call(
        self, fn: str, args: Sequence[Any], kwargs: dict[str, Any], dst: WorkerId
    ) -> fr.CallBody:
        (a, k), forks = self.encode_parts([(list(args), "args"), (dict(kwargs), "kwargs")], dst)
        return fr.CallBody(fn=fn, args=a, kwargs=k, forks=forks)

    def unpickle(self, m: ev.PythonCall, stamp: int) -> RRef[Any]:
        """``GetOrCreateRRef``: an RRef received in a call or reply becomes a handle here."""
        self.apply(m, stamp)
        if m.owner == self.me:
            box = self.boxes.get(m.rref)
            if box is None:
                box = cf.Future()
                box.set_exception(RemoteError("RPCError", f"OwnerRRef {m.rref} no longer exists"))
            return RRef._owner_side(self.agent, m.rref, box, held=False)
        return RRef._user_side(self.agent, m.owner, m.rref, m.fork)

    def _result_of(self, done: cf.Future[Any], dst: WorkerId, *, allow_rrefs: bool) -> fr.Result:
        exc = done.exception()
        if exc is not None:
            return error_result(exc)
        try:
            if allow_rrefs:
                value, forks = self.encode(done.result(), dst, "result")
                return fr.Result(ok=True, value=value, forks=forks)
            value = encode_value(
                done.result(),
                self.codecs,
                None,
                path="result",
                is_rref=lambda v: isinstance(v, RRef),
                trusted=True,
            )
            return fr.Result(ok=True, value=value)
        except (ProtocolError, Exception) as err:  # the result is refused, not the link
            return error_result(err)

    def outcome(
        self, result: fr.Result, stamp: int, target: cf.Future[Any] | None, *decoded: Any
    ) -> None:
        """Complete ``target`` with the reply's value (``decoded``: already decoded, once)."""
        if result.ok:
            value = (
                decoded[0] if decoded else self.decode(result.value, result.forks, stamp, "result")
            )
            settle(target, value, None)
        else:
            settle(target, None, remote_error(result.error_type, result.error))
