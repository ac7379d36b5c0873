"""controller.serving.certs.keypairs: what the CA and the serving certificate contain, and when a pair is good
(cert-controller's ``CreateCACert``, ``CreateCertPEM`` and ``ValidCert``)."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controller.serving.certs.keypairs import create_ca, create_serving, load_key_pair, problem_with

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
YEAR = dt.timedelta(days=365)
DNS = "kubeflow-trainer-controller-manager.kubeflow-system.svc"


@pytest.fixture(scope="module")
def ca():  # type: ignore[no-untyped-def]
    return create_ca("kubeflow-trainer-ca", "kubeflow-trainer", now=NOW, validity=10 * YEAR)


@pytest.fixture(scope="module")
def serving(ca):  # type: ignore[no-untyped-def]
    return create_serving(ca, [DNS, "extra.example"], now=NOW, validity=YEAR)


def test_the_ca_is_a_self_signed_ca_named_after_the_trainer(ca) -> None:  # type: ignore[no-untyped-def]
    cert = ca.certificate
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kubeflow-trainer-ca"
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "kubeflow-trainer"
    assert cert.issuer == cert.subject
    cert.verify_directly_issued_by(cert)
    constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca and constraints.value.path_length == 0
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.digital_signature and not usage.crl_sign
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["kubeflow-trainer-ca"]
    assert isinstance(ca.key, rsa.RSAPrivateKey) and ca.key.key_size == 2048
    assert ca.key_pem.startswith(b"-----BEGIN RSA PRIVATE KEY-----")  # PKCS#1, as Go's rotator


def test_validity_starts_an_hour_early_and_lasts_the_requested_time(ca, serving) -> None:  # type: ignore[no-untyped-def]
    for pair, validity in ((ca, 10 * YEAR), (serving, YEAR)):
        assert pair.certificate.not_valid_before_utc == NOW - dt.timedelta(hours=1)
        assert pair.certificate.not_valid_after_utc == NOW + validity


def test_the_serving_certificate_is_a_server_leaf_for_the_service_names(ca, serving) -> None:  # type: ignore[no-untyped-def]
    cert = serving.certificate
    cert.verify_directly_issued_by(ca.certificate)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == DNS
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [DNS, "extra.example"]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and usage.key_encipherment and not usage.key_cert_sign
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH
    ]
    assert cert.serial_number != ca.certificate.serial_number and cert.serial_number > 0


def test_repr_never_shows_the_key(serving) -> None:  # type: ignore[no-untyped-def]
    assert "PRIVATE" not in repr(serving) and DNS in repr(serving)


def test_a_good_pair_has_no_problem(ca, serving) -> None:  # type: ignore[no-untyped-def]
    assert (
        problem_with(ca.cert_pem, serving.cert_pem, serving.key_pem, dns_name=DNS, at=NOW, server_auth=True)
        is None
    )
    # The CA checked as its own issuer, as the rotator does.
    assert (
        problem_with(
            ca.cert_pem, ca.cert_pem, ca.key_pem, dns_name="kubeflow-trainer-ca", at=NOW, server_auth=False
        )
        is None
    )


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("empty", "empty"),
        ("garbage CA", "CA certificate does not parse"),
        ("garbage cert", "certificate does not parse"),
        ("another key", "does not match"),
        ("another CA", "not issued by the CA"),
        ("expired at the lookahead", "not valid at"),
        ("not yet valid", "not valid at"),
        ("another name", "does not name"),
    ],
)
def test_problems_are_named(ca, serving, case: str, expected: str) -> None:  # type: ignore[no-untyped-def]
    ca_pem, cert_pem, key_pem, dns, at = ca.cert_pem, serving.cert_pem, serving.key_pem, DNS, NOW
    if case == "empty":
        cert_pem = b""
    elif case == "garbage CA":
        ca_pem = b"not a pem"
    elif case == "garbage cert":
        cert_pem = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    elif case == "another key":
        key_pem = ca.key_pem
    elif case == "another CA":
        ca_pem = create_ca("other", "other", now=NOW, validity=YEAR).cert_pem
    elif case == "expired at the lookahead":
        at = NOW + YEAR + dt.timedelta(seconds=1)
    elif case == "not yet valid":
        at = NOW - dt.timedelta(hours=2)
    elif case == "another name":
        dns = "other.kubeflow-system.svc"
    problem = problem_with(ca_pem, cert_pem, key_pem, dns_name=dns, at=at, server_auth=True)
    assert problem is not None and expected in problem
    assert "PRIVATE KEY" not in problem


def test_a_client_only_certificate_is_not_a_serving_certificate(ca) -> None:  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives import hashes, serialization

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, DNS)]))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(7)
        .not_valid_before(NOW - dt.timedelta(hours=1))
        .not_valid_after(NOW + YEAR)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(DNS)]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    assert problem_with(ca.cert_pem, cert_pem, key_pem, dns_name=DNS, at=NOW, server_auth=True) == (
        "the certificate is not for server authentication"
    )
    assert problem_with(ca.cert_pem, cert_pem, key_pem, dns_name=DNS, at=NOW, server_auth=False) is None


def test_load_key_pair_reads_the_first_certificate_of_a_bundle(ca, serving) -> None:  # type: ignore[no-untyped-def]
    pair = load_key_pair(ca.cert_pem + serving.cert_pem, ca.key_pem)
    assert pair.certificate == ca.certificate
    with pytest.raises(ValueError, match="does not match"):
        load_key_pair(serving.cert_pem, ca.key_pem)


def test_a_service_name_longer_than_a_common_name_allows_is_named_by_the_san_alone(ca) -> None:  # type: ignore[no-untyped-def]
    long_name = "kubeflow-trainer-controller-manager." + "n" * 60 + ".svc"
    pair = create_serving(ca, [long_name], now=NOW, validity=YEAR)
    assert pair.certificate.subject == x509.Name([])
    san = pair.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert san.critical and san.value.get_values_for_type(x509.DNSName) == [long_name]
    assert (
        problem_with(ca.cert_pem, pair.cert_pem, pair.key_pem, dns_name=long_name, at=NOW, server_auth=True)
        is None
    )
