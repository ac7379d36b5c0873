"""controller.trainer.certificates: upstream's rotator settings, both certificate modes, the metrics
serving options, and the ``metrics.auth.enabled`` field of the Configuration."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from controller.clock import FakeClock
from controller.envtest.certs import CertificateAuthority
from controller.manager.manager import Manager, ManagerOptions
from controller.serving.certs.rotator import MUTATING_WEBHOOK_CONFIGURATION, VALIDATING_WEBHOOK_CONFIGURATION
from controller.serving.httpserver import Response
from controller.trainer.certificates import metrics_serving, rotator_options, setup_certificates
from controller.trainer.config import Configuration, ConfigurationError, load_configuration

CONFIG_HEAD = "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\n"


def config_from(tmp_path: Path, body: str = "") -> Configuration:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG_HEAD + body)
    return load_configuration(path)


class NoCache:
    def start(self) -> None: ...

    def stop(self) -> None: ...

    def wait_for_cache_sync(self, timeout: float | None = None, stop: threading.Event | None = None) -> bool:
        return True

    def get_informer(self, gvk: Any, *, block_until_synced: bool = True) -> Any:
        raise NotImplementedError


def new_manager() -> Manager:
    options = ManagerOptions(health_probe_bind_address="0", metrics_bind_address="0", clock=FakeClock())
    return Manager(object(), options, cache=NoCache())  # type: ignore[arg-type]


def test_the_rotator_gets_upstreams_names(tmp_path: Path) -> None:
    opts = rotator_options(Configuration(), namespace="team-a", cert_dir=tmp_path)
    assert (opts.secret_namespace, opts.secret_name) == ("team-a", "kubeflow-trainer-webhook-cert")
    assert opts.dns_name == "kubeflow-trainer-controller-manager.team-a.svc"
    assert (opts.ca_name, opts.ca_organization) == ("kubeflow-trainer-ca", "kubeflow-trainer")
    assert [(w.gvk, w.name) for w in opts.webhooks] == [
        (VALIDATING_WEBHOOK_CONFIGURATION, "validator.trainer.kubeflow.org"),
        (MUTATING_WEBHOOK_CONFIGURATION, "defaulter.trainer.kubeflow.org"),
    ]
    assert opts.cert_dir == tmp_path


def test_the_service_and_secret_names_come_from_cert_management(tmp_path: Path) -> None:
    config = config_from(tmp_path, "certManagement: {webhookServiceName: svc, webhookSecretName: my-cert}\n")
    opts = rotator_options(config, namespace="ns")
    assert (opts.dns_name, opts.secret_name) == ("svc.ns.svc", "my-cert")


def test_cert_management_adds_the_rotator_and_the_readiness_check(tmp_path: Path) -> None:
    manager = new_manager()
    rotator = setup_certificates(manager, Configuration(), namespace=None, cert_dir=tmp_path)
    assert rotator is not None
    assert rotator.options.secret_namespace == "kubeflow-system"  # upstream's fallback
    assert not rotator.need_leader_election()
    with pytest.raises(RuntimeError, match="certificates are not ready"):
        rotator.check()
    with pytest.raises(ValueError, match="already added"):
        manager.add_readyz_check("certificates", lambda: None)


def test_external_certificates_are_only_watched(tmp_path: Path) -> None:
    config = config_from(tmp_path, "certManagement: {enable: false}\n")
    manager = new_manager()
    checks: dict[str, Any] = {}
    manager.add_readyz_check = checks.__setitem__  # type: ignore[method-assign,assignment]
    assert setup_certificates(manager, config, cert_dir=tmp_path / "certs") is None
    with pytest.raises(RuntimeError, match="certificates are not ready"):
        checks["certificates"]()
    pair = CertificateAuthority.new("cert-manager").issue_serving(["127.0.0.1"])
    pair.write(tmp_path / "certs", "tls.crt", "tls.key")
    checks["certificates"]()


def test_metrics_are_https_without_auth_by_default(tmp_path: Path) -> None:
    options = metrics_serving(Configuration(), cert_dir=tmp_path)
    assert options["metrics_filter_provider"] is None
    assert callable(options["metrics_tls_context"])


def test_secure_serving_off_is_plain_http(tmp_path: Path) -> None:
    config = config_from(tmp_path, "metrics: {secureServing: false}\n")
    assert metrics_serving(config, cert_dir=tmp_path)["metrics_tls_context"] is None


def test_auth_enabled_wraps_the_app_with_the_filter(tmp_path: Path) -> None:
    config = config_from(tmp_path, "metrics: {auth: {enabled: true}}\n")
    assert config.metrics.auth_enabled
    provider = metrics_serving(config, cert_dir=tmp_path)["metrics_filter_provider"]
    wrapped = provider(object())(lambda path, query, headers: Response(status=200, body=b"m"))
    assert wrapped("/metrics", {}, {}).status == 401


def test_metrics_auth_is_decoded_strictly_and_round_trips(tmp_path: Path) -> None:
    assert not Configuration().metrics.auth_enabled
    assert Configuration().as_wire()["metrics"]["auth"] == {"enabled": False}
    with pytest.raises(ConfigurationError, match=r"metrics\.auth\.enabld"):
        config_from(tmp_path, "metrics: {auth: {enabld: true}}\n")
    with pytest.raises(ConfigurationError, match=r"metrics\.auth\.enabled"):
        config_from(tmp_path, "metrics: {auth: {enabled: yes please}}\n")
