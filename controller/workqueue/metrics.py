"""Workqueue metrics: the provider seam, the Prometheus provider and the per-queue recorders.

Go origin: client-go ``util/workqueue/metrics.go`` (``MetricsProvider``, ``defaultQueueMetrics``,
``retryMetrics``), controller-runtime ``pkg/internal/metrics/workqueue.go`` (``WorkqueueMetricsProvider``, the
``priority`` depth label and its cardinality limit) and ``pkg/controller/priorityqueue/metrics.go``.

Guarantees:

- A queue with a name records through a :class:`MetricsProvider`; the default,
  :class:`PrometheusMetricsProvider`, writes controller-runtime's ``workqueue_*`` series in
  :mod:`controller.metrics` with ``name`` and ``controller`` both set to the queue name and ``priority=""``
  on ``workqueue_depth`` (the priority queue sets it to the item's priority).
- A queue without a name, or with :class:`NoopMetricsProvider`, records nothing and starts no thread.
- ``workqueue_adds_total`` and ``workqueue_depth`` move only on non-duplicate adds; queue latency runs from
  the first add to ``get``; work duration from ``get`` to ``done``.
- The two unfinished-work gauges are refreshed every :data:`UNFINISHED_WORK_UPDATE_PERIOD` seconds of the
  queue's clock by an :class:`UnfinishedWorkUpdater` thread (``workqueue/<name>/metrics``) that the queue
  owns and joins on shut down, as client-go's ``updateUnfinishedWorkLoop`` does. A scrape therefore sees
  values at most 500 ms old; after shut down they are no longer refreshed.

The recorders (:class:`QueueMetrics`, :class:`RetryMetrics`) are not thread-safe: the owning queue calls
them with its lock held, as client-go's do.

Deliberately missing: client-go's process-global ``SetProvider`` (a queue takes its provider as an argument;
the default is the Prometheus one, which is what controller-runtime installs globally).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar, runtime_checkable

from controller import metrics as _m
from controller.clock import Clock

T = TypeVar("T", bound=Hashable)

UNFINISHED_WORK_UPDATE_PERIOD = 0.5
"""Seconds between refreshes of the unfinished-work gauges (``defaultUnfinishedWorkUpdatePeriod``)."""

PRIORITY_CARDINALITY_LIMIT = 25
"""Distinct priorities a queue may label ``workqueue_depth`` with before it switches to the placeholder."""

PRIORITY_CARDINALITY_EXCEEDED = "exceeded_cardinality_limit"
"""The ``priority`` label used for every depth change once more than 25 distinct priorities were seen."""


# --- the metric shapes a provider hands out ----------------------------------------------------------------


class GaugeMetric(Protocol):
    """A value that goes up and down by one (``workqueue_depth``)."""

    def inc(self) -> None: ...

    def dec(self) -> None: ...


class SettableGaugeMetric(Protocol):
    """A value that is set outright (the unfinished-work gauges)."""

    def set(self, value: float) -> None: ...


class CounterMetric(Protocol):
    """A value that only goes up (``workqueue_adds_total``, ``workqueue_retries_total``)."""

    def inc(self) -> None: ...


class HistogramMetric(Protocol):
    """Individual observations (queue latency, work duration), in seconds."""

    def observe(self, value: float) -> None: ...


class DepthMetricWithPriority(Protocol):
    """``workqueue_depth`` for a priority queue: one series per priority."""

    def inc(self, priority: int) -> None: ...

    def dec(self, priority: int) -> None: ...


class MetricsProvider(Protocol):
    """Makes the metrics of one named queue (client-go ``MetricsProvider``).

    Each method is called once per queue, at construction, with the queue's name.
    """

    def new_depth_metric(self, name: str) -> GaugeMetric: ...

    def new_adds_metric(self, name: str) -> CounterMetric: ...

    def new_latency_metric(self, name: str) -> HistogramMetric: ...

    def new_work_duration_metric(self, name: str) -> HistogramMetric: ...

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric: ...

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric: ...

    def new_retries_metric(self, name: str) -> CounterMetric: ...


@runtime_checkable
class MetricsProviderWithPriority(MetricsProvider, Protocol):
    """A provider that can label depth by priority (controller-runtime ``MetricsProviderWithPriority``).

    The priority queue uses :meth:`new_depth_metric_with_priority` when its provider has it, and the plain
    depth gauge otherwise.
    """

    def new_depth_metric_with_priority(self, name: str) -> DepthMetricWithPriority: ...


# --- providers ---------------------------------------------------------------------------------------------


class _NoopMetric:
    """Every metric shape at once, doing nothing."""

    __slots__ = ()

    def inc(self, priority: int = 0) -> None:
        pass

    def dec(self, priority: int = 0) -> None:
        pass

    def set(self, value: float) -> None:
        pass

    def observe(self, value: float) -> None:
        pass


_NOOP_METRIC = _NoopMetric()


class NoopMetricsProvider:
    """Records nothing; a queue given this provider behaves as an unnamed one (no updater thread)."""

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return _NOOP_METRIC

    def new_adds_metric(self, name: str) -> CounterMetric:
        return _NOOP_METRIC

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return _NOOP_METRIC

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return _NOOP_METRIC

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return _NOOP_METRIC

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return _NOOP_METRIC

    def new_retries_metric(self, name: str) -> CounterMetric:
        return _NOOP_METRIC

    def __repr__(self) -> str:
        return "NoopMetricsProvider()"


class _PriorityDepth:
    """``workqueue_depth{name,controller,priority}`` with controller-runtime's cardinality rule.

    Once more than :data:`PRIORITY_CARDINALITY_LIMIT` distinct priorities have been seen, every later
    ``inc``/``dec`` goes to the ``exceeded_cardinality_limit`` series, including the ``dec`` of an item whose
    ``inc`` went to its own priority's series (so both series are then off by one; upstream behaves the same).
    """

    __slots__ = ("_children", "_exceeded", "_lock", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        # the series of every priority seen so far (at most PRIORITY_CARDINALITY_LIMIT of them)
        self._children: dict[int, GaugeMetric] = {}
        self._exceeded: GaugeMetric | None = None  # the placeholder series, once the limit is passed

    def _series(self, priority: int) -> GaugeMetric:
        with self._lock:
            if self._exceeded is not None:
                return self._exceeded
            child = self._children.get(priority)
            if child is not None:
                return child
            if len(self._children) < PRIORITY_CARDINALITY_LIMIT:
                child = _m.workqueue_depth.labels(self._name, self._name, str(priority))
                self._children[priority] = child
                return child
            self._children.clear()
            self._exceeded = _m.workqueue_depth.labels(self._name, self._name, PRIORITY_CARDINALITY_EXCEEDED)
            return self._exceeded

    def inc(self, priority: int) -> None:
        self._series(priority).inc()

    def dec(self, priority: int) -> None:
        self._series(priority).dec()


class PrometheusMetricsProvider:
    """The default provider: records into :mod:`controller.metrics` (controller-runtime
    ``WorkqueueMetricsProvider``), with ``name`` and ``controller`` both set to the queue name."""

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return _m.workqueue_depth.labels(name, name, "")

    def new_depth_metric_with_priority(self, name: str) -> DepthMetricWithPriority:
        return _PriorityDepth(name)

    def new_adds_metric(self, name: str) -> CounterMetric:
        return _m.workqueue_adds_total.labels(name, name)

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return _m.workqueue_queue_duration_seconds.labels(name, name)

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return _m.workqueue_work_duration_seconds.labels(name, name)

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return _m.workqueue_unfinished_work_seconds.labels(name, name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return _m.workqueue_longest_running_processor_seconds.labels(name, name)

    def new_retries_metric(self, name: str) -> CounterMetric:
        return _m.workqueue_retries_total.labels(name, name)

    def __repr__(self) -> str:
        return "PrometheusMetricsProvider()"


DEFAULT_METRICS_PROVIDER = PrometheusMetricsProvider()


# --- per-queue recorders -----------------------------------------------------------------------------------


class QueueMetrics(Generic[T]):
    """What one queue records about its items (client-go ``defaultQueueMetrics``).

    Call with the queue's lock held. ``priority`` is used only when the queue labels depth by priority.
    """

    __slots__ = (
        "_add_times",
        "_adds",
        "_clock",
        "_depth",
        "_depth_with_priority",
        "_latency",
        "_longest_running",
        "_processing_start_times",
        "_unfinished",
        "_work_duration",
    )

    def __init__(
        self, provider: MetricsProvider, name: str, clock: Clock, *, with_priority: bool = False
    ) -> None:
        self._clock = clock
        self._depth_with_priority: DepthMetricWithPriority | None = None
        self._depth: GaugeMetric | None = None
        if with_priority and isinstance(provider, MetricsProviderWithPriority):
            self._depth_with_priority = provider.new_depth_metric_with_priority(name)
        else:
            self._depth = provider.new_depth_metric(name)
        self._adds = provider.new_adds_metric(name)
        self._latency = provider.new_latency_metric(name)
        self._work_duration = provider.new_work_duration_metric(name)
        self._unfinished = provider.new_unfinished_work_seconds_metric(name)
        self._longest_running = provider.new_longest_running_processor_seconds_metric(name)
        # first add time of each item not yet handed out; get time of each item being processed
        self._add_times: dict[T, float] = {}
        self._processing_start_times: dict[T, float] = {}

    def _inc_depth(self, priority: int) -> None:
        if self._depth_with_priority is not None:
            self._depth_with_priority.inc(priority)
        elif self._depth is not None:
            self._depth.inc()

    def add(self, item: T, priority: int = 0) -> None:
        """A non-duplicate add (for the priority queue: an item became ready)."""
        self._adds.inc()
        self._inc_depth(priority)
        self._add_times.setdefault(item, self._clock.monotonic())

    def get(self, item: T, priority: int = 0) -> None:
        """An item was handed to a worker."""
        if self._depth_with_priority is not None:
            self._depth_with_priority.dec(priority)
        elif self._depth is not None:
            self._depth.dec()
        now = self._clock.monotonic()
        self._processing_start_times[item] = now
        started = self._add_times.pop(item, None)
        if started is not None:
            self._latency.observe(now - started)
        if not self._add_times:
            self._add_times.clear()  # frees the emptied table (controller.workqueue.queue, "Memory")

    def update_depth_with_priority(self, old: int, new: int) -> None:
        """A ready item's priority was raised from ``old`` to ``new``."""
        if self._depth_with_priority is not None:
            self._depth_with_priority.dec(old)
            self._depth_with_priority.inc(new)

    def done(self, item: T) -> None:
        """A worker finished an item."""
        started = self._processing_start_times.pop(item, None)
        if started is not None:
            self._work_duration.observe(self._clock.monotonic() - started)

    def update_unfinished_work(self) -> None:
        """Refresh the unfinished-work gauges from the items being processed now."""
        now = self._clock.monotonic()
        total = oldest = 0.0
        for started in self._processing_start_times.values():
            age = now - started
            total += age
            oldest = max(oldest, age)
        self._unfinished.set(total)
        self._longest_running.set(oldest)


class NoQueueMetrics(Generic[T]):
    """The recorder of an unnamed queue: records nothing (client-go ``noMetrics``)."""

    __slots__ = ()

    def add(self, item: T, priority: int = 0) -> None:
        pass

    def get(self, item: T, priority: int = 0) -> None:
        pass

    def update_depth_with_priority(self, old: int, new: int) -> None:
        pass

    def done(self, item: T) -> None:
        pass

    def update_unfinished_work(self) -> None:
        pass


class RetryMetrics:
    """Counts ``workqueue_retries_total`` (client-go ``retryMetrics``)."""

    __slots__ = ("_retries",)

    def __init__(self, retries: CounterMetric) -> None:
        self._retries = retries

    def retry(self) -> None:
        self._retries.inc()


NO_RETRY_METRICS = RetryMetrics(_NOOP_METRIC)


def records(provider: MetricsProvider | None, name: str) -> bool:
    """Whether a queue called ``name`` with ``provider`` records metrics (a name and a non-noop provider)."""
    return bool(name) and not isinstance(provider, NoopMetricsProvider)


def _recording_provider(provider: MetricsProvider | None, name: str) -> MetricsProvider | None:
    """What a queue called ``name`` records through (None: the default provider); None if nothing."""
    if provider is None:
        provider = DEFAULT_METRICS_PROVIDER
    return provider if records(provider, name) else None


def new_queue_metrics(
    provider: MetricsProvider | None, name: str, clock: Clock, *, with_priority: bool = False
) -> QueueMetrics[T] | NoQueueMetrics[T]:
    """The recorder for a queue: :class:`NoQueueMetrics` unless :func:`records`."""
    recording = _recording_provider(provider, name)
    if recording is None:
        return NoQueueMetrics()
    return QueueMetrics(recording, name, clock, with_priority=with_priority)


def new_retry_metrics(provider: MetricsProvider | None, name: str) -> RetryMetrics:
    """The retry counter for a queue: a no-op unless :func:`records`."""
    recording = _recording_provider(provider, name)
    if recording is None:
        return NO_RETRY_METRICS
    return RetryMetrics(recording.new_retries_metric(name))


class UnfinishedWorkUpdater:
    """The thread ``workqueue/<name>/metrics``: calls ``update`` every 500 ms of ``clock`` until stopped.

    ``update`` must take the queue's lock and skip the refresh once the queue is shutting down. Owned by
    the queue that starts it; :meth:`stop` signals and joins it.
    """

    def __init__(self, name: str, clock: Clock, update: Callable[[], None]) -> None:
        self._clock = clock
        self._update = update
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"workqueue/{name}/metrics", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._clock.wait(self._stop, UNFINISHED_WORK_UPDATE_PERIOD):
            self._update()

    def signal_stop(self) -> None:
        """Tell the thread to exit after its current refresh; does not wait."""
        self._stop.set()

    def join(self) -> None:
        """Wait for the thread to exit (call :meth:`signal_stop` first)."""
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
