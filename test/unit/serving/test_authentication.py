"""controller.serving.authentication: the bearer header table of upstream's statusserver/auth_test.go
(TestExtractRawToken), and what a TokenReview answer means."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from controller.client.errors import ConnectionFailed, Forbidden
from controller.serving.authentication import (
    AuthenticationError,
    TokenReviewAuthenticator,
    UserInfo,
    bearer_token,
)

AUDIENCE = "trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/job/status"
TOKEN = "secret-token-value"


@pytest.mark.parametrize(
    ("header", "token"),
    [
        pytest.param("Bearer token", "token", id="bearer token is extracted"),
        pytest.param("bearer token", "token", id="scheme is matched case-insensitively"),
        pytest.param("Bearer \t token", "token", id="repeated whitespace between scheme and credentials"),
        pytest.param("  Bearer token  ", "token", id="surrounding whitespace is tolerated"),
        pytest.param("", "", id="empty header yields no token"),
        pytest.param(None, "", id="no header yields no token"),
        pytest.param("   ", "", id="whitespace-only header yields no token"),
        pytest.param("Bearer", "", id="missing credentials yield no token"),
        pytest.param("token", "", id="missing scheme yields no token"),
        pytest.param("Basic dXNlcjpwYXNz", "", id="other authorization schemes yield no token"),
        pytest.param("Bearerx token", "", id="scheme substring is not accepted"),
        pytest.param("Bearer token another", "", id="multiple credentials yield no token"),
    ],
)
def test_bearer_token(header: str | None, token: str) -> None:
    assert bearer_token(header) == token


class FakeReviewer:
    """Answers TokenReviews with a fixed status (or raises); remembers the reviews. Does not model the API
    server's token checks: the test says what it answers."""

    def __init__(self, status: Mapping[str, Any] | None = None, error: Exception | None = None) -> None:
        self.status = status
        self.error = error
        self.reviews: list[Mapping[str, Any]] = []

    def create(self, obj: Mapping[str, Any], *, field_manager: str | None = None) -> dict[str, Any]:
        self.reviews.append(obj)
        if self.error is not None:
            raise self.error
        answer: dict[str, Any] = {**obj}
        if self.status is not None:
            answer["status"] = self.status
        return answer


def authenticated(
    username: str = "system:serviceaccount:ns:default", audiences: list[str] | None = None
) -> dict[str, Any]:
    return {
        "authenticated": True,
        "user": {
            "username": username,
            "uid": "u-1",
            "groups": ["system:serviceaccounts"],
            "extra": {"authentication.kubernetes.io/pod-name": ["job-node-0-0"]},
        },
        "audiences": [AUDIENCE] if audiences is None else audiences,
    }


def test_the_review_asks_for_the_audience_and_a_valid_token_names_its_user() -> None:
    reviewer = FakeReviewer(authenticated())
    result = TokenReviewAuthenticator(reviewer).authenticate(TOKEN, [AUDIENCE])
    assert reviewer.reviews == [
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": TOKEN, "audiences": [AUDIENCE]},
        }
    ]
    assert result.authenticated
    assert result.user.username == "system:serviceaccount:ns:default"
    assert result.user.service_account() == ("ns", "default")
    assert result.user.extra == {"authentication.kubernetes.io/pod-name": ("job-node-0-0",)}


def test_an_empty_token_is_not_reviewed() -> None:
    reviewer = FakeReviewer(authenticated())
    result = TokenReviewAuthenticator(reviewer).authenticate("", [AUDIENCE])
    assert not result.authenticated
    assert reviewer.reviews == []


def test_a_token_the_api_server_rejects_is_not_authenticated_with_its_reason() -> None:
    reviewer = FakeReviewer({"authenticated": False, "error": "token audiences mismatch", "user": {}})
    result = TokenReviewAuthenticator(reviewer).authenticate(TOKEN, [AUDIENCE])
    assert not result.authenticated
    assert result.error == "token audiences mismatch"


def test_an_authenticator_that_ignores_audiences_is_refused() -> None:
    # TokenReview contract: authenticated with no status.audiences means "valid for the API server", not
    # for the audience asked.
    reviewer = FakeReviewer(authenticated(audiences=[]))
    result = TokenReviewAuthenticator(reviewer).authenticate(TOKEN, [AUDIENCE])
    assert not result.authenticated
    assert "audiences" in result.error


def test_another_audience_in_the_answer_is_refused() -> None:
    reviewer = FakeReviewer(authenticated(audiences=["https://kubernetes.default.svc"]))
    assert not TokenReviewAuthenticator(reviewer).authenticate(TOKEN, [AUDIENCE]).authenticated


def test_an_answer_without_status_is_not_authenticated() -> None:
    assert not TokenReviewAuthenticator(FakeReviewer(None)).authenticate(TOKEN, [AUDIENCE]).authenticated


@pytest.mark.parametrize(
    "error",
    [
        Forbidden(f"tokenreviews is forbidden ({TOKEN})", status=403, reason="Forbidden"),
        ConnectionFailed(f"connection refused {TOKEN}"),
    ],
    ids=["the API server refuses the review", "the API server is unreachable"],
)
def test_a_review_that_cannot_be_made_raises_without_the_token(error: Exception) -> None:
    with pytest.raises(AuthenticationError) as caught:
        TokenReviewAuthenticator(FakeReviewer(error=error)).authenticate(TOKEN, [AUDIENCE])
    assert TOKEN not in str(caught.value)
    assert caught.value.__cause__ is error


@pytest.mark.parametrize(
    ("username", "account"),
    [
        ("system:serviceaccount:ns:default", ("ns", "default")),
        ("system:serviceaccount:ns", None),
        ("system:serviceaccount::default", None),
        ("system:serviceaccount:ns:a:b", None),
        ("admin", None),
        ("", None),
    ],
)
def test_service_account_of_a_username(username: str, account: tuple[str, str] | None) -> None:
    assert UserInfo(username=username).service_account() == account
