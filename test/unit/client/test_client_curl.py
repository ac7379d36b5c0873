"""The libcurl path of whole-answer requests (`controller.client.curl`): headers, retries, which
configurations it takes. The wire behaviour shared with the urllib3 path (tokens, user agent, timeouts,
statuses, bodies) is covered through `Transport` by the other tests of this package, which take this path."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s_client

from controller.client import errors
from controller.client.curl import Headers, supports
from controller.client.transport import Transport


def test_headers_are_the_last_blocks_found_without_regard_to_case_and_repeats_are_joined() -> None:
    headers = Headers.parse(
        [
            b"HTTP/1.1 100 Continue\r\n",
            b"\r\n",
            b"HTTP/1.1 429 Too Many Requests\r\n",
            b"Retry-After: 3\r\n",
            b'Warning: 299 - "a"\r\n',
            b'warning: 299 - "b"\r\n',
            b"\r\n",
        ]
    )
    assert headers["retry-after"] == "3"
    assert headers.get("RETRY-AFTER") == "3"
    assert headers["Warning"] == '299 - "a", 299 - "b"'
    assert list(headers) == ["Retry-After", "Warning"]
    assert "Continue" not in repr(headers)


def test_a_configuration_with_a_proxy_or_a_server_name_is_left_to_urllib3() -> None:
    plain = k8s_client.Configuration(host="https://127.0.0.1:6443")
    assert supports(plain)
    proxied = k8s_client.Configuration(host="https://10.0.0.1:6443")
    proxied.proxy = "http://proxy:3128"
    assert not supports(proxied)
    named = k8s_client.Configuration(host="https://10.0.0.1:6443")
    named.tls_server_name = "kubernetes.default"
    assert not supports(named)


class _OneDrop:
    """A TCP server on 127.0.0.1 that reads the first request and closes the connection without an answer,
    then answers every later request 200 (a kept-alive connection the server closed under the client)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.requests: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, name="one-drop", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn:
                while True:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        piece = conn.recv(65536)
                        if not piece:
                            break
                        data += piece
                    if not data:
                        break
                    head, _, rest = data.partition(b"\r\n\r\n")
                    length = next(
                        (
                            int(line.split(b":")[1])
                            for line in head.split(b"\r\n")
                            if line.lower().startswith(b"content-length:")
                        ),
                        0,
                    )
                    while len(rest) < length:
                        rest += conn.recv(65536)
                    self.requests.append(head.split(b"\r\n")[0])
                    if len(self.requests) == 1:
                        break  # close without an answer
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
                    )

    def close(self) -> None:
        self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept(); close() alone does not on Linux
        self._listener.close()
        self._thread.join(timeout=5)


@pytest.fixture
def one_drop() -> Iterator[_OneDrop]:
    server = _OneDrop()
    yield server
    server.close()


def test_a_broken_connection_is_retried_for_a_get(one_drop: _OneDrop) -> None:
    transport = Transport.for_url(f"http://127.0.0.1:{one_drop.port}")
    try:
        answer = transport.request("GET", "/api/v1/namespaces/a/configmaps/b")
    finally:
        transport.close()
    assert answer.status == 200
    assert one_drop.requests == [b"GET /api/v1/namespaces/a/configmaps/b HTTP/1.1"] * 2


def test_a_broken_connection_is_not_retried_for_a_patch(one_drop: _OneDrop) -> None:
    transport = Transport.for_url(f"http://127.0.0.1:{one_drop.port}")
    try:
        with pytest.raises(errors.ConnectionFailed, match="PATCH /api/v1/namespaces/a/configmaps/b"):
            transport.request(
                "PATCH",
                "/api/v1/namespaces/a/configmaps/b",
                body=b"{}",
                content_type="application/apply-patch+yaml",
            )
    finally:
        transport.close()
    assert one_drop.requests == [b"PATCH /api/v1/namespaces/a/configmaps/b HTTP/1.1"]
