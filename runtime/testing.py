"""Builders for testing runtime plugins: TrainJobs, runtimes, replicated jobs and containers as wire dicts.

Go origin: kubeflow/trainer `pkg/util/testing/wrapper.go` (`MakeTrainJobWrapper`,
`MakeTrainingRuntimeWrapper`, `MakeJobSetWrapper`, ...), the builders upstream's plugin test tables are
written with. Like client-go's and controller-runtime's fakes, they ship with the library: they are part
of the plugin-author kit (docs/plugins.md, "Testing a plugin"), the built-in plugins' tests use them, and a
third-party plugin's tests can too.

`Make` carries the identity of the TrainJob under test, so one suite can follow upstream's plugin tables
(`Make(name="trainJob", uid="trainJob", runtime_kind=None)`) and another the core-runtime tables (`Make()`:
`default/test-job`, UID `uid`, on the TrainingRuntime `test-runtime`); every builder takes overrides.

Guarantees: every call returns fresh dicts that share nothing with its arguments, so a test may mutate what
it gets; an argument left out leaves its field out (no empty lists or nulls appear that the caller did not
ask for), except `replicas`, which a replicated job states unless told `replicas=None`. Nothing here reads a
clock, a file or the network; `now` is a fixed time for status tests.

Deliberately missing: validation (build invalid objects freely) and API-server defaulting (use
`runtime.api.views` to read defaults).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, cast

from runtime.api import constants
from runtime.api.v1alpha1 import TrainingRuntimeSpec, TrainJob
from runtime.framework import MemoryReader
from runtime.info import Info, build_info
from runtime.plugins.jobset import JobSet
from runtime.plugins.trainernode import JOB_COMPLETION_INDEX_FIELD_PATH

__all__ = ["NOW", "SUITE", "Make"]

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
"""A fixed "now" for status tests (no test reads the clock)."""


class _Default(enum.Enum):
    SUITE = enum.auto()


SUITE: Final = _Default.SUITE
"""An argument value meaning "the suite's default" where None already means "leave the field out"."""


def _dicts(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [dict(item) for item in items]


@dataclass(frozen=True, slots=True, kw_only=True)
class Make:
    """Wire-dict builders for one test suite; the fields are the defaults of the TrainJob under test."""

    name: str = "test-job"
    namespace: str = "default"
    uid: str = "uid"
    runtime_name: str = "test-runtime"
    """The `spec.runtimeRef.name` of TrainJobs, and the name of runtimes."""
    runtime_kind: str | None = constants.TRAINING_RUNTIME_KIND
    """The `spec.runtimeRef.kind` (with `apiGroup`) of TrainJobs; None leaves both out."""
    created: str | None = "2026-01-02T03:00:00Z"
    """The TrainJobs' `metadata.creationTimestamp`; None leaves it out."""
    now: datetime = NOW

    # Containers and replicated jobs ----------------------------------------------------------------------

    @staticmethod
    def container(
        name: str = constants.NODE,
        *,
        image: str | None = None,
        command: list[str] | None = None,
        args: list[str] | None = None,
        env: Iterable[Mapping[str, Any]] = (),
        requests: Mapping[str, Any] | None = None,
        limits: Mapping[str, Any] | None = None,
        volume_mounts: Iterable[Mapping[str, Any]] = (),
        ports: Iterable[Mapping[str, Any]] = (),
        **fields: Any,
    ) -> dict[str, Any]:
        """A container; `requests`/`limits` fill `resources`, other fields go in as given."""
        container: dict[str, Any] = {"name": name}
        if image is not None:
            container["image"] = image
        if command is not None:
            container["command"] = list(command)
        if args is not None:
            container["args"] = list(args)
        if env:
            container["env"] = _dicts(env)
        if requests is not None or limits is not None:
            container["resources"] = {}
            if requests is not None:
                container["resources"]["requests"] = dict(requests)
            if limits is not None:
                container["resources"]["limits"] = dict(limits)
        if volume_mounts:
            container["volumeMounts"] = _dicts(volume_mounts)
        if ports:
            container["ports"] = _dicts(ports)
        container.update(fields)
        return container

    @staticmethod
    def job(
        name: str,
        *,
        ancestor: str | None = None,
        containers: Iterable[Mapping[str, Any]] = (),
        init_containers: Iterable[Mapping[str, Any]] = (),
        volumes: Iterable[Mapping[str, Any]] = (),
        parallelism: int | None = None,
        completions: int | None = None,
        replicas: int | None = 1,
        pod_spec: Mapping[str, Any] | None = None,
        **pod_spec_fields: Any,
    ) -> dict[str, Any]:
        """A JobSet replicated job; `ancestor` sets the ancestor-step label, `pod_spec` and
        `pod_spec_fields` (e.g. `priorityClassName=...`) the pod spec's other fields."""
        spec: dict[str, Any] = {**dict(pod_spec or {}), **pod_spec_fields}
        spec["containers"] = _dicts(containers)
        if init_containers:
            spec["initContainers"] = _dicts(init_containers)
        if volumes:
            spec["volumes"] = _dicts(volumes)
        job_spec: dict[str, Any] = {"template": {"spec": spec}}
        if parallelism is not None:
            job_spec["parallelism"] = parallelism
        if completions is not None:
            job_spec["completions"] = completions
        template: dict[str, Any] = {"spec": job_spec}
        if ancestor is not None:
            template["metadata"] = {"labels": {constants.LABEL_TRAINJOB_ANCESTOR: ancestor}}
        job: dict[str, Any] = {"name": name, "template": template}
        if replicas is not None:
            job["replicas"] = replicas
        return job

    def default_jobs(self) -> list[dict[str, Any]]:
        """Upstream's `MakeJobSetWrapper` replicated jobs: both initializers and `node`, sharing the
        `initializer` volume."""
        volume = {"name": constants.INITIALIZER_VOLUME, "persistentVolumeClaim": {"claimName": "initializer"}}
        dataset = {"name": constants.INITIALIZER_VOLUME, "mountPath": constants.DATASET_MOUNT_PATH}
        model = {"name": constants.INITIALIZER_VOLUME, "mountPath": constants.MODEL_MOUNT_PATH}
        return [
            self.job(
                constants.DATASET_INITIALIZER,
                ancestor=constants.DATASET_INITIALIZER,
                containers=[self.container(constants.DATASET_INITIALIZER, volume_mounts=[dataset])],
                volumes=[volume],
            ),
            self.job(
                constants.MODEL_INITIALIZER,
                ancestor=constants.MODEL_INITIALIZER,
                containers=[self.container(constants.MODEL_INITIALIZER, volume_mounts=[model])],
                volumes=[volume],
            ),
            self.job(
                constants.NODE,
                ancestor=constants.ANCESTOR_TRAINER,
                containers=[self.container(constants.NODE, volume_mounts=[dataset, model])],
                volumes=[volume],
            ),
        ]

    # Runtimes --------------------------------------------------------------------------------------------

    @staticmethod
    def runtime_spec(
        *jobs: Mapping[str, Any],
        ml_policy: Mapping[str, Any] | None = None,
        pod_group_policy: Mapping[str, Any] | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        **jobset_spec: Any,
    ) -> TrainingRuntimeSpec:
        """A runtime `spec`: the JobSet template (`jobset_spec`: its other spec fields) and the policies."""
        template: dict[str, Any] = {"spec": {"replicatedJobs": _dicts(jobs), **jobset_spec}}
        if labels or annotations:
            template["metadata"] = {}
            if labels:
                template["metadata"]["labels"] = dict(labels)
            if annotations:
                template["metadata"]["annotations"] = dict(annotations)
        spec: dict[str, Any] = {"template": template}
        if ml_policy is not None:
            spec["mlPolicy"] = dict(ml_policy)
        if pod_group_policy is not None:
            spec["podGroupPolicy"] = dict(pod_group_policy)
        return cast(TrainingRuntimeSpec, spec)

    def runtime(
        self,
        spec: Mapping[str, Any],
        *,
        name: str | None = None,
        namespace: str | None = None,
        kind: str = constants.TRAINING_RUNTIME_KIND,
        labels: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """A TrainingRuntime (in `namespace`, default the suite's) or a ClusterTrainingRuntime."""
        metadata: dict[str, Any] = {"name": self.runtime_name if name is None else name}
        if kind == constants.TRAINING_RUNTIME_KIND:
            metadata["namespace"] = self.namespace if namespace is None else namespace
        if labels:
            metadata["labels"] = dict(labels)
        return {"apiVersion": constants.API_VERSION, "kind": kind, "metadata": metadata, "spec": dict(spec)}

    # TrainJobs and what they own -------------------------------------------------------------------------

    def trainjob(
        self,
        name: str | None = None,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        runtime: str | None = None,
        kind: str | Literal[_Default.SUITE] | None = SUITE,
        trainer: Mapping[str, Any] | None = None,
        initializer: Mapping[str, Any] | None = None,
        runtime_patches: Iterable[Mapping[str, Any]] | None = None,
        suspend: bool | None = None,
        status: Mapping[str, Any] | None = None,
        created: str | Literal[_Default.SUITE] | None = SUITE,
        **spec: Any,
    ) -> TrainJob:
        """A TrainJob; `kind` (of `spec.runtimeRef`) and `created` are the suite's unless given; None
        leaves them out."""
        runtime_ref: dict[str, Any] = {"name": self.runtime_name if runtime is None else runtime}
        kind = self.runtime_kind if kind is SUITE else kind
        if kind is not None:
            runtime_ref["kind"] = kind
            runtime_ref["apiGroup"] = constants.GROUP
        body: dict[str, Any] = {"runtimeRef": runtime_ref, **spec}
        if trainer is not None:
            body["trainer"] = dict(trainer)
        if initializer is not None:
            body["initializer"] = dict(initializer)
        if runtime_patches is not None:
            body["runtimePatches"] = _dicts(runtime_patches)
        if suspend is not None:
            body["suspend"] = suspend
        metadata: dict[str, Any] = {
            "name": self.name if name is None else name,
            "namespace": self.namespace if namespace is None else namespace,
            "uid": self.uid if uid is None else uid,
        }
        created = self.created if created is SUITE else created
        if created is not None:
            metadata["creationTimestamp"] = created
        trainjob: dict[str, Any] = {
            "apiVersion": constants.API_VERSION,
            "kind": constants.TRAINJOB_KIND,
            "metadata": metadata,
            "spec": body,
        }
        if status is not None:
            trainjob["status"] = dict(status)
        return cast(TrainJob, trainjob)

    def owner(self, name: str | None = None, uid: str | None = None) -> dict[str, Any]:
        """The ownerReference a TrainJob puts on what it controls."""
        return {
            "apiVersion": constants.API_VERSION,
            "kind": constants.TRAINJOB_KIND,
            "name": self.name if name is None else name,
            "uid": self.uid if uid is None else uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def jobset(
        self,
        name: str | None = None,
        namespace: str | None = None,
        *,
        suspend: bool | None = None,
        status: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """An existing JobSet (for a `Reader`): empty spec, optional `suspend` and status."""
        obj: dict[str, Any] = {
            "apiVersion": constants.JOBSET_API_VERSION,
            "kind": constants.JOBSET_KIND,
            "metadata": {
                "name": self.name if name is None else name,
                "namespace": self.namespace if namespace is None else namespace,
            },
            "spec": {},
        }
        if suspend is not None:
            obj["spec"]["suspend"] = suspend
        if status is not None:
            obj["status"] = dict(status)
        return obj

    @staticmethod
    def env(name: str, value: str) -> dict[str, Any]:
        return {"name": name, "value": value}

    @staticmethod
    def rank_env(name: str) -> dict[str, Any]:
        """An env var holding the Job completion index (the node rank)."""
        return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": JOB_COMPLETION_INDEX_FIELD_PATH}}}

    # The pipeline's own steps ----------------------------------------------------------------------------

    @staticmethod
    def info(trainjob: TrainJob, spec: TrainingRuntimeSpec) -> Info:
        """The Info of a TrainJob on a runtime spec, before any plugin ran (`runtime.info.build_info`)."""
        return build_info(trainjob, spec)

    @staticmethod
    def identify_pod_network(info: Info, trainjob: TrainJob) -> None:
        """The JobSet plugin's PodNetwork phase: the pods' (lazy) DNS names, from the final counts."""
        JobSet().identify_pod_network(info, trainjob)

    @staticmethod
    def reader(*objects: Mapping[str, Any]) -> MemoryReader:
        return MemoryReader(objects)
