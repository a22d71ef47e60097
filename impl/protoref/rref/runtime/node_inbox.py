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

from protoref.autograd.runtime.frames import AutogradMeta
from protoref.autograd.runtime.node import Refused
from protoref.errors import ProtocolError
from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rpc import frames as fr
from protoref.rpc.errors import RemoteError, remote_error, remote_type_name
from protoref.rpc.link import corked
from protoref.rpc.udf import is_async, resolve
from protoref.rref.core import events as ev
from protoref.rref.runtime.node_payload import NodePayload

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
                self.take(
                    peer, frame.msg, frame.stamp, frame.call, frame.result, autograd=frame.autograd
                )
                seen.add(frame.ctl)
                ack(frame.ctl)
                return
            self.take(
                peer, frame.msg, frame.stamp, frame.call, frame.result, autograd=frame.autograd
            )
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
            target = self.pop_call(frame.call_id)
            if self._ag_waits("_ag_calls", frame.call_id):  # wrapped: autograd sees it first
                value = self._decoded(frame.result, frame.stamp)
                self.agent.ag_call_done(frame.call_id, frame.autograd, value)
                self.outcome(frame.result, frame.stamp, target, value)
            else:
                self.outcome(frame.result, frame.stamp, target)
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
        *,
        autograd: AutogradMeta | None = None,
    ) -> None:
        """A protocol message taken from the inbox (``autograd``: its distributed autograd
        part, for a remote call, a fetch and their replies made under a context)."""
        if isinstance(m, ev.PythonRemoteCall):
            self._remote_call(m, stamp, call, autograd)
        elif isinstance(m, ev.RRefFetchRet):
            self.apply(m, stamp)
            target = self.fetches.pop(m.fork, None)
            if result is None:
                result = fr.Result(
                    ok=False, error_type="RPCError", error="fetch reply without value"
                )
            if self._ag_waits("_ag_fetches", m.fork):  # a wrapped fetch: autograd sees it first
                value = self._decoded(result, stamp)
                self.agent.ag_fetch_done(m.fork, autograd, value)
                self.outcome(result, stamp, target, value)
            else:
                self.outcome(result, stamp, target)
        elif isinstance(m, ev.PythonCall):
            raise ProtocolError(self.me, "GetOrCreateRRef", "PYTHON_CALL outside a call or reply")
        elif isinstance(m, ev.RRefFetchCall) and autograd is not None:
            self.agent._ag_serving[m.fork] = self._ag_request(autograd, ())
            self.apply(m, stamp)
        else:
            self.apply(m, stamp)
            if isinstance(m, ev.RemoteRet) and self._ag_waits("_ag_remotes", m.rref):
                self.agent.ag_remote_done(m.rref, autograd)

    def _ag_waits(self, table: str, key: object) -> bool:
        """A wrapped request waits for this answer in the agent's ``table`` (a node without an
        agent, in tests, has none)."""
        return self.agent is not None and key in getattr(self.agent, table)

    def _ag_request(self, meta: AutogradMeta | None, args: object) -> Any:
        """The handler key of a wrapped request, or the refusal (a released context); None
        for a request that is not wrapped."""
        if meta is None or self.agent is None:
            return None
        try:
            return self.agent.ag_request(meta, args)
        except Refused as refused:
            return refused

    def _ag_guarded(self, key: Any, fn: Callable[[], Any]) -> Callable[[], Any]:
        if key is None:
            return fn
        guarded: Callable[[], Any] = self.agent.ag_guarded(key, fn)
        return guarded

    def fetch_answered(
        self, fork: Gid, done: cf.Future[Any], result: fr.Result
    ) -> AutogradMeta | None:
        """The autograd part of the reply to a fetch made under a context: its handler
        finishes with the value (wrapped when it requires grad)."""
        key = None if self.agent is None else self.agent._ag_serving.pop(fork, None)
        if key is None:
            return None
        if isinstance(key, Refused):
            return key.meta
        value = done.result() if result.ok else None
        meta: AutogradMeta | None = self.agent.ag_finish(key, value, not result.ok)
        return meta

    def _decoded(self, result: fr.Result, stamp: int) -> Any:
        """A reply's value, decoded once (autograd attaches its recv function to its tensors
        before the caller's future sees it); None for an error."""
        return self.decode(result.value, result.forks, stamp, "result") if result.ok else None

    def _remote_call(
        self,
        m: ev.PythonRemoteCall,
        stamp: int,
        call: fr.CallBody | None,
        autograd: AutogradMeta | None = None,
    ) -> None:
        if call is None:
            raise ProtocolError(self.me, "AssignOwnerRRef", "PYTHON_REMOTE_CALL without a call")
        r = m.rref
        self.boxes.setdefault(r, cf.Future())
        self.computing.add(r)
        try:
            args, kwargs = self.decode_call(call, stamp)
            fn = resolve(call.fn)
        except Exception as err:  # the UDF fails before it runs: stored in the RRef, as PyTorch
            if autograd is not None and self.agent is not None:
                self.agent._ag_creating[r] = self._ag_request(autograd, None)
            udf: cf.Future[Any] = cf.Future()
            udf.set_exception(err)
        else:
            key = self._ag_request(autograd, (args, kwargs))
            if key is not None:
                self.agent._ag_creating[r] = key
            if isinstance(key, Refused):
                udf = cf.Future()
                udf.set_exception(RemoteError("RuntimeError", str(key)))
            else:
                udf = self.run_udf(self._ag_guarded(key, lambda: fn(*args, **kwargs)), is_async(fn))
        self.when_done(udf, self._remote_done, m, stamp)

    def _remote_done(self, m: ev.PythonRemoteCall, stamp: int, done: cf.Future[Any]) -> None:
        # Usually on the UDF's thread: REMOTE_RET and the waiting fetch's reply leave in one
        # write (corked), straight from here.
        with corked(), self.lock:
            self._assign(m, stamp, done)

    def _assign(self, m: ev.PythonRemoteCall, stamp: int, done: cf.Future[Any]) -> None:
        box = self.boxes.get(m.rref)
        self.computing.discard(m.rref)
        # a remote call made under a context: its handler finishes (the value stays here, so
        # the answer is never wrapped) and REMOTE_RET carries the answer's autograd part
        key = None if self.agent is None else self.agent._ag_creating.pop(m.rref, None)
        meta = key.meta if isinstance(key, Refused) else None
        if key is not None and not isinstance(key, Refused):
            meta = self.agent.ag_finish(key, None, done.exception() is not None)
        try:
            step = self.apply(m, stamp, send=meta is None)
            if meta is not None:
                for sent in step.sent:
                    autograd = meta if isinstance(sent, ev.RemoteRet) else None
                    self.emit(sent, self.clock.lamport, autograd=autograd)
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
        key: Any = None
        try:
            args, kwargs = self.decode_call(body, frame.stamp)
            fn = resolve(body.fn)
        except Exception as err:
            key = self._ag_request(frame.autograd, None)
            udf: cf.Future[Any] = cf.Future()
            udf.set_exception(err)
        else:
            key = self._ag_request(frame.autograd, (args, kwargs))
            if isinstance(key, Refused):
                udf = cf.Future()
                udf.set_exception(RemoteError("RuntimeError", str(key)))
            else:
                udf = self.run_udf(self._ag_guarded(key, lambda: fn(*args, **kwargs)), is_async(fn))

        def reply(done: cf.Future[Any]) -> None:
            result = self._result_of(done, peer, allow_rrefs=True)
            autograd = self._ag_answer(key, done, result)
            self.send_frame(
                peer,
                fr.UserReply,
                stamp=self.clock.lamport,
                call_id=frame.call_id,
                result=result,
                autograd=autograd,
            )

        self.when_done(udf, reply)

    def _ag_answer(self, key: Any, done: cf.Future[Any], result: fr.Result) -> AutogradMeta | None:
        """The autograd part of a wrapped request's reply (None for an unwrapped one)."""
        if key is None:
            return None
        if isinstance(key, Refused):
            return key.meta
        value = done.result() if result.ok else None
        meta: AutogradMeta | None = self.agent.ag_finish(key, value, not result.ok)
        return meta

    def _refetch(self, peer: WorkerId, frame: fr.Refetch) -> None:
        r = Gid(*frame.rref)
        box = self.boxes.get(r)
        key = self._ag_request(frame.autograd, ())

        def reply(done: cf.Future[Any]) -> None:
            result = self._result_of(done, peer, allow_rrefs=True)  # RRefs inside: forked
            autograd = self._ag_answer(key, done, result)
            self.send_frame(
                peer,
                fr.UserReply,
                stamp=self.clock.lamport,
                call_id=frame.call_id,
                result=result,
                autograd=autograd,
            )

        if box is None:
            box = cf.Future()
            box.set_exception(RemoteError("RPCError", f"{self.me} holds no OwnerRRef {r}"))
        self.when_done(box, reply)
