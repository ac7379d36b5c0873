"""Kubeconfig files: self-contained, private, and readable by other kubeconfig loaders."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
import yaml

from controller.envtest.certs import CertificateAuthority
from controller.envtest.kubeconfig import build_kubeconfig, write_kubeconfig


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority.new("kubeconfig-test-ca")


def test_a_client_certificate_kubeconfig_embeds_the_ca_and_the_keypair(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    pair = ca.issue_client("admin", ["system:masters"])
    config = build_kubeconfig(
        server="https://127.0.0.1:6443", ca_pem=ca.cert_pem, user="admin", client=pair, namespace="default"
    )
    path = write_kubeconfig(tmp_path / "admin.kubeconfig", config)
    loaded = yaml.safe_load(path.read_text())  # JSON is YAML: any kubeconfig reader takes it
    (context,) = loaded["contexts"]
    assert loaded["current-context"] == context["name"]
    (cluster,) = loaded["clusters"]
    assert cluster["cluster"]["server"] == "https://127.0.0.1:6443"
    assert base64.b64decode(cluster["cluster"]["certificate-authority-data"]) == ca.cert_pem
    (user,) = loaded["users"]
    assert base64.b64decode(user["user"]["client-certificate-data"]) == pair.cert_pem
    assert base64.b64decode(user["user"]["client-key-data"]) == pair.key_pem
    assert context["context"] == {"cluster": cluster["name"], "user": user["name"], "namespace": "default"}


def test_a_token_kubeconfig_carries_the_token_and_no_key(ca: CertificateAuthority) -> None:
    config = build_kubeconfig(server="https://127.0.0.1:1", ca_pem=ca.cert_pem, user="sa", token="t0k3n")
    assert config["users"] == [{"name": "sa", "user": {"token": "t0k3n"}}]
    assert "namespace" not in config["contexts"][0]["context"]


def test_exactly_one_credential_is_required(ca: CertificateAuthority) -> None:
    pair = ca.issue_client("admin")
    with pytest.raises(ValueError, match="exactly one"):
        build_kubeconfig(server="https://x", ca_pem=ca.cert_pem, user="u")
    with pytest.raises(ValueError, match="exactly one"):
        build_kubeconfig(server="https://x", ca_pem=ca.cert_pem, user="u", client=pair, token="t")


def test_the_file_is_private_even_when_it_existed_before(ca: CertificateAuthority, tmp_path: Path) -> None:
    path = tmp_path / "k"
    path.write_text("old")
    path.chmod(0o644)
    write_kubeconfig(path, build_kubeconfig(server="https://x", ca_pem=ca.cert_pem, user="u", token="t"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_official_client_accepts_the_kubeconfig(ca: CertificateAuthority, tmp_path: Path) -> None:
    from kubernetes import client, config

    pair = ca.issue_client("admin")
    path = write_kubeconfig(
        tmp_path / "k",
        build_kubeconfig(server="https://127.0.0.1:6443", ca_pem=ca.cert_pem, user="admin", client=pair),
    )
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=configuration)
    assert configuration.host == "https://127.0.0.1:6443"
    assert Path(configuration.ssl_ca_cert).read_bytes() == ca.cert_pem
    assert Path(configuration.cert_file).read_bytes() == pair.cert_pem
