"""The webhook server over real HTTPS on 127.0.0.1 (controller.serving.webhook.server), as behaviour:
controller-runtime pkg/webhook/server_test.go and pkg/certwatcher/certwatcher_test.go, plus the limits this
port adds (size, content length, read deadline, connection cap, keep-alive)."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from cryptography import x509

from controller import metrics
from controller.envtest import wait_until
from controller.serving.webhook import WebhookServer, WebhookServerError, allowed, denied
from controller.serving.webhook.admission import AdmissionRequest, AdmissionResponse

from .conftest import Certs, post, review


class Recorder:
    """Denies CREATE with a message, allows the rest; remembers what it saw."""

    def __init__(self) -> None:
        self.requests: list[AdmissionRequest] = []

    def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        self.requests.append(request)
        if request.operation == "CREATE":
            return denied("spec.x: Invalid value: 1: no").with_warnings("careful")
        return allowed()


@pytest.fixture
def start(certs: Certs) -> Iterator[Callable[..., WebhookServer]]:
    started: list[WebhookServer] = []

    def run(**options: Any) -> WebhookServer:
        server = WebhookServer(bind_address="127.0.0.1:0", cert_dir=certs.cert_dir, **options)
        server.register("/validate", Recorder())
        server.start(threading.Event())
        started.append(server)
        return server

    yield run
    for server in started:
        server.stop()


@pytest.fixture
def server(certs: Certs, start: Callable[..., WebhookServer]) -> WebhookServer:
    certs.install(certs.issue())
    return start(read_timeout=2.0)


def served_serial(server: WebhookServer, certs: Certs) -> int:
    with (
        socket.create_connection(server.address, timeout=5) as raw,
        certs.client_context().wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def raw_request(server: WebhookServer, certs: Certs, head: bytes) -> bytes:
    """Sends ``head`` (request line and headers, no body) and reads the answer until the server closes."""
    with (
        socket.create_connection(server.address, timeout=10) as raw,
        certs.client_context().wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(head)
        chunks = []
        while chunk := tls.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_review_round_trips_with_the_verdict_and_warnings(server: WebhookServer, certs: Certs) -> None:
    status, body = post(server.address, certs.client_context(), "/validate", review(uid="u-1"))
    assert status == 200
    response = orjson.loads(body)["response"]
    assert response["uid"] == "u-1"
    assert response["allowed"] is False
    assert response["status"] == {
        "metadata": {},
        "code": 403,
        "reason": "Forbidden",
        "message": "spec.x: Invalid value: 1: no",
    }
    assert response["warnings"] == ["careful"]


def test_reviews_follow_one_another_on_one_connection(server: WebhookServer, certs: Certs) -> None:
    # The API server's webhook client keeps its connections: a second review pays no TLS handshake.
    conn = http.client.HTTPSConnection(*server.address, context=certs.client_context(), timeout=10)
    try:
        for uid in ("u-1", "u-2", "u-3"):
            conn.request("POST", "/validate", review(uid=uid), {"Content-Type": "application/json"})
            response = conn.getresponse()
            assert response.getheader("Connection") == "keep-alive"
            assert orjson.loads(response.read())["response"]["uid"] == uid
    finally:
        conn.close()
    stats = server.statistics()
    assert (stats.served, stats.reused, stats.handshake_failures) == (3, 2, 0)


def test_unknown_paths_are_404_and_other_methods_405(server: WebhookServer, certs: Certs) -> None:
    assert post(server.address, certs.client_context(), "/nope", review())[0] == 404
    assert post(server.address, certs.client_context(), "/validate", b"", method="GET")[0] == 405


def test_a_malformed_body_is_a_400_review(server: WebhookServer, certs: Certs) -> None:
    status, body = post(server.address, certs.client_context(), "/validate", b"{not json")
    assert status == 400
    assert orjson.loads(body)["response"]["status"]["code"] == 400
    assert (
        post(server.address, certs.client_context(), "/validate", review(), content_type="text/plain")[0]
        == 400
    )


def test_an_oversized_body_is_refused_with_413_before_it_is_read(server: WebhookServer, certs: Certs) -> None:
    head = (
        b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 7340033\r\n\r\n"
    )
    answer = raw_request(server, certs, head)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert b"limit is 7340032 bytes" in answer


def test_a_body_without_content_length_is_refused_with_411(server: WebhookServer, certs: Certs) -> None:
    assert raw_request(server, certs, b"POST /validate HTTP/1.1\r\nHost: x\r\n\r\n").startswith(
        b"HTTP/1.1 411 "
    )
    chunked = b"POST /validate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    assert raw_request(server, certs, chunked).startswith(b"HTTP/1.1 411 ")


def test_requests_are_counted_by_path_and_status(server: WebhookServer, certs: Certs) -> None:
    def count(code: str) -> float:
        value = metrics.REGISTRY.get_sample_value(
            "controller_runtime_webhook_requests_total", {"code": code, "webhook": "/validate"}
        )
        assert value is not None
        return value

    ok, bad = count("200"), count("500")
    post(server.address, certs.client_context(), "/validate", review())
    post(server.address, certs.client_context(), "/validate", b"{")
    assert count("200") == ok + 1
    assert count("400") >= 1
    assert count("500") == bad
    assert (
        metrics.REGISTRY.get_sample_value(
            "controller_runtime_webhook_requests_in_flight", {"webhook": "/validate"}
        )
        == 0
    )
    assert (
        metrics.REGISTRY.get_sample_value(
            "controller_runtime_webhook_latency_seconds_count", {"webhook": "/validate"}
        )
        or 0
    ) >= 2


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
def test_a_client_offering_only_tls_1_1_fails(server: WebhookServer, certs: Certs) -> None:
    old = certs.client_context()
    old.set_ciphers("DEFAULT:@SECLEVEL=0")  # the client really offers TLS 1.0/1.1: the server refuses them
    old.minimum_version = ssl.TLSVersion.TLSv1
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    with (
        pytest.raises(ssl.SSLError, match=r"(?i)protocol version|unsupported protocol"),
        socket.create_connection(server.address, timeout=5) as raw,
    ):
        old.wrap_socket(raw, server_hostname="127.0.0.1")
    tls12 = certs.client_context()
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    with (
        socket.create_connection(server.address, timeout=5) as raw,
        tls12.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.version() == "TLSv1.2"
        assert tls.selected_alpn_protocol() is None  # the client offered none


def test_min_version_1_3_refuses_a_tls_1_2_client(certs: Certs, start: Callable[..., WebhookServer]) -> None:
    from controller.serving.tlsconfig import TLSOptions

    certs.install(certs.issue())
    server = start(tls=TLSOptions(min_version="1.3"))
    tls12 = certs.client_context()
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    with (
        pytest.raises((ssl.SSLError, ConnectionError)),
        socket.create_connection(server.address, timeout=5) as raw,
    ):
        tls12.wrap_socket(raw, server_hostname="127.0.0.1")


def test_alpn_offers_http_1_1_only(server: WebhookServer, certs: Certs) -> None:
    context = certs.client_context()
    context.set_alpn_protocols(["h2", "http/1.1"])
    with (
        socket.create_connection(server.address, timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.selected_alpn_protocol() == "http/1.1"


def test_new_certificates_are_served_without_a_restart(server: WebhookServer, certs: Certs) -> None:
    first = served_serial(server, certs)
    rotated = certs.issue()
    certs.install(rotated)
    second = served_serial(server, certs)
    assert second != first
    assert second == x509.load_pem_x509_certificate(rotated.cert_pem).serial_number
    assert post(server.address, certs.client_context(), "/validate", review("UPDATE"))[0] == 200


def test_a_pair_that_does_not_load_keeps_the_previous_certificate(
    server: WebhookServer, certs: Certs
) -> None:
    before = served_serial(server, certs)
    errors = metrics.REGISTRY.get_sample_value("certwatcher_read_certificate_errors_total") or 0.0
    (certs.cert_dir / "tls.key").write_bytes(certs.issue().key_pem)  # a key of another certificate
    assert served_serial(server, certs) == before
    assert metrics.REGISTRY.get_sample_value("certwatcher_read_certificate_errors_total") == errors + 1


def test_without_certificates_it_is_not_ready_until_they_are_written(
    certs: Certs, start: Callable[..., WebhookServer]
) -> None:
    server = start()
    check = server.started_checker()
    with pytest.raises(RuntimeError, match="certificates are not ready"):
        check()
    with pytest.raises((ssl.SSLError, ConnectionError)):
        served_serial(server, certs)
    certs.install(certs.issue())
    check()
    assert served_serial(server, certs) > 0


def test_the_checker_fails_before_start(certs: Certs) -> None:
    server = WebhookServer(bind_address="127.0.0.1:0", cert_dir=certs.cert_dir)
    with pytest.raises(RuntimeError, match="has not been started yet"):
        server.started_checker()()


def test_a_silent_client_is_dropped_after_the_read_timeout(
    certs: Certs, start: Callable[..., WebhookServer]
) -> None:
    certs.install(certs.issue())
    server = start(read_timeout=0.5)
    with (
        socket.create_connection(server.address, timeout=10) as raw,
        certs.client_context().wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        began = time.monotonic()
        tls.sendall(b"POST /validate HTTP/1.1\r\n")  # and never the rest
        assert tls.recv(1024) == b""  # the server closed the connection
        assert time.monotonic() - began < 5


def test_a_slow_body_is_bounded_by_the_same_deadline(
    certs: Certs, start: Callable[..., WebhookServer]
) -> None:
    certs.install(certs.issue())
    server = start(read_timeout=0.5)
    head = (
        b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    )
    head += b"{"
    began = time.monotonic()
    answer = raw_request(server, certs, head)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert time.monotonic() - began < 5


def test_connections_beyond_the_cap_wait_for_a_free_slot(
    certs: Certs, start: Callable[..., WebhookServer]
) -> None:
    certs.install(certs.issue())
    server = start(max_connections=1, read_timeout=30.0)
    holder = socket.create_connection(server.address, timeout=10)  # silent: holds the only slot
    try:
        waiting = socket.create_connection(server.address, timeout=0.3)
        with pytest.raises(TimeoutError):  # no thread takes it: the handshake gets no answer
            certs.client_context().wrap_socket(waiting, server_hostname="127.0.0.1")
        waiting.close()
        assert server.statistics().active == 1
    finally:
        holder.close()
    # The slot is free again once the holder is gone.
    assert post(server.address, certs.client_context(), "/validate", review("UPDATE"))[0] == 200


def test_stop_does_not_wait_for_silent_clients(certs: Certs) -> None:
    certs.install(certs.issue())
    server = WebhookServer(bind_address="127.0.0.1:0", cert_dir=certs.cert_dir, read_timeout=60.0)
    server.register("/validate", Recorder())
    server.start(threading.Event())
    silent = socket.create_connection(server.address, timeout=10)
    try:
        wait_until(lambda: server.statistics().active == 1)  # accepted: its thread waits in the handshake
        began = time.monotonic()
        assert server.stop() is True
        assert time.monotonic() - began < 5
    finally:
        silent.close()


def test_stop_does_not_wait_for_a_connection_waiting_for_a_slot(certs: Certs) -> None:
    certs.install(certs.issue())
    server = WebhookServer(
        bind_address="127.0.0.1:0", cert_dir=certs.cert_dir, read_timeout=60.0, max_connections=1
    )
    server.register("/validate", Recorder())
    server.start(threading.Event())
    holder = socket.create_connection(server.address, timeout=10)
    waiting = socket.create_connection(server.address, timeout=10)
    try:
        wait_until(lambda: server.statistics().saturated)  # the accept loop waits for the held slot
        began = time.monotonic()
        assert server.stop() is True
        assert time.monotonic() - began < 5
    finally:
        holder.close()
        waiting.close()


def test_registration_errors() -> None:
    server = WebhookServer(bind_address="127.0.0.1:0")
    server.register("/a", Recorder())
    with pytest.raises(WebhookServerError, match="duplicate path: /a"):
        server.register("/a", Recorder())
    with pytest.raises(WebhookServerError, match="must start with"):
        server.register("b", Recorder())
    with pytest.raises(WebhookServerError, match="every interface"):
        WebhookServer(bind_address="0.0.0.0:9443")
    assert server.need_leader_election() is False
    assert repr(server).startswith("WebhookServer(127.0.0.1:0, paths=1, stopped")


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[]",
        b'{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"u"}}',
        b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}',
        b"[" * 5000 + b"]" * 5000,
        b"\x00\xff" * 1000,
    ],
    ids=["not JSON", "an array", "another kind", "no uid", "nested beyond the decoder", "binary"],
)
def test_malformed_reviews_over_https_get_a_400_review_never_a_5xx(
    server: WebhookServer, certs: Certs, body: bytes
) -> None:
    status, answer = post(server.address, certs.client_context(), "/validate", body)
    assert status == 400
    response = orjson.loads(answer)["response"]
    assert response["allowed"] is False and response["status"]["code"] == 400
    assert server.statistics().handler_errors == 0


def test_a_client_trickling_its_headers_loses_its_slot_at_the_deadline(
    certs: Certs, start: Callable[..., WebhookServer]
) -> None:
    certs.install(certs.issue())
    server = start(read_timeout=0.5, max_connections=1)
    began = time.monotonic()
    with (
        socket.create_connection(server.address, timeout=10) as raw,
        certs.client_context().wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.settimeout(0.05)
        closed = False
        for byte in b"POST /validate HTTP/1.1\r\nX-Slow: " + b"a" * 1000:
            try:
                tls.sendall(bytes([byte]))
                closed = tls.recv(1) == b""
            except TimeoutError:
                continue
            except (OSError, ssl.SSLError):
                closed = True
            if closed:
                break
        assert closed
    assert time.monotonic() - began < 5
    # The slot is free again: a real review is answered.
    assert post(server.address, certs.client_context(), "/validate", review("UPDATE"))[0] == 200


def test_headers_beyond_a_megabyte_are_431(server: WebhookServer, certs: Certs) -> None:
    head = b"POST /validate HTTP/1.1\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    assert raw_request(server, certs, head).startswith(b"HTTP/1.1 431 ")
