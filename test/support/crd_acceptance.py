"""Shared parts of the CRD acceptance tests (`test/integration/test_crd_acceptance_*.py`): a thin client for
the three Trainer kinds, its fixtures, the 422 check, and builders of objects in the shapes of upstream's
examples (torch-distributed, deepspeed/MPI, TrainJobs with trainer, initializer, runtimePatches, suspend).

A test module takes the fixtures with `pytest_plugins = ("support.crd_acceptance",)` and imports the rest by
name.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
PLURALS = {
    "TrainJob": "trainjobs",
    "TrainingRuntime": "trainingruntimes",
    "ClusterTrainingRuntime": "clustertrainingruntimes",
}
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


# -- client plumbing -------------------------------------------------------------------------------------


class Trainer:
    """A thin wrapper over CustomObjectsApi for the three Trainer kinds."""

    def __init__(self, api: k8s.CustomObjectsApi) -> None:
        self.api = api

    def create(self, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        plural = PLURALS[obj["kind"]]
        if obj["kind"] == "ClusterTrainingRuntime":
            return self.api.create_cluster_custom_object(GROUP, VERSION, plural, obj)  # type: ignore[no-any-return]
        return self.api.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, obj)  # type: ignore[no-any-return]

    def create_with_status(
        self, obj: dict[str, Any], namespace: str
    ) -> tuple[dict[str, Any], int, dict[str, str]]:
        """Create a namespaced object and return (object, HTTP status, headers)."""
        return self.api.create_namespaced_custom_object_with_http_info(  # type: ignore[no-any-return]
            GROUP, VERSION, namespace, PLURALS[obj["kind"]], obj
        )

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        if kind == "ClusterTrainingRuntime":
            return self.api.get_cluster_custom_object(GROUP, VERSION, PLURALS[kind], name)  # type: ignore[no-any-return]
        return self.api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURALS[kind], name)  # type: ignore[no-any-return]

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        return self.api.replace_namespaced_custom_object(  # type: ignore[no-any-return]
            GROUP, VERSION, meta["namespace"], PLURALS[obj["kind"]], meta["name"], obj
        )

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        return self.api.replace_namespaced_custom_object_status(  # type: ignore[no-any-return]
            GROUP, VERSION, meta["namespace"], PLURALS[obj["kind"]], meta["name"], obj
        )

    def apply(self, obj: dict[str, Any], namespace: str, manager: str) -> dict[str, Any]:
        """Server-side apply (force), as a controller or Kueue would."""
        return self.api.patch_namespaced_custom_object(  # type: ignore[no-any-return]
            GROUP,
            VERSION,
            namespace,
            PLURALS[obj["kind"]],
            obj["metadata"]["name"],
            obj,
            field_manager=manager,
            force=True,
            _content_type="application/apply-patch+yaml",
        )

    def delete_cluster(self, kind: str, name: str) -> None:
        self.api.delete_cluster_custom_object(GROUP, VERSION, PLURALS[kind], name)


@pytest.fixture(scope="module")
def trainer(kubeconfig: Path) -> Iterator[Trainer]:
    api_client = k8s_config.new_client_from_config(config_file=str(kubeconfig))
    try:
        yield Trainer(k8s.CustomObjectsApi(api_client))
    finally:
        api_client.close()


@pytest.fixture
def cluster_names(trainer: Trainer) -> Iterator[Callable[[str], str]]:
    """Unique names for cluster-scoped runtimes; every runtime created under one is deleted afterwards."""
    made: list[str] = []

    def name(prefix: str) -> str:
        made.append(f"{prefix}-{secrets.token_hex(3)}")
        return made[-1]

    yield name
    for each in made:
        try:
            trainer.delete_cluster("ClusterTrainingRuntime", each)
        except ApiException as exc:
            if exc.status != 404:
                raise


def expect_invalid(call: Callable[[], Any], *fragments: str) -> dict[str, Any]:
    """Run `call`; require HTTP 422, reason Invalid and every fragment in the message; return the Status."""
    with pytest.raises(ApiException) as caught:
        call()
    status = json.loads(caught.value.body)
    assert (caught.value.status, status.get("reason")) == (422, "Invalid"), status
    for fragment in fragments:
        assert fragment in status["message"], status["message"]
    return dict(status)


# -- objects in upstream's example shapes ----------------------------------------------------------------


def container(name: str, image: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": image, **extra}


def replicated_job(
    name: str, ancestor: str | None, *containers: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    metadata = {"labels": {ANCESTOR: ancestor}} if ancestor else {}
    return {
        "name": name,
        "template": {
            "metadata": metadata,
            "spec": {"template": {"spec": {"containers": list(containers)}}},
        },
        **extra,
    }


def torch_runtime(kind: str, name: str) -> dict[str, Any]:
    """A torch-distributed-like runtime: dataset and model initializers, then the `node` trainer job."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        replicated_job(
                            "dataset-initializer",
                            "dataset-initializer",
                            container(
                                "dataset-initializer",
                                "ghcr.io/kubeflow/trainer/dataset-initializer",
                                volumeMounts=[{"name": "initializer", "mountPath": "/workspace"}],
                            ),
                        ),
                        replicated_job(
                            "model-initializer",
                            "model-initializer",
                            container("model-initializer", "ghcr.io/kubeflow/trainer/model-initializer"),
                            dependsOn=[{"name": "dataset-initializer", "status": "Complete"}],
                        ),
                        replicated_job(
                            "node",
                            "trainer",
                            container(
                                "node",
                                "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
                                command=["/bin/bash", "-c", "torchrun train.py"],
                                resources={"limits": {"cpu": 2, "memory": "4Gi"}},
                            ),
                            dependsOn=[{"name": "model-initializer", "status": "Complete"}],
                        ),
                    ]
                }
            },
        },
    }


def mpi_runtime(name: str, **mpi: Any) -> dict[str, Any]:
    """A deepspeed-like MPI runtime: a launcher and the `node` workers."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "deepspeed"}},
        "spec": {
            "mlPolicy": {"numNodes": 2, "mpi": mpi},
            "template": {
                "spec": {
                    "network": {"publishNotReadyAddresses": True},
                    "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                    "replicatedJobs": [
                        replicated_job(
                            "launcher",
                            "trainer",
                            container(
                                "node", "ghcr.io/kubeflow/trainer/deepspeed-runtime", command=["mpirun"]
                            ),
                        ),
                        replicated_job(
                            "node",
                            None,
                            container(
                                "node",
                                "ghcr.io/kubeflow/trainer/deepspeed-runtime",
                                command=["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"],
                            ),
                        ),
                    ],
                }
            },
        },
    }


def trainjob(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec},
    }


def patch(manager: str, job: str = "node", **pod_spec: Any) -> dict[str, Any]:
    return {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [{"name": job, "template": {"spec": {"template": {"spec": pod_spec}}}}]
                }
            }
        },
    }
