"""The HTTP(S) server every server of the manager runs on: bounded in connections, time and bytes.

Go origin: ``net/http``'s ``Server`` with the fields controller-runtime sets in
``pkg/internal/httpserver`` (``ReadHeaderTimeout``, ``MaxHeaderBytes``) and upstream Trainer's status server
sets (``ReadTimeout``, ``WriteTimeout``), ``golang.org/x/net/netutil.LimitListener`` (the connection cap),
the request-size caps of controller-runtime's admission handler (``maxRequestSize``, 7 MiB) and of
``http.MaxBytesReader``, ``crypto/tls``'s server handshake, and ``net/http``'s keep-alive (``IdleTimeout``,
``SetKeepAlivesEnabled``, ``closeWriteAndWait``). The webhook server
(:mod:`controller.serving.webhook.server`), the status server (:mod:`controller.trainer.statusserver`) and the
probe and metrics servers (:class:`controller.serving.app.Server`) are this server with their own handler and
:class:`Limits`.

Guarantees (``Limits`` names the bounds):

- **Connections are capped** at ``max_connections``, each served on its own named thread
  (``<name>/conn``). As with ``LimitListener``, the accept loop (``<name>/serve``) takes a slot before it
  accepts, so connections beyond the cap wait in the kernel's listen queue (``backlog``; beyond it the
  kernel drops the handshake and the client retries) until a slot is free. Nothing a client does makes the
  server start more threads than the cap.
- **Keep-alive** (HTTP/1.1's default; HTTP/1.0 with ``Connection: keep-alive``): a connection serves its
  requests one after another (a pipelined request is read after the answer to the one before), and every
  answer says ``Connection: keep-alive`` or ``Connection: close``. The server closes after an answer when the
  client asked for it (``Connection: close``, HTTP/1.0 without keep-alive), after an answer of 400, 408, 411,
  413, 417, 431 or 500 (its own refusals, a handler that raised, and a handler or head check answering one of
  those), after an answer given without reading the declared body (it lingers, below), while stopping, and
  always when ``limits.keep_alive`` is off. An idle connection (answered, and no byte of its next request yet)
  is closed after ``idle_timeout``. **Keep-alive never starves new clients**: while every slot is taken and a
  connection waits in the listen queue, the connection idle the longest is closed to make room, one at a time,
  and every answer closes its connection (``Connection: close``), so a slot turns over at least once per
  request as without keep-alive; a connection in the middle of a request (its first byte read, its answer not
  yet written) or not past its first request is never closed for room. As with any server-side close of an
  idle connection, a request that crosses the close on the wire sees the connection closed unanswered, and the
  client retries on a new one (Go's transport does for a request it can replay); the idle timeout is longer
  than the API server's 90 s ``IdleConnTimeout``, so there it is the client that closes first.
- **Time is bounded** from the moment a request starts, for the first request the moment its connection
  is accepted, for a later one the moment its first byte arrives: the TLS handshake (first request only)
  and the request line and headers must arrive within ``read_header_timeout``, the whole request (the body
  too) within ``read_timeout``; each read waits only for the time that is left, so a client that trickles
  one byte at a time (slowloris) loses its slot at the deadline like a silent one. Between requests a
  connection waits at most ``idle_timeout``. A client that runs out of time before its headers are complete
  is disconnected without an answer (as Go does); one whose body is late gets 408. Writing the answer may
  take ``write_timeout``.
- **Bytes are bounded**: request line and headers at most ``max_header_bytes`` (431 beyond), the body at
  most ``max_body_bytes`` (413, decided from ``Content-Length`` before a byte of the body is read). A body
  needs a ``Content-Length``: ``Transfer-Encoding`` (chunked) is 411. A request the parser cannot read (no
  request line, a header line without a colon, a folded header, two different ``Content-Length`` values, a
  version other than HTTP/1.0 or 1.1) is 400 (Go answers 505 to HTTP/2.0 over plain TCP; here no input
  gets a 5xx). ``Expect: 100-continue`` is answered before the body is read, another expectation is 417.
  A handler sees only complete, well-formed requests.
- **Never crashes, never 5xx on input**: the server's own refusals are 4xx; a handler that raises is 500
  (logged with its traceback, counted, and the connection closed), and the server carries on.
- **TLS** with ``tls_context``: the context is asked for on every connection (so a rotated certificate is
  served from the next one); a context that allows less than TLS 1.2 has its minimum raised to 1.2 before
  use, and a connection that negotiated less is closed, so no server of this process speaks TLS 1.0 or
  1.1 whatever it is handed. Before a certificate exists (the function raises), connections are closed
  after accept and counted as ``refused``.
- The answer leaves in one write with ``TCP_NODELAY`` (no Nagle stall). When the answer was given without
  reading the whole body (413, a 404 before the body), the server stops writing and discards what the
  client still sends for up to ``_LINGER_S`` (Go's ``closeWriteAndWait``), so the client reads the answer
  instead of a reset, then closes.
- :meth:`HTTPServer.stop` stops accepting, ends the reads of connections still waiting for a request (idle
  keep-alive connections included; an answer being written is finished, with ``Connection: close``), and
  joins every thread it started. It binds where it is told (loopback or an explicit address; see
  :func:`controller.serving.app.parse_bind_address`).

Deliberately missing: chunked request bodies (the API server and the Kubeflow SDK send a ``Content-Length``),
HTTP/2 (off upstream too, CVE-2023-44487), client-certificate authentication, and the fake clock: the
deadlines are the sockets' own, so tests shorten the limits instead. A kept connection keeps the TLS context
it was opened with: a rotated certificate is served from the next connection (as in Go).
"""

from __future__ import annotations

import contextlib
import re
import selectors
import socket
import ssl
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from types import MappingProxyType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import structlog

__all__ = [
    "DEFAULT_LIMITS",
    "ErrorResponder",
    "HTTPServer",
    "HTTPServerError",
    "HeadCheck",
    "Limits",
    "Request",
    "RequestHandler",
    "Response",
    "ServerStatistics",
    "dial_tls",
    "plain_error",
]

_log = structlog.get_logger("controller.serving.httpserver")

_LINGER_S = 0.5
"""How long an answered connection may still be drained before it is closed (Go waits 500 ms too)."""
_LINGER_BYTES = 256 * 1024
"""How much may be drained: more, and the client gets a reset (Go's ``maxPostHandlerReadBytes``)."""
_READ_CHUNK = 65536
_CLOSING = frozenset({400, 408, 411, 413, 417, 431, 500})
"""Answers after which the connection is closed, whoever gave them: the server's own refusals, and a handler
that raised. What follows such a request on the wire cannot be trusted to be the next request."""
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VERSION = re.compile(rb"HTTP/(\d)\.(\d)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """How much one server lets a client take (the ``net/http.Server`` fields of the same names).

    Invariants (checked): every bound is positive; ``read_timeout >= read_header_timeout``.
    """

    max_connections: int = 32
    """Connections served at once; further ones wait in the listen queue (``LimitListener``)."""
    backlog: int = 128
    """The listen queue: connections the kernel holds while every slot is taken."""
    read_header_timeout: float = 32.0
    """Seconds from accept to the end of the headers, TLS handshake included (controller-runtime: 32 s)."""
    read_timeout: float = 32.0
    """Seconds from accept to the end of the body."""
    write_timeout: float = 10.0
    """Seconds for the answer to be written."""
    max_header_bytes: int = 1 << 20
    """Request line and headers (controller-runtime: 1 MiB)."""
    max_body_bytes: int = 1 << 20
    """The body, from ``Content-Length``."""
    keep_alive: bool = True
    """Whether a connection may serve more than one request (Go's ``SetKeepAlivesEnabled``)."""
    idle_timeout: float = 120.0
    """Seconds an answered keep-alive connection may wait for its next request (Go's ``IdleTimeout``). Longer
    than the 90 s after which the API server's webhook client (``IdleConnTimeout``), Go's default transport
    and Prometheus close an idle connection themselves, so the client, which knows whether it is about to
    send, is normally the one that closes."""

    def __post_init__(self) -> None:
        for name in ("max_connections", "backlog", "max_header_bytes", "max_body_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"limits.{name}: must be a positive integer, got {value!r}")
        if not isinstance(self.keep_alive, bool):
            raise ValueError(f"limits.keep_alive: must be a bool, got {self.keep_alive!r}")
        for name in ("read_header_timeout", "read_timeout", "write_timeout", "idle_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"limits.{name}: must be a positive number of seconds, got {value!r}")
        if self.read_timeout < self.read_header_timeout:
            raise ValueError(
                f"limits.read_timeout: must be at least read_header_timeout ({self.read_header_timeout}), "
                f"got {self.read_timeout}"
            )


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One request as a handler sees it. ``headers`` has lower-case names and the first value of each (Go's
    ``Header.Get``); ``body`` is empty in a :data:`HeadCheck`."""

    method: str
    path: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    query: Mapping[str, list[str]] = field(default_factory=dict)
    content_length: int | None = None
    """The ``Content-Length`` the client declared; None without one (then the body is empty)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    """One answer, written in a single buffered write."""

    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()
    """Extra headers (``Allow``...); ``Content-Type``, ``Content-Length`` and ``Connection`` are the
    server's (whether a connection stays open is the server's decision, see the module doc)."""


RequestHandler = Callable[[Request], Response]
"""What a server serves (Go's ``http.Handler``): called with a complete request on the connection's thread,
with no lock held. It should not raise (a raise is answered 500 and logged)."""

HeadCheck = Callable[[Request], "Response | None"]
"""Called once the headers are read and before the body is: an answer that needs no body (404, 405, a
413 of the handler's own), or None to read the body and call the handler."""

ErrorResponder = Callable[[int, str], Response]
"""The answer to the server's own refusals (400, 408, 411, 413, 417, 431, and 500 for a handler that
raised), from the status code and a message; a server with a wire format of its own (a ``metav1.Status``)
gives one."""


def plain_error(status: int, message: str) -> Response:
    """The default :data:`ErrorResponder`: the message as text."""
    return Response(status=status, body=(message + "\n").encode())


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerStatistics:
    """What a server has done so far; ``active`` and ``saturated`` are the state at the call."""

    active: int = 0
    """Connections being served (idle ones included: each holds a slot)."""
    idle: int = 0
    """Keep-alive connections waiting for their next request."""
    saturated: bool = False
    """Every slot is taken: the accept loop waits, and new connections wait in the listen queue."""
    served: int = 0
    """Requests answered (by the handler or by the server's own refusals)."""
    reused: int = 0
    """Requests read on a connection that had answered one before (keep-alive at work)."""
    idle_closed: int = 0
    """Keep-alive connections closed because no request came within ``idle_timeout``."""
    evicted: int = 0
    """Idle keep-alive connections closed to make room for a waiting one while every slot was taken."""
    refused: int = 0
    """Connections closed after accept because no TLS certificate was ready."""
    timed_out: int = 0
    """Connections closed because the client did not send its handshake, headers or body in time."""
    handshake_failures: int = 0
    """TLS handshakes that failed (an old protocol version, not TLS at all, a reset)."""
    handler_errors: int = 0
    """Handlers that raised (answered 500)."""


class HTTPServerError(OSError):
    """The server cannot listen on its address (taken, not this machine's); the cause is chained."""


class _Timeout(Exception):
    """The connection's current deadline passed."""


class _Closed(Exception):
    """The client closed (or the server is stopping and ended the read)."""


class _Refuse(Exception):
    """The request cannot be read further: answer ``status`` and close."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Connection:
    """One accepted connection: the socket that currently owns the descriptor (the TLS one once wrapped),
    what has been read but not used, when its current request started, and the deadline reads are held to.

    ``idle`` and ``evicted`` are guarded by the server's lock. ``idle``: answered, and no byte of the next
    request read yet (only then may the accept loop pick it to make room). ``evicted``: the accept loop
    picked it; its thread closes it instead of serving whatever arrives.
    """

    __slots__ = ("buffer", "deadline", "evicted", "idle", "idle_since", "sock", "started", "thread")

    def __init__(self, sock: socket.socket, accepted: float) -> None:
        self.sock = sock
        self.started = accepted
        self.buffer = bytearray()
        self.deadline = accepted
        self.thread: threading.Thread | None = None
        self.idle = False
        self.idle_since = accepted
        self.evicted = False

    def read_some(self) -> None:
        """Appends what arrives next to ``buffer``; raises :class:`_Timeout` or :class:`_Closed`."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise _Timeout
        try:
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(_READ_CHUNK)
        except (TimeoutError, ssl.SSLWantReadError) as exc:
            raise _Timeout from exc
        except (OSError, ValueError) as exc:  # reset, TLS alert, closed by stop()
            raise _Closed from exc
        if not chunk:
            raise _Closed
        self.buffer += chunk


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _encode(response: Response, *, head_only: bool, keep_alive: bool) -> bytes:
    lines = [
        f"HTTP/1.1 {response.status} {_reason(response.status)}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(response.body)}",
        "X-Content-Type-Options: nosniff",
        "Connection: keep-alive" if keep_alive else "Connection: close",
    ]
    for name, value in response.headers:
        if "\r" in name or "\n" in name or "\r" in value or "\n" in value:
            raise ValueError(f"response header {name!r} contains a line break")
        lines.append(f"{name}: {value}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + response.body


def _find_end_of_headers(buffer: bytearray) -> tuple[int, int] | None:
    """(end of the header block, start of the body), or None when the block is not complete yet."""
    crlf = buffer.find(b"\r\n\r\n")
    lf = buffer.find(b"\n\n")
    if crlf < 0 and lf < 0:
        return None
    if lf >= 0 and (crlf < 0 or lf < crlf):
        return lf, lf + 2
    return crlf, crlf + 4


@dataclass(frozen=True, slots=True)
class _Head:
    method: str
    target: str
    headers: Mapping[str, str]
    length: int | None
    chunked: bool
    keep_alive: bool
    """What the client asked for: HTTP/1.1 unless ``Connection: close``, HTTP/1.0 only with
    ``Connection: keep-alive`` (RFC 9112 9.3)."""


def _parse_head(block: bytes) -> _Head:
    """The request line and headers of a header block; raises :class:`_Refuse`."""
    lines = block.replace(b"\r\n", b"\n").split(b"\n")
    while lines and not lines[0]:
        lines.pop(0)  # RFC 9112 2.2: empty lines before the request line are ignored
    if not lines:
        raise _Refuse(400, "malformed HTTP request: no request line")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not parts[1]:
        raise _Refuse(400, "malformed HTTP request line")
    version = _VERSION.fullmatch(parts[2])
    if version is None:
        raise _Refuse(400, "malformed HTTP version")
    if version.group(1) != b"1":
        raise _Refuse(400, "unsupported HTTP version: only HTTP/1.0 and HTTP/1.1 are served")
    try:
        target = parts[1].decode("ascii")
    except UnicodeDecodeError as exc:
        raise _Refuse(400, "malformed request target: not ASCII") from exc
    if not (target.startswith("/") or target == "*" or target.startswith(("http://", "https://"))):
        raise _Refuse(400, "malformed request target")
    headers: dict[str, str] = {}
    lengths: set[str] = set()
    connection: set[str] = set()
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t"):
            raise _Refuse(400, "malformed header: obsolete line folding")
        name, sep, value = line.partition(b":")
        if not sep or not _TOKEN.fullmatch(name):
            raise _Refuse(400, "malformed header line")
        key = name.decode("ascii").lower()
        text = value.strip(b" \t").decode("latin-1")
        if key == "content-length":
            lengths.add(text)
        elif key == "connection":
            connection.update(token.strip(" \t").lower() for token in text.split(","))
        headers.setdefault(key, text)
    if len(lengths) > 1:
        raise _Refuse(400, "conflicting Content-Length headers")
    length: int | None = None
    if lengths:
        text = next(iter(lengths))
        if not text.isdigit() or not text.isascii():
            raise _Refuse(400, "malformed Content-Length")
        length = int(text)
    keep_alive = "close" not in connection and (version.group(2) != b"0" or "keep-alive" in connection)
    return _Head(
        method=parts[0].decode("ascii"),
        target=target,
        headers=MappingProxyType(headers),
        length=length,
        chunked="transfer-encoding" in headers,
        keep_alive=keep_alive,
    )


class HTTPServer:
    """A bounded HTTP/1.1 server (see the module doc), a manager Runnable that runs on every replica.

    ``name`` prefixes its threads and log lines; ``handler`` answers requests; ``check_head`` may answer
    before the body is read; ``error_response`` formats the server's own refusals; ``tls_context`` (a
    function returning the context for the next connection, e.g. :meth:`CertWatcher.context
    <controller.serving.certwatcher.CertWatcher.context>`) makes it HTTPS.
    """

    def __init__(
        self,
        name: str,
        address: tuple[str, int],
        handler: RequestHandler,
        *,
        limits: Limits = DEFAULT_LIMITS,
        check_head: HeadCheck | None = None,
        error_response: ErrorResponder = plain_error,
        tls_context: Callable[[], ssl.SSLContext] | None = None,
    ) -> None:
        self.name = name
        self.limits = limits
        self._address = address
        self._handler = handler
        self._check_head = check_head
        self._error_response = error_response
        self._tls_context = tls_context
        self._lock = threading.Lock()
        # Guarded by _lock. Invariants: len(_connections) == _active <= limits.max_connections; _evicting is
        # the number of connections in _connections with evicted set.
        self._connections: set[_Connection] = set()
        self._active = 0
        self._evicting = 0
        self._saturated = False
        self._stopping = False
        self._counts = {
            "served": 0,
            "reused": 0,
            "idle_closed": 0,
            "evicted": 0,
            "refused": 0,
            "timed_out": 0,
            "handshake_failures": 0,
            "handler_errors": 0,
        }
        self._listener: socket.socket | None = None
        self._bound: tuple[str, int] | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle --------------------------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); the real port once started, even when asked for port 0."""
        with self._lock:
            return self._bound or self._address

    @property
    def serving(self) -> bool:
        """Started and not stopped."""
        with self._lock:
            return self._thread is not None

    @property
    def scheme(self) -> str:
        return "https" if self._tls_context is not None else "http"

    def need_leader_election(self) -> bool:
        """Servers run on every replica."""
        return False

    def start(self, stop: threading.Event | None = None) -> None:
        """Binds and serves on an owned thread (``<name>/serve``); raises :class:`HTTPServerError` when the
        address cannot be bound, RuntimeError when started twice. ``stop`` is not watched: call
        :meth:`stop`."""
        with self._lock:
            if self._thread is not None or self._stopping:
                raise RuntimeError(f"{self.name} server was already started")
            host, port = self._address
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            try:
                listener = socket.create_server(
                    (host, port), family=family, backlog=self.limits.backlog, reuse_port=False
                )
            except OSError as exc:
                raise HTTPServerError(f"{self.name} server cannot listen on {host}:{port}: {exc}") from exc
            listener.setblocking(False)
            bound = listener.getsockname()
            self._bound = (str(bound[0]), int(bound[1]))
            self._wake_r, self._wake_w = socket.socketpair()
            self._wake_r.setblocking(False)
            self._wake_w.setblocking(False)
            self._listener = listener
            self._thread = threading.Thread(target=self._accept_loop, name=f"{self.name}/serve", daemon=True)
            self._thread.start()
        bound_host, bound_port = self.address
        _log.info(
            "http.serving",
            server=self.name,
            address=f"{bound_host}:{bound_port}",
            scheme=self.scheme,
            max_connections=self.limits.max_connections,
        )

    def stop(self, timeout: float | None = None) -> bool:
        """Stops accepting, ends the reads of connections that still wait for their request, lets answers
        being written finish, and joins every thread within ``timeout`` seconds (None: no limit). Returns
        whether every thread ended. Idempotent."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is None:
                return not self._connections
            self._stopping = True
        self._wake()
        thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        with self._lock:  # after the accept loop has ended: no connection is added from here on
            connections = list(self._connections)
        for conn in connections:
            self._end_read(conn)
        for conn in connections:
            if conn.thread is not None:
                conn.thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        for sock in (self._listener, self._wake_r, self._wake_w):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()
        stopped = not thread.is_alive() and not any(
            c.thread is not None and c.thread.is_alive() for c in connections
        )
        _log.info("http.stopped", server=self.name, joined=stopped)
        return stopped

    @staticmethod
    def _end_read(conn: _Connection) -> None:
        # The plain socket's shutdown, also for a TLS socket (its own would drop the TLS state under the
        # reader): a read that waits returns at once; an answer being written is not cut.
        with contextlib.suppress(OSError, ValueError):
            socket.socket.shutdown(conn.sock, socket.SHUT_RD)

    def statistics(self) -> ServerStatistics:
        with self._lock:
            idle = sum(1 for conn in self._connections if conn.idle)
            return ServerStatistics(active=self._active, idle=idle, saturated=self._saturated, **self._counts)

    def _count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1

    # --- accepting --------------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        listener, wake = self._listener, self._wake_r
        assert listener is not None and wake is not None
        limit = self.limits.max_connections
        with selectors.DefaultSelector() as selector:
            selector.register(wake, selectors.EVENT_READ)
            watching = False
            backoff = 0.0  # net/http's Serve: 5 ms doubling to 1 s after a failed accept, 0 after a good one
            while True:
                with self._lock:
                    if self._stopping:
                        return
                    full = self._active >= limit
                    self._saturated = full
                    # LimitListener: a slot first, then accept; meanwhile the kernel queues connections. With
                    # every slot taken, a waiting connection is worth noticing only when an idle one can make
                    # room for it and none is being closed for room already; otherwise only a wake helps (a
                    # slot freed, a connection gone idle, stop), and the listener is left alone.
                    watch = not full or (self._evicting == 0 and any(c.idle for c in self._connections))
                if watch != watching:
                    if watch:
                        selector.register(listener, selectors.EVENT_READ)
                    else:
                        selector.unregister(listener)
                    watching = watch
                events = selector.select()
                if any(key.fileobj is wake for key, _ in events):
                    self._drain_wake()
                    continue  # look again: stopping, a slot, an idle connection
                if full:
                    self._make_room()
                    continue
                try:
                    sock, client = listener.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError as exc:  # EMFILE, ECONNABORTED...: keep serving, without spinning
                    backoff = min(max(backoff * 2, 0.005), 1.0)
                    _log.warning("http.accept_failed", server=self.name, error=str(exc), retry_in_s=backoff)
                    if self._pause(selector, wake, backoff):
                        return
                    continue
                if self._start_connection(sock, client):
                    backoff = 0.0
                    continue
                backoff = min(max(backoff * 2, 0.005), 1.0)
                if self._pause(selector, wake, backoff):
                    return

    def _make_room(self) -> None:
        """Every slot is taken and a connection waits: closes the connection idle the longest, if any."""
        with self._lock:
            idle = [c for c in self._connections if c.idle and not c.evicted]
            if self._active < self.limits.max_connections or self._evicting or not idle:
                return
            victim = min(idle, key=lambda c: c.idle_since)
            victim.evicted = True
            victim.idle = False
            self._evicting += 1
            self._counts["evicted"] += 1
        _log.debug("http.idle_connection_evicted", server=self.name)
        self._end_read(victim)  # its thread wakes, sees evicted, and frees the slot

    def _connection_waits(self) -> bool:
        """Whether a connection waits in the listen queue (the listener is readable)."""
        listener = self._listener
        if listener is None:
            return False
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(listener, selectors.EVENT_READ)
                return bool(selector.select(0))
        except (OSError, ValueError):  # closed by stop()
            return False

    def _wake(self) -> None:
        """Wakes the accept loop (a slot freed, a connection gone idle, stop); a full pipe is a wake too."""
        wake = self._wake_w
        if wake is not None:
            with contextlib.suppress(OSError):
                wake.send(b"x")

    def _drain_wake(self) -> None:
        wake = self._wake_r
        assert wake is not None
        with contextlib.suppress(OSError):
            while wake.recv(4096):
                pass

    def _pause(self, selector: selectors.BaseSelector, wake: Any, seconds: float) -> bool:
        """Waits ``seconds`` unless stop wakes us first; True when stopping."""
        selector.unregister(wake)
        try:
            with selectors.DefaultSelector() as only_wake:
                only_wake.register(wake, selectors.EVENT_READ)
                deadline = time.monotonic() + seconds
                while (remaining := deadline - time.monotonic()) > 0:
                    only_wake.select(remaining)
                    self._drain_wake()
                    with self._lock:
                        if self._stopping:
                            return True
                return False
        finally:
            selector.register(wake, selectors.EVENT_READ)

    def _start_connection(self, sock: socket.socket, client: Any) -> bool:
        """Starts the connection's thread; False (connection closed, slot freed) if no thread can start."""
        sock.setblocking(True)
        conn = _Connection(sock, time.monotonic())
        conn.deadline = conn.started + self.limits.read_header_timeout
        thread = threading.Thread(
            target=self._serve_connection, args=(conn, client), name=f"{self.name}/conn", daemon=True
        )
        conn.thread = thread
        with self._lock:
            self._connections.add(conn)
            self._active += 1
        try:
            thread.start()
        except RuntimeError as exc:  # "can't start new thread": refuse this one, keep accepting
            _log.warning("http.thread_start_failed", server=self.name, error=str(exc))
            self._release(conn)
            return False
        return True

    def _release(self, conn: _Connection) -> None:
        with contextlib.suppress(OSError):
            conn.sock.close()
        with self._lock:
            self._connections.discard(conn)
            self._active -= 1
            if conn.evicted:
                self._evicting -= 1
            waiting = self._saturated
        if waiting:
            self._wake()

    # --- one connection ---------------------------------------------------------------------------------

    def _serve_connection(self, conn: _Connection, client: Any) -> None:
        host = str(client[0]) if isinstance(client, tuple) and client else "?"
        try:
            with contextlib.suppress(OSError):
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls_context is not None and not self._handshake(conn, host):
                return
            while self._serve_request(conn, host) and self._wait_for_next_request(conn):
                pass
        except Exception:  # noqa: BLE001 - a bug here must not take the server down; logged with its traceback
            _log.error(
                "http.connection_crashed", server=self.name, client=host, traceback=traceback.format_exc()
            )
        finally:
            self._release(conn)

    def _handshake(self, conn: _Connection, host: str) -> bool:
        assert self._tls_context is not None
        try:
            context = self._tls_context()
        except Exception as exc:  # noqa: BLE001 - no certificate yet (CertificateNotReady) or a broken source
            self._count("refused")
            _log.info("http.connection_refused", server=self.name, reason=str(exc))
            return False
        if context.minimum_version != ssl.TLSVersion.MAXIMUM_SUPPORTED and (
            context.minimum_version < ssl.TLSVersion.TLSv1_2
        ):
            context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            conn.sock.settimeout(max(conn.deadline - time.monotonic(), 0.001))
            tls = context.wrap_socket(conn.sock, server_side=True, do_handshake_on_connect=False)
        except (OSError, ValueError) as exc:
            self._count("handshake_failures")
            _log.debug("http.handshake_failed", server=self.name, client=host, error=str(exc))
            return False
        with self._lock:
            conn.sock = tls  # wrapping took the descriptor over: stop() must reach this socket now
            stopping = self._stopping
        if stopping:
            return False
        try:
            tls.do_handshake()
        except TimeoutError:
            self._count("timed_out")
            return False
        except (OSError, ValueError) as exc:
            self._count("handshake_failures")
            _log.debug("http.handshake_failed", server=self.name, client=host, error=str(exc))
            return False
        if tls.version() not in ("TLSv1.2", "TLSv1.3"):
            self._count("handshake_failures")
            return False
        return True

    def _serve_request(self, conn: _Connection, host: str) -> bool:
        """Reads, answers and counts one request; True when the connection may carry another (see the module
        doc for when it may not)."""
        limits = self.limits
        try:
            head_end, body_start = self._read_head(conn)
            head = _parse_head(bytes(conn.buffer[:head_end]))
        except _Timeout:
            self._count("timed_out")
            return False
        except _Closed:
            return False
        except _Refuse as refusal:
            self._answer(conn, self._error_response(refusal.status, refusal.message), drain=True)
            return False
        del conn.buffer[:body_start]
        method, length, head_only = head.method, head.length, head.method == "HEAD"
        parts = urlsplit(head.target)
        request = Request(
            method=method,
            path=parts.path or ("*" if head.target == "*" else "/"),
            headers=head.headers,
            query=parse_qs(parts.query, keep_blank_values=True),
            content_length=length,
        )
        if head.chunked:
            answer = self._error_response(
                411, "a Content-Length is required: chunked bodies are not accepted"
            )
            self._answer(conn, answer, drain=True)
            return False
        early, sound = self._head_answer(request)
        if early is not None:
            if length:  # the body was not read: the connection cannot carry another request
                self._answer(conn, early, drain=True, head_only=head_only)
                return False
            return self._answer(conn, early, keep_alive=head.keep_alive and sound, head_only=head_only)
        if length is not None and length > limits.max_body_bytes:
            message = f"request entity is too large; limit is {limits.max_body_bytes} bytes"
            self._answer(conn, self._error_response(413, message), drain=True)
            return False
        body = b""
        if length:
            expect = head.headers.get("expect", "").lower()
            if expect and expect != "100-continue":
                self._answer(conn, self._error_response(417, f"unsupported Expect: {expect}"), drain=True)
                return False
            conn.deadline = conn.started + limits.read_timeout
            try:
                if expect and len(conn.buffer) < length:
                    self._write(conn, b"HTTP/1.1 100 Continue\r\n\r\n")
                while len(conn.buffer) < length:
                    conn.read_some()
            except _Timeout:
                self._count("timed_out")
                message = "the request body was not received within the read timeout"
                self._answer(conn, self._error_response(408, message))
                return False
            except (_Closed, OSError):
                return False  # the client went away before sending its body
            body = bytes(conn.buffer[:length])
            del conn.buffer[:length]  # what follows is the next request's (pipelining)
        request = Request(
            method=method,
            path=request.path,
            headers=head.headers,
            query=request.query,
            body=body,
            content_length=length,
        )
        answer, sound = self._call_handler(request, host)
        return self._answer(conn, answer, keep_alive=head.keep_alive and sound, head_only=head_only)

    def _wait_for_next_request(self, conn: _Connection) -> bool:
        """After an answer that kept the connection open: waits up to ``idle_timeout`` for the next request's
        first bytes; True when they are here (its deadlines start now), False when the connection is to be
        closed (idle timeout, the client closed, stop, or the accept loop evicted it to make room)."""
        now = time.monotonic()
        if conn.buffer:  # pipelined: the next request is already here
            conn.started = now
            conn.deadline = now + self.limits.read_header_timeout
            self._count("reused")
            return True
        with self._lock:
            if self._stopping:
                return False
            conn.idle = True
            conn.idle_since = now
            waiting = self._saturated
        if waiting:
            self._wake()  # the accept loop may close this one for a connection that waits
        conn.deadline = now + self.limits.idle_timeout
        outcome = "request"
        try:
            conn.read_some()
        except _Timeout:
            outcome = "idle_closed"
        except _Closed:
            outcome = "closed"
        with self._lock:
            conn.idle = False
            if conn.evicted:  # counted by the accept loop; whatever arrived meanwhile is not served
                return False
            if outcome != "request":
                if outcome == "idle_closed":
                    self._counts["idle_closed"] += 1
                return False
            self._counts["reused"] += 1
        conn.started = time.monotonic()
        conn.deadline = conn.started + self.limits.read_header_timeout
        return True

    def _read_head(self, conn: _Connection) -> tuple[int, int]:
        limit = self.limits.max_header_bytes
        while True:
            found = _find_end_of_headers(conn.buffer)
            if found is not None:
                if found[0] > limit:
                    break
                return found
            if len(conn.buffer) > limit:
                break
            conn.read_some()
        raise _Refuse(431, f"request header fields too large; limit is {limit} bytes")

    def _head_answer(self, request: Request) -> tuple[Response | None, bool]:
        """The head check's answer, and False when it raised (then the answer is 500)."""
        if self._check_head is None:
            return None, True
        try:
            return self._check_head(request), True
        except Exception:  # noqa: BLE001 - a bug in the check answers 500, logged; the server carries on
            self._count("handler_errors")
            _log.error(
                "http.handler_failed", server=self.name, path=request.path, traceback=traceback.format_exc()
            )
            return self._error_response(500, "internal server error"), False

    def _call_handler(self, request: Request, host: str) -> tuple[Response, bool]:
        """The handler's answer, and False when it raised (then the answer is 500)."""
        try:
            return self._handler(request), True
        except Exception:  # noqa: BLE001 - one bad request must not kill the server; logged and counted
            self._count("handler_errors")
            _log.error(
                "http.handler_failed",
                server=self.name,
                path=request.path,
                client=host,
                traceback=traceback.format_exc(),
            )
            return self._error_response(500, "internal server error"), False

    # --- answering --------------------------------------------------------------------------------------

    def _answer(
        self,
        conn: _Connection,
        response: Response,
        *,
        drain: bool = False,
        keep_alive: bool = False,
        head_only: bool = False,
    ) -> bool:
        """Writes the answer; True when the connection stays open for another request (``keep_alive``
        asked for, the server allows it and is not stopping, the answer was written)."""
        with self._lock:
            keep_alive = (
                keep_alive
                and not drain
                and response.status not in _CLOSING
                and self.limits.keep_alive
                and not self._stopping
            )
            saturated = self._saturated
        if keep_alive and saturated and self._connection_waits():
            keep_alive = False  # the slot turns over: a busy kept connection never locks a new client out
        try:
            data = _encode(response, head_only=head_only, keep_alive=keep_alive)
        except ValueError:
            self._count("handler_errors")
            _log.error("http.bad_response", server=self.name, status=response.status)
            keep_alive = False
            data = _encode(
                self._error_response(500, "internal server error"), head_only=head_only, keep_alive=False
            )
        try:
            self._write(conn, data)
        except OSError as exc:
            _log.debug("http.write_failed", server=self.name, error=str(exc))
            return False
        self._count("served")
        if drain:
            self._linger(conn)
        return keep_alive

    def _write(self, conn: _Connection, data: bytes) -> None:
        conn.sock.settimeout(self.limits.write_timeout)
        conn.sock.sendall(data)

    def _linger(self, conn: _Connection) -> None:
        """Go's ``closeWriteAndWait``: a client still sending its body reads our answer, not a reset."""
        with contextlib.suppress(OSError, ValueError):
            if isinstance(conn.sock, ssl.SSLSocket):
                socket.socket.shutdown(conn.sock, socket.SHUT_WR)
            else:
                conn.sock.shutdown(socket.SHUT_WR)
        end = time.monotonic() + _LINGER_S
        drained = 0
        with contextlib.suppress(OSError, ValueError):
            while drained < _LINGER_BYTES:
                remaining = end - time.monotonic()
                if remaining <= 0:
                    return
                conn.sock.settimeout(remaining)
                chunk = conn.sock.recv(_READ_CHUNK)
                if not chunk:
                    return
                drained += len(chunk)

    def __repr__(self) -> str:
        host, port = self.address
        with self._lock:
            state = "serving" if self._thread is not None else "stopped"
            active = self._active
            idle = sum(1 for conn in self._connections if conn.idle)
        return (
            f"HTTPServer({self.name!r}, {self.scheme}://{host}:{port}, {state}, "
            f"active={active}/{self.limits.max_connections}, idle={idle})"
        )


def dial_tls(address: tuple[str, int], what: str, timeout: float = 10.0) -> None:
    """Completes a TLS handshake with a server of this process (the certificate is not verified: only that
    it answers), for readiness checks; raises RuntimeError naming ``what`` when it does not."""
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection(address, timeout=timeout) as raw, client.wrap_socket(raw):
            pass
    except OSError as exc:
        raise RuntimeError(f"{what} is not reachable: {exc}") from exc
