"""The Trainer's admission webhooks against a real kube-apiserver: upstream's scenarios
(`test/integration/webhooks/*`, numbered in the order of upstream's suite), and this port's decisions: an
update after the runtime was deleted, and user edits of a runtime patch's `time` (docs/webhooks.md).

As upstream's suite, no controller runs: a manager with only its cache and the webhook server, on 127.0.0.1
with a throwaway CA, registered with URL-based Mutating/ValidatingWebhookConfigurations shaped as upstream's
manifests (names, rules, object selectors, failurePolicy Fail). The 403/422 split is asserted everywhere: the
CRD schema and CEL rules answer 422 Invalid, the webhooks 403 Forbidden.

Upstream v2.3.0's CRDs have no minimum on `spec.trainer.numNodes` and no CEL rule on `numProcPerNode`, so
#49, #51, #52 and #60 are refused here by the TrainJob webhook (403), not by the schema (422) as the newer
upstream branch the scenario list was written from; #50 (`numNodes: 0`) is refused too
(docs/compatibility.md).
"""

from __future__ import annotations

import base64
import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controller import envtest, metrics
from controller.client import Client
from controller.envtest import ControlPlane
from controller.envtest.certs import CertificateAuthority
from controller.errors import ApiError, Forbidden, Invalid, NotFound
from controller.gvk import GVK
from controller.manager import Manager, ManagerOptions
from controller.trainer.config import Configuration
from controller.trainer.setup import cache_by_object, new_registry
from controller.trainer.webhooks import (
    CLUSTER_TRAINING_RUNTIME_VALIDATOR_PATH,
    TRAINING_RUNTIME_VALIDATOR_PATH,
    TRAINJOB_DEFAULTER_PATH,
    TRAINJOB_VALIDATOR_PATH,
    setup_webhooks,
)
from controller.webhook import WebhookServer
from runtime.api import constants
from runtime.core.snapshot import build_snapshot
from runtime.testing import Make

pytestmark = pytest.mark.allow_thread_leaks

TRAINJOB = GVK("trainer.kubeflow.org", "v1alpha1", "TrainJob")
TRAINING_RUNTIME = GVK("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime")
CLUSTER_TRAINING_RUNTIME = GVK("trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime")
CONFIGMAP = GVK("", "v1", "ConfigMap")
MUTATING = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")
VALIDATING = GVK("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")
USER = "integration-test"
RUNTIME = "training-runtime"
OK = "ok"

make = Make()


# --- the webhook server and its registration -------------------------------------------------------------


@dataclass
class Webhooks:
    manager: Manager
    server: WebhookServer


def _webhook(
    name: str, path: str, url_base: str, ca_bundle: str, resource: str, **extra: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"url": f"{url_base}{path}", "caBundle": ca_bundle},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "timeoutSeconds": 10,
        "rules": [
            {
                "apiGroups": ["trainer.kubeflow.org"],
                "apiVersions": ["v1alpha1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": [resource],
            }
        ],
        **extra,
    }


def _configurations(url_base: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """Upstream's manifests/base/webhook after its kustomize patches, with a URL instead of a Service."""
    bundle = base64.b64encode(ca_pem).decode()
    selector = {
        "objectSelector": {
            "matchExpressions": [
                {"key": constants.LABEL_WEBHOOK_VALIDATION, "operator": "NotIn", "values": ["disabled"]}
            ]
        }
    }
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "defaulter.trainer.kubeflow.org"},
        "webhooks": [
            _webhook(
                "defaulter.trainjob.trainer.kubeflow.org",
                TRAINJOB_DEFAULTER_PATH,
                url_base,
                bundle,
                "trainjobs",
            )
        ],
    }
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "validator.trainer.kubeflow.org"},
        "webhooks": [
            _webhook(
                "validator.clustertrainingruntime.trainer.kubeflow.org",
                CLUSTER_TRAINING_RUNTIME_VALIDATOR_PATH,
                url_base,
                bundle,
                "clustertrainingruntimes",
                **selector,
            ),
            _webhook(
                "validator.trainingruntime.trainer.kubeflow.org",
                TRAINING_RUNTIME_VALIDATOR_PATH,
                url_base,
                bundle,
                "trainingruntimes",
                **selector,
            ),
            _webhook(
                "validator.trainjob.trainer.kubeflow.org",
                TRAINJOB_VALIDATOR_PATH,
                url_base,
                bundle,
                "trainjobs",
            ),
        ],
    }
    return [mutating, validating]


def _bad_cluster_runtime(name: str) -> dict[str, Any]:
    job = make.job("node", ancestor="trainer", containers=[make.container("main")])
    return make.runtime(make.runtime_spec(job), name=name, kind=constants.CLUSTER_TRAINING_RUNTIME_KIND)


@pytest.fixture(scope="module")
def client(kubeconfig: Path) -> Iterator[Client]:
    c = Client.load(str(kubeconfig), user_agent=USER)
    yield c
    c.close()


@pytest.fixture(scope="module")
def webhooks(
    control_plane: ControlPlane,
    client: Client,
    service_account_kubeconfig: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Webhooks]:
    cert_dir = tmp_path_factory.mktemp("serving-certs")
    ca = CertificateAuthority.new("webhook-test-ca")
    ca.issue_serving(["127.0.0.1"]).write(cert_dir, "tls.crt", "tls.key")
    registry = new_registry()
    options = ManagerOptions(
        health_probe_bind_address="127.0.0.1:0", metrics_bind_address="0", by_object=cache_by_object(registry)
    )
    # As the manager's ServiceAccount with the shipped RBAC: the webhooks read runtimes and snapshots with it.
    manager = Manager.from_kubeconfig(
        str(service_account_kubeconfig), options=options, user_agent="trainer-webhooks"
    )
    server = setup_webhooks(manager, registry, Configuration(), bind_address="127.0.0.1:0", cert_dir=cert_dir)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            manager.run()
        except BaseException as exc:
            failures.append(exc)

    runner = threading.Thread(target=run, name="test/webhook-manager")
    runner.start()
    created: list[dict[str, Any]] = []
    try:
        check = server.started_checker()

        def serving() -> None:
            assert not failures, failures
            try:
                check()
            except RuntimeError as exc:
                raise AssertionError(str(exc)) from exc

        _eventually(serving, timeout=60)
        host, port = server.address
        for configuration in _configurations(f"https://{host}:{port}", ca.cert_pem):
            created.append(client.create(configuration, field_manager=USER))

        # The API server picks the configurations up asynchronously: wait until a dry-run create is refused.
        probe = _bad_cluster_runtime("webhook-probe")

        def registered() -> None:
            answer = control_plane.admin_request(
                "POST", "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes?dryRun=All", probe
            )
            assert answer.status == 403, answer.body

        _eventually(registered, timeout=30)
        yield Webhooks(manager=manager, server=server)
    finally:
        for configuration in created:
            gvk = MUTATING if configuration["kind"] == "MutatingWebhookConfiguration" else VALIDATING
            client.delete(gvk, configuration["metadata"]["name"])
        manager.stop()
        runner.join(60)
        manager.client.close()
    assert not failures, failures


def _eventually(fn: Callable[[], None], *, timeout: float) -> None:
    envtest.eventually(fn, timeout=timeout)


# --- helpers ---------------------------------------------------------------------------------------------


def outcome(action: Callable[[], Any]) -> str | int:
    """``"ok"``, or the HTTP status of the API error (403 from a webhook, 422 from the schema)."""
    try:
        action()
    except (Forbidden, Invalid) as exc:
        assert exc.status in (403, 422), exc
        if exc.status == 403:
            assert "admission webhook" in exc.message and "denied the request" in exc.message, exc.message
        return exc.status
    except ApiError as exc:  # anything else is a failure of the test, shown with its message
        raise AssertionError(f"unexpected {exc.status} {exc.reason}: {exc.message}") from exc
    return OK


def error_message(action: Callable[[], Any]) -> str:
    try:
        action()
    except ApiError as exc:
        return exc.message
    raise AssertionError("the request was admitted")


def default_runtime(namespace: str | None, name: str = RUNTIME, **spec: Any) -> dict[str, Any]:
    """upstream's MakeTrainingRuntimeWrapper: dataset-initializer, model-initializer, node."""
    kind = constants.TRAINING_RUNTIME_KIND if namespace else constants.CLUSTER_TRAINING_RUNTIME_KIND
    return make.runtime(
        make.runtime_spec(*make.default_jobs(), **spec), name=name, namespace=namespace, kind=kind
    )


def trainjob(
    namespace: str,
    name: str = "train-job",
    *,
    runtime: str = RUNTIME,
    kind: str = "TrainingRuntime",
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": constants.API_VERSION,
        "kind": constants.TRAINJOB_KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtimeRef": {"name": runtime, "kind": kind}, **spec},
    }


@dataclass
class Runtimes:
    """The TrainingRuntime `training-runtime` in the test's namespace and a ClusterTrainingRuntime of the
    same template (named per test: cluster-scoped names are shared)."""

    namespace: str
    cluster_name: str


@pytest.fixture
def runtimes(webhooks: Webhooks, client: Client, namespace: str) -> Iterator[Runtimes]:
    cluster_name = f"ctr-{namespace}"
    client.create(default_runtime(namespace), field_manager=USER)
    client.create(default_runtime(None, cluster_name), field_manager=USER)
    # The validating webhook reads runtimes from the manager's cache: wait until it has both.
    _eventually(lambda: _cached(webhooks, TRAINING_RUNTIME, RUNTIME, namespace), timeout=10)
    _eventually(lambda: _cached(webhooks, CLUSTER_TRAINING_RUNTIME, cluster_name, None), timeout=10)
    yield Runtimes(namespace=namespace, cluster_name=cluster_name)
    with contextlib.suppress(NotFound):
        client.delete(CLUSTER_TRAINING_RUNTIME, cluster_name)


def _cached(webhooks: Webhooks, gvk: GVK, name: str, namespace: str | None) -> None:
    try:
        webhooks.manager.cache.get(gvk, name, namespace)
    except NotFound as exc:
        raise AssertionError(f"{gvk.kind} {name} not cached yet") from exc


def update_runtime(
    client: Client, webhooks: Webhooks, namespace: str, change: Callable[[dict[str, Any]], None]
) -> None:
    """Changes the TrainingRuntime (an UPDATE is not validated, as upstream); waits until it is cached."""
    current = client.get(TRAINING_RUNTIME, RUNTIME, namespace)
    change(current)
    updated = client.update(current, field_manager=USER)
    version = updated["metadata"]["resourceVersion"]

    def seen() -> None:
        cached = webhooks.manager.cache.get(TRAINING_RUNTIME, RUNTIME, namespace)
        assert cached["metadata"]["resourceVersion"] == version

    _eventually(seen, timeout=10)


def replicated_jobs(runtime: dict[str, Any]) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return jobs


def node_pod_patch(manager: str, **pod_spec: Any) -> dict[str, Any]:
    return {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": "node", "template": {"spec": {"template": {"spec": pod_spec}}}}
                    ]
                }
            }
        },
    }


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


def test_q12_an_edit_of_time_alone_on_an_unchanged_patch_is_reverted(
    runtimes: Runtimes, client: Client
) -> None:
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


def test_q8_an_update_after_the_runtime_was_deleted_is_judged_by_the_snapshot(
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
