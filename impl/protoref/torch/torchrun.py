"""Our rendezvous as a ``torchrun`` backend: ``torchrun --rdzv-backend=protoref ...``.

torch 2.13 loads out-of-tree rendezvous handlers from the ``torchrun.handlers`` entry-point
group (``torch/distributed/elastic/rendezvous/registry.py``): it loads the entry point, calls
it with no argument and registers what it returns, a function from torch's
``RendezvousParameters`` to a ``RendezvousHandler``, under the entry point's name. pyproject.toml
names :func:`handler_creator` as ``protoref``::

    torchrun --rdzv-backend=protoref --rdzv-endpoint=file:/tmp/job7 --rdzv-id=job7 \\
        --nnodes=1:2 --nproc-per-node=4 --rdzv-conf=join_timeout=60,keep_alive_interval=1 train.py

The handler is our :class:`~protoref.rendezvous.runtime.handler.DynamicRendezvousHandler` (the
decision logic checked against DynamicRendezvous.tla, its state as schema-checked JSON, time across
hosts without trusting clocks) over the file store (one host) or etcd (several hosts), wrapped
in torch's interface:

- ``next_rendezvous()`` returns torch's ``RendezvousInfo``: the rank and world size, the agent
  store (a ``TCPStore`` served by rank 0's agent, found through our store:
  :mod:`protoref.torch.agent_store`, wrapped in ``PrefixStore("torch.rendezvous.<id>.<round>")``
  as torch wraps its own) and the bootstrap store info the workers' ``MASTER_ADDR`` and
  ``MASTER_PORT`` come from: with ``use_agent_store`` (torch's default, unless
  ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``) the workers share that same TCPStore, otherwise
  rank 0 picks a free port for its rank-0 worker to serve, as torch does.
- ``num_nodes_waiting()``, ``is_closed()``, ``set_closed()``, ``shutdown()``, ``get_run_id()``
  are our handler's; our errors become torch's of the same name (the agent catches
  ``RendezvousGracefulExitError`` by torch's class).
- ``--rdzv-conf`` settings and the endpoint: :mod:`protoref.torch.torchrun_conf`.

torch is imported only when a handler is made; its types are ``Any`` here so that protoref
type-checks without torch installed.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from functools import cache
from typing import Any, Final

from protoref.rendezvous.core import errors as ours
from protoref.rendezvous.runtime.handler import (
    DynamicRendezvousHandler,
    RendezvousInfo,
    new_node_desc,
)
from protoref.rendezvous.runtime.node_main import store_from_url
from protoref.torch.agent_store import RoundSupersededError, await_address, publish_address
from protoref.torch.torchrun_conf import TorchrunConfig, parse_config

__all__ = ["BACKEND", "TorchrunRendezvous", "create_handler", "handler_creator"]

BACKEND: Final = "protoref"
log = logging.getLogger(__name__)

_API: Final = "torch.distributed.elastic.rendezvous.api"
#: our error -> torch's class of the same meaning (checked most specific first)
_ERRORS: Final = (
    (ours.RendezvousGracefulExitError, "RendezvousGracefulExitError"),
    (ours.RendezvousClosedError, "RendezvousClosedError"),
    (ours.RendezvousTimeoutError, "RendezvousTimeoutError"),
    (ours.RendezvousConnectionError, "RendezvousConnectionError"),
    (ours.RendezvousStateError, "RendezvousStateError"),
    (ours.RendezvousError, "RendezvousError"),
)


def _module(name: str) -> Any:
    return importlib.import_module(name)


@contextlib.contextmanager
def _as_torch_errors() -> Iterator[None]:
    """Raise our rendezvous errors as torch's (the elastic agent tests torch's classes)."""
    try:
        yield
    except ours.RendezvousError as err:
        api = _module(_API)
        name = next(n for cls, n in _ERRORS if isinstance(err, cls))
        raise getattr(api, name)(str(err)) from err


class TorchrunRendezvous:
    """torch's ``RendezvousHandler`` interface over our handler (see the module docstring).

    Made by :func:`create_handler`, which mixes in torch's abstract ``RendezvousHandler``.
    """

    def __init__(self, params: Any) -> None:
        self.config: TorchrunConfig = parse_config(
            str(params.endpoint or ""),
            run_id=str(params.run_id),
            min_nodes=int(params.min_nodes),
            max_nodes=int(params.max_nodes),
            conf=dict(params.config),
        )
        cfg = self.config
        with _as_torch_errors():
            self.store = store_from_url(
                cfg.store_url,
                request_timeout=cfg.request_timeout,
                ca_cert=cfg.etcd_ca_cert,
                client_cert=cfg.etcd_cert,
                client_key=cfg.etcd_key,
                username=cfg.etcd_user,
                password=cfg.etcd_password,
            )
        self.node = new_node_desc(params.local_addr)
        self.handler = DynamicRendezvousHandler(self.store, cfg.settings, node=self.node)
        self._server: Any = None  # the TCPStore this agent serves while it is rank 0

    # ------------------------------------------------------------------ torch's interface

    def get_backend(self) -> str:
        return BACKEND

    @property
    def use_agent_store(self) -> bool:
        """Workers share the agent store (torch's rule and variable)."""
        return os.getenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "0") != "1"

    def next_rendezvous(self) -> Any:
        api = _module(_API)
        dist = _module("torch.distributed")
        with _as_torch_errors():
            while True:
                info = self.handler.next_rendezvous()
                try:
                    tcp, addr, port = self._agent_store(info)
                    break
                except RoundSupersededError as err:  # that round is over: join the next one
                    log.info("%s; joining the next round", err)
        store = dist.PrefixStore(info.store_prefix, tcp)
        if self.use_agent_store:
            bootstrap = api.RendezvousStoreInfo(addr, port)
        else:
            bootstrap = api.RendezvousStoreInfo.build(info.rank, store, local_addr=self.node.addr)
        log.info(
            "node %s joined round %d of rendezvous %r as rank %d in a world of size %d",
            self.node,
            info.round,
            self.get_run_id(),
            info.rank,
            info.world_size,
        )
        return api.RendezvousInfo(store, info.rank, info.world_size, bootstrap)

    def is_closed(self) -> bool:
        with _as_torch_errors():
            return self.handler.is_closed()

    def set_closed(self) -> None:
        with _as_torch_errors():
            self.handler.set_closed()

    def num_nodes_waiting(self) -> int:
        with _as_torch_errors():
            return self.handler.num_nodes_waiting()

    def get_run_id(self) -> str:
        return self.handler.get_run_id()

    def shutdown(self) -> bool:
        return self.handler.shutdown()

    # ------------------------------------------------------------------ the agent store

    def _agent_store(self, info: RendezvousInfo) -> tuple[Any, str, int]:
        """Rank 0 serves a fresh TCPStore for the round and publishes it; the others connect.

        Fresh per round: the workers of a round write their process group's keys into it
        unprefixed (``default_pg/...``), so a server kept from an earlier round hands the new
        workers the dead ones' gloo addresses (measured: the restarted group failed
        ``connectFullMesh`` on a refused stale address). A node drops its server as soon as
        a later round is complete, when every agent of the old round has left it.
        """
        dist = _module("torch.distributed")
        timeout = self.config.read_timeout
        run_id = self.get_run_id()
        self._server = None  # the previous round's, if any: that round is over
        if info.rank == 0:
            server = dist.TCPStore(
                host_name=self.node.addr,
                port=0,
                is_master=True,
                multi_tenant=True,
                wait_for_workers=False,
                timeout=timedelta(seconds=timeout),
            )
            port = int(server.port)
            publish_address(
                self.store, run_id, info.round, addr=self.node.addr, port=port, timeout=timeout
            )
            self._server = server
            return server, self.node.addr, port
        where = await_address(self.store, run_id, info.round, timeout)
        client = dist.TCPStore(
            host_name=where.addr,
            port=where.port,
            is_master=False,
            timeout=timedelta(seconds=timeout),
        )
        return client, where.addr, where.port


@cache
def _handler_class() -> type[TorchrunRendezvous]:
    """:class:`TorchrunRendezvous` with torch's abstract ``RendezvousHandler`` mixed in."""
    api = _module(_API)
    return type("ProtorefRendezvousHandler", (TorchrunRendezvous, api.RendezvousHandler), {})


def create_handler(params: Any) -> TorchrunRendezvous:
    """torch's ``RendezvousParameters`` -> our handler (a ``RendezvousHandler``)."""
    return _handler_class()(params)


def handler_creator() -> Callable[[Any], TorchrunRendezvous]:
    """The ``torchrun.handlers`` entry point: torch calls it and registers what it returns."""
    return create_handler
