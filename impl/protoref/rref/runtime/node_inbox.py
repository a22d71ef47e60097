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
from protoref.rref import events as ev
from protoref.rref.runtime import frames as fr
from protoref.rref.runtime.errors import RemoteError, remote_error, remote_type_name
from protoref.rref.runtime.link import corked
from protoref.rref.runtime.node_payload import NodePayload
from protoref.rref.runtime.udf import is_async, resolve

__all__ = ["NodeInbox"]

Gid = GloballyUniqueId
log = logging.getLogger("protoref.rref.runtime")


class NodeInbox(NodePayload):
    """What a worker does with the frames its peers send."""

    # ------------------------------------------------------------------ incoming

    def on_frame(self, peer: WorkerId, frame: fr.Frame, ack: Callable[[int], None]) -> None:
        self.apply_drops()
        try:
            with self.lock:
                self._dispatch(peer, frame, ack)
        except ProtocolError as err:  # the core refused: its state is unchanged
            self.protocol_errors.append(err)
            log.warning("%s: frame %s from %s refused: %s", self.me, frame.kind, peer, err)

    def _dispatch(self, peer: WorkerId, frame: fr.Frame, ack: Callable[[int], None]) -> None:
        if isinstance(frame, fr.Proto):
            if frame.msg.src != peer or frame.msg.dst != self.me:
                raise ProtocolError(
                    self.me,
                    "Receive",
                    f"{frame.msg.type} from {frame.msg.src} to "
                    f"{frame.msg.dst} arrived on {peer}'s link",
                )
            if frame.ctl is not None:
                seen = self.processed.setdefault(peer, set())
                if frame.ctl in seen:  # a copy already applied: ack again, apply nothing
                    ack(frame.ctl)
                    return
                self.take(peer, frame.msg, frame.stamp, frame.call, frame.result)
                seen.add(frame.ctl)
                ack(frame.ctl)
                return
            self.take(peer, frame.msg, frame.stamp, frame.call, frame.result)
        elif isinstance(frame, fr.Ack):
            self._merge(frame.stamp)
            for ctl in frame.ctls:
                self.unacked.pop(ctl, None)
            self.on_step()
        elif isinstance(frame, fr.UserCall):
            self._merge(frame.stamp)
            self._user_call(peer, frame)
        elif isinstance(frame, fr.UserReply):
            self._merge(frame.stamp)
            self.outcome(frame.result, frame.stamp, self.pop_call(frame.call_id))
            self.on_step()
        elif isinstance(frame, fr.Refetch):
            self._merge(frame.stamp)
            self._refetch(peer, frame)
        else:
            raise ProtocolError(self.me, "Receive", f"unexpected {frame.kind} frame from {peer}")

    def _merge(self, stamp: int) -> None:
        self.clock.lamport = max(self.clock.lamport, stamp)

    def take(
        self,
        peer: WorkerId,
        m: ev.Message,
        stamp: int,
        call: fr.CallBody | None,
        result: fr.Result | None,
    ) -> None:
        """A protocol message taken from the inbox."""
        if isinstance(m, ev.PythonRemoteCall):
            self._remote_call(m, stamp, call)
        elif isinstance(m, ev.RRefFetchRet):
            self.apply(m, stamp)
            target = self.fetches.pop(m.fork, None)
            if result is None:
                result = fr.Result(
                    ok=False, error_type="RPCError", error="fetch reply without value"
                )
            self.outcome(result, stamp, target)
        elif isinstance(m, ev.PythonCall):
            raise ProtocolError(self.me, "GetOrCreateRRef", "PYTHON_CALL outside a call or reply")
        else:
            self.apply(m, stamp)

    def _remote_call(self, m: ev.PythonRemoteCall, stamp: int, call: fr.CallBody | None) -> None:
        if call is None:
            raise ProtocolError(self.me, "AssignOwnerRRef", "PYTHON_REMOTE_CALL without a call")
        r = m.rref
        self.boxes.setdefault(r, cf.Future())
        self.computing.add(r)
        try:
            args, kwargs = self.decode_call(call, stamp)
            fn = resolve(call.fn)
        except Exception as err:  # the UDF fails before it runs: stored in the RRef, as PyTorch
            udf: cf.Future[Any] = cf.Future()
            udf.set_exception(err)
        else:
            udf = self.run_udf(lambda: fn(*args, **kwargs), is_async(fn))
        self.when_done(udf, self._remote_done, m, stamp)

    def _remote_done(self, m: ev.PythonRemoteCall, stamp: int, done: cf.Future[Any]) -> None:
        # Usually on the UDF's thread: REMOTE_RET and the waiting fetch's reply leave in one
        # write (corked), straight from here.
        with corked(), self.lock:
            self._assign(m, stamp, done)

    def _assign(self, m: ev.PythonRemoteCall, stamp: int, done: cf.Future[Any]) -> None:
        box = self.boxes.get(m.rref)
        self.computing.discard(m.rref)
        try:
            self.apply(m, stamp)
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

    def _user_call(self, peer: WorkerId, frame: fr.UserCall) -> None:
        body = frame.body
        try:
            args, kwargs = self.decode_call(body, frame.stamp)
            fn = resolve(body.fn)
        except Exception as err:
            udf: cf.Future[Any] = cf.Future()
            udf.set_exception(err)
        else:
            udf = self.run_udf(lambda: fn(*args, **kwargs), is_async(fn))

        def reply(done: cf.Future[Any]) -> None:
            result = self._result_of(done, peer, allow_rrefs=True)
            self.send_frame(
                peer, fr.UserReply, stamp=self.clock.lamport, call_id=frame.call_id, result=result
            )

        self.when_done(udf, reply)

    def _refetch(self, peer: WorkerId, frame: fr.Refetch) -> None:
        r = Gid(*frame.rref)
        box = self.boxes.get(r)

        def reply(done: cf.Future[Any]) -> None:
            result = self._result_of(done, peer, allow_rrefs=False)
            self.send_frame(
                peer, fr.UserReply, stamp=self.clock.lamport, call_id=frame.call_id, result=result
            )

        if box is None:
            box = cf.Future()
            box.set_exception(RemoteError("RPCError", f"{self.me} holds no OwnerRRef {r}"))
        self.when_done(box, reply)
