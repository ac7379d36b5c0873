"""The default ClusterTrainingRuntimes, as the Kubeflow Python SDK reads them.

The SDK lists and gets runtimes through `TrainerV1alpha1ClusterTrainingRuntime(List).from_dict`, requires the
`trainer.kubeflow.org/framework` label, `spec.mlPolicy` and `spec.template.spec.replicatedJobs`, and takes
the first `node` container of an ancestor-labelled replicated job as the trainer.
Every runtime of `config/runtimes/` is checked as the SDK receives it from kube-apiserver: schema defaults
applied and server metadata added.

Mirrored from the SDK's `kubeflow/trainer/backends/kubernetes/backend_test.py`: `test_get_runtime` ("valid
flow with all defaults": 1 GPU per node x 2 nodes gives device count "2") and `test_list_runtimes` (runtimes
without the framework label are skipped).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kubeflow_trainer_api import models
from pydantic import ValidationError

if TYPE_CHECKING:
    from conftest import SdkRules, Wire
    from runtime.render import Document, SchemaChecker

ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Expected:
    framework: str
    trainer_type: str
    entrypoint: str
    trainer_job: str
    device: str = "Unknown"
    device_count: str = "Unknown"


_TORCHTUNE = Expected("torchtune", "BuiltinTrainer", "tune run", "node", device="gpu", device_count="2.0")
_MPI = {
    "trainer_type": "CustomTrainer",
    "entrypoint": "mpirun",
    "trainer_job": "launcher",
    "device_count": "1",
}

EXPECTED = {
    "torch-distributed": Expected("torch", "CustomTrainer", "torchrun", "node"),
    "deepspeed-distributed": Expected("deepspeed", **_MPI),
    "mlx-distributed": Expected("mlx", **_MPI),
    "jax-distributed": Expected("jax", "CustomTrainer", "python", "node"),
    "xgboost-distributed": Expected("xgboost", "CustomTrainer", "python", "node"),
    # The SDK's Quantity model turns the runtime's integer `nvidia.com/gpu: 2` into 2.0, so it shows "2.0"
    # and does not multiply by numNodes: the same as with upstream's runtimes, which spell it the same way.
    "torchtune-llama3.2-1b": _TORCHTUNE,
    "torchtune-llama3.2-3b": _TORCHTUNE,
    "torchtune-qwen2.5-1.5b": _TORCHTUNE,
}
NAMES = sorted(EXPECTED)

# What kube-apiserver adds to every object it returns (the SDK parses all of it).
SERVER_METADATA = {
    "uid": "6d0b5b5e-2f43-4b7b-9d77-8f0c3c4a1e21",
    "resourceVersion": "4242",
    "generation": 1,
    "creationTimestamp": "2026-01-02T03:04:05Z",
    "managedFields": [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:trainer.kubeflow.org/framework": {}}}},
            "manager": "kubectl",
            "operation": "Apply",
            "time": "2026-01-02T03:04:05Z",
        }
    ],
}


@pytest.fixture(scope="module")
def served(runtime_documents: list[Document], schemas: SchemaChecker) -> dict[str, dict[str, Any]]:
    """Each default runtime as kube-apiserver returns it: schema-checked, defaulted, with server metadata."""
    out = {}
    for document in runtime_documents:
        obj, errors = schemas.check(document.obj)
        assert errors == [], f"{document.describe()}: {errors}"
        obj["metadata"].update(copy.deepcopy(SERVER_METADATA))
        out[document.name] = obj
    return out


def _model(obj: dict[str, Any], wire: Wire) -> models.TrainerV1alpha1ClusterTrainingRuntime:
    parsed = models.TrainerV1alpha1ClusterTrainingRuntime.from_dict(wire.sent(obj))
    assert parsed is not None
    return parsed


def test_every_default_runtime_has_an_expectation(runtime_documents: list[Document]) -> None:
    kustomization = yaml.safe_load((ROOT / "config" / "runtimes" / "kustomization.yaml").read_text())
    assert sorted(d.name for d in runtime_documents) == NAMES
    assert sorted(Path(p).stem for p in kustomization["resources"]) == NAMES
    assert {d.kind for d in runtime_documents} == {"ClusterTrainingRuntime"}


@pytest.mark.parametrize("name", NAMES)
def test_the_runtime_parses_with_the_sdk_model_and_round_trips_without_losing_fields(
    name: str, served: dict[str, dict[str, Any]], wire: Wire
) -> None:
    obj = wire.sent(served[name])
    assert wire.losses(models.TrainerV1alpha1ClusterTrainingRuntime, obj) == []
    runtime = _model(obj, wire)
    assert runtime.metadata is not None and runtime.metadata.name == name
    assert runtime.spec is not None and runtime.spec.ml_policy is not None
    assert runtime.spec.template.spec is not None and runtime.spec.template.spec.replicated_jobs


@pytest.mark.parametrize("name", NAMES)
def test_the_sdk_finds_the_framework_the_trainer_container_and_the_devices(
    name: str, served: dict[str, dict[str, Any]], sdk: SdkRules, wire: Wire
) -> None:
    trainer = sdk.runtime_trainer(_model(served[name], wire))
    expected = EXPECTED[name]
    assert (trainer.framework, trainer.trainer_type, trainer.entrypoint, trainer.trainer_job) == (
        expected.framework,
        expected.trainer_type,
        expected.entrypoint,
        expected.trainer_job,
    )
    assert (trainer.device, trainer.device_count, trainer.num_nodes) == (
        expected.device,
        expected.device_count,
        1,
    )
    assert trainer.image  # the trainer container has an image, or the SDK refuses the runtime
    containers = served[name]["spec"]["template"]["spec"]["replicatedJobs"]
    images = {
        c["image"]
        for job in containers
        if job["name"] == expected.trainer_job
        for c in job["template"]["spec"]["template"]["spec"]["containers"]
        if c["name"] == "node"
    }
    assert images == {trainer.image}


def test_torchtune_runtimes_are_builtin_trainers_and_the_others_custom_trainers(
    served: dict[str, dict[str, Any]], sdk: SdkRules, wire: Wire
) -> None:
    kinds = {name: sdk.runtime_trainer(_model(obj, wire)).trainer_type for name, obj in served.items()}
    assert {name for name, kind in kinds.items() if kind == "BuiltinTrainer"} == {
        "torchtune-llama3.2-1b",
        "torchtune-llama3.2-3b",
        "torchtune-qwen2.5-1.5b",
    }


def test_list_runtimes_parses_the_list_and_skips_none_of_the_defaults(
    served: dict[str, dict[str, Any]], sdk: SdkRules, wire: Wire
) -> None:
    # SDK backend_test.py test_list_runtimes: the list is parsed whole; unlabelled runtimes are skipped.
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntimeList",
        "metadata": {"resourceVersion": "4242"},
        "items": [served[name] for name in NAMES],
    }
    listed = models.TrainerV1alpha1ClusterTrainingRuntimeList.from_dict(wire.sent(body))
    assert listed is not None
    assert sdk.listed(listed.items) == NAMES
    unlabelled = copy.deepcopy(served["torch-distributed"])
    del unlabelled["metadata"]["labels"]["trainer.kubeflow.org/framework"]
    assert sdk.listed([_model(unlabelled, wire)]) == []
    with pytest.raises(sdk.Rejected, match=r"must have trainer\.kubeflow\.org/framework label"):
        sdk.runtime_trainer(_model(unlabelled, wire))


def test_the_sdk_rules_match_the_sdks_own_get_runtime_case(
    served: dict[str, dict[str, Any]], sdk: SdkRules, wire: Wire
) -> None:
    # SDK backend_test.py test_get_runtime "valid flow with all defaults": torch policy, numNodes 2, a `node`
    # container limited to 1 GPU and 4Gi → CustomTrainer, torchrun, device "gpu", count "2", 2 nodes.
    runtime = copy.deepcopy(served["torch-distributed"])
    runtime["spec"]["mlPolicy"]["numNodes"] = 2
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    node["containers"][0]["resources"] = {
        "requests": {"nvidia.com/gpu": "1", "memory": "2Gi"},
        "limits": {"nvidia.com/gpu": "1", "memory": "4Gi"},
    }
    trainer = sdk.runtime_trainer(_model(runtime, wire))
    assert (trainer.trainer_type, trainer.entrypoint, trainer.device, trainer.device_count) == (
        "CustomTrainer",
        "torchrun",
        "gpu",
        "2",
    )
    assert trainer.num_nodes == 2


def test_a_runtime_without_an_ancestor_labelled_node_container_is_refused_by_the_sdk(
    served: dict[str, dict[str, Any]], sdk: SdkRules, wire: Wire
) -> None:
    # The check the defaults pass can fail: drop the ancestor label and the SDK finds no trainer.
    runtime = copy.deepcopy(served["torch-distributed"])
    del runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["metadata"]
    with pytest.raises(sdk.Rejected, match="doesn't have trainer container"):
        sdk.runtime_trainer(_model(runtime, wire))
    # An initializer job carrying the label is skipped, not taken: it has no `node` container.
    tune = sdk.runtime_trainer(_model(served["torchtune-llama3.2-1b"], wire))
    assert tune.trainer_job == "node"


def test_the_sdk_models_are_strict_about_types_and_required_fields(
    served: dict[str, dict[str, Any]], wire: Wire
) -> None:
    # from_dict is a real check, not a formality: a string where the model wants an integer, or a
    # replicated job without its template, is refused. (It is lenient elsewhere: a missing container
    # `name` becomes "", as the OpenAPI default says.)
    runtime = copy.deepcopy(served["torch-distributed"])
    runtime["spec"]["mlPolicy"]["numNodes"] = "1"
    with pytest.raises(ValidationError):
        models.TrainerV1alpha1ClusterTrainingRuntime.from_dict(wire.sent(runtime))
    runtime = copy.deepcopy(served["torch-distributed"])
    del runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]
    with pytest.raises(ValidationError):
        models.TrainerV1alpha1ClusterTrainingRuntime.from_dict(wire.sent(runtime))


def test_a_field_the_sdk_models_do_not_know_is_reported_lost(
    served: dict[str, dict[str, Any]], wire: Wire
) -> None:
    # The round-trip check can fail: the models drop unknown fields silently.
    runtime = copy.deepcopy(served["torch-distributed"])
    runtime["spec"]["mlPolicy"]["torch"]["futureKnob"] = True
    assert wire.losses(models.TrainerV1alpha1ClusterTrainingRuntime, runtime) == [
        "spec.mlPolicy.torch.futureKnob=True"
    ]
