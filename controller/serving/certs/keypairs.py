"""The self-managed CA and serving certificate: how they are made, and whether a pair is still good.

Go origin: open-policy-agent cert-controller ``pkg/rotator`` (``CreateCACert``, ``CreateCertPEM``,
``ValidCert``, ``buildArtifactsFromSecret``), the rotator upstream Kubeflow Trainer uses.

Guarantees:

- :func:`create_ca` makes a self-signed CA: RSA 2048, subject ``CN=<name>, O=<organization>``, SAN
  ``DNS:<name>``, ``basicConstraints: CA:TRUE, pathlen:0`` (critical), key usage ``digitalSignature,
  keyEncipherment, keyCertSign`` (critical), a subject key identifier.
- :func:`create_serving` makes a leaf signed by that CA: RSA 2048, ``CN=<first DNS name>`` (an empty
  subject and a critical SAN when the name is longer than the 64 characters a CN may hold), SAN every DNS
  name, ``CA:FALSE`` (critical), key usage ``digitalSignature, keyEncipherment`` (critical), extended key
  usage ``serverAuth``, the CA's key identifier.
- Both start one hour before ``now`` (clock skew between replicas and the API server, as upstream) and end
  ``validity`` after ``now``.
- Keys are PKCS#1 ``RSA PRIVATE KEY`` PEM, certificates ``CERTIFICATE`` PEM: what upstream writes and
  reads, so a Go replica and this one can adopt each other's Secret.
- :func:`problem_with` is upstream's ``ValidCert`` as a reason: it returns None when the certificate
  parses, its key matches it, it was issued and signed by the CA, it names ``dns_name``, it has the
  ``serverAuth`` usage when asked, and both it and the CA are valid at ``at`` (the rotator passes
  ``now + lookahead``); otherwise a sentence saying what is wrong (never key material).

Deliberately different from upstream: random serial numbers (upstream uses 0 and 1, which RFC 5280 forbids
for the first and makes every certificate of a CA share the second), ``pathlen:0`` and key identifiers.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "KEY_BITS",
    "KeyPair",
    "create_ca",
    "create_serving",
    "first_certificate",
    "load_key_pair",
    "problem_with",
]

KEY_BITS = 2048
_MAX_COMMON_NAME = 64
BACKDATE = dt.timedelta(hours=1)
"""How long before "now" a new certificate starts being valid (upstream: one hour)."""


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A certificate and its private key, parsed and as PEM. ``repr`` never shows the key."""

    certificate: x509.Certificate
    key: rsa.RSAPrivateKey
    cert_pem: bytes
    key_pem: bytes

    def __repr__(self) -> str:
        return (
            f"KeyPair(subject={self.certificate.subject.rfc4514_string()!r}, "
            f"not_after={self.certificate.not_valid_after_utc.isoformat()})"
        )


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)


def _key_pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,  # PKCS#1 "RSA PRIVATE KEY", as Go's rotator
        serialization.NoEncryption(),
    )


def _serial() -> int:
    return secrets.randbits(127) | 1  # positive, non-zero, at most 16 bytes (RFC 5280 §4.1.2.2)


def create_ca(name: str, organization: str, *, now: dt.datetime, validity: dt.timedelta) -> KeyPair:
    """A new self-signed CA valid from ``now - 1h`` to ``now + validity`` (see the module doc)."""
    key = _new_key()
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, name),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
        ]
    )
    public = key.public_key()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(public)
        .serial_number(_serial())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(
        certificate=certificate,
        key=key,
        cert_pem=certificate.public_bytes(serialization.Encoding.PEM),
        key_pem=_key_pem(key),
    )


def create_serving(
    ca: KeyPair, dns_names: Sequence[str], *, now: dt.datetime, validity: dt.timedelta
) -> KeyPair:
    """A new serving certificate for ``dns_names`` signed by ``ca`` (see the module doc)."""
    if not dns_names:
        raise ValueError("a serving certificate needs at least one DNS name")
    key = _new_key()
    # A common name holds at most 64 characters (RFC 5280 ub-common-name); a longer service name (a long
    # namespace) leaves the subject empty, and the SAN, then critical, names the certificate alone.
    fits = len(dns_names[0]) <= _MAX_COMMON_NAME
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0])] if fits else [])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(_serial())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=not fits)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False
        )
        .sign(ca.key, hashes.SHA256())
    )
    return KeyPair(
        certificate=certificate,
        key=key,
        cert_pem=certificate.public_bytes(serialization.Encoding.PEM),
        key_pem=_key_pem(key),
    )


def first_certificate(pem: bytes) -> x509.Certificate:
    """The first certificate of a PEM bundle (a ``ca.crt`` may hold the new CA and the one it replaces);
    raises ValueError when there is none."""
    certificates = x509.load_pem_x509_certificates(pem)
    if not certificates:
        raise ValueError("no certificate in PEM data")
    return certificates[0]


def load_key_pair(cert_pem: bytes, key_pem: bytes) -> KeyPair:
    """Parses a certificate (the first of the bundle) and its RSA key; ValueError when either does not parse
    or they do not belong together. The message never contains key material."""
    try:
        certificate = first_certificate(cert_pem)
    except ValueError as exc:
        raise ValueError("the certificate does not parse") from exc
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError("the private key does not parse") from exc
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("the private key is not an RSA key")
    if key.public_key().public_numbers() != certificate.public_key().public_numbers():  # type: ignore[union-attr]
        raise ValueError("the private key does not match the certificate")
    return KeyPair(certificate=certificate, key=key, cert_pem=cert_pem, key_pem=key_pem)


def _valid_at(certificate: x509.Certificate, at: dt.datetime) -> bool:
    return certificate.not_valid_before_utc <= at <= certificate.not_valid_after_utc


def problem_with(
    ca_pem: bytes,
    cert_pem: bytes,
    key_pem: bytes,
    *,
    dns_name: str,
    at: dt.datetime,
    server_auth: bool,
) -> str | None:
    """None if ``cert_pem``/``key_pem`` is a good pair issued by the first CA of ``ca_pem`` for ``dns_name``
    and valid at ``at`` (the CA too); else what is wrong (see the module doc)."""
    if not ca_pem or not cert_pem or not key_pem:
        return "empty certificate or key"
    try:
        ca = first_certificate(ca_pem)
    except ValueError:
        return "the CA certificate does not parse"
    try:
        pair = load_key_pair(cert_pem, key_pem)
    except ValueError as exc:
        return str(exc)
    certificate = pair.certificate
    try:
        certificate.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "the certificate was not issued by the CA"
    try:
        constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return "the CA certificate is not a CA"
    if not constraints.ca:
        return "the CA certificate is not a CA"
    if not _valid_at(ca, at):
        return f"the CA is not valid at {at.isoformat()}"
    if not _valid_at(certificate, at):
        return f"the certificate is not valid at {at.isoformat()}"
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns_names = names.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        dns_names = []
    if dns_name.lower() not in {n.lower() for n in dns_names}:
        return f"the certificate does not name {dns_name}"
    if server_auth:
        try:
            usages = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        except x509.ExtensionNotFound:
            usages = None  # Go: no EKU extension means any usage
        if (
            usages is not None
            and ExtendedKeyUsageOID.SERVER_AUTH not in usages
            and (ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE not in usages)
        ):
            return "the certificate is not for server authentication"
    return None
