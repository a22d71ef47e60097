"""One worker's backward passes and control frames (``DistEngine`` and the cleanup handler).

:class:`Passes` is composed into :class:`~protoref.autograd.runtime.node.AutogradNode` over the
worker's :class:`~protoref.autograd.runtime.nodestate.NodeState`: ``dist_autograd.backward``
(``DistEngineExecute`` and the wait for the Echo flood to come back), the local passes
(:mod:`protoref.autograd.runtime.dispatch`: protoref's scalars or torch's autograd), the frames
that arrive (cleanups, ``BWD_START``/``BWD_REQ``/``BWD_RESP``/``BWD_ACK``), the failure
detector's verdicts, and :meth:`Passes.progress`: after every step, whatever the protocol can do
without an input (ready recv functions fire, complete graph tasks end, deferred cleanups run,
orphaned contexts are released).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from protoref.autograd.core import echo as bw
from protoref.autograd.core import forward as fw
from protoref.autograd.core.events import Msg
from protoref.autograd.core.ids import AutogradId
from protoref.autograd.core.transition import NotYetError, Step
from protoref.autograd.runtime import dispatch
from protoref.autograd.runtime.engine import FREED
from protoref.autograd.runtime.frames import AutogradFrame
from protoref.autograd.runtime.nodestate import NOT_FOUND, NodeState
from protoref.errors import ProtocolError

__all__ = ["Passes"]


class Passes:
    """The backward part of one worker's distributed autograd."""

    def __init__(self, state: NodeState) -> None:
        self.s = state

    # ------------------------------------------------------------------ progress

    def progress(self) -> None:
        """Everything the protocol can do now without an input: fire ready recv functions,
        end complete graph tasks, run cleanups that waited for a handler."""
        s = self.s
        moved = True
        while moved:
            moved = False
            for c, _, state in sorted(s.ctn.bstate):
                if state not in ("run", "err") or c not in s.ctn.ctxs:
                    continue
                for r in bw.ready_recvs(s.ctn, c):
                    recv = s.data_of(c).recvs.get(r.mid)
                    values = tuple(recv.grads) if recv is not None else ()
                    step = bw.recv_rpc_backward_apply(s.ctn, c, r)
                    s.send_control(step, s.commit(step), {r.mid: values})
                    moved = True
                dead = frozenset(s.dead)
                if bw.complete(s.ctn, c, dead):
                    step = bw.cleanup_backward_pass(s.ctn, c, dead)
                    s.data_of(c).free_ran()  # the part of the pass is over
                    s.send_control(step, s.commit(step))
                    moved = True
            moved = self._release_orphans() or moved
            waiting, s.deferred = s.deferred, []
            for msg, stamp in waiting:
                try:
                    step = fw.process_cleanup_autograd_context_req(s.ctn, msg)
                except NotYetError:
                    s.deferred.append((msg, stamp))
                    continue
                s.send_control(step, s.commit(step, stamp))
                moved = True
        s.changed.notify_all()

    def _release_orphans(self) -> bool:
        """``ReleaseOrphanedContext``: erase each context whose creator died, once no
        handler of it runs here (the Reference's "orphan"); True if one was released."""
        s = self.s
        moved = False
        if not s.dead:
            return moved
        for c in sorted(s.ctn.ctxs):
            if c.worker not in s.dead or c.worker == s.rank:
                continue
            try:
                step = fw.release_orphaned_context(s.ctn, c, creator_dead=True)
            except NotYetError:  # a handler of it still runs here: after it (defer)
                continue
            s.send_control(step, s.commit(step))
            moved = True
        return moved

    def peer_died(self, rank: int, name: str) -> None:
        """The failure detector declared worker ``rank`` (``name``) dead (``Crash(w)`` with
        ``Detect``, as a survivor sees it): each graph task here whose flood child it was gets
        the failed ``BWD_ACK`` the agents make up for it (an error naming it, so the root's
        backward raises), send functions whose recv functions died with it count as run
        (``Complete``), and contexts it created are released here (``ReleaseOrphanedContext``)."""
        s = self.s
        with s.lock:
            if rank == s.rank or rank in s.dead:
                return
            s.dead.add(rank)
            s.commit(fw.peer_died(s.ctn, rank))
            for c, child in sorted(s.ctn.echo_wait):
                if child != rank or not s.ctn.running(c):
                    continue
                data = s.data.get(c)
                if data is not None and not data.error:
                    data.error = (
                        f"Error on Node {s.rank}: worker {name} (rank {rank}) died during "
                        f"the backward pass of context {c.to_int()}"
                    )
                ack = Msg.bwd("BWD_ACK", c, None, s.ctn.pass_of(c), rank, s.rank, False)
                s.commit(bw.process_backward_ack(s.ctn, ack))
            self.progress()

    # ------------------------------------------------------------------ backward

    def backward(self, c: AutogradId, roots: Sequence[Any], retain_graph: bool) -> None:
        """``dist_autograd.backward``: pass ``p`` of ``c`` starts here (``DistEngineExecute``),
        this worker's root runs, the flood starts, and the call returns when every worker's
        part of the pass is over (Echo); it raises if a part failed. A pass over a graph an
        earlier pass freed fails at once and adds nothing."""
        s = self.s
        with s.lock:
            self.late_call(c)
            s.wait(lambda: not s.ctn.pending_of(c), "the context's calls")
            data = s.data_of(c)
            if s.ctn.running(c):
                raise RuntimeError(f"a backward pass of context {c.to_int()} is running")
            t = s.thread()
            step = s.step(bw.dist_engine_execute, s.ctn, c, t, retain_graph)
            p = step.state.pass_of(c)
            if step.state.task_in(c, "fail"):  # the graph was freed
                s.commit(step)
                raise RuntimeError(f"Error on Node {s.rank}: {FREED}")
            try:
                starts = dispatch.starts_of(roots)
            except RuntimeError:  # an engine graph freed outside the spec's view (no event)
                raise RuntimeError(f"Error on Node {s.rank}: {FREED}") from None
            data.new_pass(p, retain_graph)
            with s.batch():  # the flood and the first gradient requests in one write
                lamport = s.commit(step)
                self.run_local(c, starts)
                s.send_control(step, lamport)
                self.progress()

            def over() -> bool:
                return c not in s.ctn.ctxs or not s.ctn.running(c)

            s.wait(over, f"the backward pass of context {c.to_int()}")
            if (c, p, "fail") in s.ctn.results:
                error = data.error or f"the backward pass of context {c.to_int()} failed"
                raise RuntimeError(
                    error
                    if error.startswith("Error on Node")
                    else f"Error on Node {s.rank}: {error}"
                )

    def run_local(self, c: AutogradId, starts: Sequence[tuple[Any, Any]]) -> None:
        """The engine's part of a step: run the local graph from ``starts``; an error of a
        backward function fails the graph task (``BackwardError``), remembered for the root."""
        s = self.s
        data = s.data_of(c)
        try:
            dispatch.run_local(starts, data)
        except (RuntimeError, ValueError) as exc:
            if not data.error:
                data.error = f"Error on Node {s.rank}: {exc}"
            if s.ctn.task_in(c, "run"):
                s.commit(bw.backward_error(s.ctn, c))

    def late_call(self, c: AutogradId) -> None:
        """``backward`` / ``get_gradients`` begin with ``retrieveContext``: for a context this
        worker created and released, the first such call is the spec's ``RetrieveContext``
        (#40880); it raises torch's error, as for any id not held here."""
        s = self.s
        with s.lock:
            if c in s.ctn.ctxs:
                return
            if c.worker == s.rank and s.ctn.refused(c) and c not in s.ctn.late:
                s.commit(fw.retrieve_context(s.ctn, c))
            raise RuntimeError(NOT_FOUND.format(c.to_int()))

    # ------------------------------------------------------------------ control frames

    def on_frame(self, frame: AutogradFrame) -> None:
        """A cleanup or a backward-pass message arrived."""
        s = self.s
        msg = frame.msg
        with s.lock:
            if msg.dst != s.rank:
                raise ProtocolError(s.node_name, "frame", f"{msg} delivered to {s.rank}")
            if msg.type == "CLEANUP":
                s.deferred.append((msg, frame.stamp))
            elif msg.type in ("BWD_REQ", "BWD_START"):
                self._backward_message(frame)
            elif msg.type == "BWD_ACK":
                data = s.data.get(msg.ctx)
                if data is not None and frame.error and not data.error:
                    data.error = frame.error
                s.commit(bw.process_backward_ack(s.ctn, msg), frame.stamp)
            elif msg.type == "BWD_RESP":
                step = bw.process_backward_autograd_resp(s.ctn, msg)
                s.send_control(step, s.commit(step, frame.stamp))
            else:
                raise ProtocolError(s.node_name, "frame", f"a {msg.type} is no control frame")
            self.progress()

    def _backward_message(self, frame: AutogradFrame) -> None:
        """A ``BWD_START`` or ``BWD_REQ``: the core decides (a stale pass is dropped, a new
        pass's task starts); the engine's values follow: a new task starts its recv functions
        from zero, and a request that applies runs the send function's local graph."""
        s = self.s
        msg, c = frame.msg, frame.msg.ctx
        before = s.ctn
        if msg.type == "BWD_START":
            step = bw.process_backward_start(s.ctn, msg)
        else:
            step = bw.process_backward_autograd_req(s.ctn, msg)
        task = step.state.task(c)
        data = s.data.get(c)
        if data is not None and task is not None and task != before.task(c):
            data.new_pass(task[1], frame.retain_graph)
        lamport = s.commit(step, frame.stamp)
        s.send_control(step, lamport)
        mid = msg.mid
        applied = mid is not None and (c, msg.pass_, mid) in step.state.grads - before.grads
        send = data.sends.get(mid) if (data is not None and mid is not None) else None
        if applied and send is not None:
            try:
                starts = send.roots(dispatch.frame_values(frame))
            except Exception as exc:  # gradients that do not fit the tensors sent
                starts = []
                if data is not None and not data.error:
                    data.error = f"Error on Node {s.rank}: {exc}"
                if s.ctn.task_in(c, "run"):
                    s.commit(bw.backward_error(s.ctn, c))
            self.run_local(c, starts)

    def discard(self, frame: AutogradFrame) -> None:
        """``Discard``: a control message to a dead worker; a gradient request's sender then
        gets an error answer (its pass fails)."""
        from protoref.autograd.core.network import discard  # noqa: PLC0415
        from protoref.autograd.trace import args as a  # noqa: PLC0415 - only on this rare path

        s = self.s
        with s.lock:
            made = discard(frame.msg, dst_alive=False)
            step = Step(s.ctn, made, a.DiscardArgs.of(msg=frame.msg))
            lamport = s.commit(step)
            for m in made:
                if m.type == "BWD_RESP":
                    answer = bw.process_backward_autograd_resp(s.ctn, m)
                    s.send_control(answer, s.commit(answer, lamport))
                elif m.type == "BWD_ACK":
                    data = s.data.get(m.ctx)
                    if data is not None and not data.error:  # the root's error names it
                        data.error = (
                            f"Error on Node {s.rank}: worker {m.src} cannot be reached: "
                            f"the backward pass of context {m.ctx.to_int()} failed there"
                        )
                    s.commit(bw.process_backward_ack(s.ctn, m), lamport)
            self.progress()
