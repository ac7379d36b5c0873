"""Authentication and authorization of scrapes: the bearer token is checked with a TokenReview, then the
user's right to ``get`` the path with a SubjectAccessReview.

Go origin: controller-runtime ``pkg/metrics/filters`` (``WithAuthenticationAndAuthorization``) over
k8s.io/apiserver's delegating authenticator (``token/cache``, ``group``) and delegating authorizer
(``plugin/pkg/authorizer/webhook``). The TokenReview, its cache
(:class:`~controller.serving.authentication.CachingAuthenticator`) and the header parsing are
:mod:`controller.serving.authentication`'s (shared with the status server); this module adds the
SubjectAccessReview, its cache and the HTTP answers.

What a request gets:

- no ``Authorization`` header, another scheme, an empty token: 401 ``Unauthorized``;
- a token the API server does not authenticate: 401 ``Unauthorized``;
- the TokenReview cannot be made (API down, the manager not allowed): 500 ``Authentication failed``;
- authenticated, but the SubjectAccessReview does not allow: 403 ``Authorization denied for user <name>``;
- the SubjectAccessReview cannot be made: 500 ``Authorization for user <name> failed``;
- allowed: the wrapped app's answer.

The header is :func:`controller.serving.authentication.bearer_token`'s: ``Bearer`` in any case and exactly one
credential (k8s.io/apiserver also takes the second of three fields, and reads a double space as an empty
token; both are refused or read alike here). The SubjectAccessReview carries the user's name, UID, groups
(plus ``system:authenticated``) and extra, and ``nonResourceAttributes: {path, verb: get}``.

Caching (controller-runtime's TTLs): a token's review, authenticated or not, for 1 minute, an
authenticated one never past the token's own ``exp`` claim
(:class:`~controller.serving.authentication.CachingAuthenticator`); a user's decision for a path, 5 minutes
when allowed and 30 seconds when denied. API errors are not cached. Each cache is a
:class:`~controller.serving.authentication.ExpiringCache` of at most ``max_entries`` (4096) entries, least
recently used out first, so tokens made up by a client cannot grow memory without bound; tokens are kept
only as SHA-256 digests. Time comes from the injected clock.

Guarantees: thread-safe (one lock per cache; no lock is held during an API call); tokens never appear in
logs or errors.

Deliberately different from upstream: a token the API server rejects is 401 (k8s.io/apiserver turns it
into an error and controller-runtime answers 500); no retries of a failed review (the next scrape asks
again); no client-certificate or front-proxy authentication.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from controller.client import errors
from controller.clock import REAL_CLOCK, Clock
from controller.serving.app import App
from controller.serving.authentication import (
    AuthenticationError,
    CacheStatistics,
    CachingAuthenticator,
    ExpiringCache,
    TokenReviewAuthenticator,
    TokenReviewer,
    UserInfo,
    bearer_token,
)
from controller.serving.httpserver import Response

__all__ = [
    "AUTHENTICATED_GROUP",
    "Authenticator",
    "Authorizer",
    "Decision",
    "Filter",
    "ReviewFailed",
    "authentication_and_authorization",
]

_log = structlog.get_logger("controller.serving.filters")

AUTHENTICATED_GROUP = "system:authenticated"
TOKEN_TTL = 60.0
ALLOW_TTL = 300.0
DENY_TTL = 30.0
MAX_ENTRIES = 4096

Filter = Callable[[App], App]
"""Wraps a server's app (controller-runtime ``metricsserver.Filter``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    allowed: bool
    reason: str = ""


class ReviewFailed(RuntimeError):
    """A review could not be made (the API server did not answer it)."""


class Authenticator:
    """TokenReviews behind :class:`~controller.serving.authentication.CachingAuthenticator`, ``ttl`` seconds
    for an answer either way (see the module doc)."""

    def __init__(
        self,
        client: TokenReviewer,
        *,
        clock: Clock = REAL_CLOCK,
        ttl: float = TOKEN_TTL,
        max_entries: int = MAX_ENTRIES,
        audiences: Sequence[str] = (),
    ) -> None:
        self._audiences = tuple(audiences)
        self._reviews = CachingAuthenticator(
            TokenReviewAuthenticator(client),
            success_ttl=ttl,
            failure_ttl=ttl,
            max_entries=max_entries,
            clock=clock,
        )

    def authenticate(self, token: str) -> UserInfo | None:
        """The token's user, or None when it is not authenticated; raises :class:`ReviewFailed`."""
        try:
            answer = self._reviews.authenticate(token, self._audiences)
        except AuthenticationError as exc:
            raise ReviewFailed(str(exc)) from exc
        return answer.user if answer.authenticated else None

    def statistics(self) -> CacheStatistics:
        return self._reviews.statistics()


class Authorizer:
    """SubjectAccessReviews on non-resource paths, cached (see the module doc)."""

    def __init__(
        self,
        client: TokenReviewer,
        *,
        clock: Clock = REAL_CLOCK,
        allow_ttl: float = ALLOW_TTL,
        deny_ttl: float = DENY_TTL,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self._client = client
        self._allow_ttl = allow_ttl
        self._deny_ttl = deny_ttl
        self._decisions: ExpiringCache[tuple[Any, ...], Decision] = ExpiringCache(max_entries, clock)

    def authorize(self, user: UserInfo, verb: str, path: str) -> Decision:
        """Whether ``user`` may ``verb`` the non-resource ``path``; raises :class:`ReviewFailed`."""
        groups = user.groups if AUTHENTICATED_GROUP in user.groups else (*user.groups, AUTHENTICATED_GROUP)
        extra = tuple(sorted((k, tuple(v)) for k, v in user.extra.items()))
        key = (user.username, user.uid, groups, extra, verb, path)
        cached = self._decisions.get(key)
        if cached is not None:
            return cached
        spec: dict[str, Any] = {
            "user": user.username,
            "groups": list(groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if extra:
            spec["extra"] = {k: list(v) for k, v in extra}
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        try:
            answer = self._client.create(review)
        except errors.ApiError as exc:
            raise ReviewFailed(f"SubjectAccessReview failed: {exc.status} {exc.reason or 'error'}") from exc
        except (errors.TransportError, LookupError) as exc:
            raise ReviewFailed(f"SubjectAccessReview failed: {type(exc).__name__}") from exc
        status = answer.get("status") or {}
        allowed = status.get("allowed") is True and status.get("denied") is not True
        decision = Decision(allowed=allowed, reason=str(status.get("reason") or ""))
        self._decisions.put(key, decision, self._allow_ttl if allowed else self._deny_ttl)
        return decision

    def statistics(self) -> CacheStatistics:
        return self._decisions.statistics()


def authentication_and_authorization(
    client: TokenReviewer,
    *,
    clock: Clock = REAL_CLOCK,
    authenticator: Authenticator | None = None,
    authorizer: Authorizer | None = None,
) -> Filter:
    """controller-runtime's ``WithAuthenticationAndAuthorization``: a filter answering 401/403/500 before
    the wrapped app is called (see the module doc). The manager's client needs ``create`` on
    ``tokenreviews`` and ``subjectaccessreviews``; a scraper needs ``get`` on the non-resource URL."""
    authn = authenticator or Authenticator(client, clock=clock)
    authz = authorizer or Authorizer(client, clock=clock)

    def wrap(app: App) -> App:
        def filtered(path: str, query: Mapping[str, list[str]], headers: Mapping[str, str]) -> Response:
            token = bearer_token(headers.get("authorization"))
            if not token:
                return Response(status=401, body=b"Unauthorized\n")
            try:
                user = authn.authenticate(token)
            except ReviewFailed as exc:
                _log.error("metrics.authentication_failed", error=str(exc))
                return Response(status=500, body=b"Authentication failed\n")
            if user is None:
                _log.debug("metrics.unauthenticated", path=path)
                return Response(status=401, body=b"Unauthorized\n")
            try:
                decision = authz.authorize(user, "get", path)
            except ReviewFailed as exc:
                _log.error("metrics.authorization_failed", user=user.username, error=str(exc))
                return Response(status=500, body=f"Authorization for user {user.username} failed\n".encode())
            if not decision.allowed:
                _log.debug("metrics.forbidden", user=user.username, path=path, reason=decision.reason)
                return Response(status=403, body=f"Authorization denied for user {user.username}\n".encode())
            return app(path, query, headers)

        return filtered

    return wrap
