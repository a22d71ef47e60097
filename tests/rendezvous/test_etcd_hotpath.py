"""The etcd store's hot path: kept connections (``etcd_wire.Poster``) and compare-and-sets the
key's watch already knows stale, answered by a read instead of a raft transaction."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator

import pytest

from protoref.rendezvous.adapters.etcd_cluster import EtcdCluster
from protoref.rendezvous.adapters.etcd_server import EtcdServer
from protoref.rendezvous.adapters.etcd_store import EtcdStore
from protoref.rendezvous.adapters.etcd_wire import Poster, PostError, api_path

LIMIT = 30.0  # seconds a helper thread may take before the test fails (never reached)


class _HangsUp(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive announced, but the socket is closed after every reply without
    saying so: the client's kept connection is dead when it next sends."""

    protocol_version = "HTTP/1.1"
    connections = 0

    def setup(self) -> None:
        super().setup()
        type(self).connections += 1

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/missing":
            self._reply(404, {"error": "not found"})
        else:
            self._reply(200, {"echo": body})
        self.close_connection = True  # hang up, although the reply promised keep-alive

    def _reply(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def hangs_up() -> Iterator[int]:
    _HangsUp.connections = 0
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HangsUp) as server:
        serving = threading.Thread(target=server.serve_forever)
        serving.start()
        try:
            yield server.server_address[1]
        finally:
            server.shutdown()
            serving.join(LIMIT)


def test_a_kept_connection_the_server_closed_is_reopened(hangs_up: int) -> None:
    poster = Poster("http", [("127.0.0.1", hangs_up)], 5.0, None)
    try:
        for i in range(3):  # each post after the first finds its kept connection dead
            assert poster.post(0, "/echo", {"i": i}, None) == {"echo": {"i": i}}
        assert _HangsUp.connections == 3
        with pytest.raises(PostError, match="HTTP 404") as err:
            poster.post(0, "/missing", {}, None)
        assert err.value.status == 404
    finally:
        poster.close()


def test_connections_of_ended_threads_are_closed(hangs_up: int) -> None:
    """One kept connection per thread: those of threads that ended do not pile up."""
    poster = Poster("http", [("127.0.0.1", hangs_up)], 5.0, None)
    try:
        for i in range(4):
            worker = threading.Thread(target=poster.post, args=(0, "/echo", {"i": i}, None))
            worker.start()
            worker.join(LIMIT)
        assert poster.post(0, "/echo", {}, None) == {"echo": {}}
        assert [thread for thread, _ in poster._all] == [threading.current_thread()]
    finally:
        poster.close()


def test_a_compare_and_set_known_stale_is_answered_by_a_read(
    etcd_server: EtcdServer | EtcdCluster, etcd_prefix: str
) -> None:
    """Store b watches the key; a writes over b's token; b's compare-and-set with the stale
    token loses with a's value without a transaction (``cas_skipped``), and its next one, with
    the fresh token, is a transaction again and wins."""
    with (
        EtcdStore(etcd_server.endpoint, prefix=etcd_prefix) as a,
        EtcdStore(etcd_server.endpoint, prefix=etcd_prefix) as b,
    ):
        won, first = a.compare_set("k", None, b"1")
        assert won
        assert not b.wait_for_change("k", first.token, 0.05)  # b's watch, at a's first write
        won, second = a.compare_set("k", first.token, b"2")
        assert won
        assert b.wait_for_change("k", first.token, LIMIT)  # b's watch has seen the new token
        won, seen = b.compare_set("k", first.token, b"stale")
        assert not won
        assert seen == second
        assert (b.cas_won, b.cas_lost, b.cas_skipped) == (0, 1, 1)
        won, third = b.compare_set("k", second.token, b"3")
        assert won
        assert (b.cas_won, b.cas_lost, b.cas_skipped) == (1, 1, 1)
        got = a.get("k")
        assert got is not None
        assert got.value == b"3"
        assert got.token == third.token
        won, _ = b.compare_set("k", None, b"again")  # create-only on an existing key: stale
        assert not won
        assert b.cas_skipped == 2


@pytest.mark.parametrize(
    ("version", "path"),
    [
        ("3.5.1", "/v3"),
        ("3.4.23", "/v3"),
        ("4.0.0", "/v3"),
        ("3.3.9", "/v3beta"),
        ("3.2.0", "/v3alpha"),
    ],
)
def test_the_api_path_follows_the_members_version(version: str, path: str) -> None:
    assert api_path({"etcdserver": version, "etcdcluster": "3.0.0"}) == path


@pytest.mark.parametrize("reply", [{}, {"etcdserver": "three"}, {"etcdserver": "3"}, [], "3.4"])
def test_a_version_reply_that_is_not_etcds_is_a_value_error(reply: object) -> None:
    with pytest.raises(ValueError, match=r"etcd|valid"):
        api_path(reply)
