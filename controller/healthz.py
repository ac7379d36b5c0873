"""Health and readiness endpoints with named checks, and the HTTP server the manager serves them on.

Go origin: controller-runtime ``pkg/healthz/healthz.go`` (the aggregated handler, ``?verbose``,
``?exclude=``, per-check sub-paths, ``Ping``) and the manager's probe/metrics listeners
(``pkg/manager/internal.go``).

Guarantees:

- ``GET /healthz`` (and ``/readyz``) runs every check, in name order, and answers 200 ``ok`` when all pass,
  500 when any fails. With ``?verbose`` (or on failure) the body lists each check as ``[+]name ok``,
  ``[+]name excluded: ok`` or ``[-]name failed: reason withheld``, then ``healthz check passed``/``failed``.
  ``?exclude=name`` (repeatable) skips a check; excludes that match nothing are reported in a ``warn:`` line.
  A handler with no checks answers as if it had one named ``ping``.
- ``GET /healthz/<name>`` runs one check: 200 ``ok``, or 500 ``internal server error: <reason>``; an unknown
  name is 404. The reason is only shown on the sub-path, as upstream.
- A check is a function that returns on success and raises on failure. Checks run on the request's thread
  with no lock held; a slow check delays only its own request.
- :class:`Server` binds where it is told: :func:`parse_bind_address` accepts loopback (the default,
  ``127.0.0.1``) and explicit addresses (the Pod IP), and refuses every-interface addresses (``0.0.0.0``,
  ``::``, ``":8080"``) unless the caller opts in with ``allow_all_interfaces``. It buffers each response
  into one write and sets ``TCP_NODELAY``, so a response never waits for a delayed ACK (the 44 ms Nagle
  stall). Its threads are named ``<name>/serve`` and ``<name>/request``, and :meth:`Server.stop` joins all
  of them. Connections are closed after each response, and a client that stays silent is dropped after a
  read timeout (32 s) or at once when the server stops, so an idle or half-open connection can neither pile
  up threads nor hold up a shutdown.

- With ``tls_context`` (a function returning the current :class:`ssl.SSLContext`, e.g.
  :meth:`controller.certwatcher.CertWatcher.context`), :class:`Server` serves HTTPS: the context is asked
  for on every connection, so rotated certificates are served from the next connection on, and the TLS
  handshake runs on the connection's own thread under the read timeout. Before a certificate exists
  (the function raises), connections are closed after accept.

Deliberately missing: authentication here (:mod:`controller.metricsauth` wraps an app), HEAD and other
methods (405), and the ``livez`` family.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from posixpath import normpath
from types import MappingProxyType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import structlog

__all__ = [
    "PING",
    "Checker",
    "Handler",
    "Response",
    "Server",
    "parse_bind_address",
]

_log = structlog.get_logger("controller.healthz")

Checker = Callable[[], None]
"""A health check: returns when healthy, raises (with a reason) when not."""


def _ping() -> None:
    """Always healthy: proves the process serves HTTP (``healthz.Ping``)."""


PING: Checker = _ping


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    """One HTTP response, written in a single buffered write."""

    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


App = Callable[[str, Mapping[str, list[str]], Mapping[str, str]], Response]
"""What a :class:`Server` serves: ``(path, query, headers) -> Response`` for GET requests."""


class Handler:
    """The aggregated endpoint over a fixed set of named checks (``healthz.Handler``)."""

    __slots__ = ("_checks", "_kind")

    def __init__(self, checks: Mapping[str, Checker], *, kind: str = "healthz") -> None:
        self._checks = MappingProxyType(dict(checks))
        self._kind = kind

    def serve(self, sub_path: str, query: Mapping[str, list[str]]) -> Response:
        """Answers a request for ``sub_path`` (the part after ``/healthz``; ``""`` or ``/`` is aggregated)."""
        path = normpath("/" + sub_path.lstrip("/"))
        if path == "/":
            return self._aggregated(query)
        name = path[1:]
        if not self._checks and name == "ping":
            return Response(status=200, body=b"ok")
        check = self._checks.get(name)
        if check is None:
            return Response(status=404, body=b"404 page not found\n")
        try:
            check()
        except Exception as exc:  # noqa: BLE001 - a failing check is an answer, not our error
            _log.info("healthz.check_failed", endpoint=self._kind, check=name, error=str(exc))
            return Response(status=500, body=f"internal server error: {exc}\n".encode())
        return Response(status=200, body=b"ok")

    def _aggregated(self, query: Mapping[str, list[str]]) -> Response:
        excluded = set(query.get("exclude", ()))
        lines: list[tuple[str, str]] = []  # (name, line), sorted by name below
        failed = False
        for name, check in self._checks.items():
            if name in excluded:
                excluded.discard(name)
                lines.append((name, f"[+]{name} excluded: ok"))
                continue
            try:
                check()
            except Exception as exc:  # noqa: BLE001 - reported as "[-]name failed", reason withheld
                _log.info("healthz.check_failed", endpoint=self._kind, check=name, error=str(exc))
                lines.append((name, f"[-]{name} failed: reason withheld"))
                failed = True
            else:
                lines.append((name, f"[+]{name} ok"))
        if not self._checks:
            lines.append(("ping", "[+]ping ok"))
        status = 500 if failed else 200
        if not failed and "verbose" not in query:
            return Response(status=status, body=b"ok")
        lines.sort(key=lambda item: item[0])
        out = [line for _, line in lines]
        if excluded:
            quoted = ",".join(f'"{name}"' for name in sorted(excluded))
            out.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
        out.append(f"{self._kind} check failed" if failed else f"{self._kind} check passed")
        return Response(status=status, body=("\n".join(out) + "\n").encode())

    def __repr__(self) -> str:
        return f"Handler(kind={self._kind!r}, checks={sorted(self._checks)})"


def parse_bind_address(address: str, *, allow_all_interfaces: bool = False) -> tuple[str, int] | None:
    """``"127.0.0.1:8081"`` → ``("127.0.0.1", 8081)``; ``"0"`` or ``""`` → None (endpoint disabled).

    The host is ``localhost`` or an IP address: loopback, or an explicit address of this machine (in a Pod,
    the Pod IP, so the kubelet can probe it and nothing else on the node's other interfaces can). The
    unspecified addresses (``0.0.0.0``, ``::``, or an empty host as in Go's ``":8080"``, all meaning every
    interface) are refused unless ``allow_all_interfaces``; an empty host then binds ``0.0.0.0``. Raises
    ValueError for a malformed or refused address.
    """
    if address in ("", "0"):
        return None
    host, sep, port_text = address.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ValueError(f"bind address {address!r} is not host:port")
    host = host.strip("[]")
    if host == "localhost":
        return host, int(port_text)
    if not host:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.IPv4Address("0.0.0.0")
    else:
        try:
            ip = ipaddress.ip_address(host)
        except ValueError as exc:
            raise ValueError(f"bind address {address!r} has no IP address") from exc
    if ip.is_unspecified and not allow_all_interfaces:
        raise ValueError(
            f"bind address {address!r} means every interface; refusing to serve on it without "
            "allow_all_interfaces (bind 127.0.0.1, or the Pod IP)"
        )
    return str(ip), int(port_text)


class _RequestHandler(BaseHTTPRequestHandler):
    """Buffers the whole response and writes it once; no keep-alive; a silent client is dropped after the
    server's read timeout."""

    wbufsize = -1  # buffered wfile: status line, headers and body leave in one write on flush
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.read_timeout)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        headers = {key.lower(): value for key, value in self.headers.items()}
        try:
            response = self.server.app(parts.path, query, headers)
        except Exception:  # noqa: BLE001 - one bad request must not kill the server; logged
            _log.exception("http.handler_failed", server=self.server.name, path=parts.path)
            response = Response(status=500, body=b"internal server error\n")
        self._write(response)

    def _write(self, response: Response) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(response.body)
        self.wfile.flush()

    def _method_not_allowed(self) -> None:
        self._write(Response(status=HTTPStatus.METHOD_NOT_ALLOWED, body=b"method not allowed\n"))

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _method_not_allowed

    def log_message(self, format: str, *args: Any) -> None:
        """Access logs are not written (probes and scrapes would flood them)."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        app: App,
        name: str,
        read_timeout: float,
        tls_context: Callable[[], ssl.SSLContext] | None = None,
    ) -> None:
        self.app = app
        self.name = name
        self.read_timeout = read_timeout
        self.tls_context = tls_context
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self._requests_lock = threading.Lock()
        # Request threads not known to have finished, with their connections.
        self._requests: list[tuple[threading.Thread, socket.socket]] = []
        self._closing = False  # guarded by _requests_lock; set once server_close has taken the list
        super().__init__(address, _RequestHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        # ThreadingMixIn's, with a named thread that server_close() joins.
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name=f"{self.name}/request",
            daemon=True,
        )
        with self._requests_lock:
            self._requests = [(t, conn) for t, conn in self._requests if t.is_alive()]
            self._requests.append((thread, request))
        thread.start()

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls_context is None:
            super().finish_request(request, client_address)
            return
        try:
            context = self.tls_context()
        except RuntimeError as exc:  # no certificate yet (CertificateNotReady)
            _log.info("http.connection_refused", server=self.name, reason=str(exc))
            return
        request.settimeout(self.read_timeout)
        try:
            tls = context.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        except (OSError, ssl.SSLError) as exc:
            _log.debug("http.handshake_failed", server=self.name, error=str(exc))
            return
        # The plain socket is detached now: stop() must reach the TLS one, during the handshake too.
        self._track(tls)
        try:
            tls.do_handshake()
        except (OSError, ssl.SSLError) as exc:
            _log.debug("http.handshake_failed", server=self.name, error=str(exc))
            with contextlib.suppress(OSError):
                tls.close()
            return
        try:
            self.RequestHandlerClass(tls, client_address, self)  # type: ignore[arg-type]
        finally:
            with contextlib.suppress(OSError):
                tls.close()

    def _track(self, conn: socket.socket) -> None:
        current = threading.current_thread()
        with self._requests_lock:
            if not self._closing:
                self._requests = [(t, conn if t is current else c) for t, c in self._requests]
                return
        # server_close() has already shut down the plain socket, maybe after it was detached: end the
        # handshake that would otherwise wait for the read timeout.
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RD)

    def server_close(self) -> None:
        super().server_close()
        with self._requests_lock:
            requests, self._requests = self._requests, []
            self._closing = True
        for thread, conn in requests:
            # Ends a read that is still waiting for the request (an idle or half-open client), so the join
            # below does not wait for the read timeout; a response being written is not affected.
            if thread.is_alive():
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RD)
        for thread, _ in requests:
            thread.join()


READ_TIMEOUT = 32.0
"""Seconds a connection may stay silent while its request is read (controller-runtime's
``ReadHeaderTimeout`` for its probe and metrics servers)."""


class Server:
    """An HTTP server on one address, serving ``app`` on an owned thread until :meth:`stop`.

    A client that sends nothing for ``read_timeout`` seconds is disconnected, so idle connections cannot
    pile up request threads.
    """

    def __init__(
        self,
        name: str,
        address: tuple[str, int],
        app: App,
        *,
        read_timeout: float = READ_TIMEOUT,
        tls_context: Callable[[], ssl.SSLContext] | None = None,
    ) -> None:
        """``tls_context``: serve HTTPS with the context it returns for each connection (see the module
        doc); None serves plain HTTP."""
        self._name = name
        self._address = address
        self._app = app
        self._read_timeout = read_timeout
        self._tls_context = tls_context
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); the real port once started, even when asked for port 0."""
        if self._server is None:
            return self._address
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        """Binds and starts serving; raises OSError if the address is taken."""
        if self._server is not None:
            raise RuntimeError(f"{self._name} server already started")
        self._server = _Server(self._address, self._app, self._name, self._read_timeout, self._tls_context)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"{self._name}/serve",
            daemon=True,
        )
        self._thread.start()
        _log.info(
            "http.serving",
            server=self._name,
            address="{}:{}".format(*self.address),
            scheme="https" if self._tls_context is not None else "http",
        )

    def stop(self) -> None:
        """Stops accepting, joins the serving thread and every request thread. Idempotent.

        A connection still waiting for its request is closed at once; a request being answered is finished.
        """
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.shutdown()
        thread.join()
        server.server_close()
        self._thread = None

    def __repr__(self) -> str:
        state = "serving" if self._thread is not None else "stopped"
        return f"Server({self._name!r}, {self.address[0]}:{self.address[1]}, {state})"
