"""One endpoint's HTTP connection: a POST to the checked address, nothing followed.

urllib3 connects to ``Target.address`` (an IP already checked by ``targets.target_resolve``)
and sends the URL's host name in the Host header, as the TLS server name (SNI) and as the name
the certificate must match, so HTTPS is verified against the name while the socket goes to the
address that was checked. Redirects are not followed and urllib3's own retries are off: a 3xx
is a failed attempt like any other non-2xx, and retrying is the deliverer's job (backoff.py).

Each endpoint's worker owns one ``EndpointTransport`` (one kept-alive connection: the worker
sends one request at a time), so no endpoint waits for another's connection or timeout.

The read timeout bounds each wait for bytes, not the request: a receiver that sends its answer
a byte at a time, each within the timeout, would hold the request (and the offsets of the
batch in flight, and its kept batch's lease) for as long as it liked. So a whole try also has
a deadline, the connect and read timeouts together: past it the socket is shut from a timer
and the try fails.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from dataclasses import dataclass
from typing import Any

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import HTTPError

from .targets import Resolver, Target, TargetRefused, target_resolve

logger = logging.getLogger(__name__)

# What is read of an answer's body, for the error kept with a failed batch.
ANSWER_BYTES_KEPT = 512
USER_AGENT = "leaderboard-webhooks/1"


@dataclass(frozen=True, slots=True)
class Answer:
    status: int  # 0: no answer (refused, unreachable, timed out)
    error: str  # empty on success

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300 and not self.error


class _Watch:
    """The connection of the try in flight, for its deadline to shut."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connection: HTTPConnection | None = None
        self.expired = False

    def sending(self, connection: HTTPConnection) -> None:
        with self._lock:
            if self.expired:
                # The deadline passed before the request went out (a slow DNS answer, a TLS
                # handshake): there was no socket to shut then, so none is opened now.
                raise TimeoutError("the try's deadline passed before its request was sent")
            self._connection = connection

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            sock = self._connection.sock if self._connection is not None else None
        if sock is not None:
            # The blocked read returns at once; an OSError: closed already, the try is ending.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def reset(self) -> None:
        with self._lock:
            self._connection, self.expired = None, False


class EndpointHTTPConnection(HTTPConnection):
    """A connection that tells its watch when it sends a request (the try's deadline shuts
    its socket)."""

    def __init__(self, *args: Any, watch: _Watch, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._watch = watch

    def request(self, *args: Any, **kwargs: Any) -> None:
        self._watch.sending(self)
        super().request(*args, **kwargs)


class EndpointHTTPSConnection(EndpointHTTPConnection, HTTPSConnection):
    pass


class EndpointTransport:
    def __init__(
        self,
        *,
        connect_timeout: float,
        read_timeout: float,
        allow_private: bool,
        resolver: Resolver,
    ) -> None:
        self._timeout = urllib3.Timeout(connect=connect_timeout, read=read_timeout)
        self.deadline_seconds = connect_timeout + read_timeout
        self._watch = _Watch()
        self._allow_private = allow_private
        self._resolver = resolver
        self._pool: urllib3.HTTPConnectionPool | None = None
        self._pool_key: tuple[str, str, int, str] | None = None

    def _pool_for(self, target: Target) -> urllib3.HTTPConnectionPool:
        key = (target.scheme, target.address, target.port, target.host)
        if self._pool is not None and self._pool_key == key:
            return self._pool
        self.close()
        pool: urllib3.HTTPConnectionPool
        if target.scheme == "https":
            pool = urllib3.HTTPSConnectionPool(
                target.address,
                target.port,
                timeout=self._timeout,
                maxsize=1,
                retries=False,
                cert_reqs="CERT_REQUIRED",
                server_hostname=target.host,
                assert_hostname=target.host,
                watch=self._watch,
            )
            pool.ConnectionCls = EndpointHTTPSConnection
        else:
            pool = urllib3.HTTPConnectionPool(
                target.address,
                target.port,
                timeout=self._timeout,
                maxsize=1,
                retries=False,
                watch=self._watch,
            )
            pool.ConnectionCls = EndpointHTTPConnection
        self._pool, self._pool_key = pool, key
        return pool

    def post(self, *, url: str, body: bytes, headers: dict[str, str]) -> Answer:
        """One try: its answer, or a failure saying why. Never raises: whatever goes wrong
        with one endpoint's request is that endpoint's failed try (its backoff, its kept
        batch), not the end of its worker, whose batch in flight would hold every endpoint's
        offsets."""
        self._watch.reset()
        deadline = threading.Timer(self.deadline_seconds, self._watch.expire)
        deadline.daemon = True
        deadline.start()
        try:
            answer = self._post(url=url, body=body, headers=headers)
        except Exception as exc:
            self.close()
            logger.exception("webhook request to %s failed unexpectedly", url)
            answer = Answer(status=0, error=f"{type(exc).__name__}: {exc}"[:500])
        finally:
            deadline.cancel()
        if self._watch.expired:
            self.close()  # its socket is shut: never handed to the next try
        if "\x00" in answer.error:
            # A receiver's answer may hold NUL bytes (a gzip or UTF-16 error page): PostgreSQL
            # text cannot store them, and keeping the batch with its error failed, its worker
            # gone with the batch's offsets held.
            answer = Answer(status=answer.status, error=answer.error.replace("\x00", "\\x00"))
        if self._watch.expired and not answer.ok:
            return Answer(
                status=0,
                error=f"no complete answer within {self.deadline_seconds:g} s (the connect and "
                "read timeouts together)",
            )
        return answer

    def _post(self, *, url: str, body: bytes, headers: dict[str, str]) -> Answer:
        try:
            target = target_resolve(url, allow_private=self._allow_private, resolver=self._resolver)
        except TargetRefused as exc:
            return Answer(status=0, error=f"refused: {exc}")
        pool = self._pool_for(target)
        try:
            response = pool.urlopen(
                "POST",
                target.path,
                body=body,
                headers={
                    **headers,
                    "Host": target.host_header,
                    "Content-Type": "application/json",
                    "User-Agent": USER_AGENT,
                },
                redirect=False,
                retries=False,
                preload_content=False,
                assert_same_host=False,
            )
        except HTTPError as exc:
            self.close()
            return Answer(status=0, error=f"{type(exc).__name__}: {exc}")
        try:
            status = response.status
            snippet = response.read(ANSWER_BYTES_KEPT, decode_content=False)
            if response.length_remaining != 0:
                # More body than we read (or chunked): this connection is not reused, rather
                # than read an answer of any size to the end.
                response.release_conn()
                self.close()
        except HTTPError as exc:
            self.close()
            return Answer(status=0, error=f"{type(exc).__name__}: {exc}")
        finally:
            response.release_conn()
        if 200 <= status < 300:
            return Answer(status=status, error="")
        if 300 <= status < 400:
            location = response.headers.get("Location", "")
            return Answer(
                status=status, error=f"HTTP {status}: redirect to {location!r} not followed"
            )
        detail = snippet.decode("utf-8", "replace").strip()
        return Answer(status=status, error=f"HTTP {status}: {detail}"[:500])

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        self._pool, self._pool_key = None, None
