"""Builders for the plugin tests: TrainJobs, runtime specs, replicated jobs and containers as wire dicts.

Names and shapes follow upstream's plugin test tables (`pkg/util/testing/wrapper.go`): a TrainJob called
`trainJob` with UID `trainJob` in `default`, replicated jobs `launcher`/`node`, containers called `node`.
Every builder returns fresh dicts, so a test may mutate what it gets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

import pytest

from runtime.api.v1alpha1 import TrainingRuntimeSpec, TrainJob
from runtime.framework import MemoryReader
from runtime.info import Info, build_info
from runtime.plugins.jobset import JobSet

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


class Make:
    """Wire-dict builders."""

    @staticmethod
    def container(name: str = "node", **fields: Any) -> dict[str, Any]:
        return {"name": name, **fields}

    @staticmethod
    def job(
        name: str,
        *,
        ancestor: str | None = None,
        containers: Iterable[Mapping[str, Any]] = (),
        init_containers: Iterable[Mapping[str, Any]] = (),
        parallelism: int | None = None,
        **pod_spec: Any,
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {"containers": [dict(c) for c in containers], **pod_spec}
        if init_containers:
            spec["initContainers"] = [dict(c) for c in init_containers]
        job_spec: dict[str, Any] = {"template": {"spec": spec}}
        if parallelism is not None:
            job_spec["parallelism"] = parallelism
            job_spec["completions"] = parallelism
        template: dict[str, Any] = {"spec": job_spec}
        if ancestor is not None:
            template["metadata"] = {"labels": {ANCESTOR_LABEL: ancestor}}
        return {"name": name, "template": template}

    @staticmethod
    def runtime_spec(
        *jobs: Mapping[str, Any],
        ml_policy: Mapping[str, Any] | None = None,
        pod_group_policy: Mapping[str, Any] | None = None,
        annotations: Mapping[str, str] | None = None,
        **jobset_spec: Any,
    ) -> TrainingRuntimeSpec:
        template: dict[str, Any] = {"spec": {"replicatedJobs": [dict(j) for j in jobs], **jobset_spec}}
        if annotations:
            template["metadata"] = {"annotations": dict(annotations)}
        spec: dict[str, Any] = {"template": template}
        if ml_policy is not None:
            spec["mlPolicy"] = dict(ml_policy)
        if pod_group_policy is not None:
            spec["podGroupPolicy"] = dict(pod_group_policy)
        return cast(TrainingRuntimeSpec, spec)

    @staticmethod
    def trainjob(
        name: str = "trainJob",
        namespace: str = "default",
        *,
        uid: str = "trainJob",
        runtime: str = "test-runtime",
        trainer: Mapping[str, Any] | None = None,
        suspend: bool | None = None,
        **spec: Any,
    ) -> TrainJob:
        body: dict[str, Any] = {"runtimeRef": {"name": runtime}, **spec}
        if trainer is not None:
            body["trainer"] = dict(trainer)
        if suspend is not None:
            body["suspend"] = suspend
        return cast(
            TrainJob,
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": name, "namespace": namespace, "uid": uid},
                "spec": body,
            },
        )

    @staticmethod
    def owner(name: str = "trainJob", uid: str = "trainJob") -> dict[str, Any]:
        return {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": name,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }

    @staticmethod
    def env(name: str, value: str) -> dict[str, Any]:
        return {"name": name, "value": value}

    @staticmethod
    def rank_env(name: str) -> dict[str, Any]:
        return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}}

    @staticmethod
    def info(trainjob: TrainJob, spec: TrainingRuntimeSpec) -> Info:
        """The Info of a TrainJob on a runtime spec, before any plugin ran."""
        return build_info(trainjob, spec)

    @staticmethod
    def sync_endpoints(info: Info, trainjob: TrainJob) -> None:
        """The JobSet plugin's PreComponentBuilder phase: the pods' DNS names, from the final counts."""
        JobSet().pre_build_sync(info, trainjob)

    @staticmethod
    def reader(*objects: Mapping[str, Any]) -> MemoryReader:
        return MemoryReader(objects)


@pytest.fixture
def make() -> Make:
    return Make()
