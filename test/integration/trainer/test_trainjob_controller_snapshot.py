"""The TrainJob controller's runtime snapshots against a real kube-apiserver: upstream's scenarios 26 to 29
(upstream `test/integration/controller/trainjob_controller_test.go`, "Runtime snapshots"): a snapshot
ConfigMap for either runtime kind, a TrainJob built from its snapshot rather than the runtime as changed
since, a snapshot for a TrainJob that predates snapshots; and, beyond upstream, a tampered snapshot that
fails only its own TrainJob.

The manager runs in this process exactly as in production (its informers, five TrainJob workers, leader
election). Tier 1 has no JobSet controller and no garbage collector: the tests write JobSet status.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.client.client import Client
from support import trainer_objects as _objects

CLUSTER_TRAINING_RUNTIME = _objects.CLUSTER_TRAINING_RUNTIME
CONFIGMAP = _objects.CONFIGMAP
EVENT = _objects.EVENT
JOBSET = _objects.JOBSET
TRAINING_RUNTIME = _objects.TRAINING_RUNTIME
TRAINJOB = _objects.TRAINJOB
Eventually = _objects.Eventually
alpha_runtime = _objects.alpha_runtime
alpha_trainjob = _objects.alpha_trainjob
get = _objects.get
runtime = _objects.runtime
_create = _objects.create

pytestmark = pytest.mark.allow_thread_leaks


# --- Runtime snapshots ------------------------------------------------------------------------------------


def test_26_snapshot_configmap_for_a_training_runtime(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _create(client, alpha_runtime(namespace))
    created = _create(client, alpha_trainjob(namespace))
    snapshot = eventually(lambda: get(client, CONFIGMAP, "alpha-runtime-snapshot", namespace), timeout=20)
    assert snapshot["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "alpha",
            "uid": created["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert "kind: TrainingRuntime" in snapshot["data"]["runtime"]
    assert "name: alpha" in snapshot["data"]["runtime"]


def test_27_snapshot_configmap_for_a_cluster_training_runtime(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    name = f"ctr-{namespace[-12:]}"
    cluster = alpha_runtime("unused", name)
    del cluster["metadata"]["namespace"]
    cluster["kind"] = "ClusterTrainingRuntime"
    _create(client, cluster)
    try:
        tj = alpha_trainjob(namespace, runtime_name=name)
        tj["spec"]["runtimeRef"]["kind"] = "ClusterTrainingRuntime"
        _create(client, tj)
        snapshot = eventually(lambda: get(client, CONFIGMAP, "alpha-runtime-snapshot", namespace), timeout=20)
        assert "kind: ClusterTrainingRuntime" in snapshot["data"]["runtime"]
        assert f"name: {name}" in snapshot["data"]["runtime"]
    finally:
        client.delete(CLUSTER_TRAINING_RUNTIME, name)


def test_28_use_the_snapshot_rather_than_the_current_runtime(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    marked = alpha_runtime(namespace)
    marked["spec"]["template"]["metadata"] = {"labels": {"snapshot-test-marker": "snapshot-v1"}}
    _create(client, marked)
    _create(client, alpha_trainjob(namespace))
    jobset = eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)
    assert jobset["metadata"]["labels"]["snapshot-test-marker"] == "snapshot-v1"
    snapshot_before = get(client, CONFIGMAP, "alpha-runtime-snapshot", namespace)["data"]

    client.patch(
        TRAINING_RUNTIME,
        "alpha",
        {"spec": {"template": {"metadata": {"labels": {"snapshot-test-marker": "snapshot-v2"}}}}},
        namespace,
    )
    client.patch(TRAINJOB, "alpha", {"spec": {"suspend": False}}, namespace)

    def resumed_on_v1() -> None:
        got = get(client, JOBSET, "alpha", namespace)
        assert got["spec"]["suspend"] is False
        assert got["metadata"]["labels"]["snapshot-test-marker"] == "snapshot-v1"

    eventually(resumed_on_v1, timeout=20)
    assert get(client, CONFIGMAP, "alpha-runtime-snapshot", namespace)["data"] == snapshot_before


def test_29_create_snapshots_for_pre_existing_trainjobs(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _create(client, alpha_runtime(namespace))
    _create(client, alpha_trainjob(namespace))
    eventually(lambda: get(client, CONFIGMAP, "alpha-runtime-snapshot", namespace), timeout=20)
    client.delete(CONFIGMAP, "alpha-runtime-snapshot", namespace)
    client.patch(TRAINJOB, "alpha", {"metadata": {"annotations": {"touch": "1"}}}, namespace)
    snapshot = eventually(lambda: get(client, CONFIGMAP, "alpha-runtime-snapshot", namespace), timeout=20)
    assert "runtime" in snapshot["data"]


def test_a_tampered_snapshot_fails_only_its_trainjob_with_a_warning(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _create(client, alpha_runtime(namespace))
    _create(client, alpha_trainjob(namespace))
    eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    client.patch(CONFIGMAP, "alpha-runtime-snapshot", {"data": {"runtime": bomb}}, namespace)
    client.patch(TRAINJOB, "alpha", {"metadata": {"annotations": {"touch": "1"}}}, namespace)

    def warned() -> None:
        events = [
            e
            for e in client.list(EVENT, namespace).items
            if e["reason"] == "TrainJobResourcesCreationFailed" and "snapshot" in e["message"]
        ]
        assert events, "no warning about the snapshot yet"
        assert len(events[0]["message"]) < 1100

    eventually(warned, timeout=20)
    # The manager is alive and serves other TrainJobs.
    _create(client, alpha_trainjob(namespace, name="beta"))
    eventually(lambda: get(client, JOBSET, "beta", namespace), timeout=20)
