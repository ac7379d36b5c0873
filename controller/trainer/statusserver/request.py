"""The status request: its route, and its body decoded as Go's ``encoding/json`` decodes
``UpdateTrainJobStatusRequest``; the server-side apply body it becomes.

Go origin: kubeflow/trainer ``pkg/statusserver/server.go`` (the route and ``UpdateTrainJobStatusRequest``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson

from runtime.api import constants

__all__ = [
    "InvalidPayload",
    "Metric",
    "TrainerStatus",
    "decode_update_request",
    "encode_update_request",
    "route",
    "status_apply_body",
]

_INT32 = range(-(2**31), 2**31)

# --- routing --------------------------------------------------------------------------------------------

_PATH = re.compile(
    r"/apis/" + re.escape(constants.API_VERSION) + r"/namespaces/([^/]+)/trainjobs/([^/]+)/status"
)
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def route(path: str) -> tuple[str, str] | None:
    """``(namespace, name)`` of a status path, or None: not the route, or not valid Kubernetes names (a
    namespace is a DNS label of at most 63 characters, a name a DNS subdomain of at most 253)."""
    match = _PATH.fullmatch(path)
    if match is None:
        return None
    namespace, name = match.group(1), match.group(2)
    if len(namespace) > 63 or not _DNS_LABEL.fullmatch(namespace):
        return None
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        return None
    return namespace, name


# --- decoding, as Go's encoding/json decodes UpdateTrainJobStatusRequest ----------------------------------


class InvalidPayload(ValueError):
    """The body is not an ``UpdateTrainJobStatusRequest``; the message says where (for logs, not clients)."""


_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|([+-])(\d{2}):(\d{2}))")


def _parse_time(value: str) -> datetime:
    """Go's ``time.Parse(time.RFC3339, value)`` (fractional seconds allowed), as an aware datetime."""
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise InvalidPayload(f"lastUpdatedTime: {value!r} is not RFC 3339")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    offset = timedelta(0)
    if match.group(8) != "Z":
        hours, minutes = int(match.group(10)), int(match.group(11))
        if hours > 23 or minutes > 59:
            raise InvalidPayload(f"lastUpdatedTime: {value!r} has an offset out of range")
        offset = timedelta(hours=hours, minutes=minutes) * (-1 if match.group(9) == "-" else 1)
    try:
        return datetime(year, month, day, hour, minute, second, tzinfo=timezone(offset))
    except ValueError as exc:  # month 13, February 30, hour 24, year 0...
        raise InvalidPayload(f"lastUpdatedTime: {value!r}: {exc}") from exc


def _format_time(value: datetime) -> str:
    """``metav1.Time`` on the wire: UTC, whole seconds (``2006-01-02T15:04:05Z``)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fields(obj: Mapping[str, Any], names: Sequence[str], where: str) -> dict[str, Any]:
    """The object's values of the struct fields ``names``, matched as Go matches them: the exact key, else a
    key equal to it case-insensitively; unknown keys are ignored; the last matching key wins."""
    folded = {name.lower(): name for name in names}
    found: dict[str, Any] = {}
    for key, value in obj.items():
        name = key if key in names else folded.get(key.lower())
        if name is not None:
            found[name] = value
    return found


def _int32(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value not in _INT32:
        raise InvalidPayload(f"{where}: must be an int32, got {type(value).__name__}")
    return value


def _string(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidPayload(f"{where}: must be a string, got {type(value).__name__}")
    return value


def _object(value: Any, where: str) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidPayload(f"{where}: must be an object, got {type(value).__name__}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Metric:
    name: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainerStatus:
    """The decoded ``trainerStatus``; None is "absent" (Go's nil pointer, nil slice, zero time)."""

    progress_percentage: int | None = None
    estimated_remaining_seconds: int | None = None
    metrics: tuple[Metric, ...] = ()
    last_updated_time: datetime | None = None

    def wire(self) -> dict[str, Any]:
        """As the apply configuration and the echo carry it (field order of the Go struct; a zero time
        is ``null``, as ``metav1.Time`` marshals it)."""
        out: dict[str, Any] = {}
        if self.progress_percentage is not None:
            out["progressPercentage"] = self.progress_percentage
        if self.estimated_remaining_seconds is not None:
            out["estimatedRemainingSeconds"] = self.estimated_remaining_seconds
        if self.metrics:
            out["metrics"] = [{"name": m.name, "value": m.value} for m in self.metrics]
        out["lastUpdatedTime"] = _format_time(self.last_updated_time) if self.last_updated_time else None
        return out


def _metric(value: Any, where: str) -> Metric:
    obj = _object(value, where)
    if obj is None:
        return Metric(name="", value="")
    found = _fields(obj, ("name", "value"), where)
    return Metric(
        name=_string(found.get("name"), f"{where}.name"), value=_string(found.get("value"), f"{where}.value")
    )


def _trainer_status(obj: Mapping[str, Any]) -> TrainerStatus:
    where = "trainerStatus"
    found = _fields(
        obj, ("progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime"), where
    )
    metrics_value = found.get("metrics")
    if metrics_value is not None and not isinstance(metrics_value, list):
        raise InvalidPayload(f"{where}.metrics: must be an array, got {type(metrics_value).__name__}")
    time_value = found.get("lastUpdatedTime")
    if time_value is not None and not isinstance(time_value, str):
        raise InvalidPayload(f"{where}.lastUpdatedTime: must be a string, got {type(time_value).__name__}")
    return TrainerStatus(
        progress_percentage=_int32(found.get("progressPercentage"), f"{where}.progressPercentage"),
        estimated_remaining_seconds=_int32(
            found.get("estimatedRemainingSeconds"), f"{where}.estimatedRemainingSeconds"
        ),
        metrics=tuple(_metric(m, f"{where}.metrics[{i}]") for i, m in enumerate(metrics_value or ())),
        last_updated_time=_parse_time(time_value) if time_value is not None else None,
    )


def decode_update_request(body: bytes) -> TrainerStatus | None:
    """The ``trainerStatus`` of an ``UpdateTrainJobStatusRequest``, None when absent or null; raises
    :class:`InvalidPayload` (see the module doc for what Go's decoder refuses)."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidPayload(f"not JSON: {exc}") from exc
    request = _object(document, "request")
    if request is None:
        return None  # a JSON null: Go leaves the struct as it is
    value = _fields(request, ("trainerStatus",), "request").get("trainerStatus")
    trainer_status = _object(value, "trainerStatus")
    return None if trainer_status is None else _trainer_status(trainer_status)


def encode_update_request(trainer_status: TrainerStatus | None) -> bytes:
    """The echo of a successful request: the decoded request re-encoded (``omitempty``), newline-ended."""
    body = {} if trainer_status is None else {"trainerStatus": trainer_status.wire()}
    return orjson.dumps(body) + b"\n"


def status_apply_body(namespace: str, name: str, trainer_status: TrainerStatus) -> dict[str, Any]:
    """The server-side apply body for the ``status`` subresource: ``status.trainerStatus`` alone."""
    return {
        "apiVersion": constants.API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "status": {"trainerStatus": trainer_status.wire()},
    }
