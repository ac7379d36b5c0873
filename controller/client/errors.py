"""One mapping from API server responses to Python exceptions, after apimachinery's ``api/errors``.

Go origin: ``k8s.io/apimachinery/pkg/api/errors`` (``StatusError``, ``FromObject``,
``NewGenericServerResponse`` and the ``IsXxx`` predicates) and the response handling of client-go's
``rest.Request`` (``transformResponse``, ``newUnstructuredResponseError``, ``retryAfterSeconds``).

Every failed response is turned into exactly one :class:`ApiError` subclass, here and nowhere else:

- When the body is a ``metav1.Status`` (kind ``Status``, ``status: Failure``) its ``reason`` decides the
  class, as the ``IsXxx`` predicates do: a known, specific reason wins (``AlreadyExists`` and ``Conflict``
  are both HTTP 409; ``Expired`` and ``Gone`` both 410); an unknown or empty reason falls back to the code.
  ``code``, ``message`` and ``details`` are taken from the Status.
- When the body is not a Status (a proxy's HTML page, a bare ``404 page not found``), the reason is derived
  from the HTTP code and method as ``NewGenericServerResponse`` does (409 to a POST is ``AlreadyExists``), and
  the body text is kept as an ``UnexpectedServerResponse`` cause.
- ``retry_after`` comes from the ``Retry-After`` header (whole seconds, as client-go parses it), else from
  ``details.retryAfterSeconds`` when positive.

Failures below HTTP are :class:`TransportError`\\ s (:class:`ConnectionFailed`, :class:`RequestTimeout`,
:class:`WatchTimeout`), raised by ``controller.client.transport`` with the urllib3 exception chained as the
cause.

Deliberately missing: the ``NewXxx`` constructors a server needs (we only read errors), ``DebugError``, and
separate classes for reasons no caller here branches on (``NotAcceptable``, ``UnsupportedMediaType``,
``RequestEntityTooLarge``): those are plain :class:`ApiError` with the reason set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

# metav1.StatusReason values (apimachinery pkg/apis/meta/v1/types.go).
REASON_UNKNOWN = ""
REASON_UNAUTHORIZED = "Unauthorized"
REASON_FORBIDDEN = "Forbidden"
REASON_NOT_FOUND = "NotFound"
REASON_ALREADY_EXISTS = "AlreadyExists"
REASON_CONFLICT = "Conflict"
REASON_GONE = "Gone"
REASON_INVALID = "Invalid"
REASON_SERVER_TIMEOUT = "ServerTimeout"
REASON_STORE_READ_ERROR = "StoreReadError"
REASON_TIMEOUT = "Timeout"
REASON_TOO_MANY_REQUESTS = "TooManyRequests"
REASON_BAD_REQUEST = "BadRequest"
REASON_METHOD_NOT_ALLOWED = "MethodNotAllowed"
REASON_NOT_ACCEPTABLE = "NotAcceptable"
REASON_REQUEST_ENTITY_TOO_LARGE = "RequestEntityTooLarge"
REASON_UNSUPPORTED_MEDIA_TYPE = "UnsupportedMediaType"
REASON_INTERNAL_ERROR = "InternalError"
REASON_EXPIRED = "Expired"
REASON_SERVICE_UNAVAILABLE = "ServiceUnavailable"

KNOWN_REASONS = frozenset(
    {
        REASON_UNAUTHORIZED,
        REASON_FORBIDDEN,
        REASON_NOT_FOUND,
        REASON_ALREADY_EXISTS,
        REASON_CONFLICT,
        REASON_GONE,
        REASON_INVALID,
        REASON_SERVER_TIMEOUT,
        REASON_STORE_READ_ERROR,
        REASON_TIMEOUT,
        REASON_TOO_MANY_REQUESTS,
        REASON_BAD_REQUEST,
        REASON_METHOD_NOT_ALLOWED,
        REASON_NOT_ACCEPTABLE,
        REASON_REQUEST_ENTITY_TOO_LARGE,
        REASON_UNSUPPORTED_MEDIA_TYPE,
        REASON_INTERNAL_ERROR,
        REASON_EXPIRED,
        REASON_SERVICE_UNAVAILABLE,
    }
)

# metav1.CauseType values this project reads.
CAUSE_UNEXPECTED_SERVER_RESPONSE = "UnexpectedServerResponse"
CAUSE_RESOURCE_VERSION_TOO_LARGE = "ResourceVersionTooLarge"
CAUSE_FIELD_MANAGER_CONFLICT = "FieldManagerConflict"

# The largest unexpected (non-Status) body kept as a cause; the rest is an HTML page nobody reads.
_MAX_UNEXPECTED_BODY = 1024


class ApiError(Exception):
    """The API server answered with a failure status.

    ``status`` is the HTTP code (the Status ``code`` when the body carried one), ``reason`` the
    ``metav1.StatusReason`` (``""`` when unknown), ``message`` the server's message, ``details`` the
    ``metav1.StatusDetails`` dict as received (``{}`` when absent) and ``retry_after`` the delay in seconds
    the server asked for, or None.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        reason: str = REASON_UNKNOWN,
        details: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.details: Mapping[str, Any] = details if details is not None else {}
        self.retry_after = retry_after

    @property
    def causes(self) -> list[Mapping[str, Any]]:
        """``details.causes``: dicts with ``reason`` (the cause type), ``message`` and ``field``."""
        causes = self.details.get("causes")
        return list(causes) if isinstance(causes, list) else []

    def has_cause(self, cause_type: str) -> bool:
        """Whether ``details.causes`` holds a cause of this type (apimachinery ``HasStatusCause``)."""
        return any(c.get("reason") == cause_type for c in self.causes)

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status}, reason={self.reason!r}, message={self.message!r})"
        )


class NotFound(ApiError):
    """404, or reason ``NotFound``."""


class AlreadyExists(ApiError):
    """409 with reason ``AlreadyExists`` (a create hit a taken name), or 409 to a POST without a Status."""


class Conflict(ApiError):
    """409 with reason ``Conflict``: a stale resourceVersion, or a server-side-apply field conflict."""


class Invalid(ApiError):
    """422, or reason ``Invalid``; ``causes`` name the offending fields."""


class Forbidden(ApiError):
    """403, or reason ``Forbidden``."""


class Unauthorized(ApiError):
    """401, or reason ``Unauthorized``."""


class Gone(ApiError):
    """410, or reason ``Gone`` or ``Expired``: the requested resourceVersion is no longer available."""


class TooManyRequests(ApiError):
    """429, or reason ``TooManyRequests``; ``retry_after`` is the delay the server asked for."""


class ServerError(ApiError):
    """5xx, or reason ``InternalError``, ``ServerTimeout``, ``Timeout``, ``ServiceUnavailable`` or
    ``StoreReadError``: the server failed; retrying later may succeed."""


class BadRequest(ApiError):
    """400, or reason ``BadRequest``."""


class MethodNotAllowed(ApiError):
    """405, or reason ``MethodNotAllowed``."""


class TransportError(Exception):
    """The request got no HTTP answer: the cause (a urllib3 exception) is chained."""


class ConnectionFailed(TransportError):
    """Could not connect, the TLS handshake failed, or the connection broke mid-response."""


class RequestTimeout(TransportError):
    """No response within the client's read timeout; the server may still carry out the request."""


class WatchTimeout(TransportError):
    """A watch stream sent nothing (not even a bookmark) for the client's read timeout: the connection is
    presumed dead. Start a new watch from the last resourceVersion seen."""


class ClientClosed(TransportError):
    """The client was closed while the request waited for its turn (rate limiter or Retry-After)."""


class ConfigError(Exception):
    """No usable connection configuration (kubeconfig unreadable, context missing, not in a cluster)."""


class NoKindMatch(LookupError):
    """Discovery does not know this group/version/kind (meta ``NoKindMatchError``)."""

    def __init__(self, group: str, version: str, kind: str) -> None:
        gv = f"{group}/{version}" if group else version
        super().__init__(f'no matches for kind "{kind}" in version "{gv}"')
        self.group = group
        self.version = version
        self.kind = kind


_CLASS_BY_REASON: dict[str, type[ApiError]] = {
    REASON_NOT_FOUND: NotFound,
    REASON_ALREADY_EXISTS: AlreadyExists,
    REASON_CONFLICT: Conflict,
    REASON_INVALID: Invalid,
    REASON_FORBIDDEN: Forbidden,
    REASON_UNAUTHORIZED: Unauthorized,
    REASON_GONE: Gone,
    REASON_EXPIRED: Gone,
    REASON_TOO_MANY_REQUESTS: TooManyRequests,
    REASON_BAD_REQUEST: BadRequest,
    REASON_METHOD_NOT_ALLOWED: MethodNotAllowed,
    REASON_INTERNAL_ERROR: ServerError,
    REASON_SERVER_TIMEOUT: ServerError,
    REASON_TIMEOUT: ServerError,
    REASON_SERVICE_UNAVAILABLE: ServerError,
    REASON_STORE_READ_ERROR: ServerError,
}

_CLASS_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}

# NewGenericServerResponse: the reason a bare HTTP code implies, and our wording of what it means.
_GENERIC_BY_CODE: dict[int, tuple[str, str]] = {
    400: (REASON_BAD_REQUEST, "the server rejected the request for an unknown reason"),
    401: (REASON_UNAUTHORIZED, "the server asks the client to provide credentials"),
    403: (REASON_FORBIDDEN, ""),  # the server's own text says who may not do what: keep it
    404: (REASON_NOT_FOUND, "the server could not find the requested resource"),
    405: (REASON_METHOD_NOT_ALLOWED, "the server does not allow this method on the requested resource"),
    406: (REASON_NOT_ACCEPTABLE, "the server cannot answer in a content type the client accepts"),
    409: (REASON_CONFLICT, "the server reported a conflict"),
    415: (REASON_UNSUPPORTED_MEDIA_TYPE, ""),
    422: (REASON_INVALID, "the server rejected the request because of an error in it"),
    429: (
        REASON_TOO_MANY_REQUESTS,
        "the server received too many requests; retry later",
    ),
    503: (REASON_SERVICE_UNAVAILABLE, "the server is currently unable to handle the request"),
    504: (REASON_TIMEOUT, "the server did not answer in time, but may still be processing the request"),
}


def _class_for(status: int, reason: str) -> type[ApiError]:
    """The exception class for a (code, reason) pair, with the precedence of apimachinery's ``IsXxx``."""
    cls = _CLASS_BY_REASON.get(reason)
    if cls is not None:
        return cls
    if status == 429:  # IsTooManyRequests checks the code whatever the reason says
        return TooManyRequests
    if reason in KNOWN_REASONS:  # a known reason we have no class for: do not second-guess it by code
        return ApiError
    if status >= 500:
        return ServerError
    return _CLASS_BY_CODE.get(status, ApiError)


def parse_retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` header in whole seconds, as client-go reads it; dates and junk give None."""
    if value is None:
        return None
    value = value.strip()
    if not value.isdigit():
        return None
    return float(int(value))


def from_status(
    status_obj: Mapping[str, Any], *, http_status: int = 0, retry_after: float | None = None
) -> ApiError:
    """Build the error a ``metav1.Status`` describes (apimachinery ``FromObject``).

    Used for failed responses whose body is a Status and for watch ``ERROR`` events. ``http_status`` is
    used when the Status carries no ``code``; ``retry_after`` (from a header) wins over
    ``details.retryAfterSeconds``.
    """
    raw_details = status_obj.get("details")
    details: Mapping[str, Any] = raw_details if isinstance(raw_details, Mapping) else {}
    code = status_obj.get("code")
    status = code if isinstance(code, int) and code > 0 else http_status
    reason = status_obj.get("reason") or REASON_UNKNOWN
    message = status_obj.get("message") or ""
    if retry_after is None:
        seconds = details.get("retryAfterSeconds")
        if isinstance(seconds, int) and seconds > 0:
            retry_after = float(seconds)
    cls = _class_for(status, reason)
    return cls(
        message or f"the server failed the request with status {status} ({reason or 'no reason'})",
        status=status,
        reason=reason,
        details=details,
        retry_after=retry_after,
    )


def _decode_status(body: bytes) -> Mapping[str, Any] | None:
    """The body as a failed ``metav1.Status``, or None when it is something else."""
    if not body or body[:1] != b"{":
        return None
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or obj.get("kind") != "Status":
        return None
    # transformResponse treats a Status as one only when its ``status`` field is set.
    if not obj.get("status") or obj.get("status") == "Success":
        return None
    return obj


def from_response(
    status: int, body: bytes, headers: Mapping[str, str] | None = None, *, method: str = "GET"
) -> ApiError:
    """Build the error for a failed HTTP response (client-go ``transformResponse``).

    ``headers`` is read for ``Retry-After`` (looked up case-insensitively); ``method`` matters only for a
    409 without a Status body, which is ``AlreadyExists`` for a POST and ``Conflict`` otherwise.
    """
    retry_after = None
    if headers:
        retry_after = parse_retry_after(_header(headers, "Retry-After"))
    status_obj = _decode_status(body)
    if status_obj is not None:
        return from_status(status_obj, http_status=status, retry_after=retry_after)
    return _generic(status, body, method=method, retry_after=retry_after)


def _generic(status: int, body: bytes, *, method: str, retry_after: float | None) -> ApiError:
    """NewGenericServerResponse: no Status in the body, so the code and method decide."""
    server_message = body[:_MAX_UNEXPECTED_BODY].decode("utf-8", "replace").strip()
    reason, message = _GENERIC_BY_CODE.get(status, (REASON_UNKNOWN, ""))
    if status == 409 and method.upper() == "POST":
        reason = REASON_ALREADY_EXISTS
    if not message:
        if status >= 500 and reason == REASON_UNKNOWN:
            reason = REASON_INTERNAL_ERROR
            message = f"an error on the server ({server_message!r}) prevented the request from succeeding"
        elif server_message:
            message = server_message
        else:
            message = f"the server responded with status code {status} and no further information"
    details: dict[str, Any] = {
        "causes": [{"reason": CAUSE_UNEXPECTED_SERVER_RESPONSE, "message": server_message}],
    }
    if retry_after is not None:
        details["retryAfterSeconds"] = int(retry_after)
    cls = _class_for(status, reason)
    return cls(message, status=status, reason=reason, details=details, retry_after=retry_after)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    for key, val in headers.items():
        if key.lower() == lowered:
            return val
    return None


def is_expired(err: BaseException) -> bool:
    """The reflector's ``isExpiredError``: reason ``Expired`` or ``Gone``, or a bare 410.

    A list or watch failing this way means the resourceVersion asked for was compacted away: relist.
    """
    return isinstance(err, Gone)


def is_too_large_resource_version(err: BaseException) -> bool:
    """The reflector's ``isTooLargeResourceVersionError``: the server has not yet seen the resourceVersion
    asked for (a ``ResourceVersionTooLarge`` cause, or the older servers' Timeout with that message)."""
    if not isinstance(err, ApiError):
        return False
    if err.has_cause(CAUSE_RESOURCE_VERSION_TOO_LARGE):
        return True
    is_timeout = err.reason == REASON_TIMEOUT or (err.reason not in KNOWN_REASONS and err.status == 504)
    if not is_timeout or not err.details:
        return False
    if any(c.get("message") == "Too large resource version" for c in err.causes):
        return True
    return "Too large resource version" in err.message
