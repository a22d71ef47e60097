"""The etcd store against a real local etcd (tests/rendezvous/conftest.py starts it).

The CAS and wait contract shared with the other stores is in test_store.py (parametrized over
all three); here: what only etcd has (revisions as tokens, prefixes, watches, errors on the way
to the server), CAS races from threads, and the handler over etcd.
"""

from __future__ import annotations

import base64
import gc
import http.server
import json
import re
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from protoref.rendezvous.adapters.etcd_cluster import EtcdCluster
from protoref.rendezvous.adapters.etcd_server import EtcdServer
from protoref.rendezvous.adapters.etcd_store import EtcdStore
from protoref.rendezvous.core.errors import RendezvousConnectionError, RendezvousStateError
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings, RendezvousState
from protoref.rendezvous.runtime.handler import DynamicRendezvousHandler
from protoref.rendezvous.runtime.holder import StateHolder
from support.rendezvous import rendezvous_all

LIMIT = 30.0  # seconds a helper thread may take before the test fails (never reached)


@pytest.fixture
def own_etcd(etcd_binary: Path) -> Iterator[EtcdServer]:
    """An etcd of the test's own, for the tests that read etcd's watcher gauge: on the shared
    server it also counts earlier tests' watch streams, which end asynchronously (one ending
    just as a test opened its own kept the gauge at its old value for 30 s in CI)."""
    with EtcdServer(etcd_binary) as server:
        yield server


@pytest.fixture
def own_store(own_etcd: EtcdServer, etcd_prefix: str) -> Iterator[EtcdStore]:
    with EtcdStore(own_etcd.endpoint, prefix=etcd_prefix) as store:
        yield store


def _gateway(server: EtcdServer | EtcdCluster, path: str, key: str) -> Any:
    """etcd's gateway asked directly (``/v3/kv/range``, ``/v3/kv/deleterange``), not through
    the store under test; of a cluster, its first member."""
    body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
    request = urllib.request.Request(
        f"http://{server.host}:{server.client_port}/v3{path}",
        body,
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=LIMIT) as resp:
        return json.loads(resp.read())


def _delete(server: EtcdServer | EtcdCluster, key: str) -> None:
    assert _gateway(server, "/kv/deleterange", key).get("deleted") == "1"


def _watchers(server: EtcdServer) -> int:
    """etcd's own count of open watchers (its Prometheus gauge)."""
    with urllib.request.urlopen(f"{server.endpoint}/metrics", timeout=LIMIT) as resp:
        text = resp.read().decode()
    found = re.search(r"^etcd_debugging_mvcc_watcher_total (\S+)$", text, re.MULTILINE)
    assert found, "etcd's /metrics has no watcher gauge"
    return int(float(found.group(1)))


# --------------------------------------------------------------------------- tokens and keys


def test_token_is_the_mod_revision(etcd_store: EtcdStore, etcd_server: EtcdServer) -> None:
    ok, v1 = etcd_store.compare_set("k", None, b"a")
    assert ok
    [kv] = _gateway(etcd_server, "/kv/range", etcd_store.prefix + "k")["kvs"]
    assert base64.b64decode(kv["value"]) == b"a"
    assert int(kv["mod_revision"]) == v1.token
    assert etcd_store.get("k") == v1


def test_empty_and_binary_values_round_trip(etcd_store: EtcdStore) -> None:
    ok, empty = etcd_store.compare_set("e", None, b"")
    assert ok
    assert etcd_store.get("e") == empty
    raw = bytes(range(256))
    ok, _ = etcd_store.compare_set("e", empty.token, raw)
    assert ok
    got = etcd_store.get("e")
    assert got is not None
    assert got.value == raw


def test_a_recreated_key_never_repeats_a_token(
    etcd_store: EtcdStore, etcd_server: EtcdServer
) -> None:
    """Deleted and re-created: ``version`` would restart at 1, ``mod_revision`` does not (ABA)."""
    _, old = etcd_store.compare_set("k", None, b"a")
    _delete(etcd_server, etcd_store.prefix + "k")
    _, new = etcd_store.compare_set("k", None, b"b")
    assert new.token != old.token
    lost, seen = etcd_store.compare_set("k", old.token, b"stale")
    assert not lost
    assert seen == new


def test_a_key_deleted_under_a_token_is_a_state_error(
    etcd_store: EtcdStore, etcd_server: EtcdServer
) -> None:
    _, v = etcd_store.compare_set("k", None, b"a")
    _delete(etcd_server, etcd_store.prefix + "k")
    with pytest.raises(RendezvousStateError, match="deleted from etcd"):
        etcd_store.compare_set("k", v.token, b"b")
    assert etcd_store.get("k") is None  # nothing was resurrected


def test_prefixes_keep_runs_apart(etcd_server: EtcdServer, etcd_prefix: str) -> None:
    with (
        EtcdStore(etcd_server.endpoint, prefix=etcd_prefix + "a/") as a,
        EtcdStore(etcd_server.endpoint, prefix=etcd_prefix + "b/") as b,
    ):
        a.compare_set("k", None, b"from a")
        assert b.get("k") is None
        ok, _ = b.compare_set("k", None, b"from b")
        assert ok
        got = a.get("k")
        assert got is not None
        assert got.value == b"from a"


# --------------------------------------------------------------------------- races and watches


def test_cas_race_from_threads_loses_no_update(etcd_store: EtcdStore) -> None:
    threads, each = 4, 15
    errors: list[BaseException] = []

    def increment() -> None:
        try:
            done = 0
            while done < each:
                got = etcd_store.get("counter")
                value = int(got.value) if got else 0
                ok, _ = etcd_store.compare_set(
                    "counter", got.token if got else None, b"%d" % (value + 1)
                )
                done += ok
        except BaseException as err:  # reported below
            errors.append(err)

    workers = [threading.Thread(target=increment) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(LIMIT)
        assert not w.is_alive()
    assert not errors, errors
    got = etcd_store.get("counter")
    assert got is not None
    assert got.value == b"%d" % (threads * each)
    assert etcd_store.cas_won == threads * each


def test_watch_wakes_on_a_write_made_while_watching(
    own_store: EtcdStore, own_etcd: EtcdServer
) -> None:
    """The write is made only once etcd counts the waiter's watch: the watch path woke it."""
    _, v = own_store.compare_set("k", None, b"a")
    before = _watchers(own_etcd)
    woke: list[bool] = []
    waiter = threading.Thread(
        target=lambda: woke.append(own_store.wait_for_change("k", v.token, LIMIT))
    )
    waiter.start()
    watching = threading.Event()
    while not watching.wait(0.01):  # until etcd reports the watch (bounded by the join below)
        if _watchers(own_etcd) > before or not waiter.is_alive():
            watching.set()
    own_store.compare_set("k", v.token, b"b")
    waiter.join(LIMIT)
    assert not waiter.is_alive()
    assert woke == [True]
    own_store.close()  # ends the key's watch stream
    _until(lambda: _watchers(own_etcd) == before)


def _until(condition: Callable[[], bool]) -> None:
    """Wait (at most LIMIT) for something etcd does asynchronously."""
    end = time.monotonic() + LIMIT
    while not condition():
        assert time.monotonic() < end, "etcd never got there"
        time.sleep(0.01)


def test_waiting_threads_share_one_watch(own_store: EtcdStore, own_etcd: EtcdServer) -> None:
    """Four threads wait, change after change, until they see the last of three writes: etcd
    serves one watch stream for all of them, not one per wait."""
    _, v = own_store.compare_set("k", None, b"0")
    before = _watchers(own_etcd)
    seen: list[bytes] = []

    def wait_for_the_last_write() -> None:
        token: int | None = v.token
        while True:
            assert own_store.wait_for_change("k", token, LIMIT)
            got = own_store.get("k")
            assert got is not None
            token = got.token
            if got.value == b"3":
                seen.append(got.value)
                return

    waiters = [threading.Thread(target=wait_for_the_last_write) for _ in range(4)]
    for w in waiters:
        w.start()
    _until(lambda: _watchers(own_etcd) == before + 1)
    token = v.token
    for i in range(1, 4):
        _, new = own_store.compare_set("k", token, b"%d" % i)
        token = new.token
    for w in waiters:
        w.join(LIMIT)
        assert not w.is_alive()
    assert seen == [b"3"] * 4
    assert _watchers(own_etcd) == before + 1


def test_a_dropped_store_ends_its_watches(own_etcd: EtcdServer, etcd_prefix: str) -> None:
    before = _watchers(own_etcd)
    store = EtcdStore(own_etcd.endpoint, prefix=etcd_prefix)
    assert not store.wait_for_change("k", None, 0.01)  # opens the key's watch
    _until(lambda: _watchers(own_etcd) == before + 1)
    (watch,) = store._watches.values()
    del store  # never closed
    gc.collect()
    # Our stream stops, and etcd's gauge falls back to where it was.
    _until(lambda: not watch.alive and _watchers(own_etcd) == before)


def test_a_broken_watch_stream_is_replaced(etcd_store: EtcdStore) -> None:
    """The stream breaks under a waiter (as when etcd restarts): the waiter reads again, opens a
    new stream and still wakes on the next write."""
    _, v = etcd_store.compare_set("k", None, b"a")
    woke: list[bool] = []
    waiter = threading.Thread(
        target=lambda: woke.append(etcd_store.wait_for_change("k", v.token, LIMIT))
    )
    waiter.start()
    full = etcd_store.prefix + "k"
    _until(lambda: full in etcd_store._watches)
    first = etcd_store._watches[full]
    first.stop()  # shut its socket down
    assert not first.alive
    _until(lambda: etcd_store._watches[full] is not first)  # the waiter opened another
    etcd_store.compare_set("k", v.token, b"b")
    waiter.join(LIMIT)
    assert not waiter.is_alive()
    assert woke == [True]


def test_wait_times_out_without_a_change(etcd_store: EtcdStore) -> None:
    _, v = etcd_store.compare_set("k", None, b"a")
    assert not etcd_store.wait_for_change("k", v.token, 0.05)
    assert not etcd_store.wait_for_change("absent", None, 0.05)
    assert not etcd_store.wait_for_change("k", v.token, 0.0)


def test_wait_sees_a_change_made_before_it_started(etcd_store: EtcdStore) -> None:
    _, v = etcd_store.compare_set("k", None, b"a")
    etcd_store.compare_set("k", v.token, b"b")
    assert etcd_store.wait_for_change("k", v.token, LIMIT)
    assert etcd_store.wait_for_change("k", None, LIMIT)


# --------------------------------------------------------------------------- errors


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # nothing listens there any more


def test_unreachable_endpoint_names_it(closed_port: int) -> None:
    endpoint = f"http://127.0.0.1:{closed_port}"
    with EtcdStore(endpoint, request_timeout=2.0) as store:
        for call in (
            lambda: store.get("k"),
            lambda: store.compare_set("k", None, b"v"),
            lambda: store.wait_for_change("k", None, 1.0),
        ):
            with pytest.raises(RendezvousConnectionError, match=re.escape(endpoint)):
                call()


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A socket that accepts connections and never answers (a hung etcd)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield f"127.0.0.1:{s.getsockname()[1]}"


def test_a_silent_endpoint_times_out(silent_endpoint: str) -> None:
    # the socket's timeout, raised while the store asks the member's /version
    with EtcdStore(silent_endpoint, request_timeout=0.2) as store:
        with pytest.raises(RendezvousConnectionError, match=r"read .* TimeoutError: timed out"):
            store.get("k")
        with pytest.raises(RendezvousConnectionError, match=r"set .* TimeoutError: timed out"):
            store.compare_set("k", None, b"v")


def test_a_dead_member_is_passed_over(
    etcd_server: EtcdServer, closed_port: int, etcd_prefix: str
) -> None:
    """The first member listed refuses connections: every request goes on to the next one,
    and later requests start from the member that answered."""
    live = etcd_server.endpoint.removeprefix("http://")
    with EtcdStore(f"127.0.0.1:{closed_port},{live}", prefix=etcd_prefix) as store:
        ok, first = store.compare_set("k", None, b"v")
        assert ok
        assert store.get("k") == first
        assert store._current != 0
        assert not store.wait_for_change("k", first.token, 0.05)


def test_when_no_member_answers_the_error_names_them_all(closed_port: int) -> None:
    with (
        EtcdStore(f"127.0.0.1:{closed_port},127.0.0.1:{closed_port}", request_timeout=0.2) as store,
        pytest.raises(RendezvousConnectionError, match=f"127.0.0.1:{closed_port},127.0.0.1"),
    ):
        store.get("k")


def test_something_that_is_not_etcd(etcd_server: EtcdServer) -> None:
    """An HTTP server that is not an etcd gateway: a typed error, not a KeyError."""
    store = EtcdStore(etcd_server.endpoint)
    # as if discovery had found another server
    store._api_paths = ["/no-such-api"] * len(store._api_paths)
    with pytest.raises(RendezvousConnectionError, match="failed"):
        store.get("k")
    store.close()


class _FakeGateway(http.server.BaseHTTPRequestHandler):
    """Answers like an etcd 3.4 gateway, but with a value that is not base64."""

    def do_GET(self) -> None:
        self._reply({"etcdserver": "3.4.23", "etcdcluster": "3.4.0"})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        kv = {"key": "aw==", "mod_revision": "5", "value": "not base64!"}
        self._reply({"header": {"revision": "5"}, "kvs": [kv], "count": "1"})

    def _reply(self, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_reply_that_is_not_etcds_is_a_connection_error() -> None:
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeGateway) as fake:
        serving = threading.Thread(target=fake.serve_forever)
        serving.start()
        try:
            with (
                EtcdStore(f"127.0.0.1:{fake.server_address[1]}") as store,
                pytest.raises(RendezvousConnectionError, match=r"unexpected reply: kvs\.0\.value"),
            ):
                store.get("k")
        finally:
            fake.shutdown()
            serving.join(LIMIT)


@pytest.mark.parametrize(
    "endpoint",
    ["ftp://h:1", "http://", "http://h:1/path", "http://h:notaport", "http://h:1,", "h:1,h:x"],
)
def test_bad_endpoints_are_refused(endpoint: str) -> None:
    with pytest.raises(ValueError, match="endpoint"):
        EtcdStore(endpoint)


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="request_timeout"):
        EtcdStore(request_timeout=0)
    with pytest.raises(ValueError, match="together"):
        EtcdStore(client_cert="c.pem")


# --------------------------------------------------------------------------- with the holder


CFG = RendezvousSettings(run_id="r", min_nodes=2, max_nodes=2, cache_duration=0)


def test_corrupted_value_is_a_state_error_and_stays(etcd_store: EtcdStore) -> None:
    holder = StateHolder(etcd_store, CFG)
    etcd_store.compare_set(holder.key, None, b"\x80\x04 pickled, not JSON")
    with pytest.raises(RendezvousStateError, match="Invalid JSON"):
        holder.sync(0.0)
    holder.set_state(RendezvousState().replace(participants={NodeDesc("h", 1, 0): 0}))
    with pytest.raises(RendezvousStateError):
        holder.sync(0.0)  # the lost CAS loads the corrupted value: an error, no overwrite
    got = etcd_store.get(holder.key)
    assert got is not None
    assert got.value == b"\x80\x04 pickled, not JSON"


def test_foreign_run_is_rejected_through_etcd(etcd_store: EtcdStore) -> None:
    theirs = StateHolder(etcd_store, CFG.model_copy(update={"run_id": "r"}))
    theirs.set_state(RendezvousState().replace(round=3))
    theirs.sync(0.0)
    ours = StateHolder(etcd_store, CFG.model_copy(update={"run_id": "other"}))
    ours.key = theirs.key  # the same key, another run's settings
    with pytest.raises(RendezvousStateError, match="run_id is 'r'"):
        ours.sync(0.0)


# --------------------------------------------------------------------------- the handler


def test_handlers_rendezvous_over_etcd(etcd_store: EtcdStore) -> None:
    n = 4
    cfg = RendezvousSettings(run_id="etcd-threads", min_nodes=n, max_nodes=n, cache_duration=0)
    nodes = [NodeDesc(f"10.0.0.{8 + i}", 7, i) for i in range(n)]
    handlers = [DynamicRendezvousHandler(etcd_store, cfg, node=node) for node in nodes]
    try:
        first = rendezvous_all(handlers)
        expected = {node: rank for rank, node in enumerate(sorted(nodes))}
        assert {node: info.rank for node, info in first.items()} == expected
        assert {(info.round, info.world_size) for info in first.values()} == {(0, n)}
        second = rendezvous_all(handlers)  # all exit round 0; the last one out bumps the round
        assert {node: info.rank for node, info in second.items()} == expected
        assert {(info.round, info.world_size) for info in second.values()} == {(1, n)}
        assert handlers[0].shutdown()
        assert handlers[1].is_closed()
    finally:
        for h in handlers:
            h._stop_heartbeats()
