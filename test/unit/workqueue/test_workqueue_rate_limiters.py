"""controller.workqueue rate limiters: client-go's default_rate_limiters_test.go, and x/time/rate's
reservation semantics for the bucket."""

from __future__ import annotations

import math
from typing import Any

import pytest

from controller.clock import FakeClock
from controller.workqueue import (
    INF_DURATION,
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
    default_item_based_rate_limiter,
)

MS = 0.001


def test_item_exponential_doubles_per_failure_and_forget_resets() -> None:
    # upstream: TestItemExponentialFailureRateLimiter
    limiter = ItemExponentialFailureRateLimiter[str](1 * MS, 1.0)
    assert [limiter.when("one") for _ in range(5)] == [1 * MS, 2 * MS, 4 * MS, 8 * MS, 16 * MS]
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two") for _ in range(2)] == [1 * MS, 2 * MS]
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 1 * MS


def test_item_exponential_never_overflows_and_caps_at_max() -> None:
    # upstream: TestItemExponentialFailureRateLimiterOverFlow
    limiter = ItemExponentialFailureRateLimiter[str](1 * MS, 1000.0)
    for _ in range(5):
        limiter.when("one")
    assert limiter.when("one") == 32 * MS
    for _ in range(1000):
        limiter.when("overflow1")
    assert limiter.when("overflow1") == 1000.0

    limiter = ItemExponentialFailureRateLimiter[str](60.0, 1000 * 3600.0)
    for _ in range(2):
        limiter.when("two")
    assert limiter.when("two") == 4 * 60.0
    for _ in range(1000):
        limiter.when("overflow2")
    assert limiter.when("overflow2") == 1000 * 3600.0


def test_item_exponential_caps_a_delay_beyond_gos_largest_duration_at_max() -> None:
    # A max above time.Duration's range is still never exceeded by an overflowing backoff.
    limiter = ItemExponentialFailureRateLimiter[str](1.0, math.inf)
    for _ in range(70):
        limiter.when("x")
    assert limiter.when("x") == math.inf


def test_item_fast_slow_is_fast_for_the_first_attempts_then_slow() -> None:
    # upstream: TestItemFastSlowRateLimiter
    limiter = ItemFastSlowRateLimiter[str](5 * MS, 10.0, 3)
    assert [limiter.when("one") for _ in range(5)] == [5 * MS, 5 * MS, 5 * MS, 10.0, 10.0]
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two") for _ in range(2)] == [5 * MS, 5 * MS]
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 5 * MS


def test_max_of_returns_the_longest_delay_and_forgets_everywhere() -> None:
    # upstream: TestMaxOfRateLimiter
    limiter = MaxOfRateLimiter[str](
        ItemFastSlowRateLimiter(5 * MS, 3.0, 3),
        ItemExponentialFailureRateLimiter(1 * MS, 1.0),
    )
    assert [limiter.when("one") for _ in range(5)] == [5 * MS, 5 * MS, 5 * MS, 3.0, 3.0]
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two") for _ in range(2)] == [5 * MS, 5 * MS]
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 5 * MS


class StepRateLimiter:
    """``base`` for the first ``threshold`` calls (any item), ``max`` after (upstream's test limiter)."""

    def __init__(self, base: float, max_delay: float, threshold: int) -> None:
        self.count, self.base, self.max_delay, self.threshold = 0, base, max_delay, threshold

    def when(self, item: Any) -> float:
        self.count += 1
        return self.base if self.count <= self.threshold else self.max_delay

    def num_requeues(self, item: Any) -> int:
        return 0

    def forget(self, item: Any) -> None:
        pass


def test_with_max_wait_caps_the_inner_delay() -> None:
    # upstream: TestWithMaxWaitRateLimiter
    limiter = WithMaxWaitRateLimiter[int](StepRateLimiter(5 * MS, 1000.0, 100), 500.0)
    assert {limiter.when(i) for i in range(100)} == {5 * MS}
    assert {limiter.when(i) for i in range(100, 200)} == {500.0}


# --- the token bucket (golang.org/x/time/rate Reserve().Delay()) -------------------------------------------


def test_bucket_lets_a_burst_through_then_spaces_reservations_by_one_over_qps(clock: FakeClock) -> None:
    limiter = BucketRateLimiter[str](qps=10, burst=3, clock=clock)
    assert [limiter.when("x") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.when("x") == pytest.approx(0.1)
    assert limiter.when("y") == pytest.approx(0.2)  # every item shares the bucket
    assert limiter.when("z") == pytest.approx(0.3)


def test_bucket_refills_at_qps_up_to_burst(clock: FakeClock) -> None:
    limiter = BucketRateLimiter[str](qps=10, burst=3, clock=clock)
    for _ in range(3):
        limiter.when("x")
    clock.step(0.1)  # one token back
    assert limiter.when("x") == 0.0
    assert limiter.when("x") == pytest.approx(0.1)
    clock.step(60.0)  # refills to burst, not beyond
    assert [limiter.when("x") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.when("x") == pytest.approx(0.1)


def test_bucket_reservations_made_while_waiting_queue_up(clock: FakeClock) -> None:
    limiter = BucketRateLimiter[str](qps=2, burst=1, clock=clock)
    assert limiter.when("x") == 0.0
    assert limiter.when("x") == pytest.approx(0.5)
    clock.step(0.25)
    assert limiter.when("x") == pytest.approx(0.75)  # behind the reservation still waiting


def test_bucket_tracks_no_item(clock: FakeClock) -> None:
    limiter = BucketRateLimiter[str](qps=1, burst=1, clock=clock)
    limiter.when("x")
    limiter.when("x")
    assert limiter.num_requeues("x") == 0
    limiter.forget("x")
    assert limiter.when("x") == pytest.approx(2.0)  # forget does not give tokens back


def test_bucket_with_infinite_qps_never_waits(clock: FakeClock) -> None:
    limiter = BucketRateLimiter[str](qps=math.inf, burst=0, clock=clock)
    assert {limiter.when("x") for _ in range(1000)} == {0.0}


@pytest.mark.parametrize(("qps", "burst"), [(10.0, 0), (0.0, 1)], ids=["no-burst", "no-refill"])
def test_bucket_reservation_that_can_never_act_waits_go_infinite_duration(
    clock: FakeClock, qps: float, burst: int
) -> None:
    limiter = BucketRateLimiter[str](qps=qps, burst=burst, clock=clock)
    delays = [limiter.when("x") for _ in range(2)]
    assert delays[-1] == INF_DURATION


# --- defaults --------------------------------------------------------------------------------------------


def test_default_controller_rate_limiter_is_item_exponential_5ms_and_bucket_10qps_burst_100(
    clock: FakeClock,
) -> None:
    limiter = default_controller_rate_limiter(clock=clock)
    assert [limiter.when("a") for _ in range(3)] == [5 * MS, 10 * MS, 20 * MS]
    for i in range(97):  # the burst of 100 is used up by now
        limiter.when(f"item-{i}")
    assert limiter.when("fresh") == pytest.approx(0.1)  # the bucket, not the item's 5 ms
    assert limiter.num_requeues("a") == 3
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    for _ in range(30):
        limiter.when("b")
    assert limiter.when("b") == 1000.0


def test_default_item_based_rate_limiter_starts_at_1ms_and_caps_at_1000s() -> None:
    limiter = default_item_based_rate_limiter()
    assert [limiter.when("a") for _ in range(3)] == [1 * MS, 2 * MS, 4 * MS]
    for _ in range(40):
        limiter.when("a")
    assert limiter.when("a") == 1000.0
