"""A work queue that can add an item later: ``add_after(item, delay)``.

Go origin: client-go ``util/workqueue/delaying_queue.go`` (``TypedDelayingInterface``, ``delayingType``).

Guarantees, on top of :class:`~controller.workqueue.queue.Queue`'s:

- ``add_after(item, delay)`` adds ``item`` once ``delay`` seconds of the injected clock have passed; a delay
  of zero or less adds it at once. Until then the item is not dirty: a plain ``add`` of it in the meantime
  is processed at once, and the delayed add still happens later (and may be deduplicated then).
- While an item waits, further ``add_after`` calls for it keep the earliest ready time.
- Items that become ready together are added in ready-time order (then call order).
- Every ``add_after`` on a queue that is not shutting down counts one ``workqueue_retries_total``, whatever
  the delay, as client-go does.
- One thread per queue, ``workqueue/<name>/delay``, moves ready items into the queue. It sleeps through
  ``clock.wait`` until the earliest ready time, an earlier ``add_after``, or client-go's 10 s heartbeat,
  and is joined by ``shut_down``/``shut_down_with_drain``. Items still waiting at shut down are dropped.

Deliberately missing: client-go's buffered hand-off channel (``waitingForAddCh``, 1000 entries):
``add_after`` puts the entry on the heap itself under a short lock and wakes the thread only when the entry
is the new earliest, so it never blocks on a full channel. Injecting a custom inner queue
(``TypedDelayingQueueConfig.Queue``) is replaced by subclassing plus the injectable ordering.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Hashable
from typing import Protocol, TypeVar

from controller.clock import REAL_CLOCK, Clock
from controller.workqueue.metrics import MetricsProvider, new_retry_metrics
from controller.workqueue.queue import Interface, Ordering, Queue

T = TypeVar("T", bound=Hashable)

MAX_WAIT = 10.0
"""The waiting thread's heartbeat in seconds (client-go ``maxWait``): insurance against a missed wake-up."""


class DelayingInterface(Interface[T], Protocol[T]):
    """A queue that can add an item later (client-go ``TypedDelayingInterface``)."""

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` once ``delay`` seconds have passed (at once if ``delay <= 0``)."""
        ...


class DelayingQueue(Queue[T]):
    """A :class:`~controller.workqueue.queue.Queue` with :meth:`add_after` (see the module docstring).

    Always owns the ``workqueue/<name>/delay`` thread: shut the queue down (or use it as a context manager).
    """

    def __init__(
        self,
        *,
        name: str = "",
        clock: Clock = REAL_CLOCK,
        metrics_provider: MetricsProvider | None = None,
        ordering: Ordering[T] | None = None,
    ) -> None:
        super().__init__(name=name, clock=clock, metrics_provider=metrics_provider, ordering=ordering)
        self._retry_metrics = new_retry_metrics(metrics_provider, name)
        # Guards the three fields below; never held while taking the queue's lock.
        self._waiting_lock = threading.Lock()
        # Min-heap of (ready_at, seq, item). An entry is live iff _ready_at[item] == ready_at; an entry left
        # behind by an earlier ready time for the same item is skipped when it surfaces.
        self._waiting: list[tuple[float, int, T]] = []
        # The ready time of every waiting item: the earliest of its add_after calls.
        self._ready_at: dict[T, float] = {}
        self._seq = 0
        # Set to wake the delay thread: an entry became the earliest, or the queue is shutting down.
        self._wake = threading.Event()
        self._stop = False
        self._delay_thread = threading.Thread(
            target=self._waiting_loop, name=f"workqueue/{name or 'unnamed'}/delay", daemon=True
        )
        self._delay_thread.start()

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` after ``delay`` seconds of the queue's clock; at once if ``delay <= 0``.

        Ignored once shutting down. If ``item`` is already waiting, the earlier ready time wins.
        """
        if item is None:
            raise TypeError("None cannot be queued: get() returns it to signal shutdown")
        if self.shutting_down():
            return
        self._retry_metrics.retry()
        if delay <= 0:
            self.add(item)
            return
        with self._waiting_lock:
            ready_at = self._clock.monotonic() + delay
            known = self._ready_at.get(item)
            if known is not None and known <= ready_at:
                return
            self._ready_at[item] = ready_at
            self._seq += 1
            heapq.heappush(self._waiting, (ready_at, self._seq, item))
            if self._waiting[0][1] == self._seq:  # the new earliest: the thread may be waiting for later
                self._wake.set()

    def _pop_ready(self) -> tuple[list[T], float | None]:
        """Remove the waiting items that are ready now; return them and the next ready time."""
        ready: list[T] = []
        with self._waiting_lock:
            now = self._clock.monotonic()
            while self._waiting:
                ready_at, _, item = self._waiting[0]
                if self._ready_at.get(item) != ready_at:
                    heapq.heappop(self._waiting)  # superseded by an earlier ready time
                    continue
                if ready_at > now:
                    # Clear under the lock: an add_after from here on sets it again.
                    self._wake.clear()
                    return ready, ready_at - now
                heapq.heappop(self._waiting)
                del self._ready_at[item]
                ready.append(item)
            self._wake.clear()
            return ready, None

    def _waiting_loop(self) -> None:
        while not self._stop:
            ready, next_in = self._pop_ready()
            for item in ready:
                self.add(item)
            timeout = MAX_WAIT if next_in is None else min(next_in, MAX_WAIT)
            self._clock.wait(self._wake, timeout)

    def _signal_threads(self) -> None:
        super()._signal_threads()
        self._stop = True
        self._wake.set()

    def _join_threads(self) -> None:
        super()._join_threads()
        if self._delay_thread.is_alive() and self._delay_thread is not threading.current_thread():
            self._delay_thread.join()

    def _repr_fields(self) -> str:
        with self._waiting_lock:
            waiting = len(self._ready_at)
        return f"{super()._repr_fields()}, waiting={waiting}"
