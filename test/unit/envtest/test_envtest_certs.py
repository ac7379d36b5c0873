"""The test CA: what the certificates say, and that real TLS stacks accept them."""

from __future__ import annotations

import ipaddress
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controller.envtest.certs import CertificateAuthority, KeyPair, generate_rsa_keypair


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority.new("envtest-ca")


def _load(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, server_hostname: str) -> ssl.SSLObject:
    """Run a TLS handshake between two in-memory endpoints; return the server side once it completes."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client_side = client.wrap_bio(c_in, c_out, server_hostname=server_hostname)
    server_side = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for name, side in (("client", client_side), ("server", server_side)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return server_side
    raise AssertionError("TLS handshake did not finish")


def _server_context(tmp_path: Path, pair: KeyPair, client_ca: bytes | None = None) -> ssl.SSLContext:
    cert, key = pair.write(tmp_path, "server.crt", "server.key")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    if client_ca is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cadata=client_ca.decode())
    return ctx


def _client_context(ca_pem: bytes) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cadata=ca_pem.decode())
    return ctx


def test_the_ca_certificate_is_a_self_signed_ca_named_as_asked(ca: CertificateAuthority) -> None:
    cert = _load(ca.cert_pem)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "envtest-ca"
    assert cert.issuer == cert.subject
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    cert.verify_directly_issued_by(cert)


def test_serving_certificate_puts_ips_in_ip_sans_and_names_in_dns_sans(ca: CertificateAuthority) -> None:
    pair = ca.issue_serving(["127.0.0.1", "localhost", "::1", "webhook.example.svc"])
    sans = _load(pair.cert_pem).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]
    assert sans.get_values_for_type(x509.DNSName) == ["localhost", "webhook.example.svc"]


def test_serving_certificate_common_name_defaults_to_the_first_host(ca: CertificateAuthority) -> None:
    default = _load(ca.issue_serving(["localhost", "127.0.0.1"]).cert_pem)
    named = _load(ca.issue_serving(["127.0.0.1"], common_name="kube-apiserver").cert_pem)
    assert default.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "localhost"
    assert named.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kube-apiserver"


def test_serving_certificate_is_for_servers_only_and_chains_to_the_ca(ca: CertificateAuthority) -> None:
    cert = _load(ca.issue_serving(["127.0.0.1"]).cert_pem)
    cert.verify_directly_issued_by(_load(ca.cert_pem))
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False


def test_a_certificate_from_another_ca_of_the_same_name_does_not_chain(ca: CertificateAuthority) -> None:
    impostor = CertificateAuthority.new("envtest-ca")
    cert = _load(impostor.issue_serving(["127.0.0.1"]).cert_pem)
    with pytest.raises(InvalidSignature):
        cert.verify_directly_issued_by(_load(ca.cert_pem))


def test_serving_certificate_rejects_no_hosts_and_a_bare_string(ca: CertificateAuthority) -> None:
    with pytest.raises(ValueError, match="at least one host"):
        ca.issue_serving([])
    with pytest.raises(TypeError, match="not a single string"):
        ca.issue_serving("localhost")


def test_client_certificate_names_the_user_and_its_groups(ca: CertificateAuthority) -> None:
    cert = _load(ca.issue_client("admin", ["system:masters", "team-a"]).cert_pem)
    cert.verify_directly_issued_by(_load(ca.cert_pem))
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "admin"
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:masters",
        "team-a",
    ]
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]


def test_client_certificate_without_groups_has_no_organization(ca: CertificateAuthority) -> None:
    cert = _load(ca.issue_client("alice").cert_pem)
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME) == []


def test_tls_client_accepts_the_serving_certificate_for_its_ip_and_name(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    server = _server_context(tmp_path, ca.issue_serving(["127.0.0.1", "localhost"]))
    for hostname in ("127.0.0.1", "localhost"):
        _handshake(server, _client_context(ca.cert_pem), hostname)


def test_tls_client_rejects_a_host_the_certificate_does_not_name(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    server = _server_context(tmp_path, ca.issue_serving(["127.0.0.1"]))
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(server, _client_context(ca.cert_pem), "127.0.0.2")


def test_mutual_tls_server_sees_the_client_certificate_subject(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    server = _server_context(tmp_path, ca.issue_serving(["127.0.0.1"]), client_ca=ca.cert_pem)
    client = _client_context(ca.cert_pem)
    cert, key = ca.issue_client("admin", ["system:masters"]).write(tmp_path, "admin.crt", "admin.key")
    client.load_cert_chain(cert, key)
    peer = _handshake(server, client, "127.0.0.1").getpeercert()
    assert peer is not None
    subject = {k: v for rdn in peer["subject"] for k, v in rdn}
    assert subject == {"commonName": "admin", "organizationName": "system:masters"}


def test_write_puts_both_files_in_place_and_keeps_the_key_private(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    pair = ca.issue_client("admin")
    cert_path, key_path = pair.write(tmp_path / "new-dir", "a.crt", "a.key")
    assert cert_path.read_bytes() == pair.cert_pem
    assert key_path.read_bytes() == pair.key_pem
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600


def test_write_tightens_the_mode_of_an_existing_key_file(ca: CertificateAuthority, tmp_path: Path) -> None:
    (tmp_path / "a.key").write_bytes(b"old")
    (tmp_path / "a.key").chmod(0o644)
    _, key_path = ca.issue_client("admin").write(tmp_path, "a.crt", "a.key")
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert key_path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")


def test_the_ca_can_be_written_like_a_keypair(ca: CertificateAuthority, tmp_path: Path) -> None:
    cert_path, key_path = ca.write(tmp_path, "ca.crt", "ca.key")
    assert cert_path.read_bytes() == ca.cert_pem
    assert key_path.read_bytes() == ca.key_pem
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600


def test_rsa_keypair_public_half_matches_the_private_half(tmp_path: Path) -> None:
    pair = generate_rsa_keypair()
    private = serialization.load_pem_private_key(pair.private_key_pem, password=None)
    public = serialization.load_pem_public_key(pair.public_key_pem)
    assert isinstance(private, rsa.RSAPrivateKey)
    assert isinstance(public, rsa.RSAPublicKey)
    assert private.key_size == 2048
    assert public.public_numbers() == private.public_key().public_numbers()
    pub_path, key_path = pair.write(tmp_path, "sa.pub", "sa.key")
    assert pub_path.read_bytes() == pair.public_key_pem
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
