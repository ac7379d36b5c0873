"""Thin read-only views over Trainer wire objects that apply the CRD defaults when reading.

Go origin: none directly; these replace the nil-guards and `ptr.Deref(x, default)` calls that upstream code
spreads around `pkg/runtime` and `pkg/controller` for fields the CRD defaults (`runtimeRef.kind`, `suspend`,
`managedBy`, MPI and Flux settings, `scheduleTimeoutSeconds`).

Guarantees:
- A view wraps the dict it is given without copying it and never mutates it; reading a property costs a few
  dict lookups. Objects handed out by a cache are shared, so views are the safe way to read them.
- Every default a view applies is the default in the CRD schema (or, for `mlPolicy.numNodes`, the documented
  default 1), so an object read from a file or built in a test reads the same as one the API server defaulted.
  Explicit values, including JSON null for an optional field, are read as absent only when Go would see nil.
- The tolerant readers every module uses for nested wire values, `as_dict`, `as_list` and
  `replicated_job_pod_spec`, read a missing or mistyped level as empty, never raise, and never copy.

Deliberately missing: setters (build new dicts instead), validation (the API server and the webhook do that).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from runtime.api import constants
from runtime.api.core import Condition, ObjectMetaFull
from runtime.api.v1alpha1 import (
    Initializer,
    JobSetTemplateSpec,
    JobStatus,
    MLPolicy,
    PodGroupPolicy,
    RuntimePatch,
    Trainer,
    TrainingRuntimeSpec,
    TrainJobSpec,
)

__all__ = [
    "MLPolicyView",
    "ObjectView",
    "RuntimeView",
    "TrainJobView",
    "as_dict",
    "as_list",
    "copy_json",
    "find_condition",
    "replicated_job_pod_spec",
]


def find_condition(conditions: Sequence[Condition], type_: str) -> Condition | None:
    """The condition of that type in a `conditions` list, or None (Go: `meta.FindStatusCondition`)."""
    for condition in conditions:
        if condition.get("type") == type_:
            return condition
    return None


def as_dict(value: object) -> dict[str, Any]:
    """`value` if it is a JSON object, else {}: a missing or mistyped field reads as empty, as Go reads nil.

    The result is the dict inside the object, not a copy (read-only when the object is); {} is detached.
    """
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def as_list(value: object) -> list[Any]:
    """`value` if it is a JSON array, else [] (the list inside the object, not a copy)."""
    return value if isinstance(value, list) else []


def replicated_job_pod_spec(replicated_job: object) -> dict[str, Any]:
    """A JobSet replicated job's pod spec (`template.spec.template.spec`), or {} where a level is missing."""
    job_template = as_dict(as_dict(replicated_job).get("template"))
    return as_dict(as_dict(as_dict(job_template.get("spec")).get("template")).get("spec"))


@dataclass(frozen=True, slots=True)
class ObjectView:
    """Metadata accessors shared by every view."""

    obj: Mapping[str, Any]

    @property
    def metadata(self) -> ObjectMetaFull:
        return cast(ObjectMetaFull, as_dict(self.obj.get("metadata")))

    @property
    def name(self) -> str:
        return self.metadata.get("name", "")

    @property
    def namespace(self) -> str:
        return self.metadata.get("namespace", "")

    @property
    def uid(self) -> str:
        return self.metadata.get("uid", "")

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    @property
    def api_version(self) -> str:
        return str(self.obj.get("apiVersion", ""))

    @property
    def labels(self) -> Mapping[str, str]:
        return self.metadata.get("labels") or {}

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.metadata.get("annotations") or {}


@dataclass(frozen=True, slots=True)
class TrainJobView(ObjectView):
    """A TrainJob, with the CRD defaults applied on read."""

    @property
    def spec(self) -> TrainJobSpec:
        return cast(TrainJobSpec, as_dict(self.obj.get("spec")))

    @property
    def runtime_ref_name(self) -> str:
        return str(as_dict(self.spec.get("runtimeRef")).get("name", ""))

    @property
    def runtime_ref_kind(self) -> str:
        """`spec.runtimeRef.kind`, default `ClusterTrainingRuntime`."""
        kind = as_dict(self.spec.get("runtimeRef")).get("kind")
        return constants.CLUSTER_TRAINING_RUNTIME_KIND if kind is None else str(kind)

    @property
    def runtime_ref_api_group(self) -> str:
        """`spec.runtimeRef.apiGroup`, default `trainer.kubeflow.org`."""
        group = as_dict(self.spec.get("runtimeRef")).get("apiGroup")
        return constants.GROUP if group is None else str(group)

    @property
    def suspend(self) -> bool:
        """`spec.suspend`, default false."""
        return bool(self.spec.get("suspend") or False)

    @property
    def managed_by(self) -> str:
        """`spec.managedBy`, default `trainer.kubeflow.org/trainjob-controller`."""
        value = self.spec.get("managedBy")
        return constants.MANAGED_BY_TRAINJOB_CONTROLLER if value is None else value

    @property
    def is_managed_by_trainer(self) -> bool:
        return self.managed_by == constants.MANAGED_BY_TRAINJOB_CONTROLLER

    @property
    def active_deadline_seconds(self) -> int | None:
        """`spec.activeDeadlineSeconds`, or None when unset or 0 (no deadline)."""
        return self.spec.get("activeDeadlineSeconds") or None

    @property
    def trainer(self) -> Trainer | None:
        return self.spec.get("trainer")

    @property
    def initializer(self) -> Initializer | None:
        return self.spec.get("initializer")

    @property
    def runtime_patches(self) -> Sequence[RuntimePatch]:
        return self.spec.get("runtimePatches") or ()

    @property
    def conditions(self) -> Sequence[Condition]:
        return as_dict(self.obj.get("status")).get("conditions") or ()

    @property
    def jobs_status(self) -> Sequence[JobStatus]:
        return as_dict(self.obj.get("status")).get("jobsStatus") or ()

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.conditions, type_)

    def is_condition_true(self, type_: str) -> bool:
        condition = self.condition(type_)
        return condition is not None and condition.get("status") == constants.CONDITION_TRUE

    @property
    def is_complete(self) -> bool:
        return self.is_condition_true(constants.CONDITION_COMPLETE)

    @property
    def is_failed(self) -> bool:
        return self.is_condition_true(constants.CONDITION_FAILED)

    @property
    def is_finished(self) -> bool:
        """Complete=True or Failed=True: the TrainJob is terminal."""
        return self.is_complete or self.is_failed


@dataclass(frozen=True, slots=True)
class MLPolicyView:
    """`spec.mlPolicy` of a runtime (possibly absent), with the CRD defaults applied on read."""

    policy: MLPolicy | None

    def _source(self, key: str) -> dict[str, Any] | None:
        if self.policy is None:
            return None
        value = self.policy.get(key)
        return cast(dict[str, Any], value) if isinstance(value, dict) else None

    @property
    def num_nodes(self) -> int:
        """`mlPolicy.numNodes`; absent means 1."""
        value = self.policy.get("numNodes") if self.policy is not None else None
        return constants.DEFAULT_NUM_NODES if value is None else value

    @property
    def source(self) -> str | None:
        """The configured source (`torch`, `mpi`, `flux`, `jax`, `xgboost`), or None (the PlainML case)."""
        for key in ("torch", "mpi", "flux", "jax", "xgboost"):
            if self._source(key) is not None:
                return key
        return None

    @property
    def torch(self) -> dict[str, Any] | None:
        return self._source("torch")

    @property
    def mpi(self) -> dict[str, Any] | None:
        return self._source("mpi")

    @property
    def flux(self) -> dict[str, Any] | None:
        return self._source("flux")

    @property
    def jax(self) -> dict[str, Any] | None:
        return self._source("jax")

    @property
    def xgboost(self) -> dict[str, Any] | None:
        return self._source("xgboost")

    @property
    def mpi_num_proc_per_node(self) -> int:
        value = (self.mpi or {}).get("numProcPerNode")
        return constants.DEFAULT_NUM_PROC_PER_NODE if value is None else int(value)

    @property
    def mpi_implementation(self) -> str:
        value = (self.mpi or {}).get("mpiImplementation")
        return constants.MPI_IMPLEMENTATION_OPENMPI if value is None else str(value)

    @property
    def mpi_ssh_auth_mount_path(self) -> str:
        value = (self.mpi or {}).get("sshAuthMountPath")
        return constants.DEFAULT_MPI_SSH_AUTH_MOUNT_PATH if value is None else str(value)

    @property
    def mpi_run_launcher_as_node(self) -> bool:
        return bool((self.mpi or {}).get("runLauncherAsNode") or False)

    @property
    def flux_num_proc_per_node(self) -> int:
        value = (self.flux or {}).get("numProcPerNode")
        return constants.DEFAULT_NUM_PROC_PER_NODE if value is None else int(value)


@dataclass(frozen=True, slots=True)
class RuntimeView(ObjectView):
    """A TrainingRuntime or ClusterTrainingRuntime, with the CRD defaults applied on read."""

    @property
    def spec(self) -> TrainingRuntimeSpec:
        return cast(TrainingRuntimeSpec, as_dict(self.obj.get("spec")))

    @property
    def is_cluster_scoped(self) -> bool:
        return self.kind == constants.CLUSTER_TRAINING_RUNTIME_KIND

    @property
    def framework(self) -> str | None:
        """The `trainer.kubeflow.org/framework` label (the Python SDK requires it)."""
        return self.labels.get(constants.LABEL_FRAMEWORK)

    @property
    def ml_policy(self) -> MLPolicyView:
        return MLPolicyView(self.spec.get("mlPolicy"))

    @property
    def pod_group_policy(self) -> PodGroupPolicy | None:
        return self.spec.get("podGroupPolicy")

    @property
    def coscheduling_schedule_timeout_seconds(self) -> int | None:
        """`podGroupPolicy.coscheduling.scheduleTimeoutSeconds` (default 60), or None without coscheduling."""
        source = as_dict(self.pod_group_policy).get("coscheduling")
        if not isinstance(source, dict):
            return None
        value = source.get("scheduleTimeoutSeconds")
        return constants.DEFAULT_SCHEDULE_TIMEOUT_SECONDS if value is None else int(value)

    @property
    def template(self) -> JobSetTemplateSpec:
        return cast(JobSetTemplateSpec, as_dict(self.spec.get("template")))


def copy_json(value: Any) -> Any:
    """A deep copy of decoded YAML or JSON: the one deep copy of `runtime/`.

    Dicts and lists are copied, every other value is shared (strings, numbers, booleans and None are
    immutable). It takes any keys and any integers (the schema check reports those), NaN and infinities
    (kept as they are), and any depth (it walks with a stack, not by recursion). Keys keep their order. On
    objects of a few KiB it is as fast as an orjson round trip, which would turn NaN into null and refuse the
    rest; a build copies its runtime's templates several times, so each step here is a plain loop with one
    type test per value.
    """
    if isinstance(value, dict):
        root: Any = {}
    elif isinstance(value, list):
        root = []
    else:
        return value
    stack: list[tuple[Any, Any]] = [(value, root)]
    push, pop = stack.append, stack.pop
    copied: Any
    while stack:
        source, target = pop()
        if isinstance(target, dict):
            for key, item in source.items():
                if isinstance(item, dict):
                    target[key] = copied = {}
                    push((item, copied))
                elif isinstance(item, list):
                    target[key] = copied = []
                    push((item, copied))
                else:
                    target[key] = item
        else:
            append = target.append
            for item in source:
                if isinstance(item, dict):
                    append(copied := {})
                    push((item, copied))
                elif isinstance(item, list):
                    append(copied := [])
                    push((item, copied))
                else:
                    append(item)
    return root
