"""torch's own RRef protocol, driven black-box for the trace checker.

Worker processes run torch's C++ RPC stack on the fault-injecting ``FAULTY_TENSORPIPE`` agent
(``torch.distributed.rpc._testing``) over loopback. Worker 0 conducts a scenario library
(:mod:`protoref.torch.rpc.rref_scenarios`):
every step it asks of a worker is a plain user RPC carrying its Lamport clock, and each worker
logs what its program did and saw (:mod:`protoref.torch.rpc.recorder`). torch's internal
messages are never logged: the checker searches them (``spec/rref/TraceRRefTorch.tla``).
Each session picks the delays and failures of message types from its printed seed
(:mod:`protoref.torch.rpc.faults`); :mod:`protoref.torch.rpc.session` starts the processes and
merges their traces.
"""

__all__: list[str] = []
