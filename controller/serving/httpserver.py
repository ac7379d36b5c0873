"""The HTTP(S) server every server of the manager runs on: bounded in connections, time and bytes.

Go origin: ``net/http``'s ``Server`` with the fields controller-runtime sets in
``pkg/internal/httpserver`` (``ReadHeaderTimeout``, ``MaxHeaderBytes``) and upstream Trainer's status server
sets (``ReadTimeout``, ``WriteTimeout``), ``golang.org/x/net/netutil.LimitListener`` (the connection cap),
the request-size caps of controller-runtime's admission handler (``maxRequestSize``, 7 MiB) and of
``http.MaxBytesReader``, and ``crypto/tls``'s server handshake. The webhook server
(:mod:`controller.serving.webhook.server`), the status server (:mod:`controller.trainer.statusserver`) and the
probe and metrics servers (:class:`controller.serving.app.Server`) are this server with their own handler and
:class:`Limits`.

Guarantees (``Limits`` names the bounds):

- **Connections are capped** at ``max_connections``, each served on its own named thread
  (``<name>/conn``). As with ``LimitListener``, the accept loop (``<name>/serve``) takes a slot before it
  accepts, so connections beyond the cap wait in the kernel's listen queue (``backlog``; beyond it the
  kernel drops the handshake and the client retries) until a slot is free. Nothing a client does makes the
  server start more threads than the cap.
- **Time is bounded** from the moment a connection is accepted: the TLS handshake and the request line and
  headers must arrive within ``read_header_timeout``, the whole request (the body too) within
  ``read_timeout``; each read waits only for the time that is left, so a client that trickles one byte at
  a time (slowloris) loses its slot at the deadline like a silent one. A client that runs out of time
  before its headers are complete is disconnected without an answer (as Go does); one whose body is late
  gets 408. Writing the answer may take ``write_timeout``.
- **Bytes are bounded**: request line and headers at most ``max_header_bytes`` (431 beyond), the body at
  most ``max_body_bytes`` (413, decided from ``Content-Length`` before a byte of the body is read). A body
  needs a ``Content-Length``: ``Transfer-Encoding`` (chunked) is 411. A request the parser cannot read (no
  request line, a header line without a colon, a folded header, two different ``Content-Length`` values, a
  version other than HTTP/1.0 or 1.1) is 400 (Go answers 505 to HTTP/2.0 over plain TCP; here no input
  gets a 5xx). ``Expect: 100-continue`` is answered before the body is read, another expectation is 417.
  A handler sees only complete, well-formed requests.
- **Never crashes, never 5xx on input**: the server's own refusals are 4xx; a handler that raises is 500
  (logged with its traceback, counted), and the connection thread carries on to the next connection.
- **TLS** with ``tls_context``: the context is asked for on every connection (so a rotated certificate is
  served from the next one); a context that allows less than TLS 1.2 has its minimum raised to 1.2 before
  use, and a connection that negotiated less is closed, so no server of this process speaks TLS 1.0 or
  1.1 whatever it is handed. Before a certificate exists (the function raises), connections are closed
  after accept and counted as ``refused``.
- One request per connection (``Connection: close``), and the answer leaves in one write with
  ``TCP_NODELAY`` (no Nagle stall). When the answer was given without reading the whole body (413, a 404
  before the body), the server stops writing and discards what the client still sends for up to
  ``_LINGER_S`` (Go's ``closeWriteAndWait``), so the client reads the answer instead of a reset.
- :meth:`HTTPServer.stop` stops accepting, ends the reads of connections still waiting for their request
  (an answer being written is finished), and joins every thread it started. It binds where it is told
  (loopback or an explicit address; see :func:`controller.serving.app.parse_bind_address`).

Deliberately missing: keep-alive (a slot per request is what makes the cap a bound), chunked request bodies
(the API server and the Kubeflow SDK send a ``Content-Length``), HTTP/2 (off upstream too, CVE-2023-44487),
client-certificate authentication, and the fake clock: the deadlines are the sockets' own, so tests shorten
the limits instead.
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

    def __post_init__(self) -> None:
        for name in ("max_connections", "backlog", "max_header_bytes", "max_body_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"limits.{name}: must be a positive integer, got {value!r}")
        for name in ("read_header_timeout", "read_timeout", "write_timeout"):
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
    server's."""


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
    """Connections being served."""
    saturated: bool = False
    """Every slot is taken: the accept loop waits, and new connections wait in the listen queue."""
    served: int = 0
    """Requests answered (by the handler or by the server's own refusals)."""
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
    what has been read but not used, and the deadline reads are held to."""

    __slots__ = ("accepted", "buffer", "deadline", "sock", "thread")

    def __init__(self, sock: socket.socket, accepted: float) -> None:
        self.sock = sock
        self.accepted = accepted
        self.buffer = bytearray()
        self.deadline = accepted
        self.thread: threading.Thread | None = None

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


def _encode(response: Response, *, head_only: bool) -> bytes:
    lines = [
        f"HTTP/1.1 {response.status} {_reason(response.status)}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(response.body)}",
        "X-Content-Type-Options: nosniff",
        "Connection: close",
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


def _parse_head(block: bytes) -> tuple[str, str, Mapping[str, str], int | None, bool]:
    """(method, target, headers, content length, chunked) of a header block; raises :class:`_Refuse`."""
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
        headers.setdefault(key, text)
    if len(lengths) > 1:
        raise _Refuse(400, "conflicting Content-Length headers")
    length: int | None = None
    if lengths:
        text = next(iter(lengths))
        if not text.isdigit() or not text.isascii():
            raise _Refuse(400, "malformed Content-Length")
        length = int(text)
    return parts[0].decode("ascii"), target, MappingProxyType(headers), length, "transfer-encoding" in headers


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
        self._slot_free = threading.Condition(self._lock)
        # Guarded by _lock. Invariant: len(_connections) == _active <= limits.max_connections.
        self._connections: set[_Connection] = set()
        self._active = 0
        self._saturated = False
        self._stopping = False
        self._counts = {
            "served": 0,
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
            self._slot_free.notify_all()
        if self._wake_w is not None:
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")
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
            return ServerStatistics(active=self._active, saturated=self._saturated, **self._counts)

    def _count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1

    # --- accepting --------------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        listener, wake = self._listener, self._wake_r
        assert listener is not None and wake is not None
        with selectors.DefaultSelector() as selector:
            selector.register(listener, selectors.EVENT_READ)
            selector.register(wake, selectors.EVENT_READ)
            backoff = 0.0  # net/http's Serve: 5 ms doubling to 1 s after a failed accept, 0 after a good one
            while True:
                with self._lock:
                    # LimitListener: a slot first, then accept; meanwhile the kernel queues connections.
                    while self._active >= self.limits.max_connections and not self._stopping:
                        self._saturated = True
                        self._slot_free.wait()
                    self._saturated = False
                    if self._stopping:
                        return
                events = selector.select()
                if any(key.fileobj is wake for key, _ in events):
                    return
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

    @staticmethod
    def _pause(selector: selectors.BaseSelector, wake: Any, seconds: float) -> bool:
        """Waits ``seconds`` unless stop wakes us first; True when stopping."""
        selector.unregister(wake)
        try:
            with selectors.DefaultSelector() as only_wake:
                only_wake.register(wake, selectors.EVENT_READ)
                return bool(only_wake.select(seconds))
        finally:
            selector.register(wake, selectors.EVENT_READ)

    def _start_connection(self, sock: socket.socket, client: Any) -> bool:
        """Starts the connection's thread; False (connection closed, slot freed) if no thread can start."""
        sock.setblocking(True)
        conn = _Connection(sock, time.monotonic())
        conn.deadline = conn.accepted + self.limits.read_header_timeout
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
            self._slot_free.notify()

    # --- one connection ---------------------------------------------------------------------------------

    def _serve_connection(self, conn: _Connection, client: Any) -> None:
        host = str(client[0]) if isinstance(client, tuple) and client else "?"
        try:
            with contextlib.suppress(OSError):
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls_context is not None and not self._handshake(conn, host):
                return
            self._serve_request(conn, host)
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

    def _serve_request(self, conn: _Connection, host: str) -> None:
        limits = self.limits
        try:
            head_end, body_start = self._read_head(conn)
            method, target, headers, length, chunked = _parse_head(bytes(conn.buffer[:head_end]))
        except _Timeout:
            self._count("timed_out")
            return
        except _Closed:
            return
        except _Refuse as refusal:
            self._answer(conn, self._error_response(refusal.status, refusal.message), drain=True)
            return
        del conn.buffer[:body_start]
        parts = urlsplit(target)
        request = Request(
            method=method,
            path=parts.path or ("*" if target == "*" else "/"),
            headers=headers,
            query=parse_qs(parts.query, keep_blank_values=True),
            content_length=length,
        )
        if chunked:
            answer = self._error_response(
                411, "a Content-Length is required: chunked bodies are not accepted"
            )
            self._answer(conn, answer, drain=True)
            return
        early = self._head_answer(request)
        if early is not None:
            self._answer(conn, early, drain=bool(length), head_only=method == "HEAD")
            return
        if length is not None and length > limits.max_body_bytes:
            message = f"request entity is too large; limit is {limits.max_body_bytes} bytes"
            self._answer(conn, self._error_response(413, message), drain=True)
            return
        body = b""
        if length:
            expect = headers.get("expect", "").lower()
            if expect and expect != "100-continue":
                self._answer(conn, self._error_response(417, f"unsupported Expect: {expect}"), drain=True)
                return
            conn.deadline = conn.accepted + limits.read_timeout
            try:
                if expect and len(conn.buffer) < length:
                    self._write(conn, b"HTTP/1.1 100 Continue\r\n\r\n")
                while len(conn.buffer) < length:
                    conn.read_some()
            except _Timeout:
                self._count("timed_out")
                message = "the request body was not received within the read timeout"
                self._answer(conn, self._error_response(408, message))
                return
            except (_Closed, OSError):
                return  # the client went away before sending its body
            body = bytes(conn.buffer[:length])
        request = Request(
            method=method,
            path=request.path,
            headers=headers,
            query=request.query,
            body=body,
            content_length=length,
        )
        self._answer(conn, self._call_handler(request, host), head_only=method == "HEAD")

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

    def _head_answer(self, request: Request) -> Response | None:
        if self._check_head is None:
            return None
        try:
            return self._check_head(request)
        except Exception:  # noqa: BLE001 - a bug in the check answers 500, logged; the server carries on
            self._count("handler_errors")
            _log.error(
                "http.handler_failed", server=self.name, path=request.path, traceback=traceback.format_exc()
            )
            return self._error_response(500, "internal server error")

    def _call_handler(self, request: Request, host: str) -> Response:
        try:
            return self._handler(request)
        except Exception:  # noqa: BLE001 - one bad request must not kill the server; logged and counted
            self._count("handler_errors")
            _log.error(
                "http.handler_failed",
                server=self.name,
                path=request.path,
                client=host,
                traceback=traceback.format_exc(),
            )
            return self._error_response(500, "internal server error")

    # --- answering --------------------------------------------------------------------------------------

    def _answer(
        self, conn: _Connection, response: Response, *, drain: bool = False, head_only: bool = False
    ) -> None:
        try:
            data = _encode(response, head_only=head_only)
        except ValueError:
            self._count("handler_errors")
            _log.error("http.bad_response", server=self.name, status=response.status)
            data = _encode(self._error_response(500, "internal server error"), head_only=head_only)
        try:
            self._write(conn, data)
        except OSError as exc:
            _log.debug("http.write_failed", server=self.name, error=str(exc))
            return
        self._count("served")
        if drain:
            self._linger(conn)

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
        return (
            f"HTTPServer({self.name!r}, {self.scheme}://{host}:{port}, {state}, "
            f"active={active}/{self.limits.max_connections})"
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
