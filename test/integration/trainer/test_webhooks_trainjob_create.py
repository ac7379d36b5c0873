"""The TrainJob admission webhooks on create, against a real kube-apiserver: upstream's scenarios
(`test/integration/webhooks/*`, numbered in the order of upstream's suite) for runtime references,
initializers, counts, framework rules, storage URIs, command lengths and names.

As upstream's suite, no controller runs (`support.trainer_webhooks`); the CRD schema and CEL rules answer 422
Invalid, the webhooks 403 Forbidden. Upstream v2.3.0's CRDs have no minimum on `spec.trainer.numNodes` and
no CEL rule on `numProcPerNode`, so #49, #51, #52 and #60 are refused here by the TrainJob webhook (403), not
by the schema (422) as in the newer upstream branch the scenarios were written for; #50 (`numNodes: 0`) is
refused too (docs/compatibility.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.client.client import Client
from support.trainer_webhooks import (
    OK,
    USER,
    Runtimes,
    Webhooks,
    error_message,
    outcome,
    replicated_jobs,
    trainjob,
    update_runtime,
)

pytestmark = pytest.mark.allow_thread_leaks
pytest_plugins = ("support.trainer_webhooks",)


# --- TrainJob webhook: creation --------------------------------------------------------------------------


def test_47_a_trainjob_on_a_namespaced_runtime_is_created(runtimes: Runtimes, client: Client) -> None:
    assert outcome(lambda: client.create(trainjob(runtimes.namespace), field_manager=USER)) == OK


def test_48_a_trainjob_on_a_missing_runtime_is_forbidden(runtimes: Runtimes, client: Client) -> None:
    message = error_message(
        lambda: client.create(trainjob(runtimes.namespace, runtime="invalid"), field_manager=USER)
    )
    assert message.startswith(
        'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: spec.runtimeRef: '
        "Invalid value: "
    )
    assert message.endswith(
        'trainingruntimes.trainer.kubeflow.org "invalid" not found: specified trainingRuntime must be '
        "created before the TrainJob is created"
    )


COUNTS = {
    # number: (trainer, expected)
    "49-num-nodes-minus-1": ({"numNodes": -1}, 403),  # 422 on the newer branch's CRD; v2.3.0's has no minimum
    "50-num-nodes-0": ({"numNodes": 0}, 403),  # upstream admits it and builds 0-pod jobs
    "51-num-proc-per-node-minus-5": ({"numProcPerNode": -5}, 403),
    "52-num-proc-per-node-0": ({"numProcPerNode": 0}, 403),
    "53-one-node-one-proc": ({"numNodes": 1, "numProcPerNode": 1}, OK),
}


@pytest.mark.parametrize(("trainer", "expected"), list(COUNTS.values()), ids=list(COUNTS))
def test_49_to_53_node_and_process_counts(
    runtimes: Runtimes, client: Client, trainer: dict[str, Any], expected: str | int
) -> None:
    assert (
        outcome(lambda: client.create(trainjob(runtimes.namespace, trainer=trainer), field_manager=USER))
        == expected
    )


def test_49_the_count_rejection_names_the_field(runtimes: Runtimes, client: Client) -> None:
    job = trainjob(runtimes.namespace, trainer={"numNodes": -1})
    assert error_message(lambda: client.create(job, field_manager=USER)).endswith(
        "denied the request: spec.trainer.numNodes: Invalid value: -1: must be greater than or equal to 1"
    )


def test_54_a_trainjob_on_a_cluster_training_runtime_is_created(runtimes: Runtimes, client: Client) -> None:
    job = trainjob(runtimes.namespace, runtime=runtimes.cluster_name, kind="ClusterTrainingRuntime")
    assert outcome(lambda: client.create(job, field_manager=USER)) == OK


@pytest.mark.parametrize(
    ("index", "step", "initializer"),
    [(1, "model-initializer", "model"), (0, "dataset-initializer", "dataset")],
    ids=["55-model-initializer", "56-dataset-initializer"],
)
def test_55_56_an_initializer_the_runtime_cannot_run_is_forbidden(
    runtimes: Runtimes, webhooks: Webhooks, client: Client, *, index: int, step: str, initializer: str
) -> None:
    def drop_container(runtime: dict[str, Any]) -> None:
        pod = replicated_jobs(runtime)[index]["template"]["spec"]["template"]["spec"]
        pod["containers"] = [c for c in pod["containers"] if c["name"] != step]

    update_runtime(client, webhooks, runtimes.namespace, drop_container)
    job = trainjob(runtimes.namespace, initializer={initializer: {"storageUri": "hf://trainjob-model"}})
    assert outcome(lambda: client.create(job, field_manager=USER)) == 403


def test_57_a_dataset_initializer_on_a_cluster_runtime_that_has_it_is_created(
    runtimes: Runtimes, client: Client
) -> None:
    job = trainjob(
        runtimes.namespace,
        runtime=runtimes.cluster_name,
        kind="ClusterTrainingRuntime",
        initializer={"dataset": {"storageUri": "hf://trainjob-model"}},
    )
    assert outcome(lambda: client.create(job, field_manager=USER)) == OK


def _torch(runtime: dict[str, Any]) -> None:
    runtime["spec"]["mlPolicy"] = {"torch": {}}


def test_58_a_torch_trainjob_with_4_processes_per_node_is_created(
    runtimes: Runtimes, webhooks: Webhooks, client: Client
) -> None:
    update_runtime(client, webhooks, runtimes.namespace, _torch)
    job = trainjob(runtimes.namespace, trainer={"numProcPerNode": 4})
    assert outcome(lambda: client.create(job, field_manager=USER)) == OK


def test_59_a_reserved_torch_env_is_forbidden(runtimes: Runtimes, webhooks: Webhooks, client: Client) -> None:
    update_runtime(client, webhooks, runtimes.namespace, _torch)
    job = trainjob(runtimes.namespace, trainer={"env": [{"name": "PET_NODE_RANK", "value": "1"}]})
    assert outcome(lambda: client.create(job, field_manager=USER)) == 403


def _flux(runtime: dict[str, Any]) -> None:
    runtime["spec"]["mlPolicy"] = {"flux": {}}


def test_60_flux_with_0_processes_per_node_is_forbidden(
    runtimes: Runtimes, webhooks: Webhooks, client: Client
) -> None:
    # v2.3.0: Forbidden, as here (the newer branch's CEL rule makes it 422).
    update_runtime(client, webhooks, runtimes.namespace, _flux)
    job = trainjob(runtimes.namespace, trainer={"numProcPerNode": 0})
    assert outcome(lambda: client.create(job, field_manager=USER)) == 403


def test_61_a_runtime_with_the_reserved_flux_installer_init_container_is_forbidden(
    runtimes: Runtimes, webhooks: Webhooks, client: Client
) -> None:
    def flux_with_installer(runtime: dict[str, Any]) -> None:
        _flux(runtime)
        pod = replicated_jobs(runtime)[2]["template"]["spec"]["template"]["spec"]
        pod["initContainers"] = [{"name": "flux-installer", "image": "ubuntu:22.04"}]

    update_runtime(client, webhooks, runtimes.namespace, flux_with_installer)
    assert outcome(lambda: client.create(trainjob(runtimes.namespace), field_manager=USER)) == 403


STORAGE_URIS = {
    "62-dataset-invalid-uri": ("dataset", "invalid-uri", 422),
    "63-dataset-empty": ("dataset", "", OK),
    "64-dataset-missing-path": ("dataset", "s3://", 422),
    "65-dataset-valid": ("dataset", "s3://bucket/path", OK),
    "66-model-invalid-uri": ("model", "invalid-uri", 422),
    "67-model-valid": ("model", "gs://bucket/model", OK),
}


@pytest.mark.parametrize(
    ("initializer", "uri", "expected"), list(STORAGE_URIS.values()), ids=list(STORAGE_URIS)
)
def test_62_to_67_storage_uris(
    runtimes: Runtimes, client: Client, initializer: str, uri: str, expected: str | int
) -> None:
    job = trainjob(
        runtimes.namespace,
        runtime=runtimes.cluster_name,
        kind="ClusterTrainingRuntime",
        initializer={initializer: {"storageUri": uri}},
    )
    assert outcome(lambda: client.create(job, field_manager=USER)) == expected


MAX_ITEM = 1048576
LENGTHS = {
    "68-command-at-max": ("command", MAX_ITEM, OK),
    "69-command-over-max": ("command", MAX_ITEM + 1, 422),
    "70-args-at-max": ("args", MAX_ITEM, OK),
    "71-args-over-max": ("args", MAX_ITEM + 1, 422),
}


@pytest.mark.parametrize(("field", "length", "expected"), list(LENGTHS.values()), ids=list(LENGTHS))
def test_68_to_71_command_and_args_item_lengths(
    runtimes: Runtimes, client: Client, field: str, length: int, expected: str | int
) -> None:
    job = trainjob(
        runtimes.namespace,
        runtime=runtimes.cluster_name,
        kind="ClusterTrainingRuntime",
        trainer={field: ["a" * length]},
    )
    assert outcome(lambda: client.create(job, field_manager=USER)) == expected


NAMES = {
    "72-valid": ("valid-job-name", OK),
    "73-63-characters": ("abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk", OK),
    "74-uppercase": ("Invalid-job-name", 422),
    "75-leading-digit": ("1jobname", 422),
    "76-trailing-hyphen": ("jobname-", 422),
    "77-over-63-characters": (
        "this-name-is-way-too-long-for-a-rfc1035-label-and-should-fail-validation",
        422,
    ),
}


@pytest.mark.parametrize(("name", "expected"), list(NAMES.values()), ids=list(NAMES))
def test_72_to_77_trainjob_names(runtimes: Runtimes, client: Client, name: str, expected: str | int) -> None:
    job = trainjob(runtimes.namespace, name, runtime=runtimes.cluster_name, kind="ClusterTrainingRuntime")
    assert outcome(lambda: client.create(job, field_manager=USER)) == expected
