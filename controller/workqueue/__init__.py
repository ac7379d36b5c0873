"""Work queues for controllers: the queue a reconciler's requests wait in, and how retries are paced.

Go origin: client-go ``util/workqueue`` and controller-runtime ``pkg/controller/priorityqueue``, with the Go
names in snake_case. The queue (``doc.go``) is:

- **Fair**: items are processed in the order in which they are added.
- **Stingy**: a single item is never processed by two workers at once, and an item added several times
  before it is processed is processed only once.
- **Multiple producers and consumers**: any thread may add, get and mark done. An item added again while it
  is being processed is processed again, once, after it is done.
- **Shutdown notifications**: ``shut_down`` makes ``get`` report ``(None, True)`` once the queue is empty
  (the priority queue, as controller-runtime's, stops handing out at once); ``shut_down_with_drain`` also
  waits until no item is being processed.

Small interfaces, stacked (each a :class:`typing.Protocol` with one implementation):

- :class:`Interface` / :class:`Queue`: ``add``, ``get``, ``done``, ``len``, ``shut_down``,
  ``shut_down_with_drain``, ``shutting_down``.
- :class:`DelayingInterface` / :class:`DelayingQueue`: adds ``add_after(item, delay)``.
- :class:`RateLimitingInterface` / :class:`RateLimitingQueue`: adds ``add_rate_limited``, ``forget``,
  ``num_requeues``.
- :class:`PriorityInterface` / :class:`PriorityQueue`: adds ``add_with_opts(item, priority=, after=,
  rate_limited=)`` and ``get_with_priority``.

:class:`PriorityQueue` also satisfies :class:`RateLimitingInterface`, so a controller's worker loop written
against that Protocol runs on either queue; :class:`PriorityQueueWrapper` lifts any rate-limiting queue to
:class:`PriorityInterface` (priorities ignored). The order of a plain queue is a separate strategy
(:class:`Ordering`, default :class:`FifoOrdering`) under the same dedup rules.

Rate limiters (:class:`RateLimiter`: ``when(item) -> seconds``, ``forget``, ``num_requeues``):
:class:`ItemExponentialFailureRateLimiter`, :class:`ItemFastSlowRateLimiter`, :class:`BucketRateLimiter`,
:class:`MaxOfRateLimiter`, :class:`WithMaxWaitRateLimiter`; :func:`default_controller_rate_limiter` is
MaxOf(ItemExponential(5 ms, 1000 s), Bucket(10 qps, burst 100)), and the priority queue's default is the
item-exponential part alone.

What the caller owes: call ``done(item)`` for every item ``get`` returned (in a ``finally``); call
``forget(item)`` when an item succeeds or is given up on, or its backoff is remembered forever; shut every
queue down (or use it as a context manager), since queues own threads. Time comes from the injected
:class:`~controller.clock.Clock`; a named queue records controller-runtime's ``workqueue_*`` metrics
through a :class:`MetricsProvider` (default :class:`PrometheusMetricsProvider`).

Threads: a delaying, rate-limiting or priority queue owns ``workqueue/<name>/delay``; a queue that records
metrics owns ``workqueue/<name>/metrics`` (refreshes the unfinished-work gauges every 500 ms). Both are
joined by ``shut_down`` and ``shut_down_with_drain``. No lock is held while a rate limiter runs.

Deliberately missing: ``get`` with a timeout, client-go's deprecated untyped constructors and global
metrics provider, and the ``ParallelizeUntil`` helper (``parallelizer.go``), which is not a queue.
"""

from __future__ import annotations

from controller.workqueue.delaying import MAX_WAIT, DelayingInterface, DelayingQueue
from controller.workqueue.metrics import (
    UNFINISHED_WORK_UPDATE_PERIOD,
    CounterMetric,
    DepthMetricWithPriority,
    GaugeMetric,
    HistogramMetric,
    MetricsProvider,
    MetricsProviderWithPriority,
    NoopMetricsProvider,
    PrometheusMetricsProvider,
    SettableGaugeMetric,
)
from controller.workqueue.priority import (
    LOW_PRIORITY,
    PriorityInterface,
    PriorityQueue,
    PriorityQueueWrapper,
)
from controller.workqueue.queue import FifoOrdering, Interface, Ordering, Queue
from controller.workqueue.rate_limiters import (
    INF_DURATION,
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
    default_item_based_rate_limiter,
)
from controller.workqueue.rate_limiting import RateLimitingInterface, RateLimitingQueue

__all__ = [
    "INF_DURATION",
    "LOW_PRIORITY",
    "MAX_WAIT",
    "UNFINISHED_WORK_UPDATE_PERIOD",
    "BucketRateLimiter",
    "CounterMetric",
    "DelayingInterface",
    "DelayingQueue",
    "DepthMetricWithPriority",
    "FifoOrdering",
    "GaugeMetric",
    "HistogramMetric",
    "Interface",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "MetricsProvider",
    "MetricsProviderWithPriority",
    "NoopMetricsProvider",
    "Ordering",
    "PriorityInterface",
    "PriorityQueue",
    "PriorityQueueWrapper",
    "PrometheusMetricsProvider",
    "Queue",
    "RateLimiter",
    "RateLimitingInterface",
    "RateLimitingQueue",
    "SettableGaugeMetric",
    "WithMaxWaitRateLimiter",
    "default_controller_rate_limiter",
    "default_item_based_rate_limiter",
]
