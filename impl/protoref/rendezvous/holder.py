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
"""

from __future__ import annotations

from enum import StrEnum

from protoref.rendezvous.actions import sanitize
from protoref.rendezvous.codec import decode_state, encode_state
from protoref.rendezvous.state import EMPTY_STATE, RendezvousSettings, RendezvousState
from protoref.rendezvous.store import RendezvousStore

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


class StateHolder:
    """One node's copy of the shared state, its token, dirty flag and read cache."""

    def __init__(self, store: RendezvousStore, settings: RendezvousSettings) -> None:
        self.store = store
        self.settings = settings
        self.key = state_key(settings.run_id)
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

    def _decode(self, raw: bytes) -> RendezvousState:
        return decode_state(raw, self.key, self.settings.run_id)

    def sync(self, now: float) -> SyncKind:
        """One sync step (``_BackendRendezvousStateHolder.sync``)."""
        if self.dirty:
            raw = encode_state(self.state, self.settings.run_id)
            won, current = self.store.compare_set(self.key, self.token, raw)
            won = won or current.value == raw  # set_state: success iff the bytes are ours
            kind = SyncKind.WRITE_WON if won else SyncKind.WRITE_LOST
            loaded = self.state if won else self._decode(current.value)
            self.token = current.token
        elif self.fresh(now):
            return SyncKind.CACHED
        else:
            got = self.store.get(self.key)
            loaded = EMPTY_STATE if got is None else self._decode(got.value)
            self.token = None if got is None else got.token
            kind = SyncKind.READ
        self.state = sanitize(loaded, self.settings, now)
        self.dirty = False
        self.last_sync = now
        return kind
