"""``torchrun``'s rendezvous arguments, read for our backend (no torch import here).

``torchrun --rdzv-backend=protoref --rdzv-endpoint=E --rdzv-id=JOB --nnodes=MIN:MAX
--rdzv-conf=k=v,...`` reaches our handler as torch's ``RendezvousParameters``: ``endpoint``,
``run_id``, ``min_nodes``, ``max_nodes``, ``local_addr`` and ``config`` (the ``--rdzv-conf``
pairs as strings; ``launch_agent`` always adds ``timeout``, the legacy etcd handler's, which we
accept and ignore as torch's own dynamic handler does). Everything is checked here, and a bad
endpoint or setting is a :class:`TorchrunConfigError` that names the argument, before any store
is touched.

Endpoints: ``file:DIR`` (every agent on one host; DIR is created if missing, its parent must
exist), ``etcd://host:port[,host:port...][/prefix]`` or a bare ``host:port[,host:port...]``
(etcd, agents on several hosts; every member listed is tried in turn), ``etcds://...`` (etcd
over TLS, with ``etcd_ca_cert``, ``etcd_cert``, ``etcd_key``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from protoref.errors import ProtorefError
from protoref.rendezvous.core.state import RendezvousSettings

__all__ = ["CONF_KEYS", "PASSWORD_ENV", "TorchrunConfig", "TorchrunConfigError", "parse_config"]

PASSWORD_ENV: Final = "PROTOREF_ETCD_PASSWORD"


class TorchrunConfigError(ProtorefError, ValueError):
    """A ``--rdzv-endpoint`` or ``--rdzv-conf`` value our backend cannot use (names which)."""


def _seconds(key: str, raw: object) -> float:
    try:
        value = float(str(raw))
    except ValueError:
        raise TorchrunConfigError(f"--rdzv-conf {key}={raw!r}: not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise TorchrunConfigError(f"--rdzv-conf {key}={raw!r}: must be a positive number")
    return value


def _count(key: str, raw: object) -> int:
    text = str(raw).strip()
    if not text.isdigit() or int(text) < 1:
        raise TorchrunConfigError(f"--rdzv-conf {key}={raw!r}: must be a whole number >= 1")
    return int(text)


def _path(key: str, raw: object) -> str:
    text = str(raw)
    if not Path(text).is_file():
        raise TorchrunConfigError(f"--rdzv-conf {key}={raw!r}: no such file")
    return text


def _text(key: str, raw: object) -> str:
    text = str(raw).strip()
    if not text:
        raise TorchrunConfigError(f"--rdzv-conf {key}: empty")
    return text


def _ignored(key: str, raw: object) -> None:
    return None


def _backoff(key: str, raw: object) -> float:
    """torch 2.15's ``cas_backoff_max_seconds``: finite and non-negative, as 2.15 checks it."""
    try:
        value = float(str(raw))
    except ValueError:
        raise TorchrunConfigError(f"--rdzv-conf {key}={raw!r}: not a number") from None
    if not math.isfinite(value) or value < 0:
        raise TorchrunConfigError(f"--rdzv-conf {key}={raw!r}: must be finite and non-negative")
    return value


#: Every key ``--rdzv-conf`` may carry, with its reader. The timeouts and keep-alive settings
#: are torch's ``create_handler``'s (same names, same defaults); ``read_timeout`` bounds the
#: agent store's TCPStore operations and the wait for rank 0 to publish it (torch's c10d
#: backend's name); ``request_timeout`` bounds each etcd request.
CONF_KEYS: Final[dict[str, Callable[[str, object], object]]] = {
    "join_timeout": _seconds,
    "last_call_timeout": _seconds,
    "close_timeout": _seconds,
    "heartbeat_timeout": _seconds,
    "keep_alive_interval": _seconds,
    "keep_alive_max_attempt": _count,
    "read_timeout": _seconds,
    "request_timeout": _seconds,
    "etcd_ca_cert": _path,
    "etcd_cert": _path,
    "etcd_key": _path,
    "etcd_user": _text,
    "timeout": _ignored,  # launch_agent's legacy default; torch's dynamic handler ignores it
    # torch 2.15's opt-in random sleep after a lost compare-and-set: accepted (a torchrun
    # command line written for 2.15 keeps working) and kept in the config; our handler does not
    # sleep, since the back-off changes no decision (docs/divergences.md, 2026-12-01)
    "cas_backoff_max_seconds": _backoff,
}

_SETTINGS: Final = (
    "join_timeout",
    "last_call_timeout",
    "close_timeout",
    "heartbeat_timeout",
    "keep_alive_interval",
    "keep_alive_max_attempt",
)


@dataclass(frozen=True, slots=True)
class TorchrunConfig:
    """What our backend runs on: the store URL (``node_main.store_from_url``'s syntax), the
    rendezvous settings and the store options."""

    store_url: str
    settings: RendezvousSettings
    read_timeout: float = 60.0
    request_timeout: float = 5.0
    etcd_ca_cert: str | None = None
    etcd_cert: str | None = None
    etcd_key: str | None = None
    etcd_user: str | None = None
    etcd_password: str | None = None
    #: torch 2.15's back-off bound, accepted and kept; our handler does not sleep on it
    cas_backoff_max_seconds: float = 0.0


def _store_url(endpoint: str) -> str:
    """The store URL of ``--rdzv-endpoint``; raises on anything else."""
    text = endpoint.strip()
    hint = "file:DIR (agents on one host) or host:port / etcd://host:port[/prefix] (etcd)"
    if not text:
        raise TorchrunConfigError(f"--rdzv-endpoint is empty: give {hint}")
    if text.startswith("file:"):
        directory = Path(text.removeprefix("file:").removeprefix("//"))
        if not str(directory) or str(directory) == ".":
            raise TorchrunConfigError(f"--rdzv-endpoint {endpoint!r}: file:DIR needs a directory")
        if directory.exists() and not directory.is_dir():
            raise TorchrunConfigError(f"--rdzv-endpoint {endpoint!r}: not a directory")
        if not directory.exists():
            if not directory.parent.is_dir():
                raise TorchrunConfigError(
                    f"--rdzv-endpoint {endpoint!r}: {directory.parent} does not exist"
                )
            directory.mkdir(mode=0o700, exist_ok=True)
        return f"file:{directory}"
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "etcd", text
    if scheme not in ("etcd", "etcds"):
        raise TorchrunConfigError(f"--rdzv-endpoint {endpoint!r}: expected {hint}")
    members = rest.split("/", 1)[0]
    for member in members.split(","):
        host, colon, port = member.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise TorchrunConfigError(
                f"--rdzv-endpoint {endpoint!r}: {member!r} is not host:port (expected {hint})"
            )
    return f"{scheme}://{rest}"


def parse_config(
    endpoint: str,
    *,
    run_id: str,
    min_nodes: int,
    max_nodes: int,
    conf: Mapping[str, object],
    env: Mapping[str, str] | None = None,
) -> TorchrunConfig:
    """Check torchrun's rendezvous arguments; :class:`TorchrunConfigError` names a bad one."""
    unknown = sorted(set(conf) - set(CONF_KEYS))
    if unknown:
        raise TorchrunConfigError(
            f"--rdzv-conf: unknown key(s) {', '.join(unknown)} for --rdzv-backend=protoref "
            f"(known: {', '.join(sorted(CONF_KEYS))})"
        )
    values = {key: CONF_KEYS[key](key, raw) for key, raw in conf.items()}
    try:
        settings = RendezvousSettings(
            run_id=run_id,
            min_nodes=min_nodes,
            max_nodes=max_nodes,
            **{k: values[k] for k in _SETTINGS if k in values},
        )
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "--nnodes"
        raise TorchrunConfigError(f"rendezvous setting {where}: {first['msg']}") from None
    if settings.last_call_timeout >= settings.join_timeout:
        raise TorchrunConfigError(
            f"--rdzv-conf last_call_timeout={settings.last_call_timeout:g} must be shorter "
            f"than join_timeout={settings.join_timeout:g}: a node would time out of its join "
            "before any last call ends (DynamicRendezvous.tla, live_lastcall_long)"
        )
    url = _store_url(endpoint)
    user = values.get("etcd_user")
    password = None
    if user is not None:
        password = (os.environ if env is None else env).get(PASSWORD_ENV)
        if password is None:
            raise TorchrunConfigError(
                f"--rdzv-conf etcd_user needs the password in ${PASSWORD_ENV}"
            )
    if url.startswith("file:") and any(k.startswith("etcd_") for k in values):
        raise TorchrunConfigError("--rdzv-conf etcd_*: the endpoint is a file store, not etcd")
    if (values.get("etcd_cert") is None) != (values.get("etcd_key") is None):
        raise TorchrunConfigError("--rdzv-conf etcd_cert and etcd_key go together (mutual TLS)")

    def opt(key: str) -> str | None:
        value = values.get(key)
        return None if value is None else str(value)

    return TorchrunConfig(
        store_url=url,
        settings=settings,
        read_timeout=float(str(values.get("read_timeout", 60.0))),
        request_timeout=float(str(values.get("request_timeout", 5.0))),
        etcd_ca_cert=opt("etcd_ca_cert"),
        etcd_cert=opt("etcd_cert"),
        etcd_key=opt("etcd_key"),
        etcd_user=opt("etcd_user"),
        etcd_password=password,
        cas_backoff_max_seconds=float(str(values.get("cas_backoff_max_seconds", 0.0))),
    )
