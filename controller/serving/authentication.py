"""Bearer-token authentication by the API server: ``Authorization`` header parsing and TokenReview.

Go origin: ``k8s.io/api/authentication/v1`` (``TokenReview``), the audience rule of
``k8s.io/apiserver/pkg/authentication/authenticator`` (``Audiences``) and of controller-runtime's
``pkg/metrics/filters`` (a TokenReview per request), and kubeflow/trainer ``pkg/statusserver/auth.go``
(``extractRawToken``).

Guarantees:

- :func:`bearer_token` returns the one credential of an RFC 7235 ``Bearer`` header: the scheme matched
  case-insensitively, any surrounding or separating whitespace tolerated, ``""`` for anything else (no
  header, another scheme, no credential, more than one) (upstream's ``extractRawToken`` table).
- :meth:`TokenReviewAuthenticator.authenticate` asks the API server (``POST
  /apis/authentication.k8s.io/v1/tokenreviews``) whether the token is valid **for the given audiences**. It
  answers authenticated only when the API server says so *and* names one of those audiences in
  ``status.audiences``: an authenticator that ignores audiences answers with none, and the token was then
  only checked against the API server's own audience (the TokenReview contract says to refuse it). The API
  server checks the signature, the expiry, the audience, and that the object the token is bound to (a Pod,
  a Secret) still exists, so a token of a deleted Pod stops working (within the API server's own token
  cache, 10 s).
- A review that cannot be made (the API server unreachable, throttled, or refusing the caller RBAC on
  ``tokenreviews``) raises :class:`AuthenticationError`, never an answer of "not authenticated": the caller
  tells a server failure from a bad token. Its message names the HTTP status and reason only.
- **The token is never logged** and never part of an exception message or ``repr``.
- :meth:`UserInfo.service_account` reads ``system:serviceaccount:<namespace>:<name>``.

- :class:`CachingAuthenticator` puts any authenticator behind a bounded cache, as k8s.io/apiserver's
  ``token/cache`` (``cachedTokenAuthenticator``) does for the API server and for controller-runtime's
  metrics filter (:mod:`controller.serving.filters` uses it with upstream's 1 minute). An answer,
  authenticated or not, is reused for ``success_ttl`` or ``failure_ttl`` seconds (10 s each by default,
  k8s.io/apiserver's delegating authentication ``CacheTTL``) for the same token **and the same
  audiences**; an authenticated answer never outlives the token's own ``exp`` claim (read, not verified,
  from a JWT: it can only shorten the time). At most ``max_entries`` (4096) answers are kept, least
  recently used first out, so tokens made up by a client cannot grow memory without bound; tokens are
  kept only as SHA-256 digests. A review that could not be made (:class:`AuthenticationError`) is not
  cached. Time comes from the injected clock.
- :class:`ExpiringCache` is the one bounded TTL cache of both (and of :mod:`controller.serving.filters`'s
  SubjectAccessReview decisions): ``cachetools.TLRUCache`` on the injected clock, each entry with its own
  TTL, least recently used out first when full, behind one lock.

Deliberately missing: collapsing concurrent reviews of one token into one request (``singleflight``:
each cache miss asks), the SubjectAccessReview half of controller-runtime's filter (a caller that needs
authorization decides it from the :class:`UserInfo`), and local JWT verification (upstream's status
server verifies the token itself with OIDC discovery; see ``docs/status-server.md`` for why this port asks
the API server).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import orjson
import structlog
from cachetools import TLRUCache

from controller.client.errors import ApiError, TransportError
from controller.client.gvk import Resource
from controller.client.object import Object
from controller.clock import REAL_CLOCK, Clock

__all__ = [
    "SERVICE_ACCOUNT_PREFIX",
    "TOKEN_REVIEW_API_VERSION",
    "TOKEN_REVIEW_RESOURCE",
    "Authentication",
    "AuthenticationError",
    "CacheStatistics",
    "CachingAuthenticator",
    "ExpiringCache",
    "TokenAuthenticator",
    "TokenReviewAuthenticator",
    "TokenReviewer",
    "UserInfo",
    "bearer_token",
]

_log = structlog.get_logger("controller.serving.authentication")

TOKEN_REVIEW_API_VERSION = "authentication.k8s.io/v1"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
TOKEN_REVIEW_RESOURCE = Resource(
    group="authentication.k8s.io", version="v1", plural="tokenreviews", namespaced=False, kind="TokenReview"
)
"""Give it to the reviewing client's REST mapper (``RESTMapper(client, builtins=...)``): no discovery."""


def bearer_token(header: str | None) -> str:
    """The credential of ``Authorization: Bearer <token>``, or ``""`` (see the module doc)."""
    parts = (header or "").split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return ""
    return parts[1]


class AuthenticationError(RuntimeError):
    """The API server could not be asked (unreachable, throttled, or it refused the review itself)."""


class TokenReviewer(Protocol):
    """What creates the review: :class:`controller.client.client.Client` (its ``create``)."""

    def create(self, obj: Mapping[str, Any], *, field_manager: str | None = None) -> Object: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class UserInfo:
    """``authentication/v1`` ``UserInfo``: who the token belongs to."""

    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def service_account(self) -> tuple[str, str] | None:
        """``(namespace, name)`` of a ServiceAccount's username, else None."""
        if not self.username.startswith(SERVICE_ACCOUNT_PREFIX):
            return None
        namespace, sep, name = self.username[len(SERVICE_ACCOUNT_PREFIX) :].partition(":")
        if not sep or not namespace or not name or ":" in name:
            return None
        return namespace, name


@dataclass(frozen=True, slots=True, kw_only=True)
class Authentication:
    """The answer about one token: ``authenticated`` with the ``user``, or why not (``error``)."""

    authenticated: bool
    user: UserInfo = field(default_factory=UserInfo)
    audiences: tuple[str, ...] = ()
    """The audiences the API server found the token valid for (among those asked)."""
    error: str = ""
    """Why not, as the API server says it (it never contains the token)."""


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(item for item in value if isinstance(item, str))


def _user(value: Any) -> UserInfo:
    if not isinstance(value, Mapping):
        return UserInfo()
    extra_value = value.get("extra")
    extra = {str(k): _strings(v) for k, v in extra_value.items()} if isinstance(extra_value, Mapping) else {}
    username, uid = value.get("username"), value.get("uid")
    return UserInfo(
        username=username if isinstance(username, str) else "",
        uid=uid if isinstance(uid, str) else "",
        groups=_strings(value.get("groups")),
        extra=extra,
    )


class TokenReviewAuthenticator:
    """Authenticates bearer tokens with a TokenReview per call (see the module doc). Thread-safe."""

    def __init__(self, reviewer: TokenReviewer) -> None:
        self._reviewer = reviewer

    def authenticate(self, token: str, audiences: Sequence[str]) -> Authentication:
        """Whether ``token`` is valid for one of ``audiences`` (none: the API server's own); raises
        :class:`AuthenticationError` when the API server cannot be asked."""
        if not token:
            return Authentication(authenticated=False, error="no bearer token")
        spec: dict[str, Any] = {"token": token}
        if audiences:
            spec["audiences"] = list(audiences)
        review = {"apiVersion": TOKEN_REVIEW_API_VERSION, "kind": "TokenReview", "spec": spec}
        try:
            answer = self._reviewer.create(review)
        except ApiError as exc:
            # Status and reason only: nothing the API server echoes can carry the token into a log line.
            raise AuthenticationError(f"TokenReview failed: {exc.status} {exc.reason or 'error'}") from exc
        except (TransportError, LookupError) as exc:  # LookupError: the kind is not served (NoKindMatch)
            raise AuthenticationError(f"TokenReview failed: {type(exc).__name__}") from exc
        status = answer.get("status")
        if not isinstance(status, Mapping):
            return Authentication(authenticated=False, error="the TokenReview has no status")
        error = status.get("error")
        error_text = error if isinstance(error, str) else ""
        found = _strings(status.get("audiences"))
        if status.get("authenticated") is not True:
            return Authentication(
                authenticated=False, audiences=found, error=error_text or "not authenticated"
            )
        if audiences and not set(found) & set(audiences):
            return Authentication(
                authenticated=False,
                audiences=found,
                error="the token is not valid for the requested audiences",
            )
        return Authentication(authenticated=True, user=_user(status.get("user")), audiences=found)

    def __repr__(self) -> str:
        return f"TokenReviewAuthenticator({self._reviewer!r})"


class TokenAuthenticator(Protocol):
    """Whether a bearer token is valid for one of some audiences (:class:`TokenReviewAuthenticator`)."""

    def authenticate(self, token: str, audiences: Sequence[str]) -> Authentication: ...


SUCCESS_TTL = 10.0
FAILURE_TTL = 10.0
MAX_ENTRIES = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheStatistics:
    hits: int
    misses: int
    entries: int


def token_expiry(token: str) -> float | None:
    """The ``exp`` claim (Unix seconds) of a JWT, unverified; None when ``token`` is not a JWT with one."""
    parts = token.split(".")
    if len(parts) != 3 or len(parts[1]) > 16384:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = orjson.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, ValueError):  # not base64, not JSON (orjson.JSONDecodeError is a ValueError)
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    if isinstance(exp, bool) or not isinstance(exp, (int, float)):
        return None
    return float(exp)


K = TypeVar("K")
V = TypeVar("V")


class ExpiringCache(Generic[K, V]):
    """At most ``max_entries`` values, each dropped ``ttl`` seconds (of ``clock.monotonic``) after it was
    put, the least recently used first out when full (``cachetools.TLRUCache``). Thread-safe: one lock
    around every operation. Counts hits and misses of :meth:`get`."""

    def __init__(self, max_entries: int, clock: Clock) -> None:
        if max_entries <= 0:
            raise ValueError("max_entries must be > 0")
        self._lock = threading.Lock()
        # Guarded by _lock. A value is stored with its expiry (monotonic seconds): TLRU's time-to-use.
        self._entries: TLRUCache[K, tuple[float, V]] = TLRUCache(
            maxsize=max_entries, ttu=lambda _key, entry, _now: entry[0], timer=clock.monotonic
        )
        self._clock = clock
        self._hits = 0
        self._misses = 0

    def get(self, key: K) -> V | None:
        """The value put under ``key`` if it has not expired, else None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._misses += 1
                return None
            self._hits += 1
            return entry[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        """Keep ``value`` for ``ttl`` seconds; a ``ttl`` <= 0 keeps nothing (and drops an older value)."""
        with self._lock:
            if ttl > 0:
                self._entries[key] = (self._clock.monotonic() + ttl, value)
            else:
                self._entries.pop(key, None)

    def keys(self) -> list[K]:
        """The keys of the values not yet expired."""
        with self._lock:
            self._entries.expire()
            return list(self._entries.keys())

    def statistics(self) -> CacheStatistics:
        with self._lock:
            self._entries.expire()
            return CacheStatistics(hits=self._hits, misses=self._misses, entries=len(self._entries))

    def __len__(self) -> int:
        with self._lock:
            self._entries.expire()
            return len(self._entries)


class CachingAuthenticator:
    """A :class:`TokenAuthenticator` behind a bounded TTL cache (see the module doc). Thread-safe: the
    cache's lock is not held while the delegate is asked."""

    def __init__(
        self,
        delegate: TokenAuthenticator,
        *,
        success_ttl: float = SUCCESS_TTL,
        failure_ttl: float = FAILURE_TTL,
        max_entries: int = MAX_ENTRIES,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        if success_ttl < 0 or failure_ttl < 0:
            raise ValueError("success_ttl and failure_ttl must be >= 0")
        self._delegate = delegate
        self._success_ttl = success_ttl
        self._failure_ttl = failure_ttl
        self._clock = clock
        # Keyed by the SHA-256 of the token and the audiences.
        self._cache: ExpiringCache[bytes, Authentication] = ExpiringCache(max_entries, clock)

    @staticmethod
    def _key(token: str, audiences: Sequence[str]) -> bytes:
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape"))
        for audience in sorted(set(audiences)):
            digest.update(b"\x00" + audience.encode("utf-8", "surrogateescape"))
        return digest.digest()

    def _ttl(self, token: str, answer: Authentication) -> float:
        if not answer.authenticated:
            return self._failure_ttl
        ttl = self._success_ttl
        expiry = token_expiry(token)
        if expiry is not None:
            ttl = min(ttl, expiry - self._clock.now().timestamp())
        return ttl

    def authenticate(self, token: str, audiences: Sequence[str]) -> Authentication:
        """The delegate's answer for ``token`` and ``audiences``, from the cache while it is fresh; raises
        :class:`AuthenticationError` as the delegate does (not cached)."""
        if not token:
            return self._delegate.authenticate(token, audiences)
        key = self._key(token, audiences)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        answer = self._delegate.authenticate(token, audiences)
        self._cache.put(key, answer, self._ttl(token, answer))
        return answer

    def statistics(self) -> CacheStatistics:
        return self._cache.statistics()

    def __repr__(self) -> str:
        return f"CachingAuthenticator({self._delegate!r}, entries={len(self._cache)})"
