"""The rendezvous trace events (:mod:`.events`): one model per DynamicRendezvous.tla action,
and how a node's state is written as the spec's values."""
