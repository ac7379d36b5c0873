"""``support.launcher``: the one way our manager runs as a host process (the demo, the tests, the benchmark).

The webhook configurations a host-process manager registers are derived from ``config/webhook/``: they must
be the manifests' webhooks, each addressed by URL to 127.0.0.1 instead of the Service, and nothing else may
differ. The configuration rewrite puts every listener on loopback and changes only what it is asked to.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import launcher

ROOT = Path(__file__).resolve().parents[3]
MANIFESTS = sorted((ROOT / "config" / "webhook").glob("*_webhook_configuration.yaml"))


def _manifests() -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in (yaml.safe_load(p.read_text()) for p in MANIFESTS)}


def test_every_webhook_configuration_of_config_webhook_is_registered_for_a_host_manager() -> None:
    derived = {c["metadata"]["name"]: c for c in launcher.webhook_configurations(9443, b"CA")}
    manifests = _manifests()
    assert manifests, "no webhook configurations under config/webhook"
    assert sorted(derived) == sorted(manifests)
    for name, manifest in manifests.items():
        assert derived[name]["kind"] == manifest["kind"]
        assert derived[name]["apiVersion"] == manifest["apiVersion"]
        assert [h["name"] for h in derived[name]["webhooks"]] == [h["name"] for h in manifest["webhooks"]]


def test_a_derived_webhook_differs_from_the_manifest_only_in_its_address_and_the_spelt_out_timeout() -> None:
    manifests = _manifests()
    for configuration in launcher.webhook_configurations(9443, b"CA"):
        originals = {h["name"]: h for h in manifests[configuration["metadata"]["name"]]["webhooks"]}
        for hook in configuration["webhooks"]:
            original = originals[hook["name"]]
            path = original["clientConfig"]["service"]["path"]
            assert hook["clientConfig"] == {
                "url": f"https://127.0.0.1:9443{path}",
                "caBundle": base64.b64encode(b"CA").decode(),
            }
            assert hook["timeoutSeconds"] == original.get("timeoutSeconds", 10)
            rest = {k: v for k, v in hook.items() if k not in ("clientConfig", "timeoutSeconds")}
            assert rest == {k: v for k, v in original.items() if k not in ("clientConfig", "timeoutSeconds")}


def test_the_configuration_puts_every_listener_on_loopback_and_keeps_what_it_is_not_asked_to_change() -> None:
    shipped = launcher.shipped_configuration()
    config = launcher.configuration(
        shipped,
        health_port=1,
        metrics_port=2,
        secure_metrics=False,
        webhook_port=3,
        cert_management=False,
        leader_election={"resourceNamespace": "kubeflow-system"},
    )
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:1"
    assert config["metrics"] == {"bindAddress": "127.0.0.1:2", "secureServing": False}
    assert config["webhook"] == {"host": "127.0.0.1", "port": 3}
    assert config["certManagement"] == {**shipped["certManagement"], "enable": False}
    assert config["leaderElection"] == {**shipped["leaderElection"], "resourceNamespace": "kubeflow-system"}
    assert config["controller"] == shipped["controller"]
    assert config["clientConnection"] == shipped["clientConnection"]
    assert shipped == launcher.shipped_configuration()  # the input is not changed


def test_without_a_metrics_port_metrics_are_off_and_unasked_sections_stay_out() -> None:
    base = {"apiVersion": "config.trainer.kubeflow.org/v1alpha1", "kind": "Configuration"}
    config = launcher.configuration(base, webhook_port=3)
    assert config == {
        **base,
        "health": {"healthProbeBindAddress": "127.0.0.1:0"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": 3},
    }


def test_a_prepared_manager_gets_a_serving_certificate_and_its_ports_from_the_configuration(
    tmp_path: Path,
) -> None:
    config = launcher.configuration(
        launcher.shipped_configuration(),
        health_port=11,
        metrics_port=12,
        webhook_port=13,
        cert_management=False,
    )
    handle = launcher.prepare(tmp_path, tmp_path / "kubeconfig", config, log_level=None)
    assert (handle.health_port, handle.metrics_port, handle.webhook_port) == (11, 12, 13)
    assert handle.ca_pem is not None and handle.ca_pem.startswith(b"-----BEGIN CERTIFICATE-----")
    assert (tmp_path / "serving-certs" / "tls.crt").is_file()
    assert yaml.safe_load((tmp_path / "config.yaml").read_text()) == config
    argv = handle.process.argv
    assert argv[-3:] == (
        f"--config={tmp_path / 'config.yaml'}",
        f"--kubeconfig={tmp_path / 'kubeconfig'}",
        f"--webhook-cert-dir={tmp_path / 'serving-certs'}",
    )
    assert not handle.running()


def test_with_certificate_management_on_the_rotator_writes_the_certificate(tmp_path: Path) -> None:
    config = launcher.configuration(launcher.shipped_configuration(), webhook_port=13, cert_management=True)
    handle = launcher.prepare(tmp_path, tmp_path / "kubeconfig", config)
    assert handle.ca_pem is None
    assert not (tmp_path / "serving-certs").exists()


@pytest.mark.parametrize(("qps", "burst"), [(0, 100), (50, 0)])
def test_a_limiter_that_is_not_positive_is_refused(qps: float, burst: int) -> None:
    with pytest.raises(ValueError, match="qps" if qps <= 0 else "burst"):
        launcher.configuration({}, webhook_port=1, qps=qps, burst=burst)
