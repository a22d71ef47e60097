"""A local etcd for the rendezvous tests: one per test session, on free loopback ports; torch
2.13 for the torchrun backend's tests.

etcd is a required test dependency (``.ci/run`` installs Debian's ``etcd-server``): without the
binary the etcd tests FAIL with the install hint. ``PROTOREF_SKIP_ETCD=1`` turns that into a skip
for a developer who knowingly runs without etcd; CI never sets it.
"""

from __future__ import annotations

import importlib.metadata
import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from protoref.rendezvous.adapters.etcd_cluster import EtcdCluster
from protoref.rendezvous.adapters.etcd_server import (
    ETCD_INSTALL_HINT,
    EtcdNotInstalledError,
    EtcdServer,
    find_etcd,
)
from protoref.rendezvous.adapters.etcd_store import EtcdStore

_prefixes = itertools.count()


@pytest.fixture(scope="session")
def etcd_binary() -> Path:
    """The etcd binary; every test that starts an etcd asks for it (fail, or opt-out skip)."""
    try:
        return find_etcd()
    except EtcdNotInstalledError as err:
        if os.environ.get("PROTOREF_SKIP_ETCD") == "1":
            pytest.skip(f"PROTOREF_SKIP_ETCD=1: etcd tests not run ({err})")
        hint = "" if ETCD_INSTALL_HINT in str(err) else f"; {ETCD_INSTALL_HINT}"
        pytest.fail(f"the etcd tests need etcd: {err}{hint}")


@pytest.fixture(scope="session")
def etcd_single(etcd_binary: Path) -> Iterator[EtcdServer]:
    with EtcdServer(etcd_binary) as server:
        yield server


@pytest.fixture(scope="session")
def etcd_cluster3(etcd_binary: Path) -> Iterator[EtcdCluster]:
    """3 members on loopback; ``endpoint`` and ``url`` list them all (the store fails over)."""
    with EtcdCluster(3) as cluster:
        yield cluster


@pytest.fixture(params=["etcd", "etcd-cluster3"])
def etcd_server(request: pytest.FixtureRequest) -> EtcdServer | EtcdCluster:
    """Every etcd test runs against one member and against a 3-member cluster."""
    name = "etcd_single" if request.param == "etcd" else "etcd_cluster3"
    server: EtcdServer | EtcdCluster = request.getfixturevalue(name)
    return server


@pytest.fixture
def etcd_prefix() -> str:
    """A key prefix of its own per test (the tests share one etcd)."""
    return f"/test/{os.getpid()}/{next(_prefixes)}/"


@pytest.fixture
def etcd_store(etcd_server: EtcdServer | EtcdCluster, etcd_prefix: str) -> Iterator[EtcdStore]:
    with EtcdStore(etcd_server.endpoint, prefix=etcd_prefix) as store:
        yield store


TORCH_INSTALL_HINT = "pip install -e '.[torch]' (torch 2.13.0, CPU)"


@pytest.fixture(scope="session")
def torch_version() -> str:
    """torch 2.13 (the torchrun backend's tests run real torchrun agents): fail without it,
    or skip with ``PROTOREF_SKIP_TORCH=1`` for a developer who knowingly runs without torch."""
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        version = ""
    if version.startswith(("2.13.", "2.14.", "2.15.")):
        return version
    problem = f"torch {version} is not 2.13 to 2.15" if version else "torch is not installed"
    if os.environ.get("PROTOREF_SKIP_TORCH") == "1":
        pytest.skip(f"PROTOREF_SKIP_TORCH=1: torchrun tests not run ({problem})")
    pytest.fail(f"the torchrun tests need torch 2.13: {problem}; {TORCH_INSTALL_HINT}")
