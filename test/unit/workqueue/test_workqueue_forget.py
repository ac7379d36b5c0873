"""``forget``: the caller's "this item succeeded (or was given up on)"; one case per rule.

client-go `TypedRateLimiter.Forget` and `TypedRateLimitingInterface.Forget`: forgetting an item clears that
item's failure count, and only that item's; the next failure starts the backoff over; a limiter built from
others forgets in all of them; the queue's ``forget`` clears the backoff but does not take the item out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.clock import FakeClock
from controller.workqueue import (
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimitingQueue,
)
from controller.workqueue.rate_limiters import WithMaxWaitRateLimiter

MS = 0.001

PER_ITEM: dict[str, tuple[Callable[[], Any], float]] = {
    # limiter factory, and its first delay
    "exponential": (lambda: ItemExponentialFailureRateLimiter[str](1 * MS, 10.0), 1 * MS),
    "fast-slow": (lambda: ItemFastSlowRateLimiter[str](5 * MS, 10.0, 1), 5 * MS),
}


@pytest.fixture(params=sorted(PER_ITEM))
def per_item(request: pytest.FixtureRequest) -> tuple[Any, float]:
    make, first = PER_ITEM[request.param]
    return make(), first


def test_forget_clears_the_failures_of_that_item_only(per_item: tuple[Any, float]) -> None:
    limiter, _ = per_item
    for _ in range(3):
        limiter.when("forgotten")
    for _ in range(2):
        limiter.when("kept")
    limiter.forget("forgotten")
    assert limiter.num_requeues("forgotten") == 0
    assert limiter.num_requeues("kept") == 2


def test_after_forget_the_next_failure_waits_the_first_delay_again(per_item: tuple[Any, float]) -> None:
    limiter, first = per_item
    for _ in range(4):
        limiter.when("x")
    assert limiter.when("x") > first
    limiter.forget("x")
    assert limiter.when("x") == first
    assert limiter.num_requeues("x") == 1


def test_an_item_that_was_not_forgotten_keeps_its_backoff(per_item: tuple[Any, float]) -> None:
    limiter, first = per_item
    for _ in range(4):
        limiter.when("kept")
    limiter.forget("other")
    assert limiter.when("kept") > first


def test_forgetting_an_unknown_item_is_harmless(per_item: tuple[Any, float]) -> None:
    limiter, first = per_item
    limiter.forget("never seen")
    limiter.forget("never seen")
    assert limiter.num_requeues("never seen") == 0
    assert limiter.when("never seen") == first


def test_max_of_forgets_in_every_limiter() -> None:
    fast_slow = ItemFastSlowRateLimiter[str](5 * MS, 3.0, 3)
    exponential = ItemExponentialFailureRateLimiter[str](1 * MS, 1.0)
    limiter = MaxOfRateLimiter[str](fast_slow, exponential)
    for _ in range(5):
        limiter.when("x")
    limiter.forget("x")
    assert (fast_slow.num_requeues("x"), exponential.num_requeues("x")) == (0, 0)


def test_with_max_wait_forgets_in_the_limiter_it_caps() -> None:
    inner = ItemExponentialFailureRateLimiter[str](1 * MS, 10.0)
    limiter = WithMaxWaitRateLimiter[str](inner, 2 * MS)
    for _ in range(5):
        limiter.when("x")
    limiter.forget("x")
    assert inner.num_requeues("x") == 0
    assert limiter.when("x") == 1 * MS


def test_the_queue_forget_clears_one_items_backoff_and_leaves_the_item_queued(
    clock: FakeClock, wait_until: Any
) -> None:
    with RateLimitingQueue[str](ItemExponentialFailureRateLimiter(1.0, 100.0), clock=clock) as q:
        for _ in range(3):
            q.add_rate_limited("forgotten")  # counted three times; waits 1 s (the earliest ready time wins)
            q.add_rate_limited("kept")
        q.forget("forgotten")
        assert (q.num_requeues("forgotten"), q.num_requeues("kept")) == (0, 3)
        # Forgetting is about the backoff only: the waiting item still arrives.
        clock.step(1.0)
        wait_until(lambda: len(q) == 2)
        got = {q.get()[0], q.get()[0]}
        assert got == {"forgotten", "kept"}
        q.done("forgotten")
        q.done("kept")
