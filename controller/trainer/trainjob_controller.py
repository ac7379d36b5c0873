"""The TrainJob reconciler: builds a TrainJob's objects through the runtime pipeline, applies them, and
writes its status.

Go origin: kubeflow/trainer `pkg/controller/trainjob_controller.go` (`Reconcile`, `reconcileObjects`,
`reconcileDeadline`, `setSuspendedCondition`, `setTrainJobStatus`), with the status logic itself in
`runtime.core.RuntimeRegistry.next_status`.

One reconcile, step by step:

1. Get the TrainJob from the cache; gone → done (and forget what was applied for it).
2. `spec.managedBy` names another controller (e.g. `kueue.x-k8s.io/multikueue`) → nothing at all.
3. Unless the TrainJob is finished (`Complete` or `Failed` is True): `RuntimeRegistry.new_objects`, then each
   object is server-side applied in order (field manager `trainer`, force); the first failure stops. What the
   pipeline returns follows upstream's rules: the JobSet only while it or the TrainJob is suspended (or when
   missing), PodGroups only while suspended, the MPI and Flux Secrets and the runtime snapshot only when
   missing.
   An apply that provably changes nothing is skipped (`controller.trainer.apply.AppliedBodies`).
   A failure emits a Warning event `TrainJobResourcesCreationFailed` with upstream's message
   (`TrainJob resources reconciliation failed: <error>`, the error cut at 950 characters plus ` ...`), and
   the reconcile ends in that error (requeue with backoff) after the status is written.
4. Status: `RuntimeRegistry.next_status` over a reader that sees the objects just applied (so the JobSet
   created a moment ago counts, where upstream reads a cache that has not seen it and fails with NotFound):
   `Suspended`, the JobSet's `Complete`/`Failed` and `jobsStatus`, the active deadline (once past it,
   `Failed`/`DeadlineExceeded` and the JobSet is deleted, until it is gone: see below), an unsupported
   runtime kind as a persisted `Failed`/`TrainingRuntimeNotSupported` with no requeue.
5. The status is written with a JSON merge patch on `/status`, and only when it changed.
6. Result: the deadline's `requeue_after`, or the error of step 3, 4 (the status plugin's, or the JobSet's
   deletion's) or 5 (requeue with backoff).

Guarantees:

- **A steady-state reconcile makes no write**: no apply when nothing would change, no status patch when the
  status is equal, and (with every kind read cached) no request at all.
- **A new TrainJob costs no read**: ConfigMaps and Secrets are cached only when labelled, so a miss of the
  runtime snapshot or the MPI or Flux Secret is normally confirmed with a live GET (an older controller's
  are unlabelled). For a TrainJob nothing can have built yet (no status, no JobSet in the cache, nothing
  written for it by this process) the pipeline gets `new_owner_reader`, whose misses are final. The one case
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
  owns, API errors) is retried with backoff and shown as events.
- Events are core/v1 Events with `firstTimestamp`, so `kubectl describe` and the Kubeflow SDK show them
  (upstream writes `events.k8s.io/v1` Events, which the SDK skips).

Deliberately missing: finalizers (children go by owner-reference garbage collection, as upstream).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, cast

import structlog

from controller.cache.informer_cache import InformerCache
from controller.client.client import Client
from controller.client.errors import ApiError, NoKindMatch, NotFound, TransportError
from controller.clock import Clock
from controller.controller.reconcile import DONE, Request, Result
from controller.manager.recorder import EVENT_TYPE_WARNING, EventRecorder
from controller.trainer import metrics
from controller.trainer.apply import AppliedBodies, contains, merge_patch
from controller.trainer.kinds import JOBSET, TRAINJOB
from controller.trainer.reader import AppliedObjects
from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView, find_condition
from runtime.core import RuntimeRegistry
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


class TrainJobReconciler:
    """Reconciles one TrainJob per call; see the module docstring. Safe for concurrent workers (one key
    is never reconciled by two workers at once)."""

    __slots__ = (
        "_applied",
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
        cache: InformerCache,
        client: Client,
        reader: Reader,
        registry: RuntimeRegistry,
        recorder: EventRecorder,
        clock: Clock,
        applied: AppliedBodies | None = None,
        new_owner_reader: Reader | None = None,
    ) -> None:
        """`new_owner_reader`: `reader` with final cache misses, for a TrainJob nothing has built yet
        (`controller.trainer.reader.CacheReader.trusting_misses`); `reader` itself when None."""
        self._cache = cache
        self._client = client
        self._reader = reader
        self._new_owner_reader = new_owner_reader if new_owner_reader is not None else reader
        self._registry = registry
        self._recorder = recorder
        self._clock = clock
        self._applied = applied if applied is not None else AppliedBodies()

    def reconcile(self, request: Request) -> Result:
        owner = (request.namespace, request.name)
        try:
            obj = self._cache.get(TRAINJOB, request.name, request.namespace)
        except NotFound:
            self._applied.forget(owner)
            return DONE
        trainjob = cast(TrainJob, obj)
        view = TrainJobView(trainjob)
        if not view.is_managed_by_trainer:
            return DONE

        reader = AppliedObjects(self._new_owner_reader if self._is_new(view, owner) else self._reader)
        errors: list[BaseException] = []
        failure: str | None = None  # the metric reason of this reconcile's first failure
        permanent: PermanentError | None = None
        if not view.is_finished:
            try:
                self._reconcile_objects(trainjob, owner, reader)
            except UnsupportedRuntimeError:
                pass  # next_status records it as a persisted Failed condition
            except _OBJECT_FAILURES as exc:
                failure = _failure_reason(exc)
                self._recorder.event(
                    trainjob, EVENT_TYPE_WARNING, EVENT_REASON_CREATION_FAILED, event_message(exc)
                )
                _log.info("trainjob.objects_failed", error=str(exc)[:_EVENT_ERROR_LIMIT])
                if isinstance(exc, PermanentError):
                    permanent = exc
                else:
                    errors.append(exc)

        now = self._clock.now()
        update = self._registry.next_status(trainjob, reader, now)
        status: dict[str, Any] = dict(update.status)
        if permanent is not None:
            conditions = status.setdefault("conditions", [])
            message = str(permanent)
            if len(message) > _CONDITION_MESSAGE_LIMIT:
                message = message[:_CONDITION_MESSAGE_LIMIT] + " ..."
            failed = condition(
                constants.CONDITION_FAILED, constants.CONDITION_TRUE, _condition_reason(permanent), message
            )
            set_condition(conditions, failed, now)
        if update.error is not None and permanent is None:  # a failed TrainJob needs no JobSet status
            failure = failure or metrics.REASON_JOBSET_STATUS
            errors.append(update.error)
        if update.delete_jobset:
            try:
                self._delete_jobset(view, reader)
            except _DELETE_FAILURES as exc:
                failure = failure or metrics.REASON_JOBSET_DELETION
                message = f"Deleting the JobSet after the active deadline failed (retrying): {exc}"
                self._recorder.event(
                    trainjob,
                    EVENT_TYPE_WARNING,
                    EVENT_REASON_JOBSET_DELETION_FAILED,
                    _cut(message, _EVENT_ERROR_LIMIT),
                )
                _log.info("trainjob.jobset_delete_failed", error=str(exc)[:_EVENT_ERROR_LIMIT])
                errors.append(exc)
                _set_deadline_message(status, MESSAGE_JOBSET_DELETION_PENDING)
            else:
                _set_deadline_message(status, constants.MESSAGE_DEADLINE_EXCEEDED)

        current = cast(Mapping[str, Any], trainjob.get("status") or {})
        if status != current:
            if update.terminal:
                failure = failure or metrics.REASON_UNSUPPORTED_RUNTIME  # counted once: when it is recorded
            try:
                self._client.patch_status(
                    TRAINJOB, view.name, {"status": merge_patch(current, status)}, view.namespace
                )
            except (ApiError, TransportError) as exc:
                failure = failure or metrics.REASON_STATUS
                errors.append(exc)
        if update.terminal or permanent is not None:
            self._applied.forget(owner)
        if failure is not None:
            metrics.count_reconcile_failure(failure)

        if errors:
            raise errors[0] if len(errors) == 1 else ReconcileErrors(errors)
        if update.requeue_after:
            return Result(requeue_after=update.requeue_after)
        return DONE

    def _is_new(self, view: TrainJobView, owner: tuple[str, str]) -> bool:
        """Whether nothing can have been built for the TrainJob yet: no status, nothing this process has begun
        writing for it, no JobSet in the cache (a read that fails counts as not new)."""
        if view.obj.get("status") or self._applied.started(owner):
            return False
        try:
            return self._reader.get(JOBSET.api_version, JOBSET.kind, view.name, view.namespace) is None
        except ReadError:
            return False

    def _reconcile_objects(self, trainjob: TrainJob, owner: tuple[str, str], reader: AppliedObjects) -> None:
        objects = self._registry.new_objects(trainjob, reader)
        if objects:
            self._applied.start(owner)
        for body in objects:
            metadata = body.get("metadata") or {}
            api_version, kind = str(body.get("apiVersion", "")), str(body.get("kind", ""))
            name, namespace = str(metadata.get("name", "")), metadata.get("namespace")
            if self._applied.same_body(owner, body) and contains(
                body, reader.get(api_version, kind, name, namespace)
            ):
                continue  # the last body this process applied, still in place: applying changes nothing
            # First applied: not applied by this process before and not in the cache (the metric counts a
            # TrainJob once, even when a second reconcile comes before the informer has seen the JobSet).
            created = (
                api_version == JOBSET.api_version
                and kind == JOBSET.kind
                and not self._applied.has_applied(owner, body)
                and reader.get(api_version, kind, name, namespace) is None
            )
            result = self._client.apply(body, constants.FIELD_MANAGER, force=True)
            self._applied.record(owner, body)
            reader.record(result)
            if created:
                metrics.observe_jobset_created(trainjob, self._clock.now())

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
