"""controller.workqueue.DelayingQueue: client-go's delaying_queue_test.go as behaviour, on a fake clock."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest

from controller.clock import FakeClock
from controller.workqueue import MAX_WAIT, DelayingQueue
from controller.workqueue.delaying import DelayThread

_markers = itertools.count()


def step_and_collect(q: DelayingQueue[Any], clock: FakeClock, seconds: float, wait_until: Any) -> list[Any]:
    """Step ``clock`` by ``seconds`` and return what the delay thread added for it, in order (each item is
    got and done).

    A marker is added to become ready exactly at the new time: the delay thread adds every ready item of
    one pass in ready-time order and the marker is the last of them, so once the marker comes out of the
    queue, everything that was ready came out before it. No sleeping, no guessing.
    """
    marker = ("marker", next(_markers))
    q.add_after(marker, seconds)
    clock.step(seconds)
    got: list[Any] = []
    while True:
        wait_until(lambda: len(q) > 0)
        item, shutdown = q.get()
        assert not shutdown
        q.done(item)
        if item == marker:
            return got
        got.append(item)


@pytest.fixture
def q(clock: FakeClock) -> Any:
    queue = DelayingQueue[Any](clock=clock)
    yield queue
    queue.shut_down()


def test_an_item_is_added_once_its_delay_has_passed(q: Any, clock: FakeClock, wait_until: Any) -> None:
    # upstream: TestSimpleQueue
    q.add_after("foo", 0.05)
    assert len(q) == 0
    assert step_and_collect(q, clock, 0.06, wait_until) == ["foo"]
    # past the next heartbeat: nothing is added again
    assert step_and_collect(q, clock, MAX_WAIT, wait_until) == []
    assert len(q) == 0


def test_the_earlier_ready_time_of_an_item_wins(q: Any, clock: FakeClock, wait_until: Any) -> None:
    # upstream: TestDeduping
    q.add_after("foo", 0.05)
    q.add_after("foo", 0.07)
    assert len(q) == 0
    assert step_and_collect(q, clock, 0.06, wait_until) == ["foo"]
    assert step_and_collect(q, clock, 0.02, wait_until) == []  # the later add was collapsed

    # this time the second, earlier add overrides the first
    q.add_after("foo", 0.05)
    q.add_after("foo", 0.03)
    assert len(q) == 0
    assert step_and_collect(q, clock, 0.04, wait_until) == ["foo"]
    assert step_and_collect(q, clock, 0.02, wait_until) == []


def test_items_fire_in_ready_order_whatever_the_add_order(q: Any, clock: FakeClock, wait_until: Any) -> None:
    # upstream: TestAddTwoFireEarly
    q.add_after("foo", 1.0)
    q.add_after("bar", 0.05)
    assert len(q) == 0
    assert step_and_collect(q, clock, 0.06, wait_until) == ["bar"]
    q.add_after("baz", 2.0)
    assert step_and_collect(q, clock, 1.0, wait_until) == ["foo"]
    assert step_and_collect(q, clock, 2.0, wait_until) == ["baz"]


def test_items_ready_together_are_added_in_ready_time_order(
    q: Any, clock: FakeClock, wait_until: Any
) -> None:
    # upstream: TestCopyShifting
    q.add_after("foo", 1.0)
    q.add_after("bar", 0.5)
    q.add_after("baz", 0.25)
    assert len(q) == 0
    assert step_and_collect(q, clock, 2.0, wait_until) == ["baz", "bar", "foo"]


def test_a_delay_of_zero_or_less_adds_at_once(q: Any) -> None:
    q.add_after("now", 0)
    q.add_after("past", -1.0)
    assert len(q) == 2
    assert [q.get()[0], q.get()[0]] == ["now", "past"]


def test_an_earlier_add_after_wakes_the_waiting_thread(q: Any, clock: FakeClock, wait_until: Any) -> None:
    q.add_after("late", 100.0)
    wait_until(lambda: clock.waiters() == 1)  # the delay thread sleeps until min(100 s, heartbeat)
    q.add_after("early", 1.0)
    # Without the wake-up the thread would sleep through this step and "early" would never arrive.
    assert step_and_collect(q, clock, 1.0, wait_until) == ["early"]


def test_a_plain_add_of_a_waiting_item_is_processed_at_once_and_the_delayed_add_still_happens(
    q: Any, clock: FakeClock, wait_until: Any
) -> None:
    q.add_after("foo", 1.0)
    q.add("foo")
    assert q.get() == ("foo", False)
    q.done("foo")
    assert step_and_collect(q, clock, 1.0, wait_until) == ["foo"]


def test_a_delayed_item_that_is_already_queued_collapses_into_it(
    q: Any, clock: FakeClock, wait_until: Any
) -> None:
    q.add_after("foo", 1.0)
    q.add("foo")
    marker = "marker-after-foo"
    q.add_after(marker, 1.0)
    clock.step(1.0)
    wait_until(lambda: len(q) == 2)  # foo (once) and the marker
    assert [q.get()[0], q.get()[0]] == ["foo", marker]


def test_add_after_is_ignored_once_shutting_down(clock: FakeClock) -> None:
    q = DelayingQueue[str](clock=clock)
    q.shut_down()
    q.add_after("foo", 0)
    q.add_after("bar", 1.0)
    assert len(q) == 0
    assert q.get() == (None, True)


def test_shut_down_joins_the_named_delay_thread_and_drops_waiting_items(
    clock: FakeClock, unique_name: Any
) -> None:
    name = unique_name()
    q = DelayingQueue[str](clock=clock, name=name)
    assert f"workqueue/{name}/delay" in {t.name for t in threading.enumerate()}
    q.add_after("foo", 1.0)
    q.shut_down()
    assert f"workqueue/{name}/delay" not in {t.name for t in threading.enumerate()}
    clock.step(2.0)
    assert len(q) == 0


def test_shut_down_with_drain_joins_the_delay_thread(clock: FakeClock, unique_name: Any) -> None:
    name = unique_name()
    q = DelayingQueue[str](clock=clock, name=name)
    q.shut_down_with_drain()
    assert not [t.name for t in threading.enumerate() if t.name.startswith(f"workqueue/{name}/")]


def test_repr_counts_waiting_items(q: Any) -> None:
    q.add_after("foo", 1.0)
    q.add_after("foo", 0.5)
    q.add_after("bar", 1.0)
    assert repr(q) == "DelayingQueue(name='', queued=0, processing=0, shutting_down=False, waiting=2)"


def test_a_stop_signalled_while_the_delay_thread_promotes_items_still_ends_it(
    clock: FakeClock, unique_name: Any, spawn: Any
) -> None:
    # The interleaving behind a lost wake-up: shut_down signals the thread while it is promoting ready
    # items, and promoting then clears the wake event (as its contract says it must, under the queue's
    # lock). The thread must still see the stop, not wait out a 10 s heartbeat (forever on a fake clock).
    passes: list[int] = []

    def promote() -> float | None:
        passes.append(1)
        thread.signal_stop()  # shut_down lands here...
        thread.wake.clear()  # ...before promoting clears the event
        return None

    thread = DelayThread(unique_name(), clock, promote)
    thread.start()
    try:
        spawn(thread.join, name="test/join-delay-thread").join()
    finally:
        clock.step(MAX_WAIT)  # frees the thread if the stop was lost, so no thread outlives the test
    assert passes == [1]
