"""A controller: sources feed a queue of requests, and N workers reconcile them, one key at a time.

Go origin: controller-runtime ``pkg/internal/controller/controller.go`` (``Controller``, ``Start``,
``processNextWorkItem``, ``reconcileHandler``, ``initMetrics``) and ``pkg/controller/controller.go``
(defaults).

Lifecycle: :meth:`Controller.watch` sources, then :meth:`Controller.start`: :meth:`Controller.warmup`
creates the queue, starts every source (:mod:`controller.controller.source`) and waits until every source has
delivered its initial list (at most ``cache_sync_timeout`` seconds: :class:`CacheSyncTimeout` otherwise); then
``max_concurrent_reconciles`` worker threads named ``controller/<name>/worker-<i>`` start.
:meth:`Controller.stop` makes workers take no new request, shuts the queue down and joins them.

What a worker does with each reconcile's outcome (``reconcileHandler``):

=====================================  ==========================================  ====================
reconcile                              queue                                       ``reconcile_total``
=====================================  ==========================================  ====================
raises (not terminal)                  ``add_with_opts(rate_limited=True)``        ``error``
raises :class:`TerminalError`          nothing: not requeued                       ``error``
returns ``requeue_after > 0``          ``forget``, ``add_with_opts(after=...)``    ``requeue_after``
returns ``requeue=True``               ``add_with_opts(rate_limited=True)``        ``requeue``
returns anything else                  ``forget``                                  ``success``
=====================================  ==========================================  ====================

Every error also counts ``controller_runtime_reconcile_errors_total``, a terminal one
``..._terminal_reconcile_errors_total`` too, and is logged once as ``reconcile.failed``. A requeue keeps the
priority the request was taken with unless the result sets ``priority``.

Guarantees:

- **Caches before workers:** no reconcile starts before every source has synced.
- **Never two workers on one key:** the queue hands a request to one worker at a time (the workqueue's
  stingy property); adds meanwhile are processed once more after ``done``.
- **Per-key backoff:** repeated failures of one request back off exponentially (5 ms doubling to 1000 s by
  default); a success or ``requeue_after`` forgets it. Other requests are not slowed.
- **Stop is prompt:** after :meth:`Controller.stop` no new reconcile starts, even with requests queued; a
  reconcile already running finishes (Python cannot interrupt a thread), then its worker exits.
- **Observability:** the four ``reconcile_total`` results and the error/terminal/panic/timeout counters are
  pre-initialised to 0 at start, ``max_concurrent_reconciles`` is set, ``active_workers`` counts workers in
  a reconcile, ``reconcile_time_seconds`` observes every reconcile. Each reconcile gets a UUID4
  ``reconcile_id``, set in :data:`controller.controller.reconcile.reconcile_id` and bound with ``controller``,
  ``namespace`` and ``name`` into structlog's context vars, so every line it logs carries them.
- Worker threads are daemon threads: a reconcile stuck beyond the manager's graceful-shutdown timeout cannot
  keep the process alive.

Deliberate differences from Go: Python has one failure channel, so "an error *and* a requeue" (upstream logs
a warning and ignores the requeue) cannot be expressed: raising discards any result. For the same reason
every exception is an error; none is a panic, and ``reconcile_panics_total`` stays 0.

Deliberately missing: ``ReconciliationTimeout`` (a thread cannot be cancelled; a reconciler bounds its own
API calls with client timeouts; ``reconcile_timeouts_total`` stays 0), ``RecoverPanic=false``,
watching a new source after start with its own sync wait (it is registered, not waited for), and typed
requests.
"""

from __future__ import annotations

import threading
import uuid

import structlog

from controller import metrics
from controller.clock import REAL_CLOCK, Clock
from controller.controller.handler import RequestQueue
from controller.controller.reconcile import Reconciler, Request, Result, is_terminal, reconcile_id
from controller.controller.source import Source
from controller.workqueue.priority import PriorityInterface, PriorityQueue, PriorityQueueWrapper
from controller.workqueue.rate_limiters import RateLimiter
from controller.workqueue.rate_limiting import RateLimitingQueue

__all__ = ["CacheSyncTimeout", "Controller"]

_log = structlog.get_logger("controller.controller.controller")

SYNC_POLL_PERIOD = 0.1
"""Seconds between checks that sources have synced (``WaitForCacheSync`` polls every 100 ms)."""


class CacheSyncTimeout(TimeoutError):
    """A controller's sources did not sync within ``cache_sync_timeout``; the controller did not start."""


class Controller:
    """Reconciles requests from its sources with ``max_concurrent_reconciles`` workers.

    ``rate_limiter`` defaults to the queue's own: per-item exponential 5 ms → 1000 s for the priority queue
    (the default, ``use_priority_queue=True``), plus a 10 qps/100 burst bucket for the plain queue.
    """

    def __init__(
        self,
        name: str,
        reconciler: Reconciler,
        *,
        max_concurrent_reconciles: int = 1,
        rate_limiter: RateLimiter[Request] | None = None,
        use_priority_queue: bool = True,
        cache_sync_timeout: float = 120.0,
        need_leader_election: bool = True,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        if not name:
            raise ValueError("a controller needs a name")
        if max_concurrent_reconciles < 1:
            raise ValueError("max_concurrent_reconciles must be at least 1")
        self.name = name
        self._reconciler = reconciler
        self._workers_wanted = max_concurrent_reconciles
        self._rate_limiter = rate_limiter
        self._use_priority_queue = use_priority_queue
        self._cache_sync_timeout = cache_sync_timeout
        self._need_leader_election = need_leader_election
        self._clock = clock
        self._lock = threading.Lock()
        # Guarded by _lock: sources watched before start (then started on warmup), sources started and not
        # yet stopped, start state.
        self._watches: list[Source] = []
        self._sources: list[Source] = []
        self._started = False
        self._queue: PriorityInterface[Request] | None = None
        # What sources add to: the queue itself, not the wrapper; set with _queue.
        self._handler_queue: RequestQueue | None = None
        self._workers: list[threading.Thread] = []
        # Set by stop(): workers take no new request once it is set.
        self._stopping = threading.Event()
        # Metric children, resolved once.
        self._m_total = {r: metrics.reconcile_total.labels(name, r) for r in metrics.RECONCILE_RESULTS}
        self._m_errors = metrics.reconcile_errors_total.labels(name)
        self._m_terminal = metrics.terminal_reconcile_errors_total.labels(name)
        self._m_time = metrics.reconcile_time_seconds.labels(name)
        self._m_active = metrics.active_workers.labels(name)

    # --- configuration --------------------------------------------------------------------------------

    def watch(self, source: Source) -> None:
        """Feeds ``source`` (e.g. :class:`controller.controller.source.Kind`) into the queue
        (``Controller.Watch``).

        Before :meth:`warmup`/:meth:`start`, the source is started and waited for then. After, it is
        started at once, and not waited for.
        """
        with self._lock:
            queue = self._handler_queue
            if queue is None:
                self._watches.append(source)
                return
        self._start_source(source, queue)

    def need_leader_election(self) -> bool:
        """Whether the manager must hold the lease before starting this controller (default True)."""
        return self._need_leader_election

    @property
    def queue(self) -> PriorityInterface[Request]:
        """The controller's queue; exists once :meth:`start` has been called."""
        if self._queue is None:
            raise RuntimeError(f"controller {self.name!r} has not been started")
        return self._queue

    # --- start and stop -------------------------------------------------------------------------------

    def _new_queue(self) -> tuple[PriorityInterface[Request], RequestQueue]:
        if self._use_priority_queue:
            pq: PriorityQueue[Request] = PriorityQueue(
                name=self.name, clock=self._clock, rate_limiter=self._rate_limiter
            )
            return pq, pq
        plain: RateLimitingQueue[Request] = RateLimitingQueue(
            self._rate_limiter, name=self.name, clock=self._clock
        )
        return PriorityQueueWrapper(plain), plain

    def _start_source(self, source: Source, queue: RequestQueue) -> None:
        source.start(queue)
        with self._lock:
            stopped = self._stopping.is_set()
            if not stopped:
                self._sources.append(source)
        if stopped:  # stop() ran meanwhile and did not see this source
            source.stop()

    def _synced(self) -> bool:
        with self._lock:
            sources = list(self._sources)
        return all(source.has_synced() for source in sources)

    def warmup(self, stop: threading.Event | None = None) -> bool:
        """Creates the queue, starts the sources and waits for them to sync; starts no worker.

        True once synced (also on later calls); False if ``stop`` (or :meth:`stop`) ended the wait. Raises
        :class:`CacheSyncTimeout` if the sources do not sync in ``cache_sync_timeout`` seconds. From here
        on the queue's threads exist: call :meth:`stop` in every case.
        """
        with self._lock:
            if self._stopping.is_set():
                return False
            if self._handler_queue is None:
                self._queue, self._handler_queue = self._new_queue()
                watches, self._watches = self._watches, []
                self._init_metrics()
            else:
                watches = []
            queue = self._handler_queue
        for source in watches:
            self._start_source(source, queue)

        deadline = self._clock.monotonic() + self._cache_sync_timeout
        stop = stop if stop is not None else self._stopping
        while not self._synced():
            if stop.is_set() or self._stopping.is_set():
                _log.info("controller.stopped_before_sync", controller=self.name)
                return False
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                _log.error(
                    "controller.cache_sync_timeout", controller=self.name, timeout_s=self._cache_sync_timeout
                )
                raise CacheSyncTimeout(
                    f"controller {self.name!r}: sources did not sync within {self._cache_sync_timeout}s"
                )
            self._clock.wait(stop, min(SYNC_POLL_PERIOD, remaining))
        return True

    def start(self, stop: threading.Event | None = None) -> None:
        """:meth:`warmup`, then starts the workers; returns once they run.

        Raises :class:`CacheSyncTimeout` if the sources do not sync in time, and RuntimeError if started
        twice. If ``stop`` is set while waiting, returns without starting workers. Call :meth:`stop` in every
        case.
        """
        with self._lock:
            if self._started:
                raise RuntimeError(f"controller {self.name!r} was started more than once")
            self._started = True
        _log.info("controller.starting", controller=self.name)
        if not self.warmup(stop):
            return
        # The workers wait until all of them exist: the first one would otherwise start reconciling while
        # this thread still creates the others, and under the GIL creating them (and the log line below)
        # then took up to seconds at a restart with a full queue.
        go = threading.Event()
        try:
            with self._lock:
                if self._stopping.is_set():
                    return
                for i in range(self._workers_wanted):
                    worker = threading.Thread(
                        target=self._work, args=(go,), name=f"controller/{self.name}/worker-{i}", daemon=True
                    )
                    self._workers.append(worker)
                    worker.start()
        finally:
            go.set()
        _log.info("controller.started", controller=self.name, workers=self._workers_wanted)

    def stop(self, timeout: float | None = None) -> bool:
        """Takes no new request, shuts the queue down, stops the sources and joins the workers.

        Returns True if all workers have exited.

        With a ``timeout`` (seconds, shared by all joins), returns False if a reconcile is still running
        when it expires; the worker then exits when that reconcile returns. Idempotent.
        """
        self._stopping.set()
        with self._lock:
            queue, workers = self._queue, list(self._workers)
            sources, self._sources = self._sources, []
        if queue is not None:
            queue.shut_down()
        for source in sources:
            source.stop()
        deadline = None if timeout is None else self._clock.monotonic() + timeout
        for worker in workers:
            remaining = None if deadline is None else max(0.0, deadline - self._clock.monotonic())
            worker.join(remaining)
        alive = [w.name for w in workers if w.is_alive()]
        if alive:
            _log.warning("controller.stop_timed_out", controller=self.name, workers=alive)
            return False
        _log.info("controller.stopped", controller=self.name)
        return True

    def _init_metrics(self) -> None:
        for child in self._m_total.values():
            child.inc(0)
        self._m_errors.inc(0)
        self._m_terminal.inc(0)
        metrics.reconcile_panics_total.labels(self.name).inc(0)
        metrics.reconcile_timeouts_total.labels(self.name).inc(0)
        metrics.max_concurrent_reconciles.labels(self.name).set(self._workers_wanted)
        self._m_active.set(0)

    # --- the worker loop ------------------------------------------------------------------------------

    def _work(self, go: threading.Event) -> None:
        go.wait()
        while self.process_next_work_item():
            pass

    def process_next_work_item(self) -> bool:
        """One turn of a worker: take a request, reconcile it, act on the outcome. False means "exit".

        The worker threads call this in a loop; tests call it directly to run a turn on their own thread.
        """
        request, priority, shutdown = self.queue.get_with_priority()
        if shutdown or request is None:
            return False
        try:
            if self._stopping.is_set():
                return False
            self._m_active.inc()
            try:
                self._reconcile_handler(request, priority)
            finally:
                self._m_active.dec()
        finally:
            self.queue.done(request)
        return True

    def _reconcile_handler(self, request: Request, priority: int) -> None:
        queue = self.queue
        rid = str(uuid.uuid4())
        token = reconcile_id.set(rid)
        bound = structlog.contextvars.bind_contextvars(
            controller=self.name, namespace=request.namespace, name=request.name, reconcile_id=rid
        )
        started = self._clock.monotonic()
        try:
            result = self._reconciler.reconcile(request)
        except Exception as exc:  # noqa: BLE001 - the reconciler's failure channel: count, log, requeue
            self._on_error(request, priority, exc, rid)
            return
        finally:
            self._m_time.observe(self._clock.monotonic() - started)
            structlog.contextvars.reset_contextvars(**bound)
            reconcile_id.reset(token)
        self._on_result(queue, request, priority, result)

    def _on_error(self, request: Request, priority: int, exc: Exception, rid: str) -> None:
        terminal = is_terminal(exc)
        if terminal:
            self._m_terminal.inc()
        else:
            self.queue.add_with_opts(request, priority=priority, rate_limited=True)
        self._m_errors.inc()
        self._m_total["error"].inc()
        _log.error(
            "reconcile.failed",
            controller=self.name,
            namespace=request.namespace,
            name=request.name,
            reconcile_id=rid,
            terminal=terminal,
            exc_info=exc,
        )

    def _on_result(
        self, queue: PriorityInterface[Request], request: Request, priority: int, result: Result
    ) -> None:
        if result.priority is not None:
            priority = result.priority
        if result.requeue_after > 0:
            queue.forget(request)
            queue.add_with_opts(request, priority=priority, after=result.requeue_after)
            self._m_total["requeue_after"].inc()
        elif result.requeue:
            queue.add_with_opts(request, priority=priority, rate_limited=True)
            self._m_total["requeue"].inc()
        else:
            queue.forget(request)
            self._m_total["success"].inc()

    def __repr__(self) -> str:
        state = "stopped" if self._stopping.is_set() else "started" if self._started else "new"
        return f"Controller({self.name!r}, workers={self._workers_wanted}, {state})"
