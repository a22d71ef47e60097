"""torch integration (the optional ``[torch]`` extra); the only part of protoref that imports torch.

- ``protoref.torch.observe`` (and the modules beside it): torch's own (2.13 to 2.15), unchanged
  ``DynamicRendezvousHandler`` instrumented so that its runs are traces the checker replays
  through ``DynamicRendezvous.tla``, with a scenario driver.
- ``protoref.torch.torchrun``: our rendezvous handler offered to ``torchrun`` through torch's
  ``torchrun.handlers`` entry point (``--rdzv-backend=protoref``).

Importing this package does not import torch; each module imports it where it needs it and
says clearly when torch is absent or not 2.13 to 2.15.

- ``protoref.torch.rpc_repro`` (with ``rpc_worker`` and ``rpc_programs``): torch's RRef and
  distributed autograd driven along a counterexample on the FAULTY_TENSORPIPE agent
  (``tracecheck replay-on-torch``).
"""

__all__: list[str] = []
