"""The rendezvous over real IO: clocks (:mod:`.clock`), the state holder (:mod:`.holder`), the
executor's steps (:mod:`.executor`), the heartbeat timer (:mod:`.heartbeat`), torch's handler
interface (:mod:`.handler`), its traces (:mod:`.handler_trace`) and one node as an OS process
(:mod:`.node_main`, ``python -m protoref.rendezvous.runtime.node_main``)."""
