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
- :class:`Server` is :class:`controller.httpserver.HTTPServer` serving an :data:`App` for GET (another
  method is 405), within :data:`PROBE_LIMITS`: at most 16 connections at once (more wait in the listen
  queue), request line and headers within 32 s of accept whatever the pace (a slowloris client is cut off
  at the deadline like a silent one), headers at most 1 MiB (431), a body at most 64 KiB (413). It binds
  where it is told: :func:`parse_bind_address` accepts loopback (the default, ``127.0.0.1``) and explicit
  addresses (the Pod IP), and refuses every-interface addresses (``0.0.0.0``, ``::``, ``":8080"``) unless
  the caller opts in with ``allow_all_interfaces``. Threads ``<name>/serve`` and ``<name>/conn``;
  :meth:`Server.stop` joins them, ending at once the reads of clients that have not sent their request.
- With ``tls_context`` (a function returning the current :class:`ssl.SSLContext`, e.g.
  :meth:`controller.certwatcher.CertWatcher.context`), :class:`Server` serves HTTPS, TLS 1.2 or later:
  the context is asked for on every connection, so rotated certificates are served from the next
  connection on. Before a certificate exists (the function raises), connections are closed after accept.

Deliberately missing: authentication here (:mod:`controller.metricsauth` wraps an app), HEAD and other
methods (405), and the ``livez`` family.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Callable, Mapping
from posixpath import normpath
from types import MappingProxyType

import structlog

from controller.httpserver import HTTPServer, Limits, Request, Response

__all__ = [
    "PING",
    "PROBE_LIMITS",
    "App",
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
    :class:`controller.httpserver.HTTPServer` with ``limits`` (:data:`PROBE_LIMITS`).

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
