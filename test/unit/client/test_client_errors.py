"""controller.client.errors: one mapping from (HTTP status, body, method) to an exception, as apimachinery
does it.

The table mirrors apimachinery ``pkg/api/errors/errors_test.go`` (``TestErrorNew``, ``TestFromObject``,
``TestIsXxx``) and client-go ``rest/request_test.go`` (``TestTransformResponse``,
``TestTransformUnstructuredError``): a Status body's specific reason wins over the code; without a Status the
code and method decide.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from controller.client import errors


def status(code: int, reason: str, message: str = "msg", **details: Any) -> bytes:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
    if details:
        body["details"] = details
    return orjson.dumps(body)


CASES = [
    # (id, http status, body, method, headers, class, reason)
    ("status NotFound", 404, status(404, "NotFound"), "GET", {}, errors.NotFound, "NotFound"),
    ("status AlreadyExists is 409 too", 409, status(409, "AlreadyExists"), "POST", {}, errors.AlreadyExists,
     "AlreadyExists"),
    ("status Conflict", 409, status(409, "Conflict"), "PUT", {}, errors.Conflict, "Conflict"),
    ("status Expired is Gone", 410, status(410, "Expired"), "GET", {}, errors.Gone, "Expired"),
    ("status Gone", 410, status(410, "Gone"), "GET", {}, errors.Gone, "Gone"),
    ("status Invalid", 422, status(422, "Invalid"), "POST", {}, errors.Invalid, "Invalid"),
    ("status Forbidden", 403, status(403, "Forbidden"), "GET", {}, errors.Forbidden, "Forbidden"),
    ("status Unauthorized", 401, status(401, "Unauthorized"), "GET", {}, errors.Unauthorized, "Unauthorized"),
    ("status TooManyRequests", 429, status(429, "TooManyRequests"), "GET", {}, errors.TooManyRequests,
     "TooManyRequests"),
    ("status BadRequest", 400, status(400, "BadRequest"), "GET", {}, errors.BadRequest, "BadRequest"),
    ("status MethodNotAllowed", 405, status(405, "MethodNotAllowed"), "GET", {}, errors.MethodNotAllowed,
     "MethodNotAllowed"),
    ("status InternalError", 500, status(500, "InternalError"), "GET", {}, errors.ServerError,
     "InternalError"),
    ("status ServerTimeout", 500, status(500, "ServerTimeout"), "GET", {}, errors.ServerError,
     "ServerTimeout"),
    ("status Timeout", 504, status(504, "Timeout"), "GET", {}, errors.ServerError, "Timeout"),
    ("status ServiceUnavailable", 503, status(503, "ServiceUnavailable"), "GET", {}, errors.ServerError,
     "ServiceUnavailable"),
    # A known reason we have no class for stays a plain ApiError, whatever the code.
    ("status NotAcceptable", 406, status(406, "NotAcceptable"), "GET", {}, errors.ApiError, "NotAcceptable"),
    ("status RequestEntityTooLarge", 413, status(413, "RequestEntityTooLarge"), "PUT", {}, errors.ApiError,
     "RequestEntityTooLarge"),
    # An unknown reason falls back to the code (IsNotFound: "reason unknown and code 404").
    ("status unknown reason 404", 404, status(404, "SomethingNew"), "GET", {}, errors.NotFound,
     "SomethingNew"),
    ("status empty reason 409", 409, status(409, ""), "PUT", {}, errors.Conflict, ""),
    ("status empty reason 502", 502, status(502, ""), "GET", {}, errors.ServerError, ""),
    # One class per error: a specific reason wins even over 429 (where Go's IsForbidden and
    # IsTooManyRequests would both hold); a known reason without a class still yields to 429.
    ("a reason wins over 429", 429, status(429, "Forbidden"), "GET", {}, errors.Forbidden, "Forbidden"),
    ("429 over a classless reason", 429, status(429, "NotAcceptable"), "GET", {}, errors.TooManyRequests,
     "NotAcceptable"),
    # No Status body: NewGenericServerResponse.
    ("bare 404", 404, b"404 page not found\n", "GET", {}, errors.NotFound, "NotFound"),
    ("bare 409 to a POST", 409, b"", "POST", {}, errors.AlreadyExists, "AlreadyExists"),
    ("bare 409 to a PUT", 409, b"", "PUT", {}, errors.Conflict, "Conflict"),
    ("bare 410", 410, b"", "GET", {}, errors.Gone, ""),
    ("bare 422", 422, b"", "PATCH", {}, errors.Invalid, "Invalid"),
    ("bare 401", 401, b"Unauthorized", "GET", {}, errors.Unauthorized, "Unauthorized"),
    ("bare 403 keeps the server text", 403, b"forbidden: no", "GET", {}, errors.Forbidden, "Forbidden"),
    ("bare 429", 429, b"", "GET", {"Retry-After": "2"}, errors.TooManyRequests, "TooManyRequests"),
    ("html 503", 503, b"<html>down</html>", "GET", {}, errors.ServerError, "ServiceUnavailable"),
    ("bare 502", 502, b"bad gateway", "GET", {}, errors.ServerError, "InternalError"),
    ("bare 504", 504, b"", "GET", {}, errors.ServerError, "Timeout"),
    ("bare 418", 418, b"teapot", "GET", {}, errors.ApiError, ""),
    # A Status that says Success is not an error body: the code decides.
    ("success status on a 500", 500, orjson.dumps({"kind": "Status", "status": "Success"}), "GET", {},
     errors.ServerError, "InternalError"),
]  # fmt: skip


@pytest.mark.parametrize("case", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_failed_response_maps_to_one_exception(case: tuple[Any, ...]) -> None:
    code, body, method, headers, cls, reason = case
    err = errors.from_response(code, body, headers, method=method)
    assert type(err) is cls
    assert err.reason == reason
    assert err.status == code
    assert isinstance(err, errors.ApiError)
    assert err.message


def test_status_fields_are_kept_verbatim() -> None:
    causes = [{"reason": "FieldValueInvalid", "message": "Invalid value: 0", "field": "spec.replicas"}]
    body = status(422, "Invalid", 'Job "j" is invalid', name="j", kind="jobs", group="batch", causes=causes)
    err = errors.from_response(422, body, {}, method="POST")
    assert isinstance(err, errors.Invalid)
    assert err.message == 'Job "j" is invalid'
    assert str(err) == 'Job "j" is invalid'
    assert err.details["name"] == "j"
    assert err.causes == causes
    assert err.has_cause("FieldValueInvalid")
    assert not err.has_cause("FieldValueRequired")
    assert repr(err) == "Invalid(status=422, reason='Invalid', message='Job \"j\" is invalid')"


def test_the_status_code_wins_over_the_http_code_when_present() -> None:
    # A proxy may rewrite the HTTP status; FromObject keeps the Status' own code.
    err = errors.from_response(500, status(404, "NotFound"), {})
    assert isinstance(err, errors.NotFound)
    assert err.status == 404


def test_a_body_that_is_not_a_status_becomes_an_unexpected_response_cause() -> None:
    err = errors.from_response(503, b"<html>maintenance</html>", {})
    assert err.has_cause(errors.CAUSE_UNEXPECTED_SERVER_RESPONSE)
    assert err.causes[0]["message"] == "<html>maintenance</html>"


def test_a_huge_unexpected_body_is_truncated_in_the_cause() -> None:
    err = errors.from_response(502, b"x" * 100_000, {})
    assert len(err.causes[0]["message"]) == 1024


def test_a_bare_403_keeps_the_servers_message() -> None:
    err = errors.from_response(403, b'pods is forbidden: User "u" cannot list', {})
    assert err.message == 'pods is forbidden: User "u" cannot list'


@pytest.mark.parametrize(
    ("headers", "details", "expected"),
    [
        ({"Retry-After": "3"}, {}, 3.0),
        ({"retry-after": "7"}, {}, 7.0),  # header names are case-insensitive
        ({}, {"retryAfterSeconds": 5}, 5.0),
        ({"Retry-After": "1"}, {"retryAfterSeconds": 5}, 1.0),  # the header wins
        ({"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}, {}, None),  # client-go reads seconds only
        ({"Retry-After": "-1"}, {}, None),
        ({}, {"retryAfterSeconds": 0}, None),
        ({}, {}, None),
    ],
    ids=["header", "lower-case header", "details", "header wins", "http date", "negative", "zero", "none"],
)
def test_retry_after_comes_from_the_header_then_the_details(
    headers: dict[str, str], details: dict[str, Any], expected: float | None
) -> None:
    err = errors.from_response(429, status(429, "TooManyRequests", **details), headers)
    assert isinstance(err, errors.TooManyRequests)
    assert err.retry_after == expected


def test_a_watch_error_event_status_becomes_an_exception() -> None:
    # reflector.go watchHandler: an ERROR event is apierrors.FromObject(event.Object).
    obj = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "reason": "Expired",
           "message": "too old resource version: 1 (200)"}  # fmt: skip
    err = errors.from_status(obj)
    assert isinstance(err, errors.Gone)
    assert errors.is_expired(err)
    assert err.message == "too old resource version: 1 (200)"


@pytest.mark.parametrize(
    ("err", "expired"),
    [
        (errors.from_response(410, status(410, "Expired"), {}), True),
        (errors.from_response(410, status(410, "Gone"), {}), True),
        (errors.from_response(410, b"", {}), True),
        (errors.from_response(404, status(404, "NotFound"), {}), False),
        (ValueError("x"), False),
    ],
    ids=["expired", "gone", "bare 410", "not found", "not an api error"],
)
def test_is_expired_is_the_reflectors_expired_or_gone(err: BaseException, expired: bool) -> None:
    assert errors.is_expired(err) is expired


@pytest.mark.parametrize(
    ("err", "too_large"),
    [
        # reflector_test.go TestReflectorListExtraction-era cases of isTooLargeResourceVersionError:
        (errors.from_response(504, status(504, "Timeout", causes=[{"reason": "ResourceVersionTooLarge"}]),
                              {}), True),
        # API servers 1.17.0-1.18.5: a Timeout whose cause message says so.
        (errors.from_response(504, status(504, "Timeout", causes=[{"message": "Too large resource version"}]),
                              {}), True),
        # Before 1.17: only the message says so (and details must be present).
        (errors.from_response(504, status(504, "Timeout", "Too large resource version: 5, current: 1",
                                          retryAfterSeconds=1), {}), True),
        (errors.from_response(504, status(504, "Timeout", "Too large resource version"), {}), False),
        (errors.from_response(500, status(500, "InternalError", "Too large resource version",
                                          causes=[{"message": "x"}]), {}), False),
        (errors.from_response(504, status(504, "Timeout", "slow", causes=[{"message": "x"}]), {}), False),
        (RuntimeError("Too large resource version"), False),
    ],
    ids=["cause type", "cause message", "message", "no details", "not a timeout", "other timeout", "not api"],
)  # fmt: skip
def test_is_too_large_resource_version_matches_every_server_generation(
    err: BaseException, too_large: bool
) -> None:
    assert errors.is_too_large_resource_version(err) is too_large


def test_transport_errors_are_not_api_errors() -> None:
    for cls in (errors.ConnectionFailed, errors.RequestTimeout, errors.WatchTimeout, errors.ClientClosed):
        assert issubclass(cls, errors.TransportError)
        assert not issubclass(cls, errors.ApiError)


def test_no_kind_match_names_the_kind() -> None:
    err = errors.NoKindMatch("example.com", "v1", "Widget")
    assert str(err) == 'no matches for kind "Widget" in version "example.com/v1"'
    assert isinstance(err, LookupError)
