"""The TrainJob reconciler: builds a TrainJob's objects through the runtime pipeline, applies them, and
writes its status.

Go origin: kubeflow/trainer `pkg/controller/trainjob_controller.go` (`Reconcile`, `reconcileObjects`,
`reconcileDeadline`, `setSuspendedCondition`, `setTrainJobStatus`), with the status logic itself in
`runtime.core.RuntimeRegistry.next_status`.

The reconciler reads and writes through protocols (`controller.client.interfaces`: the TrainJob through a
`Reader`, its objects and status through a `Writer` and a `StatusWriter`; events through a `Recorder`), so
its unit tests hand it in-memory fakes.

One reconcile, step by step, as `TrainJobReconciler.reconcile` reads (upstream's `Reconcile`, in order):

1. `_get_trainjob`: the TrainJob from the cache; gone → done (and forget what was applied for it).
2. `spec.managedBy` names another controller (e.g. `kueue.x-k8s.io/multikueue`) → nothing at all.
3. `_reconcile_objects`, unless the TrainJob is finished (`Complete` or `Failed` is True):
   `RuntimeRegistry.new_objects`, then each object is server-side applied in order (field manager
   `trainer`, force); the first failure stops. What the pipeline returns follows upstream's rules: the JobSet
   only while it or the TrainJob is suspended (or when missing), PodGroups only while suspended, the MPI and
   Flux Secrets and the runtime snapshot only when missing.
   One `controller.trainer.apply.Applier` skips an apply that provably changes nothing, applies, and records
   what it applied; the pipeline reads through its `AppliedObjects`, which see the objects just applied.
   A failure emits a Warning event `TrainJobResourcesCreationFailed` with upstream's message
   (`TrainJob resources reconciliation failed: <error>`, the error cut at 950 characters plus ` ...`), and
   the reconcile ends in that error (requeue with backoff) after the status is written.
4. `_status`: `RuntimeRegistry.next_status` over those `AppliedObjects` (so the JobSet created a moment ago
   counts, where upstream reads a cache that has not seen it and fails with NotFound): `Suspended`, the
   JobSet's `Complete`/`Failed` and `jobsStatus`, the active deadline (once past it,
   `Failed`/`DeadlineExceeded`), an unsupported runtime kind as a persisted
   `Failed`/`TrainingRuntimeNotSupported` with no requeue; plus the `Failed` condition of a build no retry
   can help (below).
5. `_reconcile_deadline`: the JobSet of a TrainJob failed by its active deadline is deleted, until it is gone
   (see below).
6. `_update_status`: the status is written with a JSON merge patch on `/status`, and only when it changed.
7. The result (`_Outcome.result`): the deadline's `requeue_after`, or the error of step 3, 4 (the status
   plugin's), 5 or 6 (requeue with backoff); the first failure is counted once in the metrics.

Guarantees:

- **A steady-state reconcile makes no write**: no apply when nothing would change, no status patch when the
  status is equal, and (with every kind read cached) no request at all.
- **A new TrainJob costs no read**: ConfigMaps and Secrets are cached only when labelled, so a miss of the
  runtime snapshot or the MPI or Flux Secret is normally confirmed with a live GET (an older controller's
  are unlabelled). For a TrainJob nothing can have built yet (no status, no JobSet in the cache, nothing
  written for it by this process) the pipeline gets `new_owner_reader(namespace, name)`, whose misses of
  the TrainJob's own `<name>-...` objects are final; a miss of anything else (the status server's CA Secret)
  is still confirmed live, because the cache holds only labelled Secrets. The one case
  it cannot see: a predecessor that wrote the snapshot or a Secret and stopped before the JobSet and any
  status. The snapshot is then rewritten from the current runtime (the TrainJob had not started), and the
  Secret's apply is refused as immutable once (an event and a retry, which confirms live).
- **A finished TrainJob is never rebuilt**: a JobSet removed after completion (its TTL) is not recreated;
  its status keeps following the JobSet while it exists. (Upstream drops a non-deadline `Failed` condition at
  the start of every reconcile, so a failed TrainJob whose JobSet is gone is rebuilt; not here.)
- **The JobSet of a TrainJob failed by its active deadline is deleted until it is gone.** Upstream deletes it
  once, when the deadline passes, logs a failure and never retries, so the TrainJob says Failed while its
  pods run on (trainer#3833, #3994). Here every reconcile of a TrainJob whose `Failed` condition is True
  with reason `DeadlineExceeded` looks the JobSet up in the cache and deletes it (with its UID as a
  precondition) when it is there, controlled by the TrainJob and not already being deleted. A failure of
  that read or delete emits a Warning event `JobSetDeletionFailed` with the error, sets the condition's
  message to `MESSAGE_JOBSET_DELETION_PENDING` (status, reason and transition time unchanged, so
  `kubectl get` still shows Failed), counts under the metric reason `JobSetDeletionFailed`, and ends the
  reconcile in that error after the status is written: the workqueue retries it with backoff. Once the
  JobSet is gone the message is upstream's again. The decision is read from the status, not from the
  moment the deadline passes, so it also holds for finished TrainJobs (which are otherwise never rebuilt),
  after a restart, and for a TrainJob an upstream controller failed. With the JobSet gone it costs a cache
  read and no request.
- A TrainJob the webhook would have refused (it bypassed admission; the fields are immutable, so no retry can
  help) gets `Failed=True` with reason `InvalidTrainJob`, a Warning event, and no requeue. So does one whose
  runtime (its snapshot, or the live runtime before there is one) holds a value the pipeline does not build
  (`runtime.buildable`: edited by hand, or the runtime changed after admission), with reason
  `RuntimeNotBuildable` and a message naming the object and the field, and one whose snapshot ConfigMap was
  edited into something that is not its runtime (the tenant can edit it; nothing rewrites it). Every other
  build failure (runtime missing or not decodable, a snapshot that cannot be read or that another object
  owns, API errors) is retried with backoff and shown as events. The unbuildable values count when
  something is built from them (always on the first build): a running TrainJob whose JobSet and PodGroup
  are left alone is not failed for a field that bypassed admission or a runtime snapshot edited afterwards
  (`runtime.info.DeferredInfo`), except on MPI and Flux runtimes, whose ConfigMaps are built every time.
- Events are core/v1 Events with `firstTimestamp`, so `kubectl describe` and the Kubeflow SDK show them
  (upstream writes `events.k8s.io/v1` Events, which the SDK skips).

Deliberately missing: finalizers (children go by owner-reference garbage collection, as upstream).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, cast

import structlog

from controller.client import interfaces
from controller.client.errors import ApiError, NoKindMatch, NotFound, TransportError
from controller.client.interfaces import StatusWriter, Writer
from controller.clock import Clock
from controller.controller.reconcile import DONE, Request, Result
from controller.manager.recorder import EVENT_TYPE_WARNING
from controller.trainer import metrics
from controller.trainer.apply import Applied, AppliedObjects, Applier, merge_patch
from controller.trainer.kinds import JOBSET, TRAINJOB
from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView, find_condition
from runtime.core import RuntimeRegistry, StatusUpdate
from runtime.core.errors import (
    InvalidSnapshotError,
    InvalidTrainJobError,
    PermanentError,
    RuntimeNotFoundError,
    SnapshotError,
    UnbuildableRuntimeError,
    UnsupportedRuntimeError,
)
from runtime.core.status import condition, set_condition
from runtime.framework import FrameworkError, Reader, ReadError

__all__ = [
    "CONTROLLER_NAME",
    "EVENT_REASON_CREATION_FAILED",
    "EVENT_REASON_JOBSET_DELETION_FAILED",
    "MESSAGE_JOBSET_DELETION_PENDING",
    "REASON_INVALID_TRAINJOB",
    "REASON_RUNTIME_NOT_BUILDABLE",
    "RECORDER_NAME",
    "ObjectWriter",
    "ReconcileErrors",
    "Recorder",
    "TrainJobReconciler",
    "event_message",
]

CONTROLLER_NAME = "trainjob_controller"
RECORDER_NAME = "trainer-trainjob-controller"
EVENT_REASON_CREATION_FAILED = "TrainJobResourcesCreationFailed"
REASON_INVALID_TRAINJOB = "InvalidTrainJob"
"""The `Failed` condition's reason for a TrainJob the webhook would have refused (not upstream's)."""
EVENT_REASON_JOBSET_DELETION_FAILED = "JobSetDeletionFailed"
"""The Warning event of each failed attempt to delete the JobSet after the active deadline (ours)."""
MESSAGE_JOBSET_DELETION_PENDING = (
    f"{constants.MESSAGE_DEADLINE_EXCEEDED}; its JobSet could not be deleted yet and its pods may still be "
    f"running: retrying (see the {EVENT_REASON_JOBSET_DELETION_FAILED} events)"
)
"""The message of the `Failed`/DeadlineExceeded condition while the JobSet's deletion keeps failing; it goes
back to upstream's message once the JobSet is gone."""
REASON_RUNTIME_NOT_BUILDABLE = "RuntimeNotBuildable"
"""The `Failed` condition's reason for a TrainJob whose runtime, or runtime snapshot, holds a value the
pipeline does not build (`UnbuildableRuntimeError`), or whose snapshot ConfigMap holds no runtime of it
(`InvalidSnapshotError`; not upstream's)."""

_EVENT_ERROR_LIMIT = 950

_log = structlog.get_logger("controller.trainer")


def event_message(error: BaseException | str) -> str:
    """Upstream's event text: `TrainJob resources reconciliation failed: <error>`, the error cut at 950
    characters with ` ...` appended when cut."""
    text = str(error)
    message = f"TrainJob resources reconciliation failed: {text[:_EVENT_ERROR_LIMIT]}"
    return f"{message} ..." if len(text) > _EVENT_ERROR_LIMIT else message


_OBJECT_FAILURES = (FrameworkError, ApiError, TransportError, NoKindMatch)
"""What building and applying can raise for a reason outside this process: an event, and a retry."""
_DELETE_FAILURES = (ReadError, ApiError, TransportError, NoKindMatch)
"""What looking up and deleting the JobSet after the deadline can raise: an event, and a retry."""

_CONDITION_MESSAGE_LIMIT = 1024
"""Characters of an error kept in a condition message (the CRD allows 32768; a person reads far fewer)."""


def _failure_reason(error: BaseException) -> str:
    if isinstance(error, RuntimeNotFoundError):
        return metrics.REASON_RUNTIME_NOT_FOUND
    if isinstance(error, SnapshotError):
        return metrics.REASON_INVALID_SNAPSHOT
    if isinstance(error, InvalidTrainJobError):
        return metrics.REASON_INVALID_TRAINJOB
    if isinstance(error, FrameworkError):
        return metrics.REASON_BUILD
    if isinstance(error, (ApiError, TransportError, NoKindMatch)):
        return metrics.REASON_APPLY
    return metrics.REASON_OTHER


def _cut(text: str, limit: int) -> str:
    return text[:limit] + " ..." if len(text) > limit else text


def _controlled_by(metadata: Mapping[str, Any], uid: str) -> bool:
    """Whether an object's controller ownerReference is the object of `uid`."""
    return any(
        isinstance(ref, Mapping) and ref.get("controller") is True and ref.get("uid") == uid
        for ref in metadata.get("ownerReferences") or ()
    )


def _set_deadline_message(status: Mapping[str, Any], message: str) -> None:
    """Set the message of the status's `Failed`/DeadlineExceeded condition (in place; its transition time
    stays, as the condition's status does not change)."""
    failed = find_condition(status.get("conditions") or [], constants.CONDITION_FAILED)
    if failed is not None and failed.get("reason") == constants.REASON_DEADLINE_EXCEEDED:
        failed["message"] = message


def _condition_reason(error: PermanentError) -> str:
    """The `Failed` condition's reason for a permanent build failure."""
    if isinstance(error, (UnbuildableRuntimeError, InvalidSnapshotError)):
        return REASON_RUNTIME_NOT_BUILDABLE
    return REASON_INVALID_TRAINJOB


class ReconcileErrors(Exception):
    """Several things went wrong in one reconcile (upstream `errors.Join`); the first is the cause."""

    def __init__(self, errors: list[BaseException]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors
        self.__cause__ = errors[0]


class Recorder(Protocol):
    """Where the reconciler's events go (`controller.manager.recorder.EventRecorder`)."""

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None: ...


class ObjectWriter(Writer, StatusWriter, Protocol):
    """What the reconciler writes through: its objects, and the TrainJob's status
    (`controller.client.client.Client` is one)."""


@dataclass(slots=True)
class _Outcome:
    """What went wrong in one reconcile, step after step."""

    failure: str | None = None
    """The metric reason of the first failure (`metrics.count_reconcile_failure`), counted once at the end."""
    errors: list[BaseException] = field(default_factory=list)
    """What the reconcile ends in: requeue with backoff."""
    permanent: PermanentError | None = None
    """A build failure no retry can help: a persisted `Failed` condition instead of an error."""

    def failed(self, reason: str, error: BaseException | None = None) -> None:
        """A step failed: `reason` counts unless an earlier step failed first; `error` ends the reconcile."""
        self.failure = self.failure or reason
        if error is not None:
            self.errors.append(error)

    def result(self, requeue_after: float | None) -> Result:
        """Count the failure, then raise the errors, or requeue after `requeue_after` seconds, or done."""
        if self.failure is not None:
            metrics.count_reconcile_failure(self.failure)
        if self.errors:
            raise self.errors[0] if len(self.errors) == 1 else ReconcileErrors(self.errors)
        if requeue_after:
            return Result(requeue_after=requeue_after)
        return DONE


class TrainJobReconciler:
    """Reconciles one TrainJob per call; see the module docstring. Safe for concurrent workers (one key
    is never reconciled by two workers at once)."""

    __slots__ = (
        "_applier",
        "_cache",
        "_client",
        "_clock",
        "_new_owner_reader",
        "_reader",
        "_recorder",
        "_registry",
    )

    def __init__(
        self,
        *,
        cache: interfaces.Reader,
        client: ObjectWriter,
        reader: Reader,
        registry: RuntimeRegistry,
        recorder: Recorder,
        clock: Clock,
        applier: Applier | None = None,
        new_owner_reader: Callable[[str, str], Reader] | None = None,
    ) -> None:
        """`cache` serves the TrainJob; `reader` everything the pipeline reads; `new_owner_reader(namespace,
        name)` is `reader` with final cache misses for the objects of a TrainJob nothing has built yet
        (`controller.trainer.reader.CacheReader.trusting_misses`; `reader` itself when None); `applier`
        writes through `client` when None."""
        self._cache = cache
        self._client = client
        self._reader = reader
        self._new_owner_reader = new_owner_reader
        self._registry = registry
        self._recorder = recorder
        self._clock = clock
        self._applier = (
            applier if applier is not None else Applier(client, field_manager=constants.FIELD_MANAGER)
        )

    def reconcile(self, request: Request) -> Result:
        owner = (request.namespace, request.name)
        trainjob = self._get_trainjob(request)
        if trainjob is None:
            self._applier.forget(owner)
            return DONE
        view = TrainJobView(trainjob)
        if not view.is_managed_by_trainer:
            return DONE

        outcome = _Outcome()
        objects = self._applier.for_reconcile(owner, self._reader_for(view, owner))
        if not view.is_finished:
            self._reconcile_objects(trainjob, objects, outcome)
        now = self._clock.now()
        update = self._registry.next_status(trainjob, objects, now)
        status = self._status(update, now, outcome)
        if update.delete_jobset:
            self._reconcile_deadline(view, objects, status, outcome)
        self._update_status(view, status, update.terminal, outcome)
        if update.terminal or outcome.permanent is not None:
            self._applier.forget(owner)
        return outcome.result(update.requeue_after)

    # --- the steps, in order --------------------------------------------------------------------------

    def _get_trainjob(self, request: Request) -> TrainJob | None:
        """The TrainJob from the cache; None when it is gone."""
        try:
            return cast(TrainJob, self._cache.get(TRAINJOB, request.name, request.namespace))
        except NotFound:
            return None

    def _reader_for(self, view: TrainJobView, owner: tuple[str, str]) -> Reader:
        """`new_owner_reader` when nothing can have been built for the TrainJob yet: no status, nothing this
        process has begun writing for it, no JobSet in the cache (a read that fails counts as not new)."""
        if view.obj.get("status") or self._applier.started(owner):
            return self._reader
        try:
            found = self._reader.get(JOBSET.api_version, JOBSET.kind, view.name, view.namespace)
        except ReadError:
            return self._reader
        if found is not None or self._new_owner_reader is None:
            return self._reader
        return self._new_owner_reader(view.namespace, view.name)

    def _reconcile_objects(self, trainjob: TrainJob, objects: AppliedObjects, outcome: _Outcome) -> None:
        """Build the TrainJob's objects and apply them in order; the first failure stops, with an event."""
        try:
            for body in self._registry.new_objects(trainjob, objects):
                if objects.apply(body) is Applied.CREATED:
                    metrics.observe_jobset_created(trainjob, self._clock.now())
        except UnsupportedRuntimeError:
            pass  # next_status records it as a persisted Failed condition
        except _OBJECT_FAILURES as exc:
            self._recorder.event(
                trainjob, EVENT_TYPE_WARNING, EVENT_REASON_CREATION_FAILED, event_message(exc)
            )
            _log.info("trainjob.objects_failed", error=str(exc)[:_EVENT_ERROR_LIMIT])
            if isinstance(exc, PermanentError):
                outcome.failed(_failure_reason(exc))
                outcome.permanent = exc
            else:
                outcome.failed(_failure_reason(exc), exc)

    @staticmethod
    def _status(update: StatusUpdate, now: datetime, outcome: _Outcome) -> dict[str, Any]:
        """The status to write: `next_status`'s, with the `Failed` condition of a permanent build failure
        (whose JobSet status, needing none, fails nothing)."""
        status: dict[str, Any] = dict(update.status)
        permanent = outcome.permanent
        if permanent is not None:
            failed = condition(
                constants.CONDITION_FAILED,
                constants.CONDITION_TRUE,
                _condition_reason(permanent),
                _cut(str(permanent), _CONDITION_MESSAGE_LIMIT),
            )
            set_condition(status.setdefault("conditions", []), failed, now)
        elif update.error is not None:
            outcome.failed(metrics.REASON_JOBSET_STATUS, update.error)
        return status

    def _reconcile_deadline(
        self, view: TrainJobView, reader: Reader, status: dict[str, Any], outcome: _Outcome
    ) -> None:
        """Delete the JobSet of a TrainJob failed by its active deadline, until it is gone; while that fails,
        an event, the pending message in `status`, and a retry."""
        try:
            self._delete_jobset(view, reader)
        except _DELETE_FAILURES as exc:
            outcome.failed(metrics.REASON_JOBSET_DELETION, exc)
            message = f"Deleting the JobSet after the active deadline failed (retrying): {exc}"
            self._recorder.event(
                view.obj,
                EVENT_TYPE_WARNING,
                EVENT_REASON_JOBSET_DELETION_FAILED,
                _cut(message, _EVENT_ERROR_LIMIT),
            )
            _log.info("trainjob.jobset_delete_failed", error=str(exc)[:_EVENT_ERROR_LIMIT])
            _set_deadline_message(status, MESSAGE_JOBSET_DELETION_PENDING)
        else:
            _set_deadline_message(status, constants.MESSAGE_DEADLINE_EXCEEDED)

    def _update_status(
        self, view: TrainJobView, status: dict[str, Any], terminal: bool, outcome: _Outcome
    ) -> None:
        """Merge patch `/status` when it changed (a terminal status counts once: when it is recorded)."""
        current = cast(Mapping[str, Any], view.obj.get("status") or {})
        if status == current:
            return
        if terminal:
            outcome.failed(metrics.REASON_UNSUPPORTED_RUNTIME)
        try:
            self._client.patch_status(
                TRAINJOB, view.name, {"status": merge_patch(current, status)}, view.namespace
            )
        except (ApiError, TransportError) as exc:
            outcome.failed(metrics.REASON_STATUS, exc)

    def _delete_jobset(self, view: TrainJobView, reader: Reader) -> None:
        """Delete the TrainJob's JobSet if the reader still has it, is not deleting it already, and the
        TrainJob controls it; raises what the read or the delete raised (NotFound is success). The cached
        JobSet's UID is a precondition, so a JobSet created since under the same name is not deleted."""
        jobset = reader.get(JOBSET.api_version, JOBSET.kind, view.name, view.namespace)
        if jobset is None:
            return
        metadata = jobset.get("metadata") or {}
        if metadata.get("deletionTimestamp") or not _controlled_by(metadata, view.uid):
            return
        with contextlib.suppress(NotFound):  # gone already: what was wanted
            self._client.delete(JOBSET, view.name, view.namespace, uid=metadata.get("uid") or None)

    def __repr__(self) -> str:
        return f"<TrainJobReconciler {self._registry!r}>"
