"""`Info`: the one working model of a TrainJob on its runtime, built by one function and mutated by plugins.

Go origin: kubeflow/trainer `pkg/runtime/runtime.go` (`Info`, `PodSet`, `Container`, `Scheduler`, the lookups,
`ExtractResourcePerNodeFromRuntime`), `newRuntimeInfo` and `mergeRuntimePatches` of
`pkg/runtime/core/trainingruntime.go`, and the upsert helpers of `pkg/apply`.

What changed from upstream, on purpose:
- One model instead of two copies kept in sync. `Info.template` is the working JobSet spec (the runtime's
  template after `runtimePatches` and `resourcesPerNode`). A `PodSet` is a *view* of one of its replicated
  jobs: its containers, volumes and count read and write that template directly (`count` is the job's
  `parallelism` and `completions`). Plugins change the template only through PodSets and `Container`s, and
  the JobSet plugin renders the JobSet from `Info` at build time. Upstream's `ObjApply` + `PodSets` pair, and
  the copying between them in `SyncParallelCount` and `Build`, do not exist here.
- One function (`build_info`) instead of an options layer (`InfoOption`s mirroring the fields).
- What the TrainJob asks of the trainer container (`spec.trainer.image/command/args`) lives in
  `Info.trainer`: plugins may rewrite it (torchtune appends to the command, Flux replaces it) without
  mutating the TrainJob, which is read-only here (upstream mutates the cached object in memory).
- `PodSet.single_pod_requests` is computed from the pod spec when read, so it can never be stale.
- `Info.runtime_template` keeps the runtime's template as written (read-only), so validation can check that
  a runtime patch names jobs and containers the *runtime* has. Upstream validates patches against the
  already-patched template, where a patch's own additions always "exist".

- The merged `resourcesPerNode` keeps the runtime container's resource `claims` (merged by name); upstream
  writes back only `limits` and `requests`, dropping them.

Guarantees:
- `build_info` never mutates its inputs; everything in `Info` except the read-only `runtime_template` and
  `runtime_spec` is Info's own copy, so plugins may mutate it freely.
- `DeferredInfo` is an `Info` whose fields (all but `runtime_spec`) are computed on their first read, for
  the builds of a reconcile: builders that build nothing never pay for it.
- `build_info` raises only `RuntimePatchError` (a patch that cannot be merged) and `InvalidCountError` (a
  count that is not an integer, or more pods than Kubernetes runs: `MAX_PODS_PER_JOB`,
  `MAX_PODS_PER_TRAINJOB`), so nothing it builds, and nothing a plugin derives from its counts, can grow
  with an absurd number. Odd input is tolerated the way Go tolerates nil pointers (a missing pod spec
  reads as empty). Quantities are parsed only when read (`single_pod_requests`, the plugins), so a bad
  one surfaces there as `InvalidQuantityError`.
- Lookups are by name and ancestor in template order; ancestors are the label
  `trainer.kubeflow.org/trainjob-ancestor-step`.

Deliberately missing: `replicas > 1` for ancestor jobs (upstream trainer#2318; the JobSet plugin forces 1),
and Go's zero values for absent fields in converted env vars (an env without `value` stays without it).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, cast

from runtime.api import constants
from runtime.api.gojson import go_json_resource_requirements, go_json_runtime_patch_spec
from runtime.api.v1alpha1 import (
    MLPolicy,
    PodGroupPolicy,
    TrainingRuntimeSpec,
    TrainJob,
)
from runtime.api.views import MLPolicyView, TrainJobView, as_dict, as_list, copy_json
from runtime.buildable import UnbuildableError
from runtime.echo import elide
from runtime.framework.errors import FrameworkError
from runtime.framework.validation import FieldError
from runtime.resources import ResourceList, pod_requests
from runtime.strategicmerge import (
    JOBSET_SPEC,
    RESOURCE_REQUIREMENTS,
    StrategicMergeError,
    json_key,
    strategic_merge,
)

__all__ = [
    "MAX_PODS_PER_JOB",
    "MAX_PODS_PER_TRAINJOB",
    "Container",
    "DeferredInfo",
    "Info",
    "InvalidCountError",
    "PodSet",
    "RuntimePatchError",
    "Scheduler",
    "TrainerOverrides",
    "build_info",
    "count_error",
    "upsert_env",
    "upsert_ports",
    "upsert_volume_mounts",
    "upsert_volumes",
]

MAX_PODS_PER_JOB = 100_000
"""The largest pod count of one Job, and so the largest `spec.trainer.numNodes`, runtime `mlPolicy.numNodes`
and replicated-job `parallelism` accepted.

Kubernetes' own limit: the JobSet controller creates every Job with `completionMode: Indexed`, and the API
server rejects an Indexed Job whose `parallelism` exceeds 100000 (`maxParallelismForIndexedJob` in
k8s.io/kubernetes `pkg/apis/batch/validation/validation.go`, v1.36). A larger count could never run; refusing
it up front bounds what the pipeline builds per TrainJob (pod DNS names, hostfile lines, `minMember`).
"""

MAX_PODS_PER_TRAINJOB = 150_000
"""The most pods one TrainJob may run in all: `replicas` times count, summed over its replicated jobs (and so
also the largest `replicas` of one replicated job).

Kubernetes' largest supported cluster runs at most 150,000 pods in all ("Considerations for large
clusters", kubernetes.io/docs/setup/best-practices/cluster-large), and a TrainJob's pods run together (gang
scheduling counts every one), so a TrainJob above this could not run anywhere.
"""


class InvalidCountError(UnbuildableError):
    """A count in the runtime or the TrainJob (`numNodes`, `parallelism`, `replicas`) is not an integer or
    exceeds what Kubernetes can run. `error` names the field: a TrainJob field when `in_trainjob`, else a
    field of the runtime (its `spec`, after the TrainJob's runtime patches)."""


def count_error(path: str, value: Any, limit: int, *, minimum: int | None = None) -> FieldError | None:
    """The field error of a count that is not an integer in [minimum, limit], or None when it is one.

    The limit is said in Go's words (`must be less than or equal to <n>`), so a client sees which bound it
    crossed."""
    if isinstance(value, bool) or not isinstance(value, int):
        return FieldError.invalid(path, value, "must be an integer")
    if minimum is not None and value < minimum:
        return FieldError.invalid(path, value, f"must be greater than or equal to {minimum}")
    if value > limit:
        return FieldError.invalid(path, value, f"must be less than or equal to {limit}")
    return None


def _checked_count(path: str, value: Any, limit: int, *, in_trainjob: bool = False) -> None:
    error = count_error(path, value, limit)
    if error is not None:
        raise InvalidCountError(error, in_trainjob=in_trainjob)


class RuntimePatchError(FrameworkError):
    """A `spec.runtimePatches` entry (or `resourcesPerNode`) cannot be merged into the runtime template.

    The message starts with the field (`spec.runtimePatches[0]: ...`) when `path` is given; `detail` is the
    message without it."""

    def __init__(self, message: str, *, manager: str | None = None, path: str | None = None) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.manager = manager
        self.detail = message
        self.path = path


# ---------------------------------------------------------------------------------------------------------
# Upserts (Go `pkg/apply`): how the model's lists take an item


def _upsert(
    items: list[dict[str, Any]],
    new: Mapping[str, Any],
    same: Callable[[Mapping[str, Any], Mapping[str, Any]], bool],
) -> None:
    """Replace the first item `same` as `new` in place, or append; Info keeps its own copy of `new`."""
    owned = copy_json(new)
    for index, item in enumerate(items):
        if same(item, new):
            items[index] = owned
            return
    items.append(owned)


def _upsert_by(items: list[dict[str, Any]], news: Iterable[Mapping[str, Any]], field: str) -> None:
    """Replace the first item whose `field` equals the new one's in place, or append; one after another.

    The same as `_upsert` with `a.get(field) == b.get(field)`, with the items indexed once: O(len(items) +
    len(news)), where a search per new item made a runtime container of 40,000 env vars and a TrainJob of
    128 cost 5 million comparisons. A replacement keeps the field's value, so the index stays true."""
    positions: dict[Hashable, int] = {}
    for index, item in enumerate(items):
        positions.setdefault(json_key(item.get(field)), index)
    for new in news:
        identity = json_key(new.get(field))
        owned = copy_json(new)
        found = positions.get(identity)
        if found is None:
            positions[identity] = len(items)
            items.append(owned)
        else:
            items[found] = owned


def upsert_env(items: list[dict[str, Any]], *envs: Mapping[str, Any]) -> None:
    """Replace the env var of the same name in place, or append it."""
    _upsert_by(items, envs, "name")


def upsert_ports(items: list[dict[str, Any]], *ports: Mapping[str, Any]) -> None:
    """Replace the port with the same `containerPort` or the same `name`, or append it.

    As upstream (`apply.UpsertPort`, test case "insert new port"), two ports without a name count as the
    same port: upserting an unnamed 29500 replaces an unnamed 8080. A search per port (a replacement may
    change both keys of an item): the ports come from plugins, one or two, never from the tenant.
    """
    for port in ports:
        _upsert(
            items,
            port,
            lambda a, b: a.get("containerPort") == b.get("containerPort") or a.get("name") == b.get("name"),
        )


def upsert_volumes(items: list[dict[str, Any]], *volumes: Mapping[str, Any]) -> None:
    """Replace the volume of the same name in place, or append it."""
    _upsert_by(items, volumes, "name")


def upsert_volume_mounts(items: list[dict[str, Any]], *mounts: Mapping[str, Any]) -> None:
    """Replace the volume mount with the same `mountPath` in place, or append it."""
    _upsert_by(items, mounts, "mountPath")


def _upsert_field(
    obj: dict[str, Any],
    key: str,
    upsert: Callable[..., None],
    new: Sequence[Mapping[str, Any]],
) -> None:
    """Upsert `new` into the list `obj[key]`, which is created only when there is something to put in it.

    So upserting nothing never writes an empty list (`env: []`) where the template had none.
    """
    if not new:
        return
    items = obj.get(key)
    if not isinstance(items, list):
        items = obj[key] = []
    upsert(items, *new)


# ---------------------------------------------------------------------------------------------------------
# The model


class Container:
    """A read-write view of one container (or init container) dict inside `Info.template`."""

    __slots__ = ("obj",)

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        """The container dict itself (part of the template)."""

    @property
    def name(self) -> str:
        return str(self.obj.get("name", ""))

    @property
    def image(self) -> str | None:
        return self.obj.get("image")

    @image.setter
    def image(self, value: str) -> None:
        self.obj["image"] = value

    @property
    def command(self) -> list[str] | None:
        return self.obj.get("command")

    @command.setter
    def command(self, value: list[str]) -> None:
        self.obj["command"] = list(value)

    @property
    def env(self) -> Sequence[Mapping[str, Any]]:
        return as_list(self.obj.get("env"))

    @property
    def ports(self) -> Sequence[Mapping[str, Any]]:
        return as_list(self.obj.get("ports"))

    @property
    def volume_mounts(self) -> Sequence[Mapping[str, Any]]:
        return as_list(self.obj.get("volumeMounts"))

    @property
    def resources(self) -> Mapping[str, Any] | None:
        value = self.obj.get("resources")
        return value if isinstance(value, dict) else None

    def upsert_env(self, *envs: Mapping[str, Any]) -> None:
        _upsert_field(self.obj, "env", upsert_env, envs)

    def upsert_ports(self, *ports: Mapping[str, Any]) -> None:
        _upsert_field(self.obj, "ports", upsert_ports, ports)

    def upsert_volume_mounts(self, *mounts: Mapping[str, Any]) -> None:
        _upsert_field(self.obj, "volumeMounts", upsert_volume_mounts, mounts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Container) and self.obj is other.obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __repr__(self) -> str:
        return f"<Container {self.name!r}>"


@dataclass(slots=True, kw_only=True, eq=False)
class PodSet:
    """A view of one replicated job of `Info.template`: the pods one job of it runs.

    `name` is the replicated job's name; `ancestor` the value of its ancestor-step label (None without the
    label).
    """

    name: str
    ancestor: str | None
    job: dict[str, Any] = field(repr=False)
    """The `replicatedJobs[i]` dict of `Info.template` this PodSet views."""
    endpoints: Iterable[str] = ()
    """The pods' DNS names, set by the PodNetwork phase (JobSet) from the final counts (Go `iter.Seq`).

    Lazy and re-iterable: names are made while iterating, never stored, so a consumer that needs only a
    few never pays for the rest. Iterating all of them costs `pods` steps (bounded by
    `MAX_PODS_PER_TRAINJOB`); do not turn them into a list without need."""

    def _job_spec(self) -> dict[str, Any]:
        template = self.job.setdefault("template", {})
        return cast(dict[str, Any], template.setdefault("spec", {}))

    @property
    def pod_spec(self) -> dict[str, Any]:
        """The pod spec dict (created empty if the template has none)."""
        pod_template = self._job_spec().setdefault("template", {})
        return cast(dict[str, Any], pod_template.setdefault("spec", {}))

    @property
    def replicas(self) -> int:
        """The replicated job's `replicas` (default 1)."""
        value = self.job.get("replicas")
        return constants.DEFAULT_JOB_REPLICAS if value is None else int(value)

    @property
    def count(self) -> int:
        """Pods per job: the job template's `parallelism` (and `completions`)."""
        value = self._job_spec().get("parallelism")
        return 1 if value is None else int(value)

    @count.setter
    def count(self, value: int) -> None:
        spec = self._job_spec()
        spec["parallelism"] = value
        spec["completions"] = value

    @property
    def pods(self) -> int:
        """Every pod of the replicated job: `replicas` times `count`."""
        return self.replicas * self.count

    @property
    def containers(self) -> list[Container]:
        return [Container(c) for c in as_list(self.pod_spec.get("containers")) if isinstance(c, dict)]

    @property
    def init_containers(self) -> list[Container]:
        return [Container(c) for c in as_list(self.pod_spec.get("initContainers")) if isinstance(c, dict)]

    def find_container(self, name: str) -> Container | None:
        """The container of that name, else the init container of that name, else None."""
        for container in (*self.containers, *self.init_containers):
            if container.name == name:
                return container
        return None

    def add_init_container(self, name: str) -> Container:
        """Append an init container `{name}` to the pod spec and return its view."""
        init_containers = self.pod_spec.get("initContainers")
        if not isinstance(init_containers, list):
            init_containers = self.pod_spec["initContainers"] = []
        obj: dict[str, Any] = {"name": name}
        init_containers.append(obj)
        return Container(obj)

    @property
    def volumes(self) -> Sequence[Mapping[str, Any]]:
        return as_list(self.pod_spec.get("volumes"))

    def upsert_volumes(self, *volumes: Mapping[str, Any]) -> None:
        _upsert_field(self.pod_spec, "volumes", upsert_volumes, volumes)

    @property
    def single_pod_requests(self) -> ResourceList:
        """What one pod requests (Kubernetes `PodRequests`); total for the PodSet = this times `count`."""
        return pod_requests(self.pod_spec)

    @property
    def total_requests(self) -> ResourceList:
        """What all `count` pods of one job request together (`single_pod_requests` times `count`)."""
        return {name: quantity * self.count for name, quantity in self.single_pod_requests.items()}


@dataclass(slots=True, kw_only=True)
class Scheduler:
    """Labels and annotations every pod template gets (set by the pod-group plugins)."""

    pod_labels: dict[str, str] = field(default_factory=dict)
    pod_annotations: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class TrainerOverrides:
    """What the TrainJob asks of the trainer `node` container (`spec.trainer.image/command/args`).

    None leaves the runtime's value. Plugins may rewrite these (torchtune appends to `command`; Flux
    replaces `command` and clears `args`); the JobSet plugin writes them last.
    """

    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class Info:
    """The working model of one TrainJob on its runtime (Go `runtime.Info`)."""

    labels: dict[str, str]
    """Become the JobSet's `metadata.labels` (runtime template labels, then runtime patches')."""
    annotations: dict[str, str]
    """Become the JobSet's `metadata.annotations`."""
    ml_policy: MLPolicy | None
    """The runtime's `spec.mlPolicy` (Info's own copy; plugins may adjust it)."""
    pod_group_policy: PodGroupPolicy | None
    """The runtime's `spec.podGroupPolicy` (Info's own copy)."""
    template: dict[str, Any]
    """The working JobSet spec (`jobset.x-k8s.io/v1alpha2` `JobSetSpec`); PodSets view its replicatedJobs."""
    pod_sets: list[PodSet]
    """One per replicated job, in template order."""
    scheduler: Scheduler = field(default_factory=Scheduler)
    trainer: TrainerOverrides = field(default_factory=TrainerOverrides)
    runtime_template: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """The runtime's JobSet spec as written, before runtime patches (read-only; shared with the runtime
    object). Only for validation that must tell the runtime's jobs and containers from a patch's."""
    runtime_spec: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """The runtime's whole spec as written (read-only; shared with the runtime object). In a build it is the
    one field a `ComponentBuilder` can read without having the rest computed (`DeferredInfo`): a builder that
    acts only for some policy (`mlPolicy.mpi`, `podGroupPolicy.coscheduling`) asks it first."""

    @property
    def ml(self) -> MLPolicyView:
        """`ml_policy` read with the CRD defaults applied."""
        return MLPolicyView(self.ml_policy)

    @property
    def runtime_ml(self) -> MLPolicyView:
        """The runtime's `mlPolicy` as written (`runtime_spec`), read with the CRD defaults applied: which
        policy the runtime has, known without computing a `DeferredInfo`."""
        return MLPolicyView(cast("MLPolicy | None", self.runtime_spec.get("mlPolicy")))

    def find_pod_set(self, name: str) -> PodSet | None:
        """The PodSet of that replicated job name."""
        return next((ps for ps in self.pod_sets if ps.name == name), None)

    def find_pod_set_by_ancestor(self, ancestor: str) -> PodSet | None:
        """The first PodSet whose ancestor-step label is `ancestor`."""
        return next((ps for ps in self.pod_sets if ps.ancestor == ancestor), None)

    def find_container_by_ancestor(self, ancestor: str, name: str) -> Container | None:
        """A regular container of the first PodSet with that ancestor (init containers are not searched)."""
        pod_set = self.find_pod_set_by_ancestor(ancestor)
        if pod_set is None:
            return None
        return next((c for c in pod_set.containers if c.name == name), None)

    def find_container(self, pod_set_name: str, name: str) -> Container | None:
        """A container, else an init container, of the PodSet of that name."""
        pod_set = self.find_pod_set(pod_set_name)
        return pod_set.find_container(name) if pod_set is not None else None

    def trainer_resources(self) -> dict[str, Any] | None:
        """The runtime's resources of the trainer `node` container (Go `ExtractResourcePerNodeFromRuntime`).

        From the first replicated job named `node` or labelled ancestor `trainer` whose `node` container has
        `resources`; `{"limits": ..., "requests": ...}` (each possibly empty), or None.
        """
        for pod_set in self.pod_sets:
            if pod_set.name != constants.NODE and pod_set.ancestor != constants.ANCESTOR_TRAINER:
                continue
            for container in pod_set.containers:
                if container.name == constants.NODE and container.resources is not None:
                    resources = container.resources
                    return {
                        "limits": dict(as_dict(resources.get("limits"))),
                        "requests": dict(as_dict(resources.get("requests"))),
                    }
        return None


class DeferredInfo(Info):
    """The `Info` of one build, computed the first time a builder reads any field but `runtime_spec`.

    A reconcile builds to find what to apply, and for a running TrainJob the answer is usually nothing: the
    JobSet plugin returns nothing once the JobSet runs, the pod-group plugins once the PodGroup exists,
    and the MPI and Flux plugins act only for their policies. Their decisions read the cluster (through the
    `Reader`) and `runtime_spec`, never the computed fields, so after a restart, where every TrainJob is
    reconciled once, or after a status change, the work of `build_info` and of every Enforce phase is
    skipped, the larger part of such a reconcile. A builder that reads any other field (a third-party one
    included) gets exactly the Info an eager build gives: `compute` runs then, once, before the read returns.

    `compute` is what the eager path calls (`build_info`, then the Enforce phases). Its failure is kept:
    every later read raises the same exception, and `failure` holds it, so the caller reports the build's
    real error (the field that cannot be built, or the plugin that failed in its Enforce phase) rather than
    the builder's read that met it. Builders must not write to Info; one that does before reading gets its
    value overwritten by the computation.

    The mechanism: every field of `Info` is a slot, and a slot that was never set raises `AttributeError`,
    which Python answers by calling `__getattr__`. Once computed, every field is set, and reads cost what
    they cost on an `Info`.
    """

    __slots__ = ("_compute", "failure")

    def __init__(self, compute: Callable[[], Info], *, runtime_spec: Mapping[str, Any]) -> None:
        # Info.__init__ is deliberately not called: its fields stay unset until the first read.
        self._compute: Callable[[], Info] | None = compute
        self.failure: BaseException | None = None
        self.runtime_spec = runtime_spec

    @property
    def computed(self) -> bool:
        """Whether the fields have been computed (for tests and diagnostics)."""
        return self._compute is None and self.failure is None

    def __getattr__(self, name: str) -> Any:
        # Called only for an unset slot, or a name Info does not have (which computes nothing).
        if name not in _INFO_FIELDS:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self._resolve()
        return object.__getattribute__(self, name)

    def _resolve(self) -> None:
        if self.failure is not None:
            raise self.failure
        compute = self._compute
        if compute is None:
            return
        try:
            info = compute()
        except AttributeError as exc:
            # Raised out of `__getattr__` as it is, it would read as "no such field", and a property that
            # met it would be looked up again as a missing attribute: keep it, as what it is.
            self.failure = RuntimeError(f"computing the TrainJob's Info: {exc!r}")
            raise self.failure from exc
        except Exception as exc:
            self.failure = exc
            raise
        for item in _INFO_FIELDS:
            if item != "runtime_spec":
                setattr(self, item, getattr(info, item))
        self._compute = None

    def __repr__(self) -> str:
        state = "failed" if self.failure is not None else "computed" if self._compute is None else "deferred"
        return f"<DeferredInfo {state}>"


_INFO_FIELDS = tuple(item.name for item in fields(Info))


# ---------------------------------------------------------------------------------------------------------
# Building Info (Go `newRuntimeInfo`)


def _patched_template_spec(trainjob: TrainJobView, spec: dict[str, Any]) -> dict[str, Any]:
    """The template spec with every runtime patch applied, replicated jobs in the runtime's order.

    `spec` is the caller's private copy: the patches merge into it one after another (on failure it is
    left part-merged)."""
    order = {
        rjob.get("name"): index
        for index, rjob in enumerate(as_list(spec.get("replicatedJobs")))
        if isinstance(rjob, dict)
    }
    for index, patch in enumerate(trainjob.runtime_patches):
        patch_spec = as_dict(as_dict(as_dict(patch).get("trainingRuntimeSpec")).get("template")).get("spec")
        if patch_spec is None:
            continue
        manager = as_dict(patch).get("manager")
        try:
            spec = strategic_merge(
                spec, go_json_runtime_patch_spec(as_dict(patch_spec)), JOBSET_SPEC, in_place=True
            )
        except StrategicMergeError as exc:
            raise RuntimePatchError(
                f"applying runtime patch of manager {elide(repr(manager))}: {elide(str(exc))}",
                manager=manager,
                path=f"spec.runtimePatches[{index}]",
            ) from exc
    jobs = as_list(spec.get("replicatedJobs"))
    # Restore the runtime's order (SMP may reorder); names unknown to the runtime sort first, as upstream.
    jobs.sort(key=lambda rjob: order.get(as_dict(rjob).get("name"), 0))
    return spec


_MERGED_RESOURCES = ("limits", "requests")
"""What `spec.trainer.resourcesPerNode` merges with in a container's resources (Go `newRuntimeInfo`)."""


def _merge_trainer_resources(
    jobs: list[Any], ml_policy: MLPolicyView, has_ml_policy: bool, resources_per_node: Mapping[str, Any]
) -> None:
    """Merge `spec.trainer.resourcesPerNode` into the `node` container of the trainer job(s), in place.

    As upstream, only `limits` and `requests` take part and come out: the container's resource `claims`
    (and any in `resourcesPerNode`) are dropped from the rendered container, since upstream copies the two
    resource lists into the merge and back, and nothing else."""
    patch = go_json_resource_requirements(resources_per_node)
    for rjob in jobs:
        job = as_dict(rjob)
        labels = as_dict(as_dict(as_dict(job.get("template")).get("metadata")).get("labels"))
        is_trainer = (
            has_ml_policy and labels.get(constants.LABEL_TRAINJOB_ANCESTOR) == constants.ANCESTOR_TRAINER
        )
        is_launcher_as_node = ml_policy.mpi_run_launcher_as_node and job.get("name") == constants.NODE
        if not (is_trainer or is_launcher_as_node):
            continue
        pod_template = as_dict(as_dict(as_dict(job.get("template")).get("spec")).get("template"))
        if "spec" not in pod_template:
            continue
        for container in as_list(as_dict(pod_template["spec"]).get("containers")):
            if isinstance(container, dict) and container.get("name") == constants.NODE:
                resources = as_dict(container.get("resources"))
                base = {key: resources[key] for key in _MERGED_RESOURCES if resources.get(key)}
                try:
                    merged = strategic_merge(base, patch, RESOURCE_REQUIREMENTS)
                except StrategicMergeError as exc:
                    raise RuntimePatchError(
                        f"merging spec.trainer.resourcesPerNode: {elide(str(exc))}"
                    ) from exc
                container["resources"] = {key: merged[key] for key in _MERGED_RESOURCES if merged.get(key)}
                break


def build_info(trainjob: TrainJob, runtime_spec: TrainingRuntimeSpec) -> Info:
    """The Info of a TrainJob on a runtime, before any plugin ran (Go `newRuntimeInfo`).

    1. Labels and annotations: the runtime template's, then each runtime patch's, later keys winning.
    2. Each runtime patch's template spec, written as Go writes its typed `JobSetSpecPatch`
       (`runtime.api.gojson`: empty maps and lists go, an empty struct such as `emptyDir: {}` stays), is
       strategic-merged into the template spec, in list order; the replicated jobs' order is then restored.
    3. `spec.trainer.resourcesPerNode` is strategic-merged into the `limits` and `requests` (only: resource
       `claims` are dropped, as upstream) of the `node` container of each replicated job
       labelled ancestor `trainer` (only when the runtime has an mlPolicy, as upstream: without one it is
       silently ignored) and, for MPI with `runLauncherAsNode`, of the job named `node`.
    4. One PodSet per replicated job; its count starts at `parallelism` (default 1), or `mlPolicy.numNodes`
       (default 1) for the trainer ancestor when the runtime has an mlPolicy, and is at least 1.

    Counts are checked before they are used: `spec.trainer.numNodes`, `mlPolicy.numNodes` and each job's
    `parallelism` must be integers ≤ `MAX_PODS_PER_JOB`, each job's `replicas` an integer ≤
    `MAX_PODS_PER_TRAINJOB`; otherwise `InvalidCountError` names the field (a runtime field after the
    runtime patches, which may set it).
    """
    view = TrainJobView(trainjob)
    num_nodes = as_dict(view.trainer).get("numNodes")
    if num_nodes is not None:
        _checked_count("spec.trainer.numNodes", num_nodes, MAX_PODS_PER_JOB, in_trainjob=True)
    spec_view = as_dict(runtime_spec)
    template = as_dict(spec_view.get("template"))
    metadata = as_dict(template.get("metadata"))
    labels = {str(k): str(v) for k, v in as_dict(metadata.get("labels")).items()}
    annotations = {str(k): str(v) for k, v in as_dict(metadata.get("annotations")).items()}
    for patch in view.runtime_patches:
        patch_metadata = as_dict(
            as_dict(as_dict(as_dict(patch).get("trainingRuntimeSpec")).get("template")).get("metadata")
        )
        labels.update(as_dict(patch_metadata.get("labels")))
        annotations.update(as_dict(patch_metadata.get("annotations")))

    working = _patched_template_spec(view, copy_json(as_dict(template.get("spec"))))
    ml_policy = cast(
        "MLPolicy | None", copy_json(spec_view["mlPolicy"]) if spec_view.get("mlPolicy") is not None else None
    )
    pod_group_policy = cast(
        "PodGroupPolicy | None",
        copy_json(spec_view["podGroupPolicy"]) if spec_view.get("podGroupPolicy") is not None else None,
    )
    ml = MLPolicyView(ml_policy)
    if ml_policy is not None and ml_policy.get("numNodes") is not None:
        _checked_count("spec.mlPolicy.numNodes", ml_policy.get("numNodes"), MAX_PODS_PER_JOB)
    jobs = as_list(working.get("replicatedJobs"))
    resources_per_node = as_dict(view.trainer).get("resourcesPerNode")
    if isinstance(resources_per_node, dict):
        _merge_trainer_resources(jobs, ml, ml_policy is not None, resources_per_node)

    pod_sets: list[PodSet] = []
    for index, rjob in enumerate(jobs):
        if not isinstance(rjob, dict):
            continue
        path = f"spec.template.spec.replicatedJobs[{index}]"
        if rjob.get("replicas") is not None:
            _checked_count(f"{path}.replicas", rjob["replicas"], MAX_PODS_PER_TRAINJOB)
        parallelism = as_dict(as_dict(rjob.get("template")).get("spec")).get("parallelism")
        if parallelism is not None:
            _checked_count(f"{path}.template.spec.parallelism", parallelism, MAX_PODS_PER_JOB)
        job_labels = as_dict(as_dict(as_dict(rjob.get("template")).get("metadata")).get("labels"))
        ancestor = job_labels.get(constants.LABEL_TRAINJOB_ANCESTOR)
        pod_set = PodSet(name=str(rjob.get("name", "")), ancestor=ancestor, job=rjob)
        count = pod_set.count
        if ancestor == constants.ANCESTOR_TRAINER and ml_policy is not None:
            count = ml.num_nodes
        pod_set.count = max(count, 1)
        pod_sets.append(pod_set)

    trainer = as_dict(view.trainer)
    overrides = TrainerOverrides(
        image=trainer.get("image"),
        command=list(trainer["command"]) if trainer.get("command") is not None else None,
        args=list(trainer["args"]) if trainer.get("args") is not None else None,
    )
    return Info(
        labels=labels,
        annotations=annotations,
        ml_policy=ml_policy,
        pod_group_policy=pod_group_policy,
        template=working,
        pod_sets=pod_sets,
        trainer=overrides,
        runtime_template=as_dict(template.get("spec")),
        runtime_spec=spec_view,
    )
