"""The deterministic seeded simulator of the rendezvous (:mod:`.simulator`, ``python -m
protoref.rendezvous.sim.simulator``) and its planted faults (:mod:`.faults`)."""
