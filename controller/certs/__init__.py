"""controller.certs: self-managed webhook certificates.

Go origin: open-policy-agent cert-controller ``pkg/rotator``.

Module map:
- :mod:`controller.certs.keypairs`: making the CA and the serving certificate, and checking a pair
  (pure: no I/O, no threads).
- :mod:`controller.certs.rotator`: ``CertRotator``, the Runnable that keeps the Secret, the certificate
  directory and the webhook configurations' ``caBundle`` in step, and its readiness check.

The servers read the directory through :mod:`controller.certwatcher`, so a rotation needs no restart.
"""

from __future__ import annotations

from controller.certs.keypairs import KeyPair, create_ca, create_serving, problem_with
from controller.certs.rotator import (
    CertRotator,
    RotationError,
    RotatorOptions,
    WebhookConfigurationRef,
    ca_bundle_patch,
    plan,
)

__all__ = [
    "CertRotator",
    "KeyPair",
    "RotationError",
    "RotatorOptions",
    "WebhookConfigurationRef",
    "ca_bundle_patch",
    "create_ca",
    "create_serving",
    "plan",
    "problem_with",
]
