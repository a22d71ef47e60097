"""The per-worker state of distributed autograd: DistAutograd.tla's variables at one worker.

A :class:`Container` is one worker's ``DistAutogradContainer`` as the Reference variant of the
spec has it. Every per-worker spec variable is a field under its snake-case name (``nextCtx`` ->
``next_ctx``, ``echoWait`` -> ``echo_wait``, ...). The spec's global set ``handlers`` is
partitioned by the worker a handler runs on (``h.w``), exactly, since a handler is one worker's;
``net`` belongs to the driver and the history variable ``released`` to the invariant checker.

``cur[w]``, each application thread's ``current_context_id_``, is :attr:`Container.threads`:
the current context of each application thread of the worker that has one (torch's
thread-local; the spec's ``Threads`` are naturals, and so are these keys).

The spec's global ``results`` (what the creator's backward calls returned), ``freed`` (contexts
whose graph a pass without ``retain_graph`` freed) and ``late`` (calls made with an id after its
block) only ever concern contexts their worker created (the root is the creator): each
container holds its own part of them; they are history, not logged.

Records are the spec's: :class:`SendFn` (``SendRec``: a ``SendRpcBackward`` and its next edges
``in``, the recv functions its inputs came from), :class:`RecvFn` (``RecvRec``: a
``RecvRpcBackward``; ``loss`` = the application's loss may use its output) and :class:`Handler`
(``HandlerRec``: a request being processed under the caller's context). The container is
immutable: a transition returns a new one, so an input that raises leaves the state it was
applied to untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Annotated, Final, Literal, Self, TypeAlias

from pydantic import ConfigDict, Field

from protoref.autograd.core.events import MaybeId
from protoref.autograd.core.horizon import Horizon, covered
from protoref.autograd.core.ids import ROOT_FN, AutogradId
from protoref.tracing import FrozenModel, TlaSet, trusted

__all__ = [
    "BState",
    "Container",
    "Handler",
    "RecvFn",
    "SendFn",
]

Id: TypeAlias = AutogradId
#: Graph task state of a context on a worker (spec ``TaskStates``): running, running after an
#: error (Echo lets a failed task drain), complete, failed.
BState: TypeAlias = Literal["run", "err", "done", "fail"]
#: What the creator's backward call returned for a pass (spec ``results``).
Outcome: TypeAlias = Literal["done", "fail"]


class SendFn(FrozenModel):
    """DistAutograd.tla ``SendRec`` ``[ctx, mid, dst, in]``: a ``SendRpcBackward`` registered
    under message id ``mid`` for a message to ``dst``; ``in`` (``inputs`` in Python, a keyword)
    are the recv functions its tensors came from, which it feeds in the backward pass."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    ctx: Id
    mid: Id
    dst: int
    inputs: Annotated[TlaSet[Id], Field(alias="in")]

    @classmethod
    def of(cls, ctx: Id, mid: Id, dst: int, inputs: frozenset[Id]) -> Self:
        return trusted(cls, {"ctx": ctx, "mid": mid, "dst": dst, "inputs": inputs})


class RecvFn(FrozenModel):
    """DistAutograd.tla ``RecvRec`` ``[ctx, mid, src, loss]``: a ``RecvRpcBackward`` for the
    tensors of message ``mid`` from ``src``; ``loss``: the application's loss may use them."""

    ctx: Id
    mid: Id
    src: int
    loss: bool

    @classmethod
    def of(cls, ctx: Id, mid: Id, src: int, loss: bool) -> Self:
        return trusted(cls, {"ctx": ctx, "mid": mid, "src": src, "loss": loss})


class Handler(FrozenModel):
    """DistAutograd.tla ``HandlerRec``: request ``req`` from ``caller`` being processed on ``w``
    under context ``ctx`` (``DistAutogradContextGuard``). ``grad``: the request carried grad;
    ``wait``: the nested call it waits for (None: running); ``called``: it made a nested call;
    ``nr``: the recv functions of its nested answers; ``err``: a nested call failed."""

    w: int
    ctx: Id
    req: Id
    caller: int
    grad: bool
    wait: MaybeId = None
    called: int = Field(default=0, ge=0)
    nr: TlaSet[Id] = frozenset()
    forgot: TlaSet[Id] = frozenset()
    err: bool = False

    @classmethod
    def start(cls, w: int, ctx: Id, req: Id, caller: int, grad: bool) -> Self:
        """A handler as ProcessForwardAutogradReq starts it."""
        values = {
            "w": w,
            "ctx": ctx,
            "req": req,
            "caller": caller,
            "grad": grad,
            "wait": None,
            "called": 0,
            "nr": frozenset(),
            "forgot": frozenset(),
            "err": False,
        }
        return trusted(cls, values)

    def evolve(self, **changes: object) -> Handler:
        """``[h EXCEPT !.field = value, ...]``, unvalidated (the core's own values)."""
        return trusted(Handler, {**self.__dict__, **changes})


_NO_THREADS: Final[Mapping[int, Id]] = MappingProxyType({})
_NO_HORIZONS: Final[Mapping[int, Horizon]] = MappingProxyType({})


@dataclass(frozen=True)
class Container:
    """The ``DistAutogradContainer`` of worker ``me`` (DistAutograd.tla, Reference variant)."""

    me: int
    next_ctx: int = 0
    next_msg: int = 0
    ctxs: frozenset[Id] = frozenset()
    #: Application thread -> its current context (spec ``cur[w][t]``; absent: ``None``).
    threads: Mapping[int, Id] = field(default_factory=lambda: _NO_THREADS)
    known: frozenset[tuple[Id, int]] = frozenset()
    sends: frozenset[SendFn] = frozenset()
    recvs: frozenset[RecvFn] = frozenset()
    handlers: frozenset[Handler] = frozenset()
    pending: frozenset[tuple[Id, Id]] = frozenset()
    detached: frozenset[tuple[Id, Id]] = frozenset()
    tomb: frozenset[Id] = frozenset()
    #: Creator -> its newest horizon this worker heard (spec ``horizon[w]``; absent:
    #: ``NoHorizon``), what bounds ``tomb`` (:mod:`protoref.autograd.core.horizon`).
    horizon: Mapping[int, Horizon] = field(default_factory=lambda: _NO_HORIZONS)
    alive: bool = True
    execd: frozenset[tuple[Id, Id]] = frozenset()
    fired: frozenset[tuple[Id, Id]] = frozenset()
    #: ``<<c, pass, fn>>``: gradient contributions accumulated into the worker's leaves.
    grads: frozenset[tuple[Id, int, Id]] = frozenset()
    #: ``<<c, pass, state>>``: the latest graph task of each context.
    bstate: frozenset[tuple[Id, int, BState]] = frozenset()
    outst: frozenset[tuple[Id, Id]] = frozenset()
    awaiting: frozenset[tuple[Id, int, Id]] = frozenset()
    parent: frozenset[tuple[Id, int]] = frozenset()
    echo_wait: frozenset[tuple[Id, int]] = frozenset()
    #: This worker's part of the spec's histories ``results``, ``freed`` and ``late``.
    results: frozenset[tuple[Id, int, Outcome]] = frozenset()
    freed: frozenset[Id] = frozenset()
    late: frozenset[Id] = frozenset()

    def evolve(self, **changes: object) -> Container:
        """A copy with ``changes`` applied, without re-running ``__init__`` (the hot path).
        Values come from the core's own transitions: only the field names are checked."""
        values = {**self.__dict__, **changes}
        if len(values) != _NFIELDS:
            raise TypeError(f"Container has no field(s) {sorted(changes.keys() - _FIELDS)}")
        new = _new(Container)
        _set_attr(new, "__dict__", values)
        return new

    # ------------------------------------------------------------------ the spec's operators

    @property
    def cur(self) -> Id | None:
        """``cur[w][0]``: thread 0's current context."""
        return self.threads.get(0)

    def cur_pairs(self) -> frozenset[tuple[int, Id]]:
        """``cur[w]`` as the set of ``<<t, c>>`` of its threads that have a context."""
        return frozenset(self.threads.items())

    def known_of(self, c: Id) -> frozenset[int]:
        """``KnownOf(w, c)``: the workers this worker sent a wrapped message of ``c`` to."""
        return frozenset(x for k, x in self.known if k == c)

    def sends_of(self, c: Id) -> list[SendFn]:
        return [s for s in self.sends if s.ctx == c]

    def recvs_of(self, c: Id) -> list[RecvFn]:
        return [r for r in self.recvs if r.ctx == c]

    def execd_of(self, c: Id) -> frozenset[Id]:
        return frozenset(f for k, f in self.execd if k == c)

    def handlers_of(self, c: Id) -> list[Handler]:
        """``HandlersOf(w, c)``."""
        return [h for h in self.handlers if h.ctx == c]

    def fired_of(self, c: Id) -> frozenset[Id]:
        return frozenset(f for k, f in self.fired if k == c)

    def task(self, c: Id) -> tuple[Id, int, BState] | None:
        """``Task(w, c)``: the latest graph task of ``c`` here (at most one)."""
        return next((e for e in self.bstate if e[0] == c), None)

    def started(self, c: Id) -> bool:
        """``Started(w, c)``: a graph task of ``c`` exists here (in any state)."""
        return self.task(c) is not None

    def running(self, c: Id) -> bool:
        """``Running(w, c)``: the task runs (``run``, or ``err``: failed, draining)."""
        e = self.task(c)
        return e is not None and e[2] in ("run", "err")

    def task_in(self, c: Id, state: BState) -> bool:
        """``TaskIn(w, c, s)``."""
        e = self.task(c)
        return e is not None and e[2] == state

    def pass_of(self, c: Id) -> int:
        """``PassOf(w, c)``: the pass of the latest task (0: none)."""
        e = self.task(c)
        return 0 if e is None else e[1]

    def stale_pass(self, c: Id, p: int) -> bool:
        """``StalePass(w, c, p)`` ("passTag"): this worker has finished pass ``p`` of ``c``, or
        is on a later one."""
        e = self.task(c)
        if e is None:
            return False
        return p < e[1] or (p == e[1] and e[2] not in ("run", "err"))

    def finished(self, c: Id) -> int:
        """``Cardinality(Finished(c))``: the passes of ``c`` the root's backward returned from."""
        return sum(1 for k, _, _ in self.results if k == c)

    def is_root(self, c: Id) -> bool:
        """``IsRoot(w, c)``: this worker ran the root of ``c``'s pass."""
        return (c, ROOT_FN) in self.execd

    def has_parent(self, c: Id) -> bool:
        return any(k == c for k, _ in self.parent)

    def pending_of(self, c: Id) -> bool:
        """Some application future of ``c`` is still pending."""
        return any(k == c for k, _ in self.pending)

    def handlers_waiting(self, req: Id | None) -> list[Handler]:
        """``HandlersWaiting(w, rq)``."""
        return [h for h in self.handlers if h.wait is not None and h.wait == req]

    def someone_waits(self, c: Id, req: Id | None) -> bool:
        """``SomeoneWaits(w, c, rq)``: an application future, a forgotten nested call's future
        or a handler waits for the answer to ``req``."""
        if req is None:
            return False
        return (
            (c, req) in self.pending
            or (c, req) in self.detached
            or bool(self.handlers_waiting(req))
        )

    def consumers(self, c: Id, r: RecvFn) -> frozenset[Id]:
        """``Consumers(w, c, r)``: the send functions fed by ``r``, and the root if the loss
        may use ``r``: once they have all executed, ``r``'s gradient is complete."""
        found = {s.mid for s in self.sends if s.ctx == c and r.mid in s.inputs}
        if r.loss:
            found.add(ROOT_FN)
        return frozenset(found)

    def app_inputs(self, c: Id) -> frozenset[Id]:
        """``AppInputs(w, c)``: the recv functions of ``c`` whose output the application's loss
        may use (the next edges of a send from the application thread)."""
        return frozenset(r.mid for r in self.recvs if r.ctx == c and r.loss)

    def refused(self, c: Id) -> bool:
        """``Refused(w, c)`` ("tombstone"): a tombstone, or the creator's horizon, says ``c``
        is dead here."""
        return c in self.tomb or covered(self.horizon, c)

    def own_horizon(self, c: Id) -> Horizon:
        """``OwnHorizon(w, c)``: this worker's counter and its own contexts still open once it
        has erased ``c`` (what its release's cleanups carry)."""
        return (self.next_ctx, frozenset(x for x in self.ctxs if x.worker == self.me and x != c))

    def holds_anything_of(self, c: Id) -> bool:
        """``c`` is held here, or state of it is."""
        return c in self.ctxs


_FIELDS: Final = frozenset(f.name for f in fields(Container))
_NFIELDS: Final = len(_FIELDS)
_new = object.__new__
_set_attr = object.__setattr__
