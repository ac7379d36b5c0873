"""CRD acceptance of TrainJob creates against a real kube-apiserver (Tier 1): what the schema and CEL
accept, default and refuse, as upstream's trainjob webhook and markers tests (the CRD half) for upstream
v2.3.0's CRDs. With no webhook installed every rejection is the CRD's: HTTP 422 `Invalid`; what the schema
accepts and the TrainJob validation refuses (counts below one) is checked against both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from runtime.core import RuntimeRegistry
from runtime.framework import Framework, MemoryReader
from runtime.plugins import builtin_registry
from support.crd_acceptance import (
    Trainer,
    expect_invalid,
    patch,
    torch_runtime,
    trainjob,
)

pytest_plugins = ("support.crd_acceptance",)


# -- TrainJobs (upstream: trainjob webhook and markers tests)


def test_a_full_trainjob_is_accepted_and_defaulted(trainer: Trainer, namespace: str) -> None:
    job = trainjob(
        "full",
        suspend=True,
        activeDeadlineSeconds=3600,
        initializer={
            "dataset": {"storageUri": "hf://tatsu-lab/alpaca", "env": [{"name": "TOKEN", "value": "x"}]},
            "model": {"storageUri": "hf://meta-llama/Llama-3.2-1B", "secretRef": {"name": "hf-token"}},
        },
        trainer={
            "image": "docker.io/team/trainer:v1",
            "command": ["torchrun", "train.py"],
            "args": ["--epochs", "2"],
            "env": [{"name": "LR", "value": "0.01"}],
            "numNodes": 2,
            "numProcPerNode": 4,
            "resourcesPerNode": {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 1}},
        },
        runtimePatches=[patch("kueue.x-k8s.io/manager", nodeSelector={"pool": "a100"})],
    )
    created = trainer.create(job, namespace)
    spec = created["spec"]
    # Upstream cases 88-90: schema defaults for absent fields.
    assert spec["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    assert spec["managedBy"] == "trainer.kubeflow.org/trainjob-controller"
    assert spec["suspend"] is True
    assert spec["trainer"]["resourcesPerNode"]["limits"] == {"nvidia.com/gpu": 1}
    assert spec["runtimePatches"][0]["manager"] == "kueue.x-k8s.io/manager"


def test_defaults_apply_only_to_absent_fields(trainer: Trainer, namespace: str) -> None:
    # Upstream cases 87 and 89: suspend defaults to false with multikueue; an explicit kind is kept.
    job = trainjob("kept", managedBy="kueue.x-k8s.io/multikueue")
    job["spec"]["runtimeRef"] = {"name": "custom", "kind": "TrainingRuntime"}
    spec = trainer.create(job, namespace)["spec"]
    assert spec["suspend"] is False
    assert spec["runtimeRef"] == {
        "name": "custom",
        "kind": "TrainingRuntime",
        "apiGroup": "trainer.kubeflow.org",
    }
    assert spec["managedBy"] == "kueue.x-k8s.io/multikueue"


def test_a_trainjob_without_a_runtime_ref_is_invalid(trainer: Trainer, namespace: str) -> None:
    job = trainjob("no-ref")
    del job["spec"]["runtimeRef"]
    expect_invalid(lambda: trainer.create(job, namespace), "spec.runtimeRef", "Required value")


@pytest.mark.parametrize(
    ("trainer_spec", "fragments"),
    [
        ({"image": "x" * 501}, ("spec.trainer.image", "Too long")),
        ({"numNodes": 2**31}, ("spec.trainer.numNodes",)),
    ],
    ids=["image too long", "numNodes beyond int32"],
)
def test_invalid_trainer_values_are_rejected_by_the_schema(
    trainer: Trainer, namespace: str, trainer_spec: dict[str, Any], fragments: tuple[str, ...]
) -> None:
    expect_invalid(
        lambda: trainer.create(trainjob("bad-trainer", trainer=trainer_spec), namespace), *fragments
    )


@pytest.mark.parametrize(
    "trainer_spec",
    [{"numNodes": 0}, {"numNodes": 1, "numProcPerNode": 1}],
    ids=["numNodes 0 is accepted (case 50)", "one node one process (case 53)"],
)
def test_edge_trainer_values_are_accepted(
    trainer: Trainer, namespace: str, trainer_spec: dict[str, Any]
) -> None:
    assert (
        trainer.create(trainjob("edge", trainer=trainer_spec), namespace)["spec"]["trainer"] == trainer_spec
    )


NONSENSE_COUNTS = {
    "numNodes -1 (case 49)": ({"numNodes": -1}, "spec.trainer.numNodes: Invalid value: -1"),
    "numNodes 0": ({"numNodes": 0}, "spec.trainer.numNodes: Invalid value: 0"),
    "numProcPerNode -5 (case 51)": ({"numProcPerNode": -5}, "spec.trainer.numProcPerNode: Invalid value: -5"),
    "numProcPerNode 0 (case 52)": ({"numProcPerNode": 0}, "spec.trainer.numProcPerNode: Invalid value: 0"),
}


@pytest.mark.parametrize(("trainer_spec", "error"), NONSENSE_COUNTS.values(), ids=NONSENSE_COUNTS.keys())
def test_counts_below_one_pass_the_schema_as_upstreams_and_fail_the_trainjob_validation(
    trainer: Trainer,
    namespace: str,
    cluster_names: Callable[[str], str],
    trainer_spec: dict[str, Any],
    error: str,
) -> None:
    # Upstream v2.3.0's CRD has no bound on either count, so the API server stores them (201, no webhook
    # here); the TrainJob webhook's validation, run on the object as stored, refuses them with a field error.
    runtime_name = cluster_names("torch-distributed")
    runtime = trainer.create(torch_runtime("ClusterTrainingRuntime", runtime_name))
    job = trainjob("counts", trainer=trainer_spec)
    job["spec"]["runtimeRef"]["name"] = runtime_name
    stored, status, _ = trainer.create_with_status(job, namespace)
    assert (status, stored["spec"]["trainer"]) == (201, trainer_spec)
    registry = RuntimeRegistry(Framework(builtin_registry()))
    errors = [str(e) for e in registry.validate(None, stored, MemoryReader([runtime])).errors]
    assert errors == [f"{error}: must be greater than or equal to 1"]


STORAGE_URIS = [
    ("dataset", "invalid-uri", False),  # case 62
    ("dataset", "", True),  # case 63
    ("dataset", "s3://", False),  # case 64
    ("dataset", "s3://bucket/path", True),  # case 65
    ("model", "invalid-uri", False),  # case 66
    ("model", "gs://bucket/model", True),  # case 67
]


@pytest.mark.parametrize(("which", "uri", "ok"), STORAGE_URIS, ids=[f"{w} {u!r}" for w, u, _ in STORAGE_URIS])
def test_storage_uri_must_be_empty_or_scheme_and_path(
    trainer: Trainer, namespace: str, which: str, uri: str, ok: bool
) -> None:
    job = trainjob("uri", initializer={which: {"storageUri": uri}})
    if ok:
        assert trainer.create(job, namespace)["spec"]["initializer"][which]["storageUri"] == uri
    else:
        expect_invalid(
            lambda: trainer.create(job, namespace),
            f"spec.initializer.{which}.storageUri",
            "storageUri may be empty, or it must be a valid URI (scheme://...)",
        )


@pytest.mark.parametrize("field", ["command", "args"])
def test_command_and_args_items_may_be_one_mebibyte_and_no_more(
    trainer: Trainer, namespace: str, field: str
) -> None:
    # Upstream cases 68-71.
    limit = 1024 * 1024
    created = trainer.create(trainjob(f"{field}-max", trainer={field: ["x" * limit]}), namespace)
    assert len(created["spec"]["trainer"][field][0]) == limit
    expect_invalid(
        lambda: trainer.create(trainjob(f"{field}-over", trainer={field: ["x" * (limit + 1)]}), namespace),
        f"spec.trainer.{field}[0]",
        "Too long",
    )


@pytest.mark.parametrize(
    "name",
    ["valid-job-name", "a" * 63],
    ids=["a plain DNS label (case 72)", "63 characters (case 73)"],
)
def test_dns_label_names_are_accepted(trainer: Trainer, namespace: str, name: str) -> None:
    assert trainer.create(trainjob(name), namespace)["metadata"]["name"] == name


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("Invalid-Name", "a lowercase RFC 1123 subdomain"),  # case 74 (the API server's own name check)
        ("1-starts-with-digit", "metadata.name must match RFC 1035 DNS label format"),  # case 75
        ("ends-with-hyphen-", "a lowercase RFC 1123 subdomain"),  # case 76
        ("a" * 64, "metadata.name must be no more than 63 characters"),  # case 77
        ("has.a.dot", "metadata.name must match RFC 1035 DNS label format"),
    ],
    ids=["uppercase", "leading digit", "trailing hyphen", "64 characters", "dotted subdomain"],
)
def test_names_that_are_not_dns_labels_are_invalid(
    trainer: Trainer, namespace: str, name: str, fragment: str
) -> None:
    expect_invalid(lambda: trainer.create(trainjob(name), namespace), fragment)


@pytest.mark.parametrize(
    "managed_by",
    ["trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue"],
    ids=["trainjob controller (case 78)", "multikueue (case 79)"],
)
def test_managed_by_accepts_the_two_known_managers(trainer: Trainer, namespace: str, managed_by: str) -> None:
    assert (
        trainer.create(trainjob("managed", managedBy=managed_by), namespace)["spec"]["managedBy"]
        == managed_by
    )


def test_managed_by_refuses_anything_else(trainer: Trainer, namespace: str) -> None:
    # Upstream case 80.
    expect_invalid(
        lambda: trainer.create(trainjob("managed", managedBy="invalid"), namespace),
        "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set",
    )


def test_two_managers_may_each_patch_the_runtime(trainer: Trainer, namespace: str) -> None:
    # Upstream case 81; the domain-prefix check on `manager` (case 83) is the webhook's, not the schema's.
    patches = [
        patch("acme.io/manager-one", serviceAccountName="sa-one"),
        patch("acme.io/manager-two", serviceAccountName="sa-two"),
    ]
    created = trainer.create(trainjob("two-patches", runtimePatches=patches), namespace)
    assert [p["manager"] for p in created["spec"]["runtimePatches"]] == [
        "acme.io/manager-one",
        "acme.io/manager-two",
    ]


def test_duplicate_patch_managers_are_invalid(trainer: Trainer, namespace: str) -> None:
    patches = [patch("acme.io/same", nodeSelector={"a": "1"}), patch("acme.io/same", nodeSelector={"b": "2"})]
    expect_invalid(
        lambda: trainer.create(trainjob("dup", runtimePatches=patches), namespace), "Duplicate value"
    )


@pytest.mark.parametrize(("seconds", "ok"), [(300, True), (-1, False), (0, True)], ids=["300", "-1", "0"])
def test_termination_grace_period_in_a_patch_must_not_be_negative(
    trainer: Trainer, namespace: str, seconds: int, ok: bool
) -> None:
    # Upstream cases 84-86.
    job = trainjob("grace", runtimePatches=[patch("acme.io/grace", terminationGracePeriodSeconds=seconds)])
    if ok:
        trainer.create(job, namespace)
    else:
        expect_invalid(lambda: trainer.create(job, namespace), "terminationGracePeriodSeconds")


def test_active_deadline_must_be_positive(trainer: Trainer, namespace: str) -> None:
    expect_invalid(
        lambda: trainer.create(trainjob("deadline", activeDeadlineSeconds=0), namespace),
        "spec.activeDeadlineSeconds",
    )


def test_too_many_patches_are_invalid(trainer: Trainer, namespace: str) -> None:
    patches = [patch(f"acme.io/m{i}") for i in range(17)]
    expect_invalid(lambda: trainer.create(trainjob("many", runtimePatches=patches), namespace), "Too many")
