"""The fault proxy itself, against a small local HTTP server: it forwards requests and streamed responses
as they come, answers injected faults in the fraction and number asked, records each request under its
Kubernetes verb and resource, blackholes, refuses and recovers on the same port, terminates TLS, relays
raw TCP, and joins every thread it started (the autouse leak check would fail the test otherwise).

No control plane: these run in a second or two, and first, so a broken proxy fails fast.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from controller.client.client import Client
from controller.client.transport import Transport
from controller.envtest.certs import CertificateAuthority
from support import faultproxy

Fault = faultproxy.Fault
FaultProxy = faultproxy.FaultProxy
request_info = faultproxy.request_info


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    release: threading.Event

    def do_GET(self) -> None:
        if self.path.startswith("/stream"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._chunk(b'{"part":1}\n')
            self.server.release.wait(10)  # type: ignore[attr-defined]
            self._chunk(b'{"part":2}\n')
            self.wfile.write(b"0\r\n\r\n")
            return
        self._json(b'{"path":"' + self.path.encode() + b'"}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self._json(self.rfile.read(length))

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _json(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.release = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="test/upstream"
    )
    thread.start()
    yield server
    server.release.set()  # type: ignore[attr-defined]
    server.shutdown()
    server.server_close()  # joins the handler threads
    thread.join(10)


def _address(server: ThreadingHTTPServer) -> tuple[str, int]:
    host, port = server.server_address[:2]
    return str(host), int(port)


def _get(port: int, path: str, *, timeout: float = 5.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_requests_and_a_streamed_response_pass_through_and_are_recorded(
    upstream: ThreadingHTTPServer,
) -> None:
    with FaultProxy(_address(upstream), name="pass") as proxy:
        conn = http.client.HTTPConnection(*proxy.address, timeout=5)
        conn.request("GET", "/api/v1/namespaces/a/configmaps/x")
        first = conn.getresponse()
        assert (first.status, first.read()) == (200, b'{"path":"/api/v1/namespaces/a/configmaps/x"}')
        conn.request("POST", "/apis/g/v1/namespaces/a/things", body=b'{"k":1}')  # the same connection
        second = conn.getresponse()
        assert (second.status, second.read()) == (200, b'{"k":1}')
        conn.request("GET", "/stream?watch=true")
        stream = conn.getresponse()
        # The first chunk is relayed while the server still holds the second: a watch streams through.
        assert stream.read1(100) == b'{"part":1}\n'
        upstream.release.set()  # type: ignore[attr-defined]
        assert stream.read() == b'{"part":2}\n'
        conn.close()
        verbs = [(e.info.verb, e.info.qualified_resource, e.status) for e in proxy.exchanges()]
        assert verbs == [("get", "configmaps", 200), ("create", "things", 200), ("get", "", 200)]
        stats = proxy.statistics()
        assert (stats.connections, stats.requests, stats.injected) == (1, 3, 0)


def test_injected_faults_answer_the_fraction_and_number_asked(upstream: ThreadingHTTPServer) -> None:
    with FaultProxy(_address(upstream), name="faults", seed=7) as proxy:
        limited = proxy.inject(Fault(status=503, match=lambda i: i.path == "/a", limit=2))
        sampled = proxy.inject(Fault(status=500, match=lambda i: i.path == "/b", fraction=0.5))
        answers_a = [_get(proxy.address[1], "/a")[0] for _ in range(4)]
        answers_b = [_get(proxy.address[1], "/b")[0] for _ in range(200)]
        assert answers_a == [503, 503, 200, 200]
        assert limited.injected == 2
        assert 70 <= answers_b.count(500) == sampled.injected <= 130
        assert _get(proxy.address[1], "/a")[0] == 200
        proxy.clear_faults()
        injected = [e for e in proxy.exchanges() if e.injected]
        assert len(injected) == 2 + sampled.injected


def test_a_client_honours_an_injected_retry_after(upstream: ThreadingHTTPServer) -> None:
    with FaultProxy(_address(upstream), name="retry-after") as proxy:
        proxy.inject(Fault(status=429, retry_after=1, limit=1))
        client = Client(Transport.for_url(proxy.url), qps=0)
        try:
            assert client.get_raw("/version") == {"path": "/version"}
        finally:
            client.close()
        first, second = proxy.exchanges()
        assert (first.status, first.injected, second.status) == (429, True, 200)
        assert second.at - first.at >= 1.0


def test_a_blackhole_holds_requests_and_forward_lets_them_through(upstream: ThreadingHTTPServer) -> None:
    with FaultProxy(_address(upstream), name="blackhole") as proxy:
        assert _get(proxy.address[1], "/before")[0] == 200
        proxy.blackhole()
        with pytest.raises(TimeoutError):
            _get(proxy.address[1], "/held", timeout=0.5)
        healed = time.monotonic()
        proxy.forward()
        assert _get(proxy.address[1], "/after")[0] == 200
        # Nothing crossed while blackholed; as over a healed TCP path, bytes sent meanwhile may arrive late.
        assert [e.info.path for e in proxy.exchanges() if e.at < healed] == ["/before"]


def test_refuse_closes_connections_and_the_port_until_forward(upstream: ThreadingHTTPServer) -> None:
    with FaultProxy(_address(upstream), name="refuse") as proxy:
        port = proxy.address[1]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/stream")
        stream = conn.getresponse()
        assert stream.read1(100) == b'{"part":1}\n'
        proxy.refuse()
        with pytest.raises((http.client.IncompleteRead, ConnectionError, OSError)):
            stream.read()
        conn.close()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        proxy.forward()
        assert proxy.address[1] == port
        assert _get(port, "/again")[0] == 200


def test_tls_is_terminated_and_the_client_trusts_the_proxy_ca(
    upstream: ThreadingHTTPServer, tmp_path: Path
) -> None:
    ca = CertificateAuthority.new("proxy-ca")
    cert, key = ca.issue_serving(["127.0.0.1"]).write(tmp_path, "tls.crt", "tls.key")
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    with FaultProxy(_address(upstream), name="tls", server_tls=server_tls) as proxy:
        assert proxy.url.startswith("https://127.0.0.1:")
        client_tls = ssl.create_default_context(cadata=ca.cert_pem.decode())
        conn = http.client.HTTPSConnection(*proxy.address, context=client_tls, timeout=5)
        conn.request("GET", "/apis/trainer.kubeflow.org/v1alpha1/trainjobs?watch=1")
        response = conn.getresponse()
        assert response.status == 200 and response.read()
        conn.close()
        (exchange,) = proxy.exchanges()
        assert (exchange.info.verb, exchange.info.resource, exchange.info.group) == (
            "watch",
            "trainjobs",
            "trainer.kubeflow.org",
        )


def test_tcp_mode_relays_bytes_and_blackholes(upstream: ThreadingHTTPServer) -> None:
    with FaultProxy(_address(upstream), name="tcp", mode="tcp") as proxy:
        assert _get(proxy.address[1], "/raw") == (200, b'{"path":"/raw"}')
        proxy.blackhole()
        with pytest.raises(TimeoutError):
            _get(proxy.address[1], "/held", timeout=0.5)
        proxy.forward()
        assert _get(proxy.address[1], "/raw")[0] == 200
        assert proxy.statistics().connections == 3
        with pytest.raises(RuntimeError, match="faults need mode='http'"):
            proxy.inject(Fault(status=500))


def test_stop_ends_open_streams_and_joins_every_thread(upstream: ThreadingHTTPServer) -> None:
    proxy = FaultProxy(_address(upstream), name="stop").start()
    conn = http.client.HTTPConnection(*proxy.address, timeout=5)
    conn.request("GET", "/stream")
    stream = conn.getresponse()
    assert stream.read1(100) == b'{"part":1}\n'
    began = time.monotonic()
    proxy.stop()
    assert time.monotonic() - began < 2.0
    assert not [t for t in threading.enumerate() if t.name.startswith("faultproxy/stop/")]
    conn.close()


@pytest.mark.parametrize(
    ("method", "target", "content_type", "expected"),
    [
        ("GET", "/api/v1/namespaces/ns/pods/p", "", ("get", "", "pods", "", "ns", "p")),
        ("GET", "/api/v1/namespaces/ns/pods", "", ("list", "", "pods", "", "ns", "")),
        ("GET", "/api/v1/pods?watch=true", "", ("watch", "", "pods", "", "", "")),
        ("GET", "/api/v1/namespaces/ns", "", ("get", "", "namespaces", "", "", "ns")),
        (
            "PATCH",
            "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/j?fieldManager=trainer",
            "application/apply-patch+yaml",
            ("apply", "jobset.x-k8s.io", "jobsets", "", "ns", "j"),
        ),
        (
            "PATCH",
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/t/status",
            "application/merge-patch+json",
            ("patch", "trainer.kubeflow.org", "trainjobs", "status", "ns", "t"),
        ),
        ("POST", "/api/v1/namespaces/ns/events", "application/json", ("create", "", "events", "", "ns", "")),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/k/leases/l",
            "",
            ("update", "coordination.k8s.io", "leases", "", "k", "l"),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/ns/configmaps",
            "",
            ("deletecollection", "", "configmaps", "", "ns", ""),
        ),
        ("GET", "/version", "", ("get", "", "", "", "", "")),
    ],
    ids=lambda v: v if isinstance(v, str) and v.isupper() else None,
)
def test_requests_are_named_as_the_api_server_names_them(
    method: str, target: str, content_type: str, expected: tuple[str, ...]
) -> None:
    info = request_info(method, target, content_type)
    assert (info.verb, info.group, info.resource, info.subresource, info.namespace, info.name) == expected


def test_a_fault_that_cannot_be_an_error_answer_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match=r"Fault\.status"):
        Fault(status=200)
    with pytest.raises(ValueError, match=r"Fault\.fraction"):
        Fault(status=500, fraction=0)
    with pytest.raises(ValueError, match="upstream must be a loopback address"):
        FaultProxy(("10.0.0.1", 443), name="x")
