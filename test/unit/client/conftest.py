"""A scripted HTTP/1.1 API server stub on 127.0.0.1 for the client's unit tests.

The stub answers what each test scripts for a (method, path) and keeps every request it received, so a test
can check the wire format our client produces (for a REST client the request *is* its observable output:
path, query, content type and body are the contract with the API server). Behaviour against a real server
is covered by ``test/integration/test_client_integration.py``.

What the stub does not model: TLS and authentication (it accepts anything), HTTP/2, gzip, the API server's
semantics (it stores nothing; every answer is scripted), and admission, validation or watch caches. It does
model what the client's transport depends on: keep-alive connections, ``Content-Length`` bodies, and chunked
streaming bodies whose chunks are flushed one by one (so chunk boundaries in tests are real ones).

Writes go through a buffered file and ``TCP_NODELAY`` is set on accepted sockets, so a header and a body
written separately do not meet Nagle's algorithm and delayed ACKs (a 40 ms stall per request on Linux).
"""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest
from urllib3 import HTTPHeaderDict

from controller.client.client import Client
from controller.client.transport import Transport
from controller.clock import FakeClock
from controller.envtest import wait_until


@dataclass(slots=True, kw_only=True)
class StubRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: HTTPHeaderDict  # case-insensitive, as HTTP headers are
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None


@dataclass(slots=True, kw_only=True)
class StubResponse:
    status: int = 200
    body: Any = None  # bytes are sent as they are; anything else as JSON
    headers: dict[str, str] = field(default_factory=dict)
    chunks: Iterable[bytes] | None = None  # a chunked, streamed body instead of ``body``

    def encoded(self) -> bytes:
        if self.body is None:
            return b""
        if isinstance(self.body, bytes):
            return self.body
        return orjson.dumps(self.body)


Handler = Callable[[StubRequest], StubResponse]


class StubAbort(Exception):
    """Raised by a chunk source: the stub drops the connection mid-body (a crashed or partitioned server)."""


def status_body(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    """A ``metav1.Status`` failure body, as the API server writes it."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    wbufsize = 64 * 1024  # buffered: the status line, headers and a small body leave in one segment
    timeout = 10  # a stuck connection ends its thread
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # silence the default stderr log
        return

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = StubRequest(
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query, keep_blank_values=True),
            headers=HTTPHeaderDict(self.headers.items()),
            body=body,
        )
        response = self.server.stub.dispatch(request)
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        if response.chunks is None:
            payload = response.encoded()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
            return
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        try:
            for chunk in response.chunks:
                if chunk:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except StubAbort:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins every connection thread
    block_on_close = True
    stub: StubApiServer
    _ids = itertools.count(1)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name=f"stub-apiserver/conn-{next(self._ids)}",
        )
        thread.daemon = False
        if self._threads is not None:  # type: ignore[attr-defined]
            self._threads.append(thread)  # type: ignore[attr-defined]
        thread.start()


class StubApiServer:
    """Routes ``(method, path)`` to a handler or a queue of canned responses; records every request."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _RequestHandler)
        self._server.stub = self
        self._lock = threading.Lock()
        self._routes: dict[tuple[str, str], Handler] = {}
        self.requests: list[StubRequest] = []
        self.release = threading.Event()  # set at teardown: ends streams that wait for it
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="stub-apiserver/serve"
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._thread.join()
        self._server.server_close()

    def route(self, method: str, path: str, handler: Handler | StubResponse | list[StubResponse]) -> None:
        """Answer ``method path`` with a handler, one fixed response, or a list served in order (the last
        one repeats)."""
        if isinstance(handler, StubResponse):
            fixed = handler
            handler = lambda _req: fixed  # noqa: E731
        elif isinstance(handler, list):
            queue = list(handler)

            def next_response(_req: StubRequest) -> StubResponse:
                return queue.pop(0) if len(queue) > 1 else queue[0]

            handler = next_response
        with self._lock:
            self._routes[(method, path)] = handler

    def dispatch(self, request: StubRequest) -> StubResponse:
        with self._lock:
            self.requests.append(request)
            handler = self._routes.get((request.method, request.path))
        if handler is None:
            return StubResponse(
                status=404, body=status_body(404, "NotFound", f"no route for {request.method} {request.path}")
            )
        return handler(request)

    def requests_to(self, method: str, path: str) -> list[StubRequest]:
        with self._lock:
            return [r for r in self.requests if r.method == method and r.path == path]

    def then_silence(self, chunks: Iterable[bytes] = (), timeout: float = 10.0) -> Iterator[bytes]:
        """A chunk source that sends ``chunks``, then nothing until teardown (or ``timeout``), keeping the
        stream open: a quiet watch, or a dead connection."""
        yield from chunks
        self.release.wait(timeout)

    # Builders, so tests need not import this conftest.
    Response = StubResponse
    Abort = StubAbort

    @staticmethod
    def status(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
        return status_body(code, reason, message, **details)


@pytest.fixture
def stub() -> Iterator[StubApiServer]:
    server = StubApiServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def transport(stub: StubApiServer) -> Iterator[Transport]:
    t = Transport.for_url(stub.url, pool_size=4)
    try:
        yield t
    finally:
        t.close()


@pytest.fixture
def client(transport: Transport) -> Iterator[Client]:
    c = Client(transport, qps=0)  # unthrottled; the throttling tests build their own
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(name="wait_until")
def wait_until_fixture() -> Callable[..., None]:
    """:func:`controller.envtest.wait_until`: synchronisation with a thread under test, not a timed sleep."""
    return wait_until
