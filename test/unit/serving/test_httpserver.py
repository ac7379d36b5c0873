"""The bounded HTTP(S) server (controller.serving.httpserver) over real sockets on 127.0.0.1: the connection
cap, the header and body deadlines against silent and trickling (slowloris) clients, the size caps, the
parser's refusals, keep-alive (reuse, the idle timeout, closing the longest-idle connection to make room),
TLS >= 1.2, and a stop that joins everything. Limits are shortened through the constructor so the deadlines
pass in a fraction of a second; clients wait on their sockets, never on a sleep."""

from __future__ import annotations

import dataclasses
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.envtest import wait_until
from controller.envtest.certs import CertificateAuthority
from controller.serving.certwatcher import CertWatcher
from controller.serving.httpserver import HTTPServer, Limits, Request, Response


class Recorder:
    """Echoes what it saw; remembers the requests."""

    def __init__(self) -> None:
        self.requests: list[Request] = []

    def __call__(self, request: Request) -> Response:
        self.requests.append(request)
        return Response(status=200, body=f"{request.method} {request.path} {len(request.body)}".encode())


FAST = Limits(
    max_connections=4,
    read_header_timeout=0.3,
    read_timeout=0.6,
    write_timeout=2.0,
    max_header_bytes=4096,
    max_body_bytes=1024,
)


@pytest.fixture
def serve() -> Iterator[Callable[..., HTTPServer]]:
    started: list[HTTPServer] = []

    def run(handler: Any = None, **options: Any) -> HTTPServer:
        options.setdefault("limits", FAST)
        server = HTTPServer("test-http", ("127.0.0.1", 0), handler or Recorder(), **options)
        server.start()
        started.append(server)
        return server

    yield run
    for server in started:
        assert server.stop(10.0)


def complete(answer: bytes, *, head_only: bool = False) -> bool:
    """Whether ``answer`` holds a whole final answer (a 100 Continue skipped), by its Content-Length."""
    while answer.startswith(b"HTTP/1.1 100 "):
        answer = answer.partition(b"\r\n\r\n")[2]
    head, sep, body = answer.partition(b"\r\n\r\n")
    if not sep:
        return False
    if head_only:
        return True
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            return len(body) >= int(value)
    return False


def read_answer(sock: Any, *, head_only: bool = False) -> bytes:
    """Reads one answer (b"" when the server closes first), leaving the connection open."""
    answer = b""
    while not complete(answer, head_only=head_only):
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        answer += chunk
    return answer


def closed_by_server(sock: Any) -> bool:
    """The server closed the connection (EOF or reset); a TimeoutError means it did not."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def exchange(
    address: tuple[str, int], data: bytes, *, wrap: Callable[[socket.socket], Any] | None = None
) -> bytes:
    """Sends ``data`` and reads one answer, or until the server closes the connection."""
    with socket.create_connection(address, timeout=10) as raw:
        sock = wrap(raw) if wrap is not None else raw
        sock.sendall(data)
        return read_answer(sock, head_only=data.startswith(b"HEAD "))


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:100]
    return int(answer[9:12])


def test_a_request_is_answered_and_the_connection_closed_when_the_client_asks(
    serve: Callable[..., HTTPServer],
) -> None:
    recorder = Recorder()
    server = serve(recorder)
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(
            b"POST /a/b?x=1&x=2 HTTP/1.1\r\nHost: h\r\nX-Thing: one\r\nX-Thing: two\r\n"
            b"Connection: close\r\nContent-Length: 5\r\n\r\nhello"
        )
        answer = read_answer(sock)
        assert closed_by_server(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 200 OK"
    assert b"Connection: close" in head and b"Content-Length: 11" in head
    assert body == b"POST /a/b 5"
    (seen,) = recorder.requests
    assert (seen.method, seen.path, seen.body, seen.content_length) == ("POST", "/a/b", b"hello", 5)
    assert seen.query == {"x": ["1", "2"]}
    assert seen.headers["x-thing"] == "one"  # the first value, as Go's Header.Get
    assert server.statistics().served == 1


def test_a_client_trickling_its_headers_is_cut_off_at_the_header_deadline(
    serve: Callable[..., HTTPServer],
) -> None:
    # slowloris: every read gets a byte, but the headers never end; only the deadline from accept stops it
    server = serve()
    request = b"GET / HTTP/1.1\r\n" + b"X-Slow: " + b"a" * 10_000
    sent = 0
    began = time.monotonic()
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.settimeout(0.02)
        closed = False
        while not closed and sent < len(request):
            try:
                sock.sendall(request[sent : sent + 1])
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += 1
            try:
                closed = sock.recv(1) == b""  # the pace: one byte per 20 ms while the server is open
            except TimeoutError:
                continue
            except ConnectionResetError:
                closed = True
    elapsed = time.monotonic() - began
    assert 10 < sent < len(request), sent  # it kept trickling, and was cut off long before the end
    assert elapsed < 3.0
    wait_until(lambda: server.statistics().timed_out == 1 and server.statistics().active == 0)
    assert server.statistics().served == 0  # no answer: Go closes a connection whose headers are late


def test_a_silent_client_is_cut_off_at_the_header_deadline(serve: Callable[..., HTTPServer]) -> None:
    server = serve()
    with socket.create_connection(server.address, timeout=10) as sock:
        began = time.monotonic()
        assert sock.recv(1) == b""
        assert time.monotonic() - began < 3.0


def test_a_body_that_comes_too_slowly_is_408(serve: Callable[..., HTTPServer]) -> None:
    server = serve()
    answer = exchange(server.address, b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\nonly this")
    assert status_of(answer) == 408
    assert b"not received within the read timeout" in answer


def test_connections_beyond_the_cap_wait_until_a_slot_is_free(serve: Callable[..., HTTPServer]) -> None:
    # N + 1 idle connections against a cap of N: N are served (held by their silence), the next waits
    # unaccepted in the listen queue, and is served once a holder goes away.
    limits = Limits(max_connections=2, read_header_timeout=30.0, read_timeout=30.0)
    server = serve(limits=limits)
    holders = [socket.create_connection(server.address, timeout=10) for _ in range(2)]
    waiting = socket.create_connection(server.address, timeout=10)  # the kernel completes the TCP handshake
    try:
        wait_until(lambda: server.statistics().active == 2 and server.statistics().saturated)
        waiting.sendall(b"GET /late HTTP/1.1\r\n\r\n")
        waiting.settimeout(0.3)
        with pytest.raises(TimeoutError):
            waiting.recv(1)  # nobody reads it while both slots are held
        assert server.statistics().active == 2
        assert len([t for t in threading.enumerate() if t.name == "test-http/conn"]) == 2
        holders.pop().close()
        waiting.settimeout(10)
        answer = read_answer(waiting)
        assert status_of(answer) == 200 and answer.endswith(b"GET /late 0")
    finally:
        for sock in (*holders, waiting):
            sock.close()


def test_the_header_deadline_frees_the_slot_of_a_silent_client(serve: Callable[..., HTTPServer]) -> None:
    server = serve(limits=Limits(max_connections=1, read_header_timeout=0.3, read_timeout=0.3))
    with socket.create_connection(server.address, timeout=10):  # silent; holds the only slot until 0.3 s
        began = time.monotonic()
        assert status_of(exchange(server.address, b"GET / HTTP/1.1\r\n\r\n")) == 200
        assert time.monotonic() - began < 5.0
    assert server.statistics().timed_out >= 1


def test_an_oversized_body_is_413_from_its_content_length_without_reading_it(
    serve: Callable[..., HTTPServer],
) -> None:
    recorder = Recorder()
    server = serve(recorder)
    answer = exchange(server.address, b"POST / HTTP/1.1\r\nContent-Length: 1025\r\n\r\n")
    assert status_of(answer) == 413
    assert b"limit is 1024 bytes" in answer
    # A client that sends the body anyway still reads the answer (the server drains before closing).
    answer = exchange(server.address, b"POST / HTTP/1.1\r\nContent-Length: 5000\r\n\r\n" + b"x" * 5000)
    assert status_of(answer) == 413
    assert status_of(
        exchange(server.address, b"POST / HTTP/1.1\r\nContent-Length: 1024\r\n\r\n" + b"x" * 1024)
    )
    assert [len(r.body) for r in recorder.requests] == [1024]


def test_headers_beyond_the_cap_are_431(serve: Callable[..., HTTPServer]) -> None:
    server = serve()
    answer = exchange(server.address, b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 5000 + b"\r\n\r\n")
    assert status_of(answer) == 431


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"garbage\r\n\r\n", 400),
        (b"GET /\r\n\r\n", 400),
        (b"GET / HTTP/2.0\r\n\r\n", 400),
        (b"GET / HTTP/x\r\n\r\n", 400),
        (b"GET relative HTTP/1.1\r\n\r\n", 400),
        (b"G(T / HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nno colon\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nBad Name: a\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 411),
        (b"POST / HTTP/1.1\r\nContent-Length: 1\r\nExpect: magic\r\n\r\nx", 417),
        (b"GET /\xff HTTP/1.1\r\n\r\n", 400),
    ],
    ids=[
        "no request line",
        "HTTP/0.9",
        "HTTP/2.0 over plain TCP",
        "a malformed version",
        "a relative target",
        "a method that is no token",
        "a header without a colon",
        "a folded header",
        "a header name with a space",
        "two different lengths",
        "a negative length",
        "a hexadecimal length",
        "a chunked body",
        "an unknown expectation",
        "a target that is not ASCII",
    ],
)
def test_requests_the_parser_refuses_get_a_4xx_and_never_reach_the_handler(
    serve: Callable[..., HTTPServer], data: bytes, status: int
) -> None:
    recorder = Recorder()
    server = serve(recorder)
    assert status_of(exchange(server.address, data)) == status
    assert recorder.requests == []


def test_lf_line_endings_leading_blank_lines_and_absolute_targets_are_read(
    serve: Callable[..., HTTPServer],
) -> None:
    recorder = Recorder()
    server = serve(recorder)
    assert status_of(exchange(server.address, b"\r\nGET http://h/x?y=1 HTTP/1.0\nHost: h\n\n")) == 200
    assert (recorder.requests[0].path, recorder.requests[0].query) == ("/x", {"y": ["1"]})


def test_expect_100_continue_is_answered_before_the_body(serve: Callable[..., HTTPServer]) -> None:
    server = serve()
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
        assert sock.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"abc")
        answer = read_answer(sock)
    assert status_of(answer) == 200 and answer.endswith(b"POST / 3")


def test_a_head_check_answers_before_the_body_is_read(serve: Callable[..., HTTPServer]) -> None:
    recorder = Recorder()

    def check(request: Request) -> Response | None:
        assert request.body == b""
        if request.path != "/ok":
            return Response(status=404, body=b"nope\n", headers=(("X-Why", "path"),))
        return None

    server = serve(recorder, check_head=check)
    answer = exchange(server.address, b"POST /other HTTP/1.1\r\nContent-Length: 900\r\n\r\n")
    assert status_of(answer) == 404 and b"X-Why: path\r\n" in answer
    assert status_of(exchange(server.address, b"POST /ok HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi")) == 200
    assert [r.path for r in recorder.requests] == ["/ok"]


def test_a_handler_that_raises_is_500_and_the_server_carries_on(serve: Callable[..., HTTPServer]) -> None:
    calls: list[str] = []

    def handler(request: Request) -> Response:
        calls.append(request.path)
        if request.path == "/boom":
            raise RuntimeError("bug")
        return Response(status=204, body=b"")

    server = serve(handler)
    assert status_of(exchange(server.address, b"GET /boom HTTP/1.1\r\n\r\n")) == 500
    assert status_of(exchange(server.address, b"GET /fine HTTP/1.1\r\n\r\n")) == 204
    assert server.statistics().handler_errors == 1
    assert calls == ["/boom", "/fine"]


def test_a_response_header_with_a_line_break_is_500_not_injected(serve: Callable[..., HTTPServer]) -> None:
    server = serve(lambda request: Response(status=200, body=b"", headers=(("X", "a\r\nSet-Cookie: x"),)))
    answer = exchange(server.address, b"GET / HTTP/1.1\r\n\r\n")
    assert status_of(answer) == 500 and b"Set-Cookie" not in answer


def test_head_requests_get_no_body(serve: Callable[..., HTTPServer]) -> None:
    server = serve()
    answer = exchange(server.address, b"HEAD / HTTP/1.1\r\n\r\n")
    assert status_of(answer) == 200 and answer.endswith(b"\r\n\r\n")
    assert b"Content-Length: 8\r\n" in answer  # the length of the body not sent ("HEAD / 0")


def test_an_error_responder_formats_the_servers_own_refusals(serve: Callable[..., HTTPServer]) -> None:
    def as_json(status: int, message: str) -> Response:
        return Response(
            status=status, body=b'{"message":"%s"}' % message.encode(), content_type="application/json"
        )

    server = serve(error_response=as_json)
    answer = exchange(server.address, b"garbage\r\n\r\n")
    assert status_of(answer) == 400 and answer.endswith(b'{"message":"malformed HTTP request line"}')


def test_stop_ends_waiting_reads_at_once_and_joins_every_thread(serve: Callable[..., HTTPServer]) -> None:
    server = HTTPServer(
        "stopping", ("127.0.0.1", 0), Recorder(), limits=Limits(read_header_timeout=60.0, read_timeout=60.0)
    )
    server.start()
    silent = [socket.create_connection(server.address, timeout=10) for _ in range(3)]
    try:
        wait_until(lambda: server.statistics().active == 3)
        assert {"stopping/serve", "stopping/conn"} <= {t.name for t in threading.enumerate()}
        began = time.monotonic()
        assert server.stop(10.0) is True
        assert time.monotonic() - began < 5.0
        assert not [t for t in threading.enumerate() if t.name.startswith("stopping/")]
        assert server.stop() is True  # idempotent
        assert "stopped" in repr(server)
    finally:
        for sock in silent:
            sock.close()
    with pytest.raises(RuntimeError, match="already started"):
        server.start()


def test_a_taken_address_is_an_oserror_naming_it(serve: Callable[..., HTTPServer]) -> None:
    server = serve()
    other = HTTPServer("other", server.address, Recorder())
    with pytest.raises(OSError, match=r"other server cannot listen on 127\.0\.0\.1:"):
        other.start()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_connections": 0}, "limits.max_connections: must be a positive integer, got 0"),
        ({"max_body_bytes": -1}, "limits.max_body_bytes: must be a positive integer, got -1"),
        ({"read_header_timeout": 0}, "limits.read_header_timeout: must be a positive number of seconds"),
        ({"read_timeout": 1.0, "read_header_timeout": 2.0}, "limits.read_timeout: must be at least"),
    ],
)
def test_limits_are_checked_naming_the_field(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Limits(**options)


# --- keep-alive -------------------------------------------------------------------------------------------


def connection_header(answer: bytes) -> bytes:
    (value,) = [line[12:] for line in answer.split(b"\r\n") if line.startswith(b"Connection: ")]
    return value


def test_one_connection_serves_requests_one_after_another(serve: Callable[..., HTTPServer]) -> None:
    recorder = Recorder()
    server = serve(recorder)
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"GET /one HTTP/1.1\r\nHost: h\r\n\r\n")
        first = read_answer(sock)
        sock.sendall(b"POST /two HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc")
        second = read_answer(sock)
        # pipelined: two requests in one write are answered in order
        sock.sendall(b"GET /three HTTP/1.1\r\n\r\nGET /four HTTP/1.1\r\nConnection: close\r\n\r\n")
        rest = b""
        while chunk := sock.recv(65536):  # both answers, then the close the fourth asked for
            rest += chunk
    third, fourth = (b"HTTP/1.1 " + answer for answer in rest.split(b"HTTP/1.1 ")[1:])
    assert first.endswith(b"GET /one 0") and connection_header(first) == b"keep-alive"
    assert second.endswith(b"POST /two 3") and connection_header(second) == b"keep-alive"
    assert third.endswith(b"GET /three 0") and connection_header(third) == b"keep-alive"
    assert fourth.endswith(b"GET /four 0") and connection_header(fourth) == b"close"
    assert [r.path for r in recorder.requests] == ["/one", "/two", "/three", "/four"]
    wait_until(lambda: (server.statistics().served, server.statistics().reused) == (4, 3))


@pytest.mark.parametrize(
    ("request_line", "headers", "kept"),
    [
        (b"GET / HTTP/1.1", b"", True),
        (b"GET / HTTP/1.1", b"Connection: close\r\n", False),
        (b"GET / HTTP/1.1", b"Connection: Upgrade, CLOSE\r\n", False),
        (b"GET / HTTP/1.0", b"", False),
        (b"GET / HTTP/1.0", b"Connection: keep-alive\r\n", True),
    ],
    ids=[
        "HTTP/1.1 keeps by default",
        "HTTP/1.1 with Connection: close",
        "a close token among others",
        "HTTP/1.0 closes by default",
        "HTTP/1.0 with Connection: keep-alive",
    ],
)
def test_the_client_decides_whether_the_connection_is_kept(
    serve: Callable[..., HTTPServer], request_line: bytes, headers: bytes, kept: bool
) -> None:
    server = serve()
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(request_line + b"\r\n" + headers + b"\r\n")
        answer = read_answer(sock)
        assert status_of(answer) == 200
        assert connection_header(answer) == (b"keep-alive" if kept else b"close")
        if kept:
            sock.sendall(request_line + b"\r\n" + headers + b"\r\n")
            assert status_of(read_answer(sock)) == 200
        else:
            assert closed_by_server(sock)


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"GET / HTTP/1.1\r\nno colon\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\nshort", 408),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 411),
        (b"POST / HTTP/1.1\r\nContent-Length: 2000\r\n\r\n", 413),
        (b"POST / HTTP/1.1\r\nContent-Length: 1\r\nExpect: magic\r\n\r\nx", 417),
        (b"GET / HTTP/1.1\r\nX: " + b"a" * 5000 + b"\r\n\r\n", 431),
        (b"GET /boom HTTP/1.1\r\n\r\n", 500),
    ],
    ids=["400", "408", "411", "413", "417", "431", "500 from a handler that raised"],
)
def test_the_connection_is_closed_after_an_error_answer(
    serve: Callable[..., HTTPServer], data: bytes, status: int
) -> None:
    def handler(request: Request) -> Response:
        if request.path == "/boom":
            raise RuntimeError("bug")
        return Response(status=200, body=b"")

    server = serve(handler)
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(data)
        answer = read_answer(sock)
        assert status_of(answer) == status and connection_header(answer) == b"close"
        assert closed_by_server(sock)


def test_an_early_answer_without_a_body_keeps_the_connection_and_one_with_a_body_closes_it(
    serve: Callable[..., HTTPServer],
) -> None:
    server = serve(check_head=lambda request: Response(status=404, body=b"no\n"))
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"GET /x HTTP/1.1\r\n\r\n")
        assert connection_header(read_answer(sock)) == b"keep-alive"
        sock.sendall(b"POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\n")  # the body is never read
        assert connection_header(read_answer(sock)) == b"close"
        assert closed_by_server(sock)


def test_keep_alive_off_closes_after_every_answer(serve: Callable[..., HTTPServer]) -> None:
    server = serve(limits=dataclasses.replace(FAST, keep_alive=False))
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
        assert connection_header(read_answer(sock)) == b"close"
        assert closed_by_server(sock)


def test_an_idle_connection_is_closed_after_the_idle_timeout(serve: Callable[..., HTTPServer]) -> None:
    server = serve(limits=dataclasses.replace(FAST, idle_timeout=0.3))
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
        assert status_of(read_answer(sock)) == 200
        wait_until(lambda: server.statistics().idle == 1)
        began = time.monotonic()
        assert closed_by_server(sock)
        assert time.monotonic() - began < 3.0
    wait_until(lambda: server.statistics().active == 0)
    stats = server.statistics()
    assert (stats.idle_closed, stats.timed_out) == (1, 0)


def test_the_next_requests_header_deadline_starts_with_its_first_byte(
    serve: Callable[..., HTTPServer],
) -> None:
    # Idle longer than read_header_timeout (0.3 s) but within idle_timeout: the next request is still served;
    # once it has started, a trickled rest is held to read_header_timeout from its first byte.
    server = serve(limits=dataclasses.replace(FAST, idle_timeout=10.0))
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"GET /a HTTP/1.1\r\n\r\n")
        assert status_of(read_answer(sock)) == 200
        sock.settimeout(0.6)
        with pytest.raises(TimeoutError):
            sock.recv(1)  # idle for 0.6 s: the server keeps the connection
        sock.settimeout(10)
        sock.sendall(b"GET /b HTTP/1.1\r\n\r\n")
        assert read_answer(sock).endswith(b"GET /b 0")
        sock.sendall(b"GET /c HT")  # then silence
        began = time.monotonic()
        assert closed_by_server(sock)
        assert time.monotonic() - began < 3.0
    wait_until(lambda: server.statistics().timed_out == 1)


def test_with_every_slot_taken_the_longest_idle_connection_makes_room(
    serve: Callable[..., HTTPServer],
) -> None:
    server = serve(limits=dataclasses.replace(FAST, max_connections=2, idle_timeout=60.0))
    oldest = socket.create_connection(server.address, timeout=10)
    newer = socket.create_connection(server.address, timeout=10)
    try:
        for sock in (oldest, newer):
            sock.sendall(b"GET /first HTTP/1.1\r\n\r\n")
            assert status_of(read_answer(sock)) == 200
            wait_until(lambda: server.statistics().idle >= 1)
        wait_until(lambda: server.statistics().idle == 2 and server.statistics().saturated)
        assert status_of(exchange(server.address, b"GET /new HTTP/1.1\r\nConnection: close\r\n\r\n")) == 200
        assert closed_by_server(oldest)
        newer.sendall(b"GET /again HTTP/1.1\r\n\r\n")  # the newer one was left alone
        assert read_answer(newer).endswith(b"GET /again 0")
        stats = server.statistics()
        assert stats.evicted == 1 and stats.active <= 2
    finally:
        oldest.close()
        newer.close()


def test_a_connection_in_the_middle_of_a_request_is_never_closed_for_room(
    serve: Callable[..., HTTPServer],
) -> None:
    # Both slots hold a request in progress (one on a kept connection, one a first request): a new connection
    # waits, unaccepted, until one of them is answered; that answer closes its connection for it.
    limits = dataclasses.replace(
        FAST, max_connections=2, read_header_timeout=30.0, read_timeout=30.0, idle_timeout=60.0
    )
    server = serve(limits=limits)
    kept = socket.create_connection(server.address, timeout=10)
    fresh = socket.create_connection(server.address, timeout=10)
    waiting: socket.socket | None = None
    try:
        kept.sendall(b"GET /first HTTP/1.1\r\n\r\n")
        assert status_of(read_answer(kept)) == 200
        kept.sendall(b"GET /sec")  # mid-request
        fresh.sendall(b"GET /fre")  # mid-request, its first
        wait_until(lambda: server.statistics().active == 2 and server.statistics().idle == 0)
        waiting = socket.create_connection(server.address, timeout=10)
        waiting.sendall(b"GET /waiting HTTP/1.1\r\n\r\n")
        waiting.settimeout(0.5)
        with pytest.raises(TimeoutError):
            waiting.recv(1)
        assert server.statistics().evicted == 0
        kept.sendall(b"ond HTTP/1.1\r\n\r\n")
        second = read_answer(kept)
        assert second.endswith(b"GET /second 0") and connection_header(second) == b"close"
        assert closed_by_server(kept)
        waiting.settimeout(10)
        assert read_answer(waiting).endswith(b"GET /waiting 0")
        fresh.sendall(b"sh HTTP/1.1\r\n\r\n")
        assert read_answer(fresh).endswith(b"GET /fresh 0")
        assert server.statistics().evicted == 0
    finally:
        for sock in (kept, fresh, waiting):
            if sock is not None:
                sock.close()


def test_stop_ends_idle_connections_at_once(serve: Callable[..., HTTPServer]) -> None:
    server = HTTPServer(
        "stopping-idle", ("127.0.0.1", 0), Recorder(), limits=dataclasses.replace(FAST, idle_timeout=60.0)
    )
    server.start()
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
        assert connection_header(read_answer(sock)) == b"keep-alive"
        wait_until(lambda: server.statistics().idle == 1)
        began = time.monotonic()
        assert server.stop(10.0) is True
        assert time.monotonic() - began < 5.0
        assert closed_by_server(sock)
    assert not [t for t in threading.enumerate() if t.name.startswith("stopping-idle/")]


def test_an_answer_given_while_stopping_says_close(serve: Callable[..., HTTPServer]) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(request: Request) -> Response:
        entered.set()
        release.wait(10)
        return Response(status=200, body=b"late")

    server = HTTPServer("stopping-busy", ("127.0.0.1", 0), slow, limits=FAST)
    server.start()
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
        assert entered.wait(10)
        stopper = threading.Thread(target=server.stop, args=(10.0,), name="test/stop-busy")
        stopper.start()
        wait_until(lambda: not server.serving)
        release.set()
        answer = read_answer(sock)
        stopper.join(10)
        assert answer.endswith(b"late") and connection_header(answer) == b"close"
        assert closed_by_server(sock)
    assert not stopper.is_alive()


# --- TLS --------------------------------------------------------------------------------------------------


class TLS:
    def __init__(self, root: Path) -> None:
        ca = CertificateAuthority.new("httpserver-test-ca")
        self.ca_file, _ = ca.write(root / "ca", "ca.crt", "ca.key")
        self.cert, self.key = ca.issue_serving(["127.0.0.1"]).write(root / "certs", "tls.crt", "tls.key")
        self.watcher = CertWatcher(self.cert, self.key)

    def client(self, *, maximum: ssl.TLSVersion | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        if maximum is not None:
            context.maximum_version = maximum
        return context


@pytest.fixture
def tls(tmp_path: Path) -> TLS:
    return TLS(tmp_path)


def handshake(address: tuple[str, int], context: ssl.SSLContext) -> str | None:
    with (
        socket.create_connection(address, timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as sock,
    ):
        return sock.version()


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
@pytest.mark.parametrize(
    "offered", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1], ids=["TLS 1.0", "TLS 1.1"]
)
def test_a_client_offering_only_tls_below_1_2_is_refused(
    serve: Callable[..., HTTPServer], tls: TLS, offered: ssl.TLSVersion
) -> None:
    server = serve(tls_context=tls.watcher.context)
    old = tls.client(maximum=offered)
    old.set_ciphers("DEFAULT:@SECLEVEL=0")  # the client really offers it: the refusal is the server's
    old.minimum_version = ssl.TLSVersion.TLSv1
    with pytest.raises(ssl.SSLError, match=r"(?i)protocol version|unsupported protocol|no protocols"):
        handshake(server.address, old)
    wait_until(lambda: server.statistics().handshake_failures == 1)


@pytest.mark.parametrize(
    ("maximum", "version"), [(ssl.TLSVersion.TLSv1_2, "TLSv1.2"), (ssl.TLSVersion.TLSv1_3, "TLSv1.3")]
)
def test_tls_1_2_and_1_3_clients_are_served(
    serve: Callable[..., HTTPServer], tls: TLS, maximum: ssl.TLSVersion, version: str
) -> None:
    server = serve(tls_context=tls.watcher.context)
    assert handshake(server.address, tls.client(maximum=maximum)) == version
    context = tls.client(maximum=maximum)
    answer = exchange(
        server.address,
        b"GET /tls HTTP/1.1\r\n\r\n",
        wrap=lambda raw: context.wrap_socket(raw, server_hostname="127.0.0.1"),
    )
    assert status_of(answer) == 200 and answer.endswith(b"GET /tls 0")


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
def test_a_context_that_allows_tls_1_0_is_raised_to_1_2(serve: Callable[..., HTTPServer], tls: TLS) -> None:
    lax = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    lax.load_cert_chain(tls.cert, tls.key)
    lax.minimum_version = ssl.TLSVersion.TLSv1
    lax.set_ciphers("DEFAULT:@SECLEVEL=0")
    server = serve(tls_context=lambda: lax)
    old = tls.client(maximum=ssl.TLSVersion.TLSv1_1)
    old.set_ciphers("DEFAULT:@SECLEVEL=0")
    old.minimum_version = ssl.TLSVersion.TLSv1
    with pytest.raises(ssl.SSLError):
        handshake(server.address, old)
    assert lax.minimum_version == ssl.TLSVersion.TLSv1_2
    assert handshake(server.address, tls.client()) in ("TLSv1.2", "TLSv1.3")


def test_a_tls_client_that_stalls_its_handshake_is_cut_off(
    serve: Callable[..., HTTPServer], tls: TLS
) -> None:
    server = serve(tls_context=tls.watcher.context)
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"\x16\x03\x01")  # the first bytes of a ClientHello, then silence
        began = time.monotonic()
        assert sock.recv(1) == b""
        assert time.monotonic() - began < 3.0
    wait_until(lambda: server.statistics().timed_out == 1)


def test_without_a_certificate_connections_are_refused_and_counted(
    serve: Callable[..., HTTPServer], tmp_path: Path
) -> None:
    missing = CertWatcher(tmp_path / "none.crt", tmp_path / "none.key")
    server = serve(tls_context=missing.context)
    assert exchange(server.address, b"GET / HTTP/1.1\r\n\r\n") == b""
    wait_until(lambda: server.statistics().refused == 1)


def test_plain_http_to_the_tls_server_is_closed_not_answered(
    serve: Callable[..., HTTPServer], tls: TLS
) -> None:
    server = serve(tls_context=tls.watcher.context)
    assert exchange(server.address, b"GET / HTTP/1.1\r\n\r\n") == b""
    wait_until(lambda: server.statistics().handshake_failures == 1)


def test_a_connection_whose_thread_cannot_start_is_closed_and_the_server_keeps_accepting(
    serve: Callable[..., HTTPServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    original = threading.Thread.start
    refusals = [True]

    def start(thread: threading.Thread) -> None:
        if thread.name == "test-http/conn" and refusals:
            refusals.pop()
            raise RuntimeError("can't start new thread")
        original(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    server = serve()
    assert exchange(server.address, b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n") == b""
    assert status_of(exchange(server.address, b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n")) == 200
    assert server.serving
