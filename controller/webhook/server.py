"""The webhook server: HTTPS on one address, admission webhooks by path, certificates reloaded live.

Go origin: controller-runtime ``pkg/webhook/server.go`` (``DefaultServer``: ``Register``, ``Start``,
``StartedChecker``, ``NeedLeaderElection() == false``, port 9443, certificates ``tls.crt``/``tls.key`` in
``<tmp>/k8s-webhook-server/serving-certs``), ``pkg/internal/httpserver`` and ``pkg/certwatcher``.

Guarantees:

- A manager Runnable that **does not need leader election**: every replica serves webhooks.
- TLS from a :class:`CertSource` (default: :class:`~controller.certwatcher.CertWatcher` over
  ``<cert_dir>/tls.crt`` and ``tls.key``) asked once per connection, so certificates that another component
  (the certificate rotator) writes into the directory are served from the next connection on, without a
  restart. TLS 1.2 or later unless ``tls.min_version`` says otherwise; ALPN ``http/1.1``
  (:mod:`controller.tlsconfig`). Before a certificate exists, connections are closed after accept and the
  readiness check (:meth:`WebhookServer.started_checker`) fails with "certificates are not ready".
- ``POST <registered path>`` only: another method is 405, another path 404. The body must have a
  ``Content-Length`` (411 without one) of at most ``max_body_bytes`` (7 MiB, controller-runtime's limit;
  413 above it, without reading it). Everything about the review itself is
  :class:`~controller.webhook.admission.Webhook`'s (400 for a malformed one). No input makes the server
  answer 5xx except a handler that raises (500 inside a review), and nothing a client sends stops it.
- Bounded: at most ``max_connections`` connections are served at once, each on its own named thread
  (``webhook-server/conn``); further connections wait in the listen backlog until one finishes. A
  connection must complete its TLS handshake, headers and body within ``read_timeout`` seconds (10, the
  API server's default webhook timeout) in total, so a slow or silent client loses its slot instead of
  holding it. One request per connection (``Connection: close``): an idle keep-alive connection never holds
  a slot. Responses leave in one buffered write with ``TCP_NODELAY`` (no Nagle stall).
- Binds where it is told: loopback or an explicit address; every-interface addresses only with
  ``allow_all_interfaces`` (:func:`controller.healthz.parse_bind_address`).
- :meth:`WebhookServer.stop` stops accepting, ends connections still waiting for their request, finishes
  those being answered, and joins every thread it started (``webhook-server/serve``, the connection threads).
- Metrics (:mod:`controller.webhook.metrics`) per registered path: requests by HTTP status code, requests in
  flight, latency.

Deliberately missing: HTTP/2, keep-alive, client certificate authentication (``ClientCAName``), a custom
mux, and chunked request bodies (the API server sends a ``Content-Length``).
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
import socketserver
import ssl
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import structlog

import controller.webhook.metrics as webhook_metrics
from controller.certwatcher import CertificateNotReady, CertWatcher
from controller.healthz import Checker, parse_bind_address
from controller.tlsconfig import TLSOptions
from controller.webhook.admission import Handler, HTTPAnswer, Webhook

__all__ = [
    "DEFAULT_CERT_DIR",
    "DEFAULT_PORT",
    "MAX_BODY_BYTES",
    "CertSource",
    "WebhookServer",
    "WebhookServerError",
]

_log = structlog.get_logger("controller.webhook.server")

DEFAULT_PORT = 9443
DEFAULT_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
"""controller-runtime's default: ``<os.TempDir()>/k8s-webhook-server/serving-certs``."""
CERT_NAME = "tls.crt"
KEY_NAME = "tls.key"
MAX_BODY_BYTES = 7 * 1024 * 1024
READ_TIMEOUT = 10.0
MAX_CONNECTIONS = 32
_STARTED_DIAL_TIMEOUT = 10.0


def dial_tls(address: tuple[str, int], what: str, timeout: float = _STARTED_DIAL_TIMEOUT) -> None:
    """Complete a TLS handshake with a server of this process (certificate not verified: only that it
    answers), for readiness checks; raises RuntimeError naming ``what`` when it does not."""
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection(address, timeout=timeout) as raw, client.wrap_socket(raw):
            pass
    except OSError as exc:
        raise RuntimeError(f"{what} is not reachable: {exc}") from exc


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


class _DeadlineReader(io.RawIOBase):
    """Reads from a socket until a fixed deadline: each read may wait only for the time that is left."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request was not received within the read timeout")
        self._sock.settimeout(remaining)
        return self._sock.recv_into(buffer)


class _Connection:
    """What a request handler gets as its ``request``: the TLS socket and the connection's deadline."""

    __slots__ = ("deadline", "sock")

    def __init__(self, sock: ssl.SSLSocket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline


class _RequestHandler(BaseHTTPRequestHandler):
    """One request per connection, read against the connection's deadline; answers written in one write."""

    protocol_version = "HTTP/1.1"
    server: _TLSServer
    request: _Connection

    def setup(self) -> None:
        conn = self.request
        self.connection = conn.sock
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rfile = io.BufferedReader(_DeadlineReader(conn.sock, conn.deadline), 65536)
        self.wfile = conn.sock.makefile("wb")  # buffered: the whole answer leaves on flush

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            self.wfile.flush()
        self.wfile.close()
        self.rfile.close()

    def _write(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.close_connection = True
        self.connection.settimeout(self.server.read_timeout)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        webhook = self.server.webhooks.get(path)
        if webhook is None:
            self._write(404, b"404 page not found\n")
            return
        gauge = webhook_metrics.requests_in_flight.labels(webhook=path)
        gauge.inc()
        started = time.monotonic()
        status = 500
        try:
            answer = self._answer(webhook)
            if answer is None:
                return  # the client went away or timed out: nothing to write to
            status = answer.status
            self._write(answer.status, answer.body, answer.content_type)
        finally:
            gauge.dec()
            webhook_metrics.request_latency.labels(webhook=path).observe(time.monotonic() - started)
            webhook_metrics.requests_total.labels(code=str(status), webhook=path).inc()

    def _answer(self, webhook: Webhook) -> HTTPAnswer | None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return HTTPAnswer(status=411, body=b"a Content-Length is required\n", content_type="text/plain")
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            return HTTPAnswer(status=411, body=b"a Content-Length is required\n", content_type="text/plain")
        if not length_text.strip().isdigit():
            return HTTPAnswer(status=400, body=b"bad Content-Length\n", content_type="text/plain")
        length = int(length_text)
        limit = self.server.max_body_bytes
        if length > limit:
            message = f"request entity is too large; limit is {limit} bytes\n".encode()
            return HTTPAnswer(status=413, body=message, content_type="text/plain")
        try:
            body = self.rfile.read(length)
        except TimeoutError:
            return HTTPAnswer(status=408, body=b"the request body was not received in time\n")
        except OSError:
            return None
        if len(body) < length:
            return None  # the client closed the connection before sending its body
        return webhook.serve(body, self.headers.get("Content-Type", ""))

    def _method_not_allowed(self) -> None:
        self._write(HTTPStatus.METHOD_NOT_ALLOWED, b"method not allowed\n")

    do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _method_not_allowed

    def log_message(self, format: str, *args: Any) -> None:
        """No access log: the API server calls on every admission."""


class _TLSServer(socketserver.TCPServer):
    """Accepts plain TCP, then hands each connection to a capped, named thread that does TLS and HTTP."""

    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        *,
        certs: CertSource,
        webhooks: dict[str, Webhook],
        read_timeout: float,
        max_body_bytes: int,
        max_connections: int,
        handler_class: type[BaseHTTPRequestHandler] | None = None,
        connection_thread_name: str = "webhook-server/conn",
    ) -> None:
        # handler_class: another server's request handler on this connection machinery (the status
        # server's, controller.trainer.statusserver); it may subclass _RequestHandler for its I/O.
        self.connection_thread_name = connection_thread_name
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.certs = certs
        self.webhooks = webhooks
        self.read_timeout = read_timeout
        self.max_body_bytes = max_body_bytes
        self._slots = threading.BoundedSemaphore(max_connections)
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        # Connection threads not known to have finished, with their sockets (to end a waiting read on stop).
        self._threads: list[_Tracked] = []
        self.served = 0
        self.refused = 0
        self.waiting = 0
        super().__init__(address, handler_class or _RequestHandler)

    def shutdown(self) -> None:
        # Stopping first: the serving thread may be waiting for a free slot in process_request.
        self._stopping.set()
        super().shutdown()

    def process_request(self, request: Any, client_address: Any) -> None:
        # Wait for a free slot; meanwhile new connections queue in the listen backlog.
        with self._lock:
            self.waiting += 1
        try:
            while not self._slots.acquire(timeout=0.1):
                if self._stopping.is_set():
                    self.shutdown_request(request)
                    return
        finally:
            with self._lock:
                self.waiting -= 1
        tracked = _Tracked(request)
        thread = threading.Thread(
            target=self._serve_connection,
            args=(tracked, client_address),
            name=self.connection_thread_name,
            daemon=True,
        )
        tracked.thread = thread
        with self._lock:
            self._threads = [t for t in self._threads if t.thread is not None and t.thread.is_alive()]
            self._threads.append(tracked)
        thread.start()

    def _serve_connection(self, tracked: _Tracked, client_address: Any) -> None:
        sock = tracked.sock
        deadline = time.monotonic() + self.read_timeout
        try:
            try:
                context = self.certs.context()
            except CertificateNotReady as exc:
                with self._lock:
                    self.refused += 1
                _log.info("webhook.connection_refused", reason=str(exc))
                return
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            tls_sock: ssl.SSLSocket | None = None
            try:
                # Wrapping takes the descriptor over from `sock`: track the TLS socket from now on, so a stop
                # can still end a handshake that waits.
                tls_sock = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
                with self._lock:
                    tracked.sock = tls_sock
                    stopping = self._stopping.is_set()
                if stopping:
                    tls_sock.close()
                    return
                tls_sock.do_handshake()
            except (OSError, ssl.SSLError, ValueError) as exc:
                _log.debug("webhook.handshake_failed", client=str(client_address[0]), error=str(exc))
                if tls_sock is not None:
                    with contextlib.suppress(OSError):
                        tls_sock.close()
                return
            try:
                self.RequestHandlerClass(_Connection(tls_sock, deadline), client_address, self)  # type: ignore[arg-type]
                with self._lock:
                    self.served += 1
            except (OSError, ValueError) as exc:
                _log.debug("webhook.connection_failed", client=str(client_address[0]), error=str(exc))
            except Exception:  # noqa: BLE001 - a bug must not take the server down; logged with its traceback
                _log.exception("webhook.connection_crashed", client=str(client_address[0]))
            finally:
                with contextlib.suppress(OSError):
                    tls_sock.close()
        finally:
            with contextlib.suppress(OSError):
                sock.close()
            self._slots.release()

    def close_connections(self) -> None:
        self._stopping.set()
        with self._lock:
            tracked, self._threads = self._threads, []
            targets = [(t.thread, t.sock) for t in tracked]
        for thread, sock in targets:
            if thread is not None and thread.is_alive():
                # Ends a read (or handshake) that waits; an answer being written is not cut. The plain
                # socket's shutdown, also for a TLS socket: its own would drop the TLS state under the reader.
                with contextlib.suppress(OSError, ValueError):
                    socket.socket.shutdown(sock, socket.SHUT_RD)
        for thread, _ in targets:
            if thread is not None:
                thread.join()

    def statistics(self) -> tuple[int, int, int, int]:
        with self._lock:
            active = sum(1 for t in self._threads if t.thread is not None and t.thread.is_alive())
            return active, self.served, self.refused, self.waiting


class _Tracked:
    """A connection thread and the socket that currently owns the connection's descriptor."""

    __slots__ = ("sock", "thread")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.thread: threading.Thread | None = None


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
        :class:`~controller.certwatcher.CertWatcher` over ``cert_dir/cert_name`` and ``cert_dir/key_name``."""
        try:
            address = parse_bind_address(bind_address, allow_all_interfaces=allow_all_interfaces)
        except ValueError as exc:
            raise WebhookServerError(f"webhook server: {exc}") from exc
        if address is None:
            raise WebhookServerError(f"webhook server: bind address {bind_address!r} disables it")
        if read_timeout <= 0 or max_body_bytes <= 0 or max_connections <= 0:
            raise WebhookServerError(
                "webhook server: read_timeout, max_body_bytes and max_connections must be > 0"
            )
        self._address = address
        self.cert_dir = Path(cert_dir)
        self.certs: CertSource = certs or CertWatcher(
            self.cert_dir / cert_name, self.cert_dir / key_name, tls=tls
        )
        self._read_timeout = read_timeout
        self._max_body_bytes = max_body_bytes
        self._max_connections = max_connections
        self._lock = threading.Lock()
        self._webhooks: dict[str, Webhook] = {}
        self._server: _TLSServer | None = None
        self._thread: threading.Thread | None = None

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
        if server is None:
            return self._address
        host, port = server.server_address[:2]
        return str(host), int(port)

    def need_leader_election(self) -> bool:
        return False

    def start(self, stop: threading.Event) -> None:
        """Binds and serves on an owned thread; raises :class:`WebhookServerError` if the address is taken."""
        with self._lock:
            if self._server is not None:
                raise WebhookServerError("the webhook server was already started")
            try:
                server = _TLSServer(
                    self._address,
                    certs=self.certs,
                    webhooks=dict(self._webhooks),
                    read_timeout=self._read_timeout,
                    max_body_bytes=self._max_body_bytes,
                    max_connections=self._max_connections,
                )
            except OSError as exc:
                raise WebhookServerError(
                    f"cannot serve webhooks on {self._address[0]}:{self._address[1]}: {exc}"
                ) from exc
            self._server = server
            self._thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.1},
                name="webhook-server/serve",
                daemon=True,
            )
            self._thread.start()
        host, port = self.address
        _log.info(
            "webhook.serving", address=f"{host}:{port}", paths=self.paths, certs_ready=self.certs.ready()
        )

    def stop(self, timeout: float | None = None) -> bool:
        """Stops accepting and joins every thread (see the module doc). Idempotent; always returns True."""
        with self._lock:
            server, thread = self._server, self._thread
            self._thread = None
        if server is None or thread is None:
            return True
        server.shutdown()
        thread.join()
        server.server_close()
        server.close_connections()
        _log.info("webhook.stopped")
        return True

    def started_checker(self) -> Checker:
        """A readiness check (Go ``StartedChecker``): fails until the certificates exist and the server
        answers a TLS handshake on its address."""

        def check() -> None:
            with self._lock:
                started = self._thread is not None
            if not started:
                raise RuntimeError("webhook server has not been started yet")
            if not self.certs.ready():
                raise RuntimeError("certificates are not ready")
            dial_tls(self.address, "webhook server")

        return check

    def statistics(self) -> dict[str, int]:
        """``active`` connections, connections ``served`` and ``refused`` (no certificate yet), and whether
        an accepted connection is ``waiting`` for a free slot (0 or 1)."""
        with self._lock:
            server = self._server
        if server is None:
            return {"active": 0, "served": 0, "refused": 0, "waiting": 0}
        active, served, refused, waiting = server.statistics()
        return {"active": active, "served": served, "refused": refused, "waiting": waiting}

    def __repr__(self) -> str:
        host, port = self.address
        with self._lock:
            state = "serving" if self._thread is not None else "stopped"
        return f"WebhookServer({host}:{port}, paths={len(self._webhooks)}, {state})"
