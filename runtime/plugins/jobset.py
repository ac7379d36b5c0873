"""The JobSet plugin: validates TrainJobs against the runtime template, renders the JobSet, reports status.

Go origin: kubeflow/trainer `pkg/runtime/framework/plugins/jobset` (`jobset.go`: `Validate`,
`ReconcilerBuilders`, `IdentifyPodNetwork`, `SyncParallelCount`, `Build`, `Status`; `builder.go`:
`Initializer`, `Trainer`, `PodLabels`, `PodAnnotations`, `Suspend`).

What it does, by phase:
- CustomValidation: initializer jobs/containers/volume mounts the TrainJob needs; runtime patches may change
  only while the TrainJob is (or becomes) suspended and no replicated job is active; patch managers are
  domain-prefixed paths; patches name replicated jobs and containers that the runtime (as written, before
  patches: upstream checks the patched template, where the check always passes) has, and set no env on
  the `node`/initializer containers, each error at the item it is about
  (`spec.runtimePatches[i].trainingRuntimeSpec.template.spec.replicatedJobs[j].name`, with upstream's
  detail; upstream reports every one at `spec.runtimePatches`, with the whole list as the value); the
  pods the TrainJob would run (its `numNodes` on the trainer job, each job's `replicas` times count) are
  at most `MAX_PODS_PER_TRAINJOB` (`pod_count_error`: blamed on the runtime's
  `spec.template.spec.replicatedJobs`, under `spec.runtimeRef`, when the runtime alone runs too many, else
  on `spec.trainer.numNodes`).
- WatchExtension: JobSets, enqueueing their controlling TrainJob (registered even when the JobSet CRD is
  missing, as upstream).
- PodNetwork: each PodSet's endpoints `<trainjob>-<job>-<replica>-<pod>.<subdomain>` (subdomain =
  `spec.network.subdomain`, else the TrainJob name), lazy as upstream's `iter.Seq` (`PodEndpoints`), after
  refusing a TrainJob whose pods in all exceed `MAX_PODS_PER_TRAINJOB` with the same blame
  (`runtime.buildable.UnbuildableError`: the reconcile-time twin of the validation above, for TrainJobs
  that skipped the webhook or a runtime edited since), and a JobSet etcd would not store (more than
  `runtime.schema.ETCD_REQUEST_LIMIT` of JSON: rendered to tell only when its parts exceed it), blamed
  where the fix is (`jobset_size_error`), and annotations the API server would refuse on the JobSet, a
  Job or a pod (`annotations_error`, blamed the same way); upstream admits all three and fails every
  build. Upstream's
  `SyncParallelCount` has no counterpart: `PodSet.count` is the template's `parallelism`/`completions`.
- ComponentBuilder: the JobSet `jobset.x-k8s.io/v1alpha2`, rendered from Info (template, then initializer
  and trainer overrides, scheduler pod labels/annotations, `suspend`, owner reference). Not rendered when
  the JobSet exists and neither it nor the TrainJob is suspended: a running JobSet is never re-applied.
  Re-applied to an existing JobSet, it carries the `volumeClaimPolicies` that JobSet stores (immutable,
  with the default JobSet's webhook adds on create), where upstream re-applies the runtime's and JobSet
  refuses the resume.
  Upstream's copy of PodSets back into the template (and its "runtime template has N replicatedJobs but
  runtime info has M podSets" error) has no counterpart: PodSets are the template.
- TrainJobStatus: the JobSet's `Completed`/`Failed` conditions become the TrainJob's `Complete`/`Failed`;
  `replicatedJobsStatus` becomes `jobsStatus` with all five counters.

Deliberately missing: `replicas > 1` for ancestor jobs (forced to 1, upstream trainer#2318).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import orjson

from runtime.api import constants
from runtime.api.gojson import RUNTIME_PATCHES, go_round_trip_jobset_spec, go_semantic_form
from runtime.api.v1alpha1 import TrainJob
from runtime.api.v1alpha1 import TrainJobStatus as TrainJobStatusValue
from runtime.api.views import (
    TrainJobView,
    as_dict,
    as_list,
    copy_json,
    find_condition,
    replicated_job_pod_spec,
)
from runtime.buildable import MAX_ANNOTATIONS_BYTES, UnbuildableError, annotations_bytes
from runtime.core.status import set_condition
from runtime.framework import (
    ComponentBuilder,
    CustomValidation,
    ErrorType,
    FieldError,
    PhaseError,
    PluginContext,
    PodNetwork,
    Reader,
    ReadError,
    TrainJobStatus,
    Validation,
    Watch,
    WatchExtension,
)
from runtime.info import MAX_PODS_PER_TRAINJOB, Container, Info
from runtime.ownership import owner_reference
from runtime.plugins.trainernode import convert_env_var, env_var, trainer_env
from runtime.schema import ETCD_REQUEST_LIMIT

__all__ = ["JobSet", "PodEndpoints", "annotations_error", "pod_count_error", "render_jobset"]

NAME = "JobSet"
INITIALIZER_ENV_STORAGE_URI = "STORAGE_URI"
"""The env var that tells an initializer where to read from."""

_RUNTIME_REF = "spec.runtimeRef"
_REPLICATED_JOBS = "spec.template.spec.replicatedJobs"
_RUNTIME_PATCHES = "spec.runtimePatches"
_NO_ENV_CONTAINERS = (constants.DATASET_INITIALIZER, constants.MODEL_INITIALIZER, constants.NODE)
"""The containers whose env a runtime patch may not set (the plugins own it)."""
_DNS1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_HTTP_PATH = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"
_DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{_DNS1123_SUBDOMAIN}')"
)
_SUSPEND_TO_PATCH = (
    "RuntimePatches can only be modified when the TrainJob is suspended before or after the update"
)


def _ancestor(rjob: Mapping[str, Any]) -> str | None:
    labels = as_dict(as_dict(as_dict(rjob.get("template")).get("metadata")).get("labels"))
    value = labels.get(constants.LABEL_TRAINJOB_ANCESTOR)
    return None if value is None else str(value)


def _containers_by_job(spec: Mapping[str, Any]) -> dict[str, set[str]]:
    """Replicated job name → the names of its containers and init containers."""
    found: dict[str, set[str]] = {}
    for rjob in as_list(spec.get("replicatedJobs")):
        pod_spec = replicated_job_pod_spec(rjob)
        containers = (*as_list(pod_spec.get("initContainers")), *as_list(pod_spec.get("containers")))
        found[str(as_dict(rjob).get("name"))] = {str(as_dict(c).get("name")) for c in containers}
    return found


def domain_prefixed_path_errors(path: str, value: str) -> list[FieldError]:
    """Go `validation.IsDomainPrefixedPath`: `<DNS-1123 subdomain>/<HTTP path>` (e.g. `acme.io/foo`)."""
    if not value:
        return [FieldError.required(path, "")]
    host, slash, rest = value.partition("/")
    if not slash or not host or not rest:
        return [FieldError.invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    errors = []
    if len(host) > 253:
        errors.append(FieldError.invalid(path, host, "must be no more than 253 characters"))
    if not re.fullmatch(_DNS1123_SUBDOMAIN, host):
        errors.append(
            FieldError.invalid(
                path,
                host,
                _DNS1123_SUBDOMAIN_MESSAGE,
            )
        )
    if not re.fullmatch(_HTTP_PATH, rest):
        errors.append(
            FieldError.invalid(path, rest, f"Invalid path (regex used for validation is '{_HTTP_PATH}')")
        )
    return errors


@dataclass(frozen=True, slots=True)
class PodEndpoints:
    """The DNS names of a replicated job's pods, replica-major: `<trainjob>-<job>-<replica>-<pod>.<subdomain>`
    (the subdomain is `spec.network.subdomain`, else the TrainJob name).

    Lazy and re-iterable, as upstream's `iter.Seq`: each iteration makes the names one by one and stores
    none, so holding one costs the same for 1 pod as for 100,000.
    """

    trainjob_name: str
    job_name: str
    replicas: int
    count: int
    subdomain: str

    def __iter__(self) -> Iterator[str]:
        prefix = f"{self.trainjob_name}-{self.job_name}"
        for replica in range(self.replicas):
            for pod in range(self.count):
                yield f"{prefix}-{replica}-{pod}.{self.subdomain}"

    def __len__(self) -> int:
        return max(self.replicas, 0) * max(self.count, 0)


def _json_size(value: Any) -> int:
    try:
        return len(orjson.dumps(value))
    except TypeError:  # an integer beyond 64 bits, which only render is given: refused elsewhere
        return 0


def jobset_size_error(trainjob: TrainJob, size: int) -> UnbuildableError | None:
    """A JobSet of `size` bytes of JSON that etcd would not store (`ETCD_REQUEST_LIMIT`), or None. The blame
    goes where the fix is: the TrainJob's largest part (`spec.runtimePatches`, `spec.trainer` or
    `spec.initializer`) when without its parts the JobSet would fit, else the runtime's `spec.template`."""
    if size <= ETCD_REQUEST_LIMIT:
        return None
    spec = TrainJobView(trainjob).spec
    parts = {path: _json_size(spec.get(path.removeprefix("spec."))) for path in _TRAINJOB_PARTS}
    in_trainjob = sum(parts.values()) >= size - ETCD_REQUEST_LIMIT
    path = max(parts, key=parts.__getitem__) if in_trainjob else "spec.template"
    message = f"must make a JobSet of at most {ETCD_REQUEST_LIMIT} bytes (what etcd stores), not {size}"
    error = FieldError(path=path, type=ErrorType.TOO_LONG, message=message)
    return UnbuildableError(error, in_trainjob=in_trainjob)


_TRAINJOB_PARTS = ("spec.runtimePatches", "spec.trainer", "spec.initializer")


_PATCH_TEMPLATE = "trainingRuntimeSpec.template"
_POD_TEMPLATE = "template.spec.template"


def annotations_error(info: Info, trainjob: TrainJob) -> UnbuildableError | None:
    """The first object of the JobSet whose annotations are more than the API server stores
    (`MAX_ANNOTATIONS_BYTES`: the JobSet's, then each replicated job's Job template and pod template, the
    pod-group plugins' annotations included), or None. O(size of the annotations and of the patches).

    Each is the runtime's annotations there with the runtime patches' on top, so the blame goes where the
    fix is, as `jobset_size_error` does it: the patch giving the most there when without the patches they
    would fit, else the runtime's field."""
    patches = [
        as_dict(as_dict(patch).get("trainingRuntimeSpec")) for patch in TrainJobView(trainjob).runtime_patches
    ]
    by_name = _patch_jobs_by_name(patches)
    places: list[tuple[str, str, Any, list[tuple[str, Any]]]] = [
        (
            "spec.template.metadata.annotations",
            "the JobSet",
            info.annotations,
            [
                (
                    f"spec.runtimePatches[{k}].{_PATCH_TEMPLATE}.metadata.annotations",
                    _annotations(as_dict(p.get("template"))),
                )
                for k, p in enumerate(patches)
            ],
        )
    ]
    for index, rjob in enumerate(as_list(info.template.get("replicatedJobs"))):
        name = as_dict(rjob).get("name")
        job_template = as_dict(as_dict(rjob).get("template"))
        pod_template = as_dict(as_dict(job_template.get("spec")).get("template"))
        in_patches = by_name.get(name, []) if isinstance(name, str) else []
        places.append(
            (
                f"spec.template.spec.replicatedJobs[{index}].template.metadata.annotations",
                f"the Jobs of replicated job {name}",
                _annotations(job_template),
                [
                    (f"{path}.template.metadata.annotations", _annotations(as_dict(job.get("template"))))
                    for path, job in in_patches
                ],
            )
        )
        pod_annotations = {**as_dict(_annotations(pod_template)), **info.scheduler.pod_annotations}
        places.append(
            (
                f"spec.template.spec.replicatedJobs[{index}].{_POD_TEMPLATE}.metadata.annotations",
                f"the pods of replicated job {name}",
                pod_annotations,
                [
                    (f"{path}.{_POD_TEMPLATE}.metadata.annotations", _annotations(_pod_template(job)))
                    for path, job in in_patches
                ],
            )
        )
    for runtime_path, owner, merged, parts in places:
        size = annotations_bytes(merged)
        if size <= MAX_ANNOTATIONS_BYTES:
            continue
        sizes = [(annotations_bytes(part), path) for path, part in parts]
        in_trainjob = sum(part for part, _ in sizes) >= size - MAX_ANNOTATIONS_BYTES
        path = max(sizes, key=_first_size)[1] if in_trainjob else runtime_path  # the first largest
        message = (
            f"may not be more than {MAX_ANNOTATIONS_BYTES} bytes: {owner} would carry {size} bytes of "
            "annotations (keys and values, the runtime's and the runtime patches' together)"
        )
        error = FieldError(path=path, type=ErrorType.TOO_LONG, message=message)
        return UnbuildableError(error, in_trainjob=in_trainjob)
    return None


def _first_size(entry: tuple[int, str]) -> int:
    return entry[0]


def _annotations(template: Mapping[str, Any]) -> Any:
    return as_dict(template.get("metadata")).get("annotations")


def _pod_template(job: Mapping[str, Any]) -> dict[str, Any]:
    return as_dict(as_dict(as_dict(job.get("template")).get("spec")).get("template"))


def _patch_jobs_by_name(patches: list[dict[str, Any]]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """(path, replicated job) of the runtime patches' replicated jobs, by name, in the patches' order: one
    pass, so finding each job's is O(1), not a walk of every patch per job."""
    found: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for k, patch in enumerate(patches):
        jobs = as_list(as_dict(as_dict(patch.get("template")).get("spec")).get("replicatedJobs"))
        for j, job in enumerate(jobs):
            if isinstance(job, dict) and isinstance(job.get("name"), str):
                path = f"spec.runtimePatches[{k}].{_PATCH_TEMPLATE}.spec.replicatedJobs[{j}]"
                found.setdefault(job["name"], []).append((path, job))
    return found


def pod_count_error(info: Info, trainjob: TrainJob, *, exact: bool) -> UnbuildableError | None:
    """The TrainJob's pods in all, or None when they are at most `MAX_PODS_PER_TRAINJOB`.

    `exact`: count the PodSets as they are (after the Info phases); else count the trainer job at
    `spec.trainer.numNodes` pods, an upper bound of what a plugin gives it (MPI may take one off).
    The blame goes where the fix is: the runtime's `spec.template.spec.replicatedJobs` when the runtime
    alone runs too many (the trainer job at one pod per replica when the TrainJob sets `numNodes`, at the
    runtime's count when it does not), else `spec.trainer.numNodes`.
    """
    num_nodes = as_dict(TrainJobView(trainjob).trainer).get("numNodes")
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int):
        num_nodes = None  # no numNodes, or a bad one (reported by the runtime's own check)
    trainer = info.find_pod_set_by_ancestor(constants.ANCESTOR_TRAINER)
    pods = runtime_pods = 0
    for pod_set in info.pod_sets:
        if pod_set is trainer and num_nodes is not None:
            pods += pod_set.pods if exact else pod_set.replicas * num_nodes
            runtime_pods += pod_set.replicas
        else:
            pods += pod_set.pods
            runtime_pods += pod_set.pods
    if pods <= MAX_PODS_PER_TRAINJOB:
        return None
    if num_nodes is None or runtime_pods > MAX_PODS_PER_TRAINJOB:
        message = (
            f"must be less than or equal to {MAX_PODS_PER_TRAINJOB} pods in all: the runtime runs "
            f"{runtime_pods} pods (replicas times pods per job, summed over the replicated jobs)"
        )
        error = FieldError.invalid(_REPLICATED_JOBS, runtime_pods, message)
        return UnbuildableError(error, in_trainjob=False)
    message = (
        f"must be less than or equal to {MAX_PODS_PER_TRAINJOB} pods in all: the TrainJob would run "
        f"{pods} pods (replicas times pods per job, summed over the replicated jobs)"
    )
    return UnbuildableError(FieldError.invalid("spec.trainer.numNodes", num_nodes, message), in_trainjob=True)


def _initializer_overrides(rjob: dict[str, Any], step: str, source: Mapping[str, Any] | None) -> None:
    """Go `Builder.Initializer` for one replicated job labelled with an initializer step."""
    rjob["replicas"] = 1
    if source is None:
        return
    for obj in as_list(replicated_job_pod_spec(rjob).get("containers")):
        if not isinstance(obj, dict) or obj.get("name") != step:
            continue
        container = Container(obj)
        if source.get("storageUri") is not None:
            container.upsert_env(env_var(INITIALIZER_ENV_STORAGE_URI, str(source["storageUri"])))
        container.upsert_env(*(convert_env_var(e) for e in as_list(source.get("env")) if isinstance(e, dict)))
        secret_ref = source.get("secretRef")
        if isinstance(secret_ref, dict):
            obj.setdefault("envFrom", []).append({"secretRef": {"name": secret_ref.get("name", "")}})


def _as_go_writes_it(spec: dict[str, Any], runtime_template: Mapping[str, Any]) -> dict[str, Any]:
    """The rendered spec in the shape upstream's JobSet apply configuration has on the wire.

    Upstream decodes the runtime template into Go types before any plugin runs, so every container of
    the template comes back with `resources: {}`, every job and pod template with `metadata: {}`, and
    every quantity as Go writes it (`go_round_trip_jobset_spec`). Init containers a plugin appends (Flux's
    installer) are built as apply configurations instead and have no `resources` there, so they get none
    here: those are the init containers the runtime does not name (a runtime patch cannot add one).
    """
    runtime_names = _containers_by_job(runtime_template)
    appended: set[tuple[int, int]] = set()
    for job_index, rjob in enumerate(as_list(spec.get("replicatedJobs"))):
        names = runtime_names.get(str(as_dict(rjob).get("name")), set())
        for index, obj in enumerate(as_list(replicated_job_pod_spec(rjob).get("initContainers"))):
            if isinstance(obj, dict) and "resources" not in obj and obj.get("name") not in names:
                appended.add((job_index, index))
    written = go_round_trip_jobset_spec(spec)
    for job_index, rjob in enumerate(as_list(written.get("replicatedJobs"))):
        for index, obj in enumerate(as_list(replicated_job_pod_spec(rjob).get("initContainers"))):
            if (job_index, index) in appended and isinstance(obj, dict) and obj.get("resources") == {}:
                del obj["resources"]
    return written


def _keep_volume_claim_policies(jobset: dict[str, Any], existing: Mapping[str, Any]) -> None:
    """Apply an existing JobSet's `spec.volumeClaimPolicies` as it stores them.

    The field is immutable (`self == oldSelf`), and JobSet's mutating webhook adds each policy's default
    `retentionPolicy` on create only. The runtime's policies as written lack that default, so a JobSet
    re-applied from them (on suspend or resume, as Kueue does to every TrainJob it admits) is refused with
    `spec.volumeClaimPolicies: Invalid value: Value is immutable`. Upstream v2.3.0 re-applies them as written.
    """
    stored = as_dict(existing.get("spec")).get("volumeClaimPolicies")
    if stored is not None and "volumeClaimPolicies" in jobset["spec"]:
        jobset["spec"]["volumeClaimPolicies"] = copy_json(stored)


def render_jobset(info: Info, trainjob: TrainJob) -> dict[str, Any]:
    """The JobSet apply body for the TrainJob, rendered from `info` (which it does not modify)."""
    view = TrainJobView(trainjob)
    spec = cast(dict[str, Any], copy_json(info.template))
    initializer = as_dict(view.initializer)
    run_launcher_as_node = info.ml.mpi_run_launcher_as_node
    env = trainer_env(trainjob)
    for rjob in as_list(spec.get("replicatedJobs")):
        if not isinstance(rjob, dict):
            continue
        ancestor = _ancestor(rjob)
        if ancestor in (constants.DATASET_INITIALIZER, constants.MODEL_INITIALIZER):
            key = "dataset" if ancestor == constants.DATASET_INITIALIZER else "model"
            source = initializer.get(key)
            _initializer_overrides(rjob, ancestor, source if isinstance(source, dict) else None)
        if ancestor == constants.ANCESTOR_TRAINER:
            rjob["replicas"] = 1
        containers = [
            c for c in as_list(replicated_job_pod_spec(rjob).get("containers")) if isinstance(c, dict)
        ]
        for obj in containers:
            if obj.get("name") != constants.NODE:
                continue
            if ancestor == constants.ANCESTOR_TRAINER and view.trainer is not None:
                if info.trainer.image is not None:
                    obj["image"] = info.trainer.image
                if info.trainer.command is not None:
                    obj["command"] = list(info.trainer.command)
                if info.trainer.args is not None:
                    obj["args"] = list(info.trainer.args)
            if view.trainer is not None and (
                ancestor == constants.ANCESTOR_TRAINER
                or (run_launcher_as_node and rjob.get("name") == constants.NODE)
            ):
                Container(obj).upsert_env(*env)
        pod_template = as_dict(as_dict(rjob.get("template")).get("spec")).get("template")
        if isinstance(pod_template, dict):
            if info.scheduler.pod_labels:
                pod_template.setdefault("metadata", {}).setdefault("labels", {}).update(
                    info.scheduler.pod_labels
                )
            if info.scheduler.pod_annotations:
                pod_metadata = pod_template.setdefault("metadata", {})
                pod_metadata.setdefault("annotations", {}).update(info.scheduler.pod_annotations)
    if "suspend" in view.spec and view.spec.get("suspend") is not None:
        spec["suspend"] = view.spec["suspend"]
    else:
        spec.pop("suspend", None)
    spec = _as_go_writes_it(spec, info.runtime_template)
    metadata: dict[str, Any] = {"name": view.name, "namespace": view.namespace}
    if info.labels:
        metadata["labels"] = dict(info.labels)
    if info.annotations:
        metadata["annotations"] = dict(info.annotations)
    metadata["ownerReferences"] = [owner_reference(trainjob)]
    return {
        "apiVersion": constants.JOBSET_API_VERSION,
        "kind": constants.JOBSET_KIND,
        "metadata": metadata,
        "spec": spec,
    }


class JobSet(CustomValidation, WatchExtension, PodNetwork, ComponentBuilder, TrainJobStatus):
    """Owns the JobSet: the template shape, its rendering and the status read back from it."""

    name = NAME

    def __init__(self, context: PluginContext | None = None) -> None:
        del context  # no settings

    # CustomValidation -------------------------------------------------------------------------------------

    def validate(self, info: Info, old: TrainJob | None, new: TrainJob, reader: Reader) -> Validation:
        view = TrainJobView(new)
        runtime_ref = dict(as_dict(view.spec.get("runtimeRef")))
        containers_by_job = _containers_by_job(info.template)
        runtime_containers_by_job = _containers_by_job(info.runtime_template)
        errors: list[FieldError] = []
        initializer = as_dict(view.initializer)
        for key, step, config in (
            ("dataset", constants.DATASET_INITIALIZER, "datasetConfig"),
            ("model", constants.MODEL_INITIALIZER, "modelConfig"),
        ):
            if initializer.get(key) is None:
                continue
            names = containers_by_job.get(step)
            if names is None:
                message = f"must have {step} job when trainJob is configured with input {config}"
            elif step not in names:
                message = f"must have container with name - {step} in the {step} job"
            elif not self._has_initializer_mount(info, step):
                message = (
                    f"must have volumeMount with name - {constants.INITIALIZER_VOLUME} in container {step} "
                    f"of the {step} job"
                )
            else:
                continue
            errors.append(FieldError.invalid(_RUNTIME_REF, runtime_ref, message))
        errors.extend(self._patch_immutability_errors(old, new, reader))
        for index, patch in enumerate(view.runtime_patches):
            errors.extend(
                self._runtime_patch_errors(f"{_RUNTIME_PATCHES}[{index}]", patch, runtime_containers_by_job)
            )
        too_many = pod_count_error(info, new, exact=False)
        if too_many is not None:
            if too_many.in_trainjob:
                errors.append(too_many.error)
            else:
                message = f"the runtime cannot run: {too_many.error}"
                errors.append(FieldError.invalid(_RUNTIME_REF, runtime_ref, message))
        return Validation.of(errors)

    @staticmethod
    def _runtime_patch_errors(
        path: str, patch: Any, runtime_containers_by_job: Mapping[str, set[str]]
    ) -> list[FieldError]:
        """One runtime patch's checks: its manager, and the jobs and containers it names, each error at the
        field it is about (upstream reports them all at `spec.runtimePatches`, echoing the whole list)."""
        patch = as_dict(patch)
        errors = domain_prefixed_path_errors(f"{path}.manager", str(patch.get("manager", "")))
        jobs_path = f"{path}.trainingRuntimeSpec.template.spec.replicatedJobs"
        spec = as_dict(as_dict(as_dict(patch.get("trainingRuntimeSpec")).get("template")).get("spec"))
        for job_index, job_patch in enumerate(as_list(spec.get("replicatedJobs"))):
            job_path = f"{jobs_path}[{job_index}]"
            job_name = as_dict(job_patch).get("name")
            names = runtime_containers_by_job.get(str(job_name))
            if names is None:
                errors.append(
                    FieldError.invalid(
                        f"{job_path}.name",
                        job_name,
                        "must not have replicated job that doesn't exist in the runtime job template",
                    )
                )
                continue
            pod_path = f"{job_path}.template.spec.template.spec"
            pod_spec = replicated_job_pod_spec(job_patch)
            for index, container in enumerate(as_list(pod_spec.get("initContainers"))):
                container_name = as_dict(container).get("name")
                if container_name not in names:
                    errors.append(
                        FieldError.invalid(
                            f"{pod_path}.initContainers[{index}].name",
                            container_name,
                            f"must not have initContainer that doesn't exist in the runtime job {job_name}",
                        )
                    )
            for index, container in enumerate(as_list(pod_spec.get("containers"))):
                container_name = as_dict(container).get("name")
                env = as_dict(container).get("env")
                if container_name not in names:
                    errors.append(
                        FieldError.invalid(
                            f"{pod_path}.containers[{index}].name",
                            container_name,
                            f"must not have container that doesn't exist in the runtime job {job_name}",
                        )
                    )
                elif env and container_name in _NO_ENV_CONTAINERS:
                    errors.append(
                        FieldError.invalid(
                            f"{pod_path}.containers[{index}].env",
                            env,
                            f"must not have envs for the {constants.DATASET_INITIALIZER}, "
                            f"{constants.MODEL_INITIALIZER}, {constants.NODE} containers",
                        )
                    )
        return errors

    @staticmethod
    def _has_initializer_mount(info: Info, step: str) -> bool:
        pod_set = info.find_pod_set(step)
        if pod_set is None:
            return False
        return any(
            m.get("name") == constants.INITIALIZER_VOLUME
            for c in pod_set.containers
            if c.name == step
            for m in c.volume_mounts
        )

    @staticmethod
    def _patch_immutability_errors(old: TrainJob | None, new: TrainJob, reader: Reader) -> list[FieldError]:
        if old is None:
            return []  # immutability only makes sense on updates
        old_view, new_view = TrainJobView(old), TrainJobView(new)
        # Go's Semantic.DeepEqual: an empty map or list equals an absent one, an empty struct does not.
        old_patches = go_semantic_form(list(old_view.runtime_patches), RUNTIME_PATCHES)
        if old_patches == go_semantic_form(list(new_view.runtime_patches), RUNTIME_PATCHES):
            return []
        if old_view.spec.get("suspend") is not True and new_view.spec.get("suspend") is not True:
            return [
                FieldError.forbidden(
                    _RUNTIME_PATCHES,
                    _SUSPEND_TO_PATCH,
                )
            ]
        try:
            jobset = reader.get(
                constants.JOBSET_API_VERSION, constants.JOBSET_KIND, new_view.name, new_view.namespace
            )
        except ReadError as exc:
            return [FieldError.internal(_RUNTIME_PATCHES, str(exc))]
        if jobset is None:
            return []
        # The JobSet may still be winding down after a suspend; its running pods must not see the change.
        return [
            FieldError.forbidden(
                _RUNTIME_PATCHES,
                "RuntimePatches cannot be modified when the JobSet's ReplicatedJob "
                f"{status.get('name')} is still active",
            )
            for status in as_list(as_dict(jobset.get("status")).get("replicatedJobsStatus"))
            if isinstance(status, dict) and (status.get("active") or 0) > 0
        ]

    # WatchExtension ---------------------------------------------------------------------------------------

    def watches(self) -> Sequence[Watch]:
        return [Watch.owned(constants.JOBSET_API_VERSION, constants.JOBSET_KIND)]

    # PodNetwork -------------------------------------------------------------------------------------------

    def identify_pod_network(self, info: Info, trainjob: TrainJob) -> None:
        view = TrainJobView(trainjob)
        too_many = pod_count_error(info, trainjob, exact=True)
        if too_many is not None:
            raise too_many
        subdomain = str(as_dict(info.template.get("network")).get("subdomain") or view.name)
        for pod_set in info.pod_sets:
            pod_set.endpoints = PodEndpoints(
                view.name, pod_set.name, pod_set.replicas, pod_set.count, subdomain
            )
        # The JobSet is made of the template (after the patches and the phases) and the TrainJob's trainer
        # and initializer: only when these exceed what etcd stores is the JobSet rendered to tell exactly.
        parts = (info.template, view.trainer, view.initializer)
        if sum(_json_size(part) for part in parts) > ETCD_REQUEST_LIMIT:
            too_large = jobset_size_error(trainjob, _json_size(render_jobset(info, trainjob)))
            if too_large is not None:
                raise too_large
        too_many_annotations = annotations_error(info, trainjob)
        if too_many_annotations is not None:
            raise too_many_annotations

    # ComponentBuilder -------------------------------------------------------------------------------------

    def build(self, info: Info, trainjob: TrainJob, reader: Reader) -> list[dict[str, Any]]:
        view = TrainJobView(trainjob)
        existing = reader.get(constants.JOBSET_API_VERSION, constants.JOBSET_KIND, view.name, view.namespace)
        if (
            existing is not None
            and not view.suspend
            and as_dict(existing.get("spec")).get("suspend") is not True
        ):
            return []  # never re-apply a running JobSet: its pods keep the template they started with
        jobset = render_jobset(info, trainjob)  # its size was checked in the PodNetwork phase
        if existing is not None:
            _keep_volume_claim_policies(jobset, existing)
        return [jobset]

    # TrainJobStatus ---------------------------------------------------------------------------------------

    def status(self, trainjob: TrainJob, reader: Reader, now: datetime) -> TrainJobStatusValue | None:
        view = TrainJobView(trainjob)
        jobset = reader.get(constants.JOBSET_API_VERSION, constants.JOBSET_KIND, view.name, view.namespace)
        if jobset is None:
            if view.is_finished:
                return None  # the JobSet may have been deleted by its TTL; keep the status as it is
            raise PhaseError(f'jobsets.{constants.JOBSET_GROUP} "{view.name}" not found')
        status = cast(TrainJobStatusValue, copy_json(trainjob.get("status") or {}))
        jobset_status = as_dict(jobset.get("status"))
        jobset_conditions = as_list(jobset_status.get("conditions"))
        for jobset_type, trainjob_type in (
            ("Completed", constants.CONDITION_COMPLETE),
            ("Failed", constants.CONDITION_FAILED),
        ):
            found = find_condition(jobset_conditions, jobset_type)
            if found is not None and found.get("status") == constants.CONDITION_TRUE:
                set_condition(status.setdefault("conditions", []), {**found, "type": trainjob_type}, now)
        jobs_status = [
            {
                "name": item.get("name", ""),
                "ready": item.get("ready", 0),
                "succeeded": item.get("succeeded", 0),
                "failed": item.get("failed", 0),
                "active": item.get("active", 0),
                "suspended": item.get("suspended", 0),
            }
            for item in as_list(jobset_status.get("replicatedJobsStatus"))
            if isinstance(item, dict)
        ]
        if jobs_status:
            status["jobsStatus"] = cast(Any, jobs_status)
        else:
            status.pop("jobsStatus", None)
        return status
