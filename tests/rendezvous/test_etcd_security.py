"""The etcd store against an etcd with authentication on, and one that requires mutual TLS.

Each test module starts its own etcd (auth or TLS changes the whole server); the certificates
are made with the openssl command for the test and live in a temporary directory.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from protoref.rendezvous.adapters.etcd_server import EtcdServer, EtcdTls
from protoref.rendezvous.adapters.etcd_store import EtcdStore
from protoref.rendezvous.core.errors import RendezvousConnectionError
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings
from protoref.rendezvous.runtime.handler import DynamicRendezvousHandler
from protoref.rendezvous.runtime.node_main import PASSWORD_ENV
from protoref.rendezvous.runtime.node_main import main as node_main

TOKEN_TTL = 1  # seconds etcd keeps an unused simple token (--auth-token-ttl)
PREFIX = "/jobs/seven/"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _post(server: EtcdServer, path: str, body: dict[str, object]) -> None:
    """An administrator's request to etcd's gateway (``/v3/auth/...``), before auth is on."""
    request = urllib.request.Request(
        f"{server.endpoint}/v3{path}",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        assert resp.status == 200, resp.read()


@pytest.fixture(scope="module")
def auth_etcd(etcd_binary: Path) -> Iterator[EtcdServer]:
    """root (all keys) and rdzv (read-write on PREFIX only), authentication enabled."""
    with EtcdServer(etcd_binary, extra_args=[f"--auth-token-ttl={TOKEN_TTL}"]) as server:
        _post(server, "/auth/role/add", {"name": "root"})
        _post(server, "/auth/user/add", {"name": "root", "password": "root-pw"})
        _post(server, "/auth/user/grant", {"user": "root", "role": "root"})
        _post(server, "/auth/role/add", {"name": "rdzv"})
        end = PREFIX[:-1] + chr(ord(PREFIX[-1]) + 1)
        perm = {"permType": "READWRITE", "key": _b64(PREFIX), "range_end": _b64(end)}
        _post(server, "/auth/role/grant", {"name": "rdzv", "perm": perm})
        _post(server, "/auth/user/add", {"name": "rdzv", "password": "rdzv-pw"})
        _post(server, "/auth/user/grant", {"user": "rdzv", "role": "rdzv"})
        _post(server, "/auth/enable", {})
        yield server


def test_without_credentials_etcd_refuses(auth_etcd: EtcdServer) -> None:
    with (
        EtcdStore(auth_etcd.endpoint, prefix=PREFIX) as store,
        pytest.raises(RendezvousConnectionError, match="user name is empty"),
    ):
        store.get("k")


def test_a_wrong_password_is_named(auth_etcd: EtcdServer) -> None:
    with (
        EtcdStore(auth_etcd.endpoint, prefix=PREFIX, username="rdzv", password="nope") as store,
        pytest.raises(RendezvousConnectionError, match=r"authenticate as 'rdzv'.*authentication"),
    ):
        store.get("k")


def test_a_user_works_under_its_prefix_only(auth_etcd: EtcdServer) -> None:
    with EtcdStore(auth_etcd.endpoint, prefix=PREFIX, username="rdzv", password="rdzv-pw") as s:
        ok, v = s.compare_set("k", None, b"a")
        assert ok
        assert s.get("k") == v
        assert not s.wait_for_change("k", v.token, 0.05)
    outside = "/jobs/eight/"
    with (
        EtcdStore(auth_etcd.endpoint, prefix=outside, username="rdzv", password="rdzv-pw") as s,
        pytest.raises(RendezvousConnectionError, match="permission denied"),
    ):
        s.compare_set("k", None, b"a")


def test_an_expired_token_is_renewed(auth_etcd: EtcdServer) -> None:
    with EtcdStore(auth_etcd.endpoint, prefix=PREFIX, username="root", password="root-pw") as s:
        s.get("k")
        first = s._auth_token
        time.sleep(TOKEN_TTL + 2)  # unused for longer than the TTL (etcd checks every second)
        ok, _ = s.compare_set("renewed", None, b"x")  # rejected once, re-sent with a new token
        assert ok
        assert s._auth_token not in (None, first)


def _assert_watch_wakes(store: EtcdStore, key: str) -> None:
    """A write made once the waiter's watch stream is open wakes it through the stream."""
    _, v = store.compare_set(key, None, b"a")
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(store.wait_for_change(key, v.token, 60)))
    waiter.start()
    full = store.prefix + key
    end = time.monotonic() + 60
    while full not in store._watches and waiter.is_alive():  # until the stream is open
        assert time.monotonic() < end
        time.sleep(0.01)
    store.compare_set(key, v.token, b"b")
    waiter.join(60)
    assert woke == [True]
    assert store._watches[full].events >= 1  # the stream delivered the write


def test_watches_carry_the_token(auth_etcd: EtcdServer) -> None:
    with EtcdStore(auth_etcd.endpoint, prefix=PREFIX, username="rdzv", password="rdzv-pw") as s:
        _assert_watch_wakes(s, "w")


def test_node_main_takes_the_password_from_the_environment(
    auth_etcd: EtcdServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--store", f"{auth_etcd.url}{PREFIX}", "--run-id", "auth", "--min-nodes", "1"]
    argv += ["--max-nodes", "1", "--etcd-user", "rdzv", "--close"]
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    with pytest.raises(SystemExit) as exited:
        node_main(argv)
    assert exited.value.code == 2
    assert PASSWORD_ENV in capsys.readouterr().err
    monkeypatch.setenv(PASSWORD_ENV, "rdzv-pw")
    assert node_main(argv) == 0
    assert json.loads(capsys.readouterr().out)["rank"] == 0


# --------------------------------------------------------------------------- mutual TLS


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _sign(name: str, cn: str, ext: str, cwd: Path) -> None:
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl(
        "req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=cwd
    )
    (cwd / f"{name}.ext").write_text(ext)
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "1", "-out", f"{name}.pem", "-extfile", f"{name}.ext",
        cwd=cwd,
    )  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.fail("the TLS tests make their certificates with openssl (apt-get install openssl)")
    d = tmp_path_factory.mktemp("pki")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
             "-subj", "/CN=protoref test CA", cwd=d)  # fmt: skip
    # etcd's gRPC gateway dials etcd's own gRPC server with the server certificate as its client
    # certificate, so with --client-cert-auth that certificate must allow clientAuth as well.
    server_ext = "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n"
    _sign("server", "127.0.0.1", server_ext, d)
    _sign("client", "rdzv", "extendedKeyUsage=clientAuth\n", d)
    return d


@pytest.fixture(scope="module")
def tls_etcd(etcd_binary: Path, pki: Path) -> Iterator[EtcdServer]:
    tls = EtcdTls(
        pki / "server.pem",
        pki / "server.key",
        pki / "ca.pem",
        pki / "client.pem",
        pki / "client.key",
    )
    with EtcdServer(etcd_binary, tls=tls) as server:
        yield server


def test_mutual_tls(tls_etcd: EtcdServer, pki: Path) -> None:
    assert tls_etcd.endpoint.startswith("https://")
    tls = {
        "ca_cert": str(pki / "ca.pem"),
        "client_cert": str(pki / "client.pem"),
        "client_key": str(pki / "client.key"),
    }
    with EtcdStore(tls_etcd.endpoint, prefix=PREFIX, **tls) as s:
        ok, v = s.compare_set("k", None, b"a")
        assert ok
        assert s.get("k") == v
        _assert_watch_wakes(s, "w")  # the watch stream goes over TLS too
        cfg = RendezvousSettings(run_id="tls", min_nodes=1, max_nodes=1)
        h = DynamicRendezvousHandler(s, cfg, node=NodeDesc("127.0.0.1", 1, 0))
        assert h.next_rendezvous().rank == 0
        assert h.shutdown()


def test_tls_refusals_are_connection_errors(tls_etcd: EtcdServer, pki: Path) -> None:
    no_client_cert = EtcdStore(tls_etcd.endpoint, ca_cert=str(pki / "ca.pem"))
    unverified_server = EtcdStore(
        tls_etcd.endpoint, client_cert=str(pki / "client.pem"), client_key=str(pki / "client.key")
    )
    for store in (no_client_cert, unverified_server):
        with store, pytest.raises(RendezvousConnectionError, match=tls_etcd.endpoint):
            store.get("k")


def test_node_main_over_tls(
    tls_etcd: EtcdServer, pki: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tls_etcd.url.startswith("etcds://")
    argv = ["--store", f"{tls_etcd.url}/tls-job", "--run-id", "tls-main", "--min-nodes", "1"]
    argv += ["--max-nodes", "1", "--etcd-ca-cert", str(pki / "ca.pem"), "--close"]
    argv += ["--etcd-cert", str(pki / "client.pem"), "--etcd-key", str(pki / "client.key")]
    assert node_main(argv) == 0
    assert json.loads(capsys.readouterr().out)["world_size"] == 1
