"""Arriving frames: protocol messages applied in arrival order, user calls run as UDFs.

A message is applied when it is taken from its link (arrival order); the handler of a
PYTHON_REMOTE_CALL runs when its UDF has returned (RRef.tla ``AssignOwnerRRef``: the UDF runs,
then assignOwnerRRef). A retried control message is applied at most once per control id and
acked (RRef.tla ``Retried``); a frame the core refuses leaves the state unchanged.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
from collections.abc import Callable
from typing import Any

from protoref.errors import ProtocolError
from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rpc import frames as fr
from protoref.rpc.errors import RemoteError, remote_error, remote_type_name
from protoref.rpc.link import corked
from protoref.rpc.udf import is_async, resolve
from protoref.rref.core import events as ev
from protoref.rref.runtime import frames as rf
from protoref.rref.runtime.node_core import NodeCore
from protoref.rref.runtime.node_payload import Payload

__all__ = ["Inbox"]

Gid = GloballyUniqueId
log = logging.getLogger("protoref.rref.runtime")


class Inbox:
    """What a worker's node does with the frames its peers send (a part of
    :class:`~.node.Node`)."""

    def __init__(self, node: NodeCore, payload: Payload) -> None:
        self.node = node
        self.payload = payload

    # ------------------------------------------------------------------ incoming

    def on_frame(self, peer: WorkerId, frame: fr.Frame, ack: Callable[[int], None]) -> None:
        self.node.apply_drops()
        try:
            with self.node.lock:
                self._dispatch(peer, frame, ack)
        except ProtocolError as err:  # the core refused: its state is unchanged
            self.node.protocol_errors.append(err)
            log.warning("%s: frame %s from %s refused: %s", self.node.me, frame.kind, peer, err)

    def _dispatch(self, peer: WorkerId, frame: fr.Frame, ack: Callable[[int], None]) -> None:
        # The call hook's part first: a bad one rejects the frame before any of it is applied.
        meta = self.node.wraps.load(peer, getattr(frame, "ext", None))
        if isinstance(frame, rf.Proto):
            if frame.msg.src != peer or frame.msg.dst != self.node.me:
                raise ProtocolError(
                    self.node.me,
                    "Receive",
                    f"{frame.msg.type} from {frame.msg.src} to "
                    f"{frame.msg.dst} arrived on {peer}'s link",
                )
            if frame.ctl is not None:
                seen = self.node.processed.setdefault(peer, set())
                if frame.ctl in seen:  # a copy already applied: ack again, apply nothing
                    ack(frame.ctl)
                    return
                self.take(peer, frame.msg, frame.stamp, frame.call, frame.result, meta=meta)
                seen.add(frame.ctl)
                ack(frame.ctl)
                return
            self.take(peer, frame.msg, frame.stamp, frame.call, frame.result, meta=meta)
        elif isinstance(frame, fr.Ack):
            self._merge(frame.stamp)
            settled = []
            for ctl in frame.ctls:
                entry = self.node.unacked.pop(ctl, None)
                if entry is not None and entry[0].type == "RREF_FORK_REQUEST":
                    settled.append(entry[0].fork)
            for f in settled:  # AwaitForkCopies: its last copy acknowledged, f may go now
                self.node.destroy_if_unreferenced(f)
            self.node.on_step()
        elif isinstance(frame, rf.UserCall):
            self._merge(frame.stamp)
            self._user_call(peer, frame, meta)
        elif isinstance(frame, rf.UserReply):
            self._merge(frame.stamp)
            target = self.node.pop_call(frame.call_id)
            if frame.call_id in self.node.wraps.calls:  # wrapped: autograd sees it first
                value = self._decoded(frame.result, frame.stamp)
                self.node.wraps.call_done(frame.call_id, meta, value)
                self.payload.outcome(frame.result, frame.stamp, target, value)
            else:
                self.payload.outcome(frame.result, frame.stamp, target)
            self.node.on_step()
        elif isinstance(frame, rf.Refetch):
            self._merge(frame.stamp)
            self._refetch(peer, frame, meta)
        else:
            raise ProtocolError(
                self.node.me, "Receive", f"unexpected {frame.kind} frame from {peer}"
            )

    def _merge(self, stamp: int) -> None:
        self.node.clock.lamport = max(self.node.clock.lamport, stamp)

    def take(
        self,
        peer: WorkerId,
        m: ev.Message,
        stamp: int,
        call: rf.CallBody | None,
        result: rf.Result | None,
        *,
        meta: Any = None,
    ) -> None:
        """A protocol message taken from the inbox (``meta``: the call hook's part, e.g.
        distributed autograd's for a remote call, a fetch and their replies under a context)."""
        if isinstance(m, ev.PythonRemoteCall):
            self._remote_call(m, stamp, call, meta)
        elif isinstance(m, ev.RRefFetchRet):
            self.node.apply(m, stamp)
            target = self.node.fetches.pop(m.fork, None)
            if result is None:
                result = rf.Result(
                    ok=False, error_type="RPCError", error="fetch reply without value"
                )
            if m.fork in self.node.wraps.fetches:  # a wrapped fetch: autograd sees it first
                value = self._decoded(result, stamp)
                self.node.wraps.fetch_done(m.fork, meta, value)
                self.payload.outcome(result, stamp, target, value)
            else:
                self.payload.outcome(result, stamp, target)
        elif isinstance(m, ev.PythonCall):
            raise ProtocolError(
                self.node.me, "GetOrCreateRRef", "PYTHON_CALL outside a call or reply"
            )
        elif isinstance(m, ev.RRefFetchCall) and meta is not None:
            self.node.wraps.serving[m.fork] = self.node.wraps.key_or_refusal(meta, ())
            self.node.apply(m, stamp)
        else:
            self.node.apply(m, stamp)
            if isinstance(m, ev.RemoteRet) and m.rref in self.node.wraps.remotes:
                self.node.wraps.remote_done(m.rref, meta)

    def fetch_answered(self, fork: Gid, done: cf.Future[Any], result: rf.Result) -> Any:
        """The call hook's part of the reply to a fetch made under it (autograd: its handler
        finishes with the value, wrapped when it requires grad)."""
        key = self.node.wraps.serving.pop(fork, None)
        if key is None:
            return None
        if self.node.wraps.is_refusal(key):
            return key.meta
        value = done.result() if result.ok else None
        return self.node.wraps.finish(key, value, not result.ok)

    def _decoded(self, result: rf.Result, stamp: int) -> Any:
        """A reply's value, decoded once (autograd attaches its recv function to its tensors
        before the caller's future sees it); None for an error."""
        return (
            self.payload.decode(result.value, result.forks, stamp, "result") if result.ok else None
        )

    def _remote_call(
        self,
        m: ev.PythonRemoteCall,
        stamp: int,
        call: rf.CallBody | None,
        meta: Any = None,
    ) -> None:
        if call is None:
            raise ProtocolError(
                self.node.me, "AssignOwnerRRef", "PYTHON_REMOTE_CALL without a call"
            )
        r = m.rref
        self.node.boxes.setdefault(r, cf.Future())
        self.node.computing.add(r)
        try:
            args, kwargs = self.payload.decode_call(call, stamp)
            fn = resolve(call.fn)
        except Exception as err:  # the UDF fails before it runs: stored in the RRef, as PyTorch
            if meta is not None:
                self.node.wraps.creating[r] = self.node.wraps.key_or_refusal(meta, None)
            udf: cf.Future[Any] = cf.Future()
            udf.set_exception(err)
        else:
            key = self.node.wraps.key_or_refusal(meta, (args, kwargs))
            if key is not None:
                self.node.wraps.creating[r] = key
            if self.node.wraps.is_refusal(key):
                udf = cf.Future()
                udf.set_exception(RemoteError("RuntimeError", str(key)))
            else:
                udf = self.node.run_udf(
                    self.node.wraps.guarded(key, lambda: fn(*args, **kwargs)), is_async(fn)
                )
        self.node.when_done(udf, self._remote_done, m, stamp)

    def _remote_done(self, m: ev.PythonRemoteCall, stamp: int, done: cf.Future[Any]) -> None:
        # Usually on the UDF's thread: REMOTE_RET and the waiting fetch's reply leave in one
        # write (corked), straight from here.
        with corked(), self.node.lock:
            self._assign(m, stamp, done)

    def _assign(self, m: ev.PythonRemoteCall, stamp: int, done: cf.Future[Any]) -> None:
        box = self.node.boxes.get(m.rref)
        self.node.computing.discard(m.rref)
        # a remote call made under a context: its handler finishes (the value stays here, so
        # the answer is never wrapped) and REMOTE_RET carries the answer's autograd part
        key = self.node.wraps.creating.pop(m.rref, None)
        refused = self.node.wraps.is_refusal(key)
        meta = key.meta if refused else None
        if key is not None and not refused:
            meta = self.node.wraps.finish(key, None, done.exception() is not None)
        try:
            step = self.node.apply(m, stamp, send=meta is None)
            if meta is not None:
                for sent in step.sent:
                    part = meta if isinstance(sent, ev.RemoteRet) else None
                    self.node.emit(sent, self.node.clock.lamport, meta=part)
        finally:
            # The value is stored once assignOwnerRRef ran (under the lock, nobody sees the
            # difference), so a fetch waiting for it replies after REMOTE_RET, as before.
            if box is not None and not box.done():
                exc = done.exception()
                if exc is None:
                    box.set_result(done.result())
                else:
                    box.set_exception(
                        exc
                        if isinstance(exc, RemoteError)
                        else remote_error(remote_type_name(exc), str(exc))
                    )

    def _user_call(self, peer: WorkerId, frame: rf.UserCall, meta: Any) -> None:
        body = frame.body
        key: Any = None
        try:
            args, kwargs = self.payload.decode_call(body, frame.stamp)
            fn = resolve(body.fn)
        except Exception as err:
            key = self.node.wraps.key_or_refusal(meta, None)
            udf: cf.Future[Any] = cf.Future()
            udf.set_exception(err)
        else:
            key = self.node.wraps.key_or_refusal(meta, (args, kwargs))
            if self.node.wraps.is_refusal(key):
                udf = cf.Future()
                udf.set_exception(RemoteError("RuntimeError", str(key)))
            else:
                udf = self.node.run_udf(
                    self.node.wraps.guarded(key, lambda: fn(*args, **kwargs)), is_async(fn)
                )

        def reply(done: cf.Future[Any]) -> None:
            result = self.payload._result_of(done, peer, allow_rrefs=True)
            self.node.send_frame(
                peer,
                rf.UserReply,
                stamp=self.node.clock.lamport,
                call_id=frame.call_id,
                result=result,
                ext=self.node.wraps.ext(self._answer_part(key, done, result)),
            )

        self.node.when_done(udf, reply)

    def _answer_part(self, key: Any, done: cf.Future[Any], result: rf.Result) -> Any:
        """The call hook's part of a wrapped request's reply (None for an unwrapped one)."""
        if key is None:
            return None
        if self.node.wraps.is_refusal(key):
            return key.meta
        value = done.result() if result.ok else None
        return self.node.wraps.finish(key, value, not result.ok)

    def _refetch(self, peer: WorkerId, frame: rf.Refetch, meta: Any) -> None:
        r = Gid(*frame.rref)
        box = self.node.boxes.get(r)
        key = self.node.wraps.key_or_refusal(meta, ())

        def reply(done: cf.Future[Any]) -> None:
            result = self.payload._result_of(done, peer, allow_rrefs=True)  # RRefs inside: forked
            self.node.send_frame(
                peer,
                rf.UserReply,
                stamp=self.node.clock.lamport,
                call_id=frame.call_id,
                result=result,
                ext=self.node.wraps.ext(self._answer_part(key, done, result)),
            )

        if box is None:
            box = cf.Future()
            box.set_exception(RemoteError("RPCError", f"{self.node.me} holds no OwnerRRef {r}"))
        self.node.when_done(box, reply)
