"""controller.serving.filters: controller-runtime's WithAuthenticationAndAuthorization against fake review
answers (401/403/200/500, the header forms, the caches and their bounds)."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import orjson
import pytest
import structlog

from controller.client import errors
from controller.clock import FakeClock
from controller.serving.authentication import UserInfo
from controller.serving.filters import (
    Authenticator,
    Authorizer,
    authentication_and_authorization,
)
from controller.serving.httpserver import Response

GOOD = "good-token"
READER = "reader-token"
ALICE = "system:serviceaccount:monitoring:prometheus"


class FakeReviews:
    """Answers TokenReviews from ``users`` (token → TokenReview user) and SubjectAccessReviews from
    ``allowed`` (usernames). Counts the reviews; ``fail`` makes every review a 503. Models nothing else."""

    def __init__(self) -> None:
        self.users: dict[str, dict[str, Any]] = {
            GOOD: {"username": "bob", "uid": "u-1", "groups": ["devs"]},
            READER: {
                "username": ALICE,
                "uid": "u-2",
                "groups": ["system:serviceaccounts"],
                "extra": {"k": ["v"]},
            },
        }
        self.allowed = {ALICE}
        self.token_reviews = 0
        self.access_reviews: list[Mapping[str, Any]] = []
        self.fail = False

    def create(self, obj: Mapping[str, Any], *, field_manager: str | None = None) -> dict[str, Any]:
        if self.fail:
            raise errors.from_status({"kind": "Status", "code": 503, "reason": "ServiceUnavailable"})
        if obj["kind"] == "TokenReview":
            self.token_reviews += 1
            user = self.users.get(obj["spec"]["token"])
            return {"status": {"authenticated": True, "user": user} if user else {"authenticated": False}}
        assert obj["kind"] == "SubjectAccessReview"
        self.access_reviews.append(obj["spec"])
        return {"status": {"allowed": obj["spec"]["user"] in self.allowed, "reason": "rbac"}}


def jwt(claims: dict[str, object]) -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(value)).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


def metrics_app(path: str, query: Mapping[str, list[str]], headers: Mapping[str, str]) -> Response:
    return Response(status=200, body=b"controller_runtime_reconcile_total 1\n")


@pytest.fixture
def reviews() -> FakeReviews:
    return FakeReviews()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def serve(reviews: FakeReviews, clock: FakeClock):  # type: ignore[no-untyped-def]
    app = authentication_and_authorization(reviews, clock=clock)(metrics_app)

    def get(authorization: str | None, path: str = "/metrics") -> Response:
        headers = {} if authorization is None else {"authorization": authorization}
        return app(path, {}, headers)

    return get


def test_no_token_is_401_without_a_review(reviews: FakeReviews, clock: FakeClock) -> None:
    response = serve(reviews, clock)(None)
    assert (response.status, response.body) == (401, b"Unauthorized\n")
    assert reviews.token_reviews == 0


@pytest.mark.parametrize(
    "header",
    ["", "   ", "Basic dXNlcjpwYXNz", "Bearer", "Bearer ", f"Bearer {READER} x", "Token " + READER, READER],
)
def test_malformed_authorization_headers_are_401(reviews: FakeReviews, clock: FakeClock, header: str) -> None:
    assert serve(reviews, clock)(header).status == 401
    assert reviews.token_reviews == 0


def test_the_scheme_is_matched_in_any_case(reviews: FakeReviews, clock: FakeClock) -> None:
    assert serve(reviews, clock)("bEaReR " + READER).status == 200


def test_an_unknown_token_is_401(reviews: FakeReviews, clock: FakeClock) -> None:
    assert serve(reviews, clock)("Bearer made-up").status == 401


def test_an_authenticated_user_without_the_right_is_403(reviews: FakeReviews, clock: FakeClock) -> None:
    response = serve(reviews, clock)("Bearer " + GOOD)
    assert (response.status, response.body) == (403, b"Authorization denied for user bob\n")


def test_an_authorized_user_gets_the_metrics(reviews: FakeReviews, clock: FakeClock) -> None:
    response = serve(reviews, clock)("Bearer " + READER)
    assert (response.status, response.body) == (200, b"controller_runtime_reconcile_total 1\n")
    assert reviews.access_reviews == [
        {
            "user": ALICE,
            "uid": "u-2",
            "groups": ["system:serviceaccounts", "system:authenticated"],
            "extra": {"k": ["v"]},
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
        }
    ]


def test_the_path_reviewed_is_the_path_requested(reviews: FakeReviews, clock: FakeClock) -> None:
    serve(reviews, clock)("Bearer " + READER, "/other")
    assert reviews.access_reviews[0]["nonResourceAttributes"] == {"path": "/other", "verb": "get"}


def test_review_failures_are_500_and_tokens_are_never_logged(reviews: FakeReviews, clock: FakeClock) -> None:
    get = serve(reviews, clock)
    reviews.fail = True
    with structlog.testing.capture_logs() as logs:
        response = get("Bearer " + READER)
    assert (response.status, response.body) == (500, b"Authentication failed\n")
    reviews.fail = False
    assert get("Bearer " + READER).status == 200  # failures are not cached
    reviews.fail = True
    clock.step(301)
    with structlog.testing.capture_logs() as more:
        response = get("Bearer " + READER)
    assert response.status == 500  # the token review is cached no longer either
    assert READER not in repr(logs) + repr(more)


def test_authorization_failure_is_500(reviews: FakeReviews, clock: FakeClock) -> None:
    authn = Authenticator(reviews, clock=clock)
    authz = Authorizer(reviews, clock=clock)
    app = authentication_and_authorization(reviews, authenticator=authn, authorizer=authz)(metrics_app)
    authn.authenticate(READER)  # cached
    reviews.fail = True
    response = app("/metrics", {}, {"authorization": "Bearer " + READER})
    assert (response.status, response.body) == (500, f"Authorization for user {ALICE} failed\n".encode())


def test_token_reviews_are_cached_for_a_minute_either_way(reviews: FakeReviews, clock: FakeClock) -> None:
    get = serve(reviews, clock)
    for _ in range(3):
        assert get("Bearer " + READER).status == 200
        assert get("Bearer made-up").status == 401
    assert reviews.token_reviews == 2
    clock.step(59)
    get("Bearer " + READER)
    get("Bearer made-up")
    assert reviews.token_reviews == 2
    clock.step(1)
    get("Bearer " + READER)
    get("Bearer made-up")
    assert reviews.token_reviews == 4


def test_decisions_are_cached_five_minutes_when_allowed_and_30_seconds_when_denied(
    reviews: FakeReviews, clock: FakeClock
) -> None:
    get = serve(reviews, clock)
    get("Bearer " + READER)
    get("Bearer " + GOOD)
    assert len(reviews.access_reviews) == 2
    reviews.allowed = {"bob"}  # RBAC changed: bob now allowed, alice not
    clock.step(29)
    assert get("Bearer " + GOOD).status == 403  # the denial is still cached
    assert get("Bearer " + READER).status == 200  # the allowance is still cached
    clock.step(1)
    assert get("Bearer " + GOOD).status == 200
    clock.step(240)  # token reviews expired meanwhile; alice's allowance has 30 s left
    assert get("Bearer " + READER).status == 200
    clock.step(30)
    assert get("Bearer " + READER).status == 403


def test_the_caches_are_bounded(reviews: FakeReviews, clock: FakeClock) -> None:
    authn = Authenticator(reviews, clock=clock, max_entries=8)
    for i in range(100):
        assert authn.authenticate(f"made-up-{i}") is None
    assert authn.statistics().entries == 8
    assert reviews.token_reviews == 100
    authz = Authorizer(reviews, clock=clock, max_entries=4)
    for i in range(20):
        assert not authz.authorize(UserInfo(username=f"user-{i}"), "get", "/metrics").allowed
    assert authz.statistics().entries == 4


def test_a_token_review_is_cached_no_longer_than_the_token_lives(
    reviews: FakeReviews, clock: FakeClock
) -> None:
    expiring = jwt({"sub": "alice", "exp": clock.now().timestamp() + 20})
    reviews.users[expiring] = reviews.users[READER]
    get = serve(reviews, clock)
    assert get("Bearer " + expiring).status == 200
    clock.step(19)
    assert get("Bearer " + expiring).status == 200
    assert reviews.token_reviews == 1
    clock.step(1)  # the token's exp: the API server is asked again (and would refuse an expired token)
    del reviews.users[expiring]
    assert get("Bearer " + expiring).status == 401
    assert reviews.token_reviews == 2


def test_a_user_already_in_the_authenticated_group_is_not_given_it_twice(reviews: FakeReviews) -> None:
    Authorizer(reviews).authorize(UserInfo(username="x", groups=("system:authenticated",)), "get", "/metrics")
    assert reviews.access_reviews[0]["groups"] == ["system:authenticated"]
    assert "uid" not in reviews.access_reviews[0] and "extra" not in reviews.access_reviews[0]
