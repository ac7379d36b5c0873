"""Property tests (hypothesis state machines) for the queue invariants.

Each machine drives a queue and a plain model of the contract side by side:

- every queued item is dirty and not being processed (checked on the queue's own fields after every step);
- an item added while it is being processed is processed again, exactly once, after ``done``;
- no item is handed to a second consumer while the first still holds it;
- ``shut_down_with_drain`` returns only once nothing is being processed;
- for the priority queue: the highest priority first, FIFO within a priority (a raised priority goes to
  the back of its new priority), adds collapse keeping the highest priority.
"""

from __future__ import annotations

import threading

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from controller.clock import FakeClock
from controller.envtest import wait_until
from controller.workqueue import PriorityQueue, Queue

ITEMS = st.sampled_from(["a", "b", "c", "d", "e"])
PRIORITIES = st.integers(min_value=-2, max_value=2)
SETTINGS = settings(
    max_examples=100, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.q = Queue[str]()
        self.queued: list[str] = []  # the model: FIFO of items waiting to be handed out
        self.dirty: set[str] = set()
        self.processing: set[str] = set()
        self.shut = False
        self.drain: threading.Thread | None = None
        self.drain_returned = threading.Event()
        self.processing_emptied_since_drain = False

    @rule(item=ITEMS)
    def add(self, item: str) -> None:
        self.q.add(item)
        if self.shut or item in self.dirty:
            return
        self.dirty.add(item)
        if item not in self.processing:
            self.queued.append(item)

    @precondition(lambda self: self.queued)
    @rule()
    def get(self) -> None:
        item, shutdown = self.q.get()
        assert not shutdown
        assert item == self.queued.pop(0)  # fair: FIFO
        assert item not in self.processing  # stingy: never to a second consumer
        self.processing.add(item)
        self.dirty.discard(item)

    @precondition(lambda self: self.processing)
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        item = data.draw(st.sampled_from(sorted(self.processing)))
        self.q.done(item)
        self.processing.remove(item)
        if item in self.dirty:  # added while processing: processed again, once
            self.queued.append(item)
        if not self.processing:
            self.processing_emptied_since_drain = True

    @precondition(lambda self: self.shut and not self.queued)
    @rule()
    def get_after_shut_down(self) -> None:
        assert self.q.get() == (None, True)

    @precondition(lambda self: not self.shut)
    @rule()
    def shut_down(self) -> None:
        self.q.shut_down()
        self.shut = True

    @precondition(lambda self: not self.shut)
    @rule()
    def shut_down_with_drain(self) -> None:
        def drain() -> None:
            self.q.shut_down_with_drain()
            self.drain_returned.set()

        self.processing_emptied_since_drain = not self.processing
        self.drain = threading.Thread(target=drain, name="test/drain", daemon=True)
        self.drain.start()
        wait_until(self.q.shutting_down, interval=0.0005)  # adds are ignored from here on
        self.shut = True

    @invariant()
    def queue_state_matches_the_model(self) -> None:
        with self.q._lock:
            queued = list(self.q._queue._items)  # type: ignore[attr-defined]
            dirty, processing = set(self.q._dirty), set(self.q._processing)
        assert queued == self.queued
        assert dirty == self.dirty
        assert processing == self.processing
        # the field invariant: every element of queue is in dirty and not in processing
        assert all(item in dirty and item not in processing for item in queued)
        assert len(self.q) == len(self.queued)

    @invariant()
    def drain_returns_only_once_processing_was_empty(self) -> None:
        if self.drain_returned.is_set():
            assert self.processing_emptied_since_drain

    def teardown(self) -> None:
        for item in sorted(self.processing):
            self.q.done(item)
        # An item added again while it was processed is queued by its done, and a drain waits until a worker
        # has processed it too (upstream's TestQueueDrainageUsingShutDownWithDrainWithDirtyItem): work as the
        # controller's workers do after a shut down, until get reports it.
        while self.shut:
            item, shutdown = self.q.get()
            if shutdown:
                break
            assert item is not None
            self.q.done(item)
        if self.drain is not None:
            self.drain.join(5)
            assert not self.drain.is_alive(), "shut_down_with_drain did not return once processing emptied"
        self.q.shut_down()


class PriorityQueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.q = PriorityQueue[str](clock=FakeClock())
        self.queued: dict[str, tuple[int, int]] = {}  # the model: item -> (priority, FIFO position)
        self.handed_out: set[str] = set()
        self.position = 0

    def _next(self) -> int:
        self.position += 1
        return self.position

    @rule(item=ITEMS, priority=PRIORITIES)
    def add(self, item: str, priority: int) -> None:
        self.q.add_with_opts(item, priority=priority)
        known = self.queued.get(item)
        if known is None or priority > known[0]:  # a raised priority goes to the back of it
            self.queued[item] = (priority, self._next())

    @precondition(lambda self: any(item not in self.handed_out for item in self.queued))
    @rule()
    def get(self) -> None:
        candidates = {k: v for k, v in self.queued.items() if k not in self.handed_out}
        expected = min(candidates, key=lambda k: (-candidates[k][0], candidates[k][1]))
        item, priority, shutdown = self.q.get_with_priority()
        assert (item, priority, shutdown) == (expected, candidates[expected][0], False)
        del self.queued[expected]
        self.handed_out.add(expected)

    @precondition(lambda self: self.handed_out)
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        item = data.draw(st.sampled_from(sorted(self.handed_out)))
        self.q.done(item)
        self.handed_out.remove(item)

    @invariant()
    def queue_state_matches_the_model(self) -> None:
        with self.q._lock:
            items = {key: entry.priority for key, entry in self.q._items.items()}
            handed_out = set(self.q._processing)
            heap_keys = [entry.key for _, _, gen, entry in self.q._ready if entry.gen == gen]
        assert items == {key: priority for key, (priority, _) in self.queued.items()}
        assert handed_out == self.handed_out
        # an item handed out is never offered again until done; nothing is offered twice
        assert not set(heap_keys) & handed_out
        assert len(heap_keys) == len(set(heap_keys))
        assert len(self.q) == len(self.queued)

    def teardown(self) -> None:
        self.q.shut_down()


TestQueueProperties = QueueMachine.TestCase
TestQueueProperties.settings = SETTINGS
TestPriorityQueueProperties = PriorityQueueMachine.TestCase
TestPriorityQueueProperties.settings = SETTINGS
