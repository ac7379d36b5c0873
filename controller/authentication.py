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

Deliberately missing: a cache of reviews (every call is a request, and a client
has a token bucket per resource, so reviews do not slow the caller's other writes), the
SubjectAccessReview half of controller-runtime's filter (a caller that needs authorization decides it from
the :class:`UserInfo`), and local JWT verification (upstream's status server verifies the token itself
with OIDC discovery; see ``docs/status-server.md`` for why this port asks the API server).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from controller.errors import ApiError, TransportError
from controller.gvk import Resource
from controller.object import Object

__all__ = [
    "SERVICE_ACCOUNT_PREFIX",
    "TOKEN_REVIEW_API_VERSION",
    "TOKEN_REVIEW_RESOURCE",
    "Authentication",
    "AuthenticationError",
    "TokenReviewAuthenticator",
    "TokenReviewer",
    "UserInfo",
    "bearer_token",
]

_log = structlog.get_logger("controller.authentication")

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
    """What creates the review: :class:`controller.client.Client` (its ``create``)."""

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
