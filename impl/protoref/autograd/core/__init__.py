"""The distributed autograd core (DistAutograd.tla, Reference variant), sans-IO: ids, messages,
per-worker containers, one pure transition per spec action (:mod:`.machine`), the invariants."""
