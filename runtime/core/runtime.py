"""The core runtimes (TrainingRuntime, ClusterTrainingRuntime) and the registry that picks one per TrainJob.

Go origin: kubeflow/trainer `pkg/runtime/core` (`trainingruntime.go`, `clustertrainingruntime.go`,
`registry.go`, `core.go`: `NewObjects`, `RuntimeInfo`, `TrainJobStatus`, `ValidateObjects`) and the status
part of the TrainJob reconcile (`pkg/controller/trainjob_controller.go`).

The build order of a reconcile (`RuntimeRegistry.new_objects`):
1. The runtime: from the snapshot ConfigMap `<trainjob>-runtime-snapshot` when it exists (checked by
   `read_snapshot`), else the live (Cluster)TrainingRuntime, whose snapshot is then the first object to
   apply.
2. The ComponentBuilders' objects, in plugin order, after the snapshot. The controller applies them in the
   order returned (server-side apply, field manager `trainer`, force) and stops at the first failure.
3. The `Info` they build from, computed when a builder first reads it (`runtime.info.DeferredInfo`): the
   TrainJob's and the runtime's values checked (`runtime.buildable`), `build_info` (runtime patches,
   resourcesPerNode, PodSets), then the framework's Info phases in `Phase` order: EnforceMLPolicy →
   EnforcePodGroupPolicy → PodNetwork. A running TrainJob's builders decide from the cluster and the
   runtime's spec alone, so its build computes none of it and costs about a tenth of an eager one (MPI
   and Flux TrainJobs excepted: their plugins build a ConfigMap at every reconcile, from Info). Upstream
   computes it for every reconcile.

Guarantees:
- Pure: reads go through the `Reader`, time is an argument, nothing is applied here.
- A runtime kind without a registered runtime raises `UnsupportedRuntimeError` from `new_objects`, and
  `next_status` turns it into a `Failed` condition (reason `TrainingRuntimeNotSupported`) that the
  controller persists (upstream sets it in memory only, and retries the TrainJob forever).
- `validate` never raises for a TrainJob of the CRD's shape (what the API server stores). One that is not
  (a string where the schema says object, 300 levels of nesting: only a direct caller can pass it) may
  raise `TypeError`, `AttributeError`, `KeyError`, `IndexError` or `ValueError`; the TrainJob webhook
  answers those with the schema's field errors (`controller.trainer.webhooks`). On an update whose runtime
  was deleted, it validates against the TrainJob's snapshot instead of rejecting the update (upstream
  rejects every update, even of a label, once the runtime is gone); on create the runtime must exist.
- `spec.trainer.numNodes` or `numProcPerNode` below 1 is rejected: a field error in `validate`,
  `InvalidTrainJobError` in `new_objects` (when it builds from them, below) for objects that bypassed the
  webhook (upstream would build 0-pod
  jobs and `PET_NNODES=0`; the schema, as upstream's, accepts both).
- A live runtime is read as its snapshot is: a copy whose fields have the runtime CRD's JSON types and whose
  quantities parse (what Go's typed decoding guarantees), else `InvalidRuntimeError` from `new_objects`
  (retried: the runtime may be fixed) and a `spec.runtimeRef` field error naming the runtime's field in
  `validate`. So a runtime stored under an older CRD or edited in etcd is refused before anything is built,
  never built once and then refused as a snapshot.
- A runtime patch that cannot be merged is a field error of that item, `spec.runtimePatches[<i>]`, in
  `validate` (upstream ignores the error there and fails every reconcile instead) and a
  `RuntimePatchError` in `new_objects`.
- `spec.runtimePatches` that is not a list of objects (a list of strings, of numbers, of lists: only an
  object that bypassed the CRD schema) is a field error of each wrong item in `validate`, before any
  plugin reads them, and `InvalidTrainJobError` in `new_objects`: never an internal error.
- A count no Kubernetes cluster could run (`runtime.info.InvalidCountError`: `spec.trainer.numNodes` above
  `MAX_PODS_PER_JOB`, 100000, the API server's limit on an Indexed Job's parallelism; a runtime's
  `mlPolicy.numNodes`, `parallelism` or `replicas` above its bound) is a field error in `validate` (runtime
  fields under `spec.runtimeRef`, naming the field) and, from `new_objects`, `InvalidTrainJobError` for
  the TrainJob's fields or `UnbuildableRuntimeError` for the runtime's. Upstream builds the pod list of
  `numNodes: 2147483647`, which no memory holds.
- A snapshot ConfigMap of the TrainJob's (its controller) whose content is not the TrainJob's runtime raises
  `InvalidSnapshotError`, permanent (upstream's message; the tenant can edit the snapshot and nothing
  rewrites it); one that cannot be read, or that another object owns (a predecessor of the same name, until
  garbage collection deletes it), raises `SnapshotError`, retried.
- On the first build (no snapshot yet) the TrainJob's and the live runtime's values are checked before
  anything is built or applied. After that, a value that cannot be built fails the build only when a
  builder reads Info: a running TrainJob whose builders all leave their objects alone (JobSet running,
  PodGroup present; not MPI or Flux, whose ConfigMaps are built at every reconcile, as upstream builds
  them) is not failed for a field that bypassed admission or a snapshot edited by hand. When Info's
  computation fails, the build fails with that error, even where the builder that read Info caught it.
- One rule for what can be built (`runtime.buildable`), from the same code at admission and at build: the
  TrainJob's and the runtime's values that reach pods (env var names, container resources) before any
  plugin, then, in `validate`, the Info phases themselves, so that whatever a plugin's build refuses
  (`UnbuildableError`, such as a count beyond `int32`) the webhook refuses first, naming the field; any
  other failure of a phase is an `Internal error` naming the plugin. In `new_objects` the same values raise
  permanent errors: `InvalidTrainJobError`, or `UnbuildableRuntimeError` naming the runtime object (or the
  snapshot ConfigMap the TrainJob is built from) and its field.

- A live runtime whose snapshot a ConfigMap cannot hold (more than 1 MiB of YAML: the API server would
  refuse the snapshot's apply at every retry, as upstream's TrainJobs meet it) is unbuildable too: a
  `spec.runtimeRef` field error in `validate` ("the runtime cannot run: its runtime snapshot would be N
  bytes of YAML, ..."), `UnbuildableRuntimeError` naming the runtime from `new_objects`, before anything is
  applied. The size is exact: the snapshot text is made once per cached runtime object
  (`_TypedRuntimes`) and is the very text the first build applies; a TrainJob validated against its
  snapshot (its runtime deleted) is not checked, its snapshot exists already.

Deliberately missing: field indexers and finalizers (the controller's business), and any runtime kind other
than the two Trainer kinds.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn, cast

from runtime.api import constants
from runtime.api.v1alpha1 import TrainingRuntimeSpec, TrainJob, TrainJobStatus
from runtime.api.views import ObjectView, TrainJobView, as_dict, copy_json, find_condition
from runtime.buildable import MAX_INT32, UnbuildableError, runtime_errors, trainjob_errors
from runtime.core.errors import (
    InvalidRuntimeError,
    InvalidSnapshotError,
    InvalidTrainJobError,
    RuntimeNotFoundError,
    SnapshotError,
    UnbuildableRuntimeError,
    UnsupportedRuntimeError,
)
from runtime.core.snapshot import (
    SnapshotText,
    build_snapshot,
    get_snapshot,
    is_owned_by,
    preload_runtime_schema,
    read_snapshot,
    runtime_type_errors,
    snapshot_name,
    snapshot_text,
    type_error_summary,
)
from runtime.core.status import DeadlineCheck, check_deadline, condition, set_condition, suspended_condition
from runtime.echo import quote
from runtime.framework.errors import FrameworkError
from runtime.framework.extensions import Watch
from runtime.framework.framework import Framework, PluginError
from runtime.framework.reader import Reader, ReadError
from runtime.framework.validation import FieldError, Validation
from runtime.info import DeferredInfo, Info, RuntimePatchError, build_info
from runtime.schema import json_type

__all__ = [
    "CLUSTER_TRAINING_RUNTIME",
    "TRAINING_RUNTIME",
    "Runtime",
    "RuntimeKind",
    "RuntimeRegistry",
    "StatusUpdate",
    "registry_key",
    "trainjob_field_errors",
]


def registry_key(kind: str, group: str) -> str:
    """`<Kind>.<group>` (Go `schema.GroupKind.String()`; just the kind when the group is empty)."""
    return f"{kind}.{group}" if group else kind


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeKind:
    """One runtime kind and the exact texts upstream uses for it."""

    kind: str
    plural: str
    namespaced: bool
    not_found: str
    """Prefix of the error when the live runtime is missing."""
    snapshot_error: str
    """Prefix of the error when the snapshot cannot be used."""
    validation_path: str
    validation_message: str
    warn_deprecated: bool

    @property
    def key(self) -> str:
        return registry_key(self.kind, constants.GROUP)


TRAINING_RUNTIME = RuntimeKind(
    kind=constants.TRAINING_RUNTIME_KIND,
    plural="trainingruntimes",
    namespaced=True,
    not_found="TrainingRuntime specified in TrainJob is not found",
    snapshot_error="unable to get runtime snapshot",
    validation_path="spec.runtimeRef",
    validation_message="specified trainingRuntime must be created before the TrainJob is created",
    warn_deprecated=False,
)
CLUSTER_TRAINING_RUNTIME = RuntimeKind(
    kind=constants.CLUSTER_TRAINING_RUNTIME_KIND,
    plural="clustertrainingruntimes",
    namespaced=False,
    not_found="not found ClusterTrainingRuntime specified in TrainJob",
    snapshot_error="getting runtime snapshot",
    validation_path="spec.RuntimeRef",  # sic: upstream capitalises it for this kind
    validation_message="specified clusterTrainingRuntime must be created before the TrainJob is created",
    warn_deprecated=True,
)


def trainjob_field_errors(trainjob: TrainJob) -> tuple[FieldError, ...]:
    """Checks every runtime kind makes, before any plugin: `spec.runtimePatches` is a list of objects,
    `spec.trainer.numNodes` and `numProcPerNode` ≥ 1, and the TrainJob's values that reach pods are buildable
    (`runtime.buildable.trainjob_errors`).

    Upstream v2.3.0's schema bounds neither count, so the CRDs (which match it) accept 0 and negative values.
    """
    view = TrainJobView(trainjob)
    trainer = view.trainer or {}
    errors = _runtime_patch_shape_errors(view.spec.get("runtimePatches"))
    counts = (("numNodes", trainer.get("numNodes")), ("numProcPerNode", trainer.get("numProcPerNode")))
    for field, value in counts:
        if value is not None and value < 1:
            errors.append(
                FieldError.invalid(f"spec.trainer.{field}", value, "must be greater than or equal to 1")
            )
    num_proc = trainer.get("numProcPerNode")
    if num_proc is not None and num_proc > MAX_INT32:  # the schema's int32, for objects that skipped it
        message = f"must be less than or equal to {MAX_INT32}"
        errors.append(FieldError.invalid("spec.trainer.numProcPerNode", num_proc, message))
    errors.extend(trainjob_errors(trainjob))
    return tuple(errors)


def _runtime_patch_shape_errors(patches: Any) -> list[FieldError]:
    """`spec.runtimePatches` is a list of objects, as the CRD schema says (and Go's typed decoding needs),
    before any plugin reads it: each wrong item is named, in the schema's words."""
    if patches is None:
        return []
    if not isinstance(patches, list):
        return [
            FieldError.invalid(_RUNTIME_PATCHES, patches, f"must be of type array, not {json_type(patches)}")
        ]
    return [
        FieldError.invalid(
            f"{_RUNTIME_PATCHES}[{index}]", patch, f"must be of type object, not {json_type(patch)}"
        )
        for index, patch in enumerate(patches)
        if not isinstance(patch, dict)
    ]


_RUNTIME_PATCHES = "spec.runtimePatches"


class _TypedRuntimes:
    """The live runtimes' typed copies (`runtime_type_errors`) and snapshot texts, kept for up to `size`
    runtime objects read.

    A cache replaces an object on every change and never mutates one, so an object once checked always checks
    the same: the entry is found by the object's identity (the entry holds the object, so its `id` is not
    reused meanwhile). Saves the copy and the check (0.1 to 0.3 ms a runtime) on every admission and first
    build, and the snapshot's YAML (`snapshot_text`, made on first need, then shared by every admission that
    checks its size and every build that writes it). Full, it starts over. Safe for concurrent callers
    without a lock (`runtime/` takes none): each step is one dict operation or one list item, and two
    callers checking one object at once both store the same verdict. The copies are shared and read-only.
    """

    __slots__ = ("_entries", "_kind", "_size", "_texts")

    def __init__(self, kind: str, size: int = 64) -> None:
        self._kind = kind
        self._size = size
        self._entries: dict[int, tuple[Mapping[str, Any], Mapping[str, Any], list[str]]] = {}
        """id(live) -> (live, its typed copy, where its types are wrong)."""
        self._texts: dict[int, tuple[Mapping[str, Any], SnapshotText]] = {}
        """id(typed copy) -> (the typed copy, its snapshot text), for the copies in `_entries`."""

    def typed(self, live: Mapping[str, Any]) -> tuple[Mapping[str, Any], list[str]]:
        """(the typed copy of `live`, where its fields have the wrong JSON type)."""
        entry = self._entries.get(id(live))
        if entry is not None and entry[0] is live:
            return entry[1], entry[2]
        runtime = cast(dict[str, Any], copy_json(live))
        errors = runtime_type_errors(runtime)
        if len(self._entries) >= self._size:
            self._entries.clear()
            self._texts.clear()
        self._entries[id(live)] = (live, runtime, errors)
        return runtime, errors

    def snapshot_text(self, runtime: Mapping[str, Any]) -> SnapshotText:
        """`snapshot_text` of a typed copy `typed` returned, made once per copy."""
        entry = self._texts.get(id(runtime))
        if entry is not None and entry[0] is runtime:
            return entry[1]
        text = snapshot_text(runtime, self._kind)
        if len(self._texts) < self._size:
            self._texts[id(runtime)] = (runtime, text)
        return text


class Runtime:
    """Builds, validates and reports status for TrainJobs that reference one runtime kind."""

    __slots__ = ("_typed", "framework", "kind")

    def __init__(self, kind: RuntimeKind, framework: Framework) -> None:
        self.kind = kind
        self.framework = framework
        self._typed = _TypedRuntimes(kind.kind)

    def _runtime_text(self, trainjob: TrainJob) -> str:
        """`trainingruntimes.trainer.kubeflow.org "<name>"`, the name quoted as Go's NotFound error quotes it
        (`%q`: a tenant's control or bidirectional character is escaped)."""
        return f"{self.kind.plural}.{constants.GROUP} {quote(TrainJobView(trainjob).runtime_ref_name, 253)}"

    def _not_found_text(self, trainjob: TrainJob) -> str:
        return f"{self._runtime_text(trainjob)} not found"

    def get_runtime(self, trainjob: TrainJob, reader: Reader) -> Mapping[str, Any] | None:
        """The live runtime the TrainJob references (raises `ReadError` when it cannot tell).

        What is returned is a copy whose fields have the runtime CRD's JSON types, as a snapshot read back
        has them (shared and read-only); a runtime without them raises `InvalidRuntimeError` naming the first
        fields."""
        view = TrainJobView(trainjob)
        namespace = view.namespace if self.kind.namespaced else None
        live = reader.get(constants.API_VERSION, self.kind.kind, view.runtime_ref_name, namespace)
        if live is None:
            return None
        runtime, errors = self._typed.typed(live)
        if errors:
            raise InvalidRuntimeError(
                f"{self._runtime_text(trainjob)} is not a runtime object: {type_error_summary(errors)}"
            )
        return runtime

    def _runtime_for_build(
        self, trainjob: TrainJob, reader: Reader
    ) -> tuple[Mapping[str, Any], list[dict[str, Any]]]:
        """(the runtime object to build from, [the snapshot to apply first, if it must be created])."""
        try:
            configmap = get_snapshot(reader, trainjob)
        except ReadError as exc:
            raise SnapshotError(f"{self.kind.snapshot_error}: {exc}") from exc
        if configmap is not None:
            try:
                return read_snapshot(configmap, trainjob), []
            except SnapshotError as exc:
                # The TrainJob's own snapshot holds no runtime of it: permanent, as nothing rewrites it.
                # Another owner's (a predecessor of the same name, until garbage collection) may go away.
                error = InvalidSnapshotError if is_owned_by(configmap, trainjob) else SnapshotError
                raise error(f"{self.kind.snapshot_error}: {exc}") from exc
        try:
            runtime = self.get_runtime(trainjob, reader)
        except ReadError as exc:
            raise RuntimeNotFoundError(f"{self.kind.not_found}: {exc}") from exc
        if runtime is None:
            raise RuntimeNotFoundError(f"{self.kind.not_found}: {self._not_found_text(trainjob)}")
        snapshot = self._typed.snapshot_text(runtime)
        problem = snapshot.problem()
        if problem is not None:  # the apply (or every read) would fail, at every retry: nothing is applied
            raise UnbuildableRuntimeError(self._runtime_text(trainjob), problem)
        return runtime, [build_snapshot(trainjob, runtime, self.kind.kind, text=snapshot.text)]

    def runtime_info(self, trainjob: TrainJob, runtime_spec: TrainingRuntimeSpec) -> Info:
        """`build_info`, then every Info phase of the framework (Go `RuntimeInfo`)."""
        info = build_info(trainjob, runtime_spec)
        self.framework.enforce(info, trainjob)
        return info

    def new_objects(self, trainjob: TrainJob, reader: Reader) -> list[dict[str, Any]]:
        """The objects to apply for the TrainJob, in apply order (Go `NewObjects`).

        A value that cannot be built (`runtime.buildable`) raises a permanent error naming its field:
        `InvalidTrainJobError` for the TrainJob's, `UnbuildableRuntimeError` for the runtime's (naming the
        live runtime, or the snapshot ConfigMap the TrainJob is built from). On the first build (no snapshot
        yet) the values are checked before anything else; afterwards, when a builder first reads Info
        (`runtime.info.DeferredInfo`), so not at all while every builder leaves its objects alone."""
        try:
            runtime, objects = self._runtime_for_build(trainjob, reader)
        except FrameworkError:
            # No runtime to build from: an invalid TrainJob is still failed for its own fields first.
            errors = trainjob_field_errors(trainjob)
            if errors:
                raise InvalidTrainJobError(errors) from None
            raise
        source = self._runtime_text(trainjob)
        if not objects:  # built from the snapshot: that ConfigMap is what holds the value
            source = f'configmaps "{snapshot_name(trainjob)}" (the snapshot of {source})'
        spec = cast(TrainingRuntimeSpec, runtime.get("spec") or {})

        def check() -> None:
            errors = trainjob_field_errors(trainjob)
            if errors:
                raise InvalidTrainJobError(errors)
            unbuildable_values = runtime_errors(spec)
            if unbuildable_values:
                raise UnbuildableRuntimeError(source, unbuildable_values[0])

        if objects:
            # The first build (no snapshot yet): everything is checked before the snapshot freezes the
            # runtime, whatever the builders read.
            check()

        def compute() -> Info:
            if not objects:
                check()
            try:
                return self.runtime_info(trainjob, spec)
            except (UnbuildableError, PluginError) as exc:
                _raise_build_error(exc, source)

        info = DeferredInfo(compute, runtime_spec=spec)
        try:
            built = self.framework.build(info, trainjob, reader)
        except (UnbuildableError, PluginError) as exc:
            if info.failure is None:
                _raise_build_error(exc, source)
            built = []
        # Info's own failure, raised where a builder read it (or met by a builder that carried on), is the
        # build's error: it names the field or the Enforce phase, where the builder's read does not.
        failure = info.failure
        if failure is not None:
            info.failure = None  # the caller keeps the error; nothing keeps the Info through it
            raise failure
        objects.extend(built)
        return objects

    def train_job_status(self, trainjob: TrainJob, reader: Reader, now: datetime) -> TrainJobStatus | None:
        """The status plugin's verdict (Go `TrainJobStatus`)."""
        return self.framework.status(trainjob, reader, now)

    def _runtime_for_validation(
        self, old: TrainJob | None, new: TrainJob, reader: Reader
    ) -> tuple[Mapping[str, Any] | None, FieldError | None, bool]:
        """(the runtime to validate against, or the error why there is none; whether it is the live one)."""
        ref = as_dict(TrainJobView(new).spec.get("runtimeRef"))
        try:
            runtime = self.get_runtime(new, reader)
        except ReadError as exc:
            return None, FieldError.internal(self.kind.validation_path, f"{exc}"), False
        except InvalidRuntimeError as exc:
            return None, FieldError.invalid(self.kind.validation_path, dict(ref), str(exc)), False
        if runtime is not None:
            return runtime, None, True
        if old is not None:
            # An update after the runtime was deleted: the TrainJob runs from its snapshot; judge it by that.
            try:
                configmap = get_snapshot(reader, new)
                if configmap is not None:
                    return read_snapshot(configmap, new), None, False
            except (ReadError, SnapshotError):
                pass  # fall through to upstream's "must be created" error below
        message = f"{self._not_found_text(new)}: {self.kind.validation_message}"
        return None, FieldError.invalid(self.kind.validation_path, dict(ref), message), False

    def validate(self, old: TrainJob | None, new: TrainJob, reader: Reader) -> Validation:
        """The webhook's verdict on a created (`old` None) or updated TrainJob (Go `ValidateObjects`)."""
        result = Validation.of(trainjob_field_errors(new))
        runtime, error, live = self._runtime_for_validation(old, new, reader)
        if runtime is None:
            return result + Validation.of([error] if error else [])
        runtime_view = ObjectView(runtime)
        if (
            self.kind.warn_deprecated
            and runtime_view.labels.get(constants.LABEL_SUPPORT) == constants.SUPPORT_DEPRECATED
        ):
            result += Validation.of(
                warnings=[
                    f'Referenced {self.kind.kind} "{runtime_view.name}" is deprecated and will be removed '
                    "in a future release of Kubeflow Trainer. See runtime deprecation policy: "
                    f"{constants.RUNTIME_DEPRECATION_POLICY_URL}"
                ]
            )
        if _runtime_patch_shape_errors(TrainJobView(new).spec.get("runtimePatches")):
            return result  # in `result` already; the merge and the plugins read each patch as an object
        spec = cast(TrainingRuntimeSpec, runtime.get("spec") or {})
        unbuildable = [self._runtime_field_error(new, error) for error in runtime_errors(spec)]
        too_large = self._typed.snapshot_text(runtime).problem() if live else None
        if too_large is not None:  # the first build would write this very text
            unbuildable.append(self._runtime_field_error(new, too_large))
        if unbuildable:
            return result + Validation.of(unbuildable)
        try:
            info = build_info(new, spec)
        except RuntimePatchError as exc:
            if exc.path is None:  # spec.trainer.resourcesPerNode did not merge
                resources = as_dict(TrainJobView(new).trainer).get("resourcesPerNode")
                patch_error = FieldError.invalid("spec.trainer.resourcesPerNode", resources, exc.detail)
            else:  # the patch at exc.path did not merge
                patch_error = FieldError.invalid(exc.path, exc.manager, exc.detail)
            return result + Validation.of([patch_error])
        except UnbuildableError as exc:
            return result + Validation.of([self._unbuildable_field_error(new, exc)])
        result += self.framework.validate(info, old, new, reader)
        if result.ok:
            result += self._enforce_errors(info, new)
        return result

    def _runtime_field_error(self, trainjob: TrainJob, error: FieldError | str) -> FieldError:
        """A runtime field's error as the TrainJob's: at `spec.runtimeRef`, naming the runtime's field (or
        saying what is wrong with the whole runtime)."""
        ref = dict(as_dict(TrainJobView(trainjob).spec.get("runtimeRef")))
        return FieldError.invalid(self.kind.validation_path, ref, f"the runtime cannot run: {error}")

    def _unbuildable_field_error(self, trainjob: TrainJob, exc: UnbuildableError) -> FieldError:
        return exc.error if exc.in_trainjob else self._runtime_field_error(trainjob, exc.error)

    def _enforce_errors(self, info: Info, trainjob: TrainJob) -> Validation:
        """The Info phases run as a build runs them, so whatever they refuse is refused at admission: an
        `UnbuildableError` names its field; any other failure is an `Internal error` naming the plugin."""
        try:
            self.framework.enforce(info, trainjob)
        except PluginError as exc:
            unbuildable = _unbuildable(exc)
            if unbuildable is not None:
                return Validation.of([self._unbuildable_field_error(trainjob, unbuildable)])
            return Validation.of([FieldError.internal("spec", str(exc))])
        return Validation()

    def __repr__(self) -> str:
        return f"<Runtime {self.kind.key}>"


def _raise_build_error(exc: UnbuildableError | PluginError, source: str) -> NoReturn:
    """Raise what a build raises for `exc`: `InvalidTrainJobError` or `UnbuildableRuntimeError` (naming
    `source`, the runtime or its snapshot) for a value that cannot be built, else `exc` itself."""
    unbuildable = _unbuildable(exc)
    if unbuildable is None:
        raise exc
    if unbuildable.in_trainjob:
        raise InvalidTrainJobError((unbuildable.error,)) from exc
    raise UnbuildableRuntimeError(source, unbuildable.error) from exc


def _unbuildable(exc: BaseException) -> UnbuildableError | None:
    """The `UnbuildableError` that `exc` is, or that a plugin raised (a `PluginError`'s cause)."""
    if isinstance(exc, UnbuildableError):
        return exc
    if isinstance(exc, PluginError) and isinstance(exc.cause, UnbuildableError):
        return exc.cause
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusUpdate:
    """The TrainJob status after one reconcile, and what else the controller must do about it."""

    status: TrainJobStatus
    """The new status; patch `/status` when it differs from the TrainJob's."""
    requeue_after: float | None = None
    """Reconcile again after this many seconds (the active deadline), or None."""
    delete_jobset: bool = False
    """The TrainJob failed by its active deadline (just now, or in an earlier reconcile): its JobSet
    `<namespace>/<name>` must be gone. Delete it if it still exists (NotFound is fine), and retry until it
    is gone: upstream deletes once, when the deadline passes, and never again (trainer#3833, #3994)."""
    error: FrameworkError | None = None
    """The status plugin failed; the status is still worth writing, then requeue with backoff."""
    terminal: bool = False
    """Nothing more will happen for this TrainJob (unsupported runtime): do not requeue."""


class RuntimeRegistry(Mapping[str, Runtime]):
    """The runtimes by registry key `<Kind>.<group>`; both Trainer kinds share one framework."""

    __slots__ = ("_runtimes", "framework")

    def __init__(
        self,
        framework: Framework,
        kinds: tuple[RuntimeKind, ...] = (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME),
    ) -> None:
        self.framework = framework
        self._runtimes = {kind.key: Runtime(kind, framework) for kind in kinds}
        preload_runtime_schema()

    def __getitem__(self, key: str) -> Runtime:
        return self._runtimes[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._runtimes)

    def __len__(self) -> int:
        return len(self._runtimes)

    @staticmethod
    def key_of(trainjob: TrainJob) -> str:
        """The TrainJob's registry key, with the CRD defaults for an unset kind and group."""
        view = TrainJobView(trainjob)
        return registry_key(view.runtime_ref_kind, view.runtime_ref_api_group)

    def runtime_for(self, trainjob: TrainJob) -> Runtime:
        """The runtime for the TrainJob's `spec.runtimeRef`; raises `UnsupportedRuntimeError`."""
        key = self.key_of(trainjob)
        runtime = self._runtimes.get(key)
        if runtime is None:
            raise UnsupportedRuntimeError(key)
        return runtime

    def watches(self) -> list[Watch]:
        """The plugins' extra watches, once (both kinds share one framework; upstream registers them once)."""
        return self.framework.watches()

    def new_objects(self, trainjob: TrainJob, reader: Reader) -> list[dict[str, Any]]:
        """The objects to apply, in order (see the module docstring). Call only for unfinished TrainJobs."""
        return self.runtime_for(trainjob).new_objects(trainjob, reader)

    def validate(self, old: TrainJob | None, new: TrainJob, reader: Reader) -> Validation:
        """The TrainJob webhook's verdict; an unsupported runtime kind is a field error. Never raises for a
        TrainJob of the CRD's shape (see the module docstring for one that is not)."""
        try:
            runtime = self.runtime_for(new)
        except UnsupportedRuntimeError as exc:
            ref = as_dict(TrainJobView(new).spec.get("runtimeRef"))
            return Validation.of([FieldError.invalid("spec.runtimeRef", dict(ref), str(exc))])
        return runtime.validate(old, new, reader)

    def next_status(self, trainjob: TrainJob, reader: Reader, now: datetime) -> StatusUpdate:
        """The status after a reconcile, as upstream's TrainJob reconcile computes it after applying objects.

        Unsupported runtime kind → `Failed=True` (TrainingRuntimeNotSupported), terminal. Otherwise: the
        Suspended condition; the status plugin's status (a `Failed` with reason DeadlineExceeded is kept over
        whatever the plugin reports); then the active deadline. `delete_jobset` is set whenever the result is
        `Failed=True` with reason DeadlineExceeded, so a deletion that failed is asked for again.
        """
        status = cast(TrainJobStatus, copy_json(trainjob.get("status") or {}))
        conditions = status.setdefault("conditions", [])
        try:
            runtime = self.runtime_for(trainjob)
        except UnsupportedRuntimeError as exc:
            failed = condition(
                constants.CONDITION_FAILED,
                constants.CONDITION_TRUE,
                constants.REASON_RUNTIME_NOT_SUPPORTED,
                str(exc),
            )
            set_condition(conditions, failed, now)
            _set_suspended(trainjob, conditions, now)
            return StatusUpdate(status=_tidy(status), terminal=True)

        _set_suspended(trainjob, conditions, now)
        # A DeadlineExceeded failure outlives whatever the JobSet reports later (as upstream keeps it).
        failed_now = find_condition(conditions, constants.CONDITION_FAILED)
        deadline_condition: dict[str, Any] | None = None
        if failed_now is not None and failed_now.get("reason") == constants.REASON_DEADLINE_EXCEEDED:
            deadline_condition = dict(failed_now)
        error: FrameworkError | None = None
        try:
            reported = runtime.train_job_status(cast(TrainJob, {**trainjob, "status": status}), reader, now)
        except FrameworkError as exc:
            error, reported = exc, None
        if reported is not None:
            status = reported
            conditions = status.setdefault("conditions", [])
        if deadline_condition is not None:
            set_condition(conditions, deadline_condition, now)

        check: DeadlineCheck = check_deadline(trainjob, status, now)
        if check.exceeded:
            failed = condition(
                constants.CONDITION_FAILED,
                constants.CONDITION_TRUE,
                constants.REASON_DEADLINE_EXCEEDED,
                constants.MESSAGE_DEADLINE_EXCEEDED,
            )
            set_condition(conditions, failed, now)
        failed_after = find_condition(conditions, constants.CONDITION_FAILED)
        deadline_failed = (
            failed_after is not None
            and failed_after.get("status") == constants.CONDITION_TRUE
            and failed_after.get("reason") == constants.REASON_DEADLINE_EXCEEDED
        )
        return StatusUpdate(
            status=_tidy(status),
            requeue_after=check.requeue_after,
            delete_jobset=deadline_failed,
            error=error,
        )


def _set_suspended(trainjob: TrainJob, conditions: list[Any], now: datetime) -> None:
    wanted = suspended_condition(trainjob, conditions)
    if wanted is not None:
        set_condition(conditions, wanted, now)


def _tidy(status: TrainJobStatus) -> TrainJobStatus:
    """Drop an empty `conditions` list we added, so an untouched status compares equal to the original."""
    if not status.get("conditions"):
        status.pop("conditions", None)
    return status
