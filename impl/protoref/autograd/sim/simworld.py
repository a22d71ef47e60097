"""The state of a simulated autograd system and how one core step is applied to it.

:class:`SimWorld` holds what DistAutograd.tla's state is in a simulation: every worker's
:class:`~protoref.autograd.core.state.Container`, the messages in flight (the spec's ``net``, a set:
here a dict from message to the Lamport stamp of the step that sent it, in insertion order so a
seed fixes every choice), the history ``released``, one clock per worker and the trace sink.
:meth:`SimWorld.apply` commits a core :class:`~protoref.autograd.core.transition.Step`: the consumed
message leaves the network, the sent ones join it, the worker's clock advances, one trace event
is emitted, and in test mode every spec invariant is checked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from pydantic import JsonValue

from protoref.autograd.core import invariants
from protoref.autograd.core.events import Msg
from protoref.autograd.core.ids import AutogradId
from protoref.autograd.core.state import Container
from protoref.autograd.core.transition import Step
from protoref.autograd.trace.args import ActionArgs
from protoref.autograd.trace.events import make_event
from protoref.tracing import SCHEMA_VERSION, NodeClock, NullSink, TraceHeader, TraceSink, tla_set

__all__ = ["ERASING", "SimConfig", "SimWorld", "settings_of"]

#: Actions whose step may erase a context (``EraseCtx``): their erasures go into ``released``.
ERASING: Final = frozenset(
    {"ReleaseContext", "ProcessCleanupAutogradContextReq", "ReleaseOrphanedContext"}
)


@dataclass(frozen=True)
class SimConfig:
    """Knobs of a run. ``workers`` and the faults are spec constants (header ``settings``);
    the rest shape the simulated application (what the spec leaves free)."""

    workers: int = 3
    #: Workers whose application thread opens contexts.
    creators: tuple[int, ...] = (0, 1)
    #: Contexts each creator's thread opens, and wrapped calls per context.
    contexts: int = 2
    calls: int = 2
    #: A request's UDF may call on (at most ``max_nested`` times, awaited or fired and
    #: forgotten).
    nested: bool = True
    max_nested: int = 2
    #: Backward passes a context may run (``retain_graph`` keeps the graph for the next).
    passes: int = 2
    #: The creator may run backward in its context (Echo).
    backward: bool = True
    #: RetryCleanup: a retried cleanup's two copies both arrive (spec ``DupCleanup``).
    dup_cleanup: bool = True
    #: One of ``crash_workers`` may crash (spec ``CrashWorkers``, a header setting in every
    #: run, so runs with and without crashes validate in one batch); no backward pass starts
    #: after a crash. Only creators that pass no other worker's context on are safe to crash:
    #: a worker that relayed a context (a nested call) strands the copy it passed on when it
    #: dies (CleanupReachesInv fails; the spec's crash model crashes only the creator).
    crash: bool = False
    crash_workers: tuple[int, ...] = (0,)
    #: Chance that a step is an application (or UDF) step when both kinds are enabled.
    app_weight: float = 0.4
    #: Check every spec invariant after every step (tests).
    check_invariants: bool = False


def settings_of(config: SimConfig) -> dict[str, Any]:
    """The header ``settings``: DistAutograd.tla's constants for this run, as the mapping reads
    them (``MaxCtx`` and ``MaxMsg`` are derived from the traces: bounds only)."""
    workers: list[JsonValue] = list(range(config.workers))
    pairs: list[JsonValue] = [[x, y] for x in workers for y in workers if x != y]
    return {
        "Workers": tla_set(workers),
        "Calls": tla_set(pairs),
        "NestCalls": tla_set(pairs),
        "FireAndForget": True,
        "Variant": "Reference",
        "RefAblations": tla_set([]),
        "Watermark": False,
        "Horizon": True,
        "LateForward": True,
        "DupCleanup": config.dup_cleanup,
        "LoseCleanup": False,
        "CrashWorkers": tla_set([w for w in workers if w in config.crash_workers]),
        "Detect": True,
        "RpcTimeout": True,
        "Cascade": True,
        "KnownOnlyOnGrad": False,
        "NestingUnchecked": False,
        "BackwardMode": "Echo",
        "UnusedSends": True,
        "ErrorWorkers": tla_set(workers),
        "LateCalls": True,
        "UncheckedIds": tla_set([]),
    }


class SimWorld:
    """Containers, network, history, clocks and trace of one simulated run."""

    def __init__(
        self,
        seed: int,
        config: SimConfig,
        sink: TraceSink | None = None,
        protocol: str = "autograd",
    ) -> None:
        self.seed = seed
        self.config = config
        self.containers: dict[int, Container] = {w: Container(me=w) for w in range(config.workers)}
        self.net: dict[Msg, int] = {}
        self.released: set[tuple[int, AutogradId]] = set()
        self.clocks = {w: NodeClock() for w in self.containers}
        self.sink: TraceSink = sink if sink is not None else NullSink()
        self.counts: Counter[str] = Counter()
        if self.sink.enabled:
            self.sink.header(
                TraceHeader(
                    schema_version=SCHEMA_VERSION,
                    protocol=protocol,
                    nodes=tuple(str(w) for w in self.containers),
                    settings=settings_of(config),
                    seed=seed,
                )
            )

    def world(self) -> invariants.World:
        return invariants.World(self.containers, list(self.net), frozenset(self.released))

    def apply(self, w: int, step: Step, consumed: Msg | None = None) -> None:
        """Commit worker ``w``'s step: ``consumed`` (the message it handled) leaves the net."""
        before = self.containers[w]
        clock = self.clocks[w]
        if consumed is not None:
            stamp = self.net.pop(consumed)
            seq, lamport = clock.receive(stamp)
        else:
            seq, lamport = clock.local()
        self.containers[w] = step.state
        for m in step.sent:
            self.net.setdefault(m, lamport)
        if step.action.action in ERASING:
            self.released.update((w, c) for c in before.ctxs - step.state.ctxs)
        self._log(step.action, w, seq, lamport, step.state, before=before)

    def apply_network(
        self, node: int, action: ActionArgs, consumed: Msg, sent: Iterable[Msg]
    ) -> None:
        """A step on message ``consumed`` alone (``RetryCleanup``, ``Discard``), logged by the
        sender's agent ``node``."""
        stamp = self.net.pop(consumed)
        seq, lamport = self.clocks[node].receive(stamp)
        for m in sent:
            self.net.setdefault(m, lamport)
        ctn = self.containers[node]
        self._log(action, node, seq, lamport, ctn, before=ctn)

    def replace_net(self, net: dict[Msg, int]) -> None:
        """The whole network after a crash
        (:func:`protoref.autograd.core.network.crash_network`)."""
        self.net = net

    def _log(
        self,
        action: ActionArgs,
        w: int,
        seq: int,
        lamport: int,
        ctn: Container,
        *,
        before: Container,
    ) -> None:
        self.counts[action.action] += 1
        if self.sink.enabled:
            self.sink.emit(make_event(action, str(w), seq, lamport, ctn, before))
        if self.config.check_invariants:
            invariants.check(self.world(), seed=self.seed)
