"""The state holder: torch's ``_BackendRendezvousStateHolder`` over a :class:`RendezvousStore`.

``sync(now)`` is one of the spec's four sync steps and says which one it was:

- ``SyncWriteWon`` / ``SyncWriteLost``: the local copy is dirty; one compare-and-set with the last
  token. Like torch's ``set_state`` it counts as won when the store ends up holding exactly the
  bytes written (``CasMatches(n) \\/ store = local[n]``). A lost CAS drops the local change and
  loads the winner's state.
- ``SyncCached``: not dirty and the last sync is less than ``cache_duration`` old: no store call
  and no sanitize.
- ``SyncRead``: not dirty, cache expired (or invalidated): read the store.

After every real sync the copy is sanitized (expired heartbeats removed, locally only).

Every value loaded from the store is decoded, bounded and checked against the spec's invariants
(:mod:`.statecheck`) before anything is decided on it, and its time stamps are put on this
node's clock (:mod:`.stamps`: only stamps of the holder's own clock domain are taken as they
are); what the node writes carries its own clock's stamps.
"""

from __future__ import annotations

from enum import StrEnum
from functools import lru_cache

from protoref.rendezvous.adapters.store import RendezvousStore
from protoref.rendezvous.core.actions import sanitize
from protoref.rendezvous.core.codec import StoredState, decode_stored, encode_stored
from protoref.rendezvous.core.stamps import SHARED_CLOCK, LocalTimes
from protoref.rendezvous.core.state import (
    EMPTY_STATE,
    NodeDesc,
    RendezvousSettings,
    RendezvousState,
)
from protoref.rendezvous.core.statecheck import check_state, check_times

__all__ = ["StateHolder", "SyncKind", "state_key"]


def state_key(run_id: str) -> str:
    """The store key of a run's state (torch: ``torch.rendezvous.<run_id>``)."""
    return f"torch.rendezvous.{run_id}"


class SyncKind(StrEnum):
    """The spec's sync actions."""

    READ = "SyncRead"
    CACHED = "SyncCached"
    WRITE_WON = "SyncWriteWon"
    WRITE_LOST = "SyncWriteLost"


@lru_cache(maxsize=256)
def load_stored(raw: bytes, key: str, settings: RendezvousSettings) -> StoredState:
    """Decode and check a stored value (cached: the threads of a process share it)."""
    stored = decode_stored(raw, key, settings.run_id)
    check_state(stored.state, settings, key)
    return stored


class StateHolder:
    """One node's copy of the shared state, its token, dirty flag and read cache.

    ``clock_domain`` is the domain of the clock ``now`` is read from (the default: every
    holder built without one shares a clock, as the simulator's do).
    """

    def __init__(
        self,
        store: RendezvousStore,
        settings: RendezvousSettings,
        clock_domain: str = SHARED_CLOCK,
    ) -> None:
        self.store = store
        self.settings = settings
        self.key = state_key(settings.run_id)
        self.times = LocalTimes(clock_domain)
        self.state: RendezvousState = EMPTY_STATE
        self.token: int | None = None
        self.dirty = False
        self.last_sync: float | None = None

    def set_state(self, state: RendezvousState) -> None:
        """A business function changed the copy: the next sync writes it (``mark_dirty``)."""
        self.state = state
        self.dirty = True

    def fresh(self, now: float) -> bool:
        """The spec's ``fresh[n]``: the read cache still serves."""
        return self.last_sync is not None and now - self.last_sync < self.settings.cache_duration

    def invalidate_cache(self) -> None:
        """The next clean sync reads the store (after a wait for a change)."""
        self.last_sync = None

    def reset(self) -> None:
        """The node crashed: forget the copy (the spec's ``Crash``)."""
        self.state = EMPTY_STATE
        self.dirty = False
        self.last_sync = None

    def unconfirmed(self, now: float) -> frozenset[NodeDesc]:
        """Nodes of other clock domains the join op may not count alive yet
        (:meth:`~protoref.rendezvous.core.stamps.LocalTimes.unconfirmed`)."""
        return self.times.unconfirmed(now, self.settings.heartbeat_expiry)

    def _decode(self, raw: bytes, now: float) -> RendezvousState:
        """A stored value on this node's clock; checked before anything is decided on it."""
        local = self.times.to_local(load_stored(raw, self.key, self.settings), now)
        check_times(local, self.settings, now, self.key)
        return local

    def sync(self, now: float) -> SyncKind:
        """One sync step (``_BackendRendezvousStateHolder.sync``)."""
        if self.dirty:
            raw = encode_stored(self.times.to_stored(self.state, now), self.settings.run_id)
            won, current = self.store.compare_set(self.key, self.token, raw)
            won = won or current.value == raw  # set_state: success iff the bytes are ours
            kind = SyncKind.WRITE_WON if won else SyncKind.WRITE_LOST
            if won:
                self.times.read(now)  # the store holds what we wrote
            loaded = self.state if won else self._decode(current.value, now)
            self.token = current.token
        elif self.fresh(now):
            return SyncKind.CACHED
        else:
            got = self.store.get(self.key)
            loaded = EMPTY_STATE if got is None else self._decode(got.value, now)
            self.token = None if got is None else got.token
            kind = SyncKind.READ
        self.state = sanitize(loaded, self.settings, now)
        self.dirty = False
        self.last_sync = now
        return kind
