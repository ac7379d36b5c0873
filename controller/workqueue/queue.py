"""The work queue: fair, stingy, for many producers and consumers, with shutdown notifications.

Go origin: client-go ``util/workqueue/queue.go`` (``Typed``, ``TypedInterface``, ``Queue``, ``DefaultQueue``).
Properties (client-go ``doc.go``):

- **Fair**: items are processed in the order in which they are added (the default :class:`FifoOrdering`;
  another :class:`Ordering` may be injected, under the same dedup rules).
- **Stingy**: an item is never processed by two workers at once, and an item added several times before it
  is processed is processed once.
- **Multiple producers and consumers**: every method may be called from any thread. An item added again
  while it is being processed is processed again, exactly once, after :meth:`Queue.done`.
- **Shutdown notifications**: after :meth:`Queue.shut_down`, adds are ignored, workers drain what is queued,
  then :meth:`Queue.get` returns ``(None, True)``. :meth:`Queue.shut_down_with_drain` also waits until no
  item is being processed.

Items are hashable values (controllers use ``reconcile.Request``). ``None`` is reserved: :meth:`Queue.get`
returns it on shut down, so a worker may test ``item is None``, which also narrows the item's type for mypy
(unpacking the tuple loses its link to ``shutdown``). A named queue records controller-runtime's
``workqueue_*`` metrics (:mod:`controller.workqueue.metrics`) and owns the ``workqueue/<name>/metrics``
thread, joined on shut down.

Memory: a CPython set, like a Go map, keeps the table it grew to when its entries are deleted, and so does
a dict until later inserts make it resize. A restart's initial list fills a controller's queue at once,
where steady work never does: a priority queue that had held 30,000 keys kept 2.5 MiB of empty tables (its
item table and the metrics' timestamps) once it had handed every key out and nothing more came. Every
table keyed by queued items is cleared the moment it empties (``clear`` frees the table; a dict then
allocates a small one on its next insert, a set uses its built-in one), so an idle queue holds no more than
a fresh one.

Deliberately missing: ``get(timeout=...)`` (client-go has none; a worker stops through shut down), the
untyped/deprecated constructors, and the process-global metrics provider. Misuse fails loudly where
client-go is silent: ``done`` of an item that is not being processed raises :class:`ValueError` (client-go
would queue the item twice).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable
from types import TracebackType
from typing import Generic, Literal, Protocol, Self, TypeVar

from controller.clock import REAL_CLOCK, Clock
from controller.workqueue.metrics import (
    MetricsProvider,
    NoQueueMetrics,
    QueueMetrics,
    UnfinishedWorkUpdater,
    new_queue_metrics,
)

T = TypeVar("T", bound=Hashable)


class Interface(Protocol[T]):
    """What every queue in this package offers (client-go ``TypedInterface``)."""

    def add(self, item: T) -> None:
        """Mark ``item`` as needing processing; ignored once shutting down."""
        ...

    def __len__(self) -> int:
        """Items waiting to be handed out; informational only (never gate ``add``/``get`` on it)."""
        ...

    def get(self) -> tuple[T, Literal[False]] | tuple[None, Literal[True]]:
        """Block until an item can be processed; ``(None, True)`` means stop. Call :meth:`done` after."""
        ...

    def done(self, item: T) -> None:
        """Mark ``item`` as processed (requeues it if it was added meanwhile)."""
        ...

    def shut_down(self) -> None:
        """Ignore new adds; workers drain the queue, then ``get`` reports shutdown."""
        ...

    def shut_down_with_drain(self) -> None:
        """As :meth:`shut_down`, then wait until no item is being processed."""
        ...

    def shutting_down(self) -> bool:
        """Whether a shut down has begun."""
        ...


class Ordering(Protocol[T]):
    """The order in which queued items are handed out (client-go ``Queue``, ``TypedQueueConfig.Queue``).

    The queue calls these with its lock held and only ever pushes an item that is not already in the
    ordering; dedup and the never-concurrently rule stay in the queue.
    """

    def touch(self, item: T) -> None:
        """``item``, already queued, was added again (an ordering may move it)."""
        ...

    def push(self, item: T) -> None:
        """Queue a new item."""
        ...

    def pop(self) -> T:
        """Remove and return the next item; only called when ``len(self) > 0``."""
        ...

    def __len__(self) -> int: ...


class FifoOrdering(Generic[T]):
    """First in, first out (client-go ``DefaultQueue``); :meth:`touch` keeps an item's place."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: deque[T] = deque()

    def touch(self, item: T) -> None:
        pass

    def push(self, item: T) -> None:
        self._items.append(item)

    def pop(self) -> T:
        return self._items.popleft()

    def __len__(self) -> int:
        return len(self._items)


class QueueCore(Generic[T]):
    """What every queue of this package shares: the lock and its two conditions, the items being processed,
    the metrics recorder with its updater thread, and shutting down.

    Subclasses keep their own queued items, hand them out under ``_lock`` (waking getters through
    ``_not_empty``), add every item handed out to ``_processing`` and remove it on ``done``, notifying
    ``_drained`` when ``_processing`` becomes empty. Threads a subclass owns are signalled and joined by
    overriding :meth:`_signal_threads` and :meth:`_join_threads` (calling ``super()``).
    """

    def __init__(
        self,
        *,
        name: str,
        clock: Clock,
        metrics_provider: MetricsProvider | None,
        with_priority: bool = False,
    ) -> None:
        self.name = name
        self._clock = clock
        # One lock; getters wait on _not_empty, shut_down_with_drain waits on _drained.
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._drained = threading.Condition(self._lock)
        # Items handed out by get() and not yet done().
        self._processing: set[T] = set()
        self._shutting_down = False
        # True while a shut_down_with_drain is waiting; shut_down() clears it to stop the wait.
        self._drain = False
        self._metrics: QueueMetrics[T] | NoQueueMetrics[T] = new_queue_metrics(
            metrics_provider, name, clock, with_priority=with_priority
        )
        self._updater: UnfinishedWorkUpdater | None = None
        if not isinstance(self._metrics, NoQueueMetrics):
            self._updater = UnfinishedWorkUpdater(name, clock, self._update_unfinished_work)
            self._updater.start()

    def shut_down(self) -> None:
        """Ignore new adds and wake every getter (a plain queue's getters drain what is queued first, the
        priority queue's stop at once). Does not wait for items being processed; also ends a
        :meth:`shut_down_with_drain` that is waiting (a second SIGTERM). Joins the threads this queue owns.
        Idempotent."""
        self._signal_threads()
        with self._lock:
            self._drain = False
            self._shutting_down = True
            self._not_empty.notify_all()
            self._drained.notify_all()
        self._join_threads()

    def shut_down_with_drain(self) -> None:
        """As :meth:`shut_down`, then block until no item is being processed.

        Workers must keep calling ``done``, or this blocks until :meth:`shut_down` is called. An item added
        again while it was being processed is queued by its ``done`` and must be handed out and done too
        (workers keep calling ``get`` until it reports the shutdown).
        """
        self._signal_threads()
        with self._lock:
            self._drain = True
            self._shutting_down = True
            self._not_empty.notify_all()
        self._join_threads()
        with self._lock:
            while self._processing and self._drain:
                self._drained.wait()

    def shutting_down(self) -> bool:
        """Whether :meth:`shut_down` or :meth:`shut_down_with_drain` has been called."""
        with self._lock:
            return self._shutting_down

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shut_down()

    # --- owned threads (subclasses add theirs) ------------------------------------------------------------

    def _signal_threads(self) -> None:
        """Tell every owned thread to stop; must not block."""
        if self._updater is not None:
            self._updater.signal_stop()

    def _join_threads(self) -> None:
        """Wait for every owned thread to exit; called without the lock."""
        if self._updater is not None:
            self._updater.join()

    def _update_unfinished_work(self) -> None:
        with self._lock:
            if not self._shutting_down:
                self._metrics.update_unfinished_work()


class Queue(QueueCore[T]):
    """A fair, stingy work queue (see the module docstring).

    ``name`` labels the queue's metrics (``workqueue_*{name=<name>,controller=<name>}``); an unnamed queue
    records none. A named queue that records metrics owns a thread (``workqueue/<name>/metrics``) joined by
    :meth:`shut_down`, so always shut a queue down (or use it as a context manager).
    """

    def __init__(
        self,
        *,
        name: str = "",
        clock: Clock = REAL_CLOCK,
        metrics_provider: MetricsProvider | None = None,
        ordering: Ordering[T] | None = None,
    ) -> None:
        # The order in which items are handed out. Every item in it is in _dirty and not in _processing.
        self._queue: Ordering[T] = ordering if ordering is not None else FifoOrdering()
        # Every item that needs processing: queued ones, and processing ones that were added again. An item
        # in _processing may also be in _dirty; done() then pushes it to _queue.
        self._dirty: set[T] = set()
        super().__init__(name=name, clock=clock, metrics_provider=metrics_provider)

    def add(self, item: T) -> None:
        """Mark ``item`` as needing processing.

        Ignored once shutting down, and when ``item`` is already dirty (the ordering is told through
        ``touch`` if the item is queued). An item being processed is queued again on :meth:`done`.
        """
        if item is None:
            raise TypeError("None cannot be queued: get() returns it to signal shutdown")
        with self._lock:
            if self._shutting_down:
                return
            if item in self._dirty:
                if item not in self._processing:
                    self._queue.touch(item)
                return
            self._metrics.add(item)
            self._dirty.add(item)
            if item in self._processing:
                return
            self._queue.push(item)
            self._not_empty.notify()

    def __len__(self) -> int:
        """Queued items, for information only (items being processed and added again are not counted)."""
        with self._lock:
            return len(self._queue)

    def get(self) -> tuple[T, Literal[False]] | tuple[None, Literal[True]]:
        """Block until an item can be processed and return ``(item, False)``.

        Returns ``(None, True)`` once the queue is shutting down and empty: the worker should exit. The
        caller owns the item until it calls :meth:`done` with it; until then no other worker gets it.
        """
        with self._lock:
            while not len(self._queue) and not self._shutting_down:
                self._not_empty.wait()
            if not len(self._queue):
                return None, True
            item = self._queue.pop()
            self._metrics.get(item)
            self._processing.add(item)
            self._dirty.discard(item)
            if not self._dirty:
                self._dirty.clear()  # frees the emptied table (the module docstring, "Memory")
            return item, False

    def done(self, item: T) -> None:
        """Mark ``item``, returned by :meth:`get`, as processed.

        If it was added again while being processed it is queued again now. Raises :class:`ValueError` if
        ``item`` is not being processed.
        """
        with self._lock:
            if item not in self._processing:
                raise ValueError(f"done({item!r}): the item is not being processed")
            self._metrics.done(item)
            self._processing.remove(item)
            if item in self._dirty:
                self._queue.push(item)
                self._not_empty.notify()
            elif not self._processing:
                self._drained.notify_all()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._repr_fields()})"

    def _repr_fields(self) -> str:
        with self._lock:
            return (
                f"name={self.name!r}, queued={len(self._queue)}, processing={len(self._processing)}, "
                f"shutting_down={self._shutting_down}"
            )
