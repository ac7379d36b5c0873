"""The status server: a manager Runnable on every replica, HTTPS within upstream's timeouts and body limit,
with readiness and liveness checks that complete a TLS handshake.

Go origin: kubeflow/trainer ``pkg/statusserver/server.go`` (``NewServer``, ``Start``: the ``http.Server`` and
its timeouts).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import structlog

from controller.serving import httpserver
from controller.serving.app import parse_bind_address
from controller.serving.healthz import Checker
from controller.serving.webhook.server import CertSource
from controller.trainer.statusserver.handler import (
    LENGTH_REQUIRED,
    MAX_BODY_BYTES,
    PANIC,
    PAYLOAD_TOO_LARGE,
    REQUEST_TIMEOUT,
    Request,
    Response,
    StatusHandler,
    status_response,
)

__all__ = [
    "DEFAULT_PORT",
    "LIMITS",
    "StatusServer",
    "StatusServerError",
]

_log = structlog.get_logger("controller.trainer.statusserver")

DEFAULT_PORT = 10443
READ_TIMEOUT = 10.0
"""Seconds for a connection's handshake, headers and body (upstream's ``ReadTimeout``)."""
WRITE_TIMEOUT = 10.0
"""Seconds for the answer to be written (upstream's ``WriteTimeout``)."""
MAX_HEADER_BYTES = 1 << 20
MAX_CONNECTIONS = 32
_DIAL_TIMEOUT = 10.0


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
    idle_timeout=READ_TIMEOUT,
)
"""Upstream's ``ReadTimeout`` and ``WriteTimeout`` (10 s each), its body limit (64 KiB), Go's default
``MaxHeaderBytes`` (1 MiB), at most 32 connections at once, and keep-alive with a 10 s idle timeout (upstream
sets no ``IdleTimeout``, so Go uses its ``ReadTimeout``)."""


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
        certificate per connection (a :class:`~controller.serving.certwatcher.CertWatcher`)."""
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
