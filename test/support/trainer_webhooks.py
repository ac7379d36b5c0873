"""Shared parts of the admission webhook tests (`test/integration/trainer/test_webhooks_*.py`): the webhook
server started by a manager with only its cache, registered with URL-based webhook configurations shaped as
upstream's manifests; the runtimes each test starts from; the 403/422 outcome check; and object builders.

A test module takes the fixtures (`webhooks`, `runtimes`) with
`pytest_plugins = ("support.trainer_webhooks",)` and imports the rest by name; `client` is
`test/integration/trainer/conftest.py`'s.
"""

from __future__ import annotations

import base64
import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controller import envtest
from controller.client.client import Client
from controller.client.errors import ApiError, Forbidden, Invalid, NotFound
from controller.client.gvk import GVK
from controller.envtest import ControlPlane
from controller.envtest.certs import CertificateAuthority
from controller.manager.manager import Manager, ManagerOptions
from controller.serving.webhook import WebhookServer
from controller.trainer.config import Configuration
from controller.trainer.setup import cache_by_object, new_registry
from controller.trainer.webhooks import (
    CLUSTER_TRAINING_RUNTIME_VALIDATOR_PATH,
    TRAINING_RUNTIME_VALIDATOR_PATH,
    TRAINJOB_DEFAULTER_PATH,
    TRAINJOB_VALIDATOR_PATH,
    setup_webhooks,
)
from runtime.api import constants
from runtime.testing import Make

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
