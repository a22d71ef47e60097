"""The RRef core (RRef.tla, Reference variant), sans-IO: events, per-worker state, one pure
transition per spec action (:mod:`.machine`), and the invariants as predicates over a system."""
