"""kube-apiserver's command line and certificates: loopback only, real TLS, the admin identity."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from controller.envtest.apiserver import PKIFiles, apiserver_flags
from controller.envtest.etcd import Etcd


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKIFiles:
    return PKIFiles.create(tmp_path_factory.mktemp("pki"))


def _flags(pki: PKIFiles, **extra: str) -> dict[str, str]:
    argv = apiserver_flags(port=6443, etcd_url="http://127.0.0.1:2379", pki=pki, extra=extra)
    names = [a.split("=", 1)[0] for a in argv]
    assert len(names) == len(set(names)), "a flag appears twice"
    assert all(a.startswith("--") for a in argv)
    return dict(a[2:].split("=", 1) for a in argv)


def test_the_apiserver_binds_and_advertises_loopback_only(pki: PKIFiles) -> None:
    flags = _flags(pki)
    assert flags["bind-address"] == "127.0.0.1"
    assert flags["advertise-address"] == "127.0.0.1"
    assert flags["secure-port"] == "6443"
    assert flags["etcd-servers"] == "http://127.0.0.1:2379"
    assert ipaddress.ip_network(flags["service-cluster-ip-range"]).is_private


def test_authentication_is_client_certificates_and_service_account_tokens(pki: PKIFiles) -> None:
    flags = _flags(pki)
    assert flags["client-ca-file"] == str(pki.ca_cert)
    assert flags["service-account-key-file"] == str(pki.service_account_public_key)
    assert flags["service-account-signing-key-file"] == str(pki.service_account_private_key)
    assert flags["service-account-issuer"] == "https://127.0.0.1:6443"
    assert flags["authorization-mode"] == "RBAC"
    assert flags["disable-admission-plugins"] == "ServiceAccount"


def test_extra_flags_replace_defaults_of_the_same_name_and_add_new_ones(pki: PKIFiles) -> None:
    flags = _flags(pki, **{"watch-cache": "false", "authorization-mode": "Node,RBAC"})
    assert flags["watch-cache"] == "false"
    assert flags["authorization-mode"] == "Node,RBAC"


def test_the_serving_certificate_names_loopback_and_the_kubernetes_service(pki: PKIFiles) -> None:
    cert = x509.load_pem_x509_certificate(pki.serving_cert.read_bytes())
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(pki.ca_cert.read_bytes()))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "10.0.0.1"}
    assert {"localhost", "kubernetes.default.svc"} <= set(sans.get_values_for_type(x509.DNSName))


def test_the_admin_is_in_system_masters(pki: PKIFiles) -> None:
    cert = x509.load_pem_x509_certificate(pki.admin_keypair().cert_pem)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "admin"
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"


def test_the_service_account_signing_key_is_rsa(pki: PKIFiles) -> None:
    key = serialization.load_pem_private_key(pki.service_account_private_key.read_bytes(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)


def test_etcd_listens_for_clients_and_peers_on_loopback_only(tmp_path: Path) -> None:
    argv = Etcd(Path("/bin/etcd"), tmp_path / "data", tmp_path / "etcd.log").argv(2379, 2380)
    flags = dict(a[2:].split("=", 1) for a in argv[1:])
    for name in ("listen-client-urls", "advertise-client-urls"):
        assert flags[name] == "http://127.0.0.1:2379"
    for name in ("listen-peer-urls", "initial-advertise-peer-urls"):
        assert flags[name] == "http://127.0.0.1:2380"
    assert flags["data-dir"] == str(tmp_path / "data")
    assert flags["unsafe-no-fsync"] == "true"
