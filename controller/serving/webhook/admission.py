"""Admission webhooks: the AdmissionReview wire format, the :class:`Handler` protocol, and the responses a
handler gives (allowed, denied, errored, patched; with warnings).

Go origin: controller-runtime ``pkg/webhook/admission`` (``Request``, ``Response``, ``Handler``, ``Allowed``,
``Denied``, ``Errored``, ``Patched``, ``PatchResponseFromRaw``, ``Response.Complete``, ``Webhook.Handle`` and
``ServeHTTP`` of ``http.go``) over ``k8s.io/api/admission/v1``.

Guarantees:

- :meth:`Webhook.serve` turns an HTTP body into an HTTP answer and never raises. A body that is not an
  ``AdmissionReview`` (not JSON, not an object, ``apiVersion`` other than ``admission.k8s.io/v1`` or
  ``v1beta1``, ``kind`` other than ``AdmissionReview``, no ``request``, no ``request.uid``, an unknown
  ``operation``, an ``object`` that is not a JSON object, an ``object`` or ``oldObject`` whose collections
  nest more than :data:`MAX_OBJECT_DEPTH` levels deep) or a content type other than ``application/json``
  is answered with HTTP **400** and an ``AdmissionReview`` whose ``response.status`` says why, naming the
  field (``request.uid``, ``request.object.spec...``). JSON nested deeper than the decoder takes (1024
  levels) is "not JSON". (The size limit, 413, and the HTTP method, 405, are the server's.) So a handler
  only ever sees objects that every recursive walk and JSON encoder in this process can handle.
- A well-formed review always gets HTTP 200 and an ``AdmissionReview`` in the request's ``apiVersion``
  whose ``response.uid`` is the request's; the verdict is in ``response.allowed`` and ``response.status``.
  :func:`denied` is controller-runtime's ``Denied``: ``code: 403``, ``reason: Forbidden``; the API server
  shows it as ``admission webhook "<name>" denied the request: <message>``.
- A handler that raises gets ``allowed: false``, ``code: 500`` and the exception's text (Go recovers a
  panic the same way), and ``controller_runtime_webhook_panics_total`` counts it.
- A patch response carries a JSON Patch (RFC 6902), base64-encoded by the wire format, with
  ``patchType: JSONPatch``; :func:`json_patch` computes one from two objects, :func:`patched` wraps it.
- Values are frozen dataclasses; the request's objects are decoded dicts the handler must not mutate
  (copy first).

Deliberately missing: the typed ``Defaulter``/``Validator`` adapters (a handler here is one method over the
decoded request), ``WithContextFunc`` and the per-request logger constructor.
"""

from __future__ import annotations

import base64
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import orjson
import structlog

import controller.serving.webhook.metrics as webhook_metrics

__all__ = [
    "ADMISSION_API_VERSIONS",
    "MAX_OBJECT_DEPTH",
    "OPERATIONS",
    "AdmissionRequest",
    "AdmissionResponse",
    "BadReview",
    "HTTPAnswer",
    "Handler",
    "Webhook",
    "allowed",
    "decode_review",
    "denied",
    "encode_review",
    "errored",
    "json_patch",
    "patched",
]

_log = structlog.get_logger("controller.serving.webhook.admission")

ADMISSION_API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
MAX_OBJECT_DEPTH = 128
"""The most levels of nested collections an object may have (the Trainer CRDs' deepest field is 47 levels
down; trainer-render's YAML reader has the same bound). Deeper objects are refused before a handler runs:
our JSON encoder stops at 255 levels, Python's recursion at about 1000."""
_PATH_SEGMENTS_SHOWN = 12
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
_JSON = "application/json"


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionRequest:
    """``admission/v1`` ``AdmissionRequest``: what the API server asks about (the fields handlers read)."""

    uid: str
    operation: str
    """``CREATE``, ``UPDATE``, ``DELETE`` or ``CONNECT``."""
    kind: Mapping[str, str] = field(default_factory=dict)
    """``{group, version, kind}`` of ``object``."""
    resource: Mapping[str, str] = field(default_factory=dict)
    sub_resource: str = ""
    name: str = ""
    namespace: str = ""
    user_info: Mapping[str, Any] = field(default_factory=dict)
    object: Mapping[str, Any] | None = None
    """The new object (CREATE, UPDATE); None for DELETE. Read-only by contract."""
    old_object: Mapping[str, Any] | None = None
    """The existing object (UPDATE, DELETE); None for CREATE. Read-only by contract."""
    dry_run: bool = False
    api_version: str = ADMISSION_API_VERSIONS[0]
    """The ``apiVersion`` of the review it came in, which the answer repeats."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionResponse:
    """``admission/v1`` ``AdmissionResponse`` (without ``uid``: :func:`encode_review` adds the request's)."""

    allowed: bool
    code: int = 200
    reason: str = ""
    message: str = ""
    warnings: tuple[str, ...] = ()
    patch: tuple[Mapping[str, Any], ...] = ()
    """JSON Patch operations; empty means no patch (``patchType`` is then left out)."""

    def with_warnings(self, *warnings: str) -> AdmissionResponse:
        """This response with ``warnings`` appended (Go ``Response.WithWarnings``)."""
        return replace(self, warnings=self.warnings + tuple(warnings))


class Handler(Protocol):
    """One admission webhook's logic (controller-runtime ``admission.Handler``).

    ``handle`` gets a decoded request and returns a verdict. It runs on the server's connection thread, with
    no lock held; it may raise (the caller answers 500), but should answer :func:`errored` or :func:`denied`.
    """

    def handle(self, request: AdmissionRequest) -> AdmissionResponse: ...


def allowed(message: str = "") -> AdmissionResponse:
    """Admit (``code: 200``)."""
    return AdmissionResponse(allowed=True, code=200, message=message)


def denied(message: str) -> AdmissionResponse:
    """Reject as controller-runtime's ``Denied``: ``code: 403``, ``reason: Forbidden``, ``message``."""
    return AdmissionResponse(allowed=False, code=403, reason="Forbidden", message=message)


def errored(code: int, message: str) -> AdmissionResponse:
    """Reject because the request could not be handled (Go ``Errored``: a code, a message, no reason)."""
    return AdmissionResponse(allowed=False, code=code, message=message)


def patched(operations: Sequence[Mapping[str, Any]], message: str = "") -> AdmissionResponse:
    """Admit with a JSON Patch (Go ``Patched``); no operations is a plain :func:`allowed`."""
    return AdmissionResponse(allowed=True, code=200, message=message, patch=tuple(operations))


# --- JSON Patch ---------------------------------------------------------------------------------------------


def _pointer(parent: str, token: str | int) -> str:
    text = str(token).replace("~", "~0").replace("/", "~1")
    return f"{parent}/{text}"


def _diff(path: str, old: Any, new: Any, out: list[dict[str, Any]]) -> None:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in old:
            if key not in new:
                out.append({"op": "remove", "path": _pointer(path, key)})
        for key, value in new.items():
            if key not in old:
                out.append({"op": "add", "path": _pointer(path, key), "value": value})
            else:
                _diff(_pointer(path, key), old[key], value, out)
        return
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            _diff(_pointer(path, index), a, b, out)
        return
    if type(old) is not type(new) or old != new:
        out.append({"op": "replace", "path": path, "value": new})


def json_patch(original: Mapping[str, Any], current: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A JSON Patch that turns ``original`` into ``current``: ``add``/``remove`` per member of an object,
    ``replace`` for a changed value or a list whose length changed; ``[]`` when they are equal."""
    out: list[dict[str, Any]] = []
    _diff("", original, current, out)
    return out


# --- the wire -----------------------------------------------------------------------------------------------


class BadReview(ValueError):
    """The body is not an AdmissionReview this server can answer; ``code`` is the HTTP status (4xx)."""

    def __init__(
        self, code: int, message: str, *, uid: str = "", api_version: str = ADMISSION_API_VERSIONS[0]
    ):
        super().__init__(message)
        self.code = code
        self.uid = uid
        self.api_version = api_version


def _too_deep(value: Any, depth: int) -> list[str | int] | None:
    """The path (innermost first) to a collection more than :data:`MAX_OBJECT_DEPTH` levels below the
    object, or None. Recursion is bounded by the limit itself."""
    if depth > MAX_OBJECT_DEPTH:
        return []
    items: Any
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, child in items:
        if isinstance(child, (dict, list)):
            found = _too_deep(child, depth + 1)
            if found is not None:
                found.append(key)
                return found
    return None


_SHOWN_CHARS = 64
"""How much of a value a message repeats: a client cannot make an answer grow with what it sent."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _field_path(prefix: str, segments: Sequence[str | int]) -> str:
    out = prefix
    for segment in segments[:_PATH_SEGMENTS_SHOWN]:
        out += f"[{segment}]" if isinstance(segment, int) else f".{str(segment)[:_SHOWN_CHARS]}"
    return out + ("..." if len(segments) > _PATH_SEGMENTS_SHOWN else "")


def _object_field(
    request: Mapping[str, Any], key: str, uid: str, api_version: str
) -> Mapping[str, Any] | None:
    value = request.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise BadReview(400, f"request.{key} must be a JSON object", uid=uid, api_version=api_version)
    deep = _too_deep(value, 1)
    if deep is not None:
        where = _field_path(f"request.{key}", deep[::-1])
        raise BadReview(
            400,
            f"{where}: collections nested more than {MAX_OBJECT_DEPTH} levels deep",
            uid=uid,
            api_version=api_version,
        )
    return value


def _string_map(value: Any) -> Mapping[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items() if isinstance(v, str)}


def decode_review(body: bytes, content_type: str) -> AdmissionRequest:
    """The request of an AdmissionReview body; raises :class:`BadReview` (400) for anything else."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type != _JSON:
        raise BadReview(400, f"contentType={content_type or '<none>'}, expected {_JSON}")
    if not body:
        raise BadReview(400, "request body is empty")
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadReview(400, f"the body is not JSON: {exc}") from exc
    if not isinstance(review, dict):
        raise BadReview(400, "the body is not a JSON object")
    api_version, kind = review.get("apiVersion"), review.get("kind")
    if api_version not in ADMISSION_API_VERSIONS or kind != "AdmissionReview":
        raise BadReview(
            400,
            f"expected an AdmissionReview of {' or '.join(ADMISSION_API_VERSIONS)}, got kind "
            f"{_shown(kind)} of apiVersion {_shown(api_version)}",
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadReview(400, "the AdmissionReview has no request", api_version=api_version)
    uid = request.get("uid")
    if uid is not None and not isinstance(uid, str):
        raise BadReview(400, f"request.uid must be a string, got {_shown(uid)}", api_version=api_version)
    if not uid:
        raise BadReview(400, "request.uid is missing", api_version=api_version)
    operation = request.get("operation")
    if operation not in OPERATIONS:
        raise BadReview(
            400,
            f"unknown operation {_shown(operation)} at request.operation",
            uid=uid,
            api_version=api_version,
        )
    user_info = request.get("userInfo")
    return AdmissionRequest(
        uid=uid,
        operation=operation,
        kind=_string_map(request.get("kind")),
        resource=_string_map(request.get("resource")),
        sub_resource=str(request.get("subResource") or ""),
        name=str(request.get("name") or ""),
        namespace=str(request.get("namespace") or ""),
        user_info=user_info if isinstance(user_info, Mapping) else {},
        object=_object_field(request, "object", uid, api_version),
        old_object=_object_field(request, "oldObject", uid, api_version),
        dry_run=request.get("dryRun") is True,
        api_version=api_version,
    )


def encode_review(
    response: AdmissionResponse, *, uid: str, api_version: str = ADMISSION_API_VERSIONS[0]
) -> bytes:
    """The AdmissionReview answering request ``uid`` (Go ``Response.Complete`` then the JSON encoding)."""
    status: dict[str, Any] = {"metadata": {}, "code": response.code or 200}
    if response.reason:
        status["reason"] = response.reason
    if response.message:
        status["message"] = response.message
    out: dict[str, Any] = {"uid": uid, "allowed": response.allowed, "status": status}
    if response.patch:
        out["patch"] = base64.b64encode(orjson.dumps(list(response.patch))).decode("ascii")
        out["patchType"] = "JSONPatch"
    if response.warnings:
        out["warnings"] = list(response.warnings)
    return orjson.dumps({"apiVersion": api_version, "kind": "AdmissionReview", "response": out})


@dataclass(frozen=True, slots=True, kw_only=True)
class HTTPAnswer:
    """What the server writes back: an HTTP status and a JSON body."""

    status: int
    body: bytes
    content_type: str = _JSON


class Webhook:
    """A :class:`Handler` behind the wire format (Go ``admission.Webhook``): :meth:`serve` never raises."""

    __slots__ = ("handler", "path")

    def __init__(self, path: str, handler: Handler) -> None:
        self.path = path
        self.handler = handler

    def serve(self, body: bytes, content_type: str) -> HTTPAnswer:
        """Decode, handle, encode (see the module doc for what each failure gets)."""
        try:
            request = decode_review(body, content_type)
        except BadReview as exc:
            _log.info("webhook.bad_request", webhook=self.path, code=exc.code, error=str(exc))
            answer = encode_review(errored(exc.code, str(exc)), uid=exc.uid, api_version=exc.api_version)
            return HTTPAnswer(status=exc.code, body=answer)
        response = self.handle(request)
        return HTTPAnswer(
            status=200, body=encode_review(response, uid=request.uid, api_version=request.api_version)
        )

    def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        """The handler's verdict; an exception becomes ``errored(500, ...)`` (Go's recovered panic)."""
        try:
            return self.handler.handle(request)
        except Exception as exc:  # noqa: BLE001 - one bad request must not take the server down; counted
            webhook_metrics.webhook_panics_total.inc()
            _log.error(
                "webhook.handler_failed",
                webhook=self.path,
                uid=request.uid,
                operation=request.operation,
                error=str(exc),
                traceback=traceback.format_exc(limit=8),
            )
            return errored(500, f"panic: {exc} [recovered]")

    def __repr__(self) -> str:
        return f"Webhook({self.path!r}, {type(self.handler).__name__})"
