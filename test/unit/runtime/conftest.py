"""Builders for the runtime tests: TrainJobs, runtimes, replicated jobs and containers as wire dicts.

They mirror upstream's `pkg/util/testing/wrapper.go` defaults where tests port upstream cases: the default
runtime template has the three replicated jobs `dataset-initializer`, `model-initializer` and `node`, each
labelled with its ancestor step and mounting the `initializer` volume.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from runtime.framework import MemoryReader

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
"""The fixed "now" every status test uses (no test reads the clock)."""

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


class Make:
    """Wire-dict builders (each call returns fresh dicts)."""

    now = NOW

    @staticmethod
    def container(
        name: str,
        *,
        image: str | None = None,
        command: list[str] | None = None,
        args: list[str] | None = None,
        env: Iterable[Mapping[str, Any]] = (),
        requests: Mapping[str, Any] | None = None,
        limits: Mapping[str, Any] | None = None,
        volume_mounts: Iterable[Mapping[str, Any]] = (),
        ports: Iterable[Mapping[str, Any]] = (),
        **extra: Any,
    ) -> dict[str, Any]:
        container: dict[str, Any] = {"name": name}
        if image is not None:
            container["image"] = image
        if command is not None:
            container["command"] = list(command)
        if args is not None:
            container["args"] = list(args)
        if env:
            container["env"] = [dict(e) for e in env]
        if requests is not None or limits is not None:
            container["resources"] = {}
            if requests is not None:
                container["resources"]["requests"] = dict(requests)
            if limits is not None:
                container["resources"]["limits"] = dict(limits)
        if volume_mounts:
            container["volumeMounts"] = [dict(m) for m in volume_mounts]
        if ports:
            container["ports"] = [dict(p) for p in ports]
        container.update(extra)
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
        replicas: int | None = 1,
        pod_spec: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        spec: dict[str, Any] = dict(pod_spec or {})
        spec["containers"] = [dict(c) for c in containers]
        if init_containers:
            spec["initContainers"] = [dict(c) for c in init_containers]
        if volumes:
            spec["volumes"] = [dict(v) for v in volumes]
        job_spec: dict[str, Any] = {"template": {"spec": spec}}
        if parallelism is not None:
            job_spec["parallelism"] = parallelism
        template: dict[str, Any] = {"spec": job_spec}
        if ancestor is not None:
            template["metadata"] = {"labels": {ANCESTOR: ancestor}}
        job: dict[str, Any] = {"name": name, "template": template}
        if replicas is not None:
            job["replicas"] = replicas
        return job

    def default_jobs(self) -> list[dict[str, Any]]:
        """Upstream's `MakeJobSetWrapper` replicated jobs: both initializers and `node`."""
        volume = {"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer"}}
        return [
            self.job(
                "dataset-initializer",
                ancestor="dataset-initializer",
                containers=[
                    self.container(
                        "dataset-initializer",
                        volume_mounts=[{"name": "initializer", "mountPath": "/workspace/dataset"}],
                    )
                ],
                volumes=[volume],
            ),
            self.job(
                "model-initializer",
                ancestor="model-initializer",
                containers=[
                    self.container(
                        "model-initializer",
                        volume_mounts=[{"name": "initializer", "mountPath": "/workspace/model"}],
                    )
                ],
                volumes=[volume],
            ),
            self.job(
                "node",
                ancestor="trainer",
                containers=[
                    self.container(
                        "node",
                        volume_mounts=[
                            {"name": "initializer", "mountPath": "/workspace/dataset"},
                            {"name": "initializer", "mountPath": "/workspace/model"},
                        ],
                    )
                ],
                volumes=[volume],
            ),
        ]

    @staticmethod
    def runtime_spec(
        jobs: Iterable[Mapping[str, Any]],
        *,
        ml_policy: Mapping[str, Any] | None = None,
        pod_group_policy: Mapping[str, Any] | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        **jobset_spec: Any,
    ) -> dict[str, Any]:
        template: dict[str, Any] = {"spec": {"replicatedJobs": [dict(j) for j in jobs], **jobset_spec}}
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
        return spec

    @staticmethod
    def runtime(
        spec: Mapping[str, Any],
        *,
        name: str = "test-runtime",
        namespace: str | None = "default",
        kind: str = "TrainingRuntime",
        labels: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name}
        if kind == "TrainingRuntime" and namespace is not None:
            metadata["namespace"] = namespace
        if labels:
            metadata["labels"] = dict(labels)
        return {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": kind,
            "metadata": metadata,
            "spec": dict(spec),
        }

    @staticmethod
    def trainjob(
        name: str = "test-job",
        namespace: str = "default",
        *,
        uid: str = "uid",
        runtime: str = "test-runtime",
        kind: str | None = "TrainingRuntime",
        trainer: Mapping[str, Any] | None = None,
        initializer: Mapping[str, Any] | None = None,
        runtime_patches: Iterable[Mapping[str, Any]] | None = None,
        suspend: bool | None = None,
        status: Mapping[str, Any] | None = None,
        created: str = "2026-01-02T03:00:00Z",
        **spec: Any,
    ) -> dict[str, Any]:
        runtime_ref: dict[str, Any] = {"name": runtime}
        if kind is not None:
            runtime_ref["kind"] = kind
            runtime_ref["apiGroup"] = "trainer.kubeflow.org"
        body: dict[str, Any] = {"runtimeRef": runtime_ref, **spec}
        if trainer is not None:
            body["trainer"] = dict(trainer)
        if initializer is not None:
            body["initializer"] = dict(initializer)
        if runtime_patches is not None:
            body["runtimePatches"] = [dict(p) for p in runtime_patches]
        if suspend is not None:
            body["suspend"] = suspend
        trainjob: dict[str, Any] = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": namespace, "uid": uid, "creationTimestamp": created},
            "spec": body,
        }
        if status is not None:
            trainjob["status"] = dict(status)
        return trainjob

    @staticmethod
    def owner(name: str = "test-job", uid: str = "uid") -> dict[str, Any]:
        return {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": name,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }

    @staticmethod
    def jobset(
        name: str = "test-job",
        namespace: str = "default",
        *,
        suspend: bool | None = None,
        status: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": name, "namespace": namespace},
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
        return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}}

    @staticmethod
    def reader(*objects: Mapping[str, Any]) -> MemoryReader:
        return MemoryReader(objects)


@pytest.fixture
def make() -> Make:
    return Make()
