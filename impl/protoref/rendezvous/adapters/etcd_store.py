"""The etcd v3 store: several hosts share a rendezvous through an etcd cluster.

Client: our own, over etcd's grpc-gateway JSON API (:mod:`.etcd_wire`: ``http.client`` for
requests, ``requests`` for the watch stream); the API path is found per member from its
``/version`` (``/v3`` on etcd 3.4+), as OpenStack's ``etcd3gw`` did, which the store ran on
before (it pulled OpenStack's libraries into the install). Why not gRPC: docs/rendezvous.md.

- **Token** = the key's ``mod_revision``. Revisions are global and only grow, so a key deleted
  and re-created never repeats a token (``version`` restarts at 1 and would let a stale writer
  win: an ABA). ``None`` = the key is absent (``create_revision == 0``).
- **compare_set** is one etcd transaction: compare (``MOD == token`` or ``CREATE == 0``), put on
  success, range on failure, so a lost CAS returns the winner's value in the same round trip,
  like torch's ``Store.compare_set`` (the spec's ``SyncWriteWon`` / ``SyncWriteLost``).
- **wait_for_change** waits on the key's shared watch (:mod:`.etcd_watch`): one stream per key
  per store, opened after a read from the revision after it, so an event wakes every waiting
  thread at once; nothing is polled. (A watch from an older revision would also be correct, but
  etcd serves such "unsynced" watchers from a 100 ms loop.)
- Errors: anything between us and etcd (refused, timed out, HTTP error, a reply that is not
  etcd's) is a :class:`RendezvousConnectionError` naming the endpoint; nothing is written then
  (a CAS is not retried: a timed-out transaction may have been applied, and the next read shows
  whether it was; the one exception is a request etcd rejected for an expired auth token, which
  it rejected before applying). Values are the codec's JSON bytes, stored as they are.
"""

from __future__ import annotations

import contextlib
import http.client
import ssl
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Final

import requests
from pydantic import ValidationError

from protoref.rendezvous.adapters.etcd_watch import KeyWatch
from protoref.rendezvous.adapters.etcd_wire import (
    BoundedAdapter,
    Poster,
    PostError,
    Range,
    Token,
    Txn,
    api_path,
    b64,
    fails_over,
    members,
    versioned,
)
from protoref.rendezvous.adapters.store import Versioned
from protoref.rendezvous.core.errors import RendezvousConnectionError, RendezvousStateError

__all__ = ["DEFAULT_PREFIX", "EtcdStore"]

DEFAULT_PREFIX: Final = "/protoref/"
_INVALID_TOKEN: Final = "invalid auth token"  # etcd's ErrInvalidAuthToken: the token expired


_ROUND_PAUSE: Final = 0.05  # between two rounds of the member list (an election takes ~1 s)


def _shut(watches: dict[str, KeyWatch], poster: Poster) -> None:
    """End a store's watch streams and connections (``close``, or the store's finalizer)."""
    ending = list(watches.values())
    watches.clear()
    for watch in ending:
        watch.stop()
    poster.close()


class EtcdStore:
    """:class:`~protoref.rendezvous.adapters.store.RendezvousStore` over etcd v3.

    ``endpoint``: ``http://host:port`` or ``https://host:port`` (a bare ``host:port`` means
    http). Every key is stored under ``prefix`` (one prefix per run or per job keeps runs apart
    and lets an operator list or delete one run's keys). ``request_timeout`` bounds each request.
    TLS: ``ca_cert`` (a CA bundle to verify the server), ``client_cert`` + ``client_key``
    (mutual TLS); they go to the HTTP session unchanged. Authentication: ``username`` +
    ``password`` (etcd's ``auth enable``): the store asks etcd for a token on first use and
    again when etcd says the token expired (the rejected request is then sent once more: etcd
    rejected it before applying it).
    """

    def __init__(
        self,
        endpoint: str = "http://127.0.0.1:2379",
        *,
        prefix: str = DEFAULT_PREFIX,
        request_timeout: float = 5.0,
        ca_cert: str | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
        username: str | None = None,
        password: str | None = None,
    ) -> None:
        if request_timeout <= 0:
            raise ValueError(f"request_timeout must be > 0, got {request_timeout}")
        if (client_cert is None) != (client_key is None):
            raise ValueError("client_cert and client_key go together (mutual TLS)")
        if (username is None) != (password is None):
            raise ValueError("username and password go together (etcd authentication)")
        scheme, listed = members(endpoint)
        self.endpoint = f"{scheme}://" + ",".join(f"{h}:{p}" for h, p in listed)
        self.prefix = prefix
        self.request_timeout = request_timeout
        self._members, self._scheme = listed, scheme
        self._tls = (ca_cert, client_cert, client_key)
        self._credentials = None if username is None else (username, password or "")
        self._auth_lock = threading.Lock()
        self._auth_token: str | None = None
        #: each member's API path (``/v3``), asked of its ``/version`` on first use
        self._api_paths: list[str | None] = [None] * len(listed)
        self._current = 0  # the member requests go to first (the last one that answered)
        self._poster = Poster(scheme, listed, request_timeout, self._ssl_context())
        self._watches: dict[str, KeyWatch] = {}
        self._watches_lock = threading.Lock()
        self._closed = False
        self._finalizer = weakref.finalize(self, _shut, self._watches, self._poster)
        self._count_lock = threading.Lock()
        self.cas_won = 0
        self.cas_lost = 0
        self.cas_skipped = 0  # lost ones answered by a read (the watch knew the token stale)

    # ------------------------------------------------------------------ plumbing

    def _new_session(self, pool: int, read_timeout: float | None = None) -> requests.Session:
        session = requests.Session()
        read = self.request_timeout if read_timeout is None else read_timeout
        ca_cert, client_cert, client_key = self._tls
        adapter = BoundedAdapter((self.request_timeout, read), pool, ca_cert)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        if client_cert is not None and client_key is not None:
            session.cert = (client_cert, client_key)
        if self._auth_token is not None:
            session.headers["Authorization"] = self._auth_token
        return session

    def _ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of the hot path's connections (the CA applied as given)."""
        if self._scheme != "https":
            return None
        ca_cert, client_cert, client_key = self._tls
        context = ssl.create_default_context(cafile=ca_cert)
        if client_cert is not None and client_key is not None:
            context.load_cert_chain(client_cert, client_key)
        return context

    def _api_path(self, member: int) -> str:
        """The member's API path, from its ``/version`` once (``/v3`` on etcd 3.4+); the
        version endpoint needs no credentials."""
        found = self._api_paths[member]
        if found is None:
            found = api_path(self._poster.send("GET", member, "/version", None, None))
            self._api_paths[member] = found
        return found

    def _url(self, member: int, path: str) -> str:
        """The full URL of ``path`` below the member's API path (the watch stream's)."""
        host, port = self._members[member]
        return f"{self._scheme}://{host}:{port}{self._api_path(member)}{path}"

    @contextlib.contextmanager
    def _talking(self, what: str, key: str) -> Iterator[None]:
        """Map every failure on the way to etcd to one typed error naming the endpoint."""
        try:
            yield
        except (requests.RequestException, OSError, http.client.HTTPException, PostError) as err:
            raise RendezvousConnectionError(
                f"etcd at {self.endpoint}: {what} {key!r} failed: {type(err).__name__}: {err}"
            ) from err
        except ValidationError as err:  # JSON, but not the etcd reply we asked for
            first = err.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "<reply>"
            raise RendezvousConnectionError(
                f"etcd at {self.endpoint}: {what} {key!r}: "
                f"unexpected reply: {where}: {first['msg']}"
            ) from err
        except ValueError as err:  # not JSON at all
            raise RendezvousConnectionError(
                f"etcd at {self.endpoint}: {what} {key!r}: unexpected reply: {err}"
            ) from err

    def _authenticate(self, stale: str | None) -> None:
        """Get a token (``/v3/auth/authenticate``) unless another thread replaced ``stale``."""
        assert self._credentials is not None
        name, password = self._credentials
        with self._auth_lock:
            if self._auth_token is not None and self._auth_token != stale:
                return
            self._auth_token = None  # asked without the stale token
            member = self._current
            with self._talking("authenticate as", name):
                url = self._api_path(member) + "/auth/authenticate"
                body = {"name": name, "password": password}
                reply: Any = self._poster.send("POST", member, url, body, None)
                self._auth_token = Token.model_validate(reply).token

    def _request(self, what: str, key: str, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` to ``/v3/<path>``; authenticate first or again if etcd asks."""
        for attempt in (1, 2):
            token = self._auth_token
            if self._credentials is not None and token is None:
                self._authenticate(None)
                token = self._auth_token
            try:
                return self._failover(what, key, lambda m: self._post(m, path, body))
            except RendezvousConnectionError as err:
                expired = _INVALID_TOKEN in str(err) and self._credentials is not None
                if not expired or attempt == 2:
                    raise
                self._authenticate(token)
        raise AssertionError("unreachable")

    def _post(self, member: int, path: str, body: dict[str, Any]) -> Any:
        """The hot path: one POST to a member, over this thread's kept connection."""
        url = self._api_path(member) + path  # discovered once per member
        return self._poster.send("POST", member, url, body, self._auth_token)

    def _failover(self, what: str, key: str, call: Callable[[int], Any]) -> Any:
        """``call`` on the current member; on a failure of the way there, on the next ones."""
        start, tried = time.monotonic(), 0
        while True:
            member = self._current
            try:
                with self._talking(what, key):
                    return call(member)
            except RendezvousConnectionError as err:
                tried += 1
                if not fails_over(err.__cause__):
                    raise
                n = len(self._members)
                if tried >= n and time.monotonic() - start >= self.request_timeout:
                    raise
                if self._current == member:
                    self._current = (member + 1) % n
                if tried % n == 0:
                    time.sleep(_ROUND_PAUSE)

    def _range(self, key: str) -> Range:
        full = self.prefix + key
        reply = self._request("read", full, "/kv/range", {"key": b64(full.encode())})
        with self._talking("read", full):
            return Range.model_validate(reply)

    # ------------------------------------------------------------------ the store protocol

    def get(self, key: str) -> Versioned | None:
        found = self._range(key).kvs
        return versioned(found[0]) if found else None

    def compare_set(self, key: str, token: int | None, value: bytes) -> tuple[bool, Versioned]:
        full = self.prefix + key
        with self._watches_lock:
            watch = self._watches.get(full)
        if watch is not None and watch.newer_than(token):
            # Known to fail: answer it with a read of the value now stored (what the txn's
            # failure branch would return) instead of a transaction, which etcd runs through
            # raft and its WAL even when the compare fails. The read is linearizable.
            current = self.get(key)
            if current is not None and current.token != token:
                with self._count_lock:
                    self.cas_lost += 1
                    self.cas_skipped += 1
                return False, current
        k = b64(full.encode())
        compare = (
            {"key": k, "target": "CREATE", "result": "EQUAL", "create_revision": 0}
            if token is None
            else {"key": k, "target": "MOD", "result": "EQUAL", "mod_revision": token}
        )
        txn = {
            "compare": [compare],
            "success": [{"request_put": {"key": k, "value": b64(value)}}],
            "failure": [{"request_range": {"key": k}}],
        }
        raw = self._request("compare-and-set", full, "/kv/txn", txn)
        with self._talking("compare-and-set", full):
            reply = Txn.model_validate(raw)
        if reply.succeeded:  # the txn's revision is the key's new mod_revision
            with self._count_lock:
                self.cas_won += 1
            return True, Versioned(value, reply.header.revision)
        with self._count_lock:
            self.cas_lost += 1
        ranged = reply.responses[0].response_range if reply.responses else None
        if ranged is None or not ranged.kvs:
            # Only reachable when someone deleted the key under our token: there is no winner
            # to load, and writing now would resurrect a state nobody holds.
            raise RendezvousStateError(full, f"deleted from etcd (token {token} is stale)")
        return False, versioned(ranged.kvs[0])

    def wait_for_change(self, key: str, token: int | None, timeout: float) -> bool:
        end = time.monotonic() + timeout
        died = ""
        while True:
            watch = self._watch(key)
            changed = watch.wait(token, end)
            if changed is not None:
                return changed
            if died:  # two streams in a row ended before a change: etcd refuses this watch
                raise RendezvousConnectionError(
                    f"etcd at {self.endpoint}: watch {self.prefix + key!r} failed: {watch.ended}"
                )
            died = watch.ended

    def _watch(self, key: str) -> KeyWatch:
        """The key's shared watch, opened after a read (from the revision after it)."""
        full = self.prefix + key
        with self._watches_lock:
            watch = self._watches.get(full)
            if watch is None or not watch.alive:
                if self._closed:
                    raise RendezvousConnectionError(f"etcd store for {self.endpoint} is closed")
                now = self._range(key)
                token = now.kvs[0].mod_revision if now.kvs else None
                watch = KeyWatch(
                    full, token, now.header.revision, lambda start: self._stream(full, start)
                )
                self._watches[full] = watch
            return watch

    def _stream(self, full: str, start: int) -> tuple[requests.Session, requests.Response]:
        body: dict[str, Any] = {
            "create_request": {"key": b64(full.encode()), "start_revision": start}
        }
        session = self._new_session(pool=1)

        def post(member: int) -> requests.Response:
            # No read timeout: the stream is silent until the key changes; stop() ends it.
            reply = session.post(
                self._url(member, "/watch"),
                json=body,
                stream=True,
                timeout=(self.request_timeout, None),
            )
            reply.raise_for_status()
            return reply

        try:
            reply = self._failover("watch", full, post)
        except BaseException:
            session.close()
            raise
        return session, reply

    def describe(self) -> str:
        return "etcd"

    def close(self) -> None:
        """End the watches and close the HTTP connections (the store is unusable afterwards).

        A store dropped without ``close`` is closed when it is garbage-collected."""
        with self._watches_lock:
            self._closed = True
        self._finalizer()

    def __enter__(self) -> EtcdStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
