"""controller.webhook: admission webhooks served over HTTPS by a manager Runnable.

Go origin: controller-runtime ``pkg/webhook`` (server) and ``pkg/webhook/admission``.

Module map:
- :mod:`controller.webhook.admission`: the AdmissionReview wire format, the ``Handler`` protocol, the
  responses (``allowed``, ``denied``, ``errored``, ``patched``, warnings) and ``json_patch``.
- :mod:`controller.webhook.server`: ``WebhookServer`` (register paths, HTTPS with certificates reloaded
  from a directory, bounded connections, readiness check).
- :mod:`controller.webhook.metrics`: ``controller_runtime_webhook_*``.

Certificates come from :mod:`controller.certwatcher`; TLS options from :mod:`controller.tlsconfig`.
"""

from __future__ import annotations

from controller.webhook.admission import (
    AdmissionRequest,
    AdmissionResponse,
    Handler,
    allowed,
    denied,
    errored,
    json_patch,
    patched,
)
from controller.webhook.server import (
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
