"""A queue that has handed out every item holds no more memory than a fresh one.

A restart's initial list puts every object's key in the queue at once (30,000 TrainJobs: 30,000 keys), and
CPython's dicts and sets, like Go's maps, keep the table they grew to when their entries are deleted. These
tests fill each queue, drain it, and measure with ``tracemalloc`` what stays allocated: with the tables
kept, 20,000 keys leave more than a mebibyte behind.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from controller.clock import FakeClock
from controller.envtest import wait_until
from controller.workqueue import (
    DelayingQueue,
    Interface,
    ItemExponentialFailureRateLimiter,
    PriorityQueue,
    Queue,
)

ITEMS = 20_000
LEFT_BEHIND = 256 * 1024
"""Bytes a drained queue may still hold above what it held before the items came: CPython keeps up to 2,000
freed tuples of each length up to 20 for reuse (about 140 KiB of the queues' heap entries); a table kept
for 20,000 keys costs 0.4 MiB (a dict) to 2 MiB (a set)."""

KEYS = [f"ns/trainjob-{i:05d}" for i in range(ITEMS)]


WORKQUEUE = [tracemalloc.Filter(True, "*/controller/workqueue/*")]
"""Only what the queues' own code allocated: other threads of the test process allocate meanwhile."""


@contextmanager
def left_behind() -> Iterator[Callable[[], int]]:
    """Bytes the work queue's code allocated inside the block and still alive when the yielded callable is
    called."""
    gc.collect()
    tracemalloc.start()

    def allocated() -> int:
        return sum(
            stat.size for stat in tracemalloc.take_snapshot().filter_traces(WORKQUEUE).statistics("filename")
        )

    try:
        before = allocated()
        yield lambda: allocated() - before
    finally:
        tracemalloc.stop()


def _drain(queue: Interface[str]) -> None:
    """Hands out every key and marks it done, as the workers would; the queue is then empty."""
    for _ in KEYS:
        item, _ = queue.get()
        assert item is not None
        queue.done(item)
    assert len(queue) == 0


def test_a_drained_queue_gives_back_its_tables(unique_name: Callable[[], str]) -> None:
    with Queue[str](name=unique_name()) as queue:
        queue.add(KEYS[0])  # the metrics series exist before the measurement
        queue.done(queue.get()[0] or "")
        with left_behind() as grown:
            for key in KEYS:
                queue.add(key)
            assert len(queue) == ITEMS
            _drain(queue)
            assert grown() < LEFT_BEHIND


def test_a_drained_priority_queue_gives_back_its_tables(unique_name: Callable[[], str]) -> None:
    with PriorityQueue[str](name=unique_name()) as queue:
        queue.add(KEYS[0])
        queue.done(queue.get()[0] or "")
        with left_behind() as grown:
            for key in KEYS:
                queue.add_with_opts(key, priority=-100)  # as a restart's initial list adds them
            assert len(queue) == ITEMS
            _drain(queue)
            assert grown() < LEFT_BEHIND


def test_a_delaying_queue_gives_back_its_waiting_table(
    clock: FakeClock, unique_name: Callable[[], str]
) -> None:
    with DelayingQueue[str](name=unique_name(), clock=clock) as queue:
        queue.add_after(KEYS[0], 0.0)  # the metrics series exist before the measurement
        queue.done(queue.get()[0] or "")
        with left_behind() as grown:
            for key in KEYS:
                queue.add_after(key, 10.0)
            clock.step(10.0)
            wait_until(lambda: len(queue) == ITEMS, timeout=5, interval=0.001)
            _drain(queue)
            assert grown() < LEFT_BEHIND


def test_a_rate_limiter_that_forgot_every_item_gives_back_its_table() -> None:
    limiter = ItemExponentialFailureRateLimiter[str](0.005, 1000.0)
    with left_behind() as grown:
        for key in KEYS:  # every item failed once: an API server that was down for a moment
            limiter.when(key)
        assert limiter.num_requeues(KEYS[-1]) == 1
        for key in KEYS:
            limiter.forget(key)
        assert limiter.num_requeues(KEYS[-1]) == 0
        assert grown() < LEFT_BEHIND
