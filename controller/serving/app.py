"""Apps: read-only HTTP endpoints as functions, and the server that serves one on the manager's addresses.

Go origin: the manager's probe and metrics listeners (controller-runtime ``pkg/manager/internal.go``) and
``net.Listen``'s address rules.

Guarantees:

- An :data:`App` is ``(path, query, headers) -> Response`` for GET requests: the health and readiness
  handlers (:mod:`controller.serving.healthz`), the metrics endpoint, and the metrics filter's wrapper
  (:mod:`controller.serving.filters`) are apps.
- :class:`Server` is :class:`controller.serving.httpserver.HTTPServer` serving an :data:`App` for GET
  (another method is 405), within :data:`PROBE_LIMITS`: at most 16 connections at once (more wait in the
  listen queue), request line and headers within 32 s of accept whatever the pace (a slowloris client is cut
  off at the deadline like a silent one), headers at most 1 MiB (431), a body at most 64 KiB (413). It binds
  where it is told: :func:`parse_bind_address` accepts loopback (the default, ``127.0.0.1``) and explicit
  addresses (the Pod IP), and refuses every-interface addresses (``0.0.0.0``, ``::``, ``":8080"``) unless
  the caller opts in with ``allow_all_interfaces``. Keep-alive as the server's default: Prometheus keeps its
  scrape connection (closed after 120 s idle, or earlier to make room when every slot is taken), the
  kubelet's probes ask for ``Connection: close``. Threads ``<name>/serve`` and ``<name>/conn``;
  :meth:`Server.stop` joins them, ending at once the reads of clients that have not sent their request.
- With ``tls_context`` (a function returning the current :class:`ssl.SSLContext`, e.g.
  :meth:`controller.serving.certwatcher.CertWatcher.context`), :class:`Server` serves HTTPS, TLS 1.2 or
  later: the context is asked for on every connection, so rotated certificates are served from the next
  connection on. Before a certificate exists (the function raises), connections are closed after accept.

Deliberately missing: authentication here (:mod:`controller.serving.filters` wraps an app), HEAD and other
methods (405).
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Callable, Mapping

from controller.serving.httpserver import HTTPServer, Limits, Request, Response

__all__ = [
    "PROBE_LIMITS",
    "App",
    "Server",
    "parse_bind_address",
]

App = Callable[[str, Mapping[str, list[str]], Mapping[str, str]], Response]
"""What a :class:`Server` serves: ``(path, query, headers) -> Response`` for GET requests."""


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


PROBE_LIMITS = Limits(
    max_connections=16,
    read_header_timeout=32.0,
    read_timeout=32.0,
    write_timeout=30.0,
    max_header_bytes=1 << 20,
    max_body_bytes=1 << 16,
)
"""The probe and metrics servers' bounds: controller-runtime's ``ReadHeaderTimeout`` (32 s) and
``MaxHeaderBytes`` (1 MiB); 16 connections at once (a kubelet probes one at a time, Prometheus scrapes one
at a time); a GET needs no body, so 64 KiB is plenty."""


class Server(HTTPServer):
    """An HTTP(S) server on one address serving ``app`` for GET requests (another method is 405), on
    :class:`controller.serving.httpserver.HTTPServer` with ``limits`` (:data:`PROBE_LIMITS`).

    Its threads are ``<name>/serve`` and ``<name>/conn``; :meth:`stop` joins them.
    """

    def __init__(
        self,
        name: str,
        address: tuple[str, int],
        app: App,
        *,
        limits: Limits = PROBE_LIMITS,
        tls_context: Callable[[], ssl.SSLContext] | None = None,
    ) -> None:
        """``tls_context``: serve HTTPS with the context it returns for each connection (see the module
        doc); None serves plain HTTP."""
        self._app = app
        super().__init__(
            name, address, self._serve_get, limits=limits, check_head=_get_only, tls_context=tls_context
        )

    def _serve_get(self, request: Request) -> Response:
        return self._app(request.path, request.query, request.headers)

    def __repr__(self) -> str:
        host, port = self.address
        return f"Server({self.name!r}, {host}:{port}, {'serving' if self.serving else 'stopped'})"


_METHOD_NOT_ALLOWED = Response(status=405, body=b"method not allowed\n", headers=(("Allow", "GET"),))


def _get_only(request: Request) -> Response | None:
    return None if request.method == "GET" else _METHOD_NOT_ALLOWED
