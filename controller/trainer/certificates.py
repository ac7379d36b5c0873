"""The Trainer's certificates: the self-managed CA and serving certificate (``certManagement.enable``, the
default) or externally provided ones (cert-manager), and the HTTPS metrics endpoint that uses them.

Go origin: kubeflow/trainer ``pkg/util/cert`` (``ManageCerts``: CA ``kubeflow-trainer-ca``, organization
``kubeflow-trainer``, DNS name ``<webhookServiceName>.<namespace>.svc``, Secret ``webhookSecretName``,
the two webhook configurations, no leader election; ``SetupTLSConfig``), ``pkg/metrics/setup.go``
(``SetupServer``: ``secureServing`` serves HTTPS from the webhook certificate directory, ``auth.enabled``
adds controller-runtime's ``WithAuthenticationAndAuthorization``) and the ``readyz`` check of
``cmd/trainer-controller-manager/main.go`` ("certificates are not ready").

- :func:`setup_certificates`: with ``certManagement.enable``, adds a
  :class:`~controller.serving.certs.rotator.CertRotator` (every replica) for the Secret in the operator
  namespace, writing ``<cert_dir>/tls.crt``, ``tls.key`` and ``ca.crt`` and injecting the ``caBundle`` of
  ``validator.trainer.kubeflow.org`` and ``defaulter.trainer.kubeflow.org``; without it, only watches
  ``cert_dir`` for files provided by someone else. Either way adds the readiness check ``certificates``,
  failing with "certificates are not ready" until a certificate is in place. The rotator's module, and with
  it ``cryptography`` (8 MiB resident), is imported only when the rotator is added: a manager whose
  certificates come from elsewhere (cert-manager) never loads it.
- :func:`metrics_serving`: the :class:`~controller.manager.manager.ManagerOptions` fields for ``/metrics``:
  HTTPS from ``cert_dir`` (a :class:`~controller.serving.certwatcher.CertWatcher`: rotated certificates are
  served from the next connection) with the ``tls`` options when ``metrics.secureServing``, and the
  TokenReview / SubjectAccessReview filter when ``metrics.auth.enabled``.

Deliberately different from upstream: the controllers and webhooks are not held back until the
certificates are ready (the servers refuse connections until then, and readiness says so); the metrics
server's filter is honoured with ``secureServing: false`` too (tokens then cross the network in clear,
which the start-up log warns about).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from controller.client.client import Client
from controller.clock import Clock
from controller.manager.manager import Manager
from controller.serving.app import App
from controller.serving.certwatcher import CertWatcher
from controller.serving.filters import authentication_and_authorization
from controller.serving.tlsconfig import TLSOptions
from controller.serving.webhook import DEFAULT_CERT_DIR
from controller.trainer.config import Configuration

if TYPE_CHECKING:
    from controller.serving.certs.rotator import CertRotator, RotatorOptions

__all__ = [
    "CA_NAME",
    "CA_ORGANIZATION",
    "DEFAULT_CERT_DIR",
    "DEFAULT_OPERATOR_NAMESPACE",
    "MUTATING_WEBHOOK_CONFIGURATION_NAME",
    "VALIDATING_WEBHOOK_CONFIGURATION_NAME",
    "metrics_serving",
    "rotator_options",
    "setup_certificates",
    "tls_options",
]

_log = structlog.get_logger("controller.trainer.certificates")

CA_NAME = "kubeflow-trainer-ca"
CA_ORGANIZATION = "kubeflow-trainer"
DEFAULT_OPERATOR_NAMESPACE = "kubeflow-system"
VALIDATING_WEBHOOK_CONFIGURATION_NAME = "validator.trainer.kubeflow.org"
MUTATING_WEBHOOK_CONFIGURATION_NAME = "defaulter.trainer.kubeflow.org"
CERTIFICATES_CHECK = "certificates"


def tls_options(config: Configuration) -> TLSOptions:
    """The Configuration's ``tls`` section as the servers take it."""
    return TLSOptions(
        min_version=config.tls.min_version,
        cipher_suites=tuple(config.tls.cipher_suites),
        next_protos=tuple(config.tls.next_protos),
    )


def rotator_options(
    config: Configuration, *, namespace: str, cert_dir: Path = DEFAULT_CERT_DIR, **overrides: Any
) -> RotatorOptions:
    """Upstream's rotator settings for ``namespace``; ``overrides`` (durations, interval) are for tests."""
    from controller.serving.certs.rotator import RotatorOptions, WebhookConfigurationRef  # noqa: PLC0415

    management = config.cert_management
    return RotatorOptions(
        secret_namespace=namespace,
        secret_name=management.webhook_secret_name,
        cert_dir=Path(cert_dir),
        dns_name=f"{management.webhook_service_name}.{namespace}.svc",
        ca_name=CA_NAME,
        ca_organization=CA_ORGANIZATION,
        webhooks=(
            WebhookConfigurationRef.validating(VALIDATING_WEBHOOK_CONFIGURATION_NAME),
            WebhookConfigurationRef.mutating(MUTATING_WEBHOOK_CONFIGURATION_NAME),
        ),
        **overrides,
    )


def setup_certificates(
    manager: Manager,
    config: Configuration,
    *,
    namespace: str | None = None,
    cert_dir: Path = DEFAULT_CERT_DIR,
    clock: Clock | None = None,
    **overrides: Any,
) -> CertRotator | None:
    """Adds the rotator (or nothing, with ``certManagement.enable: false``) and the ``certificates``
    readiness check to ``manager``; returns the rotator. ``namespace`` defaults to ``kubeflow-system``."""
    cert_dir = Path(cert_dir)
    if not config.cert_management.enable:
        watcher = CertWatcher(cert_dir / "tls.crt", cert_dir / "tls.key")

        def provided() -> None:
            if not watcher.ready():
                raise RuntimeError(f"certificates are not ready: no certificate in {cert_dir}")

        manager.add_readyz_check(CERTIFICATES_CHECK, provided)
        _log.info(
            "certs.externally_provided",
            cert_dir=str(cert_dir),
            note="certManagement.enable is false: certificates must be provided externally",
        )
        return None
    # Imported only here: the rotator's key and certificate code is `cryptography`, 8 MiB resident, which a
    # manager whose certificates come from elsewhere (cert-manager) never needs.
    from controller.serving.certs.rotator import CertRotator  # noqa: PLC0415

    options = rotator_options(
        config, namespace=namespace or DEFAULT_OPERATOR_NAMESPACE, cert_dir=cert_dir, **overrides
    )
    rotator = CertRotator(manager.client, options, clock=clock or manager.clock)
    manager.add(rotator)
    manager.add_readyz_check(CERTIFICATES_CHECK, rotator.check)
    _log.info(
        "certs.management_enabled",
        secret=f"{options.secret_namespace}/{options.secret_name}",
        dns_name=options.dns_name,
        cert_dir=str(cert_dir),
    )
    return rotator


def metrics_serving(
    config: Configuration, *, cert_dir: Path = DEFAULT_CERT_DIR, clock: Clock | None = None
) -> dict[str, Any]:
    """``metrics_tls_context`` and ``metrics_filter_provider`` for
    :class:`~controller.manager.manager.ManagerOptions` (see the module doc)."""
    cert_dir = Path(cert_dir)
    tls_context: Callable[[], ssl.SSLContext] | None = None
    if config.metrics.secure_serving:
        watcher = CertWatcher(cert_dir / "tls.crt", cert_dir / "tls.key", tls=tls_options(config))
        tls_context = watcher.context
    provider: Callable[[Client], Callable[[App], App]] | None = None
    if config.metrics.auth_enabled:

        def provider(client: Client) -> Callable[[App], App]:
            if clock is None:
                return authentication_and_authorization(client)
            return authentication_and_authorization(client, clock=clock)

    return {"metrics_tls_context": tls_context, "metrics_filter_provider": provider}
