"""controller.workqueue.RateLimitingQueue: client-go's rate_limiting_queue_test.go as behaviour."""

from __future__ import annotations

from typing import Any

import pytest

from controller.clock import FakeClock
from controller.workqueue import ItemExponentialFailureRateLimiter, RateLimitingQueue


def waits_for(q: RateLimitingQueue[Any], clock: FakeClock, item: Any) -> float:
    """How long ``item`` still waits in ``q``'s delay heap (upstream reads its waitingForAdd channel)."""
    return q._ready_at[item] - clock.monotonic()


def test_add_rate_limited_waits_the_limiters_delay_and_forget_resets_it(
    clock: FakeClock, wait_until: Any
) -> None:
    # upstream: TestRateLimitingQueue
    with RateLimitingQueue[str](ItemExponentialFailureRateLimiter(0.001, 1.0), clock=clock) as q:

        def fire(item: str) -> None:
            """Let ``item`` become ready and process it, so its next add is not collapsed into this one."""
            clock.step(1.0)
            wait_until(lambda: len(q) == 1)
            assert q.get() == (item, False)
            q.done(item)

        q.add_rate_limited("one")
        assert waits_for(q, clock, "one") == pytest.approx(0.001)
        fire("one")
        q.add_rate_limited("one")
        assert waits_for(q, clock, "one") == pytest.approx(0.002)
        assert q.num_requeues("one") == 2
        fire("one")

        q.add_rate_limited("two")
        assert waits_for(q, clock, "two") == pytest.approx(0.001)
        fire("two")
        q.add_rate_limited("two")
        assert waits_for(q, clock, "two") == pytest.approx(0.002)
        fire("two")

        q.forget("one")
        assert q.num_requeues("one") == 0
        q.add_rate_limited("one")
        assert waits_for(q, clock, "one") == pytest.approx(0.001)


def test_a_rate_limited_item_arrives_after_its_backoff(clock: FakeClock, wait_until: Any) -> None:
    with RateLimitingQueue[str](ItemExponentialFailureRateLimiter(1.0, 100.0), clock=clock) as q:
        q.add_rate_limited("one")  # 1 s
        q.add_rate_limited("one")  # 2 s, collapsed: the earlier ready time wins
        clock.step(0.5)
        assert len(q) == 0
        clock.step(0.5)
        wait_until(lambda: len(q) == 1)
        assert q.get() == ("one", False)
        q.done("one")
        assert q.num_requeues("one") == 2


def test_the_default_rate_limiter_paces_retries_with_a_bucket_on_the_queues_clock(clock: FakeClock) -> None:
    with RateLimitingQueue[str](clock=clock) as q:
        for i in range(100):  # the burst
            q.add_rate_limited(f"item-{i}")
            assert waits_for(q, clock, f"item-{i}") == pytest.approx(0.005)
        q.add_rate_limited("item-100")
        # 10 qps on the fake clock: exactly 100 ms, however long the loop above took in real time
        assert waits_for(q, clock, "item-100") == pytest.approx(0.1)
