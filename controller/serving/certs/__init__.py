"""controller.serving.certs: self-managed webhook certificates.

Go origin: open-policy-agent cert-controller ``pkg/rotator``.

Module map:
- :mod:`controller.serving.certs.keypairs`: making the CA and the serving certificate, and checking a pair
  (pure: no I/O, no threads).
- :mod:`controller.serving.certs.rotator`: ``CertRotator``, the Runnable that keeps the Secret, the
  certificate directory and the webhook configurations' ``caBundle`` in step, and its readiness check.

The servers read the directory through :mod:`controller.serving.certwatcher`, so a rotation needs no restart.
"""

from __future__ import annotations

from controller.serving.certs.keypairs import KeyPair, create_ca, create_serving, problem_with
from controller.serving.certs.rotator import (
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
