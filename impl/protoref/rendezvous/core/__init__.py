"""The rendezvous core, sans-IO: the state and settings (:mod:`.state`), the business functions
(:mod:`.actions`), the ops' decisions (:mod:`.ops`), the stored encoding (:mod:`.codec`), stamps
of other clocks (:mod:`.stamps`), the decoded-state check (:mod:`.statecheck`), the spec's
invariants (:mod:`.invariants`) and the typed errors (:mod:`.errors`). Nothing here reads a
clock, a store or a socket: time enters as ``now``."""
