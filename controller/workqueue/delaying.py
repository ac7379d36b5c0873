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
from collections.abc import Callable, Hashable
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


class DelayThread:
    """The thread ``workqueue/<name>/delay`` of a queue with delayed items, and how it is woken.

    It calls ``promote`` (which moves the items that are due to ready, under the queue's locks, and returns
    the seconds until the next one is due, or None), then sleeps on :attr:`wake` until then, at most
    :data:`MAX_WAIT`, and again. ``promote`` must clear :attr:`wake` under the lock that guards the delayed
    items, and an add that makes a new earliest item must set it under the same lock, so no wake-up is lost.
    Owned by the queue that starts it; :meth:`signal_stop` then :meth:`join` end it.
    """

    def __init__(self, name: str, clock: Clock, promote: Callable[[], float | None]) -> None:
        self.wake = threading.Event()
        self._clock = clock
        self._promote = promote
        self._stop = False
        self._thread = threading.Thread(
            target=self._run, name=f"workqueue/{name or 'unnamed'}/delay", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while True:
            next_in = self._promote()
            # Checked after promoting, not before: a stop signalled while promoting may have had its
            # wake-up cleared by ``promote``; the thread would then wait out a heartbeat (forever on a fake
            # clock).
            if self._stop:
                return
            self._clock.wait(self.wake, MAX_WAIT if next_in is None else min(next_in, MAX_WAIT))

    def signal_stop(self) -> None:
        """Tell the thread to exit after its current ``promote``; does not wait."""
        self._stop = True
        self.wake.set()

    def join(self) -> None:
        """Wait for the thread to exit (call :meth:`signal_stop` first)."""
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()


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
        # Woken when an entry becomes the earliest, or the queue is shutting down.
        self._delay = DelayThread(name, clock, self._add_ready)
        self._delay.start()

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
                self._delay.wake.set()

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
                    self._delay.wake.clear()
                    return ready, ready_at - now
                heapq.heappop(self._waiting)
                del self._ready_at[item]
                if not self._ready_at:
                    self._ready_at.clear()  # frees the emptied table (controller.workqueue.queue, "Memory")
                ready.append(item)
            self._delay.wake.clear()
            return ready, None

    def _add_ready(self) -> float | None:
        """The delay thread's turn: add the items that are due; seconds until the next one, if any."""
        ready, next_in = self._pop_ready()
        for item in ready:
            self.add(item)
        return next_in

    def _signal_threads(self) -> None:
        super()._signal_threads()
        self._delay.signal_stop()

    def _join_threads(self) -> None:
        super()._join_threads()
        self._delay.join()

    def _repr_fields(self) -> str:
        with self._waiting_lock:
            waiting = len(self._ready_at)
        return f"{super()._repr_fields()}, waiting={waiting}"
