"""controller.serving.authentication.CachingAuthenticator on a fake clock: k8s.io/apiserver's token cache
(pkg/authentication/token/cache/cached_token_authenticator_test.go) as behaviour: answers reused for their
TTL, yes and no alike, per token and audiences; failures to ask not cached; bounded; never past the token's
own expiry; tokens kept only as digests."""

from __future__ import annotations

import base64
import threading
from collections.abc import Sequence
from datetime import UTC, datetime

import orjson
import pytest

from controller.clock import FakeClock
from controller.serving.authentication import (
    Authentication,
    AuthenticationError,
    CacheStatistics,
    CachingAuthenticator,
    ExpiringCache,
    UserInfo,
    token_expiry,
)

AUDIENCE = "trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/job/status"
OTHER_AUDIENCE = "trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/other/status"
WALL = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class FakeAuthenticator:
    """Valid tokens are those in ``valid``, for AUDIENCE only; ``down`` makes every call raise. Counts
    calls. Does not model signatures or expiry: the test says what is valid."""

    def __init__(self, *valid: str) -> None:
        self.valid = set(valid)
        self.down = False
        self.calls = 0
        self._lock = threading.Lock()

    def authenticate(self, token: str, audiences: Sequence[str]) -> Authentication:
        with self._lock:
            self.calls += 1
        if self.down:
            raise AuthenticationError("TokenReview failed: 503 ServiceUnavailable")
        if token in self.valid and AUDIENCE in audiences:
            user = UserInfo(username="system:serviceaccount:ns:default")
            return Authentication(authenticated=True, user=user, audiences=(AUDIENCE,))
        return Authentication(authenticated=False, error="invalid bearer token")


def jwt(claims: dict[str, object]) -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(value)).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(wall=WALL)


def test_an_authenticated_answer_is_reused_until_its_ttl(clock: FakeClock) -> None:
    delegate = FakeAuthenticator("good")
    cache = CachingAuthenticator(delegate, success_ttl=10.0, clock=clock)
    assert cache.authenticate("good", [AUDIENCE]).authenticated
    clock.step(9.9)
    assert cache.authenticate("good", [AUDIENCE]).user.username == "system:serviceaccount:ns:default"
    assert delegate.calls == 1
    clock.step(0.1)
    assert cache.authenticate("good", [AUDIENCE]).authenticated
    assert delegate.calls == 2
    assert cache.statistics().hits == 1 and cache.statistics().misses == 2


def test_a_refusal_is_reused_for_the_failure_ttl_so_a_bad_token_costs_one_review(clock: FakeClock) -> None:
    delegate = FakeAuthenticator()
    cache = CachingAuthenticator(delegate, failure_ttl=5.0, clock=clock)
    for _ in range(100):
        assert not cache.authenticate("forged", [AUDIENCE]).authenticated
    assert delegate.calls == 1
    delegate.valid.add("forged")  # e.g. its pod now exists: the refusal is kept only for its TTL
    clock.step(5.0)
    assert cache.authenticate("forged", [AUDIENCE]).authenticated
    assert delegate.calls == 2


def test_answers_are_per_token_and_per_audiences(clock: FakeClock) -> None:
    delegate = FakeAuthenticator("good")
    cache = CachingAuthenticator(delegate, clock=clock)
    assert cache.authenticate("good", [AUDIENCE]).authenticated
    # The same token for another TrainJob's audience is its own question, and refused.
    assert not cache.authenticate("good", [OTHER_AUDIENCE]).authenticated
    assert not cache.authenticate("other", [AUDIENCE]).authenticated
    assert cache.authenticate("good", [AUDIENCE]).authenticated
    assert delegate.calls == 3
    assert cache.authenticate("good", [AUDIENCE, AUDIENCE]).authenticated  # a set: same question
    assert delegate.calls == 3


def test_a_review_that_could_not_be_made_is_not_cached(clock: FakeClock) -> None:
    delegate = FakeAuthenticator("good")
    cache = CachingAuthenticator(delegate, clock=clock)
    delegate.down = True
    with pytest.raises(AuthenticationError):
        cache.authenticate("good", [AUDIENCE])
    delegate.down = False
    assert cache.authenticate("good", [AUDIENCE]).authenticated
    assert delegate.calls == 2


def test_an_authenticated_answer_never_outlives_the_tokens_expiry(clock: FakeClock) -> None:
    delegate = FakeAuthenticator()
    token = jwt({"exp": int(WALL.timestamp()) + 3, "aud": [AUDIENCE]})
    delegate.valid.add(token)
    cache = CachingAuthenticator(delegate, success_ttl=10.0, clock=clock)
    assert cache.authenticate(token, [AUDIENCE]).authenticated
    clock.step(2.9)
    cache.authenticate(token, [AUDIENCE])
    assert delegate.calls == 1
    clock.step(0.1)  # the token has expired: the API server is asked again (and would refuse it)
    delegate.valid.discard(token)
    assert not cache.authenticate(token, [AUDIENCE]).authenticated
    assert delegate.calls == 2


def test_an_already_expired_token_that_the_server_accepts_is_not_cached(clock: FakeClock) -> None:
    # (clock skew between this process and the API server)
    token = jwt({"exp": int(WALL.timestamp()) - 1})
    delegate = FakeAuthenticator(token)
    cache = CachingAuthenticator(delegate, clock=clock)
    cache.authenticate(token, [AUDIENCE])
    cache.authenticate(token, [AUDIENCE])
    assert delegate.calls == 2
    assert cache.statistics().entries == 0


@pytest.mark.parametrize(
    ("token", "expiry"),
    [
        (jwt({"exp": 1767323045}), 1767323045.0),
        (jwt({"exp": 1.5}), 1.5),
        (jwt({"exp": "soon"}), None),
        (jwt({"exp": True}), None),
        (jwt({}), None),
        ("a.b.c", None),
        ("not-a-jwt", None),
        ("a." + base64.urlsafe_b64encode(b"[1]").decode() + ".c", None),
        ("", None),
    ],
    ids=[
        "integer",
        "fraction",
        "a string",
        "a boolean",
        "none",
        "not base64",
        "no dots",
        "not an object",
        "empty",
    ],
)
def test_token_expiry_reads_a_jwts_exp_claim_and_nothing_else(token: str, expiry: float | None) -> None:
    assert token_expiry(token) == expiry


def test_the_cache_is_bounded_and_evicts_the_least_recently_used(clock: FakeClock) -> None:
    delegate = FakeAuthenticator("keep")
    cache = CachingAuthenticator(delegate, max_entries=8, clock=clock)
    cache.authenticate("keep", [AUDIENCE])
    for i in range(100):  # made-up tokens cannot grow the cache
        cache.authenticate(f"made-up-{i}", [AUDIENCE])
        cache.authenticate("keep", [AUDIENCE])  # used: stays
    assert cache.statistics().entries == 8
    calls = delegate.calls
    assert cache.authenticate("keep", [AUDIENCE]).authenticated
    assert delegate.calls == calls
    cache.authenticate("made-up-0", [AUDIENCE])  # long evicted: asked again
    assert delegate.calls == calls + 1


def test_tokens_are_kept_only_as_digests(clock: FakeClock) -> None:
    secret = "very-secret-token-value"
    cache = CachingAuthenticator(FakeAuthenticator(secret), clock=clock)
    cache.authenticate(secret, [AUDIENCE])
    keys = cache._cache.keys()  # the property is about what is stored
    assert len(keys) == 1 and isinstance(keys[0], bytes) and len(keys[0]) == 32
    assert secret.encode() not in keys[0]
    assert secret not in repr(cache)


def test_an_empty_token_is_not_cached(clock: FakeClock) -> None:
    delegate = FakeAuthenticator()
    cache = CachingAuthenticator(delegate, clock=clock)
    cache.authenticate("", [AUDIENCE])
    cache.authenticate("", [AUDIENCE])
    assert delegate.calls == 2 and cache.statistics().entries == 0


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        CachingAuthenticator(FakeAuthenticator(), max_entries=0)
    with pytest.raises(ValueError, match="ttl"):
        CachingAuthenticator(FakeAuthenticator(), success_ttl=-1)


def test_the_expiring_cache_keeps_each_value_for_its_own_ttl_and_evicts_the_least_recently_used(
    clock: FakeClock,
) -> None:
    cache: ExpiringCache[str, int] = ExpiringCache(2, clock)
    cache.put("a", 1, 10)
    cache.put("b", 2, 5)
    assert cache.get("a") == 1  # used: "b" is now the least recently used
    cache.put("c", 3, 10)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    cache.put("c", 4, 0)  # a ttl of 0 keeps nothing and drops the older value
    assert cache.get("c") is None
    clock.step(9.9)
    assert cache.get("a") == 1
    clock.step(0.1)
    assert cache.get("a") is None and len(cache) == 0
    assert cache.statistics() == CacheStatistics(hits=4, misses=3, entries=0)
    with pytest.raises(ValueError, match="max_entries"):
        ExpiringCache(0, clock)
