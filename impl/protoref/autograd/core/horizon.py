"""Horizons: what bounds the Reference's tombstones (DistAutograd.tla ``Horizon``, issue 28 §7).

A worker must refuse every id of a context that is dead (its creator released it or died): a
late request for it gets an error, a late answer's autograd part is dropped. Remembering each
such id (a tombstone set) grows by one entry per context; one watermark per creator is unsound
with two threads (``MCDistAutograd_refWatermark``). A *horizon* ``(n, open)`` of creator ``x`` is
``x``'s context counter and its contexts still open when it released one: every id of ``x``
below ``n`` that is not in ``open`` is dead, and stays dead. Each cleanup carries its creator's
horizon; a worker keeps the newest per creator (the larger counter; equal counters, the smaller
open set) and drops the tombstones it covers. What a worker remembers per live creator is then
one horizon naming at most one open context per application thread (``HorizonBoundInv``), and
explicit tombstones are left only for contexts of crashed creators (``TombBoundInv``); every
id it refuses is dead (``RefusedOnlyDeadInv``). TLC checks these in the ``MCDistAutograd_
horizon_*`` models; a horizon without its open set is the ablation that fails
(``MCDistAutograd_refHorizonNoOpen``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, TypeAlias

from protoref.autograd.core.ids import AutogradId

__all__ = ["NO_HORIZON", "Horizon", "compact", "covered", "heard", "newer"]

#: ``<<n, open>>``: every id of the creator below ``n`` but those in ``open`` is dead.
Horizon: TypeAlias = tuple[int, frozenset[AutogradId]]
#: DistAutograd.tla ``NoHorizon``: nothing known dead.
NO_HORIZON: Final[Horizon] = (0, frozenset())


def newer(h: Horizon, m: Horizon) -> Horizon:
    """``NewerHorizon(h, m)``: counters only grow, and a later horizon with the same counter
    has a subset of the earlier one's open contexts."""
    if m[0] > h[0]:
        return m
    if m[0] == h[0]:
        return (h[0], h[1] & m[1])
    return h


def covered(horizons: Mapping[int, Horizon], c: AutogradId) -> bool:
    """``Covered(hw, c)``: ``c`` is dead by its creator's horizon."""
    h = horizons.get(c.worker)
    return h is not None and c.n < h[0] and c not in h[1]


def compact(tomb: Iterable[AutogradId], horizons: Mapping[int, Horizon]) -> frozenset[AutogradId]:
    """``Compact(S, hw)``: the tombstones the horizons do not cover."""
    return frozenset(c for c in tomb if not covered(horizons, c))


def heard(horizons: Mapping[int, Horizon], creator: int, hz: Horizon | None) -> dict[int, Horizon]:
    """``Heard(w, msg)``: the horizons after a cleanup carrying ``hz`` from ``creator``."""
    out = dict(horizons)
    if hz is not None:
        out[creator] = newer(out.get(creator, NO_HORIZON), hz)
    return out
