"""How a protocol plugs into an RPC worker: a :class:`Plugin`, composed into the agent.

The RPC layer (:mod:`protoref.rpc`) knows no protocol. A worker runs the plug-ins installed
under the ``protoref.rpc.plugins`` entry-point group (:mod:`.plugins`; this project installs
the RRef runtime's and distributed autograd's). Each says:

- what a frame kind does on arrival (:attr:`Plugin.handlers`: frame model -> handler, run on
  the loop thread);
- what happens around links and peers (the handshake's Welcome state, a redialed link, a dead
  peer), and which Lamport clock the barriers order against;
- what a call carries (a plug-in's own business: the RRef plug-in runs the calls and asks the
  others' :class:`CallHook` for their part of each, e.g. the autograd context's, which travels
  in the call frame's :data:`Ext` slot under the hook's plug-in name, opaque to the carrier);
- what graceful shutdown waits for (:meth:`Plugin.idle`, :meth:`Plugin.sweep` before the second
  barrier, :meth:`Plugin.destroy` after it, :meth:`Plugin.leftovers` when it cannot complete).

:class:`BasePlugin` has the "nothing to do" answer of each, so a plug-in states only its part.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Protocol

from pydantic import Field, JsonValue

if TYPE_CHECKING:  # types only
    import asyncio

    from protoref.rpc.codec import Codec
    from protoref.rpc.frames import Frame, PeerInfo, Welcome
    from protoref.rpc.link import Link
    from protoref.rpc.options import RpcOptions
    from protoref.rpc.peers import PeerTable
    from protoref.rpc.pool import UdfPool
    from protoref.rpc.transport import Transport

__all__ = [
    "EXT_MAX_KEYS",
    "BasePlugin",
    "CallHook",
    "Ext",
    "Handler",
    "Host",
    "Plugin",
    "PluginClass",
    "Swept",
    "Until",
]

#: The most plug-ins' parts one call frame's :data:`Ext` may carry.
EXT_MAX_KEYS = 16
#: What a call frame carries for the plug-ins riding on the call (a :class:`CallHook`'s part):
#: plug-in name -> that plug-in's JSON value, opaque to the plug-in carrying the call and
#: validated by its owner (:meth:`CallHook.load`) before anything of the frame is applied.
Ext = Annotated[dict[str, JsonValue], Field(max_length=EXT_MAX_KEYS)]

#: What a frame kind does on arrival: ``handler(link, frame)`` on the loop thread.
Handler = Callable[["Link", Any], None]
#: ``await until(what, predicate)``: None once ``predicate()`` holds (or a peer died: the
#: agent's ``dead`` says), else the problem (a timeout) as text.
Until = Callable[[str, Callable[[], bool]], Awaitable[str | None]]


@dataclass(frozen=True)
class Swept:
    """A shutdown phase's outcome: problems (text) and what was left behind, by kind."""

    problems: tuple[str, ...] = ()
    leaks: Mapping[str, Sequence[str]] = field(default_factory=dict)


class Plugin(Protocol):
    """A protocol's part of one worker (see the module's note)."""

    name: ClassVar[str]
    #: Plug-ins are set up, notified and closed in this order (lowest first).
    order: ClassVar[int]
    handlers: Mapping[type[Frame], Handler]
    #: Payload codecs the plug-in's values need (the agent adds them to every worker's).
    codecs: Sequence[Codec]
    #: The plug-in's part of another plug-in's calls, if it rides on them (else None).
    call_hook: CallHook | None

    def attached(self, plugins: Sequence[Plugin]) -> None: ...

    def started(self, peers: Sequence[PeerInfo]) -> None: ...

    def welcome(self, peer: str) -> tuple[int, tuple[int, ...]] | None: ...

    def link_ready(self, peer: str, welcome: Welcome, generation: int) -> None: ...

    def peer_dead(self, peer: str, error: BaseException) -> None: ...

    def lamport(self) -> int: ...

    def observe(self, stamp: int) -> None: ...

    def poll(self) -> None: ...

    def idle(self, dead: Collection[str]) -> bool: ...

    def barrier_logged(self, phase: int, seq: int, lamport: int) -> None: ...

    def barrier_passed(self, phase: int) -> None: ...

    async def sweep(self, until: Until) -> Swept | None: ...

    async def destroy(self, until: Until) -> Swept: ...

    def leftovers(self) -> Mapping[str, Sequence[str]]: ...

    def closing(self) -> None: ...

    def close(self) -> None: ...


class Host(Protocol):
    """What the agent's parts (liveness, barriers) and the plug-ins see of their agent
    (:class:`~protoref.rpc.agent.Agent`), so that they need not import it."""

    name: str
    rank: int
    closing: bool
    stopping: bool
    options: RpcOptions
    loop: asyncio.AbstractEventLoop
    transport: Transport
    peers: PeerTable
    pool: UdfPool
    plugins: list[Plugin]

    @property
    def dead(self) -> dict[str, str]: ...

    def send_frame(
        self, peer: str, cls: type[Frame], written: Any = None, **fields: Any
    ) -> int: ...


class PluginClass(Protocol):
    """What the entry point names: ``cls(agent)`` makes the plug-in's part of that worker;
    ``exports`` are the names it adds to :mod:`protoref.rpc` (e.g. ``remote``, ``RRef``)."""

    name: ClassVar[str]
    order: ClassVar[int]
    exports: ClassVar[Mapping[str, object]]

    def __call__(self, agent: Host) -> Plugin: ...


class BasePlugin:
    """Every hook's "nothing to do here"; a plug-in overrides what it takes part in."""

    name: ClassVar[str] = ""
    order: ClassVar[int] = 100
    exports: ClassVar[Mapping[str, object]] = {}

    def __init__(self) -> None:
        self.handlers: dict[type[Frame], Handler] = {}
        self.codecs: list[Codec] = []
        self.call_hook: CallHook | None = None

    def attached(self, plugins: Sequence[Plugin]) -> None:
        """Every plug-in of the worker is made (``plugins``, in order, this one among them)."""

    def started(self, peers: Sequence[PeerInfo]) -> None:
        """The peer table is complete (loop thread): open traces, learn ranks."""

    def welcome(self, peer: str) -> tuple[int, tuple[int, ...]] | None:
        """The Welcome's (Lamport clock, ids of ``peer``'s retried messages applied), if this
        plug-in keeps them."""
        return None

    def link_ready(self, peer: str, welcome: Welcome, generation: int) -> None:
        """A link to ``peer`` was (re)dialed: its acceptor's Welcome."""

    def peer_dead(self, peer: str, error: BaseException) -> None:
        """``peer`` was declared dead (loop thread): fail what waits on it."""

    def lamport(self) -> int:
        """This plug-in's Lamport clock (the barriers order after every plug-in's)."""
        return 0

    def observe(self, stamp: int) -> None:
        """A barrier's stamp: everything before it on every worker happened before."""

    def poll(self) -> None:
        """A safe point of the shutdown's waits (e.g. apply dropped handles)."""

    def idle(self, dead: Collection[str]) -> bool:
        """No call of this plug-in in flight except to the ``dead`` (shutdown's first wait)."""
        return True

    def barrier_logged(self, phase: int, seq: int, lamport: int) -> None:
        """(master) Barrier ``phase`` passes with every worker, at the barrier's own clock."""

    def barrier_passed(self, phase: int) -> None:
        """Barrier ``phase`` passed with every worker alive."""

    async def sweep(self, until: Until) -> Swept | None:
        """Between barriers 1 and 2: what this plug-in does and waits for before the others
        may close (None: a death stopped it, the agent reports the shutdown unfinished)."""
        return Swept()

    async def destroy(self, until: Until) -> Swept:
        """After barrier 2: this plug-in's last steps and what it left behind."""
        return Swept()

    def leftovers(self) -> Mapping[str, Sequence[str]]:
        """What this plug-in still holds when shutdown cannot complete (no step taken)."""
        return {}

    def closing(self) -> None:
        """The links are about to close: later work of dropped objects is not applied."""

    def close(self) -> None:
        """The links closed: close traces."""


class CallHook(Protocol):
    """What a call carries beyond its payload, for a plug-in that rides on another's calls
    (distributed autograd's context on the RRef plug-in's calls). ``Wrapped`` and keys are the
    hook's own values; a refused request raises the hook's exception (``refused``), whose
    ``meta`` is the refusal's answer (as a wrapped request's ``meta`` is its part). On the wire a
    ``meta`` travels in the call frame's :data:`Ext` under the hook's plug-in name: :meth:`dump`
    gives the value to carry (anything pydantic serializes to JSON), :meth:`load` checks and
    rebuilds it on arrival."""

    @property
    def refused(self) -> type[Exception]: ...

    def dump(self, meta: Any) -> object:
        """What of ``meta`` a frame carries (pydantic serializes it to JSON)."""
        ...

    def load(self, peer: str, value: JsonValue) -> Any:
        """``meta`` back from a frame of ``peer``; a bad value raises a FrameError (the frame
        is rejected whole, as one failing the frame union would be)."""
        ...

    def answer_copied(self, meta: Any) -> bool:
        """Whether the answer ``meta`` goes with is a copy even on a call to oneself (its
        values change hands, as a serialized answer's would)."""
        ...

    def rref_backward(self, rref: Any, context_id: int, retain_graph: bool) -> None:
        """torch's ``RRef.backward`` on ``rref`` (the hook's protocol runs the pass)."""
        ...

    def wrap(self, to: str, args: object) -> Any: ...

    def answered(self, wrapped: Any, meta: Any, value: object) -> None: ...

    def request(self, meta: Any, args: object) -> Any: ...

    def guarded(self, key: Any, fn: Callable[[], Any]) -> Callable[[], Any]: ...

    def finish(self, key: Any, value: object, raised: bool) -> Any: ...
