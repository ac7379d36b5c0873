"""The webhook server's Prometheus metrics, under controller-runtime's names, labels and buckets.

Go origin: controller-runtime ``pkg/webhook/internal/metrics``
(``controller_runtime_webhook_latency_seconds``, ``controller_runtime_webhook_requests_total``,
``controller_runtime_webhook_requests_in_flight``, and ``InstrumentedHook``) and
``pkg/webhook/admission/metrics`` (``controller_runtime_webhook_panics_total``).

Guarantees: the ``webhook`` label is the registered path; ``code`` is the HTTP status written. Registering a
path creates its ``code="200"`` and ``code="500"`` series at zero, as ``InstrumentedHook`` does, so a
dashboard sees them before the first request. All series live in ``controller.metrics.REGISTRY``.

Difference: upstream answers a malformed review with HTTP 200 and the error inside the review, so its
``code`` is always 200; here such answers carry their 4xx status, and ``code`` shows it.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from controller.metrics import REGISTRY, WORKQUEUE_DURATION_BUCKETS

__all__ = [
    "LATENCY_BUCKETS",
    "instrument",
    "request_latency",
    "requests_in_flight",
    "requests_total",
    "webhook_panics_total",
]

LATENCY_BUCKETS = WORKQUEUE_DURATION_BUCKETS
"""``prometheus.ExponentialBuckets(10e-9, 10, 12)``, the same floats as the workqueue's."""

request_latency = Histogram(
    "controller_runtime_webhook_latency_seconds",
    "Histogram of the latency of processing admission requests",
    ["webhook"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
requests_total = Counter(
    "controller_runtime_webhook_requests_total",
    "Total number of admission requests by HTTP status code.",
    ["code", "webhook"],
    registry=REGISTRY,
)
requests_in_flight = Gauge(
    "controller_runtime_webhook_requests_in_flight",
    "Current number of admission requests being served.",
    ["webhook"],
    registry=REGISTRY,
)
webhook_panics_total = Counter(
    "controller_runtime_webhook_panics_total",
    "Total number of webhook panics",
    registry=REGISTRY,
)


def instrument(path: str) -> None:
    """Creates the series of a newly registered webhook path (Go ``InstrumentedHook``)."""
    requests_total.labels(code="200", webhook=path)
    requests_total.labels(code="500", webhook=path)
    requests_in_flight.labels(webhook=path)
    request_latency.labels(webhook=path)
