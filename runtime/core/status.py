"""TrainJob status arithmetic: condition updates, the suspended condition, and the active deadline.

Go origin: `k8s.io/apimachinery/pkg/api/meta.SetStatusCondition`, and `setSuspendedCondition`,
`setFailedCondition`, `setTrainJobStatus` and `reconcileDeadline` of kubeflow/trainer
`pkg/controller/trainjob_controller.go`. `RuntimeRegistry.next_status` strings them together in the
reconcile's order.

Guarantees:
- Pure: the time is an argument; inputs are never mutated; the returned status is a fresh dict.
- `set_condition` has `meta.SetStatusCondition` semantics: a new type is appended (lastTransitionTime =
  `now` unless the condition carries one); an existing one is updated in place, and its
  lastTransitionTime changes only when its status does.
- Times are RFC 3339 UTC with second precision (`2024-05-01T12:00:00Z`), as `metav1.Time` marshals.

Deliberately missing: condition list size limits (the CRD caps `conditions` at 8; the vocabulary here never
exceeds 3 types).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from runtime.api import constants
from runtime.api.core import Condition
from runtime.api.v1alpha1 import TrainJob, TrainJobStatus
from runtime.api.views import TrainJobView, find_condition

__all__ = [
    "DeadlineCheck",
    "check_deadline",
    "condition",
    "format_time",
    "parse_time",
    "set_condition",
    "suspended_condition",
]


def format_time(now: datetime) -> str:
    """RFC 3339, UTC, whole seconds (Go `metav1.Time` JSON)."""
    return now.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    """Parse an RFC 3339 time as the API server writes it."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def condition(type_: str, status: str, reason: str, message: str) -> Condition:
    """A condition without a transition time (`set_condition` stamps it)."""
    return cast(Condition, {"type": type_, "status": status, "reason": reason, "message": message})


def set_condition(conditions: list[Condition], new: Mapping[str, Any], now: datetime) -> bool:
    """Add or update the condition of `new["type"]` in `conditions` (in place); True when anything changed."""
    existing = find_condition(conditions, str(new.get("type")))
    if existing is None:
        added = cast(Condition, dict(new))
        if not added.get("lastTransitionTime"):
            added["lastTransitionTime"] = format_time(now)
        conditions.append(added)
        return True
    changed = False
    if existing.get("status") != new.get("status"):
        existing["status"] = new["status"]
        existing["lastTransitionTime"] = new.get("lastTransitionTime") or format_time(now)
        changed = True
    fields = cast(dict[str, Any], existing)  # the three optional-in-practice keys, updated generically
    for key in ("reason", "message", "observedGeneration"):
        if fields.get(key) != new.get(key):
            if new.get(key) is None:
                fields.pop(key, None)
            else:
                fields[key] = new[key]
            changed = True
    return changed


def suspended_condition(trainjob: TrainJob, conditions: Sequence[Condition]) -> Condition | None:
    """The Suspended condition to set: True while `spec.suspend`, False ("Resumed") right after, else None."""
    if TrainJobView(trainjob).suspend:
        return condition(
            constants.CONDITION_SUSPENDED,
            constants.CONDITION_TRUE,
            constants.REASON_SUSPENDED,
            constants.MESSAGE_SUSPENDED,
        )
    current = find_condition(conditions, constants.CONDITION_SUSPENDED)
    if current is not None and current.get("status") == constants.CONDITION_TRUE:
        return condition(
            constants.CONDITION_SUSPENDED,
            constants.CONDITION_FALSE,
            constants.REASON_RESUMED,
            constants.MESSAGE_RESUMED,
        )
    return None


def _is_finished(conditions: Sequence[Condition]) -> bool:
    return any(
        c.get("type") in (constants.CONDITION_COMPLETE, constants.CONDITION_FAILED)
        and c.get("status") == constants.CONDITION_TRUE
        for c in conditions
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadlineCheck:
    """The active deadline's verdict: exceeded now, or the seconds until it should be checked again."""

    exceeded: bool = False
    requeue_after: float | None = None


def check_deadline(trainjob: TrainJob, status: TrainJobStatus, now: datetime) -> DeadlineCheck:
    """Go `reconcileDeadline`, minus the I/O: is `spec.activeDeadlineSeconds` over?

    Not checked without a deadline, for a finished TrainJob, or while suspended. The clock starts at
    creation, or at the last Suspended→False transition (it resets on every resume). The requeue delay is
    the time left, or 1 s when none is left.
    """
    view = TrainJobView(trainjob)
    seconds = view.active_deadline_seconds
    conditions = status.get("conditions") or []
    if not seconds or _is_finished(conditions) or view.suspend:
        return DeadlineCheck()
    start_text = view.metadata.get("creationTimestamp")
    suspended = find_condition(conditions, constants.CONDITION_SUSPENDED)
    if suspended is not None and suspended.get("status") == constants.CONDITION_FALSE:
        start_text = suspended.get("lastTransitionTime")
    if not start_text:
        return DeadlineCheck()
    try:
        deadline = parse_time(str(start_text)) + timedelta(seconds=int(seconds))
    except OverflowError:
        # Past year 9999 (`activeDeadlineSeconds` is an int64): it never comes. Go's Duration would wrap
        # around to a negative time and fail the TrainJob at once instead.
        return DeadlineCheck()
    if now > deadline:
        return DeadlineCheck(exceeded=True)
    remaining = (deadline - now).total_seconds()
    return DeadlineCheck(requeue_after=remaining if remaining > 0 else 1.0)
