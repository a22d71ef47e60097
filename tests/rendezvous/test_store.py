"""Store CAS semantics, the JSON codec's errors, the holder's lost CAS, the file store across
processes."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from protoref.rendezvous.adapters import wakeup
from protoref.rendezvous.adapters.etcd_store import EtcdStore
from protoref.rendezvous.adapters.store import FileStore, InMemoryStore, RendezvousStore
from protoref.rendezvous.core.codec import decode_state, encode_state
from protoref.rendezvous.core.errors import RendezvousConnectionError, RendezvousStateError
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings, RendezvousState
from protoref.rendezvous.runtime.holder import StateHolder, SyncKind

CFG = RendezvousSettings(run_id="r", min_nodes=2, max_nodes=2, cache_duration=0)
N1 = NodeDesc("h", 1, 0)
N2 = NodeDesc("h", 2, 0)


@pytest.fixture(params=["memory", "file", "etcd", "etcd-cluster3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RendezvousStore]:
    if request.param.startswith("etcd"):  # a local etcd (tests/rendezvous/conftest.py)
        name = "etcd_single" if request.param == "etcd" else "etcd_cluster3"
        server = request.getfixturevalue(name)
        prefix = request.getfixturevalue("etcd_prefix")
        with EtcdStore(server.endpoint, prefix=prefix) as etcd:
            yield etcd
        return
    yield InMemoryStore() if request.param == "memory" else FileStore(tmp_path)


def test_cas_writes_only_on_the_current_token(store: RendezvousStore) -> None:
    assert store.get("k") is None
    ok, v1 = store.compare_set("k", None, b"a")
    assert ok
    assert v1.value == b"a"
    lost, seen = store.compare_set("k", None, b"b")  # expected absent: lost, sees the winner
    assert not lost
    assert seen == v1
    ok, v2 = store.compare_set("k", v1.token, b"c")
    assert ok
    assert v2.token != v1.token
    lost, seen = store.compare_set("k", v1.token, b"d")  # stale token
    assert not lost
    assert seen.value == b"c"


def test_wait_for_change(store: RendezvousStore) -> None:
    assert not store.wait_for_change("k", None, 0.01)
    store.compare_set("k", None, b"a")
    assert store.wait_for_change("k", None, 0.01)


def test_codec_round_trip() -> None:
    s = RendezvousState().replace(
        round=2,
        participants={N1: 0, N2: 1},
        wait_list={N1},
        last_heartbeats={N1: 1.5},
        deadline=3.0,
    )
    raw = encode_state(s, "r")
    assert decode_state(raw, "key", "r") == s
    assert b"pickle" not in raw
    assert raw.startswith(b"{")


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b"\x80\x04garbage", "Invalid JSON"),
        (b'{"schema": "other/9"}', "schema"),
        (b"[1, 2]", "<document>"),
    ],
)
def test_corrupted_value_names_what_is_wrong(raw: bytes, needle: str) -> None:
    with pytest.raises(RendezvousStateError, match=needle):
        decode_state(raw, "key", "r")


def test_foreign_run_is_rejected() -> None:
    raw = encode_state(RendezvousState(), "other")
    with pytest.raises(RendezvousStateError, match="run_id is 'other'"):
        decode_state(raw, "key", "r")


def test_corrupted_store_value_is_never_overwritten() -> None:
    store = InMemoryStore()
    holder = StateHolder(store, CFG)
    store.put_raw(holder.key, b"not json")
    holder.set_state(RendezvousState().replace(participants={N1: 0}))
    with pytest.raises(RendezvousStateError):
        holder.sync(0.0)
    got = store.get(holder.key)
    assert got is not None
    assert got.value == b"not json"


def test_file_store_header_corruption(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.put_raw("k", b"garbage without a token line")
    with pytest.raises(RendezvousStateError, match="no token line"):
        store.get("k")


def test_file_store_needs_a_directory(tmp_path: Path) -> None:
    with pytest.raises(RendezvousConnectionError):
        FileStore(tmp_path / "missing")


def test_lost_cas_loads_the_winner() -> None:
    store = InMemoryStore()
    h1, h2 = StateHolder(store, CFG), StateHolder(store, CFG)
    h1.sync(0.0)
    h2.sync(0.0)
    h1.set_state(RendezvousState().replace(participants={N1: 0}))
    h2.set_state(RendezvousState().replace(participants={N2: 0}))
    assert h1.sync(0.0) is SyncKind.WRITE_WON
    assert h2.sync(0.0) is SyncKind.WRITE_LOST
    assert dict(h2.state.participants) == {N1: 0}
    assert not h2.dirty


def test_identical_bytes_count_as_won() -> None:
    store = InMemoryStore()
    h1, h2 = StateHolder(store, CFG), StateHolder(store, CFG)
    same = RendezvousState().replace(participants={N1: 0})
    h1.set_state(same)
    h2.set_state(same)
    assert h1.sync(0.0) is SyncKind.WRITE_WON
    assert h2.sync(0.0) is SyncKind.WRITE_WON  # set_state compares the bytes stored


#: A worker process (a script, not multiprocessing: nothing is pickled to start it).
_INCREMENT = """
import sys
from protoref.rendezvous.adapters.store import FileStore
store, done = FileStore(sys.argv[1]), 0
while done < int(sys.argv[2]):
    got = store.get("counter")
    value = int(got.value) if got else 0
    ok, _ = store.compare_set("counter", got.token if got else None, b"%d" % (value + 1))
    done += ok
"""


def test_file_store_cas_across_processes(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", _INCREMENT, str(tmp_path), "50"]) for _ in range(2)
    ]
    for p in procs:
        assert p.wait(timeout=60) == 0
    got = FileStore(tmp_path).get("counter")
    assert got is not None
    assert got.value == b"100"


# ---------------------------------------------------------------- file store change notification


def test_file_store_write_pings_a_registered_waiter(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    assert store.notify
    waiters = tmp_path / "k.waiters"
    waiter = wakeup.registered(waiters)
    waiter.drain()
    assert not waiter.wait(0)  # nothing written yet
    store.compare_set("k", None, b"a")
    assert waiter.wait(0)  # the datagram is queued: no waiting, no polling
    assert not waiter.wait(0)  # drained: one ping per wake


def test_waiter_in_another_thread_wakes_on_a_write(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    _, v1 = store.compare_set("k", None, b"a")
    seen: list[bool] = []
    t = threading.Thread(target=lambda: seen.append(store.wait_for_change("k", v1.token, 30.0)))
    t.start()
    while not any((tmp_path / "k.waiters").glob("protoref-rdzv-*")):
        t.join(0.001)  # until the waiter registered
    store.compare_set("k", v1.token, b"b")
    t.join(30.0)
    assert seen == [True]


def test_stale_waiter_entry_is_removed_by_the_next_write(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    waiters = tmp_path / "k.waiters"
    waiters.mkdir()
    stale = waiters / "protoref-rdzv-999999-1-0"  # a waiter whose process is gone
    stale.touch()
    assert wakeup.notify(waiters) == 0
    assert not stale.exists()
    store.compare_set("k", None, b"a")  # still writes fine with no waiter at all


def test_polling_fallback_still_sees_changes(tmp_path: Path) -> None:
    store = FileStore(tmp_path, notify=False)
    assert not store.wait_for_change("k", None, 0.001)
    store.compare_set("k", None, b"a")
    assert store.wait_for_change("k", None, 0.001)
    assert not (tmp_path / "k.waiters").exists()  # no notification machinery used
