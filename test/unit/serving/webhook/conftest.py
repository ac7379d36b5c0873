"""Fixtures for the webhook server tests: a throwaway CA, a serving certificate for 127.0.0.1 in a cert dir,
and HTTPS helpers that trust the CA."""

from __future__ import annotations

import http.client
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from controller.envtest.certs import CertificateAuthority, KeyPair


@dataclass
class Certs:
    ca: CertificateAuthority
    ca_file: Path
    cert_dir: Path

    def issue(self) -> KeyPair:
        return self.ca.issue_serving(["127.0.0.1"])

    def install(self, pair: KeyPair) -> None:
        """Writes the pair as a rotator would: new files renamed over the old ones (cert, then key)."""
        staging = self.cert_dir.parent / "staging"
        pair.write(staging, "tls.crt", "tls.key")
        os.replace(staging / "tls.crt", self.cert_dir / "tls.crt")
        os.replace(staging / "tls.key", self.cert_dir / "tls.key")

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    ca = CertificateAuthority.new("webhook-test-ca")
    ca_file, _ = ca.write(tmp_path / "ca", "ca.crt", "ca.key")
    cert_dir = tmp_path / "serving-certs"
    cert_dir.mkdir()
    return Certs(ca=ca, ca_file=ca_file, cert_dir=cert_dir)


def review(
    operation: str = "CREATE", uid: str = "uid-1", api_version: str = "admission.k8s.io/v1", **request: object
) -> bytes:
    body = {
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "request": {"uid": uid, "operation": operation, **request},
    }
    return orjson.dumps(body)


def post(
    address: tuple[str, int],
    context: ssl.SSLContext,
    path: str,
    body: bytes,
    *,
    content_type: str = "application/json",
    method: str = "POST",
) -> tuple[int, bytes]:
    conn = http.client.HTTPSConnection(address[0], address[1], context=context, timeout=10)
    try:
        conn.request(method, path, body, {"Content-Type": content_type})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()
