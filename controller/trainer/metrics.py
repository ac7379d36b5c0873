"""The Trainer's own Prometheus metrics (upstream has none), next to controller-runtime's in one registry.

Go origin: none; kubeflow/trainer exposes only controller-runtime's families. Names follow Prometheus
conventions under the ``kubeflow_trainer_`` prefix; ``docs/metrics.md`` is the operator's page (names, labels,
buckets, queries) and the tests assert the exposition it describes.

- ``kubeflow_trainer_trainjobs{state}`` (gauge): TrainJobs by state. :class:`TrainJobStateCounts` keeps the
  five counts from the TrainJob informer's own notifications (an add counts the object, an update moves it
  when its state changed, a delete, tombstone included, uncounts the last state the informer delivered), so
  they follow the informer's store exactly and cannot drift: no API call, no bookkeeping on the reconcile
  path. A scrape reads five integers (:class:`TrainJobStateCollector`); it used to walk every cached
  TrainJob, 60 ms of the GIL per scrape at 10,000. Every state in :data:`STATES` is exported, zero
  included; :class:`TrainJobStateMetrics` registers both while the manager runs.
- ``kubeflow_trainer_trainjob_jobset_creation_seconds`` (histogram, :data:`JOBSET_CREATION_BUCKETS`): from
  a TrainJob's ``creationTimestamp`` to the first apply of its JobSet (:func:`observe_jobset_created`).
- ``kubeflow_trainer_reconcile_failures_total{reason}`` (counter): failed TrainJob reconciles by
  :data:`REASONS`, every reason pre-initialised to 0 (:func:`count_reconcile_failure`).

Guarantees: bounded cardinality (at most 5 + 7 series plus the histogram's 17): no per-TrainJob label and
no ``namespace`` label (namespaces are created by users; a label per namespace would grow without bound).
A failing counts source drops the gauge from that scrape (logged) instead of failing the whole scrape.
Cost: one state computation (over the TrainJob's conditions and ``jobsStatus``) per informer notification,
O(1) per scrape.

Deliberately missing: a per-namespace breakdown (derive it from the API, e.g. with kube-state-metrics'
custom-resource state, if you need it) and the "Running" the SDK computes from Pods (we read only the
TrainJob; here "Running" means a replicated job reports a ready Pod, see :func:`trainjob_state`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

import structlog
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controller import metrics
from controller.cache.informer_cache import InformerCache
from controller.informers.shared_informer import Registration, SharedIndexInformer
from controller.informers.store import DeletedFinalStateUnknown
from controller.trainer.kinds import TRAINJOB

__all__ = [
    "JOBSET_CREATION_BUCKETS",
    "REASONS",
    "REASON_APPLY",
    "REASON_BUILD",
    "REASON_INVALID_SNAPSHOT",
    "REASON_JOBSET_DELETION",
    "REASON_OTHER",
    "REASON_RUNTIME_NOT_FOUND",
    "REASON_STATUS",
    "REASON_UNSUPPORTED_RUNTIME",
    "STATES",
    "STATE_COMPLETE",
    "STATE_CREATED",
    "STATE_FAILED",
    "STATE_RUNNING",
    "STATE_SUSPENDED",
    "TrainJobStateCollector",
    "TrainJobStateCounts",
    "TrainJobStateMetrics",
    "count_reconcile_failure",
    "observe_jobset_created",
    "register_state_collector",
    "trainjob_state",
    "unregister_state_collector",
]

_log = structlog.get_logger("controller.trainer.metrics")

# --- TrainJobs by state ------------------------------------------------------------------------------------

STATE_CREATED = "Created"
STATE_SUSPENDED = "Suspended"
STATE_RUNNING = "Running"
STATE_COMPLETE = "Complete"
STATE_FAILED = "Failed"
STATES = (STATE_CREATED, STATE_SUSPENDED, STATE_RUNNING, STATE_COMPLETE, STATE_FAILED)
"""The ``state`` label values, in lifecycle order; each TrainJob is in exactly one."""

TRAINJOBS_NAME = "kubeflow_trainer_trainjobs"


def _condition_true(conditions: Iterable[Any], kind: str) -> bool:
    return any(
        isinstance(c, Mapping) and c.get("type") == kind and c.get("status") == "True" for c in conditions
    )


def trainjob_state(trainjob: Mapping[str, Any]) -> str:
    """The one state a TrainJob is counted in, first match wins:

    ``Failed`` (condition ``Failed=True``), ``Complete`` (``Complete=True``): the SDK's finished states;
    ``Suspended`` (``Suspended=True``); ``Running`` (some ``status.jobsStatus[]`` entry has ``ready > 0``);
    else ``Created``. Malformed status fields read as absent.
    """
    status = trainjob.get("status")
    status = status if isinstance(status, Mapping) else {}
    conditions = status.get("conditions")
    conditions = conditions if isinstance(conditions, list) else []
    if _condition_true(conditions, "Failed"):
        return STATE_FAILED
    if _condition_true(conditions, "Complete"):
        return STATE_COMPLETE
    if _condition_true(conditions, "Suspended"):
        return STATE_SUSPENDED
    jobs = status.get("jobsStatus")
    if isinstance(jobs, list):
        for job in jobs:
            ready = job.get("ready") if isinstance(job, Mapping) else None
            if isinstance(ready, int) and ready > 0:
                return STATE_RUNNING
    return STATE_CREATED


class TrainJobStateCounts:
    """TrainJobs by state, kept from an informer's notifications (a ``ResourceEventHandler``).

    Each notification is counted under one lock: ``on_add`` counts the object's state, ``on_update`` moves
    one TrainJob from the old object's state to the new one's, ``on_delete`` uncounts the state of the last
    object the informer delivered (a ``DeletedFinalStateUnknown`` tombstone carries it). The informer
    delivers exactly the transitions of its store, so the counts are the store's; until its initial list
    has been delivered they are partial.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(STATES, 0)

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        state = trainjob_state(obj)
        with self._lock:
            self._counts[state] += 1

    def on_update(self, old: Any, new: Any) -> None:
        before, after = trainjob_state(old), trainjob_state(new)
        if before != after:
            with self._lock:
                self._counts[before] -= 1
                self._counts[after] += 1

    def on_delete(self, obj: Any) -> None:
        state = trainjob_state(obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj)
        with self._lock:
            self._counts[state] -= 1

    def snapshot(self) -> dict[str, int]:
        """The five counts, copied."""
        with self._lock:
            return dict(self._counts)

    def __repr__(self) -> str:
        return f"TrainJobStateCounts({self.snapshot()})"


class TrainJobStateCollector(Collector):
    """Exports ``kubeflow_trainer_trainjobs{state}`` at scrape time from ``counts()`` (state → TrainJobs),
    called once per scrape on the scraping thread; a state it leaves out reads 0."""

    def __init__(self, counts: Callable[[], Mapping[str, int]]) -> None:
        self._counts = counts

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            TRAINJOBS_NAME,
            "Number of TrainJobs by state (Created, Suspended, Running, Complete, Failed)",
            labels=["state"],
        )

    def describe(self) -> Iterator[Metric]:
        """The family without samples: registering never calls ``counts``."""
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        try:
            counts = self._counts()
        except Exception as exc:  # noqa: BLE001 - one bad source must not fail the whole scrape; logged
            _log.warning("metrics.trainjobs_unavailable", error=str(exc), error_type=type(exc).__name__)
            return
        family = self._family()
        for state in STATES:
            family.add_metric([state], counts.get(state, 0))
        yield family

    def __repr__(self) -> str:
        return f"TrainJobStateCollector({self._counts!r})"


_registered_lock = threading.Lock()


def register_state_collector(counts: Callable[[], Mapping[str, int]]) -> TrainJobStateCollector:
    """Creates a :class:`TrainJobStateCollector` and registers it in ``controller.metrics.REGISTRY``.

    At most one can be registered at a time (a second raises ValueError: duplicate metric name); call
    :func:`unregister_state_collector` when its source goes away (the manager stops, a test ends).
    """
    collector = TrainJobStateCollector(counts)
    with _registered_lock:
        metrics.REGISTRY.register(collector)
    return collector


def unregister_state_collector(collector: TrainJobStateCollector) -> None:
    """Removes ``collector`` from the registry; the gauge disappears from the exposition."""
    with _registered_lock:
        metrics.REGISTRY.unregister(collector)


class TrainJobStateMetrics:
    """While the manager runs (a `Runnable`): a :class:`TrainJobStateCounts` registered on the cache's
    TrainJob informer (its own delivery thread) and the `kubeflow_trainer_trainjobs` collector reading it."""

    name = "trainjob-state-metrics"

    def __init__(self, cache: InformerCache) -> None:
        self._cache = cache
        self._lock = threading.Lock()
        self._collector: TrainJobStateCollector | None = None
        self._registration: tuple[SharedIndexInformer, Registration] | None = None

    def start(self, stop: threading.Event) -> None:
        with self._lock:
            if self._collector is not None:
                return
            counts = TrainJobStateCounts()
            informer = self._cache.get_informer(TRAINJOB, block_until_synced=False)
            self._registration = (informer, informer.add_event_handler(counts))
            self._collector = register_state_collector(counts.snapshot)

    def stop(self, timeout: float | None = None) -> bool:
        with self._lock:
            collector, self._collector = self._collector, None
            registration, self._registration = self._registration, None
        if collector is not None:
            unregister_state_collector(collector)
        if registration is not None:
            informer, handle = registration
            informer.remove_event_handler(handle)
        return True

    def need_leader_election(self) -> bool:
        return False


# --- time to the JobSet ------------------------------------------------------------------------------------

JOBSET_CREATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""10 ms to 5 min. ``creationTimestamp`` has whole-second precision (see :func:`observe_jobset_created`)."""

jobset_creation_seconds = Histogram(
    "kubeflow_trainer_trainjob_jobset_creation_seconds",
    "Time from a TrainJob's creation to the first apply of its JobSet, in seconds",
    buckets=JOBSET_CREATION_BUCKETS,
    registry=metrics.REGISTRY,
)


def _parse_timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def observe_jobset_created(trainjob: Mapping[str, Any], now: datetime) -> None:
    """Records ``now - metadata.creationTimestamp`` once the JobSet of ``trainjob`` was first applied.

    Call it once per TrainJob: when the apply created the JobSet (it was not there before). ``now`` must be
    timezone-aware. The API server truncates ``creationTimestamp`` to the second, so a value is up to 1 s
    larger than the true latency; a negative value (clock skew) is recorded as 0. A TrainJob without a
    readable ``creationTimestamp`` is not recorded (logged at debug).
    """
    if now.tzinfo is None:
        raise ValueError("observe_jobset_created: now must be timezone-aware")
    meta = trainjob.get("metadata")
    created = _parse_timestamp(meta.get("creationTimestamp") if isinstance(meta, Mapping) else None)
    if created is None:
        _log.debug("metrics.no_creation_timestamp")
        return
    jobset_creation_seconds.observe(max(0.0, (now - created).total_seconds()))


# --- reconcile failures ------------------------------------------------------------------------------------

REASON_BUILD = "BuildFailed"
"""The runtime pipeline could not build the objects (a plugin failed, bad TrainJob/runtime combination)."""
REASON_APPLY = "ApplyFailed"
"""Server-side apply of a built object failed (API error, conflict, webhook rejection)."""
REASON_STATUS = "StatusUpdateFailed"
"""The status patch of the TrainJob failed."""
REASON_RUNTIME_NOT_FOUND = "RuntimeNotFound"
"""The referenced (Cluster)TrainingRuntime does not exist and there is no snapshot."""
REASON_INVALID_SNAPSHOT = "InvalidSnapshot"
"""The runtime snapshot ConfigMap exists but cannot be read back as a runtime."""
REASON_UNSUPPORTED_RUNTIME = "UnsupportedRuntime"
"""``spec.runtimeRef`` names a kind/group with no runtime implementation (``TrainingRuntimeNotSupported``)."""
REASON_INVALID_TRAINJOB = "InvalidTrainJob"
"""The TrainJob bypassed admission and is invalid: marked ``Failed`` for good (counted once per reconcile that
finds it so, which is once: it is not retried)."""
REASON_JOBSET_STATUS = "JobSetStatusFailed"
"""The status could not be computed from the JobSet (an unfinished TrainJob whose JobSet is gone)."""
REASON_JOBSET_DELETION = "JobSetDeletionFailed"
"""The JobSet of a TrainJob past its active deadline could not be deleted (retried until it is gone)."""
REASON_OTHER = "Other"
"""Anything else (an unexpected exception)."""
REASONS = (
    REASON_BUILD,
    REASON_APPLY,
    REASON_STATUS,
    REASON_RUNTIME_NOT_FOUND,
    REASON_INVALID_SNAPSHOT,
    REASON_UNSUPPORTED_RUNTIME,
    REASON_INVALID_TRAINJOB,
    REASON_JOBSET_STATUS,
    REASON_JOBSET_DELETION,
    REASON_OTHER,
)
"""The whole ``reason`` vocabulary."""

reconcile_failures_total = Counter(
    "kubeflow_trainer_reconcile_failures",
    "Number of failed TrainJob reconciles, by reason",
    ["reason"],
    registry=metrics.REGISTRY,
)
for _reason in REASONS:
    reconcile_failures_total.labels(reason=_reason)


def count_reconcile_failure(reason: str) -> None:
    """Counts one failed reconcile under ``reason``, one of :data:`REASONS` (anything else raises
    ValueError: the vocabulary is fixed so the series stay bounded)."""
    if reason not in REASONS:
        raise ValueError(f"unknown reconcile failure reason {reason!r}; use one of {', '.join(REASONS)}")
    reconcile_failures_total.labels(reason=reason).inc()
