"""The webhook server: HTTPS on one address, admission webhooks by path, certificates reloaded live.

Go origin: controller-runtime ``pkg/webhook/server.go`` (``DefaultServer``: ``Register``, ``Start``,
``StartedChecker``, ``NeedLeaderElection() == false``, port 9443, certificates ``tls.crt``/``tls.key`` in
``<tmp>/k8s-webhook-server/serving-certs``), ``pkg/webhook/admission/http.go`` (``maxRequestSize``: 7 MiB),
``pkg/internal/httpserver`` and ``pkg/certwatcher``.

Guarantees:

- A manager Runnable that **does not need leader election**: every replica serves webhooks.
- TLS from a :class:`CertSource` (default: :class:`~controller.serving.certwatcher.CertWatcher` over
  ``<cert_dir>/tls.crt`` and ``tls.key``) asked once per connection, so certificates that another component
  (the certificate rotator) writes into the directory are served from the next connection on, without a
  restart. **TLS 1.2 or later**, whatever ``tls.min_version`` says (1.0 and 1.1 are refused when the
  options are built); ALPN ``http/1.1`` (:mod:`controller.serving.tlsconfig`). Before a certificate exists,
  connections are closed after accept and the readiness check (:meth:`WebhookServer.started_checker`)
  fails with "certificates are not ready".
- ``POST <registered path>`` only: another method is 405, another path 404. The body must have a
  ``Content-Length`` (411 without one) of at most ``max_body_bytes`` (7 MiB, controller-runtime's limit;
  413 above it, without reading it). Everything about the review itself is
  :class:`~controller.serving.webhook.admission.Webhook`'s (400 for a malformed one). No input makes the
  server answer 5xx except a handler that raises (500 inside a review), and nothing a client sends stops it.
- Bounded (:class:`controller.serving.httpserver.HTTPServer`): at most ``max_connections`` connections are
  served at once, each on its own named thread (``webhook-server/conn``); further connections wait in the
  listen queue until one finishes. A request must complete its headers and body (the first request on a
  connection its TLS handshake too) within ``read_timeout`` seconds (10, the API server's default webhook
  timeout) in total, however it paces them, so a slow or silent client loses its slot instead of holding
  it. Request line and headers at most 1 MiB (431). Responses leave in one buffered write with
  ``TCP_NODELAY`` (no Nagle stall).
- **Keep-alive**, as Go's server: the API server's webhook client keeps its connections, so a review on a
  kept connection pays no TCP or TLS handshake. A connection carries reviews one after another; each review
  has its own ``read_timeout`` from its first byte; an idle connection is closed after
  :data:`IDLE_TIMEOUT` (120 s, longer than the client's own 90 s, so the client normally closes first); and
  with every slot taken, the connection idle the longest is closed to make room for a waiting one, so kept
  connections never lock a new client out. The certificate of a kept connection is the one it was opened
  with; a rotated certificate is served from the next connection.
- Binds where it is told: loopback or an explicit address; every-interface addresses only with
  ``allow_all_interfaces`` (:func:`controller.serving.app.parse_bind_address`).
- :meth:`WebhookServer.stop` stops accepting, ends connections still waiting for their request, finishes
  those being answered, and joins every thread it started (``webhook-server/serve``, the connection threads).
- Metrics (:mod:`controller.serving.webhook.metrics`) per registered path: requests by HTTP status code (411
  and 413 included), requests in flight, latency.

Deliberately missing: HTTP/2, client certificate authentication (``ClientCAName``), a custom mux, and chunked
request bodies (the API server sends a ``Content-Length``).
"""

from __future__ import annotations

import os
import ssl
import threading
import time
from pathlib import Path
from typing import Protocol

import structlog

import controller.serving.webhook.metrics as webhook_metrics
from controller.serving.app import parse_bind_address
from controller.serving.certwatcher import CertWatcher
from controller.serving.healthz import Checker
from controller.serving.httpserver import (
    HTTPServer,
    HTTPServerError,
    Limits,
    Request,
    Response,
    ServerStatistics,
    dial_tls,
)
from controller.serving.tlsconfig import TLSOptions
from controller.serving.webhook.admission import Handler, Webhook

__all__ = [
    "DEFAULT_CERT_DIR",
    "DEFAULT_PORT",
    "MAX_BODY_BYTES",
    "CertSource",
    "WebhookServer",
    "WebhookServerError",
]

_log = structlog.get_logger("controller.serving.webhook.server")

DEFAULT_PORT = 9443
DEFAULT_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
"""controller-runtime's default: ``<os.TempDir()>/k8s-webhook-server/serving-certs``."""
CERT_NAME = "tls.crt"
KEY_NAME = "tls.key"
MAX_BODY_BYTES = 7 * 1024 * 1024
"""controller-runtime's ``maxRequestSize``: an object is at most 3 MiB (etcd's 1.5 MiB, in two copies for an
UPDATE), and the rest of a review less than 1 MiB."""
MAX_HEADER_BYTES = 1 << 20
READ_TIMEOUT = 10.0
WRITE_TIMEOUT = 10.0
IDLE_TIMEOUT = 120.0
"""Seconds a kept connection may wait for its next review. controller-runtime sets no ``IdleTimeout`` (Go
then never closes an idle connection); ours is a bound, longer than the 90 s after which the API server's
webhook client closes an idle connection itself."""
MAX_CONNECTIONS = 32


class WebhookServerError(RuntimeError):
    """The server cannot be configured or started (a duplicate path, an address it may not bind)."""


class CertSource(Protocol):
    """Where the server's certificate comes from: asked once per connection, so it may change at any time."""

    def context(self) -> ssl.SSLContext:
        """The context to accept a connection with; raises ``CertificateNotReady`` before one exists."""
        ...

    def ready(self) -> bool:
        """Whether :meth:`context` would return one."""
        ...


_NOT_FOUND = Response(status=404, body=b"404 page not found\n")
_METHOD_NOT_ALLOWED = Response(status=405, body=b"method not allowed\n", headers=(("Allow", "POST"),))
_LENGTH_REQUIRED = Response(status=411, body=b"a Content-Length is required\n")


class WebhookServer:
    """controller-runtime's webhook server: a Runnable serving registered admission handlers over HTTPS."""

    name = "webhook-server"

    def __init__(
        self,
        *,
        bind_address: str = f"127.0.0.1:{DEFAULT_PORT}",
        cert_dir: str | os.PathLike[str] = DEFAULT_CERT_DIR,
        cert_name: str = CERT_NAME,
        key_name: str = KEY_NAME,
        tls: TLSOptions | None = None,
        certs: CertSource | None = None,
        read_timeout: float = READ_TIMEOUT,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_connections: int = MAX_CONNECTIONS,
        allow_all_interfaces: bool = False,
    ) -> None:
        """``bind_address`` is ``host:port`` (port 0: any free port). ``certs`` defaults to a
        :class:`~controller.serving.certwatcher.CertWatcher` over ``cert_dir/cert_name`` and
        ``cert_dir/key_name``."""
        try:
            address = parse_bind_address(bind_address, allow_all_interfaces=allow_all_interfaces)
        except ValueError as exc:
            raise WebhookServerError(f"webhook server: {exc}") from exc
        if address is None:
            raise WebhookServerError(f"webhook server: bind address {bind_address!r} disables it")
        try:
            self.limits = Limits(
                max_connections=max_connections,
                read_header_timeout=read_timeout,
                read_timeout=read_timeout,
                write_timeout=WRITE_TIMEOUT,
                max_header_bytes=MAX_HEADER_BYTES,
                max_body_bytes=max_body_bytes,
                idle_timeout=IDLE_TIMEOUT,
            )
        except ValueError as exc:
            raise WebhookServerError(f"webhook server: {exc}") from exc
        self._address = address
        self.cert_dir = Path(cert_dir)
        self.certs: CertSource = certs or CertWatcher(
            self.cert_dir / cert_name, self.cert_dir / key_name, tls=tls
        )
        self._lock = threading.Lock()
        self._webhooks: dict[str, Webhook] = {}
        self._server: HTTPServer | None = None

    def register(self, path: str, handler: Handler) -> None:
        """Serves ``handler`` at ``path`` (before start); a path registered twice is an error."""
        if not path.startswith("/"):
            raise WebhookServerError(f"webhook path {path!r} must start with '/'")
        with self._lock:
            if self._server is not None:
                raise WebhookServerError("webhooks must be registered before the server starts")
            if path in self._webhooks:
                raise WebhookServerError(f"can't register duplicate path: {path}")
            self._webhooks[path] = Webhook(path, handler)
        webhook_metrics.instrument(path)
        _log.info("webhook.registered", path=path)

    @property
    def paths(self) -> list[str]:
        with self._lock:
            return sorted(self._webhooks)

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); the real port once started."""
        with self._lock:
            server = self._server
        return self._address if server is None else server.address

    def need_leader_election(self) -> bool:
        return False

    # --- serving ----------------------------------------------------------------------------------------

    def _check_head(self, request: Request) -> Response | None:
        """404, 405, 411 and 413 from the request line and headers, before the body is read."""
        if request.path not in self._webhooks:
            return _NOT_FOUND
        if request.method != "POST":
            return _METHOD_NOT_ALLOWED
        answer: Response | None = None
        if request.content_length is None:
            answer = _LENGTH_REQUIRED
        elif request.content_length > self.limits.max_body_bytes:
            limit = self.limits.max_body_bytes
            answer = Response(
                status=413, body=f"request entity is too large; limit is {limit} bytes\n".encode()
            )
        if answer is not None:
            webhook_metrics.requests_total.labels(code=str(answer.status), webhook=request.path).inc()
        return answer

    def _serve(self, request: Request) -> Response:
        webhook = self._webhooks[request.path]  # _check_head answered every other path
        gauge = webhook_metrics.requests_in_flight.labels(webhook=request.path)
        gauge.inc()
        started = time.monotonic()
        status = 500
        try:
            answer = webhook.serve(request.body, request.headers.get("content-type", ""))
            status = answer.status
            return Response(status=answer.status, body=answer.body, content_type=answer.content_type)
        finally:
            gauge.dec()
            webhook_metrics.request_latency.labels(webhook=request.path).observe(time.monotonic() - started)
            webhook_metrics.requests_total.labels(code=str(status), webhook=request.path).inc()

    def start(self, stop: threading.Event) -> None:
        """Binds and serves on an owned thread; raises :class:`WebhookServerError` if the address is taken."""
        with self._lock:
            if self._server is not None:
                raise WebhookServerError("the webhook server was already started")
            server = HTTPServer(
                self.name,
                self._address,
                self._serve,
                limits=self.limits,
                check_head=self._check_head,
                tls_context=self.certs.context,
            )
            try:
                server.start()
            except HTTPServerError as exc:
                raise WebhookServerError(
                    f"cannot serve webhooks on {self._address[0]}:{self._address[1]}: {exc}"
                ) from exc
            self._server = server
        host, port = self.address
        _log.info(
            "webhook.serving", address=f"{host}:{port}", paths=self.paths, certs_ready=self.certs.ready()
        )

    def stop(self, timeout: float | None = None) -> bool:
        """Stops accepting and joins every thread within ``timeout`` (see the module doc). Idempotent;
        returns whether every thread ended."""
        with self._lock:
            server = self._server
        if server is None or not server.serving:
            return True
        stopped = server.stop(timeout)
        _log.info("webhook.stopped")
        return stopped

    def started_checker(self) -> Checker:
        """A readiness check (Go ``StartedChecker``): fails until the certificates exist and the server
        answers a TLS handshake on its address."""

        def check() -> None:
            with self._lock:
                server = self._server
            if server is None or not server.serving:
                raise RuntimeError("webhook server has not been started yet")
            if not self.certs.ready():
                raise RuntimeError("certificates are not ready")
            dial_tls(self.address, "webhook server")

        return check

    def statistics(self) -> ServerStatistics:
        """The connection server's statistics (:class:`controller.serving.httpserver.ServerStatistics`)."""
        with self._lock:
            server = self._server
        return ServerStatistics() if server is None else server.statistics()

    def __repr__(self) -> str:
        host, port = self.address
        with self._lock:
            server = self._server
        state = "serving" if server is not None and server.serving else "stopped"
        return f"WebhookServer({host}:{port}, paths={len(self._webhooks)}, {state})"
