"""CRD acceptance of TrainJob updates and status against a real kube-apiserver (Tier 1): the immutable
fields (also while suspended), what runtime patches may change, and the status subresource's rules.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from support.crd_acceptance import (
    GROUP,
    VERSION,
    Trainer,
    expect_invalid,
    patch,
    trainjob,
)

pytest_plugins = ("support.crd_acceptance",)


# -- TrainJob updates


@pytest.fixture
def suspended(trainer: Trainer, namespace: str) -> dict[str, Any]:
    """A suspended TrainJob with trainer, initializer and one runtime patch, as Kueue holds one."""
    job = trainjob(
        "held",
        suspend=True,
        activeDeadlineSeconds=600,
        initializer={"model": {"storageUri": "hf://org/model"}},
        trainer={"image": "trainer:v1", "numNodes": 1},
        runtimePatches=[
            patch(
                "kueue.x-k8s.io/manager",
                nodeSelector={"pool": "a"},
                terminationGracePeriodSeconds=30,
                containers=[{"name": "node", "env": [{"name": "A", "value": "1"}]}],
            )
        ],
    )
    return trainer.create(job, namespace)


def pod_spec_patch(job: dict[str, Any], index: int = 0) -> dict[str, Any]:
    jobs = job["spec"]["runtimePatches"][index]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    found: dict[str, Any] = jobs[0]["template"]["spec"]["template"]["spec"]
    return found


IMMUTABLE_UPDATES: dict[str, Callable[[dict[str, Any]], None]] = {
    "managedBy (case 92)": lambda j: j["spec"].update(managedBy="kueue.x-k8s.io/multikueue"),
    "runtimeRef.name (case 93)": lambda j: j["spec"]["runtimeRef"].update(name="other"),
    "initializer model storageUri (case 94)": lambda j: j["spec"]["initializer"]["model"].update(
        storageUri="hf://org/other"
    ),
    "trainer image (case 95)": lambda j: j["spec"]["trainer"].update(image="trainer:v2"),
    "activeDeadlineSeconds": lambda j: j["spec"].update(activeDeadlineSeconds=60),
    "terminationGracePeriodSeconds in a patch (case 97)": lambda j: pod_spec_patch(j).update(
        terminationGracePeriodSeconds=60
    ),
    "container env in a patch": lambda j: pod_spec_patch(j)["containers"][0]["env"].append({"name": "B"}),
}


@pytest.mark.parametrize("change", IMMUTABLE_UPDATES.values(), ids=IMMUTABLE_UPDATES.keys())
def test_immutable_fields_cannot_change_even_while_suspended(
    trainer: Trainer, suspended: dict[str, Any], change: Callable[[dict[str, Any]], None]
) -> None:
    updated = copy.deepcopy(suspended)
    change(updated)
    assert updated != suspended
    expect_invalid(lambda: trainer.replace(updated), "field is immutable")


def test_renaming_a_patch_manager_is_a_removal_and_an_addition(
    trainer: Trainer, suspended: dict[str, Any]
) -> None:
    # `manager` is the list-map key: CEL correlates old and new entries by it, so a renamed entry is a new one
    # and its immutability rule has no old value to compare with (as upstream).
    updated = copy.deepcopy(suspended)
    updated["spec"]["runtimePatches"][0]["manager"] = "acme.io/other"
    assert [p["manager"] for p in trainer.replace(updated)["spec"]["runtimePatches"]] == ["acme.io/other"]


def test_a_patch_node_selector_can_change_while_suspended(
    trainer: Trainer, suspended: dict[str, Any]
) -> None:
    # Upstream case 96: the scheduling fields stay mutable for Kueue.
    updated = copy.deepcopy(suspended)
    spec = pod_spec_patch(updated)
    spec["nodeSelector"] = {"pool": "b"}
    spec["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    spec["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    updated["spec"]["suspend"] = False
    replaced = trainer.replace(updated)
    assert pod_spec_patch(replaced)["nodeSelector"] == {"pool": "b"}
    assert pod_spec_patch(replaced)["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert replaced["spec"]["suspend"] is False


def test_a_second_manager_can_add_its_patch_by_server_side_apply(
    trainer: Trainer, namespace: str, suspended: dict[str, Any]
) -> None:
    # runtimePatches is a map list keyed by manager: each owner applies only its own entry.
    mine = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainJob",
        "metadata": {"name": suspended["metadata"]["name"]},
        "spec": {"runtimePatches": [patch("acme.io/scheduler", nodeSelector={"zone": "z1"})]},
    }
    applied = trainer.apply(mine, namespace, "acme-scheduler")
    assert [p["manager"] for p in applied["spec"]["runtimePatches"]] == [
        "kueue.x-k8s.io/manager",
        "acme.io/scheduler",
    ]


# -- TrainJob status ---------------------------------------------------------------------------------------


def condition(type_: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def test_status_is_a_subresource_with_well_formed_conditions_and_counters(
    trainer: Trainer, namespace: str
) -> None:
    created = trainer.create(trainjob("status", status={"conditions": []}), namespace)
    assert "status" not in created  # status on create is ignored with a status subresource
    created["status"] = {
        "conditions": [condition("Complete", "AllJobsCompleted", "jobset completed successfully")],
        "jobsStatus": [
            {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
        ],
    }
    written = trainer.replace_status(created)
    assert written["status"]["jobsStatus"][0]["succeeded"] == 1
    bad = copy.deepcopy(written)
    bad["status"]["jobsStatus"] = [{"name": "node", "succeeded": 1}]
    expect_invalid(lambda: trainer.replace_status(bad), "status.jobsStatus[0].ready", "Required value")
    bad = copy.deepcopy(written)
    bad["status"]["conditions"] = [{"type": "Complete", "status": "Maybe"}]
    expect_invalid(lambda: trainer.replace_status(bad), "status.conditions[0]")


def test_trainer_status_needs_last_updated_time_and_a_percentage(trainer: Trainer, namespace: str) -> None:
    created = trainer.create(trainjob("progress"), namespace)
    created["status"] = {"trainerStatus": {"progressPercentage": 50}}
    expect_invalid(
        lambda: trainer.replace_status(created), "lastUpdatedTime is required when trainerStatus is present"
    )
    created["status"] = {
        "trainerStatus": {"progressPercentage": 150, "lastUpdatedTime": "2026-01-01T00:00:00Z"}
    }
    expect_invalid(lambda: trainer.replace_status(created), "progressPercentage")
    metrics = [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}]
    created["status"] = {
        "trainerStatus": {
            "progressPercentage": 42,
            "metrics": metrics,
            "lastUpdatedTime": "2026-01-01T00:00:00Z",
        }
    }
    assert trainer.replace_status(created)["status"]["trainerStatus"]["metrics"] == metrics
