"""controller.trainer.statusserver: the status server's answers, as behaviour.

The handler is a pure function of the request with two fakes behind it: an authenticator that answers as a
TokenReview would (the API server's checks are in test/integration/trainer/test_statusserver.py) and a status
writer that records the apply bodies. Upstream cases (pkg/statusserver/server_test.go, middleware_test.go)
are named in comments. The last tests run the real HTTPS server on 127.0.0.1.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.client.errors import ApiError, ConnectionFailed, Invalid, NotFound
from controller.envtest import wait_until
from controller.envtest.certs import CertificateAuthority
from controller.serving.authentication import Authentication, AuthenticationError, UserInfo
from controller.serving.certwatcher import CertWatcher
from controller.trainer.statusserver import (
    FIELD_MANAGER,
    MAX_BODY_BYTES,
    InvalidPayload,
    Request,
    Response,
    StatusHandler,
    StatusServer,
    StatusServerError,
    decode_update_request,
    encode_update_request,
    route,
    status_apply_body,
)

NS, NAME = "team-a", "mnist"
PATH = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs/{NAME}/status"
AUDIENCE = f"trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs/{NAME}/status"
GOOD = "good-token"
OTHER_NS = "token-of-another-namespace"
NOT_SA = "token-of-a-user"
BROKEN = "token-when-the-api-server-is-down"
TIME = "2026-01-02T03:04:05Z"


class FakeAuthenticator:
    """Answers as the API server's TokenReview would for a few known tokens (valid only for AUDIENCE);
    any other token is not authenticated. Does not model expiry or signatures: those are the API server's."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def authenticate(self, token: str, audiences: Sequence[str]) -> Authentication:
        self.calls.append((token, tuple(audiences)))
        if token == BROKEN:
            raise AuthenticationError("TokenReview failed: 503 ServiceUnavailable")
        users = {
            GOOD: f"system:serviceaccount:{NS}:default",
            OTHER_NS: "system:serviceaccount:team-b:default",
            NOT_SA: "alice",
        }
        if token not in users or AUDIENCE not in audiences:
            return Authentication(authenticated=False, error="token audiences mismatch")
        return Authentication(authenticated=True, user=UserInfo(username=users[token]), audiences=(AUDIENCE,))


class FakeWriter:
    """Records server-side applies; raises ``error`` instead when set. Does not model the API server's
    schema validation (the integration test does)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.applied: list[tuple[Mapping[str, Any], str, bool]] = []

    def apply_status(
        self, obj: Mapping[str, Any], field_manager: str, *, force: bool = True
    ) -> dict[str, Any]:
        if self.error is not None:
            raise self.error
        self.applied.append((obj, field_manager, force))
        return dict(obj)


@pytest.fixture
def writer() -> FakeWriter:
    return FakeWriter()


@pytest.fixture
def authenticator() -> FakeAuthenticator:
    return FakeAuthenticator()


@pytest.fixture
def handler(authenticator: FakeAuthenticator, writer: FakeWriter) -> StatusHandler:
    return StatusHandler(authenticator, writer)


def post(
    handler: StatusHandler,
    body: Any = None,
    *,
    path: str = PATH,
    token: str | None = GOOD,
    method: str = "POST",
    raw: bytes | None = None,
) -> Response:
    headers = {"authorization": f"Bearer {token}"} if token is not None else {}
    payload = raw if raw is not None else orjson.dumps(body if body is not None else {})
    return handler.serve(Request(method=method, path=path, headers=headers, body=payload))


def status_of(response: Response) -> dict[str, Any]:
    decoded: dict[str, Any] = orjson.loads(response.body)
    return decoded


def failure(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}


SDK_BODY = {
    "trainerStatus": {
        "lastUpdatedTime": "2026-01-02T03:04:05.123456+00:00",
        "progressPercentage": 42,
        "estimatedRemainingSeconds": 120,
        "metrics": [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}],
    }
}


# --- the write ------------------------------------------------------------------------------------------


def test_a_valid_request_is_applied_to_the_status_with_force_and_echoed(
    handler: StatusHandler, writer: FakeWriter
) -> None:
    response = post(handler, SDK_BODY)
    assert response.status == 200
    trainer_status = {
        "progressPercentage": 42,
        "estimatedRemainingSeconds": 120,
        "metrics": [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}],
        "lastUpdatedTime": TIME,  # UTC, whole seconds: metav1.Time
    }
    assert writer.applied == [
        (
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": NAME, "namespace": NS},
                "status": {"trainerStatus": trainer_status},
            },
            "trainer-status",
            True,
        )
    ]
    assert response.body == orjson.dumps({"trainerStatus": trainer_status}) + b"\n"
    assert response.content_type == "application/json"


def test_fields_left_out_are_left_out_of_the_apply_so_the_api_server_removes_them(
    handler: StatusHandler, writer: FakeWriter
) -> None:
    # #99 (replace, not merge) relies on this: SSA removes what the manager owned and no longer sends.
    post(handler, {"trainerStatus": {"lastUpdatedTime": TIME, "metrics": []}})
    assert writer.applied[0][0]["status"] == {"trainerStatus": {"lastUpdatedTime": TIME}}


@pytest.mark.parametrize(
    "body",
    [{}, {"trainerStatus": None}, None, {"other": 1}],
    ids=["empty object", "null trainerStatus", "JSON null", "unknown field only"],
)
def test_no_trainer_status_writes_nothing_and_answers_200(
    handler: StatusHandler, writer: FakeWriter, body: Any
) -> None:
    # #100: POST {} leaves the status unchanged.
    response = post(handler, raw=orjson.dumps(body))
    assert (response.status, response.body) == (200, b"{}\n")
    assert writer.applied == []


def test_the_api_servers_validation_error_is_422_with_its_message(authenticator: FakeAuthenticator) -> None:
    # #101: the message is the API server's (it names the TrainJob).
    message = (
        f'TrainJob.trainer.kubeflow.org "{NAME}" is invalid: status.trainerStatus.progressPercentage: '
        "Invalid value: 150: should be less than or equal to 100"
    )
    error = Invalid(message, status=422, reason="Invalid")
    response = post(
        StatusHandler(authenticator, FakeWriter(error)), {"trainerStatus": {"progressPercentage": 150}}
    )
    assert response.status == 422
    assert status_of(response) == failure(422, "Invalid", message)


def test_a_missing_trainjob_is_404_train_job_not_found(authenticator: FakeAuthenticator) -> None:
    # #102
    error = NotFound(f'trainjobs.trainer.kubeflow.org "{NAME}" not found', status=404, reason="NotFound")
    response = post(StatusHandler(authenticator, FakeWriter(error)), SDK_BODY)
    assert status_of(response) == failure(404, "NotFound", "Train job not found")


@pytest.mark.parametrize(
    "error",
    [
        ApiError("etcdserver: request timed out", status=500, reason="InternalError"),
        ConnectionFailed("refused"),
    ],
    ids=["another API error", "no answer from the API server"],
)
def test_other_write_failures_are_500_internal_error(
    authenticator: FakeAuthenticator, error: Exception
) -> None:
    response = post(StatusHandler(authenticator, FakeWriter(error)), SDK_BODY)
    assert status_of(response) == failure(500, "InternalError", "Internal error")


def test_a_bug_in_the_writer_is_500_internal_server_error(authenticator: FakeAuthenticator) -> None:
    # upstream TestRecoveryMiddleware
    response = post(StatusHandler(authenticator, FakeWriter(ZeroDivisionError())), SDK_BODY)
    assert status_of(response) == failure(500, "InternalError", "Internal Server Error")


# --- authentication -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    [None, "", "unknown-token", OTHER_NS, NOT_SA],
    ids=[
        "no Authorization header",
        "an empty token",
        "a token the API server does not accept for this audience (wrong audience, expired)",
        "a service account of another namespace",
        "not a service account",
    ],
)
def test_unauthorized_requests_are_403_forbidden_and_write_nothing(
    handler: StatusHandler, writer: FakeWriter, token: str | None
) -> None:
    # upstream "unauthorized fails with 403 unauthorized"
    response = post(handler, SDK_BODY, token=token)
    assert status_of(response) == failure(403, "Forbidden", "Forbidden")
    assert writer.applied == []


def test_the_token_is_reviewed_for_the_audience_of_the_path(
    handler: StatusHandler, authenticator: FakeAuthenticator
) -> None:
    other = PATH.replace(f"/trainjobs/{NAME}/", "/trainjobs/other/")
    assert post(handler, SDK_BODY, path=other).status == 403
    assert authenticator.calls == [
        (GOOD, ("trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/other/status",))
    ]


def test_a_review_that_cannot_be_made_is_500_internal_error(
    handler: StatusHandler, writer: FakeWriter
) -> None:
    response = post(handler, SDK_BODY, token=BROKEN)
    assert status_of(response) == failure(500, "InternalError", "Internal error")
    assert writer.applied == []


def test_authentication_comes_before_the_body_is_decoded(handler: StatusHandler) -> None:
    assert post(handler, raw=b"invalid payload", token=None).status == 403


# --- limits and routing ---------------------------------------------------------------------------------


def test_a_body_over_64_kib_is_413_before_anything_else(
    handler: StatusHandler, authenticator: FakeAuthenticator
) -> None:
    # upstream "oversized payload fails with 413 payload too large error"
    response = post(handler, raw=b" " * (MAX_BODY_BYTES + 1), path="/anything", token=None)
    assert status_of(response) == failure(413, "RequestEntityTooLarge", "Payload too large")
    assert authenticator.calls == []


def test_a_body_of_exactly_64_kib_is_read(handler: StatusHandler, writer: FakeWriter) -> None:
    body = orjson.dumps(SDK_BODY)
    padded = body + b" " * (MAX_BODY_BYTES - len(body))
    assert post(handler, raw=padded).status == 200


def test_check_head_answers_without_the_body(handler: StatusHandler) -> None:
    assert handler.check_head("POST", PATH, MAX_BODY_BYTES + 1) is not None
    assert handler.check_head("POST", PATH, MAX_BODY_BYTES) is None
    assert handler.check_head("POST", PATH, None) is None
    assert handler.check_head("GET", PATH, 0) is not None
    assert handler.check_head("POST", "/", 0) is not None


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/healthz",
        PATH + "/",
        PATH.replace("/status", "/scale"),
        PATH.replace("/v1alpha1/", "/v1/"),
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces//trainjobs/x/status",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/NS/trainjobs/x/status",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/a%2Fb/status",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/../status",
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/" + "n" * 64 + "/trainjobs/x/status",
    ],
)
def test_other_paths_are_404_not_found(
    handler: StatusHandler, authenticator: FakeAuthenticator, path: str
) -> None:
    assert status_of(post(handler, SDK_BODY, path=path)) == failure(404, "NotFound", "Not found")
    assert authenticator.calls == []


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
def test_another_method_on_the_route_is_405_with_allow_post(handler: StatusHandler, method: str) -> None:
    response = post(handler, SDK_BODY, method=method)
    assert status_of(response) == failure(405, "MethodNotAllowed", "Method not allowed")
    assert ("Allow", "POST") in response.headers


def test_route() -> None:
    assert route(PATH) == (NS, NAME)
    assert route("/apis/trainer.kubeflow.org/v1alpha1/namespaces/a/trainjobs/b.c-d/status") == ("a", "b.c-d")
    assert route("/apis/trainer.kubeflow.org/v1alpha1/namespaces/a/trainjobs/-b/status") is None


# --- decoding, as Go's encoding/json ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"invalid payload",  # upstream "invalid payload fails with 422 unprocessable entity"
        b"",
        b"[]",
        b'"text"',
        b'{"trainerStatus": 5}',
        b'{"trainerStatus": {"progressPercentage": "50"}}',
        b'{"trainerStatus": {"progressPercentage": 50.5}}',
        b'{"trainerStatus": {"progressPercentage": 50.0}}',
        b'{"trainerStatus": {"progressPercentage": true}}',
        b'{"trainerStatus": {"progressPercentage": 2147483648}}',
        b'{"trainerStatus": {"estimatedRemainingSeconds": -2147483649}}',
        b'{"trainerStatus": {"metrics": {"name": "loss"}}}',
        b'{"trainerStatus": {"metrics": [5]}}',
        b'{"trainerStatus": {"metrics": [{"name": "loss", "value": 0.5}]}}',
        b'{"trainerStatus": {"lastUpdatedTime": 5}}',
        b'{"trainerStatus": {"lastUpdatedTime": ""}}',
        b'{"trainerStatus": {"lastUpdatedTime": "2026-01-02"}}',
        b'{"trainerStatus": {"lastUpdatedTime": "2026-01-02 03:04:05Z"}}',
        b'{"trainerStatus": {"lastUpdatedTime": "2026-02-30T03:04:05Z"}}',
        b'{"trainerStatus": {"lastUpdatedTime": "2026-01-02T03:04:05+24:00"}}',
        b"{} trailing",
        b"[" * 5000 + b"]" * 5000,
    ],
)
def test_a_body_that_is_not_an_update_request_is_422_invalid_payload(
    handler: StatusHandler, writer: FakeWriter, raw: bytes
) -> None:
    response = post(handler, raw=raw)
    assert status_of(response) == failure(422, "Invalid", "Invalid payload")
    assert writer.applied == []


@pytest.mark.parametrize(
    ("given", "wire"),
    [
        ("2026-01-02T03:04:05Z", "2026-01-02T03:04:05Z"),
        ("2026-01-02T03:04:05.999999Z", "2026-01-02T03:04:05Z"),
        ("2026-01-02T04:04:05+01:00", "2026-01-02T03:04:05Z"),
        ("2026-01-01T23:04:05-04:00", "2026-01-02T03:04:05Z"),
    ],
)
def test_times_are_written_in_utc_to_the_second(given: str, wire: str) -> None:
    decoded = decode_update_request(orjson.dumps({"trainerStatus": {"lastUpdatedTime": given}}))
    assert decoded is not None
    assert decoded.wire()["lastUpdatedTime"] == wire


def test_keys_match_case_insensitively_and_unknown_keys_are_ignored() -> None:
    raw = b'{"TrainerStatus": {"PROGRESSPERCENTAGE": 7, "lastUpdatedTime": null, "x": 1}, "y": 2}'
    decoded = decode_update_request(raw)
    assert decoded is not None
    assert decoded.wire() == {"progressPercentage": 7, "lastUpdatedTime": None}


def test_null_and_missing_values_are_absent_and_a_null_metric_is_empty() -> None:
    raw = b'{"trainerStatus": {"progressPercentage": null, "metrics": [null, {"name": "loss"}]}}'
    decoded = decode_update_request(raw)
    assert decoded is not None
    # The API server refuses the empty strings (minLength 1), as it does upstream's.
    assert decoded.wire() == {
        "metrics": [{"name": "", "value": ""}, {"name": "loss", "value": ""}],
        "lastUpdatedTime": None,
    }


def test_invalid_payload_says_where() -> None:
    with pytest.raises(InvalidPayload, match=r"trainerStatus\.metrics\[1\]\.value"):
        decode_update_request(b'{"trainerStatus": {"metrics": [{"name": "a", "value": "1"}, {"value": 2}]}}')


def test_the_echo_omits_what_go_omits() -> None:
    assert encode_update_request(None) == b"{}\n"
    decoded = decode_update_request(b'{"trainerStatus": {"metrics": []}}')
    assert encode_update_request(decoded) == b'{"trainerStatus":{"lastUpdatedTime":null}}\n'


def test_the_apply_body_names_the_trainjob_and_holds_the_trainer_status_alone() -> None:
    decoded = decode_update_request(
        b'{"trainerStatus": {"progressPercentage": 1, "lastUpdatedTime": "2026-01-02T03:04:05Z"}}'
    )
    assert decoded is not None
    assert status_apply_body("ns", "job", decoded) == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "job", "namespace": "ns"},
        "status": {"trainerStatus": {"progressPercentage": 1, "lastUpdatedTime": TIME}},
    }
    assert FIELD_MANAGER == "trainer-status"


# --- the HTTPS server on 127.0.0.1 ----------------------------------------------------------------------


@pytest.fixture
def ca_file_and_certs(tmp_path: Path) -> tuple[Path, CertWatcher]:
    ca = CertificateAuthority.new("status-server-test-ca")
    ca_file, _ = ca.write(tmp_path / "ca", "ca.crt", "ca.key")
    cert, key = ca.issue_serving(["127.0.0.1"]).write(tmp_path / "certs", "tls.crt", "tls.key")
    return ca_file, CertWatcher(cert, key)


@pytest.fixture
def serve(
    ca_file_and_certs: tuple[Path, CertWatcher], handler: StatusHandler
) -> Iterator[Callable[..., StatusServer]]:
    started: list[StatusServer] = []

    def run(**options: Any) -> StatusServer:
        server = StatusServer(handler, certs=ca_file_and_certs[1], bind_address="127.0.0.1:0", **options)
        server.start(threading.Event())
        started.append(server)
        return server

    yield run
    for server in started:
        server.stop()


def https(
    server: StatusServer,
    ca_file: Path,
    *,
    method: str,
    path: str,
    body: bytes | None,
    headers: Mapping[str, str],
) -> tuple[int, dict[str, str], bytes]:
    context = ssl.create_default_context(cafile=str(ca_file))
    conn = http.client.HTTPSConnection(*server.address, context=context, timeout=10)
    try:
        conn.request(method, path, body, dict(headers))
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        conn.close()


def test_the_server_answers_over_https(
    serve: Callable[..., StatusServer], ca_file_and_certs: tuple[Path, CertWatcher], writer: FakeWriter
) -> None:
    server = serve()
    ca_file = ca_file_and_certs[0]
    body = orjson.dumps(SDK_BODY)
    code, headers, answer = https(
        server, ca_file, method="POST", path=PATH, body=body, headers={"Authorization": f"Bearer {GOOD}"}
    )
    assert code == 200
    assert headers["content-type"] == "application/json"
    assert orjson.loads(answer)["trainerStatus"]["progressPercentage"] == 42
    assert len(writer.applied) == 1

    code, headers, answer = https(server, ca_file, method="GET", path=PATH, body=None, headers={})
    assert (code, headers["allow"]) == (405, "POST")

    code, _, answer = https(server, ca_file, method="POST", path="/nope", body=b"{}", headers={})
    assert (code, orjson.loads(answer)["message"]) == (404, "Not found")

    code, _, answer = https(
        server, ca_file, method="POST", path=PATH, body=b"{}", headers={"Authorization": "Bearer nope"}
    )
    assert (code, orjson.loads(answer)["message"]) == (403, "Forbidden")


def test_the_server_refuses_a_large_body_from_its_content_length_without_reading_it(
    serve: Callable[..., StatusServer], ca_file_and_certs: tuple[Path, CertWatcher]
) -> None:
    server = serve()
    context = ssl.create_default_context(cafile=str(ca_file_and_certs[0]))
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_BODY_BYTES + 1}\r\n"
        "Content-Type: application/json\r\n\r\n"
    ).encode()
    with (
        socket.create_connection(server.address, timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(head)  # and no body: the answer must come anyway
        chunks = []
        while chunk := tls.recv(65536):
            chunks.append(chunk)
    answer = b"".join(chunks)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert b'"message":"Payload too large"' in answer


def raw_exchange(server: StatusServer, ca_file: Path, data: bytes) -> bytes:
    context = ssl.create_default_context(cafile=str(ca_file))
    with (
        socket.create_connection(server.address, timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(data)
        chunks = []
        while chunk := tls.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(
    ("request_head", "status_line"),
    [
        (f"FOO {PATH} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", b"HTTP/1.1 405 "),
        ("garbage\r\n\r\n", b"HTTP/1.1 400 "),
        (f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", b"HTTP/1.1 400 "),
        (f"POST {PATH} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", b"HTTP/1.1 411 "),
    ],
    ids=["an unknown method", "no request line", "a Content-Length that is no number", "a chunked body"],
)
def test_requests_the_parser_refuses_get_a_4xx_status(
    serve: Callable[..., StatusServer],
    ca_file_and_certs: tuple[Path, CertWatcher],
    request_head: str,
    status_line: bytes,
) -> None:
    answer = raw_exchange(serve(), ca_file_and_certs[0], request_head.encode())
    assert answer.startswith(status_line), answer[:200]
    assert b'"status":"Failure"' in answer


def test_tls_1_2_is_the_minimum(
    serve: Callable[..., StatusServer], ca_file_and_certs: tuple[Path, CertWatcher]
) -> None:
    server = serve()
    assert ca_file_and_certs[1].context().minimum_version == ssl.TLSVersion.TLSv1_2
    context = ssl.create_default_context(cafile=str(ca_file_and_certs[0]))
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    with (
        socket.create_connection(server.address, timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.version() == "TLSv1.2"


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
@pytest.mark.parametrize(
    "offered", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1], ids=["TLS 1.0", "TLS 1.1"]
)
def test_a_client_offering_less_than_tls_1_2_is_refused_and_1_3_is_served(
    serve: Callable[..., StatusServer], ca_file_and_certs: tuple[Path, CertWatcher], offered: ssl.TLSVersion
) -> None:
    server = serve()
    old = ssl.create_default_context(cafile=str(ca_file_and_certs[0]))
    old.set_ciphers("DEFAULT:@SECLEVEL=0")  # the client really offers it: the refusal is the server's
    old.minimum_version = ssl.TLSVersion.TLSv1
    old.maximum_version = offered
    with (
        pytest.raises(ssl.SSLError, match=r"(?i)protocol version|unsupported protocol|no protocols"),
        socket.create_connection(server.address, timeout=10) as raw,
    ):
        old.wrap_socket(raw, server_hostname="127.0.0.1")
    modern = ssl.create_default_context(cafile=str(ca_file_and_certs[0]))
    modern.minimum_version = ssl.TLSVersion.TLSv1_3
    with (
        socket.create_connection(server.address, timeout=10) as raw,
        modern.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.version() == "TLSv1.3"


def test_a_client_trickling_its_headers_is_cut_off_and_gets_no_answer(
    serve: Callable[..., StatusServer], ca_file_and_certs: tuple[Path, CertWatcher]
) -> None:
    server = serve(read_timeout=0.5)
    context = ssl.create_default_context(cafile=str(ca_file_and_certs[0]))
    with (
        socket.create_connection(server.address, timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.settimeout(0.05)
        answer = None
        for byte in f"POST {PATH} HTTP/1.1\r\nX-Slow: ".encode() + b"a" * 1000:
            try:
                tls.sendall(bytes([byte]))
                answer = tls.recv(65536)
            except TimeoutError:
                continue
            except (OSError, ssl.SSLError):
                answer = b""
            break
        assert answer == b""  # closed at the deadline, long before the request could end
    assert server.statistics().timed_out == 1


def test_the_servers_own_refusals_are_statuses(
    serve: Callable[..., StatusServer], ca_file_and_certs: tuple[Path, CertWatcher]
) -> None:
    server = serve()
    big = raw_exchange(
        server, ca_file_and_certs[0], f"GET {PATH} HTTP/1.1\r\nX: {'a' * (1 << 20)}\r\n\r\n".encode()
    )
    assert big.startswith(b"HTTP/1.1 431 ")
    assert b'"reason":"RequestHeaderFieldsTooLarge"' in big
    old = raw_exchange(server, ca_file_and_certs[0], f"POST {PATH} HTTP/2.0\r\n\r\n".encode())
    assert old.startswith(b"HTTP/1.1 400 ") and b'"status":"Failure"' in old


def test_a_silent_client_is_dropped_after_the_read_timeout_and_others_are_served(
    serve: Callable[..., StatusServer], ca_file_and_certs: tuple[Path, CertWatcher]
) -> None:
    server = serve(read_timeout=1.0, max_connections=1)
    ca_file = ca_file_and_certs[0]
    with socket.create_connection(server.address, timeout=10) as silent:
        # The one slot is held by a client that sends nothing; the next request waits for the deadline,
        # then is served (bounded by the socket timeout of the client, 10 s).
        code, _, _ = https(server, ca_file, method="POST", path="/nope", body=b"{}", headers={})
        assert code == 404
        assert silent.recv(1) == b""  # the server closed the silent connection


def test_a_server_whose_slots_are_all_held_is_healthy_and_ready_without_a_probe_waiting_in_line(
    serve: Callable[..., StatusServer],
) -> None:
    server = serve(read_timeout=30.0, max_connections=1)
    with socket.create_connection(server.address, timeout=10):
        # The one slot is held by a silent client; a probe dialling in would wait behind it.
        wait_until(lambda: server._server is not None and server._server.statistics().saturated, timeout=10)
        server.health_checker()()
        server.ready_checker()()


def test_checks_and_lifecycle(
    serve: Callable[..., StatusServer], handler: StatusHandler, tmp_path: Path
) -> None:
    missing = CertWatcher(tmp_path / "no.crt", tmp_path / "no.key")
    waiting = StatusServer(handler, certs=missing, bind_address="127.0.0.1:0")
    waiting.health_checker()()  # not started: healthy (liveness must not kill a syncing replica)
    with pytest.raises(RuntimeError, match="not been started"):
        waiting.ready_checker()()
    waiting.start(threading.Event())
    try:
        with pytest.raises(RuntimeError, match="certificates are not ready"):
            waiting.ready_checker()()
        waiting.health_checker()()
    finally:
        assert waiting.stop() is True
    server = serve()
    server.ready_checker()()
    server.health_checker()()
    assert not server.need_leader_election()
    assert "serving" in repr(server)
    server.stop()
    assert "stopped" in repr(server)
    assert not [t for t in threading.enumerate() if t.name.startswith("status-server/")]


@pytest.mark.parametrize("address", ["0.0.0.0:10443", "[::]:10443", ":10443", "0"])
def test_every_interface_and_off_are_refused(handler: StatusHandler, tmp_path: Path, address: str) -> None:
    with pytest.raises(StatusServerError):
        StatusServer(handler, certs=CertWatcher(tmp_path / "a", tmp_path / "b"), bind_address=address)


# --- arbitrary input ------------------------------------------------------------------------------------

_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
_FIELDS = st.sampled_from(
    ["progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime", "name", "value", "x"]
)
_REQUESTS = st.fixed_dictionaries(
    {
        "trainerStatus": st.dictionaries(
            _FIELDS, _JSON_VALUES | st.lists(st.dictionaries(_FIELDS, _JSON_VALUES))
        )
    }
)


def _encode(value: Any) -> bytes:
    return json.dumps(value).encode()  # integers beyond 64 bits too, which orjson does not write


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=200) | _REQUESTS.map(_encode) | _JSON_VALUES.map(_encode))
def test_no_body_makes_the_handler_fail_or_answer_5xx(body: bytes) -> None:
    writer = FakeWriter()
    response = StatusHandler(FakeAuthenticator(), writer).serve(
        Request(method="POST", path=PATH, headers={"authorization": f"Bearer {GOOD}"}, body=body)
    )
    assert response.status in (200, 422), response.body
    decoded = orjson.loads(response.body)
    if response.status == 422:
        assert decoded == failure(422, "Invalid", "Invalid payload")
        assert writer.applied == []
    else:
        # What was applied is what was echoed, and only trainerStatus is written.
        assert [applied[0]["status"] for applied in writer.applied] == ([decoded] if decoded else [])
