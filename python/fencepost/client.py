"""The client of both fencepost ports: values (data port), fences, leases
and watches (admin port)."""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Optional, Union

from fencepost._http import (Port, Response, collect_headers, encode_key,
                             unreachable)
from fencepost.errors import BadResponse, Problem, problem_from_response
from fencepost.watch import Watch

MAX_TOKEN = 2**64 - 1


def check_token(token: int) -> int:
    """``token`` when it is an int from 0 to 2**64 - 1; else TypeError or
    ValueError (nothing is sent)."""
    if not isinstance(token, int) or isinstance(token, bool):
        raise TypeError(f"a fencing token is an int, not {type(token).__name__}")
    if not 0 <= token <= MAX_TOKEN:
        raise ValueError(f"a fencing token is 0 to 2**64 - 1, not {token}")
    return token


def _token_field(response: Response) -> Optional[int]:
    value = response.header("fencing-token")
    if value is None or not value.strip().isdigit():
        return None
    return int(value.strip())


def _json(response: Response) -> dict[str, Any]:
    try:
        document = json.loads(response.body)
    except ValueError as e:
        raise BadResponse(f"HTTP {response.status}: the body is not JSON"
                          ) from e
    if not isinstance(document, dict):
        raise BadResponse(f"HTTP {response.status}: the body is not an object")
    return document


def _int(document: Mapping[str, Any], name: str) -> int:
    value = document.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadResponse(f"{name!r} is not an integer: {value!r}")
    return value


def _str(document: Mapping[str, Any], name: str) -> str:
    value = document.get(name)
    if not isinstance(value, str):
        raise BadResponse(f"{name!r} is not a string: {value!r}")
    return value


@dataclass(frozen=True)
class Value:
    """A stored value as ``get`` answers it."""
    key: str
    value: bytes
    etag: Optional[str]          # quotes and all: give it to if_match=
    token: Optional[int]         # the token of the write that stored it
    content_type: Optional[str]

    def text(self, encoding: str = "utf-8") -> str:
        return self.value.decode(encoding)


@dataclass(frozen=True)
class WriteResult:
    """An accepted ``put`` or ``delete``."""
    key: str
    status: int                  # 201 created, 200 replaced, 204 deleted
    etag: Optional[str]          # the new value's tag (put)
    token: Optional[int]         # the fence's token after the write

    @property
    def created(self) -> bool:
        return self.status == 201


@dataclass(frozen=True)
class Fence:
    """A fence document: the highest token accepted for ``name``."""
    name: str
    token: int
    updated_at: str

    @staticmethod
    def from_document(document: Mapping[str, Any]) -> "Fence":
        return Fence(_str(document, "fence"), _int(document, "token"),
                     _str(document, "updated_at"))


@dataclass(frozen=True)
class LeaseInfo:
    """A lease document. ``holder`` is None when the lease is free."""
    name: str
    holder: Optional[str]
    token: int
    ttl_ms: int
    expires_in_ms: int
    acquired_at: str
    renewed_at: str
    transitions: int

    @staticmethod
    def from_document(document: Mapping[str, Any]) -> "LeaseInfo":
        holder = document.get("holder")
        if holder is not None and not isinstance(holder, str):
            raise BadResponse(f"'holder' is not a string: {holder!r}")
        return LeaseInfo(
            _str(document, "name"), holder, _int(document, "token"),
            _int(document, "ttl_ms"), _int(document, "expires_in_ms"),
            _str(document, "acquired_at"), _str(document, "renewed_at"),
            _int(document, "transitions"))


@dataclass(frozen=True)
class PutOp:
    """A put of a batch, with its own precondition if any."""
    key: str
    value: Union[bytes, str]
    if_match: Optional[str] = None
    if_none_match: bool = False


@dataclass(frozen=True)
class DeleteOp:
    """A delete of a batch, with its own precondition if any."""
    key: str
    if_match: Optional[str] = None


@dataclass(frozen=True)
class OpResult:
    key: str
    status: int                  # 201, 200 or 204
    etag: Optional[str]


@dataclass(frozen=True)
class BatchResult:
    token: Optional[int]         # the fences' token after the batch
    results: list[OpResult]


@dataclass(frozen=True)
class EffectResult:
    """The target's answer to a fenced side effect (``Client.effect``),
    whatever its status: relayed by fencepost as the target gave it, or
    its recorded answer again when ``replayed`` (nothing was sent then)."""
    status: int
    content_type: Optional[str]
    body: bytes                  # cut at the server's --max-body if replayed
    replayed: bool               # Effect-Replayed: true

    @property
    def ok(self) -> bool:
        """The target answered 2xx."""
        return 200 <= self.status < 300

    def text(self, encoding: str = "utf-8") -> str:
        return self.body.decode(encoding)

    def json(self) -> Any:
        """The body parsed as JSON (ValueError when it is not)."""
        return json.loads(self.body)


EFFECT_METHODS = ("POST", "PUT", "PATCH", "DELETE")
_TARGET_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")
# What a path or query may hold as it is (RFC 3986 pchar, '/', '?' and
# '%', so text already encoded stays as it is).
_PATH_SAFE = "/:@!$&'()*+,;=%"
_QUERY_SAFE = _PATH_SAFE + "?"

EffectQuery = Union[str, Mapping[str, str], Sequence[tuple[str, str]]]


def effect_target(target: str, path: str = "",
                  query: Optional[EffectQuery] = None) -> str:
    """The request target of an effect: ``/v1/effects/NAME[/PATH][?QUERY]``.
    ``path`` and a str ``query`` are taken as URL text (escapes kept, other
    bytes that cannot go in a URL percent-encoded); a mapping or sequence
    of pairs is form-encoded. ValueError for a NAME that is not 1 to 64 of
    ``A-Z a-z 0-9 . _ -``."""
    if not isinstance(target, str) or not _TARGET_NAME.fullmatch(target):
        raise ValueError(f"an effect target's name is 1 to 64 of "
                         f"A-Z a-z 0-9 . _ -, not {target!r}")
    out = "/v1/effects/" + target
    if path:
        out += urllib.parse.quote("/" + path.lstrip("/"), safe=_PATH_SAFE)
    if isinstance(query, str):
        if query.lstrip("?"):
            out += "?" + urllib.parse.quote(query.lstrip("?"),
                                            safe=_QUERY_SAFE)
    elif query:
        out += "?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
    return out


def _header_text(name: str, value: str) -> str:
    """``value`` as http.client sends a str field (Latin-1), such that the
    bytes on the wire are its UTF-8. ValueError for CR, LF or NUL."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty str")
    if any(c in value for c in "\r\n\0"):
        raise ValueError(f"{name} holds a line break or NUL")
    return value.encode("utf-8").decode("latin-1")


def _bytes(value: Union[bytes, str]) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


PortName = Literal["data", "admin"]


class Client:
    """Both ports of one fencepost server.

    ``auth_token`` is sent as ``Authorization: Bearer`` (servers with
    --auth-token-file); ``tls_ca`` is a PEM file of CAs to trust for
    ``https://`` URLs (default: the system's); ``timeout`` (seconds) bounds
    every connect, send and read of a request.

    Every method raises :class:`~fencepost.Unreachable` when no answer
    arrives, the :class:`~fencepost.Problem` subclass named by the answer's
    problem type when it is an error, and
    :class:`~fencepost.BadResponse` when the answer is unreadable. Writes
    are never resent after their answer was lost.

    Thread safety: a Client may be shared by threads (each request takes a
    connection of its own from a small pool).
    """

    def __init__(self, data_url: str = "http://127.0.0.1:7400",
                 admin_url: str = "http://127.0.0.1:7401", *,
                 auth_token: Optional[str] = None,
                 tls_ca: Optional[str] = None,
                 timeout: float = 10.0) -> None:
        self.timeout = timeout
        self._data = Port(data_url, auth_token=auth_token, tls_ca=tls_ca,
                          timeout=timeout)
        self._admin = Port(admin_url, auth_token=auth_token, tls_ca=tls_ca,
                           timeout=timeout)

    @classmethod
    def from_env(cls, timeout: float = 10.0) -> "Client":
        """The client the ``fencepost`` commands would be: FENCEPOST_DATA,
        FENCEPOST_ADMIN (defaults 127.0.0.1:7400 and :7401),
        FENCEPOST_AUTH_TOKEN_FILE and FENCEPOST_TLS_CA."""
        token: Optional[str] = None
        token_file = os.environ.get("FENCEPOST_AUTH_TOKEN_FILE")
        if token_file:
            with open(token_file, encoding="utf-8") as f:
                token = f.read().strip()
        return cls(os.environ.get("FENCEPOST_DATA", "http://127.0.0.1:7400"),
                   os.environ.get("FENCEPOST_ADMIN", "http://127.0.0.1:7401"),
                   auth_token=token,
                   tls_ca=os.environ.get("FENCEPOST_TLS_CA") or None,
                   timeout=timeout)

    @property
    def data_url(self) -> str:
        return str(self._data.url)

    @property
    def admin_url(self) -> str:
        return str(self._admin.url)

    def close(self) -> None:
        """Closes the idle kept-alive connections."""
        self._data.close()
        self._admin.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- any request ---------------------------------------------------

    def send(self, port: PortName, method: str, target: str,
             headers: Optional[Mapping[str, str]] = None,
             body: Optional[bytes] = None,
             timeout: Optional[float] = None) -> Response:
        """Any request, answered as it is (no exception for an error
        status). ``target`` is in origin form, already encoded; ``timeout``
        replaces the client's for this request (on a connection of its
        own)."""
        chosen = self._data if port == "data" else self._admin
        return chosen.request(method, target, headers, body, timeout)

    def _call(self, port: PortName, method: str, target: str,
              headers: Optional[Mapping[str, str]] = None,
              body: Optional[bytes] = None,
              timeout: Optional[float] = None) -> Response:
        response = self.send(port, method, target, headers, body, timeout)
        if response.status >= 400:
            raise problem_from_response(response.status, response.body,
                                        response.headers)
        return response

    # -- data port -----------------------------------------------------

    def put(self, key: str, value: Union[bytes, str], *, token: int,
            if_match: Optional[str] = None, if_none_match: bool = False,
            content_type: Optional[str] = None) -> WriteResult:
        """Stores ``value`` (str is sent as UTF-8) under ``key`` with the
        fencing ``token``. ``if_match``: an ETag as ``get`` answered it, or
        ``"*"`` (a value exists); ``if_none_match``: only if no value exists.
        Raises StaleToken (token below the fence; checked first),
        PreconditionFailed, BadKey, BodyTooLarge, ..."""
        fields = {"Fencing-Token": str(check_token(token))}
        if if_match is not None:
            fields["If-Match"] = if_match
        if if_none_match:
            fields["If-None-Match"] = "*"
        if content_type is not None:
            fields["Content-Type"] = content_type
        response = self._call("data", "PUT", "/" + encode_key(key), fields,
                              _bytes(value))
        return WriteResult(key, response.status, response.header("etag"),
                           _token_field(response))

    def delete(self, key: str, *, token: int,
               if_match: Optional[str] = None) -> WriteResult:
        """Removes the value (a missing value is not an error); the fence
        is set to ``token`` and stays."""
        fields = {"Fencing-Token": str(check_token(token))}
        if if_match is not None:
            fields["If-Match"] = if_match
        response = self._call("data", "DELETE", "/" + encode_key(key), fields)
        return WriteResult(key, response.status, response.header("etag"),
                           _token_field(response))

    def get(self, key: str, *, token: Optional[int] = None) -> Value:
        """The value of ``key``; raises NotFound when there is none. With
        ``token``, a fenced read: raises StaleToken when ``token`` is below
        the key's fence (a leader that was replaced learns it on a read
        too); the fence does not move."""
        value = self.get_if_changed(key, None, token=token)
        assert value is not None
        return value

    def get_if_changed(self, key: str, etag: Optional[str], *,
                       token: Optional[int] = None) -> Optional[Value]:
        """``get`` with If-None-Match: None when the value's tag is still
        ``etag`` (304)."""
        fields = {"If-None-Match": etag} if etag is not None else {}
        if token is not None:
            fields["Fencing-Token"] = str(check_token(token))
        response = self._call("data", "GET", "/" + encode_key(key), fields)
        if response.status == 304:
            return None
        return Value(key, response.body, response.header("etag"),
                     _token_field(response), response.header("content-type"))

    def batch(self, ops: Sequence[Union[PutOp, DeleteOp]], *,
              token: int) -> BatchResult:
        """Applies every op in one transaction, or none (lmdb and etcd
        backends). A stale op raises StaleToken naming its key; a failing
        precondition PreconditionFailed; nothing was applied then."""
        document: list[dict[str, Any]] = []
        for op in ops:
            entry: dict[str, Any] = {"key": op.key}
            if isinstance(op, PutOp):
                entry["op"] = "put"
                entry["value"] = base64.b64encode(_bytes(op.value)).decode()
                if op.if_none_match:
                    entry["if_none_match"] = "*"
            else:
                entry["op"] = "delete"
            if op.if_match is not None:
                entry["if_match"] = op.if_match
            document.append(entry)
        response = self._call(
            "data", "POST", "/",
            {"Fencing-Token": str(check_token(token)),
             "Content-Type": "application/json"},
            json.dumps({"ops": document}).encode())
        results = _json(response).get("results")
        if not isinstance(results, list):
            raise BadResponse("the batch's answer has no results")
        out = []
        for result in results:
            if not isinstance(result, dict):
                raise BadResponse("a batch result is not an object")
            etag = result.get("etag")
            out.append(OpResult(_str(result, "key"), _int(result, "status"),
                                etag if isinstance(etag, str) else None))
        return BatchResult(_token_field(response), out)

    def effect(self, target: str, path: str = "",
               body: Union[bytes, str] = b"", *, method: str = "POST",
               token: int, fence_key: str, idempotency_key: str,
               content_type: Optional[str] = None,
               query: Optional[EffectQuery] = None,
               timeout: Optional[float] = None) -> EffectResult:
        """A fenced side effect: fencepost sends ``method`` with ``body``
        (str as UTF-8) to its effect target ``target``'s URL plus ``path``
        and ``query`` (see :func:`effect_target`), at most once per
        ``idempotency_key``, and only while ``token`` is not below the fence
        of ``fence_key`` (e.g. the lease's name).

        The target's answer, any status, is the EffectResult; a repeat of
        an answered call gets its recorded answer with ``replayed`` True
        and nothing is sent. fencepost's own refusals raise: StaleToken
        (nothing sent), IdempotencyKeyReused (the key was used for another
        request), EffectInProgress, EffectOutcomeUnknown (sent earlier, no
        answer known: never sent again by fencepost), UpstreamFailed (502:
        could not be sent; a repeat sends it), UpstreamOutcomeUnknown (504:
        sent, no answer), FenceHeld (503: an earlier call of the fence has
        an unknown outcome and may still land; retry after ``retry_after``),
        NotFound (no such target), MissingToken,
        MissingEffectHeader, InvalidToken, BadKey, BadRequest, BodyTooLarge,
        Unauthorized. ``timeout`` replaces the client's for this call; give
        the server's time to reach the target too. ValueError or TypeError
        (nothing sent) for a bad target name, method, key or token."""
        if method not in EFFECT_METHODS:
            raise ValueError(f"an effect's method is one of "
                             f"{', '.join(EFFECT_METHODS)}, not {method!r}")
        if not isinstance(idempotency_key, str) or \
                not _IDEMPOTENCY_KEY.fullmatch(idempotency_key):
            raise ValueError("an Idempotency-Key is 1 to 255 visible ASCII "
                             f"characters, not {idempotency_key!r}")
        fields = {"Fencing-Token": str(check_token(token)),
                  "Fence-Key": _header_text("fence_key", fence_key),
                  "Idempotency-Key": idempotency_key}
        if content_type is not None:
            fields["Content-Type"] = _header_text("content_type",
                                                  content_type)
        response = self.send("data", method,
                             effect_target(target, path, query), fields,
                             _bytes(body), timeout)
        replayed = response.header("effect-replayed")
        if replayed is None:
            # fencepost's own answer: a problem, or a server that does not
            # serve effects and took the path for a key.
            if response.status >= 400:
                raise problem_from_response(response.status, response.body,
                                            response.headers)
            raise BadResponse(
                f"HTTP {response.status} without Effect-Replayed: the server "
                f"does not serve effect target {target!r} (--effect-target)")
        return EffectResult(response.status, response.header("content-type"),
                            response.body,
                            replayed.strip().lower() == "true")

    # -- admin port: fences --------------------------------------------

    def fence(self, key: str) -> Fence:
        """The fence that guards ``key``; NotFound when there is none."""
        response = self._call("admin", "GET", "/v1/fences/" + encode_key(key))
        return Fence.from_document(_json(response))

    def bump(self, key: str, *, token: int) -> Fence:
        """Advances the fence of ``key`` to ``token`` without writing data;
        StaleToken when it is above."""
        response = self._call("admin", "PUT", "/v1/fences/" + encode_key(key),
                              {"Fencing-Token": str(check_token(token))})
        return Fence.from_document(_json(response))

    def fences(self, prefix: str = "", *, page_size: Optional[int] = None
               ) -> Iterator[Fence]:
        """Every fence whose name starts with ``prefix``, by name, fetched
        a page at a time."""
        for document in self._pages("fences", prefix, page_size):
            yield Fence.from_document(document)

    def wait_fence(self, key: str, above: int, timeout: float = 30.0
                   ) -> Optional[Fence]:
        """Long poll: the fence as soon as its token is above ``above``
        (at once if it already is); None when ``timeout`` seconds (at most
        300) pass first. NotFound never: a fence that does not exist yet
        is waited for."""
        conn = self._admin.connect(timeout + self.timeout)
        try:
            return long_poll(self._admin, conn, key, check_token(above),
                             timeout)
        finally:
            conn.close()

    # -- admin port: leases --------------------------------------------

    def acquire_lease(self, name: str, holder: str, ttl: float, *,
                      timeout: Optional[float] = None) -> LeaseInfo:
        """Acquires (a grant, with a new token) or renews (the holder of
        record: same token) the lease for ``ttl`` seconds (0.1 to 3600).
        LeaseHeld when another holder's lease is live. ``timeout`` replaces
        the client's for this call."""
        body = json.dumps({"holder": holder,
                           "ttl_ms": int(round(ttl * 1000))}).encode()
        response = self._call("admin", "PUT", "/v1/leases/" + encode_key(name),
                              {"Content-Type": "application/json"}, body,
                              timeout)
        return LeaseInfo.from_document(_json(response))

    def release_lease(self, name: str, holder: str, token: int, *,
                      timeout: Optional[float] = None) -> None:
        """Releases the lease at once (its fence stays); LeaseNotHeld when
        ``holder`` does not hold it with ``token``."""
        self._call("admin", "DELETE", "/v1/leases/" + encode_key(name),
                   {"Fencing-Token": str(check_token(token)),
                    "Content-Type": "application/json"},
                   json.dumps({"holder": holder}).encode(), timeout)

    def lease(self, name: str) -> LeaseInfo:
        """The lease document (also of a free lease: holder None);
        NotFound when it was never granted."""
        response = self._call("admin", "GET", "/v1/leases/" + encode_key(name))
        return LeaseInfo.from_document(_json(response))

    def leases(self, prefix: str = "", *, page_size: Optional[int] = None
               ) -> Iterator[LeaseInfo]:
        """Every lease whose name starts with ``prefix``, by name."""
        for document in self._pages("leases", prefix, page_size):
            yield LeaseInfo.from_document(document)

    def watch(self, prefix: str = "", *, last_event_id: Optional[int] = None,
              idle_timeout: float = 35.0) -> Watch:
        """An iterator over the events under ``prefix`` (see Watch)."""
        return Watch(self._admin, prefix, last_event_id=last_event_id,
                     idle_timeout=idle_timeout)

    def _pages(self, what: str, prefix: str, page_size: Optional[int]
               ) -> Iterator[dict[str, Any]]:
        after: Optional[str] = None
        while True:
            query = [("prefix", prefix)]
            if page_size is not None:
                query.append(("limit", str(page_size)))
            if after is not None:
                query.append(("after", after))
            target = f"/v1/{what}?" + "&".join(
                f"{name}={encode_key(value).replace('/', '%2F')}"
                for name, value in query)
            page = _json(self._call("admin", "GET", target))
            items = page.get(what)
            if not isinstance(items, list):
                raise BadResponse(f"the page has no {what!r}")
            for item in items:
                if not isinstance(item, dict):
                    raise BadResponse(f"an item of {what!r} is not an object")
                yield item
            following = page.get("next")
            if not isinstance(following, str):
                return
            after = following


def long_poll(port: Port, conn: http.client.HTTPConnection, key: str,
              above: int, timeout: float) -> Optional[Fence]:
    """GET /v1/fences/{key}?wait_above=...&timeout_ms=... on ``conn``: the
    fence when above, None on the server's timeout."""
    target = (f"/v1/fences/{encode_key(key)}?wait_above={above}"
              f"&timeout_ms={max(0, int(timeout * 1000))}")
    try:
        conn.request("GET", target, headers=port.headers())
        answer = conn.getresponse()
        body = answer.read()
    except (OSError, http.client.HTTPException) as e:
        raise unreachable("GET", f"{port.url}{target}", e) from e
    headers = collect_headers(answer.msg)
    if "fencepost-watch" in headers:
        return None
    if answer.status >= 400:
        raise problem_from_response(answer.status, body, headers)
    return Fence.from_document(_json(Response(answer.status, headers, body)))


__all__ = ["Client", "Value", "WriteResult", "Fence", "LeaseInfo", "PutOp",
           "DeleteOp", "OpResult", "BatchResult", "EffectResult",
           "EFFECT_METHODS", "effect_target", "Response", "Problem",
           "check_token", "MAX_TOKEN"]
