"""controller.trainer.statusserver: training pods report their progress into ``status.trainerStatus`` of their
TrainJob.

Go origin: kubeflow/trainer ``pkg/statusserver`` (``server.go``: the route, the answers and the
server-side apply; ``middleware.go``: the body limit and panic recovery; ``auth.go``: who may write;
``setup.go``: its own API client with ``statusServer.qps``/``burst``), behind the ``TrainJobStatus``
feature gate. The pods get the URL, a projected token and the CA from the ``TrainJobStatus`` plugin
(``runtime.plugins.trainjobstatus``); the Kubeflow SDK's ``update_trainjob_status`` sends the request.

The request: ``POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/<name>/status`` with
``Authorization: Bearer <token>`` and the JSON body ``{"trainerStatus": {"progressPercentage": 42,
"estimatedRemainingSeconds": 120, "metrics": [{"name": "loss", "value": "0.12"}], "lastUpdatedTime":
"2026-01-01T00:00:00Z"}}`` (``UpdateTrainJobStatusRequest``).

The answers, checked in this order (every error body is a ``metav1.Status`` in JSON, as upstream's):

=====  =========================  ========================================================================
code   reason / message           when
=====  =========================  ========================================================================
413    RequestEntityTooLarge /    ``Content-Length`` above 64 KiB (:data:`MAX_BODY_BYTES`), before the body
       ``Payload too large``      is read, whatever the path
404    NotFound / ``Not found``   any other path (namespace and name must be valid Kubernetes names)
405    MethodNotAllowed /         the route with another method (``Allow: POST``)
       ``Method not allowed``
403    Forbidden / ``Forbidden``  no bearer token, or the API server's TokenReview does not find it valid
                                  for the audience ``trainer.kubeflow.org/v1alpha1/namespaces/<ns>/
                                  trainjobs/<name>/status``, or the token is not a ServiceAccount's of
                                  namespace ``<ns>``
500    InternalError /            the TokenReview could not be made (API server down, RBAC)
       ``Internal error``
422    Invalid /                  the body is not an ``UpdateTrainJobStatusRequest`` (Go's decoding:
       ``Invalid payload``        wrong JSON types, a fraction or an out-of-range int32, a time that is not
                                  RFC 3339)
200    (the request echoed)       ``trainerStatus`` absent or null: nothing is written
422    Invalid / the API          the API server refuses the status (schema: progress 0..100, remaining
       server's message           seconds >= 0, at most 256 metrics, names and values 1..64 characters,
                                  ``lastUpdatedTime`` required); the message names the TrainJob
404    NotFound /                 the TrainJob does not exist (nothing is created)
       ``Train job not found``
500    InternalError /            any other API error
       ``Internal error``
200    (the request echoed)       written: the body as Go re-encodes it (times in UTC, whole seconds)
=====  =========================  ========================================================================

The write is a server-side apply of ``status.trainerStatus`` alone on the ``status`` subresource, field
manager ``trainer-status``, ``force``: the field manager owns the whole ``trainerStatus`` it last sent, so a
later request **replaces** it (a field left out is removed), and the controller's own status writes
(conditions, jobsStatus) are untouched. Validation is the API server's, as upstream: its schema is the one
truth, and its 422 names the field and the TrainJob.

Guarantees:

- :meth:`StatusHandler.serve` is a pure function of the request apart from its two collaborators (the
  authenticator and the status writer, both Protocols); it never raises, and no input makes it answer 5xx
  except a failing API server. :meth:`StatusHandler.check_head` gives the answers that need no body, so the
  server never reads a body it will refuse.
- :class:`StatusServer` is a manager Runnable that **does not need leader election** (every replica
  serves, as upstream), on :class:`controller.serving.httpserver.HTTPServer` within :data:`LIMITS`: TLS 1.2 or
  later from a certificate source asked per connection (a rotated certificate is served from the next
  connection), at most :data:`MAX_CONNECTIONS` connections at once on named threads
  (``status-server/conn``; more wait in the listen queue), each with a 10 s deadline for its handshake,
  headers and body however it paces them (upstream's ``ReadTimeout``), 10 s to write the answer, headers
  at most 1 MiB (431). Keep-alive as upstream's Go server: a connection may carry requests one after
  another and is closed after 10 s idle (Go's ``IdleTimeout`` falls back to the ``ReadTimeout``); with every
  slot taken, the longest-idle connection makes room for a waiting one. The server's own refusals (a
  request it cannot parse, a late body) are ``metav1.Status`` bodies too, and close the connection. Stop
  joins every thread.
- Tokens are never logged. The production wiring (:func:`setup_status_server`) reviews them through
  :class:`~controller.serving.authentication.CachingAuthenticator`: an answer, yes or no, is reused for 10 s
  at
  most (never past the token's own expiry), so a pod reporting every second costs one TokenReview per
  10 s.

Deliberately different from upstream (see ``docs/status-server.md``):

- The token is checked by a TokenReview (:mod:`controller.serving.authentication`) instead of verifying the
  JWT locally against the OIDC discovery document and keys of the issuer found in the controller's own token.
  Same checks (signature, expiry, audience, namespace), plus the API server's check that the token's Pod
  still exists; no JWT library; and it works wherever the API server does (outside a Pod, with any issuer).
- A wrong method on the route is 405 (upstream: 404, from its catch-all route).
- A namespace or name that is not a valid Kubernetes name is 404 at routing (upstream routes any segment
  and lets the token check or the API server refuse it).
- Trailing data after the JSON value is ``Invalid payload`` (Go's decoder ignores it); a chunked body is
  411 (the SDK, through ``requests``, sends a ``Content-Length``); a body that does not arrive within the
  read timeout is 408.
- Binds the Pod IP (or loopback), never every interface.

Deliberately missing: HTTP/2, and metrics of its own.

The package: :mod:`.request` (route and body), :mod:`.handler` (who may write, the answers, the write),
:mod:`.server` (the Runnable) and :mod:`.setup` (the wiring into a manager).
"""

from __future__ import annotations

from controller.trainer.statusserver.handler import (
    FIELD_MANAGER,
    MAX_BODY_BYTES,
    Authenticator,
    Request,
    Response,
    StatusHandler,
    StatusWriter,
    status_response,
)
from controller.trainer.statusserver.request import (
    InvalidPayload,
    decode_update_request,
    encode_update_request,
    route,
    status_apply_body,
)
from controller.trainer.statusserver.server import DEFAULT_PORT, StatusServer, StatusServerError
from controller.trainer.statusserver.setup import client_for, setup_status_server

__all__ = [
    "DEFAULT_PORT",
    "FIELD_MANAGER",
    "MAX_BODY_BYTES",
    "Authenticator",
    "InvalidPayload",
    "Request",
    "Response",
    "StatusHandler",
    "StatusServer",
    "StatusServerError",
    "StatusWriter",
    "client_for",
    "decode_update_request",
    "encode_update_request",
    "route",
    "setup_status_server",
    "status_apply_body",
    "status_response",
]
