"""The deterministic seeded simulator of distributed autograd, its world and its planted faults."""
