"""Stamps of other clocks read on one's own: how a node tells time across hosts.

torch 2.13 stamps heartbeats and the last-call deadline with the writing host's UTC clock and
compares them with the reading host's; our handler used to store ``time.monotonic()``, which
means nothing on another host. Here no clock is trusted beyond its own domain
(:mod:`protoref.rendezvous.runtime.clock`):

- **Same domain** (every process of one host): a stamp is a reading of the reader's own clock
  and is used as it is. DynamicRendezvous.tla's one global clock describes exactly this case,
  so traced runs (one host) replay unchanged.
- **Another domain**: the reader never compares the stamp's value with its clock. What it knows
  of a heartbeat's true age is bracketed by two of its own readings (the *bracketed ageing* of
  spec/rendezvous/MCDynamicRendezvousClocksDomains.tla, the Reference): the age is at least the
  time since the reader first saw that stamp (*lo*: it was written before that read), and at
  most the time since the reader's read before that one (*hi*: that read did not show it).
  A node expires when *lo* exceeds the expiry, so a live node (whose stamp changes every
  keep-alive) is never dropped; the join op counts a foreign participant only while *hi* is
  within the expiry (:meth:`LocalTimes.unconfirmed`), so a node that died before this reader
  first looked is never counted alive: first sight alone proves nothing (issue 28, section 6:
  readers that joined after such a node died counted it for a full expiry, world 3 instead
  of 2). The last call ends ``left`` seconds (as written with the deadline) after the
  reader first saw that deadline. Both err on one side only: the reader sees a heartbeat no
  older, and a deadline no nearer, than it really is (the write happened before the read), so a
  live node is never dropped early and a last call never cut short, whatever the clocks read;
  the price is detection later by at most the reader's interval between reads.

:class:`LocalTimes` keeps one reader's memory of what it saw and when (bounded by the nodes of
the state it last read) and translates a :class:`~protoref.rendezvous.core.codec.StoredState` to the
local-time :class:`~protoref.rendezvous.core.state.RendezvousState` the sans-IO core decides on, and
back when the node writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from protoref.rendezvous.core.codec import StoredState
from protoref.rendezvous.core.state import NodeDesc, RendezvousState

__all__ = ["SHARED_CLOCK", "LocalTimes", "Stamp"]

#: The domain of holders built without a clock (the simulator's virtual time, unit tests).
SHARED_CLOCK = "shared"


@dataclass(frozen=True, slots=True)
class Stamp:
    """A reading ``at`` of a clock of domain ``clock``."""

    clock: str
    at: float


class LocalTimes:
    """One reader's translation between stored stamps and its own clock (domain ``domain``)."""

    def __init__(self, domain: str) -> None:
        self.domain = domain
        #: node -> (its foreign heartbeat stamp, our time when we first saw it (lo), our time
        #: of the read before that one (hi; None: no read before it))
        self._beats: dict[NodeDesc, tuple[Stamp, float, float | None]] = {}
        #: our time of our last read of the store (or write won: a read of what we wrote)
        self._last_read: float | None = None
        #: the foreign last-call stamp and our deadline for it
        self._deadline: tuple[Stamp, float] | None = None

    def to_local(self, stored: StoredState, now: float) -> RendezvousState:
        """The state with every time on our clock; foreign stamps first seen now date from now."""
        s = stored.state
        beats: dict[NodeDesc, float] = {}
        seen: dict[NodeDesc, tuple[Stamp, float, float | None]] = {}
        for node, at in s.last_heartbeats.items():
            clock = stored.beat_clocks[node]
            if clock == self.domain:
                beats[node] = at
                continue
            stamp = Stamp(clock, at)
            before = self._beats.get(node)
            if before is not None and before[0] == stamp:
                seen[node] = before
            else:  # written after our previous read, before this one (the spec's Remember)
                seen[node] = (stamp, now, self._last_read)
            beats[node] = seen[node][1]
        self._beats = seen  # only nodes of this state: bounded by the state's validation
        self.read(now)
        deadline = s.deadline
        if deadline is None or stored.deadline_clock == self.domain:
            self._deadline = None
        else:
            assert stored.deadline_clock is not None
            assert stored.deadline_left is not None
            stamp = Stamp(stored.deadline_clock, deadline)
            if self._deadline is None or self._deadline[0] != stamp:
                self._deadline = (stamp, now + stored.deadline_left)
            deadline = self._deadline[1]
        return s.replace(last_heartbeats=beats, deadline=deadline)

    def read(self, now: float) -> None:
        """We know what the store holds at ``now`` (a read, or a write that won)."""
        self._last_read = now

    def unconfirmed(self, now: float, expiry: float) -> frozenset[NodeDesc]:
        """Nodes of other domains whose heartbeat we cannot bound within ``expiry`` at ``now``:
        the join op does not count them alive (DomainAllCounted), so it completes no round
        with them until their stamp changes under our eyes or they expire."""
        return frozenset(
            node for node, (_, _, hi) in self._beats.items() if hi is None or now - hi > expiry
        )

    def to_stored(self, state: RendezvousState, now: float) -> StoredState:
        """What to write for our copy ``state``: stamps we only carry keep their original
        clock and value; times we made (our own keep-alive, a deadline we armed) are ours."""
        stamps: dict[NodeDesc, float] = {}
        clocks: dict[NodeDesc, str] = {}
        for node, t in state.last_heartbeats.items():
            before = self._beats.get(node)
            if before is not None and before[1] == t:
                stamps[node], clocks[node] = before[0].at, before[0].clock
            else:
                stamps[node], clocks[node] = t, self.domain
        deadline, dl_clock, left = state.deadline, None, None
        if deadline is not None:
            left = deadline - now
            if self._deadline is not None and self._deadline[1] == deadline:
                deadline, dl_clock = self._deadline[0].at, self._deadline[0].clock
            else:
                dl_clock = self.domain
        stored = state.replace(last_heartbeats=stamps, deadline=deadline)
        return StoredState(stored, MappingProxyType(clocks), dl_clock, left)
