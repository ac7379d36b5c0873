"""What the TrainJob mutating admission webhook fills in: the `time` of each `spec.runtimePatches[]` entry.

Go origin: kubeflow/trainer `pkg/webhooks/trainjob_webhook.go` (`TrainJobDefaulter.Default`).

The rules (`stamp_runtime_patch_times`), with `now` as a `metav1.Time` (RFC 3339, whole seconds, UTC):
- CREATE (`old` None): every entry without a `time` gets `now`; a `time` the user gave is kept.
- UPDATE: each entry is matched to the old object's entry of the same `manager` (the last one, should the
  old object have two):
  - matched, and equal to it apart from `time`: the old `time` is kept, **also when the user edited it**
    (as upstream does; kept on purpose, see below); an old entry without one leaves the new one without;
  - matched, and different: `now`, whatever `time` the user wrote;
  - not matched (a new manager): the `time` given is kept, else `now`.

"Equal apart from `time`" follows Go's `equality.Semantic.DeepEqual` on the decoded types: an absent field,
a `null` and an empty list compare equal; anything else compares by value (an empty object is kept: in Go it
is a non-nil pointer to an empty struct).

Why a user's edit of `time` on an unchanged patch is reverted (as upstream's webhook does): kept. `time`
records when the manager last changed its entry, and it belongs to the webhook once the entry exists; a user
edit of `time` alone changes nothing the controller reads, and reverting it makes such an update a no-op
instead of a change that the runtime-patch immutability check would then have to judge. A manager that wants a
new `time` changes its entry.

A list of more than `MAX_RUNTIME_PATCHES` entries (the CRD's `maxItems`) is left as it is: the API server
refuses it when it checks the schema, which it does after the mutating webhooks, so stamping it would change
nothing stored. Without this, the webhook's answer would grow faster than its input (a JSON Patch `add`
of about 70 bytes per entry of 25: 11 MB for 100,000 entries); with it, the answer has at most 16 operations.

Guarantees: pure (`now` is an argument), never mutates its arguments, never raises on odd shapes (entries
that are not objects are left alone: the CRD schema rejects them).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import orjson

from runtime.api.views import as_dict, as_list
from runtime.core.status import format_time

__all__ = ["MAX_RUNTIME_PATCHES", "stamp_runtime_patch_times"]

MAX_RUNTIME_PATCHES = 16
"""The most `spec.runtimePatches` entries a TrainJob may have: the CRD's `maxItems` (`TrainJobSpec`)."""


def _semantic(value: Any) -> Any:
    """The value with `null` members and empty lists dropped, as Go's semantic equality sees them."""
    if isinstance(value, Mapping):
        return {k: _semantic(v) for k, v in value.items() if v is not None and v != []}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def _without_time(patch: Mapping[str, Any]) -> Any:
    return _semantic({k: v for k, v in patch.items() if k != "time"})


def stamp_runtime_patch_times(
    new: Mapping[str, Any], old: Mapping[str, Any] | None, now: datetime
) -> dict[str, Any]:
    """A copy of the TrainJob `new` with `spec.runtimePatches[].time` set by the rules of the module doc."""
    try:
        result: dict[str, Any] = orjson.loads(orjson.dumps(new))
    except TypeError:  # not JSON the API server sends (an integer beyond 64 bits, 255 levels deep)
        return dict(new)
    patches = as_list(as_dict(result.get("spec")).get("runtimePatches"))
    if len(patches) > MAX_RUNTIME_PATCHES:
        return result  # refused by the schema after this webhook: see the module docstring
    stamp = format_time(now)
    old_by_manager: dict[Any, Mapping[str, Any]] = {}
    if old is not None:
        for entry in as_list(as_dict(old.get("spec")).get("runtimePatches")):
            if isinstance(entry, Mapping) and isinstance(entry.get("manager"), str):
                old_by_manager[entry["manager"]] = entry
    for patch in patches:
        if not isinstance(patch, dict):
            continue
        manager = patch.get("manager")
        previous = old_by_manager.get(manager) if isinstance(manager, str) else None
        if previous is None:
            if patch.get("time") is None:
                patch["time"] = stamp
        elif _without_time(previous) == _without_time(patch):
            if previous.get("time") is None:
                patch.pop("time", None)
            else:
                patch["time"] = previous["time"]
        else:
            patch["time"] = stamp
    return result
