"""The Trainer's admission webhooks when their server is down, and while its certificate is rotated.

The webhook server runs in this process as the manager runs it (``setup_webhooks`` on a manager with its
cache, as the ServiceAccount), on a fixed loopback port, registered with URL-based webhook configurations
shaped as the shipped ones (the TrainJob defaulter and validator, ``failurePolicy: Fail``) but limited to the
test's namespace, so no other test meets them.

- Down: the server is stopped; kube-apiserver refuses a TrainJob with a message that names the webhook and
  the reason (connection refused), and the TrainJob is not stored. A server started again on the same port
  is called at once, and TrainJobs are admitted again.
- Rotation under load: two threads send dry-run TrainJob creates back to back (each calls both webhooks, each
  call a new TLS connection) while the serving certificate is replaced several times (new key, same CA,
  files swapped by rename as a Secret volume does); every request is admitted, and after each rotation
  the server is seen serving the new certificate.
"""

from __future__ import annotations

import base64
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from controller.client import Client
from controller.envtest import load_script
from controller.envtest.certs import CertificateAuthority
from controller.envtest.process import free_port
from controller.errors import ApiError
from controller.gvk import GVK
from controller.manager import Manager, ManagerOptions
from controller.trainer.config import Configuration
from controller.trainer.setup import cache_by_object, new_registry
from controller.trainer.webhooks import TRAINJOB_DEFAULTER_PATH, TRAINJOB_VALIDATOR_PATH, setup_webhooks

support = load_script(Path(__file__).with_name("support.py"), "_reliability_support")

MUTATING = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")
VALIDATING = GVK("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")
DEFAULTER = "defaulter.trainjob.trainer.kubeflow.org"
VALIDATOR = "validator.trainjob.trainer.kubeflow.org"


class WebhookHost:
    """A manager serving only the Trainer webhooks on ``port``, started and stopped on demand."""

    def __init__(self, kubeconfig: Path, port: int, cert_dir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.port = port
        self.cert_dir = cert_dir
        self.manager: Manager | None = None
        self._thread: threading.Thread | None = None
        self.failures: list[BaseException] = []

    def start(self) -> None:
        registry = new_registry()
        options = ManagerOptions(
            health_probe_bind_address="127.0.0.1:0",
            metrics_bind_address="0",
            by_object=cache_by_object(registry),
        )
        manager = Manager.from_kubeconfig(
            str(self.kubeconfig), options=options, user_agent="reliability-webhooks"
        )
        server = setup_webhooks(
            manager, registry, Configuration(), bind_address=f"127.0.0.1:{self.port}", cert_dir=self.cert_dir
        )
        self.manager = manager

        def run() -> None:
            try:
                manager.run()
            except BaseException as exc:
                self.failures.append(exc)

        self._thread = threading.Thread(target=run, name="test/webhook-manager")
        self._thread.start()
        check = server.started_checker()

        def serving() -> None:
            assert not self.failures, self.failures
            try:
                check()
            except RuntimeError as exc:
                raise AssertionError(str(exc)) from exc

        support.eventually(serving, timeout=60)

    def stop(self) -> None:
        if self.manager is None or self._thread is None:
            return
        self.manager.stop()
        self._thread.join(60)
        self.manager.client.close()
        assert not self._thread.is_alive(), "the webhook manager did not stop"
        self.manager = None
        assert self.failures == [], self.failures


def _webhook(name: str, path: str, port: int, bundle: str, namespace: str) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "timeoutSeconds": 10,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "rules": [
            {
                "apiGroups": ["trainer.kubeflow.org"],
                "apiVersions": ["v1alpha1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["trainjobs"],
            }
        ],
    }


@pytest.fixture
def webhooks(
    admin: Client, service_account_kubeconfig: Path, namespace: str, tmp_path: Path
) -> Iterator[tuple[WebhookHost, CertificateAuthority]]:
    ca = CertificateAuthority.new("reliability-webhook-ca")
    cert_dir = tmp_path / "serving-certs"
    ca.issue_serving(["127.0.0.1"]).write(cert_dir, "tls.crt", "tls.key")
    host = WebhookHost(service_account_kubeconfig, free_port(), cert_dir)
    admin.create(support.torch_runtime(namespace), field_manager=support.USER)
    host.start()
    bundle = base64.b64encode(ca.cert_pem).decode()
    names = (f"reliability-defaulter-{namespace}", f"reliability-validator-{namespace}")
    admin.create(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": names[0]},
            "webhooks": [_webhook(DEFAULTER, TRAINJOB_DEFAULTER_PATH, host.port, bundle, namespace)],
        }
    )
    admin.create(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": names[1]},
            "webhooks": [_webhook(VALIDATOR, TRAINJOB_VALIDATOR_PATH, host.port, bundle, namespace)],
        }
    )
    try:
        # Registered once a TrainJob naming a missing runtime is refused by our validator.
        support.eventually(lambda: _refused_by_validator(admin, namespace), timeout=30, interval=0.2)
        support.eventually(lambda: _dry_run(admin, namespace, "probe"), timeout=30, interval=0.2)
        yield host, ca
    finally:
        admin.delete(MUTATING, names[0])
        admin.delete(VALIDATING, names[1])
        host.stop()


def _dry_run(admin: Client, namespace: str, name: str) -> None:
    """A dry-run create of a TrainJob (both webhooks are called); AssertionError unless admitted."""
    body = orjson.dumps(support.trainjob(namespace, name))
    path = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs"
    answer = admin.transport.request(
        "POST", path, query={"dryRun": "All"}, body=body, content_type="application/json"
    )
    assert answer.status == 201, (answer.status, answer.body[:500])


def _refused_by_validator(admin: Client, namespace: str) -> None:
    body = orjson.dumps(support.trainjob(namespace, "probe", runtime="missing"))
    path = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs"
    answer = admin.transport.request(
        "POST", path, query={"dryRun": "All"}, body=body, content_type="application/json"
    )
    assert answer.status == 403, (answer.status, answer.body[:300])


def test_with_the_webhook_server_down_trainjobs_are_refused_clearly_and_admitted_once_it_is_back(
    admin: Client, namespace: str, webhooks: tuple[WebhookHost, CertificateAuthority], figures: Any
) -> None:
    host, _ = webhooks
    admin.create(support.trainjob(namespace, "before"), field_manager=support.USER)
    host.stop()
    refused: list[str] = []
    for i in range(3):
        try:
            admin.create(support.trainjob(namespace, f"during-{i}"), field_manager=support.USER)
        except ApiError as exc:
            refused.append(f"{exc.status} {exc.message}")
        else:
            raise AssertionError("a TrainJob was admitted while the webhook server was down")
    message = refused[0]
    assert message.startswith("500 "), message
    assert f'failed calling webhook "{DEFAULTER}"' in message, message
    assert "connection refused" in message, message
    assert support.absent(admin, support.TRAINJOB, "during-0", namespace)

    restarted = time.monotonic()
    host.start()
    support.eventually(
        lambda: admin.create(support.trainjob(namespace, "after"), field_manager=support.USER),
        timeout=30,
        retry_on=(ApiError,),
    )
    recovered = time.monotonic() - restarted
    figures.report(
        "webhook server down",
        runs=1,
        faults_injected=1,
        refused=len(refused),
        message=repr(message[:160]),
        admitted_after_restart_s=recovered,
        lost=0,
    )


def _served_fingerprint(port: int, ca_pem: bytes) -> bytes:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).fingerprint(hashes.SHA256())


def _rotate(ca: CertificateAuthority, cert_dir: Path) -> bytes:
    """A new key and certificate from the same CA, swapped in by rename (key first, as a Secret volume's
    files change one after the other); returns the new certificate's fingerprint."""
    pair = ca.issue_serving(["127.0.0.1"])
    staging = cert_dir / ".staging"
    cert, key = pair.write(staging, "tls.crt", "tls.key")
    os.replace(key, cert_dir / "tls.key")
    os.replace(cert, cert_dir / "tls.crt")
    return x509.load_pem_x509_certificate(pair.cert_pem).fingerprint(hashes.SHA256())


def test_a_certificate_rotation_under_load_drops_no_request(
    admin: Client,
    namespace: str,
    webhooks: tuple[WebhookHost, CertificateAuthority],
    figures: Any,
    profile: Any,
) -> None:
    host, ca = webhooks
    rotations = 10 if profile.name == "ci" else 50
    stop = threading.Event()
    outcomes: list[str] = []

    def load(worker: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            try:
                _dry_run(admin, namespace, f"load-{worker}-{n}")
                outcomes.append("ok")
            except (AssertionError, ApiError, OSError) as exc:
                outcomes.append(f"failed: {exc}")

    loaders = [threading.Thread(target=load, args=(i,), name=f"test/webhook-load-{i}") for i in range(2)]
    for loader in loaders:
        loader.start()
    served: list[float] = []
    try:
        for _ in range(rotations):
            before = len(outcomes)
            fingerprint = _rotate(ca, host.cert_dir)
            rotated = time.monotonic()
            support.eventually(
                lambda fingerprint=fingerprint: _same(
                    _served_fingerprint(host.port, ca.cert_pem), fingerprint
                ),
                timeout=10,
            )
            served.append(time.monotonic() - rotated)
            wait_for_more: Callable[[], bool] = lambda before=before: len(outcomes) >= before + 10  # noqa: E731
            support.wait_for(wait_for_more, timeout=30)
    finally:
        stop.set()
        for loader in loaders:
            loader.join(60)
    assert not any(loader.is_alive() for loader in loaders)
    failed = [o for o in outcomes if o != "ok"]
    assert failed == [], failed[:3]
    figures.report(
        f"webhook certificate rotation under load ({profile.name})",
        runs=1,
        rotations=rotations,
        requests=len(outcomes),
        dropped=len(failed),
        new_certificate_served_within_s_median_max=support.median_max(served),
    )


def _same(actual: bytes, expected: bytes) -> None:
    assert actual == expected, "the previous certificate is still served"
