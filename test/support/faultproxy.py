"""A loopback fault-injection proxy for the reliability suite: it stands between a client and a server and
forwards, stops forwarding, refuses, or answers with an injected error, and writes down every request.

Test support (loaded by path; ``test/`` is no package). Modes:

- ``http`` (the default): HTTP/1.1, request by request. TLS towards the client is terminated with
  ``server_tls`` (the client trusts that context's CA) and re-established towards the server with
  ``upstream_tls``; headers pass unchanged, so a bearer token authenticates the client to kube-apiserver as
  itself (a client certificate cannot pass through: give ``upstream_tls`` one to present, and every request
  is then that identity). Responses are relayed as they arrive (a watch streams through). Each request is
  recorded as an :class:`Exchange` (method, path, Kubernetes verb and resource, status, whether injected,
  when), and :class:`Fault` rules answer a matching fraction of requests with a Kubernetes ``Status`` error
  instead of forwarding them (429 with ``Retry-After``, 5xx, 410 ``Expired``...).
- ``tcp``: bytes both ways, nothing parsed (only connections are counted); the same outages apply.

Outages, for every connection, open or new: :meth:`FaultProxy.blackhole` stops forwarding bytes in either
direction and leaves connections open, a network partition (the peers see silence until their timeouts);
:meth:`FaultProxy.refuse` closes every connection and the listening socket, so new connections are refused
(the server is down); :meth:`FaultProxy.forward` ends either, listening again on the same port.

Guarantees: it listens on 127.0.0.1 only; every thread it starts is named ``faultproxy/<name>/...``
(``accept``, ``conn-<n>``) and joined by :meth:`FaultProxy.stop`, which also closes every socket; a fault
with ``fraction`` below 1 draws from a ``random.Random(seed)``, so a run is repeatable for a given order
of requests. Thread-safe: the rules, the mode and the record share one lock.

Deliberately missing: HTTP/2 (the clients under test speak HTTP/1.1), protocol upgrades (exec,
port-forward), pipelined requests, chunked request bodies, and latency injection.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import random
import select
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qs, urlsplit

import orjson

__all__ = [
    "Exchange",
    "Fault",
    "FaultProxy",
    "ProxyStatistics",
    "RequestInfo",
    "request_info",
]

_POLL = 0.05  # seconds between checks of the mode and the stop flag while waiting for bytes
_CHUNK = 64 * 1024
_MAX_HEAD = 64 * 1024
_NO_BODY_STATUSES = (204, 304)


# --- what a request is, in Kubernetes words -----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestInfo:
    """A request as kube-apiserver's RequestInfoFactory would name it (empty strings where nothing fits)."""

    method: str
    path: str
    query: dict[str, list[str]]
    verb: str
    """get, list, watch, create, update, patch, apply, delete, deletecollection; for a non-resource path
    the lower-case method."""
    group: str
    version: str
    resource: str
    subresource: str
    namespace: str
    name: str

    @property
    def qualified_resource(self) -> str:
        """``resource`` or ``resource/subresource`` (``trainjobs/status``)."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource

    @property
    def is_write(self) -> bool:
        return self.method in ("POST", "PUT", "PATCH", "DELETE")


def request_info(method: str, target: str, content_type: str = "") -> RequestInfo:
    """Name a request by method, request target (path and query) and Content-Type."""
    parts = urlsplit(target)
    query = parse_qs(parts.query, keep_blank_values=True)
    segments = [s for s in parts.path.split("/") if s]
    group = version = resource = subresource = namespace = name = ""
    rest: list[str] = []
    if len(segments) >= 2 and segments[0] == "api":
        version, rest = segments[1], segments[2:]
    elif len(segments) >= 3 and segments[0] == "apis":
        group, version, rest = segments[1], segments[2], segments[3:]
    if rest and rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    if rest:
        resource = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        subresource = "/".join(rest[2:])
    if not resource:
        verb = method.lower()
    elif method == "GET":
        watching = query.get("watch", [""])[0].lower() in ("true", "1")
        verb = "get" if name else ("watch" if watching else "list")
    elif method == "PATCH" and content_type.startswith("application/apply-patch"):
        verb = "apply"
    elif method == "DELETE" and not name:
        verb = "deletecollection"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, "")
    return RequestInfo(
        method=method,
        path=parts.path,
        query=query,
        verb=verb,
        group=group,
        version=version,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
    )


# --- faults and the record ----------------------------------------------------------------------------------


def _everything(info: RequestInfo) -> bool:
    return True


_REASONS = {
    410: ("Expired", "too old resource version"),
    429: ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
    500: ("InternalError", "an error on the server has prevented the request from succeeding"),
    502: ("InternalError", "bad gateway"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: ("Timeout", "the server was unable to return a response in the time allotted"),
}


@dataclass(slots=True, kw_only=True)
class Fault:
    """Answer matching requests with ``status`` instead of forwarding them.

    ``match`` picks the requests (default: all); ``fraction`` of those that match are answered (drawn from
    the proxy's seeded generator); ``limit`` caps how many in all (None: no cap); ``retry_after`` (whole
    seconds) is sent as the ``Retry-After`` header and ``details.retryAfterSeconds``. ``injected`` counts
    the answers given so far (read it under the proxy's :meth:`FaultProxy.statistics` or after the run).
    """

    status: int
    match: Callable[[RequestInfo], bool] = _everything
    fraction: float = 1.0
    limit: int | None = None
    retry_after: int | None = None
    message: str = ""
    injected: int = 0

    def __post_init__(self) -> None:
        if not 400 <= self.status <= 599:
            raise ValueError(f"Fault.status must be an HTTP error status (400-599), got {self.status}")
        if not 0.0 < self.fraction <= 1.0:
            raise ValueError(f"Fault.fraction must be in (0, 1], got {self.fraction}")
        if self.retry_after is not None and self.retry_after < 0:
            raise ValueError(f"Fault.retry_after must be >= 0 seconds, got {self.retry_after}")
        if self.limit is not None and self.limit < 0:
            raise ValueError(f"Fault.limit must be >= 0, got {self.limit}")

    def body(self) -> bytes:
        reason, default = _REASONS.get(self.status, ("Unknown", "injected failure"))
        status: dict[str, object] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message or f"{default} (injected by faultproxy)",
            "reason": reason,
            "code": self.status,
        }
        if self.retry_after is not None:
            status["details"] = {"retryAfterSeconds": self.retry_after}
        return orjson.dumps(status)


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """One request through the proxy (``http`` mode)."""

    at: float
    """``time.monotonic()`` when the request had been read."""
    info: RequestInfo
    status: int | None
    """The answer's status; None when no answer came (the connection broke, or the proxy stopped)."""
    injected: bool
    connection: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyStatistics:
    """What went through so far."""

    mode: str
    connections: int
    requests: int
    injected: int
    by_verb: dict[str, int]
    by_status: dict[str, int]


class _Closed(Exception):
    """The connection is finished: a peer closed it, the proxy dropped it, or the proxy is stopping."""


# --- the proxy ----------------------------------------------------------------------------------------------


class FaultProxy:
    """A loopback proxy to ``upstream`` (host, port); see the module docstring. Use as a context manager."""

    def __init__(
        self,
        upstream: tuple[str, int],
        *,
        name: str,
        mode: Literal["http", "tcp"] = "http",
        server_tls: ssl.SSLContext | None = None,
        upstream_tls: ssl.SSLContext | None = None,
        port: int = 0,
        seed: int = 0,
    ) -> None:
        if upstream[0] not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"upstream must be a loopback address, got {upstream[0]!r}")
        if mode not in ("http", "tcp"):
            raise ValueError(f"mode must be 'http' or 'tcp', got {mode!r}")
        self.name = name
        self._upstream = upstream
        self._mode = mode
        self._server_tls = server_tls
        self._upstream_tls = upstream_tls
        self._port = port
        self._lock = threading.Lock()
        # Guarded by _lock.
        self._state: Literal["forward", "blackhole", "refuse"] = "forward"
        self._faults: list[Fault] = []
        self._exchanges: list[Exchange] = []
        self._connections: dict[int, list[socket.socket]] = {}  # live connection id -> its sockets
        self._threads: list[threading.Thread] = []
        self._rng = random.Random(seed)
        self._connection_count = 0
        self._ids = itertools.count(1)
        # Set while forwarding (cleared by blackhole and refuse); connection threads wait on it.
        self._flowing = threading.Event()
        self._flowing.set()
        self._stopping = threading.Event()
        self._listening = threading.Event()  # set while the listening socket is open
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None

    # --- lifecycle ----------------------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        if self._acceptor is not None:
            raise RuntimeError(f"{self!r} was already started")
        self._listen()
        self._acceptor = threading.Thread(target=self._accept_loop, name=f"faultproxy/{self.name}/accept")
        self._acceptor.start()
        return self

    def stop(self) -> None:
        """Close every socket and join every thread. Idempotent."""
        self._stopping.set()
        self._flowing.set()  # wake connection threads waiting out a blackhole
        self._close_listener()
        self._drop_connections()
        if self._acceptor is not None:
            self._acceptor.join(10)
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(10)
        stuck = [t.name for t in threads if t.is_alive()]
        if self._acceptor is not None and self._acceptor.is_alive():
            stuck.append(self._acceptor.name)
        if stuck:
            raise RuntimeError(f"faultproxy {self.name}: threads did not stop: {stuck}")

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self._port)

    @property
    def url(self) -> str:
        scheme = "https" if self._server_tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self._port}"

    # --- outages and faults -------------------------------------------------------------------------------

    def blackhole(self) -> None:
        """Stop forwarding: open connections stay open and silent, new ones are accepted and left silent."""
        with self._lock:
            self._state = "blackhole"
        self._flowing.clear()

    def refuse(self) -> None:
        """Close every connection and stop listening: new connections are refused until :meth:`forward`."""
        with self._lock:
            self._state = "refuse"
        self._flowing.clear()
        self._close_listener()
        self._drop_connections()

    def forward(self) -> None:
        """Forward again (after :meth:`blackhole` or :meth:`refuse`), listening on the same port."""
        with self._lock:
            previous, self._state = self._state, "forward"
        if previous == "refuse":
            self._listen()
        self._flowing.set()

    def drop_connections(self) -> None:
        """Close every open connection (the peers see a reset or EOF); keep listening and forwarding."""
        self._drop_connections()

    def inject(self, fault: Fault) -> Fault:
        """Add a fault rule (checked in the order added; the first that fires answers). Returns it."""
        if self._mode != "http":
            raise RuntimeError("faults need mode='http'")
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    # --- the record ---------------------------------------------------------------------------------------

    def exchanges(
        self, *, since: float | None = None, where: Callable[[Exchange], bool] | None = None
    ) -> list[Exchange]:
        """The requests recorded (answered or not), oldest first, optionally from ``since`` and filtered."""
        with self._lock:
            recorded = list(self._exchanges)
        return [e for e in recorded if (since is None or e.at >= since) and (where is None or where(e))]

    def statistics(self) -> ProxyStatistics:
        with self._lock:
            recorded = list(self._exchanges)
            connections = self._connection_count
            state = self._state
            injected = sum(f.injected for f in self._faults)
        return ProxyStatistics(
            mode=state,
            connections=connections,
            requests=len(recorded),
            injected=injected,
            by_verb=dict(Counter(e.info.verb for e in recorded)),
            by_status=dict(Counter(str(e.status) for e in recorded)),
        )

    # --- sockets ------------------------------------------------------------------------------------------

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        last: OSError | None = None
        for _ in range(50):  # the port may linger briefly after refuse(); it is ours to take back
            try:
                listener.bind(("127.0.0.1", self._port))
                break
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE or not self._port:
                    listener.close()
                    raise
                last = exc
                time.sleep(0.1)
        else:
            listener.close()
            raise RuntimeError(f"faultproxy {self.name}: port {self._port} stayed in use") from last
        listener.listen(128)
        self._port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener
        self._listening.set()

    def _close_listener(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
        self._listening.clear()
        if listener is not None:
            # Linux: shutdown() stops the listening socket at once, even while the accept thread polls it
            # (a bare close() would leave it listening until that poll returns).
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()

    def _drop_connections(self) -> None:
        with self._lock:
            sockets = [s for group in self._connections.values() for s in group]
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                listener = self._listener
            if listener is None:
                self._stopping.wait(_POLL)
                continue
            try:
                ready, _, _ = select.select([listener], [], [], _POLL)
                if not ready:
                    continue
                sock, _ = listener.accept()
            except (OSError, ValueError):
                continue  # the listener was closed under us (refuse or stop)
            conn_id = next(self._ids)
            thread = threading.Thread(
                target=self._serve, args=(conn_id, sock), name=f"faultproxy/{self.name}/conn-{conn_id}"
            )
            with self._lock:
                if self._stopping.is_set():
                    sock.close()
                    return
                self._connection_count += 1
                self._connections[conn_id] = [sock]
                self._threads = [t for t in self._threads if t.is_alive()]
                self._threads.append(thread)
            thread.start()

    def _track(self, conn_id: int, sock: socket.socket) -> None:
        with self._lock:
            group = self._connections.get(conn_id)
            if group is None:
                raise _Closed
            group.append(sock)

    def _serve(self, conn_id: int, raw: socket.socket) -> None:
        sockets: list[socket.socket] = [raw]
        try:
            self._gate()
            client = raw
            if self._server_tls is not None:
                raw.settimeout(10)
                client = self._server_tls.wrap_socket(raw, server_side=True)
                self._track(conn_id, client)
                sockets.append(client)
            client.settimeout(60)
            upstream = socket.create_connection(self._upstream, timeout=10)
            self._track(conn_id, upstream)
            sockets.append(upstream)
            if self._upstream_tls is not None:
                upstream = self._upstream_tls.wrap_socket(upstream, server_hostname=self._upstream[0])
                self._track(conn_id, upstream)
                sockets.append(upstream)
            upstream.settimeout(60)
            if self._mode == "tcp":
                self._relay_bytes(_Endpoint(client, self), _Endpoint(upstream, self))
            else:
                self._relay_http(conn_id, _Endpoint(client, self), _Endpoint(upstream, self))
        except (_Closed, OSError, ValueError, ssl.SSLError):
            pass  # a peer or the proxy ended the connection: nothing to report
        finally:
            with self._lock:
                self._connections.pop(conn_id, None)
            for sock in reversed(sockets):
                with contextlib.suppress(OSError):
                    sock.close()

    def _gate(self) -> None:
        """Return once bytes may flow; raise :class:`_Closed` if the proxy stops or refuses meanwhile."""
        while not self._flowing.is_set():
            self._flowing.wait(_POLL)
        if self._stopping.is_set():
            raise _Closed
        with self._lock:
            if self._state == "refuse":
                raise _Closed

    # --- relays -------------------------------------------------------------------------------------------

    def _relay_bytes(self, client: _Endpoint, upstream: _Endpoint) -> None:
        while True:
            self._gate()
            for source, sink in _readable(client, upstream):
                data = source.take_some()
                if not data:
                    raise _Closed
                sink.send(data)

    def _relay_http(self, conn_id: int, client: _Endpoint, upstream: _Endpoint) -> None:
        while True:
            head = client.read_head(other=None)
            request_line, headers = _parse_head(head)
            method, target = _request_target(request_line)
            body = client.read_exactly(_content_length(headers), other=None)
            info = request_info(method, target, headers.get("content-type", ""))
            at = time.monotonic()
            fault = self._fault_for(info)
            if fault is not None:
                client.send(_fault_response(fault))
                self._record(at, info, fault.status, True, conn_id)
                if _wants_close(headers):
                    return
                continue
            try:
                upstream.send(head + body)
                response_head = upstream.read_head(other=client)
            except BaseException:
                self._record(at, info, None, False, conn_id)
                raise
            status_line, response_headers = _parse_head(response_head)
            status = _status(status_line)
            # Recorded as the answer starts: a watch is in the record while it streams.
            self._record(at, info, status, False, conn_id)
            client.send(response_head)
            self._relay_body(method, status, response_headers, upstream, client)
            if _wants_close(headers) or _wants_close(response_headers):
                return

    def _relay_body(
        self, method: str, status: int, headers: dict[str, str], upstream: _Endpoint, client: _Endpoint
    ) -> None:
        if method == "HEAD" or status in _NO_BODY_STATUSES or 100 <= status < 200:
            return
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                size_line = upstream.read_line(other=client)
                client.send(size_line)
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers, then the empty line
                        trailer = upstream.read_line(other=client)
                        client.send(trailer)
                        if trailer in (b"\r\n", b"\n"):
                            return
                upstream.relay_exactly(size + 2, client)
        elif "content-length" in headers:
            upstream.relay_exactly(_content_length(headers), client)
        else:  # delimited by the end of the connection
            while True:
                data = upstream.take_some(other=client)
                if not data:
                    raise _Closed
                client.send(data)

    def _fault_for(self, info: RequestInfo) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.limit is not None and fault.injected >= fault.limit:
                    continue
                if not fault.match(info):
                    continue
                if fault.fraction < 1.0 and self._rng.random() >= fault.fraction:
                    continue
                fault.injected += 1
                return fault
        return None

    def _record(self, at: float, info: RequestInfo, status: int | None, injected: bool, conn_id: int) -> None:
        exchange = Exchange(at=at, info=info, status=status, injected=injected, connection=conn_id)
        with self._lock:
            self._exchanges.append(exchange)

    def __repr__(self) -> str:
        with self._lock:
            state, live, faults = self._state, len(self._connections), len(self._faults)
            requests = len(self._exchanges)
        return (
            f"FaultProxy({self.name!r}, {self._mode}, {state}, 127.0.0.1:{self._port} -> "
            f"{self._upstream[0]}:{self._upstream[1]}, connections={live}, requests={requests}, "
            f"faults={faults})"
        )


# --- one side of a connection -------------------------------------------------------------------------------


class _Endpoint:
    """A socket with a read buffer; every wait checks the proxy's mode, so outages and stop act at once."""

    def __init__(self, sock: socket.socket, proxy: FaultProxy) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self._proxy = proxy

    def _pending(self) -> bool:
        return isinstance(self.sock, ssl.SSLSocket) and self.sock.pending() > 0

    def _fill(self, other: _Endpoint | None) -> None:
        """Read at least one more byte into the buffer. While waiting, read ``other`` too: its EOF (the
        peer went away) ends the connection, and anything it sends is kept in its buffer."""
        while True:
            self._proxy._gate()
            if self._pending():
                break
            watched = [self.sock] if other is None else [self.sock, other.sock]
            ready, _, _ = select.select(watched, [], [], _POLL)
            if other is not None and other.sock in ready:
                more = other.sock.recv(_CHUNK)
                if not more:
                    raise _Closed
                other.buffer += more
            if self.sock in ready:
                break
        self._proxy._gate()
        data = self.sock.recv(_CHUNK)
        if not data:
            raise _Closed
        self.buffer += data

    def read_head(self, other: _Endpoint | None) -> bytes:
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end >= 0:
                head = bytes(self.buffer[: end + 4])
                del self.buffer[: end + 4]
                return head
            if len(self.buffer) > _MAX_HEAD:
                raise _Closed
            self._fill(other)

    def read_line(self, other: _Endpoint | None) -> bytes:
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                line = bytes(self.buffer[: end + 1])
                del self.buffer[: end + 1]
                return line
            if len(self.buffer) > _MAX_HEAD:
                raise _Closed
            self._fill(other)

    def read_exactly(self, count: int, other: _Endpoint | None) -> bytes:
        while len(self.buffer) < count:
            self._fill(other)
        data = bytes(self.buffer[:count])
        del self.buffer[:count]
        return data

    def relay_exactly(self, count: int, sink: _Endpoint) -> None:
        """Send the next ``count`` bytes to ``sink`` as they arrive (a watch event goes out at once)."""
        while count > 0:
            if not self.buffer:
                self._fill(sink)
            piece = bytes(self.buffer[:count])
            del self.buffer[: len(piece)]
            count -= len(piece)
            sink.send(piece)

    def take_some(self, other: _Endpoint | None = None) -> bytes:
        """Whatever is buffered, or the next bytes to arrive; ``b""`` at EOF."""
        if not self.buffer:
            try:
                self._fill(other)
            except _Closed:
                return b""
        data = bytes(self.buffer)
        self.buffer.clear()
        return data

    def send(self, data: bytes) -> None:
        self._proxy._gate()
        self.sock.sendall(data)


def _readable(*endpoints: _Endpoint) -> Iterable[tuple[_Endpoint, _Endpoint]]:
    """(source, sink) pairs with bytes to move, for a two-way byte relay."""
    first, second = endpoints
    pairs = []
    for source, sink in ((first, second), (second, first)):
        if source.buffer or source._pending():
            pairs.append((source, sink))
    if pairs:
        return pairs
    ready, _, _ = select.select([first.sock, second.sock], [], [], _POLL)
    return [(s, k) for s, k in ((first, second), (second, first)) if s.sock in ready]


# --- HTTP framing -------------------------------------------------------------------------------------------


def _parse_head(head: bytes) -> tuple[str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return lines[0], headers


def _request_target(request_line: str) -> tuple[str, str]:
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _Closed
    return parts[0], parts[1]


def _status(status_line: str) -> int:
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise _Closed
    return int(parts[1])


def _content_length(headers: dict[str, str]) -> int:
    value = headers.get("content-length", "0").strip() or "0"
    if not value.isdigit():
        raise _Closed
    return int(value)


def _wants_close(headers: dict[str, str]) -> bool:
    return "close" in headers.get("connection", "").lower()


def _fault_response(fault: Fault) -> bytes:
    body = fault.body()
    phrase = {410: "Gone", 429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}
    lines = [
        f"HTTP/1.1 {fault.status} {phrase.get(fault.status, 'Error')}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
    ]
    if fault.retry_after is not None:
        lines.append(f"Retry-After: {fault.retry_after}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
