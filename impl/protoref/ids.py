"""Identifiers shared by the protocols: worker names and PyTorch's GloballyUniqueId.

A ``GloballyUniqueId`` is the spec's ``<<worker, n>>`` pair (RRef.tla ``Id``). It is a NamedTuple
so it is immutable, hashable, ordered, and encodes as the JSON list ``["w0", 3]`` that the trace
contract prescribes for TLA+ tuples, with no custom serializer.
"""

from __future__ import annotations

from typing import NamedTuple, TypeAlias

__all__ = ["GloballyUniqueId", "WorkerId"]

#: A worker's name (the spec's model values w1, w2, ...; ours are "w0", "w1", ...).
WorkerId: TypeAlias = str


class GloballyUniqueId(NamedTuple):
    """(createdOn, localId): RRefIds and ForkIds both have this type (note §1.1)."""

    worker: WorkerId
    local_id: int

    def __str__(self) -> str:
        return f"{self.worker}:{self.local_id}"
