"""The exceptions of the fencepost client.

Every error answer of fencepost is problem+json (RFC 9457) whose ``type`` is
``urn:fencepost:problem:<slug>``; :func:`problem_from_response` picks the
exception class from that ``type`` alone, never from the message text. An
answer with an unknown type, or one that is not problem+json, is raised as
the base class :class:`Problem` (its ``status`` still tells what happened).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar, Optional

PROBLEM_PREFIX = "urn:fencepost:problem:"


class FencepostError(Exception):
    """The base class of every error this package raises."""


class Unreachable(FencepostError):
    """No HTTP answer arrived: the name did not resolve, the connection was
    refused or lost, the TLS handshake failed, or the request timed out.

    A write that raised this may or may not have been applied (its answer
    may be what was lost); the client never sends it again on its own.
    """


class BadResponse(FencepostError):
    """An answer arrived but could not be read as fencepost's (unreadable
    HTTP, a document that is not the JSON it should be)."""


class LeadershipLost(FencepostError):
    """Raised in the work's thread when the lease it runs under is lost:
    a renewal was refused, no renewal succeeded before the client's own
    deadline, or the lease's fence moved above the token. ``reason`` says
    which; ``token`` is the lost term's token."""

    def __init__(self, reason: str, token: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.token = token


def _int_or_none(value: Any) -> Optional[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _str_or_none(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


class Problem(FencepostError):
    """An error answer (4xx or 5xx). ``slug`` is the class's problem type;
    the instance's ``type`` is the one the server sent (None when the body
    was not problem+json)."""

    slug: ClassVar[str] = ""

    def __init__(self, status: int, document: Mapping[str, Any],
                 headers: Optional[Mapping[str, str]] = None) -> None:
        self.status = status
        self.document: dict[str, Any] = dict(document)
        self.headers: dict[str, str] = dict(headers or {})
        self.type: Optional[str] = _str_or_none(document.get("type"))
        self.title: Optional[str] = _str_or_none(document.get("title"))
        self.detail: Optional[str] = _str_or_none(document.get("detail"))
        self.key: Optional[str] = _str_or_none(document.get("key"))
        self.presented_token: Optional[int] = _int_or_none(
            document.get("presented_token"))
        message = self.detail or self.title or f"HTTP {status}"
        super().__init__(f"{status} {self.type or 'error'}: {message}")


class StaleToken(Problem):
    """409: the token is lower than the fence's highest, ``current_token``."""
    slug = "stale-token"

    def __init__(self, status: int, document: Mapping[str, Any],
                 headers: Optional[Mapping[str, str]] = None) -> None:
        super().__init__(status, document, headers)
        self.current_token: Optional[int] = _int_or_none(
            document.get("current_token"))


class MissingToken(Problem):
    """428: a write without a Fencing-Token."""
    slug = "missing-token"


class InvalidToken(Problem):
    """400: the Fencing-Token is not a plain decimal uint64."""
    slug = "invalid-token"


class BadKey(Problem):
    """400: the key is not a valid key (empty segment, ``.``, ``..``, ...)."""
    slug = "bad-key"


class BadRequest(Problem):
    """400: a malformed body, query parameter or batch."""
    slug = "bad-request"


class BadFraming(Problem):
    """400: ambiguous or malformed HTTP framing."""
    slug = "bad-framing"


class BodyTooLarge(Problem):
    """413: the body is larger than the server's --max-body."""
    slug = "body-too-large"


class HeadersTooLarge(Problem):
    """431: the request's fields are larger than 16 KiB."""
    slug = "headers-too-large"


class MethodNotAllowed(Problem):
    """405: e.g. a batch on an fs: or http:// backend."""
    slug = "method-not-allowed"


class NotFound(Problem):
    """404: no value for the key, no fence, or a lease never granted."""
    slug = "not-found"


class Unauthorized(Problem):
    """401: the server has --auth-token-file and the bearer token is
    missing or wrong."""
    slug = "unauthorized"


class Overloaded(Problem):
    """503: the server's commit queue is full."""
    slug = "overloaded"


class LeaseHeld(Problem):
    """409: another holder (``holder``) holds the lease for
    ``expires_in_ms`` more."""
    slug = "lease-held"

    def __init__(self, status: int, document: Mapping[str, Any],
                 headers: Optional[Mapping[str, str]] = None) -> None:
        super().__init__(status, document, headers)
        self.holder: Optional[str] = _str_or_none(document.get("holder"))
        self.expires_in_ms: Optional[int] = _int_or_none(
            document.get("expires_in_ms"))


class LeaseNotHeld(Problem):
    """409: a release by a non-holder or with a wrong token."""
    slug = "lease-not-held"


class TooManyConnections(Problem):
    """503: the port is at its connection limit (watches included)."""
    slug = "too-many-connections"


class TokensExhausted(Problem):
    """409: the fence is at the largest token; no higher one can be
    granted."""
    slug = "tokens-exhausted"


class TooManyLeases(Problem):
    """507: a grant past the server's --max-leases live leases."""
    slug = "too-many-leases"


class UnverifiedToken(Problem):
    """409: a token above an elected fence that the election's source did
    not confirm as its holder's (``--election``). Nothing changed."""
    slug = "unverified-token"


class ElectionUnavailable(Problem):
    """503: a token above an elected fence could not be checked, the
    election's source not answering in time. Nothing changed; retry."""
    slug = "election-unavailable"


class FenceElected(Problem):
    """409: a lease of fencepost's own on a fence that follows an election
    held elsewhere (``--election``)."""
    slug = "fence-elected"


class PreconditionFailed(Problem):
    """412: If-Match / If-None-Match did not hold; ``current_etag`` is the
    value's tag (None when there is no value). Nothing changed."""
    slug = "precondition-failed"

    def __init__(self, status: int, document: Mapping[str, Any],
                 headers: Optional[Mapping[str, str]] = None) -> None:
        super().__init__(status, document, headers)
        self.current_etag: Optional[str] = _str_or_none(
            document.get("current_etag"))


class MapFull(Problem):
    """507: the LMDB map is at --max-map-size."""
    slug = "map-full"


class KeyCollision(Problem):
    """409 (fs:): the key collides with a file or directory of the other
    kind."""
    slug = "key-collision"


class DiskFull(Problem):
    """507 (fs:): the backend's file system is full."""
    slug = "disk-full"


class UpstreamFailed(Problem):
    """502: the upstream store refused or failed before the write was
    sent."""
    slug = "upstream-failed"


class UpstreamOutcomeUnknown(Problem):
    """504: the upstream's outcome is unknown; the fence is held closed for
    a while (:class:`FenceHeld`)."""
    slug = "upstream-outcome-unknown"


class FenceHeld(Problem):
    """503: the fence is held closed after an unknown upstream outcome;
    ``retry_after`` (seconds) from the Retry-After field."""
    slug = "fence-held"

    def __init__(self, status: int, document: Mapping[str, Any],
                 headers: Optional[Mapping[str, str]] = None) -> None:
        super().__init__(status, document, headers)
        value = self.headers.get("retry-after", "")
        self.retry_after: Optional[int] = int(value) if value.isdigit() else None


class StorageFailure(Problem):
    """500: the storage failed."""
    slug = "storage-failure"


class FenceStoreUnavailable(Problem):
    """503: the fence store (etcd) is unavailable."""
    slug = "fence-store-unavailable"


class StoreError(Problem):
    """The S3 store's own error, relayed with its status, S3 ``code`` and
    ``request_id``."""
    slug = "store-error"

    def __init__(self, status: int, document: Mapping[str, Any],
                 headers: Optional[Mapping[str, str]] = None) -> None:
        super().__init__(status, document, headers)
        self.code: Optional[str] = _str_or_none(document.get("code"))
        self.request_id: Optional[str] = _str_or_none(
            document.get("request_id"))


class IdempotencyKeyReused(Problem):
    """422 (effects): the target's Idempotency-Key was used before for
    another request (method, Fence-Key, path, query or body differ).
    Nothing was sent."""
    slug = "idempotency-key-reused"


class EffectInProgress(Problem):
    """409 (effects): the first call with this target and Idempotency-Key
    is in flight right now; ask again later for its answer."""
    slug = "effect-in-progress"


class EffectOutcomeUnknown(Problem):
    """409 (effects): the call was sent earlier and no answer is known
    (fencepost stopped, the connection broke, a timeout after sending).
    fencepost never sends it again until an admin forgets the record
    (``DELETE /v1/effects/NAME/ID``) after checking with the target.
    ``target``, ``idempotency_key`` and ``state`` are the record's."""
    slug = "effect-outcome-unknown"

    def __init__(self, status: int, document: Mapping[str, Any],
                 headers: Optional[Mapping[str, str]] = None) -> None:
        super().__init__(status, document, headers)
        self.target: Optional[str] = _str_or_none(document.get("target"))
        self.idempotency_key: Optional[str] = _str_or_none(
            document.get("idempotency_key"))
        self.state: Optional[str] = _str_or_none(document.get("state"))


class MissingEffectHeader(Problem):
    """428 (effects): no Fence-Key or no Idempotency-Key."""
    slug = "missing-effect-header"


class Internal(Problem):
    """500: an internal error of the server."""
    slug = "internal"


# Every class above, by its problem type: a new one cannot be left out.
PROBLEM_CLASSES: dict[str, type[Problem]] = {
    cls.slug: cls for cls in Problem.__subclasses__()}


def problem_from_response(status: int, body: bytes,
                          headers: Optional[Mapping[str, str]] = None
                          ) -> Problem:
    """The exception for an error answer: the class named by the
    problem+json ``type``, else :class:`Problem`. ``headers`` are keyed in
    lower case."""
    document: dict[str, Any] = {}
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        document = parsed
    kind = document.get("type")
    cls = Problem
    if isinstance(kind, str) and kind.startswith(PROBLEM_PREFIX):
        cls = PROBLEM_CLASSES.get(kind[len(PROBLEM_PREFIX):], Problem)
    return cls(status, document, headers)
