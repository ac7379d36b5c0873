"""The (Cluster)TrainingRuntime admission webhooks against a real kube-apiserver: upstream's scenarios
(`test/integration/webhooks/*`, numbered in the order of upstream's suite) for runtimes, and the label that
turns the runtime webhooks off.

As upstream's suite, no controller runs: a manager with only its cache and the webhook server, on 127.0.0.1
with a throwaway CA, registered with URL-based Mutating/ValidatingWebhookConfigurations shaped as upstream's
manifests (`support.trainer_webhooks`). The 403/422 split is asserted everywhere: the CRD schema and CEL
rules answer 422 Invalid, the webhooks 403 Forbidden.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.client.client import Client
from runtime.api import constants
from support.trainer_webhooks import (
    CLUSTER_TRAINING_RUNTIME,
    OK,
    USER,
    Webhooks,
    _bad_cluster_runtime,
    default_runtime,
    error_message,
    make,
    outcome,
    replicated_jobs,
)

pytestmark = pytest.mark.allow_thread_leaks
pytest_plugins = ("support.trainer_webhooks",)


# --- ClusterTrainingRuntime and TrainingRuntime webhooks -------------------------------------------------


def test_32_a_valid_cluster_training_runtime_is_created(
    webhooks: Webhooks, client: Client, namespace: str
) -> None:
    name = f"ctr-{namespace}"
    assert outcome(lambda: client.create(default_runtime(None, name), field_manager=USER)) == OK
    client.delete(CLUSTER_TRAINING_RUNTIME, name)


def test_33_a_valid_training_runtime_is_created(webhooks: Webhooks, client: Client, namespace: str) -> None:
    assert outcome(lambda: client.create(default_runtime(namespace, "runtime"), field_manager=USER)) == OK


ML_POLICY_PAIRS = {
    "34-mpi-torch": {"mpi": {}, "torch": {}},
    "35-jax-torch": {"jax": {}, "torch": {}},
    "36-torch-flux": {"torch": {}, "flux": {}},
    "37-mpi-flux": {"mpi": {}, "flux": {}},
    "38-jax-flux": {"jax": {}, "flux": {}},
    "39-jax-mpi": {"jax": {}, "mpi": {}},
    "40-all-four": {"torch": {}, "mpi": {}, "jax": {}, "flux": {}},
}


@pytest.mark.parametrize("ml_policy", list(ML_POLICY_PAIRS.values()), ids=list(ML_POLICY_PAIRS))
def test_34_to_40_two_ml_policies_are_invalid_by_the_schema(
    webhooks: Webhooks, client: Client, namespace: str, ml_policy: dict[str, Any]
) -> None:
    runtime = default_runtime(namespace, "runtime", ml_policy=None)
    runtime["spec"]["mlPolicy"] = ml_policy
    assert outcome(lambda: client.create(runtime, field_manager=USER)) == 422


def test_41_an_unknown_mpi_implementation_is_invalid(
    webhooks: Webhooks, client: Client, namespace: str
) -> None:
    runtime = default_runtime(namespace, "runtime")
    runtime["spec"]["mlPolicy"] = {"mpi": {"mpiImplementation": "invalid"}}
    assert outcome(lambda: client.create(runtime, field_manager=USER)) == 422


def test_42_mpi_num_proc_per_node_0_is_admitted_as_upstream_v2_3_0(
    webhooks: Webhooks, client: Client, namespace: str
) -> None:
    # The newer upstream branch has a CEL rule (422); v2.3.0's CRD, which ours equals, has none, and the
    # runtime webhook does not look at mlPolicy: the runtime is admitted (docs/compatibility.md).
    runtime = default_runtime(namespace, "runtime")
    runtime["spec"]["mlPolicy"] = {"mpi": {"numProcPerNode": 0}}
    assert outcome(lambda: client.create(runtime, field_manager=USER)) == OK


@pytest.mark.parametrize(
    ("omitted", "default"),
    [
        ("mpiImplementation", "OpenMPI"),
        ("sshAuthMountPath", "/root/.ssh"),
        ("runLauncherAsNode", False),
        ("numProcPerNode", 1),
    ],
    ids=[
        "43-mpi-implementation",
        "44-ssh-auth-mount-path",
        "45-run-launcher-as-node",
        "46-num-proc-per-node",
    ],
)
def test_43_to_46_mpi_fields_are_defaulted_on_create(
    webhooks: Webhooks, client: Client, namespace: str, omitted: str, default: Any
) -> None:
    mpi: dict[str, Any] = {
        "mpiImplementation": "OpenMPI",
        "sshAuthMountPath": "/usr/dir",
        "runLauncherAsNode": False,
        "numProcPerNode": 1,
    }
    del mpi[omitted]
    runtime = default_runtime(namespace, "runtime")
    runtime["spec"]["mlPolicy"] = {"mpi": mpi}
    created = client.create(runtime, field_manager=USER)
    assert created["spec"]["mlPolicy"]["mpi"][omitted] == default


def test_a_cluster_training_runtime_breaking_the_replicated_job_rules_is_forbidden(
    webhooks: Webhooks, client: Client, namespace: str
) -> None:
    name = f"bad-{namespace}"
    message = error_message(lambda: client.create(_bad_cluster_runtime(name), field_manager=USER))
    assert message == (
        'admission webhook "validator.clustertrainingruntime.trainer.kubeflow.org" denied the request: '
        "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers: Invalid value: "
        '[{"name":"main"}]: must contain the required container for the ancestor: trainer'
    )
    job = make.job("node", ancestor="trainer", containers=[make.container("node")], replicas=2)
    twice = make.runtime(make.runtime_spec(job), name=name, kind=constants.CLUSTER_TRAINING_RUNTIME_KIND)
    assert (
        "spec.template.spec.replicatedJobs[0].replicas: Invalid value: 2: always must be 1"
        in error_message(lambda: client.create(twice, field_manager=USER))
    )


def test_a_cluster_training_runtime_update_is_checked_but_a_training_runtime_update_is_not(
    webhooks: Webhooks, client: Client, namespace: str
) -> None:
    name = f"ctr-{namespace}"
    cluster = client.create(default_runtime(None, name), field_manager=USER)
    try:
        replicated_jobs(cluster)[2]["replicas"] = 3
        assert outcome(lambda: client.update(cluster, field_manager=USER)) == 403
    finally:
        client.delete(CLUSTER_TRAINING_RUNTIME, name)
    namespaced = client.create(default_runtime(namespace, "runtime"), field_manager=USER)
    replicated_jobs(namespaced)[2]["replicas"] = 3
    assert outcome(lambda: client.update(namespaced, field_manager=USER)) == OK  # upstream: CREATE only


def test_the_webhook_validation_disabled_label_skips_the_runtime_webhooks(
    webhooks: Webhooks, client: Client, namespace: str
) -> None:
    runtime = make.runtime(
        make.runtime_spec(make.job("node", ancestor="trainer", containers=[make.container("main")])),
        name="unchecked",
        namespace=namespace,
        labels={constants.LABEL_WEBHOOK_VALIDATION: constants.WEBHOOK_VALIDATION_DISABLED},
    )
    assert outcome(lambda: client.create(runtime, field_manager=USER)) == OK
