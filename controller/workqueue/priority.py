"""A work queue that hands out the highest-priority ready item first, with the work queue's dedup rules.

Go origin: controller-runtime ``pkg/controller/priorityqueue`` (``PriorityQueue``, ``AddOpts``, ``New``), the
default queue of controller-runtime controllers since v0.23, and ``handler.LowPriority``.

Guarantees:

- **Priority, then fair**: among ready items, the highest priority goes first; within a priority, the item
  that became ready first goes first. An item whose priority is raised goes to the back of its new priority.
- **Stingy**: an item handed out by ``get`` is not handed out again until ``done``; added meanwhile, it waits
  in the queue (counted by ``len``) and is handed out after ``done``. Adds of an item that is already queued
  collapse into one entry that keeps the **highest priority** and the **earliest ready time** of its adds
  (an item queued as ready stays ready).
- ``add_with_opts(item, priority=, after=, rate_limited=)``: ``after > 0`` delays the item; ``rate_limited``
  asks the rate limiter, and the shorter of the two delays wins (the limiter's when ``after`` is 0). A
  delayed item becomes ready after that many seconds of the injected clock; it is then placed by the time it
  became ready. ``add``, ``add_after`` and ``add_rate_limited`` are ``add_with_opts`` shorthands, so this
  queue satisfies :class:`~controller.workqueue.rate_limiting.RateLimitingInterface` and a controller may use
  it in place of a :class:`~controller.workqueue.rate_limiting.RateLimitingQueue`.
- Shut down: adds are ignored, and ``get`` returns ``(None, True)`` at once, even with items queued
  (controller-runtime's behaviour, unlike the client-go queue, which drains).
- Metrics: ``workqueue_depth`` is labelled with the item's priority (after 25 distinct priorities, with
  ``exceeded_cardinality_limit``); adds and depth count items when they become ready; every add with a
  positive delay counts one ``workqueue_retries_total``, duplicates included.
- One thread, ``workqueue/<name>/delay``, moves delayed items to ready; a named queue also owns
  ``workqueue/<name>/metrics``. Both are joined on shut down.

Deliberately different from controller-runtime: one lock and two conditions replace the add buffer and the
hand-off goroutines (adds and gets take the lock directly, so the lost hand-off deadlocks of
controller-runtime#3239 and #3538 cannot happen); the rate limiter is called before the lock is taken; the
delay thread has the delaying queue's 10 s heartbeat; ``shut_down_with_drain`` really waits until no item is
handed out (upstream it is ``shut_down``, as controller-runtime never drains); ``done`` of an item that was
not handed out raises :class:`ValueError`. Deliberately missing: adding several items in one call, and the
periodic state dump to the log.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

from controller.clock import REAL_CLOCK, Clock
from controller.workqueue.delaying import DelayThread
from controller.workqueue.metrics import MetricsProvider, new_retry_metrics
from controller.workqueue.queue import QueueCore
from controller.workqueue.rate_limiters import ItemExponentialFailureRateLimiter, RateLimiter
from controller.workqueue.rate_limiting import RateLimitingInterface

T = TypeVar("T", bound=Hashable)

LOW_PRIORITY = -100
"""The priority of events from an informer's initial list and from resyncs (controller-runtime
``handler.LowPriority``), so genuine changes overtake the replay of unchanged objects on a cold start."""


class PriorityInterface(RateLimitingInterface[T], Protocol[T]):
    """A rate-limiting queue with priorities (controller-runtime ``PriorityQueue``)."""

    def add_with_opts(
        self, item: T, *, priority: int = 0, after: float = 0.0, rate_limited: bool = False
    ) -> None:
        """Add ``item`` with a priority (higher goes first) and an optional delay."""
        ...

    def get_with_priority(
        self,
    ) -> tuple[T, int, Literal[False]] | tuple[None, int, Literal[True]]:
        """As ``get``, also returning the priority the item was queued with."""
        ...


@dataclass(slots=True, kw_only=True, eq=False)
class _Entry(Generic[T]):
    """One queued item (mutable, owned by the queue's lock).

    ``gen`` changes whenever the entry moves: heap tuples carrying another ``gen`` are stale. An entry
    handed out gets ``gen = -1``.
    """

    key: T
    priority: int
    counter: int  # FIFO position within a priority
    ready_at: float | None  # None: ready; else the clock time at which it becomes ready
    gen: int = 0


class PriorityQueue(QueueCore[T]):
    """controller-runtime's priority queue (see the module docstring).

    ``rate_limiter`` defaults to per-item exponential backoff from 5 ms to 1000 s, with no overall bucket
    (controller-runtime's default for this queue). Always owns the ``workqueue/<name>/delay`` thread: shut
    the queue down (or use it as a context manager).
    """

    def __init__(
        self,
        *,
        name: str = "",
        clock: Clock = REAL_CLOCK,
        metrics_provider: MetricsProvider | None = None,
        rate_limiter: RateLimiter[T] | None = None,
    ) -> None:
        self.rate_limiter: RateLimiter[T] = (
            rate_limiter if rate_limiter is not None else ItemExponentialFailureRateLimiter(0.005, 1000.0)
        )
        # Every queued item, ready or waiting. A key handed out (in _processing) and not yet done is not here
        # unless it was added again meanwhile.
        self._items: dict[T, _Entry[T]] = {}
        # Heap of (-priority, counter, gen, entry): the ready entries that may be handed out now. A ready
        # entry whose key is in _processing is "parked": in _items but not in this heap until done().
        self._ready: list[tuple[int, int, int, _Entry[T]]] = []
        # Heap of (ready_at, -priority, counter, gen, entry): the delayed entries.
        self._waiting: list[tuple[float, int, int, int, _Entry[T]]] = []
        # Ready entries, parked ones included: what len() reports.
        self._ready_count = 0
        self._counter = 0
        self._gen = 0
        self._retry_metrics = new_retry_metrics(metrics_provider, name)
        super().__init__(name=name, clock=clock, metrics_provider=metrics_provider, with_priority=True)
        self._delay = DelayThread(name, clock, self._promote_ready)
        self._delay.start()

    # --- adding ---------------------------------------------------------------------------------------

    def add_with_opts(
        self, item: T, *, priority: int = 0, after: float = 0.0, rate_limited: bool = False
    ) -> None:
        """Queue ``item`` with ``priority`` (higher first), ready after ``after`` seconds.

        With ``rate_limited``, the rate limiter's delay is used when it is shorter than ``after`` or
        ``after`` is 0. If ``item`` is already queued, it keeps the higher priority and the earlier ready
        time. Ignored once shutting down.
        """
        if item is None:
            raise TypeError("None cannot be queued: get() returns it to signal shutdown")
        if rate_limited:
            if self.shutting_down():  # spares the rate limiter a failure it would never see retried
                return
            limited = self.rate_limiter.when(item)
            if after == 0 or limited < after:
                after = limited
        with self._lock:
            if self._shutting_down:
                return
            ready_at: float | None = None
            if after > 0:
                ready_at = self._clock.monotonic() + after
                self._retry_metrics.retry()
            entry = self._items.get(item)
            if entry is None:
                entry = _Entry(key=item, priority=priority, counter=self._next_counter(), ready_at=ready_at)
                self._items[item] = entry
                if ready_at is None:
                    self._ready_count += 1
                    self._metrics.add(item, priority)
                    self._push_ready(entry)
                else:
                    self._push_waiting(entry)
                return
            self._update(entry, priority, ready_at)

    def _update(self, entry: _Entry[T], priority: int, ready_at: float | None) -> None:
        """Merge an add into a queued entry: the earlier ready time and the higher priority win."""
        previous = entry.ready_at
        was_ready = previous is None
        if previous is None:
            ready_at = None
        elif ready_at is not None:
            ready_at = min(ready_at, previous)
        raised = priority > entry.priority
        if not raised and ready_at == entry.ready_at:
            return  # nothing moves
        if raised:
            if was_ready:
                self._metrics.update_depth_with_priority(entry.priority, priority)
            entry.priority = priority
            entry.counter = self._next_counter()
        entry.ready_at = ready_at
        if ready_at is None:
            if not was_ready:
                self._ready_count += 1
                self._metrics.add(entry.key, entry.priority)
            self._push_ready(entry)
        else:
            self._push_waiting(entry)

    def add(self, item: T) -> None:
        """``add_with_opts(item)``: ready now, priority 0."""
        self.add_with_opts(item)

    def add_after(self, item: T, delay: float) -> None:
        """``add_with_opts(item, after=delay)``."""
        self.add_with_opts(item, after=delay)

    def add_rate_limited(self, item: T) -> None:
        """``add_with_opts(item, rate_limited=True)``."""
        self.add_with_opts(item, rate_limited=True)

    def _next_counter(self) -> int:
        self._counter += 1
        return self._counter

    def _push_ready(self, entry: _Entry[T]) -> None:
        self._gen += 1
        entry.gen = self._gen
        if entry.key in self._processing:
            return  # parked until done()
        heapq.heappush(self._ready, (-entry.priority, entry.counter, entry.gen, entry))
        self._not_empty.notify()

    def _push_waiting(self, entry: _Entry[T]) -> None:
        assert entry.ready_at is not None
        self._gen += 1
        entry.gen = self._gen
        heapq.heappush(self._waiting, (entry.ready_at, -entry.priority, entry.counter, entry.gen, entry))
        if self._waiting[0][3] == entry.gen:  # the new earliest: the delay thread may wait for later
            self._delay.wake.set()

    # --- handing out ----------------------------------------------------------------------------------

    def get_with_priority(self) -> tuple[T, int, Literal[False]] | tuple[None, int, Literal[True]]:
        """Block until an item can be processed; return it with its priority and ``False``.

        Returns ``(None, 0, True)`` once the queue is shutting down, queued items notwithstanding. The
        caller owns the item until it calls :meth:`done`.
        """
        with self._lock:
            while True:
                if self._shutting_down:
                    return None, 0, True
                entry = self._pop_ready()
                if entry is not None:
                    break
                self._not_empty.wait()
            del self._items[entry.key]
            if not self._items:
                self._items.clear()  # frees the emptied table (controller.workqueue.queue, "Memory")
            entry.gen = -1
            self._ready_count -= 1
            self._processing.add(entry.key)
            self._metrics.get(entry.key, entry.priority)
            return entry.key, entry.priority, False

    def get(self) -> tuple[T, Literal[False]] | tuple[None, Literal[True]]:
        """As :meth:`get_with_priority`, without the priority."""
        got = self.get_with_priority()
        if got[2]:
            return None, True
        return got[0], False

    def _pop_ready(self) -> _Entry[T] | None:
        while self._ready:
            _, _, gen, entry = heapq.heappop(self._ready)
            if entry.gen == gen:
                return entry
        return None

    def done(self, item: T) -> None:
        """Mark ``item``, returned by ``get``, as processed; if it was added meanwhile it may be handed out.

        Raises :class:`ValueError` if ``item`` is not handed out.
        """
        with self._lock:
            if item not in self._processing:
                raise ValueError(f"done({item!r}): the item is not being processed")
            self._processing.remove(item)
            self._metrics.done(item)
            entry = self._items.get(item)
            if entry is not None and entry.ready_at is None:
                self._push_ready(entry)  # it was parked
            if not self._processing:
                self._drained.notify_all()

    def __len__(self) -> int:
        """Ready items, including those added again while handed out; delayed items are not counted."""
        with self._lock:
            return self._ready_count

    # --- rate limiting --------------------------------------------------------------------------------

    def forget(self, item: T) -> None:
        """Clear ``item``'s backoff in the rate limiter; the caller still owes ``done``."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """The rate limiter's count of ``item``'s retries."""
        return self.rate_limiter.num_requeues(item)

    # --- delayed items --------------------------------------------------------------------------------

    def _promote_ready(self) -> float | None:
        """Move the delayed entries that are due to ready; return seconds until the next one, if any."""
        with self._lock:
            now = self._clock.monotonic()
            while self._waiting:
                ready_at, _, _, gen, entry = self._waiting[0]
                if entry.gen != gen:
                    heapq.heappop(self._waiting)
                    continue
                if ready_at > now:
                    self._delay.wake.clear()  # under the lock: a later _push_waiting sets it again
                    return ready_at - now
                heapq.heappop(self._waiting)
                entry.ready_at = None
                entry.counter = self._next_counter()  # placed by when it became ready
                self._ready_count += 1
                self._metrics.add(entry.key, entry.priority)
                self._push_ready(entry)
            self._delay.wake.clear()
            return None

    # --- shutting down (QueueCore; a shut down makes every get return (None, 0, True)) --------------------

    def _signal_threads(self) -> None:
        super()._signal_threads()
        self._delay.signal_stop()

    def _join_threads(self) -> None:
        super()._join_threads()
        self._delay.join()

    def __repr__(self) -> str:
        with self._lock:
            return (
                f"PriorityQueue(name={self.name!r}, ready={self._ready_count}, "
                f"waiting={len(self._items) - self._ready_count}, processing={len(self._processing)}, "
                f"shutting_down={self._shutting_down})"
            )


class PriorityQueueWrapper(Generic[T]):
    """Gives any :class:`~controller.workqueue.rate_limiting.RateLimitingInterface` the priority queue's
    surface, ignoring priorities (controller-runtime's internal ``priorityQueueWrapper``), so a worker loop
    can be written once against :class:`PriorityInterface`.

    ``add_with_opts`` maps ``rate_limited`` to ``add_rate_limited``, else a positive ``after`` to
    ``add_after``, else to ``add``; ``get_with_priority`` reports priority 0.
    """

    def __init__(self, queue: RateLimitingInterface[T]) -> None:
        self.queue = queue

    def add_with_opts(
        self, item: T, *, priority: int = 0, after: float = 0.0, rate_limited: bool = False
    ) -> None:
        if rate_limited:
            self.queue.add_rate_limited(item)
        elif after > 0:
            self.queue.add_after(item, after)
        else:
            self.queue.add(item)

    def get_with_priority(self) -> tuple[T, int, Literal[False]] | tuple[None, int, Literal[True]]:
        got = self.queue.get()
        if got[1]:
            return None, 0, True
        return got[0], 0, False

    def add(self, item: T) -> None:
        self.queue.add(item)

    def add_after(self, item: T, delay: float) -> None:
        self.queue.add_after(item, delay)

    def add_rate_limited(self, item: T) -> None:
        self.queue.add_rate_limited(item)

    def forget(self, item: T) -> None:
        self.queue.forget(item)

    def num_requeues(self, item: T) -> int:
        return self.queue.num_requeues(item)

    def get(self) -> tuple[T, Literal[False]] | tuple[None, Literal[True]]:
        return self.queue.get()

    def done(self, item: T) -> None:
        self.queue.done(item)

    def __len__(self) -> int:
        return len(self.queue)

    def shut_down(self) -> None:
        self.queue.shut_down()

    def shut_down_with_drain(self) -> None:
        self.queue.shut_down_with_drain()

    def shutting_down(self) -> bool:
        return self.queue.shutting_down()

    def __repr__(self) -> str:
        return f"PriorityQueueWrapper({self.queue!r})"
