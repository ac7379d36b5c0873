"""The status server: training pods report their progress into ``status.trainerStatus`` of their TrainJob.

Go origin: kubeflow/trainer ``pkg/statusserver`` (``server.go``: the route, the answers and the
server-side apply; ``middleware.go``: the body limit and panic recovery; ``auth.go``: who may write;
``setup.go``: its own API client with ``statusServer.qps``/``burst``), behind the ``TrainJobStatus``
feature gate. The pods get the URL, a projected token and the CA from the ``TrainJobStatus`` plugin
(``runtime.plugins.trainjobstatus``); the Kubeflow SDK's ``update_trainjob_status`` sends the request.

The request: ``POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/<name>/status`` with
``Authorization: Bearer <token>`` and the JSON body ``{"trainerStatus": {"progressPercentage": 42,
"estimatedRemainingSeconds": 120, "metrics": [{"name": "loss", "value": "0.12"}], "lastUpdatedTime":
"2026-01-01T00:00:00Z"}}`` (``UpdateTrainJobStatusRequest``).

The answers, checked in this order (every error body is a ``metav1.Status`` in JSON, as upstream's):

=====  =========================  ========================================================================
code   reason / message           when
=====  =========================  ========================================================================
413    RequestEntityTooLarge /    ``Content-Length`` above 64 KiB (:data:`MAX_BODY_BYTES`), before the body
       ``Payload too large``      is read, whatever the path
404    NotFound / ``Not found``   any other path (namespace and name must be valid Kubernetes names)
405    MethodNotAllowed /         the route with another method (``Allow: POST``)
       ``Method not allowed``
403    Forbidden / ``Forbidden``  no bearer token, or the API server's TokenReview does not find it valid
                                  for the audience ``trainer.kubeflow.org/v1alpha1/namespaces/<ns>/
                                  trainjobs/<name>/status``, or the token is not a ServiceAccount's of
                                  namespace ``<ns>``
500    InternalError /            the TokenReview could not be made (API server down, RBAC)
       ``Internal error``
422    Invalid /                  the body is not an ``UpdateTrainJobStatusRequest`` (Go's decoding:
       ``Invalid payload``        wrong JSON types, a fraction or an out-of-range int32, a time that is not
                                  RFC 3339)
200    (the request echoed)       ``trainerStatus`` absent or null: nothing is written
422    Invalid / the API          the API server refuses the status (schema: progress 0..100, remaining
       server's message           seconds >= 0, at most 256 metrics, names and values 1..64 characters,
                                  ``lastUpdatedTime`` required); the message names the TrainJob
404    NotFound /                 the TrainJob does not exist (nothing is created)
       ``Train job not found``
500    InternalError /            any other API error
       ``Internal error``
200    (the request echoed)       written: the body as Go re-encodes it (times in UTC, whole seconds)
=====  =========================  ========================================================================

The write is a server-side apply of ``status.trainerStatus`` alone on the ``status`` subresource, field
manager ``trainer-status``, ``force``: the field manager owns the whole ``trainerStatus`` it last sent, so a
later request **replaces** it (a field left out is removed), and the controller's own status writes
(conditions, jobsStatus) are untouched. Validation is the API server's, as upstream: its schema is the one
truth, and its 422 names the field and the TrainJob.

Guarantees:

- :meth:`StatusHandler.serve` is a pure function of the request apart from its two collaborators (the
  authenticator and the status writer, both Protocols); it never raises, and no input makes it answer 5xx
  except a failing API server. :meth:`StatusHandler.check_head` gives the answers that need no body, so the
  server never reads a body it will refuse.
- :class:`StatusServer` is a manager Runnable that **does not need leader election** (every replica
  serves, as upstream), on :class:`controller.httpserver.HTTPServer` within :data:`LIMITS`: TLS 1.2 or
  later from a certificate source asked per connection (a rotated certificate is served from the next
  connection), at most :data:`MAX_CONNECTIONS` connections at once on named threads
  (``status-server/conn``; more wait in the listen queue), each with a 10 s deadline for its handshake,
  headers and body however it paces them (upstream's ``ReadTimeout``), 10 s to write the answer, headers
  at most 1 MiB (431), one request per connection. The server's own refusals (a request it cannot parse,
  a late body) are ``metav1.Status`` bodies too. Stop joins every thread.
- Tokens are never logged. The production wiring (:func:`setup_status_server`) reviews them through
  :class:`~controller.authentication.CachingAuthenticator`: an answer, yes or no, is reused for 10 s at
  most (never past the token's own expiry), so a pod reporting every second costs one TokenReview per
  10 s.

Deliberately different from upstream (see ``docs/status-server.md``):

- The token is checked by a TokenReview (:mod:`controller.authentication`) instead of verifying the JWT
  locally against the OIDC discovery document and keys of the issuer found in the controller's own token.
  Same checks (signature, expiry, audience, namespace), plus the API server's check that the token's Pod
  still exists; no JWT library; and it works wherever the API server does (outside a Pod, with any issuer).
- A wrong method on the route is 405 (upstream: 404, from its catch-all route).
- A namespace or name that is not a valid Kubernetes name is 404 at routing (upstream routes any segment
  and lets the token check or the API server refuse it).
- Trailing data after the JSON value is ``Invalid payload`` (Go's decoder ignores it); a chunked body is
  411 (the SDK, through ``requests``, sends a ``Content-Length``); a body that does not arrive within the
  read timeout is 408.
- Binds the Pod IP (or loopback), never every interface.

Deliberately missing: keep-alive and HTTP/2 (one request per connection), and metrics of its own.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Protocol

import orjson
import structlog

from controller import httpserver
from controller.authentication import (
    TOKEN_REVIEW_RESOURCE,
    Authentication,
    AuthenticationError,
    CachingAuthenticator,
    TokenReviewAuthenticator,
    bearer_token,
)
from controller.certwatcher import CertWatcher
from controller.client import Client
from controller.errors import ApiError, BadRequest, Invalid, NotFound, TransportError
from controller.gvk import BUILTIN_RESOURCES
from controller.healthz import Checker, parse_bind_address
from controller.manager import Manager
from controller.object import Object
from controller.restmapper import RESTMapper
from controller.tlsconfig import TLSOptions
from controller.trainer.config import Configuration
from controller.webhook.server import CERT_NAME, DEFAULT_CERT_DIR, KEY_NAME, CertSource
from runtime.api import constants
from runtime.features import TRAIN_JOB_STATUS
from runtime.plugins.trainjobstatus import token_audience

__all__ = [
    "DEFAULT_PORT",
    "FIELD_MANAGER",
    "MAX_BODY_BYTES",
    "Authenticator",
    "InvalidPayload",
    "Request",
    "Response",
    "StatusHandler",
    "StatusServer",
    "StatusServerError",
    "StatusWriter",
    "client_for",
    "decode_update_request",
    "encode_update_request",
    "route",
    "setup_status_server",
    "status_apply_body",
    "status_response",
]

_log = structlog.get_logger("controller.trainer.statusserver")

DEFAULT_PORT = 10443
FIELD_MANAGER = "trainer-status"
MAX_BODY_BYTES = 1 << 16
"""64 KiB: upstream's ``maxBodySize``."""
READ_TIMEOUT = 10.0
"""Seconds for a connection's handshake, headers and body (upstream's ``ReadTimeout``)."""
WRITE_TIMEOUT = 10.0
"""Seconds for the answer to be written (upstream's ``WriteTimeout``)."""
MAX_HEADER_BYTES = 1 << 20
MAX_CONNECTIONS = 32
_DIAL_TIMEOUT = 10.0
_INT32 = range(-(2**31), 2**31)
_JSON = "application/json"

# --- wire values ----------------------------------------------------------------------------------------


Request = httpserver.Request
"""One HTTP request as the handler sees it (:class:`controller.httpserver.Request`): ``headers`` has
lower-case names (first value of each)."""

Response = httpserver.Response
"""One HTTP answer (:class:`controller.httpserver.Response`)."""


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

# --- routing --------------------------------------------------------------------------------------------

_PATH = re.compile(
    r"/apis/" + re.escape(constants.API_VERSION) + r"/namespaces/([^/]+)/trainjobs/([^/]+)/status"
)
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def route(path: str) -> tuple[str, str] | None:
    """``(namespace, name)`` of a status path, or None: not the route, or not valid Kubernetes names (a
    namespace is a DNS label of at most 63 characters, a name a DNS subdomain of at most 253)."""
    match = _PATH.fullmatch(path)
    if match is None:
        return None
    namespace, name = match.group(1), match.group(2)
    if len(namespace) > 63 or not _DNS_LABEL.fullmatch(namespace):
        return None
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        return None
    return namespace, name


# --- decoding, as Go's encoding/json decodes UpdateTrainJobStatusRequest ----------------------------------


class InvalidPayload(ValueError):
    """The body is not an ``UpdateTrainJobStatusRequest``; the message says where (for logs, not clients)."""


_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|([+-])(\d{2}):(\d{2}))")


def _parse_time(value: str) -> datetime:
    """Go's ``time.Parse(time.RFC3339, value)`` (fractional seconds allowed), as an aware datetime."""
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise InvalidPayload(f"lastUpdatedTime: {value!r} is not RFC 3339")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    offset = timedelta(0)
    if match.group(8) != "Z":
        hours, minutes = int(match.group(10)), int(match.group(11))
        if hours > 23 or minutes > 59:
            raise InvalidPayload(f"lastUpdatedTime: {value!r} has an offset out of range")
        offset = timedelta(hours=hours, minutes=minutes) * (-1 if match.group(9) == "-" else 1)
    try:
        return datetime(year, month, day, hour, minute, second, tzinfo=timezone(offset))
    except ValueError as exc:  # month 13, February 30, hour 24, year 0...
        raise InvalidPayload(f"lastUpdatedTime: {value!r}: {exc}") from exc


def _format_time(value: datetime) -> str:
    """``metav1.Time`` on the wire: UTC, whole seconds (``2006-01-02T15:04:05Z``)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fields(obj: Mapping[str, Any], names: Sequence[str], where: str) -> dict[str, Any]:
    """The object's values of the struct fields ``names``, matched as Go matches them: the exact key, else a
    key equal to it case-insensitively; unknown keys are ignored; the last matching key wins."""
    folded = {name.lower(): name for name in names}
    found: dict[str, Any] = {}
    for key, value in obj.items():
        name = key if key in names else folded.get(key.lower())
        if name is not None:
            found[name] = value
    return found


def _int32(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value not in _INT32:
        raise InvalidPayload(f"{where}: must be an int32, got {type(value).__name__}")
    return value


def _string(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidPayload(f"{where}: must be a string, got {type(value).__name__}")
    return value


def _object(value: Any, where: str) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidPayload(f"{where}: must be an object, got {type(value).__name__}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Metric:
    name: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainerStatus:
    """The decoded ``trainerStatus``; None is "absent" (Go's nil pointer, nil slice, zero time)."""

    progress_percentage: int | None = None
    estimated_remaining_seconds: int | None = None
    metrics: tuple[Metric, ...] = ()
    last_updated_time: datetime | None = None

    def wire(self) -> dict[str, Any]:
        """As the apply configuration and the echo carry it (field order of the Go struct; a zero time
        is ``null``, as ``metav1.Time`` marshals it)."""
        out: dict[str, Any] = {}
        if self.progress_percentage is not None:
            out["progressPercentage"] = self.progress_percentage
        if self.estimated_remaining_seconds is not None:
            out["estimatedRemainingSeconds"] = self.estimated_remaining_seconds
        if self.metrics:
            out["metrics"] = [{"name": m.name, "value": m.value} for m in self.metrics]
        out["lastUpdatedTime"] = _format_time(self.last_updated_time) if self.last_updated_time else None
        return out


def _metric(value: Any, where: str) -> Metric:
    obj = _object(value, where)
    if obj is None:
        return Metric(name="", value="")
    found = _fields(obj, ("name", "value"), where)
    return Metric(
        name=_string(found.get("name"), f"{where}.name"), value=_string(found.get("value"), f"{where}.value")
    )


def _trainer_status(obj: Mapping[str, Any]) -> TrainerStatus:
    where = "trainerStatus"
    found = _fields(
        obj, ("progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime"), where
    )
    metrics_value = found.get("metrics")
    if metrics_value is not None and not isinstance(metrics_value, list):
        raise InvalidPayload(f"{where}.metrics: must be an array, got {type(metrics_value).__name__}")
    time_value = found.get("lastUpdatedTime")
    if time_value is not None and not isinstance(time_value, str):
        raise InvalidPayload(f"{where}.lastUpdatedTime: must be a string, got {type(time_value).__name__}")
    return TrainerStatus(
        progress_percentage=_int32(found.get("progressPercentage"), f"{where}.progressPercentage"),
        estimated_remaining_seconds=_int32(
            found.get("estimatedRemainingSeconds"), f"{where}.estimatedRemainingSeconds"
        ),
        metrics=tuple(_metric(m, f"{where}.metrics[{i}]") for i, m in enumerate(metrics_value or ())),
        last_updated_time=_parse_time(time_value) if time_value is not None else None,
    )


def decode_update_request(body: bytes) -> TrainerStatus | None:
    """The ``trainerStatus`` of an ``UpdateTrainJobStatusRequest``, None when absent or null; raises
    :class:`InvalidPayload` (see the module doc for what Go's decoder refuses)."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidPayload(f"not JSON: {exc}") from exc
    request = _object(document, "request")
    if request is None:
        return None  # a JSON null: Go leaves the struct as it is
    value = _fields(request, ("trainerStatus",), "request").get("trainerStatus")
    trainer_status = _object(value, "trainerStatus")
    return None if trainer_status is None else _trainer_status(trainer_status)


def encode_update_request(trainer_status: TrainerStatus | None) -> bytes:
    """The echo of a successful request: the decoded request re-encoded (``omitempty``), newline-ended."""
    body = {} if trainer_status is None else {"trainerStatus": trainer_status.wire()}
    return orjson.dumps(body) + b"\n"


def status_apply_body(namespace: str, name: str, trainer_status: TrainerStatus) -> dict[str, Any]:
    """The server-side apply body for the ``status`` subresource: ``status.trainerStatus`` alone."""
    return {
        "apiVersion": constants.API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "status": {"trainerStatus": trainer_status.wire()},
    }


# --- the handler ----------------------------------------------------------------------------------------


class Authenticator(Protocol):
    """Whether a bearer token is valid for an audience (a
    :class:`~controller.authentication.TokenReviewAuthenticator`, in production behind a
    :class:`~controller.authentication.CachingAuthenticator`)."""

    def authenticate(self, token: str, audiences: Sequence[str]) -> Authentication: ...


class StatusWriter(Protocol):
    """Writes the status: :class:`controller.client.Client` (its ``apply_status``)."""

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


# --- the server -----------------------------------------------------------------------------------------


class StatusServerError(RuntimeError):
    """The status server cannot be configured or started."""


_ERROR_REASONS = {
    400: "BadRequest",
    408: "Timeout",
    411: "BadRequest",
    413: "RequestEntityTooLarge",
    417: "BadRequest",
    431: "RequestHeaderFieldsTooLarge",
}


def _error_response(code: int, message: str) -> Response:
    """The connection server's own refusals (a request it cannot parse, a late body...) as a Status."""
    if code == 411:
        return LENGTH_REQUIRED
    if code == 408:
        return REQUEST_TIMEOUT
    if code == 413:
        return PAYLOAD_TOO_LARGE
    if code >= 500:
        return PANIC
    return status_response(code, _ERROR_REASONS.get(code, "BadRequest"), message)


LIMITS = httpserver.Limits(
    max_connections=MAX_CONNECTIONS,
    read_header_timeout=READ_TIMEOUT,
    read_timeout=READ_TIMEOUT,
    write_timeout=WRITE_TIMEOUT,
    max_header_bytes=MAX_HEADER_BYTES,
    max_body_bytes=MAX_BODY_BYTES,
)
"""Upstream's ``ReadTimeout`` and ``WriteTimeout`` (10 s each), its body limit (64 KiB), Go's default
``MaxHeaderBytes`` (1 MiB), and at most 32 connections at once."""


class StatusServer:
    """The status server as a manager Runnable (see the module doc)."""

    name = "status-server"

    def __init__(
        self,
        handler: StatusHandler,
        *,
        certs: CertSource,
        bind_address: str = f"127.0.0.1:{DEFAULT_PORT}",
        read_timeout: float = READ_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
        allow_all_interfaces: bool = False,
    ) -> None:
        """``bind_address`` is ``host:port`` (port 0: any free port); ``certs`` gives the serving
        certificate per connection (a :class:`~controller.certwatcher.CertWatcher`)."""
        try:
            address = parse_bind_address(bind_address, allow_all_interfaces=allow_all_interfaces)
        except ValueError as exc:
            raise StatusServerError(f"status server: {exc}") from exc
        if address is None:
            raise StatusServerError(f"status server: bind address {bind_address!r} disables it")
        try:
            self.limits = replace(
                LIMITS,
                max_connections=max_connections,
                read_header_timeout=read_timeout,
                read_timeout=read_timeout,
            )
        except ValueError as exc:
            raise StatusServerError(f"status server: {exc}") from exc
        self.handler = handler
        self.certs = certs
        self._address = address
        self._lock = threading.Lock()
        self._server: httpserver.HTTPServer | None = None

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); the real port once started."""
        with self._lock:
            server = self._server
        return self._address if server is None else server.address

    def need_leader_election(self) -> bool:
        return False

    def _check_head(self, request: Request) -> Response | None:
        return self.handler.check_head(request.method, request.path, request.content_length)

    def _serve(self, request: Request) -> Response:
        started = time.monotonic()
        response = self.handler.serve(request)
        _log.debug(
            "status_server.request",
            method=request.method,
            path=request.path,
            code=response.status,
            duration_s=round(time.monotonic() - started, 6),
        )
        return response

    def start(self, stop: threading.Event) -> None:
        """Binds and serves on an owned thread (``status-server/serve``); raises :class:`StatusServerError`
        if the address is taken."""
        with self._lock:
            if self._server is not None:
                raise StatusServerError("the status server was already started")
            server = httpserver.HTTPServer(
                self.name,
                self._address,
                self._serve,
                limits=self.limits,
                check_head=self._check_head,
                error_response=_error_response,
                tls_context=self.certs.context,
            )
            try:
                server.start()
            except httpserver.HTTPServerError as exc:
                raise StatusServerError(
                    f"cannot serve the status server on {self._address[0]}:{self._address[1]}: {exc}"
                ) from exc
            self._server = server
        host, port = self.address
        _log.info("status_server.serving", address=f"{host}:{port}", certs_ready=self.certs.ready())

    def stop(self, timeout: float | None = None) -> bool:
        """Stops accepting, ends connections still waiting for their request, finishes those being
        answered and joins every thread within ``timeout``. Idempotent; returns whether every thread
        ended."""
        with self._lock:
            server = self._server
        if server is None or not server.serving:
            return True
        stopped = server.stop(timeout)
        _log.info("status_server.stopped")
        return stopped

    def statistics(self) -> httpserver.ServerStatistics:
        with self._lock:
            server = self._server
        return httpserver.ServerStatistics() if server is None else server.statistics()

    def _dial(self) -> None:
        """A TLS handshake on the server's address, unless every connection slot is taken: a server that is
        full is busy, not wedged, and a probe queued behind those connections would time out and get the
        replica restarted (or unready) by whoever holds them."""
        with self._lock:
            server = self._server
        if server is not None and server.statistics().saturated:
            return
        httpserver.dial_tls(self.address, "status server", _DIAL_TIMEOUT)

    def _started(self) -> bool:
        with self._lock:
            return self._server is not None and self._server.serving

    def ready_checker(self) -> Checker:
        """``status-server-readyz``: fails until the server was started, has a certificate, and completes a
        TLS handshake on its address."""

        def check() -> None:
            if not self._started():
                raise RuntimeError("status server has not been started yet")
            if not self.certs.ready():
                raise RuntimeError("certificates are not ready")
            self._dial()

        return check

    def health_checker(self) -> Checker:
        """``status-server-healthz``: once started with a certificate, fails when no TLS handshake completes
        (a wedged server). Passes before that, so a liveness probe never kills a replica that is still
        syncing its caches or waiting for the certificate rotator (readiness waits for those)."""

        def check() -> None:
            if self._started() and self.certs.ready():
                self._dial()

        return check

    def __repr__(self) -> str:
        host, port = self.address
        state = "serving" if self._started() else "stopped"
        return f"StatusServer({host}:{port}, {state})"


# --- wiring ---------------------------------------------------------------------------------------------

HEALTHZ_CHECK = "status-server-healthz"
READYZ_CHECK = "status-server-readyz"
CLIENT_GO_DEFAULT_QPS = 5.0
CLIENT_GO_DEFAULT_BURST = 10


def client_for(manager_client: Client, config: Configuration) -> Client:
    """The status server's own client (upstream's ``createClient``): the manager's configuration and
    credentials, its own connection pool, ``statusServer.qps``/``burst`` (a 0 reads as client-go's 5/10)
    with one token bucket per resource (TokenReviews and TrainJobs each get theirs), and TokenReviews
    resolved without discovery."""
    transport = manager_client.transport.with_options(read_timeout=READ_TIMEOUT, connect_timeout=READ_TIMEOUT)
    client = Client(
        transport,
        qps=config.status_server.qps or CLIENT_GO_DEFAULT_QPS,
        burst=config.status_server.burst or CLIENT_GO_DEFAULT_BURST,
    )
    client.mapper = RESTMapper(client, builtins=(*BUILTIN_RESOURCES, TOKEN_REVIEW_RESOURCE))
    return client


def setup_status_server(
    manager: Manager,
    config: Configuration,
    *,
    bind_address: str | None = None,
    cert_dir: str | os.PathLike[str] = DEFAULT_CERT_DIR,
) -> StatusServer | None:
    """With the ``TrainJobStatus`` gate on: the status server on ``bind_address`` (default
    ``127.0.0.1:<statusServer.port>``; the entry point resolves ``:<port>`` against the Pod IP), with the
    certificate ``cert_dir/tls.crt``/``tls.key`` (the webhook server's, reloaded when it changes) and the
    ``tls`` options, added to ``manager`` with the checks ``status-server-healthz`` and
    ``status-server-readyz``. None (and nothing added) with the gate off."""
    if not config.feature_gates.enabled(TRAIN_JOB_STATUS):
        return None
    if bind_address is None:
        bind_address = f"127.0.0.1:{config.status_server.port}"
    directory = os.fspath(cert_dir)
    tls = TLSOptions(
        min_version=config.tls.min_version,
        cipher_suites=tuple(config.tls.cipher_suites),
        next_protos=tuple(config.tls.next_protos),
    )
    certs = CertWatcher(os.path.join(directory, CERT_NAME), os.path.join(directory, KEY_NAME), tls=tls)
    client = client_for(manager.client, config)
    reviews = CachingAuthenticator(TokenReviewAuthenticator(client), clock=manager.clock)
    handler = StatusHandler(reviews, client)
    server = StatusServer(
        handler,
        certs=certs,
        bind_address=bind_address,
        allow_all_interfaces=manager.options.allow_all_interfaces,
    )
    manager.add(server)
    manager.add_healthz_check(HEALTHZ_CHECK, server.health_checker())
    manager.add_readyz_check(READYZ_CHECK, server.ready_checker())
    return server
