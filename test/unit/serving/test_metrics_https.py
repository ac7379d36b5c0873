"""The metrics endpoint over HTTPS: app.Server with a TLS context per connection (TLS >= 1.2,
certificates reloaded without a restart, connections refused before a certificate exists), and the
manager serving /metrics behind the authentication and authorization filter."""

from __future__ import annotations

import http.client
import os
import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from controller.clock import FakeClock
from controller.envtest.certs import CertificateAuthority, KeyPair
from controller.manager.manager import Manager, ManagerOptions
from controller.serving.app import Server
from controller.serving.certwatcher import CertWatcher
from controller.serving.filters import authentication_and_authorization
from controller.serving.httpserver import Response


class Certs:
    def __init__(self, root: Path) -> None:
        self.ca = CertificateAuthority.new("metrics-test-ca")
        self.ca_file, _ = self.ca.write(root / "ca", "ca.crt", "ca.key")
        self.dir = root / "serving-certs"
        self.dir.mkdir()
        self.watcher = CertWatcher(self.dir / "tls.crt", self.dir / "tls.key")

    def install(self) -> KeyPair:
        pair = self.ca.issue_serving(["127.0.0.1"])
        staging = self.dir.parent / "staging"
        pair.write(staging, "tls.crt", "tls.key")
        os.replace(staging / "tls.key", self.dir / "tls.key")
        os.replace(staging / "tls.crt", self.dir / "tls.crt")
        return pair

    def client(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return Certs(tmp_path)


def app(path: str, query: Mapping[str, list[str]], headers: Mapping[str, str]) -> Response:
    return Response(status=200, body=b"ok " + path.encode())


@pytest.fixture
def server(certs: Certs) -> Iterator[Server]:
    srv = Server("metrics", ("127.0.0.1", 0), app, tls_context=certs.watcher.context)
    srv.start()
    yield srv
    srv.stop()


def get(
    address: tuple[str, int], context: ssl.SSLContext, path: str = "/metrics", token: str | None = None
) -> tuple[int, bytes]:
    conn = http.client.HTTPSConnection(address[0], address[1], context=context, timeout=10)
    try:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        conn.request("GET", path, headers=headers)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def serial(pair: KeyPair) -> int:
    from cryptography import x509

    return x509.load_pem_x509_certificate(pair.cert_pem).serial_number


def served_serial(address: tuple[str, int], certs: Certs) -> int:
    from cryptography import x509

    with (
        socket.create_connection(address, timeout=10) as raw,
        certs.client().wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_before_a_certificate_exists_connections_are_closed(server: Server, certs: Certs) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        get(server.address, certs.client())
    certs.install()
    assert get(server.address, certs.client()) == (200, b"ok /metrics")


def test_a_rotated_certificate_is_served_from_the_next_connection(server: Server, certs: Certs) -> None:
    first = certs.install()
    assert served_serial(server.address, certs) == serial(first)
    second = certs.install()
    assert served_serial(server.address, certs) == serial(second)


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
def test_tls_below_1_2_is_refused(server: Server, certs: Certs) -> None:
    certs.install()
    old = certs.client()
    old.set_ciphers("DEFAULT:@SECLEVEL=0")
    old.minimum_version = ssl.TLSVersion.TLSv1
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    with (
        pytest.raises(ssl.SSLError, match=r"(?i)protocol version|unsupported protocol"),
        socket.create_connection(server.address, timeout=5) as raw,
    ):
        old.wrap_socket(raw, server_hostname="127.0.0.1")
    tls12 = certs.client()
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    with (
        socket.create_connection(server.address, timeout=5) as raw,
        tls12.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.version() == "TLSv1.2"


def test_plain_http_gets_no_answer_from_the_https_server(server: Server, certs: Certs) -> None:
    certs.install()
    conn = http.client.HTTPConnection(*server.address, timeout=5)
    try:
        with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
            conn.request("GET", "/metrics")
            conn.getresponse()
    finally:
        conn.close()


def test_stop_does_not_wait_for_an_idle_tls_client(certs: Certs) -> None:
    certs.install()
    srv = Server("metrics", ("127.0.0.1", 0), app, tls_context=certs.watcher.context)
    srv.start()
    raw = socket.create_connection(srv.address, timeout=10)
    tls = certs.client().wrap_socket(raw, server_hostname="127.0.0.1")  # handshake done, no request
    try:
        done = threading.Event()

        def stop() -> None:
            srv.stop()
            done.set()

        stopper = threading.Thread(target=stop, name="test/stopper")
        stopper.start()
        assert done.wait(5), "stop waited for the idle client"
        stopper.join()
    finally:
        tls.close()


def test_stop_does_not_wait_for_a_client_that_never_starts_its_handshake(certs: Certs) -> None:
    certs.install()
    srv = Server("metrics", ("127.0.0.1", 0), app, tls_context=certs.watcher.context)
    srv.start()
    with socket.create_connection(srv.address, timeout=10):  # connected, silent
        done = threading.Event()

        def stop() -> None:
            srv.stop()
            done.set()

        stopper = threading.Thread(target=stop, name="test/stopper")
        stopper.start()
        assert done.wait(5), "stop waited for the silent client's handshake"
        stopper.join()


class FakeReviews:
    """TokenReview: ``reader`` and ``nobody`` are users; SubjectAccessReview: only ``reader`` may."""

    def create(self, obj: Mapping[str, Any], *, field_manager: str | None = None) -> Mapping[str, Any]:
        if obj["kind"] == "TokenReview":
            token = obj["spec"]["token"]
            ok = token in ("reader", "nobody")
            return {"status": {"authenticated": ok, "user": {"username": token}}}
        return {"status": {"allowed": obj["spec"]["user"] == "reader"}}


class NoCache:
    def start(self) -> None: ...

    def stop(self) -> None: ...

    def wait_for_cache_sync(self, timeout: float | None = None, stop: threading.Event | None = None) -> bool:
        return True

    def get_informer(self, gvk: Any, *, block_until_synced: bool = True) -> Any:
        raise NotImplementedError


class Started(threading.Event):
    """A runnable that only says it was started."""

    def start(self, stop: threading.Event) -> None:
        self.set()

    def stop(self, timeout: float | None = None) -> bool:
        return True

    def need_leader_election(self) -> bool:
        return False


def test_the_manager_serves_metrics_over_https_behind_the_filter(
    certs: Certs, in_thread: Callable[..., Any]
) -> None:
    certs.install()
    reviews = FakeReviews()
    options = ManagerOptions(
        health_probe_bind_address="0",
        metrics_bind_address="127.0.0.1:0",
        metrics_tls_context=certs.watcher.context,
        metrics_filter_provider=lambda client: authentication_and_authorization(client, clock=FakeClock()),
        clock=FakeClock(),
    )
    mgr = Manager(reviews, options, cache=NoCache())  # type: ignore[arg-type]
    started = Started()
    mgr.add(started)
    thread, _ = in_thread(mgr.run, name="test/manager")
    try:
        assert started.wait(10)  # runnables start after the servers
        address = mgr.metrics_address
        assert address is not None
        assert get(address, certs.client())[0] == 401
        assert get(address, certs.client(), token="nobody") == (
            403,
            b"Authorization denied for user nobody\n",
        )
        status, body = get(address, certs.client(), token="reader")
        assert status == 200 and b"# TYPE controller_runtime_reconcile_total counter" in body
    finally:
        mgr.stop()
        thread.join(10)
        assert not thread.is_alive()
