"""Planted bugs: broken variants of the Reference autograd core, for proving the checker.

Each :class:`Fault` is a protocol bug of the kind torch's distributed autograd has had (the
issue it recalls is named) or the Reference guards against. :func:`inject` plants one for the
duration of a ``with`` block by replacing one function of the core (in
:mod:`protoref.autograd.core.forward`, :mod:`protoref.autograd.core.echo` or
:mod:`protoref.autograd.core.state`) with a broken version, where the simulator and the other
transitions look it up; outside the block the implementation is the correct one. None of them
is a case the tests of the core construct by hand.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import Any, Final

from protoref.autograd.core import echo as bw
from protoref.autograd.core import forward as fw
from protoref.autograd.core import state as st
from protoref.autograd.core.events import Msg
from protoref.autograd.core.horizon import NO_HORIZON, Horizon
from protoref.autograd.core.ids import ROOT_FN, AutogradId
from protoref.autograd.core.state import Container, Handler, RecvFn, SendFn
from protoref.autograd.core.transition import Step
from protoref.autograd.sim.simulator import SimConfig, Simulator
from protoref.errors import ProtorefError
from protoref.tracing import TraceSink

__all__ = ["FAULTS", "Fault", "inject", "run_with_fault", "target"]


class Fault(enum.Enum):
    """A planted bug. The value is its name in test ids."""

    #: An erased context is not remembered (no tombstone): a late request or answer brings it
    #: back (#38513).
    FORGET_TOMBSTONE = "forget-tombstone"
    #: The caller's addRecvRpcBackward ignores the tombstone: a late answer re-creates the
    #: context its block released (#38513, caller side).
    RESURRECT_LATE_ANSWER = "resurrect-late-answer"
    #: The cleanup cascade sends the cleanup back to the worker it came from (#32497).
    CLEANUP_BACK_TO_SENDER = "cleanup-back-to-sender"
    #: Cleanups and releases do not wait for the running handlers of the context: the UDF's
    #: context vanishes under it (#38513, mid-request).
    CLEANUP_MID_REQUEST = "cleanup-mid-request"
    #: Known workers are recorded only for messages that carry grad (before PR #30914).
    KNOWN_ONLY_ON_GRAD = "known-only-on-grad"
    #: A recv function nothing consumes reports its zero gradient as a contribution.
    ZERO_COUNTED_AS_GRADIENT = "zero-counted-as-gradient"
    #: A recv function fires once the root has run, without waiting for the send functions
    #: that consume it (its gradient is incomplete).
    RECV_FIRES_EARLY = "recv-fires-early"
    #: A graph task reports completion before its flood children have acknowledged.
    PASS_ENDS_BEFORE_ACKS = "pass-ends-before-acks"
    #: A wrapped answer's send function forgets the request's recv function among its inputs.
    ANSWER_FORGETS_REQUEST = "answer-forgets-request"
    #: A nested call draws its message id without advancing the counter (ids reused).
    NESTED_REUSES_ID = "nested-reuses-id"
    #: The backward flood is passed back to the worker it came from as well.
    FLOOD_BACK_TO_SENDER = "flood-back-to-sender"
    #: A failed graph task acknowledges the flood as a success: the root's backward returns
    #: normally from a pass in which a backward function raised (spec "ackErrors").
    ACK_HIDES_ERROR = "ack-hides-error"
    #: A context's next backward pass reuses the first pass's number: its gradient tokens and
    #: messages cannot be told from the earlier pass's (spec "passTag", PR #32506's
    #: accumulation).
    PASS_NUMBER_REUSED = "pass-number-reused"


FAULTS: Final = tuple(Fault)


def _forget_tombstone(original: Callable[..., Container]) -> Callable[..., Container]:
    def erase(ctn: Container, c: AutogradId, horizons: Mapping[int, Horizon]) -> Container:
        return original(ctn, c, horizons).evolve(tomb=ctn.tomb, horizon=ctn.horizon)

    return erase


def _resurrect(original: Callable[..., Step]) -> Callable[..., Step]:
    def deserialize(ctn: Container, msg: Msg, loss: bool) -> Step:
        result = original(ctn.evolve(tomb=frozenset(), horizon={}), msg, loss)
        return result._replace(state=result.state.evolve(tomb=ctn.tomb, horizon=ctn.horizon))

    return deserialize


def _cleanup_back(original: Callable[..., Step]) -> Callable[..., Step]:
    def cleanup(ctn: Container, msg: Msg) -> Step:
        result = original(ctn, msg)
        if msg.ctx in ctn.ctxs and msg.src in ctn.known_of(msg.ctx):
            hz = result.state.horizon.get(msg.ctx.worker, NO_HORIZON)
            back = Msg.cleanup(msg.ctx, ctn.me, msg.src, msg.src, hz)
            return result._replace(sent=(*result.sent, back))
        return result

    return cleanup


def _no_handlers(_original: Callable[..., list[Handler]]) -> Callable[..., list[Handler]]:
    def handlers_of(self: Container, c: AutogradId) -> list[Handler]:
        del self, c
        return []

    return handlers_of


def _known_on_grad(original: Callable[..., Step]) -> Callable[..., Step]:
    def send(ctn: Container, dst: int, grad: bool, *args: Any, **kwargs: Any) -> Step:
        result = original(ctn, dst, grad, *args, **kwargs)
        if grad:
            return result
        return result._replace(state=result.state.evolve(known=ctn.known))

    return send


def _zero_counted(original: Callable[..., Step]) -> Callable[..., Step]:
    def apply(ctn: Container, c: AutogradId, r: RecvFn) -> Step:
        result = original(ctn, c, r)
        return result._replace(sent=tuple(m.model_copy(update={"flag": True}) for m in result.sent))

    return apply


def _fires_early(_original: Callable[..., bool]) -> Callable[..., bool]:
    def ready(ctn: Container, c: AutogradId, r: RecvFn) -> bool:
        done = ctn.execd_of(c)
        consumers = ctn.consumers(c, r)
        return r.mid not in ctn.fired_of(c) and (ROOT_FN not in consumers or ROOT_FN in done)

    return ready


def _ends_early(_original: Callable[..., bool]) -> Callable[..., bool]:
    def complete(ctn: Container, c: AutogradId, dead: frozenset[int] = frozenset()) -> bool:
        sends = {s.mid for s in ctn.sends_of(c) if s.dst not in dead}
        recvs = {r.mid for r in ctn.recvs_of(c)}
        return (
            sends <= ctn.execd_of(c)
            and recvs <= ctn.fired_of(c)
            and (ctn.is_root(c) or ctn.has_parent(c))
        )

    return complete


def _forgets_request(original: Callable[..., Step]) -> Callable[..., Step]:
    def finish(ctn: Container, h: Handler, resp_grad: bool, *args: Any, **kw: Any) -> Step:
        result = original(ctn, h, resp_grad, *args, **kw)
        new = frozenset(result.state.sends - ctn.sends)
        if not new:
            return result
        (send,) = new
        broken = SendFn.of(send.ctx, send.mid, send.dst, send.inputs - {h.req})
        sends = (result.state.sends - new) | {broken}
        return result._replace(state=result.state.evolve(sends=sends))

    return finish


def _reuses_id(original: Callable[..., Step]) -> Callable[..., Step]:
    def nested(ctn: Container, h: Handler, dst: int, grad: bool, *args: Any, **kw: Any) -> Step:
        result = original(ctn, h, dst, grad, *args, **kw)
        return result._replace(state=result.state.evolve(next_msg=ctn.next_msg))

    return nested


def _flood_back(original: Callable[..., Step]) -> Callable[..., Step]:
    def start(ctn: Container, msg: Msg) -> Step:
        result = original(ctn, msg)
        if result.state.has_parent(msg.ctx) and not ctn.has_parent(msg.ctx):
            back = Msg.bwd("BWD_START", msg.ctx, None, msg.pass_, ctn.me, msg.src, True)
            wait = result.state.echo_wait | {(msg.ctx, msg.src)}
            return result._replace(
                state=result.state.evolve(echo_wait=wait), sent=(*result.sent, back)
            )
        return result

    return start


def _ack_hides(original: Callable[..., Step]) -> Callable[..., Step]:
    def cleanup(ctn: Container, c: AutogradId, *args: Any, **kw: Any) -> Step:
        result = original(ctn, c, *args, **kw)
        sent = tuple(
            m.model_copy(update={"flag": True}) if m.type == "BWD_ACK" else m for m in result.sent
        )
        return result._replace(sent=sent)

    return cleanup


def _pass_reused(original: Callable[..., Step]) -> Callable[..., Step]:
    def execute(ctn: Container, c: AutogradId, *args: Any, **kw: Any) -> Step:
        result = original(ctn.evolve(results=frozenset()), c, *args, **kw)
        kept = ctn.results | (result.state.results - ctn.results)
        return result._replace(state=result.state.evolve(results=kept))

    return execute


#: fault -> (module or class, attribute, wrapper of the correct function).
_PLANTS: Final[dict[Fault, tuple[Any, str, Callable[[Any], Any]]]] = {
    Fault.FORGET_TOMBSTONE: (fw, "erase", _forget_tombstone),
    Fault.RESURRECT_LATE_ANSWER: (fw, "deserialize_forward_autograd_resp", _resurrect),
    Fault.CLEANUP_BACK_TO_SENDER: (fw, "process_cleanup_autograd_context_req", _cleanup_back),
    Fault.CLEANUP_MID_REQUEST: (st.Container, "handlers_of", _no_handlers),
    Fault.KNOWN_ONLY_ON_GRAD: (fw, "send_message_with_autograd", _known_on_grad),
    Fault.ZERO_COUNTED_AS_GRADIENT: (bw, "recv_rpc_backward_apply", _zero_counted),
    Fault.RECV_FIRES_EARLY: (bw, "ready_recv", _fires_early),
    Fault.PASS_ENDS_BEFORE_ACKS: (bw, "complete", _ends_early),
    Fault.ANSWER_FORGETS_REQUEST: (fw, "finish_forward_autograd_req", _forgets_request),
    Fault.NESTED_REUSES_ID: (fw, "nested_send_message_with_autograd", _reuses_id),
    Fault.FLOOD_BACK_TO_SENDER: (bw, "process_backward_start", _flood_back),
    Fault.ACK_HIDES_ERROR: (bw, "cleanup_backward_pass", _ack_hides),
    Fault.PASS_NUMBER_REUSED: (bw, "dist_engine_execute", _pass_reused),
}


def target(fault: Fault) -> tuple[Any, str]:
    """Where ``fault`` is planted: the module or class, and the attribute it replaces."""
    owner, name, _ = _PLANTS[fault]
    return owner, name


@contextmanager
def inject(fault: Fault) -> Iterator[None]:
    """Plant ``fault`` for the duration of the block."""
    owner, name, wrap = _PLANTS[fault]
    original = getattr(owner, name)
    with ExitStack() as stack:
        setattr(owner, name, wrap(original))
        stack.callback(setattr, owner, name, original)
        yield


def run_with_fault(
    fault: Fault, seed: int, steps: int, sink: TraceSink, config: SimConfig | None = None
) -> ProtorefError | None:
    """One simulated run with ``fault`` planted, its trace written to ``sink``. A broken run
    often ends in an error of its own (a step the bug made impossible, a violated property at
    the end); it stops there, keeps the trace so far, and returns the error."""
    with inject(fault):
        try:
            Simulator(seed, config, sink).run(steps)
        except ProtorefError as exc:
            sink.close()
            return exc
    return None
