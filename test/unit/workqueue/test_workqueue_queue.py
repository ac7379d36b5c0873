"""controller.workqueue.Queue: client-go's queue_test.go as behaviour, one test per package property."""

from __future__ import annotations

import gc
import itertools
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import pytest

from controller.workqueue import FifoOrdering, Interface, Queue


class TracingOrdering(FifoOrdering[Any]):
    """FIFO that records which items were touched (client-go's traceQueue)."""

    def __init__(self) -> None:
        super().__init__()
        self.touched: set[Any] = set()

    def touch(self, item: Any) -> None:
        super().touch(item)
        self.touched.add(item)


class LifoOrdering:
    """Last in, first out: an ordering strategy other than the default."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def touch(self, item: Any) -> None:
        pass

    def push(self, item: Any) -> None:
        self.items.append(item)

    def pop(self) -> Any:
        return self.items.pop()

    def __len__(self) -> int:
        return len(self.items)


SHUT_DOWNS: list[Callable[[Interface[Any]], None]] = [Queue.shut_down, Queue.shut_down_with_drain]


# --- the package properties ---------------------------------------------------------------------------------


def test_fair_items_are_handed_out_in_the_order_they_were_added() -> None:
    with Queue[str]() as q:
        for item in ["c", "a", "b"]:
            q.add(item)
        assert [q.get()[0] for _ in range(3)] == ["c", "a", "b"]


def test_stingy_several_adds_before_processing_collapse_into_one() -> None:
    # upstream: TestCollapse
    ordering = TracingOrdering()
    with Queue[str](ordering=ordering) as q:
        q.add("bar")
        q.add("bar")
        item, shutdown = q.get()
        assert (item, shutdown) == ("bar", False)
        q.done("bar")
        assert len(q) == 0
        assert "bar" in ordering.touched


def test_stingy_an_item_being_processed_is_not_handed_to_a_second_worker(
    spawn: Any, blocked_waiters: Any, wait_until: Any
) -> None:
    # upstream: TestCollapseWhileProcessing
    ordering = TracingOrdering()
    with Queue[str](ordering=ordering) as q:
        q.add("foo")
        assert q.get() == ("foo", False)
        q.add("foo")
        q.add("foo")

        second = spawn(q.get, name="test/second-worker")
        # The second worker must be blocked in get(): "foo" is dirty but still being processed.
        wait_until(lambda: blocked_waiters(q._not_empty) == 1)
        assert not second.finished.is_set()

        q.done("foo")
        assert second.join() == ("foo", False)
        q.done("foo")
        assert len(q) == 0
        assert "foo" not in ordering.touched  # adds while processing do not touch the ordering


def test_many_producers_and_consumers_run_concurrently_and_every_add_is_processed_one_at_a_time(
    spawn: Any, wait_until: Any
) -> None:
    # The property itself, with real threads: producers and consumers released together by a barrier;
    # each consumer re-adds an item the first time it processes it. Every wait is bounded.
    producers, consumers, keys, rounds = 4, 4, 16, 40
    lock = threading.Lock()
    seq = itertools.count()
    last_added: dict[int, int] = {}  # key -> sequence number taken just before its latest add
    last_started: dict[int, int] = {}  # key -> sequence number taken just after its latest get
    processed: dict[int, int] = dict.fromkeys(range(keys), 0)
    in_flight: set[int] = set()
    overlaps: list[int] = []
    readded: set[int] = set()
    barrier = threading.Barrier(producers + consumers, timeout=10.0)

    def add(q: Queue[int], key: int) -> None:
        with lock:
            last_added[key] = next(seq)
        q.add(key)

    def produce(q: Queue[int]) -> None:
        barrier.wait()
        for _ in range(rounds):
            for key in range(keys):
                add(q, key)

    def consume(q: Queue[int]) -> None:
        barrier.wait()
        while True:
            key, shutdown = q.get()
            if shutdown:
                return
            with lock:
                if key in in_flight:
                    overlaps.append(key)
                in_flight.add(key)
                last_started[key] = next(seq)
                processed[key] += 1
                first = key not in readded
                readded.add(key)
            if first:
                add(q, key)  # re-added while being processed: must be processed again
            with lock:
                in_flight.discard(key)
            q.done(key)

    def every_add_was_followed_by_a_get() -> bool:
        with lock:
            return all(k in last_started and last_started[k] > last_added[k] for k in range(keys))

    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as CPython allows: more interleavings per run
    try:
        with Queue[int]() as q:
            threads = [spawn(produce, q, name=f"test/producer-{i}") for i in range(producers)]
            threads += [spawn(consume, q, name=f"test/consumer-{i}") for i in range(consumers)]
            for producer in threads[:producers]:
                producer.join()
            wait_until(every_add_was_followed_by_a_get)
            q.shut_down()
            for consumer in threads[producers:]:
                consumer.join()
            assert len(q) == 0
    finally:
        sys.setswitchinterval(switch_interval)
    assert overlaps == [], "an item was handed to two consumers at once"
    assert all(count >= 2 for count in processed.values()), processed


def test_an_item_readded_while_processing_is_processed_again() -> None:
    # upstream: TestReinsert (one thread: the interleaving is forced by the order of calls)
    with Queue[str]() as q:
        q.add("foo")
        item, _ = q.get()
        assert item == "foo"
        q.add("foo")
        q.done("foo")
        assert q.get() == ("foo", False)
        q.done("foo")
        assert len(q) == 0


@pytest.mark.parametrize("shut_down", SHUT_DOWNS, ids=["shut_down", "shut_down_with_drain"])
def test_shutdown_notification_ends_every_consumer_and_ignores_later_adds(
    shut_down: Callable[[Interface[Any]], None],
) -> None:
    # upstream: TestBasic (without its sleeps; fewer threads)
    q = Queue[Any]()
    producers, adds_per_producer, consumers = 10, 50, 5
    errors: list[str] = []

    def produce(i: int) -> None:
        for _ in range(adds_per_producer):
            q.add(i)

    def consume() -> None:
        while True:
            item, shutdown = q.get()
            if item == "added after shutdown!":
                errors.append("got an item added after shutdown")
            if shutdown:
                return
            q.done(item)

    producer_threads = [
        threading.Thread(target=produce, args=(i,), name=f"test/producer-{i}") for i in range(producers)
    ]
    consumer_threads = [threading.Thread(target=consume, name=f"test/consumer-{i}") for i in range(consumers)]
    for t in producer_threads + consumer_threads:
        t.start()
    for t in producer_threads:
        t.join()
    shut_down(q)
    q.add("added after shutdown!")
    for t in consumer_threads:
        t.join(5)
        assert not t.is_alive()
    assert errors == []
    assert len(q) == 0
    assert q.shutting_down()


@pytest.mark.parametrize("shut_down", SHUT_DOWNS, ids=["shut_down", "shut_down_with_drain"])
def test_every_worker_readding_every_item_leaves_the_queue_empty(
    shut_down: Callable[[Interface[Any]], None],
) -> None:
    # upstream: TestAddWhileProcessing
    q = Queue[int]()
    for i in range(50):
        q.add(i)
    handed_out = 0
    handed_out_lock = threading.Lock()

    def consume() -> None:
        nonlocal handed_out
        counters: dict[int, int] = {}
        while True:
            item, _ = q.get()
            if item is None:  # shutting down
                return
            with handed_out_lock:
                handed_out += 1
            counters[item] = counters.get(item, 0) + 1
            if counters[item] < 2:
                q.add(item)
            q.done(item)

    consumers = [threading.Thread(target=consume, name=f"test/consumer-{i}") for i in range(10)]
    for t in consumers:
        t.start()
    shut_down(q)
    for t in consumers:
        t.join(5)
        assert not t.is_alive()
    assert len(q) == 0
    assert handed_out >= 50


# --- len, get, done -----------------------------------------------------------------------------------------


def test_len_counts_distinct_queued_items() -> None:
    # upstream: TestLen
    with Queue[str]() as q:
        q.add("foo")
        assert len(q) == 1
        q.add("bar")
        assert len(q) == 2
        q.add("foo")
        assert len(q) == 2


def test_len_does_not_count_an_item_added_again_while_processing_until_it_is_done() -> None:
    with Queue[str]() as q:
        q.add("foo")
        q.get()
        q.add("foo")
        assert len(q) == 0
        q.done("foo")
        assert len(q) == 1


def test_done_of_an_item_not_being_processed_fails_loudly() -> None:
    with Queue[str]() as q:
        q.add("foo")
        with pytest.raises(ValueError, match="not being processed"):
            q.done("foo")
        assert len(q) == 1  # and the item was not queued twice


def test_none_cannot_be_queued_because_get_returns_it_on_shutdown() -> None:
    with Queue[Any]() as q, pytest.raises(TypeError):
        q.add(None)


def test_ordering_is_a_strategy_under_the_same_dedup_rules() -> None:
    with Queue[str](ordering=LifoOrdering()) as q:
        for item in ["a", "b", "a", "c"]:
            q.add(item)
        assert len(q) == 3
        assert [q.get()[0] for _ in range(3)] == ["c", "b", "a"]


def test_a_processed_item_can_be_garbage_collected() -> None:
    # upstream: TestGarbageCollection
    class Big:
        data = b"hello"

    big = Big()
    collected = weakref.ref(big)
    with Queue[Big]() as q:
        q.add(big)
        item, _ = q.get()
        assert item is big
        q.done(big)
        del big, item
        gc.collect()
        assert collected() is None


def test_repr_shows_the_live_state() -> None:
    with Queue[str](name="") as q:
        q.add("a")
        q.add("b")
        q.get()
        assert repr(q) == "Queue(name='', queued=1, processing=1, shutting_down=False)"


# --- shut down ---------------------------------------------------------------------------------------------


def test_get_drains_queued_items_after_shut_down_then_reports_shutdown() -> None:
    q = Queue[str]()
    q.add("a")
    q.add("b")
    q.shut_down()
    assert q.get() == ("a", False)
    assert q.get() == ("b", False)
    assert q.get() == (None, True)
    q.add("c")
    assert len(q) == 0


def test_a_blocked_get_is_woken_by_shut_down(spawn: Any, blocked_waiters: Any, wait_until: Any) -> None:
    q = Queue[str]()
    getter = spawn(q.get, name="test/getter")
    wait_until(lambda: blocked_waiters(q._not_empty) == 1)
    q.shut_down()
    assert getter.join() == (None, True)


def test_shut_down_with_drain_waits_until_processing_is_empty(
    spawn: Any, blocked_waiters: Any, wait_until: Any
) -> None:
    # upstream: TestQueueDrainageUsingShutDownWithDrain
    q = Queue[str]()
    q.add("foo")
    q.add("bar")
    first, _ = q.get()
    second, _ = q.get()
    drain = spawn(q.shut_down_with_drain, name="test/drain")
    wait_until(lambda: blocked_waiters(q._drained) == 1)  # shut_down_with_drain is waiting
    assert q.get() == (None, True)
    q.done(first)  # type: ignore[arg-type]
    assert not drain.finished.is_set()  # "bar" is still being processed
    q.done(second)  # type: ignore[arg-type]
    drain.join()


def test_shut_down_does_not_wait_for_items_being_processed() -> None:
    # upstream: TestNoQueueDrainageUsingShutDown
    q = Queue[str]()
    q.add("foo")
    q.add("bar")
    q.get()
    q.get()
    q.shut_down()  # returns although neither item is done
    assert q.shutting_down()


def test_shut_down_ends_a_waiting_shut_down_with_drain(
    spawn: Any, blocked_waiters: Any, wait_until: Any
) -> None:
    # upstream: TestForceQueueShutdownUsingShutDown
    q = Queue[str]()
    q.add("foo")
    q.add("bar")
    q.get()
    q.get()
    drain = spawn(q.shut_down_with_drain, name="test/drain")
    wait_until(lambda: blocked_waiters(q._drained) == 1)  # shut_down_with_drain is waiting
    assert q.get() == (None, True)
    q.shut_down()  # a second SIGTERM
    drain.join()


def test_shut_down_with_drain_processes_an_item_that_became_dirty_while_processing(
    spawn: Any, blocked_waiters: Any, wait_until: Any
) -> None:
    # upstream: TestQueueDrainageUsingShutDownWithDrainWithDirtyItem
    q = Queue[str]()
    q.add("foo")
    assert q.get() == ("foo", False)
    q.add("foo")
    drain = spawn(q.shut_down_with_drain, name="test/drain")
    wait_until(lambda: blocked_waiters(q._drained) == 1)  # shut_down_with_drain is waiting
    assert q.get() == (None, True)
    q.done("foo")
    again, shutdown = q.get()
    assert (again, shutdown) == ("foo", False)
    assert not drain.finished.is_set()
    q.done("foo")
    assert q.get() == (None, True)
    drain.join()


def test_no_item_is_ever_handed_to_two_workers_at_once_under_contention() -> None:
    # The stingy property with real threads: workers claim items in a shared in-flight set.
    q = Queue[int]()
    in_flight: set[int] = set()
    lock = threading.Lock()
    violations: list[int] = []
    seq = itertools.count()
    last_add: dict[int, int] = {}
    last_get: dict[int, int] = {}
    keys = 8

    def produce(offset: int) -> None:
        for i in range(400):
            key = (i + offset) % keys
            stamp = next(seq)  # taken before the add: never later than it
            with lock:
                last_add[key] = max(last_add.get(key, -1), stamp)
            q.add(key)

    def consume() -> None:
        while True:
            item, _ = q.get()
            if item is None:
                return
            # taken after the get: never earlier than it (gets of one key never overlap)
            last_get[item] = next(seq)
            with lock:
                if item in in_flight:
                    violations.append(item)
                in_flight.add(item)
            with lock:
                in_flight.discard(item)
            q.done(item)

    producers = [threading.Thread(target=produce, args=(i,), name=f"test/producer-{i}") for i in range(4)]
    consumers = [threading.Thread(target=consume, name=f"test/consumer-{i}") for i in range(6)]
    for t in producers + consumers:
        t.start()
    for t in producers:
        t.join()
    q.shut_down_with_drain()
    for t in consumers:
        t.join(5)
        assert not t.is_alive()
    assert violations == []
    # every add was followed by a processing of that key: no add was lost
    assert all(last_get[key] > last_add[key] for key in last_add)
