"""Someone else touches the JobSet of a TrainJob: it is deleted while the TrainJob runs (recreated), removed
by its TTL after completion (not recreated), or edited by another field manager (our fields won back on
the next apply, theirs left alone).

One manager in this process (ServiceAccount, shipped RBAC) serves the module. Tier 1 runs no JobSet
controller: the test writes the JobSet's status and deletes it as the JobSet controller's TTL would.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.client.client import Client
from controller.controller.reconcile import Request
from support import reliability

pytestmark = pytest.mark.allow_thread_leaks  # the module's manager outlives each test

INTRUDER = "intruder.example.com"
COMPLETED = {
    "type": "Completed",
    "status": "True",
    "reason": "AllJobsCompleted",
    "message": "jobset completed successfully",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


@pytest.fixture(scope="module")
def manager(service_account_kubeconfig: Path) -> Iterator[Any]:
    running = reliability.TrainerManager(service_account_kubeconfig, name="ownership").start()
    yield running
    running.stop()
    assert running.failures == []


def _node(jobset: dict[str, Any]) -> dict[str, Any]:
    (node,) = [j for j in jobset["spec"]["replicatedJobs"] if j["name"] == "node"]
    container: dict[str, Any] = node["template"]["spec"]["template"]["spec"]["containers"][0]
    return container


def _owner_of(jobset: dict[str, Any], path_piece: str) -> list[str]:
    """The field managers whose managedFields mention ``path_piece``."""
    return sorted(
        entry["manager"]
        for entry in jobset["metadata"].get("managedFields") or []
        if path_piece in str(entry)
    )


def test_a_jobset_deleted_while_its_trainjob_runs_is_recreated(
    manager: Any, admin: Client, namespace: str, figures: Any
) -> None:
    admin.create(reliability.torch_runtime(namespace), field_manager=reliability.USER)
    admin.create(reliability.trainjob(namespace, "running", suspend=False), field_manager=reliability.USER)
    first = reliability.eventually(
        lambda: reliability.get(admin, reliability.JOBSET, "running", namespace), timeout=30
    )
    admin.delete(reliability.JOBSET, "running", namespace)
    deleted = time.monotonic()

    def recreated() -> dict[str, Any]:
        jobset = reliability.get(admin, reliability.JOBSET, "running", namespace)
        assert jobset["metadata"]["uid"] != first["metadata"]["uid"], "still the deleted JobSet"
        return jobset

    second = reliability.eventually(recreated, timeout=30)
    took = time.monotonic() - deleted
    assert second["spec"]["replicatedJobs"] == first["spec"]["replicatedJobs"]
    found = reliability.inventory(admin, namespace, ["running"], expect_condition=None)
    assert found.lost == [] and found.duplicated == []
    figures.report(
        "JobSet deleted while running", runs=1, faults_injected=1, recreated_s=took, lost=0, duplicated=0
    )


def test_a_jobset_removed_by_its_ttl_after_completion_is_not_recreated(
    manager: Any, admin: Client, namespace: str, figures: Any
) -> None:
    admin.create(reliability.torch_runtime(namespace), field_manager=reliability.USER)
    admin.create(reliability.trainjob(namespace, "done", suspend=False), field_manager=reliability.USER)
    reliability.eventually(lambda: reliability.get(admin, reliability.JOBSET, "done", namespace), timeout=30)
    node_status = {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    admin.patch_status(
        reliability.JOBSET,
        "done",
        {"status": {"conditions": [COMPLETED], "replicatedJobsStatus": [node_status]}},
        namespace,
    )

    def complete() -> None:
        got = reliability.get(admin, reliability.TRAINJOB, "done", namespace)
        assert reliability.condition_types(got).get("Complete") == "True", got.get("status")

    reliability.eventually(complete, timeout=30)
    admin.delete(
        reliability.JOBSET, "done", namespace
    )  # what the JobSet controller does at ttlSecondsAfterFinished
    reliability.eventually(
        lambda: reliability.absent(admin, reliability.JOBSET, "done", namespace) or _raise(), timeout=30
    )
    # Reconciled again after the removal (the delete event, and these calls), the JobSet stays gone.
    reconciles = 3
    for _ in range(reconciles):
        manager.controllers.trainjob.reconcile(Request(namespace=namespace, name="done"))
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        assert reliability.absent(admin, reliability.JOBSET, "done", namespace)
        time.sleep(0.2)
    assert (
        reliability.condition_types(reliability.get(admin, reliability.TRAINJOB, "done", namespace))[
            "Complete"
        ]
        == "True"
    )
    figures.report(
        "JobSet removed by TTL after completion",
        runs=1,
        faults_injected=1,
        reconciles_after_removal=reconciles,
        recreated=0,
    )


def _raise() -> bool:
    raise AssertionError("the JobSet is still there")


def test_another_field_manager_loses_our_fields_on_the_next_apply_and_keeps_its_own(
    manager: Any, admin: Client, namespace: str, figures: Any
) -> None:
    admin.create(reliability.torch_runtime(namespace), field_manager=reliability.USER)
    admin.create(
        reliability.trainjob(namespace, "shared"), field_manager=reliability.USER
    )  # suspended: applied each time
    ours = reliability.eventually(
        lambda: reliability.get(admin, reliability.JOBSET, "shared", namespace), timeout=30
    )
    image = _node(ours)["image"]
    assert image == "test:runtime"

    # The intruder takes a field we own (the node container's image) and adds one we do not (an annotation).
    taken = admin.apply(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {
                "name": "shared",
                "namespace": namespace,
                "annotations": {f"{INTRUDER}/note": "keep"},
            },
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "spec": {
                                "template": {
                                    "spec": {"containers": [{"name": "node", "image": "intruder:1"}]}
                                }
                            }
                        },
                    }
                ]
            },
        },
        INTRUDER,
        force=True,
    )
    edited = time.monotonic()
    assert _node(taken)["image"] == "intruder:1"
    assert _owner_of(taken, "f:image") == [INTRUDER]

    def won_back() -> dict[str, Any]:
        jobset = reliability.get(admin, reliability.JOBSET, "shared", namespace)
        assert _node(jobset)["image"] == image, "the intruder's image is still there"
        return jobset

    jobset = reliability.eventually(won_back, timeout=30)
    took = time.monotonic() - edited
    assert jobset["metadata"]["annotations"][f"{INTRUDER}/note"] == "keep"
    assert _owner_of(jobset, f"{INTRUDER}/note") == [INTRUDER]
    assert "trainer" in _owner_of(jobset, "f:image")
    assert INTRUDER not in _owner_of(jobset, "f:image")
    figures.report(
        "another field manager edits our field",
        runs=1,
        faults_injected=1,
        won_back_s=took,
        their_field_kept=True,
    )
