"""controller.serving.webhook: admission webhooks served over HTTPS by a manager Runnable.

Go origin: controller-runtime ``pkg/webhook`` (server) and ``pkg/webhook/admission``.

Module map:
- :mod:`controller.serving.webhook.admission`: the AdmissionReview wire format, the ``Handler`` protocol, the
  responses (``allowed``, ``denied``, ``errored``, ``patched``, warnings) and ``json_patch``.
- :mod:`controller.serving.webhook.server`: ``WebhookServer`` (register paths, HTTPS with certificates
  reloaded from a directory, bounded connections, readiness check).
- :mod:`controller.serving.webhook.metrics`: ``controller_runtime_webhook_*``.

Certificates come from :mod:`controller.serving.certwatcher`; TLS options from
:mod:`controller.serving.tlsconfig`.
"""

from __future__ import annotations

from controller.serving.webhook.admission import (
    AdmissionRequest,
    AdmissionResponse,
    Handler,
    allowed,
    denied,
    errored,
    json_patch,
    patched,
)
from controller.serving.webhook.server import (
    DEFAULT_CERT_DIR,
    DEFAULT_PORT,
    CertSource,
    WebhookServer,
    WebhookServerError,
)

__all__ = [
    "DEFAULT_CERT_DIR",
    "DEFAULT_PORT",
    "AdmissionRequest",
    "AdmissionResponse",
    "CertSource",
    "Handler",
    "WebhookServer",
    "WebhookServerError",
    "allowed",
    "denied",
    "errored",
    "json_patch",
    "patched",
]
