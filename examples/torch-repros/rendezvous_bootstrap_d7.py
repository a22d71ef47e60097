"""torch rendezvous: with TCPStore sharing on, a late rank waits for a MASTER_ADDR nobody writes.

Standalone (torch only): ``python rendezvous_bootstrap_d7.py``. Two unchanged
``DynamicRendezvousHandler`` objects (threads of one process, each with its own TCPStore
clients, as on two hosts), min 1, max 2, TCPStore sharing on (torch's default). A completes
round 0 alone as rank 0: ``next_rendezvous`` writes MASTER_ADDR under round 0's store prefix,
builds the shared server and caches both. B arrives and waits in the wait list; A sees
``num_nodes_waiting() > 0`` and re-rendezvouses (what its elastic agent does); round 1
completes with both, A rank 0 again. A returns its cached info and writes nothing under round
1's prefix; B, whose first round is 1, blocks in ``get(MASTER_ADDR)`` until its store client's
timeout (5 s here) and raises DistStoreError, while it is a participant of round 1. Exit status
0 when that shows.
"""

import os
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.elastic.rendezvous import dynamic_rendezvous as dr
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend

os.environ.pop("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", None)  # sharing on: torch's default

server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)


def client(seconds):
    return dist.TCPStore(
        "127.0.0.1", server.port, is_master=False, timeout=timedelta(seconds=seconds)
    )


def handler(addr, bootstrap_wait):
    backend = C10dRendezvousBackend(client(30), "d7")
    timeout = dr.RendezvousTimeout(
        join=timedelta(seconds=60),
        last_call=timedelta(seconds=3),
        close=timedelta(seconds=10),
        heartbeat=timedelta(seconds=5),
    )
    return dr.DynamicRendezvousHandler.from_backend(
        "d7", client(bootstrap_wait), backend, 1, 2, local_addr=addr, timeout=timeout
    )


a, b = handler("127.0.0.1", 30), handler("127.0.0.2", 5)
seen = {}


def node_b():
    try:
        info = b.next_rendezvous()
        seen["b"] = f"rank {info.rank} of {info.world_size}"
    except dist.DistStoreError as err:
        state = b._state_holder.state
        member = b._this_node in state.participants
        seen["b"] = f"DistStoreError: {str(err).splitlines()[0]}"
        seen["b_member"] = f"participant of round {state.round}: {member}"


first = a.next_rendezvous()
print("torch", torch.__version__, flush=True)
print(f"A round 0: rank {first.rank} of {first.world_size}", flush=True)
t = threading.Thread(target=node_b, daemon=True)
t.start()
for _ in range(30):
    if a.num_nodes_waiting() > 0:
        break
    time.sleep(0.5)
second = a.next_rendezvous()
print(f"A round 1: rank {second.rank} of {second.world_size} (cached bootstrap info)", flush=True)
t.join(30)
print("B round 1:", seen.get("b", "still waiting"), seen.get("b_member", ""), flush=True)
shown = first.rank == 0 and second.rank == 0 and "MASTER_ADDR" in seen.get("b", "")
print("DEFECT: B waited for a MASTER_ADDR rank 0 never wrote" if shown else "no defect", flush=True)
os._exit(0 if shown else 1)
