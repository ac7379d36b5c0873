"""A throwaway certificate authority for test control planes: serving, client and signing keys.

Go origin: controller-runtime ``pkg/internal/testing/certs`` (the "tiny CA" envtest uses) and the
service-account keypair of ``pkg/internal/testing/controlplane/auth.go``. Both tiers use it: Tier 1
(``controller.envtest``) for kube-apiserver's serving certificate, the admin client certificate and the
service-account signing key; Tier 2 (``hack/cluster.py``) for webhook serving certificates.

Guarantees:

- Every certificate is signed by the CA that issued it and verifies against the CA certificate alone (the
  chain has one link).
- Serving certificates carry the requested hosts as subject alternative names: entries that parse as IP
  addresses become IP SANs, everything else becomes a DNS SAN. They are valid for server authentication only.
- Client certificates carry the user as the subject common name and the groups as organization attributes,
  which is how kube-apiserver's x509 authenticator reads them. They are valid for client authentication only.
- Certificate keys are ECDSA P-256; the service-account key is RSA 2048 (kube-apiserver accepts ECDSA too,
  but RSA/RS256 is what every token verifier supports). Private keys are PKCS#8 PEM and are written with
  mode 0600.
- Validity starts one hour in the past (clock skew between processes) and lasts a year.

Deliberately missing: revocation, intermediate CAs, loading an existing CA from disk, and any use outside
tests. These keys live in temporary directories and must never protect anything real.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# How long issued certificates are valid. Generous because a Tier 2 cluster may stay up for days.
_VALIDITY = _dt.timedelta(days=365)
# Certificates start being valid this long before "now", so a process whose clock is slightly behind
# ours does not reject them as not yet valid.
_BACKDATE = _dt.timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A PEM certificate and its PEM private key."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: str | os.PathLike[str], cert_name: str, key_name: str) -> tuple[Path, Path]:
        """Write the certificate and key into ``directory`` (created if missing); return both paths.

        The key file is created with mode 0600.
        """
        return _write_pair(Path(directory), (cert_name, self.cert_pem), (key_name, self.key_pem))


@dataclass(frozen=True, slots=True)
class SigningKeyPair:
    """A PEM public key and its PEM private key, for signing tokens rather than for TLS."""

    public_key_pem: bytes
    private_key_pem: bytes

    def write(
        self, directory: str | os.PathLike[str], public_name: str, private_name: str
    ) -> tuple[Path, Path]:
        """Write the public and private key into ``directory`` (created if missing); return both paths.

        The private key file is created with mode 0600.
        """
        return _write_pair(
            Path(directory), (public_name, self.public_key_pem), (private_name, self.private_key_pem)
        )


class CertificateAuthority:
    """A self-signed CA that issues serving and client certificates.

    Create one with :meth:`new`. ``cert_pem`` is what clients and servers are told to trust (a kubeconfig's
    ``certificate-authority-data``, kube-apiserver's ``--client-ca-file``, a webhook's ``caBundle``).
    """

    __slots__ = ("_certificate", "_key", "cert_pem", "key_pem")

    def __init__(self, certificate: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
        self._certificate = certificate
        self._key = key
        self.cert_pem: bytes = certificate.public_bytes(serialization.Encoding.PEM)
        self.key_pem: bytes = _private_pem(key)

    @classmethod
    def new(cls, common_name: str) -> CertificateAuthority:
        """Generate a fresh key and a self-signed CA certificate named ``common_name``."""
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        public = key.public_key()
        certificate = (
            _certificate_builder(name, name, public, ca=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(certificate, key)

    def write(self, directory: str | os.PathLike[str], cert_name: str, key_name: str) -> tuple[Path, Path]:
        """Write the CA certificate and key into ``directory`` (created if missing); return both paths.

        The key file is created with mode 0600.
        """
        return KeyPair(self.cert_pem, self.key_pem).write(directory, cert_name, key_name)

    def issue_serving(self, hosts: Sequence[str], common_name: str | None = None) -> KeyPair:
        """Issue a server certificate for ``hosts`` (IP addresses and DNS names).

        ``common_name`` defaults to the first host. Raises ValueError when ``hosts`` is empty.
        """
        if isinstance(hosts, str):
            raise TypeError("hosts must be a sequence of host names, not a single string")
        if not hosts:
            raise ValueError("a serving certificate needs at least one host")
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        return self._issue(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name or hosts[0])]),
            ExtendedKeyUsageOID.SERVER_AUTH,
            x509.SubjectAlternativeName(sans),
        )

    def issue_client(self, common_name: str, organizations: Sequence[str] = ()) -> KeyPair:
        """Issue a client certificate for user ``common_name`` in groups ``organizations``."""
        if isinstance(organizations, str):
            raise TypeError("organizations must be a sequence of group names, not a single string")
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
        return self._issue(x509.Name(attributes), ExtendedKeyUsageOID.CLIENT_AUTH, None)

    def _issue(
        self,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        sans: x509.SubjectAlternativeName | None,
    ) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            _certificate_builder(subject, self._certificate.subject, key.public_key(), ca=False)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False
            )
        )
        if sans is not None:
            builder = builder.add_extension(sans, critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        return KeyPair(certificate.public_bytes(serialization.Encoding.PEM), _private_pem(key))

    def __repr__(self) -> str:
        return f"CertificateAuthority(subject={self._certificate.subject.rfc4514_string()!r})"


def _certificate_builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, *, ca: bool
) -> x509.CertificateBuilder:
    """What every certificate here has: a random serial, the validity window, and a CA's or a leaf's basic
    constraints and key usage (digital signature, plus certificate and CRL signing for a CA)."""
    now = _dt.datetime.now(_dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )


def generate_rsa_keypair(bits: int = 2048) -> SigningKeyPair:
    """Generate an RSA keypair, e.g. for kube-apiserver's service-account token signing."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return SigningKeyPair(public, _private_pem(key))


def _private_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write_pair(directory: Path, public: tuple[str, bytes], secret: tuple[str, bytes]) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    public_path = directory / public[0]
    public_path.write_bytes(public[1])
    secret_path = directory / secret[0]
    # Create with 0600 from the start rather than chmod after writing, so the key is never world-readable.
    fd = os.open(secret_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(secret[1])
    os.chmod(secret_path, 0o600)  # O_CREAT's mode does not apply when the file already existed
    return public_path, secret_path
