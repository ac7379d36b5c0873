"""Prometheus metrics under controller-runtime's exact names, labels and buckets.

Go origin: controller-runtime ``pkg/metrics`` (registry, REST client adapter, leader election, workqueue
provider) and ``pkg/internal/controller/metrics``. Every series here is scraped by dashboards written for Go
controllers, so names, label names and bucket boundaries are part of the contract and are tested against the
exposition served by the manager (``test/unit/manager/test_manager.py``). Label names are declared in
sorted order, as Go's exposition prints them.

Guarantees:

- One :data:`REGISTRY` per process holds every metric below, plus the process and platform collectors
  (``process_*``, and ``python_*`` where Go exposes ``go_*``).
- No ``*_created`` series: created-series are disabled on import, as the Go exposition has none.
- Metric objects are module-level, created once; components record into them with their own label values.

Deliberately missing: the opt-in REST client latency/size histograms (controller-runtime registers only
``rest_client_requests_total`` by default). The webhook and certificate metrics live with their owners
(:mod:`controller.serving.webhook.metrics`, :mod:`controller.serving.certwatcher`), in this registry.
"""

from __future__ import annotations

from prometheus_client import (
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

disable_created_metrics()  # type: ignore[no-untyped-call]

REGISTRY = CollectorRegistry(auto_describe=True)
REGISTRY.register(PROCESS_COLLECTOR)
REGISTRY.register(PLATFORM_COLLECTOR)

# --- controller (pkg/internal/controller/metrics) ---------------------------------------------------------

RECONCILE_TIME_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0,
    40.0, 50.0, 60.0,
)  # fmt: skip

RECONCILE_RESULTS = ("success", "error", "requeue", "requeue_after")

reconcile_total = Counter(
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller",
    ["controller", "result"],
    registry=REGISTRY,
)
reconcile_errors_total = Counter(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller",
    ["controller"],
    registry=REGISTRY,
)
terminal_reconcile_errors_total = Counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller",
    ["controller"],
    registry=REGISTRY,
)
reconcile_panics_total = Counter(
    "controller_runtime_reconcile_panics_total",
    "Total number of reconciliation panics per controller",
    ["controller"],
    registry=REGISTRY,
)
reconcile_timeouts_total = Counter(
    "controller_runtime_reconcile_timeouts_total",
    "Total number of reconciliation timeouts per controller",
    ["controller"],
    registry=REGISTRY,
)
reconcile_time_seconds = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller",
    ["controller"],
    buckets=RECONCILE_TIME_BUCKETS,
    registry=REGISTRY,
)
max_concurrent_reconciles = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller",
    ["controller"],
    registry=REGISTRY,
)
active_workers = Gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller",
    ["controller"],
    registry=REGISTRY,
)

# --- workqueue (pkg/internal/metrics/workqueue.go) --------------------------------------------------------


def _exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """prometheus.ExponentialBuckets: repeated multiplication, so the floats match Go's exactly."""
    out, value = [], start
    for _ in range(count):
        out.append(value)
        value *= factor
    return tuple(out)


WORKQUEUE_DURATION_BUCKETS = _exponential_buckets(10e-9, 10, 12)
# Label names in sorted order: Go's exposition sorts them, so the text matches byte for byte.
WORKQUEUE_LABELS = ["controller", "name"]

workqueue_depth = Gauge(
    "workqueue_depth",
    "Current depth of workqueue by workqueue and priority",
    [*WORKQUEUE_LABELS, "priority"],
    registry=REGISTRY,
)
workqueue_adds_total = Counter(
    "workqueue_adds_total",
    "Total number of adds handled by workqueue",
    WORKQUEUE_LABELS,
    registry=REGISTRY,
)
workqueue_queue_duration_seconds = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    WORKQUEUE_LABELS,
    buckets=WORKQUEUE_DURATION_BUCKETS,
    registry=REGISTRY,
)
workqueue_work_duration_seconds = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes.",
    WORKQUEUE_LABELS,
    buckets=WORKQUEUE_DURATION_BUCKETS,
    registry=REGISTRY,
)
workqueue_unfinished_work_seconds = Gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has been done that is in progress and hasn't been observed by "
    "work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by "
    "observing the rate at which this increases.",
    WORKQUEUE_LABELS,
    registry=REGISTRY,
)
workqueue_longest_running_processor_seconds = Gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running.",
    WORKQUEUE_LABELS,
    registry=REGISTRY,
)
workqueue_retries_total = Counter(
    "workqueue_retries_total",
    "Total number of retries handled by workqueue",
    WORKQUEUE_LABELS,
    registry=REGISTRY,
)

# --- REST client (pkg/metrics/client_go_adapter.go) -------------------------------------------------------

rest_client_requests_total = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "host", "method"],
    registry=REGISTRY,
)

# --- leader election (pkg/metrics/leaderelection.go) ------------------------------------------------------

leader_election_master_status = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates "
    "master. 'name' is the string used to identify the lease. Please make sure to group by name.",
    ["name"],
    registry=REGISTRY,
)
leader_election_slowpath_total = Counter(
    "leader_election_slowpath_total",
    "Total number of slow path exercised in renewing leader leases. 'name' is the string used to "
    "identify the lease. Please make sure to group by name.",
    ["name"],
    registry=REGISTRY,
)
