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
- CA rotation under load: the product's :class:`~controller.serving.certs.rotator.CertRotator` (its own
  thread, as every replica runs it) manages the Secret, the certificate directory and both configurations'
  ``caBundle``, with lifetimes scaled down so that the CA falls within the lookahead one second after it
  was made (30 s CA and serving certificate, 29 s lookahead: the production rule, 10 years and 90 days,
  in seconds). Under the same load, the CA is replaced several times (a new CA, a serving certificate
  signed by it, the caBundle holding the new CA and the previous one); every request is admitted, each
  new CA is seen in both bundles with its predecessor and signing the served certificate. Then the
  Secret is deleted: the rotator starts a new CA with no predecessor to keep (a deliberate clean break);
  the requests refused while the API server and the server switch over are counted and reported, and
  admission goes on after.
"""

from __future__ import annotations

import base64
import datetime as dt
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
from cryptography.x509.oid import ExtensionOID

from controller.client.client import Client
from controller.client.errors import ApiError
from controller.client.gvk import GVK
from controller.envtest.certs import CertificateAuthority
from controller.envtest.process import free_port
from controller.manager.manager import Manager, ManagerOptions
from controller.serving.certs.rotator import (
    CA_CERT_KEY,
    SECRET,
    CertRotator,
    RotatorOptions,
    WebhookConfigurationRef,
)
from controller.trainer.config import Configuration
from controller.trainer.setup import cache_by_object, new_registry
from controller.trainer.webhooks import TRAINJOB_DEFAULTER_PATH, TRAINJOB_VALIDATOR_PATH, setup_webhooks
from support import reliability

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

        reliability.eventually(serving, timeout=60)

    def stop(self) -> None:
        if self.manager is None or self._thread is None:
            return
        self.manager.stop()
        self._thread.join(60)
        self.manager.client.close()
        assert not self._thread.is_alive(), "the webhook manager did not stop"
        self.manager = None
        assert self.failures == [], self.failures


def _webhook(
    name: str, path: str, port: int, bundle: str, namespace: str, *, host: str = "127.0.0.1"
) -> dict[str, Any]:
    client_config = {"url": f"https://{host}:{port}{path}"}
    if bundle:
        client_config["caBundle"] = bundle
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": client_config,
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


def _configuration_names(namespace: str) -> tuple[str, str]:
    return f"reliability-defaulter-{namespace}", f"reliability-validator-{namespace}"


def _register(admin: Client, namespace: str, port: int, bundle: str, host: str = "127.0.0.1") -> None:
    """The two configurations, named by :func:`_configuration_names`."""
    names = _configuration_names(namespace)
    for gvk, name, webhook, path in (
        (MUTATING, names[0], DEFAULTER, TRAINJOB_DEFAULTER_PATH),
        (VALIDATING, names[1], VALIDATOR, TRAINJOB_VALIDATOR_PATH),
    ):
        admin.create(
            {
                "apiVersion": gvk.api_version,
                "kind": gvk.kind,
                "metadata": {"name": name},
                "webhooks": [_webhook(webhook, path, port, bundle, namespace, host=host)],
            }
        )


def _unregister(admin: Client, namespace: str) -> None:
    names = _configuration_names(namespace)
    admin.delete(MUTATING, names[0])
    admin.delete(VALIDATING, names[1])


def _wait_until_admitting(admin: Client, namespace: str) -> None:
    # Registered once a TrainJob naming a missing runtime is refused by our validator.
    reliability.eventually(lambda: _refused_by_validator(admin, namespace), timeout=30, interval=0.2)
    reliability.eventually(lambda: _dry_run(admin, namespace, "probe"), timeout=30, interval=0.2)


@pytest.fixture
def webhooks(
    admin: Client, service_account_kubeconfig: Path, namespace: str, tmp_path: Path
) -> Iterator[tuple[WebhookHost, CertificateAuthority]]:
    ca = CertificateAuthority.new("reliability-webhook-ca")
    cert_dir = tmp_path / "serving-certs"
    ca.issue_serving(["127.0.0.1"]).write(cert_dir, "tls.crt", "tls.key")
    host = WebhookHost(service_account_kubeconfig, free_port(), cert_dir)
    admin.create(reliability.torch_runtime(namespace), field_manager=reliability.USER)
    host.start()
    _register(admin, namespace, host.port, base64.b64encode(ca.cert_pem).decode())
    try:
        _wait_until_admitting(admin, namespace)
        yield host, ca
    finally:
        _unregister(admin, namespace)
        host.stop()


def _dry_run_outcome(admin: Client, namespace: str, name: str) -> str:
    """A dry-run create of a TrainJob (both webhooks are called): ``"ok"`` when admitted, else the status
    and the API server's message."""
    body = orjson.dumps(reliability.trainjob(namespace, name))
    path = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs"
    answer = admin.transport.request(
        "POST", path, query={"dryRun": "All"}, body=body, content_type="application/json"
    )
    if answer.status == 201:
        return "ok"
    try:
        message = str(orjson.loads(answer.body).get("message"))
    except (orjson.JSONDecodeError, AttributeError):
        message = answer.body[:500].decode(errors="replace")
    return f"{answer.status}: {message}"


def _dry_run(admin: Client, namespace: str, name: str) -> None:
    """:func:`_dry_run_outcome`; AssertionError unless admitted."""
    outcome = _dry_run_outcome(admin, namespace, name)
    assert outcome == "ok", outcome


class _AdmissionLoad:
    """Two threads sending dry-run TrainJob creates until the block ends (joined, or the test fails);
    ``outcomes`` in arrival order: ``"ok"``, or why not (:func:`_dry_run_outcome`)."""

    def __init__(self, admin: Client, namespace: str, name: str) -> None:
        self.outcomes: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._load, args=(admin, namespace, i), name=f"test/{name}-{i}")
            for i in range(2)
        ]

    def _load(self, admin: Client, namespace: str, worker: int) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            try:
                self.outcomes.append(_dry_run_outcome(admin, namespace, f"load-{worker}-{n}"))
            except (ApiError, OSError) as exc:
                self.outcomes.append(f"failed: {exc}")

    def wait_beyond(self, mark: int, more: int = 10) -> None:
        """Until ``more`` requests have been answered since ``len(outcomes)`` was ``mark``."""
        reliability.wait_for(lambda: len(self.outcomes) >= mark + more, timeout=30)

    def __enter__(self) -> _AdmissionLoad:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)
        assert not any(thread.is_alive() for thread in self._threads)


def _refused_by_validator(admin: Client, namespace: str) -> None:
    body = orjson.dumps(reliability.trainjob(namespace, "probe", runtime="missing"))
    path = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs"
    answer = admin.transport.request(
        "POST", path, query={"dryRun": "All"}, body=body, content_type="application/json"
    )
    assert answer.status == 403, (answer.status, answer.body[:300])


def test_with_the_webhook_server_down_trainjobs_are_refused_clearly_and_admitted_once_it_is_back(
    admin: Client, namespace: str, webhooks: tuple[WebhookHost, CertificateAuthority], figures: Any
) -> None:
    host, _ = webhooks
    admin.create(reliability.trainjob(namespace, "before"), field_manager=reliability.USER)
    host.stop()
    refused: list[str] = []
    for i in range(3):
        try:
            admin.create(reliability.trainjob(namespace, f"during-{i}"), field_manager=reliability.USER)
        except ApiError as exc:
            refused.append(f"{exc.status} {exc.message}")
        else:
            raise AssertionError("a TrainJob was admitted while the webhook server was down")
    message = refused[0]
    assert message.startswith("500 "), message
    assert f'failed calling webhook "{DEFAULTER}"' in message, message
    assert "connection refused" in message, message
    assert reliability.absent(admin, reliability.TRAINJOB, "during-0", namespace)

    restarted = time.monotonic()
    host.start()
    reliability.eventually(
        lambda: admin.create(reliability.trainjob(namespace, "after"), field_manager=reliability.USER),
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


def _served_certificate(port: int, bundle: bytes, hostname: str) -> x509.Certificate:
    """The certificate served on ``port`` to a client that trusts ``bundle`` and asks for ``hostname``."""
    context = ssl.create_default_context(cadata=bundle.decode())
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=hostname) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def _served_fingerprint(port: int, ca_pem: bytes) -> bytes:
    return _served_certificate(port, ca_pem, "127.0.0.1").fingerprint(hashes.SHA256())


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
    served: list[float] = []
    with _AdmissionLoad(admin, namespace, "webhook-load") as load:
        for _ in range(rotations):
            before = len(load.outcomes)
            fingerprint = _rotate(ca, host.cert_dir)
            rotated = time.monotonic()
            reliability.eventually(
                lambda fingerprint=fingerprint: _same(
                    _served_fingerprint(host.port, ca.cert_pem), fingerprint
                ),
                timeout=10,
            )
            served.append(time.monotonic() - rotated)
            load.wait_beyond(before)
    outcomes = load.outcomes
    failed = [o for o in outcomes if o != "ok"]
    assert failed == [], failed[:3]
    figures.report(
        f"webhook certificate rotation under load ({profile.name})",
        runs=1,
        rotations=rotations,
        requests=len(outcomes),
        dropped=len(failed),
        new_certificate_served_within_s_median_max=reliability.median_max(served),
    )


def _same(actual: bytes, expected: bytes) -> None:
    assert actual == expected, "the previous certificate is still served"


# --- CA rotation --------------------------------------------------------------------------------------------

ROTATING_SECRET = "reliability-webhook-certs"
_UNKNOWN_AUTHORITY = "certificate signed by unknown authority"
SCALED_LIFETIME = dt.timedelta(seconds=30)
SCALED_LOOKAHEAD = dt.timedelta(seconds=29)


@pytest.fixture
def rotated_webhooks(
    admin: Client, service_account_kubeconfig: Path, namespace: str, tmp_path: Path
) -> Iterator[tuple[WebhookHost, CertRotator]]:
    """The webhook server on certificates the product's rotator keeps (Secret, files, caBundles), with the
    scaled-down lifetimes of the module doc; the configurations call ``https://localhost:<port>`` (the
    rotator's certificates name DNS names only)."""
    port = free_port()
    admin.create(reliability.torch_runtime(namespace), field_manager=reliability.USER)
    _register(admin, namespace, port, bundle="", host="localhost")  # the rotator injects the bundle
    names = _configuration_names(namespace)
    options = RotatorOptions(
        secret_namespace=namespace,
        secret_name=ROTATING_SECRET,
        cert_dir=tmp_path / "serving-certs",
        dns_name="localhost",
        ca_name="reliability-rotating-ca",
        ca_organization="reliability",
        webhooks=(WebhookConfigurationRef.mutating(names[0]), WebhookConfigurationRef.validating(names[1])),
        ca_validity=SCALED_LIFETIME,
        server_validity=SCALED_LIFETIME,
        lookahead=SCALED_LOOKAHEAD,
        resync_interval=0.2,
    )
    rotator = CertRotator(admin, options)
    stop = threading.Event()
    rotator.start(stop)
    host = WebhookHost(service_account_kubeconfig, port, options.cert_dir)
    try:
        assert rotator.wait_ready(30), rotator.statistics()
        host.start()
        _wait_until_admitting(admin, namespace)
        yield host, rotator
    finally:
        stop.set()
        assert rotator.stop(30), "the certificate rotator did not stop"
        _unregister(admin, namespace)
        host.stop()


def _ca_fingerprints(pem: bytes) -> list[bytes]:
    return [c.fingerprint(hashes.SHA256()) for c in x509.load_pem_x509_certificates(pem)]


def _bundles(admin: Client, namespace: str) -> list[list[bytes]]:
    """The CAs (fingerprints, in order) of each webhook's caBundle."""
    names = _configuration_names(namespace)
    found = []
    for gvk, name in ((MUTATING, names[0]), (VALIDATING, names[1])):
        for webhook in admin.get(gvk, name)["webhooks"]:
            found.append(_ca_fingerprints(base64.b64decode(webhook["clientConfig"]["caBundle"])))
    return found


def _served_issuer(port: int, bundle: bytes) -> bytes:
    """The authority key identifier of the certificate served on ``port`` (verified against ``bundle``)."""
    aki = _served_certificate(port, bundle, "localhost").extensions.get_extension_for_oid(
        ExtensionOID.AUTHORITY_KEY_IDENTIFIER
    )
    identifier = aki.value.key_identifier
    assert identifier is not None
    return identifier


def _key_identifier(pem: bytes) -> bytes:
    ski = x509.load_pem_x509_certificate(pem).extensions.get_extension_for_oid(
        ExtensionOID.SUBJECT_KEY_IDENTIFIER
    )
    return ski.value.digest


def _current_ca(admin: Client, namespace: str) -> bytes:
    """The Secret's ``ca.crt`` (the newest CA first); empty while there is no Secret."""
    if reliability.absent(admin, SECRET, ROTATING_SECRET, namespace):
        return b""
    data = admin.get(SECRET, ROTATING_SECRET, namespace)["data"]
    return base64.b64decode(data[CA_CERT_KEY])


def _replaced(admin: Client, namespace: str, previous: bytes) -> Callable[[], bool]:
    """Whether the Secret holds a CA bundle other than ``previous``."""
    return lambda: _current_ca(admin, namespace) not in (b"", previous)


def test_a_ca_rotation_under_load_drops_no_request(
    admin: Client,
    namespace: str,
    rotated_webhooks: tuple[WebhookHost, CertRotator],
    figures: Any,
    profile: Any,
) -> None:
    host, _ = rotated_webhooks
    rotations = 4 if profile.name == "ci" else 20
    seen: list[bytes] = []
    switched: list[float] = []
    with _AdmissionLoad(admin, namespace, "ca-load") as load:
        previous = _current_ca(admin, namespace)
        for _ in range(rotations):
            before = len(load.outcomes)
            reliability.wait_for(_replaced(admin, namespace, previous), timeout=30)
            began = time.monotonic()
            bundle = _current_ca(admin, namespace)
            cas = _ca_fingerprints(bundle)
            # The new CA first, then its predecessor (still valid: kept trusted for the switch).
            assert cas[1:] == _ca_fingerprints(previous)[:1], "the previous CA is not kept in ca.crt"
            newest = _key_identifier(bundle)

            def switched_over(bundle: bytes = bundle, newest: bytes = newest) -> None:
                assert all(found == _ca_fingerprints(bundle) for found in _bundles(admin, namespace))
                assert _served_issuer(host.port, bundle) == newest

            reliability.eventually(switched_over, timeout=10, interval=0.05)
            switched.append(time.monotonic() - began)
            seen.append(cas[0])
            load.wait_beyond(before)
            previous = bundle
        during_rotations = list(load.outcomes)

        # The Secret deleted: a new CA with no predecessor (the old key may be why it was deleted).
        before_deletion = len(load.outcomes)
        admin.delete(SECRET, ROTATING_SECRET, namespace)
        reliability.wait_for(_replaced(admin, namespace, previous), timeout=30)
        fresh = _current_ca(admin, namespace)
        assert len(_ca_fingerprints(fresh)) == 1, "a deleted Secret keeps no old CA"

        def recovered() -> None:
            assert all(found == _ca_fingerprints(fresh) for found in _bundles(admin, namespace))
            assert _served_issuer(host.port, fresh) == _key_identifier(fresh)

        # Until the server has loaded the fresh certificate it serves one signed by the deleted CA, which a
        # client trusting only the fresh CA refuses in the handshake: retried as a mismatch is.
        reliability.eventually(
            recovered, timeout=10, interval=0.05, retry_on=(AssertionError, ssl.SSLCertVerificationError)
        )
        after_recovery = len(load.outcomes)
        load.wait_beyond(after_recovery)
    outcomes = load.outcomes
    failed = [o for o in during_rotations if o != "ok"]
    after_deletion = outcomes[before_deletion:]
    refused = [o for o in after_deletion if o != "ok"]
    figures.report(
        f"webhook CA rotation under load ({profile.name})",
        runs=1,
        ca_rotations=rotations,
        requests=len(during_rotations),
        refused=len(failed),
        switched_after_new_secret_s_median_max=reliability.median_max(switched),
        secret_deleted_requests=len(after_deletion),
        secret_deleted_refused=len(refused),
    )
    assert failed == [], failed[:3]
    assert len(set(seen)) == rotations
    assert all(_UNKNOWN_AUTHORITY in o for o in refused), refused[:3]
    # Admission goes on after the clean break (the two requests in flight when the switch was seen aside),
    # through the next scaled rotations too.
    assert set(outcomes[after_recovery + 2 :]) == {"ok"}, outcomes[after_recovery:][:3]
