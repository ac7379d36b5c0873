"""controller.workqueue.PriorityQueue: controller-runtime's priorityqueue_test.go as behaviour.

Depth and adds are asserted on the Prometheus exposition, where upstream reads a fake metrics provider.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.clock import FakeClock
from controller.workqueue import (
    LOW_PRIORITY,
    ItemExponentialFailureRateLimiter,
    PriorityInterface,
    PriorityQueue,
    PriorityQueueWrapper,
    RateLimitingQueue,
)


class Harness:
    """A named priority queue on a fake clock, with its metrics read back from the exposition."""

    def __init__(self, name: str, clock: FakeClock, sample: Callable[..., float]) -> None:
        self.name = name
        self.clock = clock
        self._sample = sample
        self.q = PriorityQueue[str](name=name, clock=clock)

    def depth(self, *priorities: int) -> dict[int, float]:
        return {p: self._sample("workqueue_depth", self.name, priority=str(p)) for p in priorities}

    @property
    def adds(self) -> float:
        return self._sample("workqueue_adds_total", self.name)

    @property
    def retries(self) -> float:
        return self._sample("workqueue_retries_total", self.name)

    def step_until_promoted(self, seconds: float, wait_until: Any) -> None:
        """Step the clock; return once the delay thread has made ready every item due by then.

        The delay thread promotes due items in one pass under the queue's lock, so "no live waiting entry
        is due" means the pass for the new time is complete (what upstream gets from ``synctest.Wait``).
        """
        self.clock.step(seconds)
        wait_until(lambda: nothing_due(self.q))


def nothing_due(q: PriorityQueue[str]) -> bool:
    with q._lock:
        now = q._clock.monotonic()
        return all(entry.gen != gen or ready_at > now for ready_at, _, _, gen, entry in q._waiting)


@pytest.fixture
def pq(unique_name: Any, clock: FakeClock, sample: Any) -> Iterator[Harness]:
    harness = Harness(unique_name(), clock, sample)
    yield harness
    harness.q.shut_down()


# --- ordering and dedup ------------------------------------------------------------------------------------


def test_returns_an_item(pq: Harness) -> None:
    # upstream: "returns an item"
    pq.q.add_with_opts("foo")
    assert pq.q.get_with_priority() == ("foo", 0, False)
    assert pq.depth(0) == {0: 0}
    assert pq.adds == 1
    assert pq.retries == 0


def test_returns_items_in_order(pq: Harness) -> None:
    # upstream: "returns items in order"
    pq.q.add_with_opts("foo")
    pq.q.add_with_opts("bar")
    assert pq.q.get_with_priority()[0] == "foo"
    assert pq.q.get_with_priority()[0] == "bar"
    assert pq.depth(0) == {0: 0}
    assert pq.adds == 2


def test_does_not_return_an_item_that_is_handed_out(pq: Harness) -> None:
    # upstream: "doesn't return an item that is currently locked"
    pq.q.add_with_opts("foo")
    assert pq.q.get_with_priority()[0] == "foo"
    pq.q.add_with_opts("foo")
    pq.q.add_with_opts("bar")
    assert pq.q.get_with_priority()[0] == "bar"
    assert pq.depth(0) == {0: 1}
    assert pq.adds == 3


def test_returns_an_item_as_soon_as_it_is_done(pq: Harness) -> None:
    # upstream: "returns an item as soon as its unlocked"
    pq.q.add_with_opts("foo")
    assert pq.q.get_with_priority()[0] == "foo"
    pq.q.add_with_opts("foo")
    pq.q.add_with_opts("bar")
    assert pq.q.get_with_priority()[0] == "bar"
    pq.q.add_with_opts("baz")
    pq.q.done("foo")
    assert pq.q.get_with_priority()[0] == "foo"  # it was added before baz
    assert pq.depth(0) == {0: 1}
    assert pq.adds == 4


def test_deduplicates_items(pq: Harness) -> None:
    # upstream: "de-duplicates items"
    pq.q.add_with_opts("foo")
    pq.q.add_with_opts("foo")
    assert len(pq.q) == 1
    assert pq.depth(0) == {0: 1}
    assert pq.adds == 1


def test_enqueues_an_item_that_is_handed_out(pq: Harness) -> None:
    # upstream: "enqueues a locked item"
    pq.q.add_with_opts("foo")
    assert len(pq.q) == 1
    assert pq.q.get_with_priority() == ("foo", 0, False)
    pq.q.add_with_opts("foo")
    assert len(pq.q) == 1
    pq.q.done("foo")
    assert pq.q.get_with_priority() == ("foo", 0, False)
    assert pq.depth(0) == {0: 0}
    assert pq.adds == 2


def test_retains_the_highest_priority(pq: Harness) -> None:
    # upstream: "retains the highest priority"
    pq.q.add_with_opts("foo", priority=1)
    pq.q.add_with_opts("foo", priority=2)
    assert pq.q.get_with_priority() == ("foo", 2, False)
    assert len(pq.q) == 0
    assert pq.depth(1, 2) == {1: 0, 2: 0}
    assert pq.adds == 1


def test_will_not_decrease_the_priority(pq: Harness) -> None:
    # upstream: "will not decrease the priority"
    pq.q.add_with_opts("foo", priority=2)
    pq.q.add_with_opts("foo", priority=1)
    assert pq.q.get_with_priority() == ("foo", 2, False)
    assert len(pq.q) == 0
    assert pq.depth(2) == {2: 0}
    assert pq.adds == 1


def test_an_item_moves_ahead_when_its_priority_increases(pq: Harness) -> None:
    # upstream: "gets pushed to the front if the priority increases"
    for item in ["foo", "bar", "baz"]:
        pq.q.add_with_opts(item)
    pq.q.add_with_opts("baz", priority=1)
    assert pq.q.get_with_priority() == ("baz", 1, False)
    assert len(pq.q) == 2
    assert pq.depth(0, 1) == {0: 2, 1: 0}
    assert pq.adds == 3


def test_retains_the_shortest_delay(pq: Harness) -> None:
    # upstream: "retains the lowest after duration"
    pq.q.add_with_opts("foo", after=0)
    pq.q.add_with_opts("foo", after=3600.0)
    assert pq.q.get_with_priority() == ("foo", 0, False)
    assert len(pq.q) == 0
    assert pq.depth(0) == {0: 0}
    assert pq.adds == 1


def test_len_does_not_include_items_that_are_not_ready(pq: Harness) -> None:
    # upstream: "doesn't include non-ready items in Len()"
    pq.q.add_with_opts("foo", after=60.0)
    pq.q.add_with_opts("baz")
    pq.q.add_with_opts("bar", after=60.0)
    pq.q.add_with_opts("bal")
    assert len(pq.q) == 2
    assert pq.depth(0) == {0: 2}


def test_get_after_shut_down_reports_shutdown_even_with_items_queued(pq: Harness) -> None:
    # upstream: "Get from priority queue might get stuck when the priority queue is shut down" (#3239)
    pq.q.add("baz")
    pq.q.shut_down()
    pq.q.add_with_opts("foo", after=1.0)
    assert pq.q.get_with_priority() == (None, 0, True)
    assert pq.q.get_with_priority() == (None, 0, True)
    assert pq.q.get() == (None, True)


def test_an_item_added_with_after_then_without_counts_once_in_depth(pq: Harness) -> None:
    # upstream: "updates metrics correctly for an item that gets initially added with after and then without"
    pq.q.add_with_opts("foo", after=3600.0)
    assert len(pq.q) == 0
    assert pq.depth(0) == {0: 0}
    pq.q.add_with_opts("foo")
    assert len(pq.q) == 1
    assert pq.depth(0) == {0: 1}
    assert pq.q.get() == ("foo", False)
    assert len(pq.q) == 0
    assert pq.depth(0) == {0: 0}


def test_an_item_with_after_readded_with_higher_priority_and_no_after_counts_under_the_new_priority(
    pq: Harness,
) -> None:
    # upstream: "updates metrics correctly when an item with after is re-added with higher priority and no
    # after"
    pq.q.add_with_opts("foo", after=3600.0, priority=0)
    assert len(pq.q) == 0
    pq.q.add_with_opts("foo", priority=1)
    assert len(pq.q) == 1
    assert pq.depth(0, 1) == {0: 0, 1: 1}
    assert pq.q.get_with_priority() == ("foo", 1, False)
    assert pq.depth(0, 1) == {0: 0, 1: 0}


def test_an_item_whose_priority_rises_goes_to_the_back_of_its_new_priority(pq: Harness) -> None:
    # upstream: "follows FIFO order in the new priority queue when item priority changes"
    pq.q.add_with_opts("foo", priority=0)
    pq.q.add_with_opts("bar", priority=1)
    pq.q.add_with_opts("foo", priority=1)
    assert len(pq.q) == 2
    assert pq.q.get_with_priority() == ("bar", 1, False)
    assert pq.q.get_with_priority() == ("foo", 1, False)
    assert len(pq.q) == 0


def test_low_priority_initial_list_events_yield_to_real_changes(pq: Harness) -> None:
    for i in range(3):
        pq.q.add_with_opts(f"listed-{i}", priority=LOW_PRIORITY)
    pq.q.add("changed")
    assert pq.q.get_with_priority() == ("changed", 0, False)
    assert [pq.q.get_with_priority()[0] for _ in range(3)] == ["listed-0", "listed-1", "listed-2"]


def test_drains_many_items_with_many_workers(pq: Harness) -> None:
    # upstream: "returns many items" (fewer rounds and workers; delayed items are made ready by the clock)
    rng = random.Random(7)
    for _ in range(5):
        for i in range(200):
            roll = rng.randrange(100)
            if roll < 10:
                pq.q.add_with_opts(f"foo{i}", after=roll / 1000)
            else:
                pq.q.add_with_opts(f"foo{i}", priority=roll)
        pq.clock.step(1.0)

        def work() -> None:
            for _ in range(20):
                item, _, _ = pq.q.get_with_priority()
                assert item is not None
                pq.q.done(item)

        workers = [threading.Thread(target=work, name=f"test/worker-{i}") for i in range(10)]
        for t in workers:
            t.start()
        for t in workers:
            t.join(5)
            assert not t.is_alive()


# --- delays -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("after", [-1.0, 0.0, 1.0])
def test_high_priority_items_come_before_low_priority_ones_in_fifo_order(
    pq: Harness, after: float, wait_until: Any
) -> None:
    # upstream: TestHighPriorityItemsAreReturnedBeforeLowPriorityItemMultipleTimes
    per_priority = 200
    priorities = {"high": 10, "upperMiddle": 5, "middle": 0, "lowMiddle": -5, "low": -10}
    for i in range(per_priority):
        for label, priority in priorities.items():
            pq.q.add_with_opts(f"{label}-{i}", priority=priority, after=after)
    if after > 0:
        pq.step_until_promoted(after, wait_until)
    for label, priority in priorities.items():
        for i in range(per_priority):
            assert pq.q.get_with_priority() == (f"{label}-{i}", priority, False)
    assert pq.depth(*priorities.values()) == dict.fromkeys(priorities.values(), 0.0)
    assert pq.retries == (per_priority * 5 if after > 0 else 0)
    assert pq.adds == per_priority * 5


def test_an_item_is_only_returned_after_its_delay(pq: Harness, spawn: Any, wait_until: Any) -> None:
    # upstream: TestItemIsOnlyReturnedAfterAfterHasPassed
    getter = spawn(pq.q.get_with_priority, name="test/getter")
    pq.q.add_with_opts("foo", after=1.0)
    assert len(pq.q) == 0
    assert not getter.finished.is_set()
    pq.clock.step(1.0)
    assert getter.join() == ("foo", 0, False)
    assert pq.depth(0) == {0: 0}
    assert pq.adds == 1
    assert pq.retries == 1


def test_a_high_priority_item_that_became_ready_comes_before_a_low_priority_one(
    pq: Harness, wait_until: Any
) -> None:
    # upstream: TestHighPriorityItemThatBecameReadyIsReturnedBeforeLowPriorityItem
    pq.q.add_with_opts("foo", priority=-100)
    pq.q.add_with_opts("prio", priority=0, after=1.0)
    pq.step_until_promoted(1.0, wait_until)
    assert pq.q.get_with_priority() == ("prio", 0, False)
    assert pq.depth(-100, 0) == {-100: 1, 0: 0}


def test_an_item_is_returned_as_soon_as_possible(
    pq: Harness, spawn: Any, blocked_waiters: Any, wait_until: Any
) -> None:
    # upstream: TestItemIsReturnedAsSoonAsPossible
    getter = spawn(pq.q.get_with_priority, name="test/getter")
    wait_until(lambda: blocked_waiters(pq.q._not_empty) == 1)
    pq.q.add_with_opts("foo")
    assert getter.join() == ("foo", 0, False)
    assert pq.depth(0) == {0: 0}
    assert pq.adds == 1


def test_a_waiting_item_is_returned_right_after_it_is_readded_without_delay(
    pq: Harness, spawn: Any, blocked_waiters: Any, wait_until: Any
) -> None:
    # upstream: TestWaitingItemIsReturnedRightAfterReadWithoutAfter
    getter = spawn(pq.q.get_with_priority, name="test/getter")
    wait_until(lambda: blocked_waiters(pq.q._not_empty) == 1)
    pq.q.add_with_opts("foo", after=60.0)
    assert not getter.finished.is_set()
    pq.q.add_with_opts("foo")
    assert getter.join() == ("foo", 0, False)
    assert pq.depth(0) == {0: 0}
    assert pq.adds == 1


def test_items_with_delays_are_returned_in_ready_order(pq: Harness, spawn: Any) -> None:
    # upstream: TestMultipleItemsWithAfterAreReturnedInCorrectOrder
    def get_two() -> list[Any]:
        return [pq.q.get_with_priority()[0], pq.q.get_with_priority()[0]]

    getter = spawn(get_two, name="test/getter")
    pq.q.add_with_opts("foo", after=1.0)
    pq.q.add_with_opts("bar", after=0.2)
    assert not getter.finished.is_set()
    pq.clock.step(1.0)
    assert getter.join() == ["bar", "foo"]
    assert pq.depth(0) == {0: 0}
    assert pq.adds == 2


def test_a_blocked_get_is_unblocked_by_shut_down(
    pq: Harness, spawn: Any, blocked_waiters: Any, wait_until: Any
) -> None:
    # upstream: TestGetFromPriorityQueueIsUnblockedOnShutdown
    getter = spawn(pq.q.get_with_priority, name="test/getter")
    wait_until(lambda: blocked_waiters(pq.q._not_empty) == 1)
    assert not getter.finished.is_set()
    pq.q.shut_down()
    assert getter.join() == (None, 0, True)


def test_items_count_in_len_and_depth_once_they_are_ready(pq: Harness, wait_until: Any) -> None:
    # upstream: TestItemsAreInludedInLenAndMetricsOnceTheyAreReady
    for _ in range(2):  # the second round catches bookkeeping left over by the first
        pq.q.add_with_opts("foo", after=0.5)
        pq.q.add_with_opts("baz")
        pq.q.add_with_opts("bar", after=0.5)
        pq.q.add_with_opts("bal")
        assert len(pq.q) == 2
        assert pq.depth(0) == {0: 2}
        pq.step_until_promoted(1.0, wait_until)
        assert len(pq.q) == 4
        assert pq.depth(0) == {0: 4}
        for _ in range(4):
            item, _ = pq.q.get()
            assert item is not None
            pq.q.done(item)
        assert len(pq.q) == 0
        assert pq.depth(0) == {0: 0}


def test_an_item_whose_delay_expired_readded_without_delay_counts_once(pq: Harness, wait_until: Any) -> None:
    # upstream: TestMetricsAreUpdatedForItemWhoseRequeueAfterExpiredThatGetsAddedAgainWithoutRequeueAfter
    pq.q.add_with_opts("foo", after=0.05)
    pq.step_until_promoted(0.05, wait_until)
    assert len(pq.q) == 1
    assert pq.depth(0) == {0: 1}
    pq.q.add_with_opts("foo")
    assert len(pq.q) == 1
    assert pq.depth(0) == {0: 1}
    assert pq.q.get() == ("foo", False)
    assert len(pq.q) == 0
    assert pq.depth(0) == {0: 0}


def test_rate_limited_adds_of_different_items_do_not_affect_each_other(pq: Harness, wait_until: Any) -> None:
    # upstream: TestWhenAddingMultipleItemsWithRatelimitTrueTheyDontAffectEachOther
    for _ in range(7):  # the next when("bar") is 5 ms * 2**7 = 640 ms
        pq.q.rate_limiter.when("bar")
    pq.q.add_with_opts("foo", rate_limited=True)
    pq.q.add_with_opts("bar", rate_limited=True)
    assert len(pq.q) == 0
    pq.step_until_promoted(0.005, wait_until)
    assert pq.q.get_with_priority() == ("foo", 0, False)
    assert len(pq.q) == 0
    pq.step_until_promoted(0.636, wait_until)
    assert pq.q.get_with_priority() == ("bar", 0, False)
    assert pq.depth(0) == {0: 0}
    assert pq.adds == 2
    assert pq.retries == 2


def test_rate_limited_with_a_shorter_after_uses_the_after(pq: Harness) -> None:
    for _ in range(10):  # the limiter would now say 5 ms * 2**10 = 5.12 s
        pq.q.rate_limiter.when("foo")
    pq.q.add_with_opts("foo", rate_limited=True, after=1.0)
    with pq.q._lock:
        assert pq.q._items["foo"].ready_at == pytest.approx(pq.clock.monotonic() + 1.0)


def test_the_default_rate_limiter_is_item_exponential_from_5ms_without_a_bucket(clock: FakeClock) -> None:
    with PriorityQueue[str](clock=clock) as q:
        assert isinstance(q.rate_limiter, ItemExponentialFailureRateLimiter)
        assert [q.rate_limiter.when("x") for _ in range(3)] == [0.005, 0.01, 0.02]
        assert {q.rate_limiter.when(f"item-{i}") for i in range(200)} == {0.005}  # no overall bucket
        q.add_rate_limited("y")
        assert q.num_requeues("y") == 1
        q.forget("y")
        assert q.num_requeues("y") == 0


# --- shut down and misuse -----------------------------------------------------------------------------------


def test_shut_down_with_drain_waits_for_handed_out_items(
    clock: FakeClock, spawn: Any, blocked_waiters: Any, wait_until: Any
) -> None:
    q = PriorityQueue[str](clock=clock)
    q.add("a")
    q.add("b")
    assert q.get() == ("a", False)
    drain = spawn(q.shut_down_with_drain, name="test/drain")
    wait_until(lambda: blocked_waiters(q._drained) == 1)  # waiting for "a"
    assert q.get() == (None, True)  # queued "b" is not handed out any more
    assert not drain.finished.is_set()
    q.done("a")
    drain.join()


def test_shut_down_ends_a_waiting_shut_down_with_drain(
    clock: FakeClock, spawn: Any, blocked_waiters: Any, wait_until: Any
) -> None:
    q = PriorityQueue[str](clock=clock)
    q.add("a")
    q.get()
    drain = spawn(q.shut_down_with_drain, name="test/drain")
    wait_until(lambda: blocked_waiters(q._drained) == 1)
    q.shut_down()
    drain.join()


def test_done_of_an_item_not_handed_out_fails_loudly(pq: Harness) -> None:
    pq.q.add("foo")
    with pytest.raises(ValueError, match="not being processed"):
        pq.q.done("foo")


def test_repr_shows_the_live_state(pq: Harness) -> None:
    pq.q.add("a")
    pq.q.add("b")
    pq.q.add_after("c", 1.0)
    pq.q.get()
    assert repr(pq.q) == (
        f"PriorityQueue(name={pq.name!r}, ready=1, waiting=1, processing=1, shutting_down=False)"
    )


# --- interchangeability -------------------------------------------------------------------------------------


def run_worker_loop(q: PriorityInterface[str], results: list[tuple[str, int]]) -> None:
    """A controller-style loop written once against PriorityInterface."""
    while True:
        item, priority, _ = q.get_with_priority()
        if item is None:  # shutting down
            return
        try:
            results.append((item, priority))
        finally:
            q.done(item)


@pytest.mark.parametrize("kind", ["priority", "wrapped-rate-limiting"])
def test_a_worker_loop_runs_on_either_queue(clock: FakeClock, kind: str, wait_until: Any) -> None:
    queue: PriorityInterface[str]
    if kind == "priority":
        queue = PriorityQueue[str](clock=clock)
    else:
        queue = PriorityQueueWrapper(RateLimitingQueue[str](clock=clock))
    queue.add_with_opts("a", priority=LOW_PRIORITY)
    queue.add_with_opts("b", priority=5)
    queue.add_with_opts("c")
    results: list[tuple[str, int]] = []
    worker = threading.Thread(target=run_worker_loop, args=(queue, results), name="test/worker")
    worker.start()
    wait_until(lambda: len(results) == 3)
    queue.shut_down()
    worker.join(5)
    assert not worker.is_alive()
    if kind == "priority":
        assert results == [("b", 5), ("c", 0), ("a", LOW_PRIORITY)]
    else:  # priorities are ignored: FIFO
        assert results == [("a", 0), ("b", 0), ("c", 0)]


def test_the_wrapper_maps_options_to_the_rate_limiting_calls(clock: FakeClock) -> None:
    inner = RateLimitingQueue[str](ItemExponentialFailureRateLimiter(1.0, 10.0), clock=clock)
    wrapped = PriorityQueueWrapper(inner)
    try:
        wrapped.add_with_opts("now", priority=7)
        wrapped.add_with_opts("later", after=5.0)
        wrapped.add_with_opts("limited", rate_limited=True)
        assert len(wrapped) == 1
        assert wrapped.num_requeues("limited") == 1
        assert inner._ready_at["later"] == pytest.approx(clock.monotonic() + 5.0)
        assert inner._ready_at["limited"] == pytest.approx(clock.monotonic() + 1.0)
        assert wrapped.get_with_priority() == ("now", 0, False)
    finally:
        wrapped.shut_down()
    assert inner.shutting_down()
