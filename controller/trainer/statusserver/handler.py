"""The status handler: who may write (a TokenReview for the TrainJob's audience, a ServiceAccount of its
namespace), the answers as ``metav1.Status`` bodies, and the write (see the package doc for the table).

Go origin: kubeflow/trainer ``pkg/statusserver`` (``server.go``: the handler and its answers; ``auth.go``:
who may write; ``middleware.go``: the body limit and panic recovery).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import orjson
import structlog

from controller.client.errors import ApiError, BadRequest, Invalid, NotFound, TransportError
from controller.client.object import Object
from controller.serving import httpserver
from controller.serving.authentication import (
    Authentication,
    AuthenticationError,
    bearer_token,
)
from controller.trainer.statusserver.request import (
    InvalidPayload,
    decode_update_request,
    encode_update_request,
    route,
    status_apply_body,
)
from runtime.plugins.trainjobstatus import token_audience

__all__ = [
    "FIELD_MANAGER",
    "MAX_BODY_BYTES",
    "Authenticator",
    "Request",
    "Response",
    "StatusHandler",
    "StatusWriter",
    "status_response",
]

_log = structlog.get_logger("controller.trainer.statusserver")

FIELD_MANAGER = "trainer-status"
MAX_BODY_BYTES = 1 << 16
"""64 KiB: upstream's ``maxBodySize``."""
_JSON = "application/json"

Request = httpserver.Request
"""One HTTP request as the handler sees it (:class:`controller.serving.httpserver.Request`): ``headers`` has
lower-case names (first value of each)."""

Response = httpserver.Response
"""One HTTP answer (:class:`controller.serving.httpserver.Response`)."""


def status_response(
    code: int, reason: str, message: str, *, headers: Sequence[tuple[str, str]] = ()
) -> Response:
    """A ``metav1.Status`` failure, encoded as upstream's ``json.Encoder`` writes it (trailing newline)."""
    body = {"metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}
    return Response(status=code, body=orjson.dumps(body) + b"\n", content_type=_JSON, headers=tuple(headers))


PAYLOAD_TOO_LARGE = status_response(413, "RequestEntityTooLarge", "Payload too large")
NOT_FOUND = status_response(404, "NotFound", "Not found")
METHOD_NOT_ALLOWED = status_response(
    405, "MethodNotAllowed", "Method not allowed", headers=[("Allow", "POST")]
)
FORBIDDEN = status_response(403, "Forbidden", "Forbidden")
INTERNAL_ERROR = status_response(500, "InternalError", "Internal error")
INVALID_PAYLOAD = status_response(422, "Invalid", "Invalid payload")
TRAINJOB_NOT_FOUND = status_response(404, "NotFound", "Train job not found")
PANIC = status_response(500, "InternalError", "Internal Server Error")
LENGTH_REQUIRED = status_response(411, "BadRequest", "Content-Length required")
REQUEST_TIMEOUT = status_response(408, "Timeout", "Request body not received in time")

# --- the handler ----------------------------------------------------------------------------------------


class Authenticator(Protocol):
    """Whether a bearer token is valid for an audience (a
    :class:`~controller.serving.authentication.TokenReviewAuthenticator`, in production behind a
    :class:`~controller.serving.authentication.CachingAuthenticator`)."""

    def authenticate(self, token: str, audiences: Sequence[str]) -> Authentication: ...


class StatusWriter(Protocol):
    """Writes the status: :class:`controller.client.client.Client` (its ``apply_status``)."""

    def apply_status(self, obj: Mapping[str, Any], field_manager: str, *, force: bool = True) -> Object: ...


class StatusHandler:
    """Answers status requests (see the module doc for the table). Thread-safe: it holds no state."""

    def __init__(self, authenticator: Authenticator, writer: StatusWriter) -> None:
        self._authenticator = authenticator
        self._writer = writer

    def check_head(self, method: str, path: str, content_length: int | None) -> Response | None:
        """The answer that needs no body (413, 404, 405), or None: read the body and :meth:`serve`."""
        if content_length is not None and content_length > MAX_BODY_BYTES:
            return PAYLOAD_TOO_LARGE
        if route(path) is None:
            return NOT_FOUND
        if method != "POST":
            return METHOD_NOT_ALLOWED
        return None

    def serve(self, request: Request) -> Response:
        """The answer to ``request``; never raises (a bug is 500 ``Internal Server Error``, logged)."""
        try:
            return self._serve(request)
        except Exception:  # noqa: BLE001 - upstream's recovery middleware: one bad request never kills the server
            _log.exception("status_server.handler_failed", method=request.method, path=request.path)
            return PANIC

    def _serve(self, request: Request) -> Response:
        early = self.check_head(request.method, request.path, len(request.body))
        if early is not None:
            return early
        located = route(request.path)
        assert located is not None  # check_head routed it
        namespace, name = located
        try:
            if not self.authorized(request.headers.get("authorization"), namespace, name):
                return FORBIDDEN
        except AuthenticationError as exc:
            _log.error("status_server.authentication_failed", namespace=namespace, name=name, error=str(exc))
            return INTERNAL_ERROR
        try:
            trainer_status = decode_update_request(request.body)
        except InvalidPayload as exc:
            _log.debug("status_server.invalid_payload", namespace=namespace, name=name, error=str(exc))
            return INVALID_PAYLOAD
        if trainer_status is None:
            return Response(status=200, body=encode_update_request(None), content_type=_JSON)
        try:
            self._writer.apply_status(
                status_apply_body(namespace, name, trainer_status), FIELD_MANAGER, force=True
            )
        except (Invalid, BadRequest) as exc:
            message = exc.message or f"Validation failed: {exc}"
            return status_response(422, "Invalid", message)
        except NotFound:
            return TRAINJOB_NOT_FOUND
        except (ApiError, TransportError) as exc:
            _log.error("status_server.update_failed", namespace=namespace, name=name, error=str(exc))
            return INTERNAL_ERROR
        _log.debug("status_server.updated", namespace=namespace, name=name)
        return Response(status=200, body=encode_update_request(trainer_status), content_type=_JSON)

    def authorized(self, header: str | None, namespace: str, name: str) -> bool:
        """Whether the ``Authorization`` header carries a token valid for this TrainJob's audience, of a
        ServiceAccount in its namespace; raises :class:`AuthenticationError` when that cannot be known."""
        token = bearer_token(header)
        if not token:
            _log.info("status_server.forbidden", namespace=namespace, name=name, reason="no bearer token")
            return False
        result = self._authenticator.authenticate(token, [token_audience(namespace, name)])
        if not result.authenticated:
            _log.info("status_server.forbidden", namespace=namespace, name=name, reason=result.error)
            return False
        account = result.user.service_account()
        if account is None or account[0] != namespace:
            _log.info(
                "status_server.forbidden",
                namespace=namespace,
                name=name,
                reason="not a service account of the TrainJob's namespace",
                user=result.user.username,
            )
            return False
        return True

    def __repr__(self) -> str:
        return f"StatusHandler({self._authenticator!r})"
