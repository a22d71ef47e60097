"""etcd's grpc-gateway on the wire, for :mod:`protoref.rendezvous.adapters.etcd_store`: the
replies we read (pydantic models: a reply that is not etcd's is a validation error, never a
KeyError), the API path of a member's version, the HTTP adapter, the member list of an endpoint
and which failures are worth another member."""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
from typing import Any, Final
from urllib.parse import urlsplit

import requests
from pydantic import BaseModel, ConfigDict, field_validator

from protoref.rendezvous.adapters.store import Versioned

__all__ = [
    "KV",
    "BoundedAdapter",
    "PostError",
    "Poster",
    "Range",
    "Token",
    "Txn",
    "api_path",
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


class _Version(_Model):
    etcdserver: str


def api_path(reply: Any) -> str:
    """The gateway's path for a member's ``/version`` reply: ``/v3`` from etcd 3.4 on,
    ``/v3beta`` on 3.3, ``/v3alpha`` before (the mapping of etcd's gateway documentation, as
    etcd3gw made it); ``ValidationError`` or ``ValueError`` for a reply that is not etcd's."""
    text = _Version.model_validate(reply).etcdserver
    try:
        version = tuple(int(part) for part in text.split(".")[:2])
    except ValueError as err:
        raise ValueError(f"etcd version {text!r} is not major.minor[.patch]") from err
    if len(version) < 2:
        raise ValueError(f"etcd version {text!r} is not major.minor[.patch]")
    if version >= (3, 4):
        return "/v3"
    return "/v3beta" if version >= (3, 3) else "/v3alpha"


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
_FAILOVER: Final = (requests.ConnectionError, requests.Timeout)
#: HTTP statuses below 500 worth another member: 408, the request timed out there.
_RETRIED: Final = frozenset({408})


def fails_over(cause: BaseException | None) -> bool:
    """Whether ``cause`` is a failure of the way to one member (worth another member)."""
    if isinstance(cause, requests.HTTPError):  # the watch stream's own status check
        return cause.response is not None and cause.response.status_code >= 500
    if isinstance(cause, PostError):
        return cause.status >= 500 or cause.status in _RETRIED
    return isinstance(cause, (*_FAILOVER, OSError, http.client.HTTPException))


class PostError(Exception):
    """etcd answered with an HTTP status other than 200 (``text``: the start of its body)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text}")
        self.status = status
        self.text = text


class Poster:
    """POSTs JSON to etcd members over keep-alive ``http.client`` connections, one per thread
    and member.

    The store's reads and compare-and-sets are its hot path: through ``requests`` each cost
    about 1.5 ms of CPU here (environment proxy lookups, cookie jars, header merging; and
    urllib3 sends the headers and the body in two writes), through ``http.client`` about
    0.3 ms, and 16 node processes on 2 cores spend most of a round on that CPU.
    """

    def __init__(
        self,
        scheme: str,
        hosts: list[tuple[str, int]],
        timeout: float,
        context: ssl.SSLContext | None,
    ) -> None:
        self._scheme, self._hosts, self._timeout, self._context = scheme, hosts, timeout, context
        self._local = threading.local()
        #: every thread's connections with their thread: closed by close(), and those of
        #: threads that ended are closed when a new one is opened (bounded by live threads)
        self._all: list[tuple[threading.Thread, http.client.HTTPConnection]] = []
        self._lock = threading.Lock()

    def _conn(self, member: int) -> http.client.HTTPConnection:
        conns: dict[int, http.client.HTTPConnection] = self._local.__dict__.setdefault("c", {})
        conn = conns.get(member)
        if conn is None:
            host, port = self._hosts[member]
            if self._scheme == "https":
                conn = http.client.HTTPSConnection(
                    host, port, timeout=self._timeout, context=self._context
                )
            else:
                conn = http.client.HTTPConnection(host, port, timeout=self._timeout)
            conns[member] = conn
            with self._lock:
                ended = [c for thread, c in self._all if not thread.is_alive()]
                self._all = [(th, c) for th, c in self._all if th.is_alive()]
                self._all.append((threading.current_thread(), conn))
            for old in ended:
                old.close()
        return conn

    def post(self, member: int, path: str, body: dict[str, Any], auth: str | None) -> Any:
        """The reply's JSON; raises ``OSError`` / ``http.client.HTTPException`` on the way,
        :class:`PostError` for a status other than 200, ``ValueError`` for a body not JSON."""
        return self.send("POST", member, path, body, auth)

    def send(
        self, method: str, member: int, path: str, body: dict[str, Any] | None, auth: str | None
    ) -> Any:
        """:meth:`post` with another method (``GET /version``: ``body`` None)."""
        data = None if body is None else json.dumps(body).encode()
        headers = {} if body is None else {"Content-Type": "application/json"}
        if auth is not None:
            headers["Authorization"] = auth
        conn = self._conn(member)
        for attempt in (1, 2):
            reused = conn.sock is not None
            try:
                conn.request(method, path, body=data, headers=headers)  # one write
                response = conn.getresponse()
                raw = response.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn.close()
                if attempt == 2 or not reused:  # a kept connection the server had closed
                    raise
            except BaseException:
                conn.close()
                raise
        if response.status != 200:
            raise PostError(response.status, raw[:300].decode(errors="replace"))
        return json.loads(raw)

    def close(self) -> None:
        with self._lock:
            for _, conn in self._all:
                conn.close()
            self._all.clear()
