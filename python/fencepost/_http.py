"""A small blocking HTTP/1.1 client for one fencepost port (internal).

One base URL, a pool of kept-alive connections (so that a Client can be
shared by threads), every socket operation bounded by the timeout.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional, Union

from fencepost.errors import BadResponse, Unreachable

_Connection = Union[http.client.HTTPConnection, http.client.HTTPSConnection]


def encode_key(key: str) -> str:
    """A key or lease name as it goes into a request path: unreserved
    characters and ``/`` as they are, every other byte of its UTF-8 as an
    upper-case %XX escape (the server decodes it once)."""
    return urllib.parse.quote(key.encode("utf-8"), safe="/")


@dataclass(frozen=True)
class BaseUrl:
    """``http://HOST[:PORT]`` or ``https://HOST[:PORT]``, optionally with a
    trailing ``/``."""
    tls: bool
    host: str
    port: int

    @staticmethod
    def parse(text: str) -> "BaseUrl":
        parts = urllib.parse.urlsplit(text)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"{text!r}: the URL must be http:// or https://")
        if parts.username is not None or parts.password is not None:
            raise ValueError(f"{text!r}: user info is not allowed")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError(f"{text!r}: a base URL has no path or query")
        if not parts.hostname:
            raise ValueError(f"{text!r}: the URL has no host")
        tls = parts.scheme == "https"
        try:
            port = parts.port
        except ValueError as e:
            raise ValueError(f"{text!r}: bad port") from e
        if port == 0:
            raise ValueError(f"{text!r}: bad port")
        return BaseUrl(tls, parts.hostname, port or (443 if tls else 80))

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"


@dataclass
class Response:
    status: int
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    body: bytes = b""

    def header(self, name: str) -> Optional[str]:
        return self.headers.get(name.lower())


def collect_headers(message: http.client.HTTPMessage) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in message.items():
        lower = name.lower()
        out[lower] = f"{out[lower]}, {value}" if lower in out else value
    return out


class Port:
    """The requests to one port. Thread safety: any thread may call any
    method; each request uses a connection no other thread uses."""

    def __init__(self, url: str, *, auth_token: Optional[str],
                 tls_ca: Optional[str], timeout: float) -> None:
        self.url = BaseUrl.parse(url)
        if timeout <= 0:
            raise ValueError("the timeout must be positive")
        self.timeout = timeout
        self._auth = auth_token
        self._context: Optional[ssl.SSLContext] = None
        if self.url.tls:
            self._context = ssl.create_default_context(cafile=tls_ca)
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def connect(self, timeout: Optional[float] = None) -> _Connection:
        """A new connection (not from the pool), not yet opened."""
        limit = self.timeout if timeout is None else timeout
        if self.url.tls:
            return http.client.HTTPSConnection(
                self.url.host, self.url.port, timeout=limit,
                context=self._context)
        return http.client.HTTPConnection(self.url.host, self.url.port,
                                          timeout=limit)

    def headers(self, extra: Optional[Mapping[str, str]] = None
                ) -> dict[str, str]:
        out = {"User-Agent": "fencepost-python"}
        if self._auth is not None:
            out["Authorization"] = f"Bearer {self._auth}"
        out.update(extra or {})
        return out

    def _take(self) -> tuple[_Connection, bool]:
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if _still_open(conn):
                    return conn, True
                conn.close()
        return self.connect(), False

    def _give_back(self, conn: _Connection) -> None:
        with self._lock:
            if len(self._idle) < 8:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def request(self, method: str, target: str,
                headers: Optional[Mapping[str, str]] = None,
                body: Optional[bytes] = None,
                timeout: Optional[float] = None) -> Response:
        """Sends one request and reads its whole answer. A request on a
        kept-alive connection that turns out closed is sent again once on a
        new one, but only when it cannot have been handled: its sending
        failed and no answer came, or (GET, HEAD) the server closed before
        answering a byte. Raises Unreachable when no answer arrives."""
        fields = self.headers(headers)
        if body is not None:
            fields.setdefault("Content-Length", str(len(body)))
        for attempt in range(2):
            conn, reused = self._take() if timeout is None else (
                self.connect(timeout), False)
            try:
                response = self._exchange(conn, method, target, fields, body)
            except _Retryable as e:
                conn.close()
                if reused and attempt == 0:
                    continue
                raise Unreachable(f"{method} {self.url}{target}: {e.cause}"
                                  ) from e.cause
            except (OSError, http.client.RemoteDisconnected) as e:
                conn.close()
                raise unreachable(method, f"{self.url}{target}", e) from e
            except http.client.HTTPException as e:
                conn.close()
                raise BadResponse(f"{method} {self.url}{target}: unreadable "
                                  f"answer: {e!r}") from e
            except BaseException:
                conn.close()
                raise
            if response.will_close or timeout is not None:
                conn.close()
            else:
                self._give_back(conn)
            return Response(response.status,
                            collect_headers(response.msg), response.data)
        raise AssertionError("unreachable")

    @staticmethod
    def _exchange(conn: _Connection, method: str, target: str,
                  fields: dict[str, str], body: Optional[bytes]
                  ) -> "_Read":
        try:
            conn.request(method, target, body=body, headers=fields)
        except (BrokenPipeError, ConnectionResetError) as e:
            if conn.sock is None:  # reset while connecting: nothing sent
                raise _Retryable(e)
            # The server may have answered (413, say) before reading the
            # whole request: that answer is the outcome.
            try:
                return _read(conn)
            except (OSError, http.client.HTTPException):
                raise _Retryable(e)
        try:
            return _read(conn)
        except http.client.RemoteDisconnected as e:
            if method in ("GET", "HEAD"):
                raise _Retryable(e)
            raise


class _Retryable(Exception):
    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


@dataclass
class _Read:
    status: int
    msg: http.client.HTTPMessage
    data: bytes
    will_close: bool


def _read(conn: _Connection) -> _Read:
    response = conn.getresponse()
    try:
        data = response.read()
    except http.client.IncompleteRead as e:
        raise BadResponse(f"the answer's body was cut short: {e}") from e
    return _Read(response.status, response.msg, data, response.will_close)


def _still_open(conn: _Connection) -> bool:
    """False when the server closed the idle connection (it is readable:
    EOF, or bytes nobody asked for)."""
    sock = conn.sock
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


def unreachable(method: str, where: str, error: BaseException) -> Unreachable:
    if isinstance(error, socket.timeout):
        return Unreachable(f"{method} {where}: timed out")
    if isinstance(error, ssl.SSLError):
        return Unreachable(f"{method} {where}: TLS failed: {error}")
    return Unreachable(f"{method} {where}: {error}")
