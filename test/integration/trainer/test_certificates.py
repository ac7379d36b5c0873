"""The certificates and the secure metrics endpoint against the Tier 1 API server, as the manager's
ServiceAccount with the shipped RBAC:

- bootstrap from an absent Secret: the rotator creates ``kubeflow-system/kubeflow-trainer-webhook-cert``
  (``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``), writes the cert dir, injects the CA into every webhook
  of ``validator.trainer.kubeflow.org`` and ``defaulter.trainer.kubeflow.org`` (created beforehand), and
  ``/readyz/certificates`` turns 200;
- rotation without a restart: the rotator's fake clock is stepped past the lookahead, the Secret and the
  files change, and a new connection to the running metrics server sees the new certificate; stepped past
  the CA's lookahead, the caBundle holds the new CA and the old one;
- metrics: no token 401, a ServiceAccount token without RBAC 403, a ServiceAccount bound to a ClusterRole
  with ``nonResourceURLs: [/metrics], verbs: [get]`` 200 with controller-runtime's families.

The webhook configurations only match a resource nobody creates, so other suites sharing the control plane
are not affected; they are deleted at the end, with the Secret and the roles.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from controller.client import errors
from controller.client.client import Client
from controller.client.gvk import GVK
from controller.clock import FakeClock
from controller.envtest import ControlPlane, eventually
from controller.manager.manager import Manager, ManagerOptions
from controller.serving.certs.rotator import CertRotator
from controller.trainer.certificates import metrics_serving, setup_certificates
from controller.trainer.config import Configuration, ControllerMetrics

NAMESPACE = "kubeflow-system"
SECRET_NAME = "kubeflow-trainer-webhook-cert"
DNS = f"kubeflow-trainer-controller-manager.{NAMESPACE}.svc"
SECRET = GVK("", "v1", "Secret")
VALIDATING = GVK("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")
MUTATING = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")
CLUSTER_ROLE = GVK("rbac.authorization.k8s.io", "v1", "ClusterRole")
CLUSTER_ROLE_BINDING = GVK("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding")
READER_ROLE = "kubeflow-trainer-test-metrics-reader"


def configuration(name: str, kind: str, hooks: list[str]) -> dict[str, Any]:
    """Shaped as upstream's, but matching only a resource nobody creates."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": hook,
                "clientConfig": {
                    "service": {
                        "name": "kubeflow-trainer-controller-manager",
                        "namespace": NAMESPACE,
                        "path": "/x",
                    }
                },
                "rules": [
                    {
                        "apiGroups": ["certs-test.example.com"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["nothings"],
                    }
                ],
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
            }
            for hook in hooks
        ],
    }


def delete_quietly(client: Client, gvk: GVK, name: str, namespace: str | None = None) -> None:
    with contextlib.suppress(errors.NotFound):
        client.delete(gvk, name, namespace)


def token_of(kubeconfig: Path) -> str:
    config = json.loads(kubeconfig.read_text())
    token: str = config["users"][0]["user"]["token"]
    return token


def https_get(
    address: tuple[str, int], ca_pem: bytes, path: str = "/metrics", token: str | None = None
) -> tuple[int, bytes, int]:
    """GET over TLS verifying the Service's DNS name; returns the status, the body and the serial served."""
    context = ssl.create_default_context(cadata=ca_pem.decode())
    head = f"GET {path} HTTP/1.1\r\nHost: {DNS}\r\nConnection: close\r\n"
    if token is not None:
        head += f"Authorization: Bearer {token}\r\n"
    with (
        socket.create_connection(address, timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=DNS) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
        assert der is not None
        tls.sendall((head + "\r\n").encode())
        chunks = []
        while chunk := tls.recv(65536):
            chunks.append(chunk)
    answer = b"".join(chunks)
    status = int(answer.split(b" ", 2)[1])
    body = answer.split(b"\r\n\r\n", 1)[1]
    return status, body, x509.load_der_x509_certificate(der).serial_number


def http_get(address: tuple[str, int], path: str) -> int:
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        return int(sock.recv(64).split(b" ", 2)[1])


@dataclass
class Running:
    manager: Manager
    rotator: CertRotator
    clock: FakeClock
    cert_dir: Path
    failures: list[BaseException]

    def check_ready(self) -> None:
        assert self.rotator.ready(), self.rotator.statistics()

    def check_waiting(self) -> None:
        assert self.clock.waiters() >= 1, "the rotator is not waiting for its next pass"


@pytest.fixture(scope="module")
def webhook_configurations(client: Client) -> Iterator[None]:
    names = (
        (
            VALIDATING,
            "validator.trainer.kubeflow.org",
            ["v1.example.com", "v2.example.com", "v3.example.com"],
        ),
        (MUTATING, "defaulter.trainer.kubeflow.org", ["m1.example.com"]),
    )
    for gvk, name, _ in names:
        delete_quietly(client, gvk, name)
    for gvk, name, hooks in names:
        client.create(configuration(name, gvk.kind, hooks))
    delete_quietly(client, SECRET, SECRET_NAME, NAMESPACE)  # bootstrap from an absent Secret
    yield
    for gvk, name, _ in names:
        delete_quietly(client, gvk, name)
    delete_quietly(client, SECRET, SECRET_NAME, NAMESPACE)


@pytest.fixture(scope="module")
def running(
    service_account_kubeconfig: Path, webhook_configurations: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Running]:
    cert_dir = tmp_path_factory.mktemp("serving-certs")
    config = Configuration(metrics=ControllerMetrics(bind_address="127.0.0.1:0", auth_enabled=True))
    # The rotator's time starts at the real time and is stepped by seconds only, so every certificate it
    # makes is valid for a client on the real clock: the lookahead is 30 s short of the serving
    # certificate's validity and 90 s short of the CA's.
    clock = FakeClock(wall=dt.datetime.now(dt.UTC))
    options = ManagerOptions(
        health_probe_bind_address="127.0.0.1:0",
        metrics_bind_address="127.0.0.1:0",
        **metrics_serving(config, cert_dir=cert_dir),
    )
    manager = Manager.from_kubeconfig(
        str(service_account_kubeconfig), options=options, user_agent="trainer-controller-manager"
    )
    rotator = setup_certificates(
        manager,
        config,
        namespace=NAMESPACE,
        cert_dir=cert_dir,
        clock=clock,
        ca_validity=dt.timedelta(hours=2, seconds=60),
        server_validity=dt.timedelta(hours=2),
        lookahead=dt.timedelta(hours=2, seconds=-30),
    )
    assert rotator is not None
    failures: list[BaseException] = []

    def run() -> None:
        try:
            manager.run()
        except BaseException as exc:
            failures.append(exc)

    runner = threading.Thread(target=run, name="test/certs-manager")
    runner.start()
    try:
        # Started before the tests' thread-leak check looks: the servers, the cache and the rotator run.
        eventually(lambda: rotator_started(manager), timeout=60)
        yield Running(manager=manager, rotator=rotator, clock=clock, cert_dir=cert_dir, failures=failures)
    finally:
        manager.stop()
        runner.join(60)
        manager.client.close()
    assert not runner.is_alive(), "the manager did not stop"
    assert failures == []


def rotator_started(manager: Manager) -> None:
    """The manager has started its runnables (the servers and the cache came first)."""
    assert "leading" in repr(manager), repr(manager)


def secret_data(client: Client) -> dict[str, bytes]:
    secret = client.get(SECRET, SECRET_NAME, NAMESPACE)
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}


def bundles(client: Client) -> list[str | None]:
    out: list[str | None] = []
    for gvk, name in (
        (VALIDATING, "validator.trainer.kubeflow.org"),
        (MUTATING, "defaulter.trainer.kubeflow.org"),
    ):
        out += [w["clientConfig"].get("caBundle") for w in client.get(gvk, name)["webhooks"]]
    return out


def serial_of(pem: bytes) -> int:
    return x509.load_pem_x509_certificate(pem).serial_number


def test_certificates_are_bootstrapped_from_an_absent_secret(
    running: Running, client: Client, eventually: Callable[..., Any]
) -> None:
    eventually(running.check_ready, timeout=60)
    health = running.manager.health_probe_address
    assert health is not None
    assert http_get(health, "/readyz/certificates") == 200
    data = secret_data(client)
    assert set(data) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    assert (running.cert_dir / "tls.crt").read_bytes() == data["tls.crt"]
    assert (running.cert_dir / "tls.key").read_bytes() == data["tls.key"]
    ca = x509.load_pem_x509_certificate(data["ca.crt"])
    assert ca.subject.rfc4514_string() == "O=kubeflow-trainer,CN=kubeflow-trainer-ca"
    leaf = x509.load_pem_x509_certificate(data["tls.crt"])
    assert leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    ) == [DNS]
    assert bundles(client) == [base64.b64encode(data["ca.crt"]).decode()] * 4
    metrics = running.manager.metrics_address
    assert metrics is not None
    assert https_get(metrics, data["ca.crt"])[2] == leaf.serial_number  # verified for the Service's name


def test_a_rotation_is_served_without_a_restart(
    running: Running, client: Client, eventually: Callable[..., Any]
) -> None:
    eventually(running.check_ready, timeout=60)
    metrics = running.manager.metrics_address
    assert metrics is not None
    before = secret_data(client)
    assert https_get(metrics, before["ca.crt"])[2] == serial_of(before["tls.crt"])

    # 31 s later the serving certificate is inside the lookahead: a new one, same CA.
    eventually(running.check_waiting, timeout=30)
    running.clock.step(31)

    def rotated() -> dict[str, bytes]:
        data = secret_data(client)
        assert data["tls.crt"] != before["tls.crt"]
        assert (running.cert_dir / "tls.crt").read_bytes() == data["tls.crt"]
        return data

    after = eventually(rotated, timeout=60)
    assert after["ca.crt"] == before["ca.crt"]
    assert https_get(metrics, after["ca.crt"])[2] == serial_of(after["tls.crt"])  # a new connection
    assert running.manager.metrics_address == metrics  # the same server: no restart

    # 60 s more and the CA is inside it too: a new CA, and the bundle keeps the old one.
    eventually(running.check_waiting, timeout=30)
    running.clock.step(60)

    def new_ca() -> dict[str, bytes]:
        data = secret_data(client)
        assert data["ca.crt"].count(b"BEGIN CERTIFICATE") == 2
        assert bundles(client) == [base64.b64encode(data["ca.crt"]).decode()] * 4
        assert (running.cert_dir / "tls.crt").read_bytes() == data["tls.crt"]
        return data

    renewed = eventually(new_ca, timeout=60)
    assert renewed["ca.crt"].endswith(before["ca.crt"])
    assert https_get(metrics, renewed["ca.crt"])[2] == serial_of(renewed["tls.crt"])
    old_ca_only = renewed["ca.crt"][len(renewed["ca.crt"]) - len(before["ca.crt"]) :]
    with pytest.raises(ssl.SSLCertVerificationError):  # the new certificate is the new CA's
        https_get(metrics, old_ca_only)


@pytest.fixture
def reader_token(
    control_plane: ControlPlane, client: Client, namespace: str, eventually: Callable[..., Any]
) -> Iterator[str]:
    client.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": READER_ROLE},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        }
    )
    client.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": READER_ROLE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READER_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}],
        }
    )
    try:
        token = token_of(control_plane.kubeconfig_for_service_account(namespace, "prometheus"))

        def allowed() -> None:  # the authorizer has seen the binding (a denial would be cached 30 s)
            review = client.create(
                {
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SubjectAccessReview",
                    "spec": {
                        "user": f"system:serviceaccount:{namespace}:prometheus",
                        "groups": ["system:serviceaccounts", "system:authenticated"],
                        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
                    },
                }
            )
            assert review["status"].get("allowed") is True

        eventually(allowed, timeout=30)
        yield token
    finally:
        delete_quietly(client, CLUSTER_ROLE_BINDING, READER_ROLE)
        delete_quietly(client, CLUSTER_ROLE, READER_ROLE)


def test_metrics_need_a_token_with_the_right_to_get_metrics(  # noqa: PLR0917 - fixtures
    running: Running,
    client: Client,
    control_plane: ControlPlane,
    namespace: str,
    reader_token: str,
    eventually: Callable[..., Any],
) -> None:
    eventually(running.check_ready, timeout=60)
    metrics = running.manager.metrics_address
    assert metrics is not None
    ca = secret_data(client)["ca.crt"]
    assert https_get(metrics, ca)[:2] == (401, b"Unauthorized\n")
    assert https_get(metrics, ca, token="not-a-token")[0] == 401
    nobody = token_of(control_plane.kubeconfig_for_service_account(namespace, "nobody"))
    status, body, _ = https_get(metrics, ca, token=nobody)
    assert (status, body) == (
        403,
        f"Authorization denied for user system:serviceaccount:{namespace}:nobody\n".encode(),
    )
    status, body, _ = https_get(metrics, ca, token=reader_token)
    assert status == 200
    text = body.decode()
    for family in (
        "controller_runtime_reconcile_total",
        "workqueue_depth",
        "rest_client_requests_total",
        "certwatcher_read_certificate_total",
    ):
        assert f"# TYPE {family}" in text, family
