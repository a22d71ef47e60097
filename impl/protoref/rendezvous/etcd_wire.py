"""etcd's grpc-gateway on the wire, for :mod:`protoref.rendezvous.etcd_store`: the replies we
read (pydantic models: a reply that is not etcd's is a validation error, never a KeyError), the
HTTP adapter, the member list of an endpoint and which failures are worth another member."""

from __future__ import annotations

import base64
from typing import Any, Final
from urllib.parse import urlsplit

import etcd3gw
import requests
from pydantic import BaseModel, ConfigDict, field_validator

from protoref.rendezvous.store import Versioned

__all__ = [
    "KV",
    "BoundedAdapter",
    "Range",
    "Token",
    "Txn",
    "b64",
    "fails_over",
    "members",
    "versioned",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")  # etcd adds fields across versions


class _Header(_Model):
    revision: int  # proto3 JSON sends int64 as a string; lax mode parses it


class KV(_Model):
    mod_revision: int
    value: bytes = b""  # base64 on the wire; proto3 JSON omits empty bytes

    @field_validator("value", mode="before")
    @classmethod
    def _from_base64(cls, raw: object) -> bytes:
        if not isinstance(raw, str):
            raise ValueError(f"expected a base64 string, got {type(raw).__name__}")
        return base64.b64decode(raw, validate=True)


class Range(_Model):
    header: _Header
    kvs: list[KV] = []


class _Op(_Model):
    response_range: Range | None = None


class Token(_Model):
    token: str


class Txn(_Model):
    header: _Header
    succeeded: bool = False  # omitted when false
    responses: list[_Op] = []


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def versioned(kv: KV) -> Versioned:
    return Versioned(kv.value, kv.mod_revision)


class BoundedAdapter(requests.adapters.HTTPAdapter):
    """An HTTP adapter that bounds any request sent without a timeout and verifies the server
    with ``ca_cert`` when given: requests lets ``REQUESTS_CA_BUNDLE`` and ``CURL_CA_BUNDLE``
    override a session's ``verify``, which would drop the etcd cluster's CA."""

    def __init__(
        self, default_timeout: tuple[float, float], pool: int, ca_cert: str | None
    ) -> None:
        super().__init__(pool_connections=1, pool_maxsize=pool)
        self.default_timeout = default_timeout
        self.ca_cert = ca_cert

    def send(  # noqa: PLR0917 - HTTPAdapter.send's own signature, overridden
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: Any = None,
        verify: Any = True,
        cert: Any = None,
        proxies: dict[str, str] | None = None,
    ) -> requests.Response:
        bound = self.default_timeout if timeout is None else timeout
        verify = verify if self.ca_cert is None else self.ca_cert
        return super().send(request, stream, bound, verify, cert, proxies)


def members(endpoint: str) -> tuple[str, list[tuple[str, int]]]:
    """``http(s)://host:port[,host:port...]`` (no scheme: http) -> (scheme, members)."""
    text = endpoint if "://" in endpoint else f"http://{endpoint}"
    scheme, _, rest = text.partition("://")
    netloc, slash, path = rest.partition("/")
    problem = f"etcd endpoint must be http(s)://host:port[,host:port...], got {endpoint!r}"
    if scheme not in ("http", "https") or (slash and path) or not netloc:
        raise ValueError(problem)
    members = []
    for member in netloc.split(","):
        parts = urlsplit(f"{scheme}://{member}")
        try:
            port = parts.port or 2379
        except ValueError as err:
            raise ValueError(f"etcd endpoint {endpoint!r}: {err}") from err
        if not parts.hostname or parts.path or parts.username:
            raise ValueError(problem)
        members.append((parts.hostname, port))
    return scheme, members


#: Failures of the way to one member, worth trying the next member with.
_FAILOVER: Final = (
    requests.ConnectionError,
    requests.Timeout,
    etcd3gw.exceptions.ConnectionFailedError,
    etcd3gw.exceptions.ConnectionTimeoutError,
    etcd3gw.exceptions.InternalServerError,
)


def fails_over(cause: BaseException | None) -> bool:
    if isinstance(cause, requests.HTTPError):  # the watch stream's own status check
        return cause.response is not None and cause.response.status_code >= 500
    return isinstance(cause, _FAILOVER)
