"""The shared informer: one reflector and one indexed cache per kind, fanned out to any number of handlers.

Go origin: client-go ``tools/cache/shared_informer.go`` (``sharedIndexInformer``, ``sharedProcessor``,
``processorListener``, ``ResourceEventHandler``), ``controller.go`` (``processDeltas``,
``processReplacedAllInfo``), ``the_real_fifo.go`` (in-order delivery, ``reconcileReplacement``) and
``synctrack`` (per-handler ``HasSynced``); ``TransformStripManagedFields`` from controller-runtime.

Guarantees (the contract handlers may rely on):

- **Eventual consistency.** The cache converges on the API server's state; handlers see every change that
  the cache sees, in the order the cache saw it. Events for one object are never reordered.
- **Apply, then notify.** Each watch event is applied to the cache and then handed to every handler, in order,
  on the informer's one processing thread (client-go's ``RealFIFO`` with in-order informers). A relist
  (``replace``) updates the cache in one step, then notifies deletions first, then adds and updates in list
  order. So when a handler runs, the cache already holds the object it is told about (or a newer one).
- ``on_add(obj, is_in_initial_list)`` — ``is_in_initial_list`` is True for the objects of the first list, and
  for the synthetic adds a handler registered late receives for everything already cached.
- ``on_update(old, new)`` — also called on a relist and on a resync even if nothing changed; such an update
  has ``old["metadata"]["resourceVersion"] == new[...]`` and reaches only handlers whose resync is due
  (every handler, when resync is off).
- ``on_delete(obj)`` — ``obj`` is the last state the cache had, or a
  :class:`~controller.informers.store.DeletedFinalStateUnknown` tombstone when the deletion was missed while
  the watch was down and only noticed by a relist.
- **A slow handler never blocks another, nor the cache.** Each registration has its own unbounded buffer and
  its own delivery thread (``informer/<name>/handler-<i>``). A handler that raises is logged
  (``informer.handler_failed``) and gets the next notification; the failed one is not retried.
- **Handlers must not mutate what they receive**: objects are the cache's, shared by every reader. Copy
  first. The mutation detector (``KUBE_CACHE_MUTATION_DETECTOR=true`` or ``mutation_detector=True``) catches
  offenders in tests.
- :meth:`SharedIndexInformer.has_synced` is True once the first list has been stored and dispatched; a
  :class:`Registration`'s ``has_synced()`` also waits until that handler has *run* on every initial add.
- **Transform before storage.** ``transform`` (default :func:`strip_managed_fields`) is applied to every
  object before it is stored or handed out; it may modify the freshly decoded object in place and must return
  it (or a replacement).
- **Resync.** Per-handler periods (at least 1 s) as client-go: a handler asking for less than the informer's
  resync check period before start lowers that period; after start it is raised to it. A resync replays the
  cache as ``on_update(obj, obj)`` to the handlers whose period has elapsed; it makes no API call.
- **Threads.** ``start()`` runs the informer on a thread ``informer/<name>`` and ``stop()`` stops and joins
  every thread it started (processing, per-handler delivery, resync, mutation detector); ``run(stop_event)``
  does the same in the caller's thread. Notifications still buffered at stop are dropped, as upstream. No lock
  is held while a handler runs.

Lists: the reflector's first list is a streaming list (``WatchList``) where the API server serves one, so
objects arrive and are transformed one at a time; a plain paginated list otherwise (see
``controller.informers.reflector``). Either way the handlers see the same initial adds.

GC: the reflector raises the cyclic GC's thresholds while it lists, and freezes the cache built by the first
list (see ``_ListGcGuard`` in ``controller.informers.reflector``), when ``gc_tuning=True``: off by default,
because it changes interpreter-wide state; the entry point opts in.

Deliberately missing: the DeltaFIFO path (in-order informers are GA upstream), batch processing,
``SetWatchErrorHandler`` (errors are logged by the reflector), informer metrics, and ``RemoveEventHandler``'s
blocking variant ``ShutDownEventHandler`` (:meth:`SharedIndexInformer.remove_event_handler` joins the
delivery thread unless called from it).
"""

from __future__ import annotations

import random
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from controller.clock import REAL_CLOCK, Clock
from controller.informers.mutation_detector import MutationDetector, enabled_by_environment
from controller.informers.reflector import Backoff, ListerWatcher, Reflector
from controller.informers.store import (
    DeletedFinalStateUnknown,
    IndexFunc,
    ThreadSafeStore,
    deletion_handling_meta_namespace_key,
)

log = structlog.get_logger(__name__)

MINIMUM_RESYNC_PERIOD = 1.0
"""No handler resyncs more often than this (client-go ``minimumResyncPeriod``)."""

TransformFunc = Callable[[Any], Any]
"""Applied to each object before it is stored; may modify the object in place; returns what to store."""


def strip_managed_fields(obj: Any) -> Any:
    """Drop ``metadata.managedFields`` (controller-runtime ``TransformStripManagedFields``).

    Server-side-apply bookkeeping is 20-40 % of an object's bytes and no controller reads it.
    """
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
    return obj


class ResourceEventHandler(Protocol):
    """Receives an informer's notifications (client-go ``ResourceEventHandler``). Must not mutate objects."""

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None: ...

    def on_update(self, old: Any, new: Any) -> None: ...

    def on_delete(self, obj: Any) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceEventHandlerFuncs:
    """A :class:`ResourceEventHandler` from optional functions; a missing one ignores its events."""

    add_func: Callable[[Any, bool], None] | None = None
    update_func: Callable[[Any, Any], None] | None = None
    delete_func: Callable[[Any], None] | None = None

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        if self.add_func is not None:
            self.add_func(obj, is_in_initial_list)

    def on_update(self, old: Any, new: Any) -> None:
        if self.update_func is not None:
            self.update_func(old, new)

    def on_delete(self, obj: Any) -> None:
        if self.delete_func is not None:
            self.delete_func(obj)


# Notifications are tuples (kind, a, b) to keep buffering cheap.
_ADD = 0  # (ADD, obj, is_in_initial_list)
_UPDATE = 1  # (UPDATE, old, new)
_DELETE = 2  # (DELETE, obj, None)
_Notification = tuple[int, Any, Any]


def _determine_resync_period(desired: float, check: float) -> float:
    """client-go ``determineResyncPeriod``."""
    if desired == 0:
        return 0.0
    if check == 0:
        log.warning("informer.resync_unsupported", desired_s=desired)
        return 0.0
    if desired < check:
        log.warning("informer.resync_raised", desired_s=desired, resync_check_period_s=check)
        return check
    return desired


class Registration:
    """One handler's registration: its buffer, its delivery thread and its own sync state.

    Returned by :meth:`SharedIndexInformer.add_event_handler`. Invariants (under ``_cond``):
    ``_pending_initial`` counts initial-list adds buffered or being handled; ``has_synced()`` is
    ``_upstream_synced and _pending_initial == 0``.
    """

    def __init__(
        self,
        handler: ResourceEventHandler,
        *,
        thread_name: str,
        requested_resync_period: float,
        resync_period: float,
        now: float,
        clock: Clock,
    ) -> None:
        self.handler = handler
        self._clock = clock
        self.thread_name = thread_name
        self._cond = threading.Condition(threading.Lock())
        self._buffer: deque[_Notification] = deque()
        self._stopped = False
        self._pending_initial = 0
        self._upstream_synced = False
        self._synced_event = threading.Event()
        self._synced_or_stopped = threading.Event()
        self._thread: threading.Thread | None = None
        # Resync bookkeeping, guarded by the informer's lock.
        self.requested_resync_period = requested_resync_period
        self.resync_period = resync_period
        self.next_resync = now + resync_period
        self.is_syncing = True  # client-go adds every listener as "syncing" until the first resync check

    # --- the sync tracker (synctrack.SingleFileTracker) --------------------------------------------------

    def has_synced(self) -> bool:
        """True once the informer has synced and this handler has run on every initial-list add."""
        return self._synced_event.is_set()

    def wait_for_synced(self, timeout: float | None = None) -> bool:
        """Block until :meth:`has_synced` (True), or ``timeout`` seconds pass or delivery stops (False)."""
        self._clock.wait(self._synced_or_stopped, timeout)
        return self._synced_event.is_set()

    def _mark_upstream_synced(self) -> None:
        with self._cond:
            self._upstream_synced = True
            self._update_synced_locked()

    def _update_synced_locked(self) -> None:
        if self._upstream_synced and self._pending_initial == 0:
            self._synced_event.set()
            self._synced_or_stopped.set()

    # --- buffering and delivery (processorListener.add/pop/run) ------------------------------------------

    def _add(self, notification: _Notification) -> None:
        with self._cond:
            if self._stopped:
                return
            if notification[0] == _ADD and notification[2]:
                self._pending_initial += 1
            self._buffer.append(notification)
            self._cond.notify()

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def _stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._buffer.clear()
            self._synced_or_stopped.set()
            self._cond.notify_all()

    def _join(self) -> None:
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._buffer and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                kind, a, b = self._buffer.popleft()
                pending = len(self._buffer)
            try:
                if kind == _ADD:
                    self.handler.on_add(a, b)
                elif kind == _UPDATE:
                    self.handler.on_update(a, b)
                else:
                    self.handler.on_delete(a)
            except Exception as exc:
                log.error(
                    "informer.handler_failed",
                    handler=self.thread_name,
                    error=str(exc),
                    error_type=type(exc).__name__,
                    pending=pending,
                    exc_info=True,
                )
            finally:
                if kind == _ADD and b:
                    with self._cond:
                        self._pending_initial -= 1
                        self._update_synced_locked()

    def pending(self) -> int:
        """How many notifications wait in this handler's buffer."""
        with self._cond:
            return len(self._buffer)

    def __repr__(self) -> str:
        with self._cond:
            return (
                f"Registration(thread={self.thread_name!r}, pending={len(self._buffer)}, "
                f"synced={self._synced_event.is_set()}, resync_period={self.resync_period})"
            )


class _StoreAdapter:
    """What the reflector writes to: applies each change to the cache, then dispatches it (processDeltas)."""

    def __init__(self, informer: SharedIndexInformer) -> None:
        self._informer = informer

    def add(self, obj: Any) -> None:
        self._informer._process_upsert(obj)

    def update(self, obj: Any) -> None:
        self._informer._process_upsert(obj)

    def delete(self, obj: Any) -> None:
        self._informer._process_delete(obj)

    def replace(self, items: list[Any], resource_version: str) -> None:
        self._informer._process_replace(items, resource_version)

    def resync(self) -> None:
        self._informer._process_resync()

    def bookmark(self, resource_version: str) -> None:
        self._informer._indexer.bookmark(resource_version)


class SharedIndexInformer:
    """Lists and watches one kind into an indexed cache and notifies every registered handler.

    ``lister_watcher`` is the seam to the API (``client.lister_watcher(gvk, ...)``); ``name`` names threads
    and log lines (``informer/<name>``); ``resync_period`` is the default handler resync period and the resync
    check period (seconds, 0 = never); ``indexers`` are added to the cache before start. ``use_watch_list``
    (None: on unless ``KUBE_FEATURE_WatchListClient`` says false) makes the reflector's lists streaming lists.
    """

    def __init__(
        self,
        lister_watcher: ListerWatcher,
        *,
        name: str,
        transform: TransformFunc | None = strip_managed_fields,
        resync_period: float = 0.0,
        indexers: Mapping[str, IndexFunc] | None = None,
        clock: Clock = REAL_CLOCK,
        mutation_detector: bool | None = None,
        backoff: Backoff | None = None,
        watch_list_page_size: int = 0,
        gc_tuning: bool = False,
        rng: random.Random | None = None,
        use_watch_list: bool | None = None,
    ) -> None:
        self.name = name
        self._lw = lister_watcher
        self._transform = transform
        self._clock = clock
        self._indexer = ThreadSafeStore(indexers, key_func=deletion_handling_meta_namespace_key)
        self._default_event_handler_resync_period = resync_period
        self._resync_check_period = resync_period
        self._backoff = backoff
        self._watch_list_page_size = watch_list_page_size
        self._gc_tuning = gc_tuning
        self._rng = rng
        self._use_watch_list = use_watch_list
        if mutation_detector is None:
            mutation_detector = enabled_by_environment()
        self.mutation_detector = MutationDetector(name, clock=clock) if mutation_detector else None

        # The lock serialises every change to the cache with its dispatch, and guards the fields below
        # (client-go's blockDeltas + startedLock + listenersLock). Never held while user code runs, except
        # index functions (inside the store) and the mutation detector's serialisation.
        self._lock = threading.Lock()
        self._registrations: list[Registration] = []
        self._handler_seq = 0
        self._started = False
        self._stopped = False
        self._listeners_started = False
        self._synced = threading.Event()
        self._synced_or_stopped = threading.Event()

        self._reflector: Reflector | None = None
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None

    # --- registration ------------------------------------------------------------------------------------

    def add_event_handler(
        self, handler: ResourceEventHandler, resync_period: float | None = None
    ) -> Registration:
        """Register ``handler``; after start it first receives a synthetic add for each cached object."""
        with self._lock:
            if self._stopped:
                raise RuntimeError(f"informer {self.name} has stopped: handler not added")
            period = self._default_event_handler_resync_period if resync_period is None else resync_period
            if period > 0:
                if period < MINIMUM_RESYNC_PERIOD:
                    log.warning("informer.resync_too_small", informer=self.name, resync_period_s=period)
                    period = MINIMUM_RESYNC_PERIOD
                if period < self._resync_check_period:
                    if self._started:
                        period = self._resync_check_period
                    else:
                        self._resync_check_period = period
                        for reg in self._registrations:
                            reg.resync_period = _determine_resync_period(reg.requested_resync_period, period)
            reg = Registration(
                handler,
                thread_name=f"informer/{self.name}/handler-{self._handler_seq}",
                requested_resync_period=period,
                resync_period=_determine_resync_period(period, self._resync_check_period),
                now=self._clock.monotonic(),
                clock=self._clock,
            )
            self._handler_seq += 1
            self._registrations.append(reg)
            if self._started:
                # Join safely: under the lock no change is dispatched, so the synthetic adds and the
                # live stream neither overlap nor leave a gap.
                for obj in self._indexer.list():
                    reg._add((_ADD, obj, True))
            if self._synced.is_set():
                reg._mark_upstream_synced()
            if self._listeners_started:
                reg._start()
            return reg

    def remove_event_handler(self, registration: Registration) -> None:
        """Stop delivering to ``registration``; joins its thread unless called from it. Idempotent."""
        with self._lock:
            if registration not in self._registrations:
                return
            self._registrations.remove(registration)
            registration._stop()
        registration._join()

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add indices to the cache (also after start: they are built from the current content)."""
        with self._lock:
            if self._stopped:
                raise RuntimeError(f"informer {self.name} has stopped: indexers not added")
        self._indexer.add_indexers(indexers)

    # --- state -------------------------------------------------------------------------------------------

    def get_store(self) -> ThreadSafeStore:
        """The cache. Objects in it are shared and read-only by contract."""
        return self._indexer

    get_indexer = get_store

    def has_synced(self) -> bool:
        """True once the first list has been stored and dispatched to the handlers' buffers."""
        return self._synced.is_set()

    def wait_for_synced(self, timeout: float | None = None) -> bool:
        """Block until :meth:`has_synced` (True), or until ``timeout`` seconds pass or the informer is
        stopped (False)."""
        self._clock.wait(self._synced_or_stopped, timeout)
        return self._synced.is_set()

    def has_started(self) -> bool:
        with self._lock:
            return self._started

    def is_stopped(self) -> bool:
        with self._lock:
            return self._stopped

    @property
    def last_sync_resource_version(self) -> str:
        """The resourceVersion the reflector last synced to (``""`` before the first list)."""
        r = self._reflector
        return r.last_sync_resource_version if r is not None else ""

    # --- running -----------------------------------------------------------------------------------------

    def start(self) -> None:
        """Run the informer on its own thread ``informer/<name>``."""
        with self._lock:
            if self._thread is not None or self._started or self._stopped:
                raise RuntimeError(f"informer {self.name} was already started (or stopped)")
            self._thread = threading.Thread(
                target=self.run, args=(self._stop_event,), name=f"informer/{self.name}", daemon=True
            )
        self._thread.start()

    def stop(self) -> None:
        """Stop and join every thread; raise :class:`CacheMutationError` if the detector saw a mutation."""
        self._stop_event.set()
        self._synced_or_stopped.set()
        with self._lock:
            if not self._started:  # never ran: nothing to join, but nothing may be added or awaited either
                self._stopped = True
                for reg in self._registrations:
                    reg._stop()
        r = self._reflector
        if r is not None:
            r.interrupt()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join()
        if self.mutation_detector is not None:
            self.mutation_detector.check_on_stop()

    def run(self, stop_event: threading.Event) -> None:
        """List, watch and dispatch until ``stop_event`` is set; then stop and join every thread. Blocks.

        An informer stopped before it ran returns at once: ``start()`` followed at once by ``stop()`` may
        reach here only after the stop, and that is a clean shut down, not misuse.
        """
        with self._lock:
            if self._stopped and not self._started:
                return
            if self._started:
                raise RuntimeError(f"informer {self.name} may run only once")
            self._started = True
            self._stop_event = stop_event
            reflector = Reflector(
                self._lw,
                _StoreAdapter(self),
                name=self.name,
                resync_period=self._resync_check_period,
                should_resync=self._should_resync,
                clock=self._clock,
                backoff=self._backoff,
                watch_list_page_size=self._watch_list_page_size,
                gc_tuning=self._gc_tuning,
                rng=self._rng,
                transform=self._transform,
                use_watch_list=self._use_watch_list,
            )
            self._reflector = reflector
            for reg in self._registrations:
                reg._start()
            self._listeners_started = True

        def stop_watch() -> None:
            stop_event.wait()
            reflector.interrupt()

        helpers = [threading.Thread(target=stop_watch, name=f"informer/{self.name}/stop", daemon=True)]
        if self.mutation_detector is not None:
            helpers.append(
                threading.Thread(
                    target=self.mutation_detector.run,
                    args=(stop_event,),
                    name=f"informer/{self.name}/mutation-detector",
                    daemon=True,
                )
            )
        for t in helpers:
            t.start()
        log.info("informer.started", informer=self.name, resync_period_s=self._resync_check_period)
        try:
            reflector.run(stop_event)
        finally:
            stop_event.set()
            self._synced_or_stopped.set()
            with self._lock:
                self._stopped = True
                registrations = list(self._registrations)
                for reg in registrations:
                    reg._stop()
            for reg in registrations:
                reg._join()
            for t in helpers:
                t.join()
            log.info("informer.stopped", informer=self.name)

    # --- processing (the informer thread; client-go processDeltas) ---------------------------------------

    # Objects arrive already transformed: the reflector applies the informer's transform (per list page).

    def _process_upsert(self, obj: Any) -> None:
        with self._lock:
            old = self._indexer.get(obj)
            if old is not None:
                self._indexer.update(obj)
                self._on_update_locked(old, obj)
            else:
                self._indexer.add(obj)
                self._on_add_locked(obj, not self._synced.is_set())

    def _process_delete(self, obj: Any) -> None:
        with self._lock:
            self._indexer.delete(obj)
            self._distribute_locked((_DELETE, obj, None), sync=False)

    def _process_replace(self, items: list[Any], resource_version: str) -> None:
        key_of = deletion_handling_meta_namespace_key
        with self._lock:
            new_keys = {key_of(obj) for obj in items}
            deletions = [
                DeletedFinalStateUnknown(key, self._indexer.get_by_key(key))
                for key in self._indexer.list_keys()
                if key not in new_keys
            ]
            replacements = [(self._indexer.get_by_key(key_of(obj)), obj) for obj in items]
            # The cache first, so that it already reflects what the handlers are told.
            self._indexer.replace(items, resource_version)
            for tombstone in deletions:
                self._distribute_locked((_DELETE, tombstone, None), sync=False)
            initial = not self._synced.is_set()
            for old, new in replacements:
                if old is not None:
                    self._on_update_locked(old, new)
                else:
                    self._on_add_locked(new, initial)
            if initial:
                self._synced.set()
                self._synced_or_stopped.set()
                for reg in self._registrations:
                    reg._mark_upstream_synced()
        if deletions:
            log.info("informer.relist_deleted", informer=self.name, count=len(deletions))

    def _process_resync(self) -> None:
        with self._lock:
            for obj in self._indexer.list():
                self._on_update_locked(obj, obj)

    def _should_resync(self) -> bool:
        """client-go ``sharedProcessor.shouldResync``: mark which handlers are due; True if any is."""
        with self._lock:
            now = self._clock.monotonic()
            due_any = False
            for reg in self._registrations:
                due = reg.resync_period != 0 and now >= reg.next_resync
                reg.is_syncing = due
                if due:
                    due_any = True
                    reg.next_resync = now + reg.resync_period
            return due_any

    def _on_add_locked(self, obj: Any, is_in_initial_list: bool) -> None:
        if self.mutation_detector is not None:
            self.mutation_detector.add_object(obj)
        self._distribute_locked((_ADD, obj, is_in_initial_list), sync=False)

    def _on_update_locked(self, old: Any, new: Any) -> None:
        is_sync = _resource_version(old) == _resource_version(new)
        if self.mutation_detector is not None:
            self.mutation_detector.add_object(new)
        self._distribute_locked((_UPDATE, old, new), sync=is_sync)

    def _distribute_locked(self, notification: _Notification, *, sync: bool) -> None:
        for reg in self._registrations:
            if not sync or reg.is_syncing:
                reg._add(notification)

    def __repr__(self) -> str:
        return (
            f"SharedIndexInformer(name={self.name!r}, items={len(self._indexer)}, "
            f"handlers={len(self._registrations)}, synced={self._synced.is_set()}, "
            f"last_sync_resource_version={self.last_sync_resource_version!r})"
        )


def _resource_version(obj: Any) -> str | None:
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            rv = meta.get("resourceVersion")
            return rv if isinstance(rv, str) else None
    return None
