"""The executor as steps: one node's ``_DistributedRendezvousOpExecutor.run`` loop, sans wait.

:class:`NodeRunner` holds the spec's per-node control state (``pc``, ``op``, ``opDl`` as an
absolute deadline, ``result``, ``view``) around a :class:`StateHolder`, and offers the steps the
spec interleaves: start an op (``NextRendezvous``, ``KeepAliveTimer``, ``SetClosed``), one sync
step, one decide-and-apply step. Drivers (the handler, the simulator) choose when each step runs
and what a ``Delay`` waits for; every step reports the spec action it was, through ``observer``.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from protoref.rendezvous.core import actions as fn
from protoref.rendezvous.core.ops import MUTATING, Action, Op, decide
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings, RendezvousState, View
from protoref.rendezvous.runtime.holder import StateHolder, SyncKind

__all__ = ["NodeRunner", "Pc", "Result", "View", "apply_action"]


class Pc(StrEnum):
    """The spec's ``pc[n]``."""

    IDLE = "idle"
    SYNC = "sync"
    DECIDE = "decide"
    SLEEP = "sleep"
    STOPPED = "stopped"
    CRASHED = "crashed"


class Result(StrEnum):
    """The spec's ``result[n]``: the outcome of the last ``next_rendezvous``."""

    NONE = "none"
    OK = "ok"
    TIMEOUT = "timeout"
    CLOSED = "closed"
    GRACEFUL_EXIT = "gracefulExit"


def apply_action(
    action: Action,
    s: RendezvousState,
    node: NodeDesc,
    settings: RendezvousSettings,
    now: float,
) -> RendezvousState:
    """The business function of a mutating action (``run``'s dispatch on ``_Action``)."""
    if action is Action.KEEP_ALIVE:
        return fn.keep_alive(s, node, now)
    if action is Action.ADD_TO_PARTICIPANTS:
        return fn.add_to_participants(s, node, settings, now)
    if action is Action.ADD_TO_WAIT_LIST:
        return fn.add_to_wait_list(s, node, now)
    if action is Action.ADD_TO_REDUNDANCY_LIST:
        return fn.add_to_redundancy_list(s, node, now)
    if action is Action.REMOVE_FROM_PARTICIPANTS:
        return fn.remove_from_participants(s, node, settings)
    if action is Action.REMOVE_FROM_WAIT_LIST:
        return fn.remove_from_wait_list(s, node)
    if action is Action.REMOVE_FROM_REDUNDANCY_LIST:
        return fn.remove_from_redundancy_list(s, node)
    if action is Action.MARK_RENDEZVOUS_COMPLETE:
        return fn.mark_rendezvous_complete(s)
    if action is Action.MARK_RENDEZVOUS_CLOSED:
        return fn.mark_rendezvous_closed(s)
    raise ValueError(f"{action} does not change the state")


#: Called after every step with (event name = spec action, runner, now).
Observer = Callable[[str, "NodeRunner", float], None]

_OP_START = {Op.EXIT: "NextRendezvous", Op.KEEP_ALIVE: "KeepAliveTimer", Op.CLOSE: "SetClosed"}


class NodeRunner:
    """One node's executor and control state."""

    def __init__(
        self,
        node: NodeDesc,
        holder: StateHolder,
        observer: Observer | None = None,
    ) -> None:
        self.node = node
        self.holder = holder
        self.settings = holder.settings
        self.observer = observer
        self.pc = Pc.IDLE
        self.op: Op | None = None
        self.deadline = 0.0  # absolute op deadline (the spec's opDl counts ticks left)
        self.result = Result.NONE
        self.view: View | None = None

    def _emit(self, event: str, now: float) -> None:
        if self.observer is not None:
            self.observer(event, self, now)

    # ------------------------------------------------------------------ ops start

    def start(self, op: Op, now: float) -> None:
        """``NextRendezvous`` (op EXIT, then JOIN), ``KeepAliveTimer``, ``SetClosed``."""
        if self.pc is not Pc.IDLE:
            raise RuntimeError(f"{self.node}: cannot start {op} while {self.pc}")
        timeout = {
            Op.EXIT: self.settings.join_timeout,
            Op.KEEP_ALIVE: self.settings.heartbeat_timeout,
            Op.CLOSE: self.settings.close_timeout,
        }[op]
        self.pc, self.op, self.deadline = Pc.SYNC, op, now + timeout
        if op is Op.EXIT:
            self.result = Result.NONE
        self._emit(_OP_START[op], now)

    # ------------------------------------------------------------------ steps

    def sync_step(self, now: float) -> SyncKind:
        """One ``sync()`` of the holder (pc ``sync`` or ``sleep`` -> ``decide``)."""
        if self.pc not in (Pc.SYNC, Pc.SLEEP):
            raise RuntimeError(f"{self.node}: sync while {self.pc}")
        if self.pc is Pc.SLEEP:
            self.holder.invalidate_cache()  # a sleeper syncs only once its cache expired
        kind = self.holder.sync(now)
        self.pc = Pc.DECIDE
        self._emit(kind.value, now)
        return kind

    def decide_step(self, now: float) -> Action:
        """The op picks an action; mutating ones are applied to the local copy."""
        if self.pc is not Pc.DECIDE or self.op is None:
            raise RuntimeError(f"{self.node}: decide while {self.pc}")
        op, s = self.op, self.holder.state
        uncounted = self.holder.unconfirmed(now)
        action = decide(
            op, s, self.node, self.settings, now=now, deadline=self.deadline, uncounted=uncounted
        )
        if action in MUTATING:
            self.holder.set_state(apply_action(action, s, self.node, self.settings, now))
            self.pc = Pc.SYNC
            if action is Action.REMOVE_FROM_REDUNDANCY_LIST:  # run(update_deadline=...)
                self.deadline = now + self.settings.join_timeout
        elif action is Action.SYNC:
            self.pc = Pc.SLEEP
        elif action is Action.FINISH:
            self._finish(op, s)
        elif action in (Action.ERROR_CLOSED, Action.GRACEFUL_EXIT):
            self._stop(Result.CLOSED if action is Action.ERROR_CLOSED else Result.GRACEFUL_EXIT)
        else:  # ERROR_TIMEOUT
            self.pc, self.op = Pc.IDLE, None
            if op in (Op.EXIT, Op.JOIN):
                self.result = Result.TIMEOUT
        self._emit(action.value, now)
        return action

    def _finish(self, op: Op, s: RendezvousState) -> None:
        if op is Op.EXIT:
            self.op, self.pc = Op.JOIN, Pc.SYNC
            return
        self.op, self.pc = None, Pc.IDLE
        if op is Op.JOIN:
            self.result = Result.OK
            self.view = View(s.round, dict(s.participants))

    def _stop(self, result: Result) -> None:
        # The holder keeps its copy, token and read cache, as torch's does: is_closed() after
        # a RendezvousClosedError answers from them (the spec's Stop under ReadOnlySyncs).
        self.pc, self.op, self.result = Pc.STOPPED, None, result

    def crash(self, now: float) -> None:
        """``Crash``: the node stops acting; its entries stay in the store."""
        self.pc, self.op = Pc.CRASHED, None
        self.holder.reset()
        self._emit("Crash", now)
