"""The TrainJob admission webhooks on defaulting and update, against a real kube-apiserver: upstream's
scenarios (`test/integration/webhooks/*`, numbered in the order of upstream's suite) for markers, defaults
and immutable fields, and this port's decisions (docs/webhooks.md): an update after the runtime was
deleted, and user edits of a runtime patch's `time`; plus the webhook metrics.

As upstream's suite, no controller runs (`support.trainer_webhooks`); the CRD schema and CEL rules answer 422
Invalid, the webhooks 403 Forbidden.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from controller import metrics
from controller.client.client import Client
from controller.client.errors import NotFound
from controller.trainer.webhooks import (
    TRAINJOB_DEFAULTER_PATH,
    TRAINJOB_VALIDATOR_PATH,
)
from runtime.api import constants
from runtime.core.snapshot import build_snapshot
from support.trainer_webhooks import (
    OK,
    RUNTIME,
    TRAINING_RUNTIME,
    TRAINJOB,
    USER,
    Runtimes,
    Webhooks,
    _eventually,
    error_message,
    node_pod_patch,
    outcome,
    trainjob,
)

pytestmark = pytest.mark.allow_thread_leaks
pytest_plugins = ("support.trainer_webhooks",)


# --- TrainJob markers and defaulting ---------------------------------------------------------------------


MANAGED_BY = {
    "78-trainjob-controller": ("trainer.kubeflow.org/trainjob-controller", OK),
    "79-multikueue": ("kueue.x-k8s.io/multikueue", OK),
    "80-invalid": ("invalid", 422),
}


@pytest.mark.parametrize(("managed_by", "expected"), list(MANAGED_BY.values()), ids=list(MANAGED_BY))
def test_78_to_80_managed_by(
    runtimes: Runtimes, client: Client, managed_by: str, expected: str | int
) -> None:
    job = trainjob(runtimes.namespace, managedBy=managed_by)
    assert outcome(lambda: client.create(job, field_manager=USER)) == expected


def test_81_two_managers_patching_the_node_service_account_are_admitted(
    runtimes: Runtimes, client: Client
) -> None:
    patches = [
        node_pod_patch("acme.io/manager-one", serviceAccountName="custom-sa"),
        node_pod_patch("acme.io/manager-two", serviceAccountName="custom-sa-two"),
    ]
    assert (
        outcome(
            lambda: client.create(trainjob(runtimes.namespace, runtimePatches=patches), field_manager=USER)
        )
        == OK
    )


@pytest.mark.parametrize(
    ("manager", "expected"),
    [("kueue.k8s.io/manager", OK), ("kueue.k8s.io/", 403)],
    ids=["82-valid", "83-no-name"],
)
def test_82_83_runtime_patch_manager_names(
    runtimes: Runtimes, client: Client, manager: str, expected: str | int
) -> None:
    job = trainjob(runtimes.namespace, runtimePatches=[{"manager": manager}])
    assert outcome(lambda: client.create(job, field_manager=USER)) == expected


@pytest.mark.parametrize(
    ("seconds", "expected"), [(300, OK), (-1, 422), (0, OK)], ids=["84-300", "85-minus-1", "86-zero"]
)
def test_84_to_86_termination_grace_period_in_a_patch(
    runtimes: Runtimes, client: Client, seconds: int, expected: str | int
) -> None:
    patch = node_pod_patch("acme.io/manager", terminationGracePeriodSeconds=seconds)
    job = trainjob(runtimes.namespace, runtimePatches=[patch])
    assert outcome(lambda: client.create(job, field_manager=USER)) == expected


def test_87_suspend_defaults_to_false(runtimes: Runtimes, client: Client) -> None:
    job = trainjob(
        runtimes.namespace,
        runtime=runtimes.cluster_name,
        kind="ClusterTrainingRuntime",
        managedBy="kueue.x-k8s.io/multikueue",
    )
    assert client.create(job, field_manager=USER)["spec"]["suspend"] is False


def test_88_managed_by_defaults_to_the_trainjob_controller(runtimes: Runtimes, client: Client) -> None:
    created = client.create(trainjob(runtimes.namespace, suspend=True), field_manager=USER)
    assert created["spec"]["managedBy"] == "trainer.kubeflow.org/trainjob-controller"


def test_89_runtime_ref_api_group_defaults(runtimes: Runtimes, client: Client) -> None:
    created = client.create(trainjob(runtimes.namespace), field_manager=USER)
    assert created["spec"]["runtimeRef"] == {
        "name": RUNTIME,
        "kind": "TrainingRuntime",
        "apiGroup": "trainer.kubeflow.org",
    }


def test_90_runtime_ref_kind_defaults_to_cluster_training_runtime(runtimes: Runtimes, client: Client) -> None:
    job = trainjob(runtimes.namespace, runtime=runtimes.cluster_name)
    del job["spec"]["runtimeRef"]["kind"]
    created = client.create(job, field_manager=USER)
    assert created["spec"]["runtimeRef"]["kind"] == "ClusterTrainingRuntime"


def _parse(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def test_91_every_runtime_patch_gets_a_time_on_create(runtimes: Runtimes, client: Client) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    job = trainjob(
        runtimes.namespace,
        runtimePatches=[{"manager": "acme.io/manager-one"}, {"manager": "acme.io/manager-two"}],
    )
    created = client.create(job, field_manager=USER)
    times = [_parse(p["time"]) for p in created["spec"]["runtimePatches"]]
    assert len(times) == 2
    assert all(before <= t <= datetime.now(UTC) for t in times)


# --- TrainJob updates ------------------------------------------------------------------------------------


def _update(
    client: Client, namespace: str, name: str, change: Callable[[dict[str, Any]], None]
) -> Callable[[], Any]:
    def action() -> Any:
        current = client.get(TRAINJOB, name, namespace)
        change(current)
        return client.update(current, field_manager=USER)

    return action


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = obj
        for key in parents:
            target = target[key]
        target[last] = value

    return change


UPDATES = {
    "92-managed-by": (
        {"managedBy": "trainer.kubeflow.org/trainjob-controller"},
        "spec.managedBy",
        "kueue.x-k8s.io/multikueue",
    ),
    "93-runtime-ref": ({}, "spec.runtimeRef.name", "forbidden-update"),
    "94-initializer": (
        {"initializer": {"model": {"storageUri": "s3://test/path"}}},
        "spec.initializer.model.storageUri",
        "s3://forbidden-update",
    ),
    "95-trainer": ({"trainer": {"image": "test-image"}}, "spec.trainer.image", "forbidden-update"),
}


@pytest.mark.parametrize(("spec", "path", "value"), list(UPDATES.values()), ids=list(UPDATES))
def test_92_to_95_immutable_fields_are_invalid_by_the_schema(
    runtimes: Runtimes, client: Client, spec: dict[str, Any], path: str, value: Any
) -> None:
    client.create(trainjob(runtimes.namespace, **spec), field_manager=USER)
    assert outcome(_update(client, runtimes.namespace, "train-job", _set(path, value))) == 422


def _node_pod(obj: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = obj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"][
        "replicatedJobs"
    ][0]["template"]["spec"]["template"]["spec"]
    return pod


def test_96_a_runtime_patch_may_change_while_suspended_and_its_time_is_restamped(
    runtimes: Runtimes, client: Client
) -> None:
    patch = node_pod_patch("test.io/manager", nodeSelector={"test": "test"})
    created = client.create(
        trainjob(runtimes.namespace, suspend=True, runtimePatches=[patch]), field_manager=USER
    )
    first = _parse(created["spec"]["runtimePatches"][0]["time"])
    assert (
        outcome(
            _update(
                client,
                runtimes.namespace,
                "train-job",
                lambda o: _node_pod(o).update(nodeSelector={"allow": "update"}),
            )
        )
        == OK
    )
    stored = client.get(TRAINJOB, "train-job", runtimes.namespace)
    assert _node_pod(stored)["nodeSelector"] == {"allow": "update"}
    assert _parse(stored["spec"]["runtimePatches"][0]["time"]) >= first


def test_97_termination_grace_period_of_an_existing_patch_is_immutable(
    runtimes: Runtimes, client: Client
) -> None:
    patch = node_pod_patch("acme.io/manager", terminationGracePeriodSeconds=300)
    client.create(trainjob(runtimes.namespace, runtimePatches=[patch]), field_manager=USER)
    change = _update(
        client,
        runtimes.namespace,
        "train-job",
        lambda o: _node_pod(o).update(terminationGracePeriodSeconds=600),
    )
    assert outcome(change) == 422


# --- this port's decisions -------------------------------------------------------------------------------


def test_an_edit_of_time_alone_on_an_unchanged_patch_is_reverted(runtimes: Runtimes, client: Client) -> None:
    created = client.create(
        trainjob(runtimes.namespace, runtimePatches=[{"manager": "acme.io/one"}]), field_manager=USER
    )
    stamped = created["spec"]["runtimePatches"][0]["time"]
    updated = _update(
        client,
        runtimes.namespace,
        "train-job",
        lambda o: o["spec"]["runtimePatches"][0].update(time="2030-01-01T00:00:00Z"),
    )()
    assert updated["spec"]["runtimePatches"][0]["time"] == stamped
    assert updated["spec"] == created["spec"]  # nothing of the spec changed


def test_an_update_after_the_runtime_was_deleted_is_judged_by_the_snapshot(
    runtimes: Runtimes, webhooks: Webhooks, client: Client
) -> None:
    ns = runtimes.namespace
    runtime = client.get(TRAINING_RUNTIME, RUNTIME, ns)
    with_snapshot = client.create(trainjob(ns, "with-snapshot", suspend=True), field_manager=USER)
    client.create(trainjob(ns, "without-snapshot", suspend=True), field_manager=USER)
    # What the controller writes on its first reconcile (no controller runs in this suite).
    snapshot = build_snapshot(with_snapshot, runtime, constants.TRAINING_RUNTIME_KIND)
    client.create(snapshot, field_manager=USER)
    client.delete(TRAINING_RUNTIME, RUNTIME, ns)

    def gone() -> None:
        try:
            webhooks.manager.cache.get(TRAINING_RUNTIME, RUNTIME, ns)
        except NotFound:
            return
        raise AssertionError("the runtime is still cached")

    _eventually(gone, timeout=10)
    label = _set("metadata.labels", {"touched": "yes"})
    assert outcome(_update(client, ns, "with-snapshot", label)) == OK  # upstream: 403
    message = error_message(_update(client, ns, "without-snapshot", label))
    assert "specified trainingRuntime must be created before the TrainJob is created" in message


def test_the_webhooks_are_counted_under_controller_runtimes_names(runtimes: Runtimes, client: Client) -> None:
    client.create(trainjob(runtimes.namespace), field_manager=USER)
    for path in (TRAINJOB_DEFAULTER_PATH, TRAINJOB_VALIDATOR_PATH):
        value = metrics.REGISTRY.get_sample_value(
            "controller_runtime_webhook_requests_total", {"code": "200", "webhook": path}
        )
        assert value is not None and value >= 1, path
