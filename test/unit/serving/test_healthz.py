"""Health endpoints: controller-runtime pkg/healthz/healthz_test.go, as behaviour, over real HTTP on
127.0.0.1 with an ephemeral port."""

from __future__ import annotations

import http.client
import socket
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from controller.envtest import wait_until
from controller.serving.app import Server, parse_bind_address
from controller.serving.healthz import PING, Checker, Handler
from controller.serving.httpserver import Limits, Response


def failing(reason: str) -> Checker:
    def check() -> None:
        raise RuntimeError(reason)

    return check


def serve(handlers: Mapping[str, Handler]) -> Callable[..., Response]:
    """The manager's routing: /healthz and /readyz with sub-paths."""

    def app(path: str, query: Mapping[str, list[str]], headers: Mapping[str, str]) -> Response:
        for prefix, handler in handlers.items():
            if path == prefix or path.startswith(prefix + "/"):
                return handler.serve(path[len(prefix) :], query)
        return Response(status=404, body=b"404 page not found\n")

    return app


@pytest.fixture
def server() -> Iterator[Server]:
    checks = {"ping": PING, "informers": failing("informers not synced"), "webhook": PING}
    srv = Server(
        "health-probe",
        ("127.0.0.1", 0),
        serve(
            {"/healthz": Handler({"ping": PING}, kind="healthz"), "/readyz": Handler(checks, kind="readyz")}
        ),
    )
    srv.start()
    yield srv
    srv.stop()


def test_all_checks_passing_answers_ok(server: Server, http_get: Any) -> None:
    # "should return healthy if all checks succeed"
    assert http_get(server.address, "/healthz") == (200, "ok")


def test_a_failing_check_answers_500_with_the_reason_withheld(server: Server, http_get: Any) -> None:
    # "should return unhealthy if at least one check fails"
    status, body = http_get(server.address, "/readyz")
    assert status == 500
    assert body == "[-]informers failed: reason withheld\n[+]ping ok\n[+]webhook ok\nreadyz check failed\n"


def test_verbose_lists_every_check_in_name_order(server: Server, http_get: Any) -> None:
    # "should show the status of all checks in verbose mode"
    assert http_get(server.address, "/healthz?verbose") == (200, "[+]ping ok\nhealthz check passed\n")


def test_excluded_checks_are_skipped_and_unknown_excludes_reported(server: Server, http_get: Any) -> None:
    # "should not include excluded checks"
    status, body = http_get(server.address, "/readyz?exclude=informers&exclude=nope&verbose")
    assert status == 200
    assert body == (
        "[+]informers excluded: ok\n"
        "[+]ping ok\n"
        "[+]webhook ok\n"
        'warn: some health checks cannot be excluded: no matches for "nope"\n'
        "readyz check passed\n"
    )


def test_each_check_has_its_own_sub_path_with_the_reason(server: Server, http_get: Any) -> None:
    # "should be able to serve individual checks"
    assert http_get(server.address, "/readyz/webhook") == (200, "ok")
    assert http_get(server.address, "/readyz/informers") == (
        500,
        "internal server error: informers not synced\n",
    )
    assert http_get(server.address, "/readyz/missing")[0] == 404


def test_no_checks_means_an_implicit_ping() -> None:
    # "should return healthy if there are no checks"
    handler = Handler({})
    assert handler.serve("", {}) == Response(status=200, body=b"ok")
    assert handler.serve("/ping", {}).status == 200
    assert handler.serve("", {"verbose": [""]}).body == b"[+]ping ok\nhealthz check passed\n"


def test_other_methods_are_refused(server: Server) -> None:
    host, port = server.address
    conn = http.client.HTTPConnection(host, port, timeout=5)
    conn.request("POST", "/healthz", body=b"x")
    assert conn.getresponse().status == 405
    conn.close()


def test_responses_leave_in_one_segment_with_nodelay(server: Server) -> None:
    # No Nagle stall: status line, headers and body arrive together, and the connection then closes (as the
    # kubelet's probes ask: they never reuse a connection).
    host, port = server.address
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        first = sock.recv(65536)
        rest = b""
        while chunk := sock.recv(65536):
            rest += chunk
    assert first.startswith(b"HTTP/1.1 200") and first.endswith(b"\r\n\r\nok")
    assert rest == b""


def test_server_threads_are_named_and_joined_on_stop(http_get: Any) -> None:
    import threading

    srv = Server("probe", ("127.0.0.1", 0), serve({"/healthz": Handler({})}))
    srv.start()
    assert http_get(srv.address, "/healthz") == (200, "ok")
    assert any(t.name == "probe/serve" for t in threading.enumerate())
    srv.stop()
    assert not any(t.name.startswith("probe/") for t in threading.enumerate())
    srv.stop()  # idempotent


def test_stop_does_not_wait_for_a_client_that_never_sends_its_request() -> None:
    # An idle or half-open connection (a probe that died after connecting) holds a request thread in its
    # read; stopping the server must end that read instead of waiting for it.
    import threading

    srv = Server("probe-idle", ("127.0.0.1", 0), serve({"/healthz": Handler({})}))
    srv.start()
    with socket.create_connection(srv.address, timeout=5) as sock:
        wait_until(lambda: any(t.name == "probe-idle/conn" for t in threading.enumerate()))
        stopper = threading.Thread(target=srv.stop, name="test/stop-probe-idle", daemon=True)
        stopper.start()
        stopper.join(5)
        stopped = not stopper.is_alive()
        if not stopped:
            sock.close()  # lets the stuck stop finish, so no thread outlives the test
            stopper.join(5)
    assert stopped, "stop() waited for a silent client"
    assert not any(t.name.startswith("probe-idle/") for t in threading.enumerate())


def test_a_silent_client_is_disconnected_after_the_read_timeout() -> None:
    limits = Limits(read_header_timeout=0.05, read_timeout=0.05)
    srv = Server("probe-slow", ("127.0.0.1", 0), serve({"/healthz": Handler({})}), limits=limits)
    srv.start()
    try:
        with socket.create_connection(srv.address, timeout=5) as sock:
            sock.sendall(b"GET /healthz HT")  # half a request line, then silence
            assert sock.recv(65536) == b""  # the server hung up (a socket.timeout here means it did not)
    finally:
        srv.stop()


@pytest.mark.parametrize(
    ("address", "parsed"),
    [
        ("127.0.0.1:8081", ("127.0.0.1", 8081)),
        ("localhost:0", ("localhost", 0)),
        ("[::1]:8080", ("::1", 8080)),
        ("0", None),
        ("", None),
    ],
)
def test_bind_addresses_parse(address: str, parsed: tuple[str, int] | None) -> None:
    assert parse_bind_address(address) == parsed


def test_an_explicit_address_such_as_the_pod_ip_is_accepted() -> None:
    assert parse_bind_address("10.244.1.7:8080") == ("10.244.1.7", 8080)
    assert parse_bind_address("[fd00::7]:8080") == ("fd00::7", 8080)


@pytest.mark.parametrize("address", ["0.0.0.0:8081", ":8081", "[::]:8081"])
def test_every_interface_addresses_are_refused_unless_allowed(address: str) -> None:
    with pytest.raises(ValueError, match="allow_all_interfaces"):
        parse_bind_address(address)
    host, port = parse_bind_address(address, allow_all_interfaces=True) or ("", -1)
    assert host in ("0.0.0.0", "::") and port == 8081


@pytest.mark.parametrize("address", ["127.0.0.1", "host:x", "example.com:80"])
def test_malformed_addresses_are_refused(address: str) -> None:
    with pytest.raises(ValueError):
        parse_bind_address(address, allow_all_interfaces=True)
