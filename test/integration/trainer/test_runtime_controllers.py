"""The TrainingRuntime and ClusterTrainingRuntime controllers against a real kube-apiserver: upstream's
scenarios (`test/integration/controller/{trainingruntime,clustertrainingruntime}_controller_test.go`), and the
legacy finalizer of Trainer ≤ v2.2 being stripped.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.client.client import Client
from support import trainer_objects as _objects

pytestmark = pytest.mark.allow_thread_leaks

LEGACY_FINALIZER = "trainer.kubeflow.org/resource-in-use"


def _with_finalizers(obj: dict[str, Any], *finalizers: str) -> dict[str, Any]:
    obj["metadata"]["finalizers"] = list(finalizers)
    return obj


@pytest.mark.parametrize("cluster", [False, True], ids=["30-training-runtime", "31-cluster-training-runtime"])
def test_30_31_a_runtime_can_be_deleted_while_referenced_by_a_trainjob(
    trainer: Any, client: Client, namespace: str, eventually: Any, cluster: bool
) -> None:
    name = f"deletable-{namespace[-10:]}"
    if cluster:
        spec = _objects.alpha_runtime("unused", name)
        del spec["metadata"]["namespace"]
        spec["kind"] = "ClusterTrainingRuntime"
        gvk, runtime_ns, kind = _objects.CLUSTER_TRAINING_RUNTIME, None, "ClusterTrainingRuntime"
    else:
        spec = _objects.alpha_runtime(namespace, name)
        gvk, runtime_ns, kind = _objects.TRAINING_RUNTIME, namespace, "TrainingRuntime"
    client.create(spec, field_manager=_objects.USER)
    tj = _objects.alpha_trainjob(namespace, runtime_name=name)
    tj["spec"]["runtimeRef"]["kind"] = kind
    client.create(tj, field_manager=_objects.USER)
    eventually(lambda: _objects.get(client, _objects.JOBSET, "alpha", namespace), timeout=20)

    client.delete(gvk, name, runtime_ns)

    def gone() -> None:
        assert _objects.absent(client, gvk, name, runtime_ns), "the runtime is still there"

    eventually(gone, timeout=10)

    # The TrainJob keeps working from its snapshot: resuming it still updates the JobSet.
    client.patch(_objects.TRAINJOB, "alpha", {"spec": {"suspend": False}}, namespace)

    def resumed() -> None:
        assert _objects.get(client, _objects.JOBSET, "alpha", namespace)["spec"]["suspend"] is False

    eventually(resumed, timeout=20)


@pytest.mark.parametrize("cluster", [False, True], ids=["training-runtime", "cluster-training-runtime"])
def test_the_legacy_finalizer_is_stripped_and_others_are_kept(
    trainer: Any, client: Client, namespace: str, eventually: Any, cluster: bool
) -> None:
    name = f"legacy-{namespace[-10:]}"
    other = "example.com/keep-me"
    if cluster:
        spec = _objects.alpha_runtime("unused", name)
        del spec["metadata"]["namespace"]
        spec["kind"] = "ClusterTrainingRuntime"
        gvk, runtime_ns = _objects.CLUSTER_TRAINING_RUNTIME, None
    else:
        spec = _objects.alpha_runtime(namespace, name)
        gvk, runtime_ns = _objects.TRAINING_RUNTIME, namespace
    client.create(_with_finalizers(spec, other, LEGACY_FINALIZER), field_manager=_objects.USER)

    def stripped() -> None:
        finalizers = _objects.get(client, gvk, name, runtime_ns)["metadata"].get("finalizers")
        assert finalizers == [other]

    try:
        eventually(stripped, timeout=20)
    finally:
        client.patch(gvk, name, {"metadata": {"finalizers": None}}, runtime_ns)
        client.delete(gvk, name, runtime_ns)
