"""Hostile bytes against the HTTP server every server of the manager runs on (controller.serving.httpserver:
the webhook, status, probe and metrics servers), over a real socket on 127.0.0.1.

Property: whatever a client sends, it gets a 2xx or 4xx answer or the connection is closed (the headers
never completed); the server never answers 5xx, no handler sees a request the parser should have refused,
and it still serves a well-formed request afterwards.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

from controller.serving.httpserver import HTTPServer, Limits, Request, Response

from .conftest import FUZZ, SEED

LIMITS = Limits(
    max_connections=4, read_header_timeout=2.0, read_timeout=2.0, max_header_bytes=2048, max_body_bytes=512
)


def echo(request: Request) -> Response:
    assert request.content_length is None or len(request.body) == request.content_length
    return Response(status=200, body=request.body)


@pytest.fixture
def server() -> Iterator[HTTPServer]:
    srv = HTTPServer("fuzz-http", ("127.0.0.1", 0), echo, limits=LIMITS)
    srv.start()
    yield srv
    assert srv.stop(10.0)


_METHODS = st.sampled_from(["GET", "POST", "PUT", "HEAD", "OPTIONS", "G ET", "", "\x00", "PRI"])
_TARGETS = st.sampled_from(
    ["/", "/healthz?verbose", "*", "http://h/x", "relative", "/%00", "/" + "a" * 3000, ""]
)
_VERSIONS = st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/1.1 extra", "http/1.1", ""])
_HEADERS = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "Host: h",
                "Content-Length: 3",
                "Content-Length: 600",
                "Content-Length: -1",
                "Content-Length: 99999999999999999999",
                "Content-Length: 3, 3",
                "Transfer-Encoding: chunked",
                "Expect: 100-continue",
                "Expect: nonsense",
                " folded",
                "No-Colon",
                "X: " + "v" * 3000,
                ": empty name",
            ]
        ),
        st.text(st.characters(min_codepoint=1, max_codepoint=255), max_size=30),
    ),
    max_size=5,
)


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=400))
    line = f"{draw(_METHODS)} {draw(_TARGETS)} {draw(_VERSIONS)}"
    newline = draw(st.sampled_from(["\r\n", "\n"]))
    head = newline.join([line, *draw(_HEADERS)]) + newline + newline
    return head.encode("latin-1", "replace") + draw(st.binary(max_size=700))


def exchange(address: tuple[str, int], data: bytes) -> bytes:
    with socket.create_connection(address, timeout=10) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)  # no more bytes: the server sees the end at once
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered and closed before all was sent
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
    return b"".join(chunks)


@FUZZ
@seed(SEED)
@given(data=requests())
def test_any_bytes_get_a_2xx_or_4xx_or_a_closed_connection(server: HTTPServer, data: bytes) -> None:
    answer = exchange(server.address, data)
    if answer:
        assert answer.startswith(b"HTTP/1.1 "), answer[:100]
        status = int(answer[9:12])
        assert 100 <= status < 500, answer[:200]
    stats = server.statistics()
    assert stats.handler_errors == 0
    good = exchange(server.address, b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nok")
    assert good.startswith(b"HTTP/1.1 200 ") and good.endswith(b"\r\n\r\nok")
