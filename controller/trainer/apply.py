"""How the TrainJob controller writes: server-side apply in order, skipping applies that cannot change
anything, and a JSON merge patch for status.

Go origin: the write half of kubeflow/trainer's `reconcileObjects` (`r.client.Apply(ctx, obj,
client.FieldOwner("trainer"), client.ForceOwnership)` for each object in order) and the status write
(`r.client.Status().Patch(ctx, trainJob, client.MergeFrom(prev))`).

Guarantees:

- `merge_patch(old, new)` is the RFC 7386 patch that turns `old` into `new`: changed and added keys carry
  their new value, removed keys `None`; objects are compared key by key and lists are sent whole, as
  controller-runtime's `client.MergeFrom` does (so `conditions` and `jobsStatus` are replaced whole).
- `contains(desired, live)`: every field `desired` sets has that value in `live` (dicts by key, lists item by
  item with equal lengths, scalars by equality; an empty dict or list is contained in an absent field).
- `AppliedBodies` skips an apply only when it provably changes nothing: the body is byte-for-byte the one
  this process last applied to that object (so the fields the `trainer` manager owns are exactly the ones in
  the body: nothing would be released) **and** the live object still `contains` it (so no field of ours was
  changed by someone else, and the object exists). Anything else is applied. After a restart nothing is
  remembered, so the first reconcile applies whatever the pipeline returns (upstream applies it every time).
  Memory: one 16-byte digest per applied object, dropped with its TrainJob (`forget`).
- `start(owner)` marks a TrainJob this process has begun writing for (before the first apply, whatever its
  outcome); `started(owner)` tells, until `forget`. The reconciler trusts cache misses only for a TrainJob
  nothing has begun writing for.

Deliberately missing: reading `managedFields` to skip the first apply after a restart (the cache strips
them to save memory), and any client-side merge: the API server is the only merger.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from typing import Any

import orjson

from runtime.framework import ObjectKey, object_key

__all__ = ["AppliedBodies", "contains", "merge_patch"]


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The RFC 7386 JSON merge patch from `old` to `new` (lists whole, removed keys `None`)."""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            nested = merge_patch(before, value)
            if nested:
                patch[key] = nested
        elif key not in old or before != value:
            patch[key] = value
    return patch


def contains(desired: Any, live: Any) -> bool:
    """Whether every field `desired` sets is present in `live` with the same value."""
    if isinstance(desired, dict):
        if live is None:
            return not desired
        if not isinstance(live, dict):
            return False
        return all(contains(value, live.get(key)) for key, value in desired.items())
    if isinstance(desired, list):
        if live is None:
            return not desired
        if not isinstance(live, list) or len(live) != len(desired):
            return False
        return all(contains(d, v) for d, v in zip(desired, live, strict=True))
    if desired is None:
        return live is None
    # bool is an int in Python: compare types too, so `True` never matches `1`.
    return type(desired) is type(live) and bool(desired == live)


def _digest(body: Mapping[str, Any]) -> bytes:
    return hashlib.blake2b(orjson.dumps(body, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


class AppliedBodies:
    """What this process last applied to each object, per TrainJob, to skip applies that change nothing.

    Thread-safe: workers of one controller never share a TrainJob, but they share this record.
    """

    __slots__ = ("_bodies", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (namespace, trainjob) → object key → digest of the body last applied. Guarded by _lock.
        self._bodies: dict[tuple[str, str], dict[ObjectKey, bytes]] = {}

    def same_body(self, owner: tuple[str, str], body: Mapping[str, Any]) -> bool:
        """Whether `body` is byte-for-byte what this process last applied to that object for `owner`.

        Skip the apply only if, in addition, the live object still `contains` it.
        """
        with self._lock:
            last = self._bodies.get(owner, {}).get(object_key(body))
        return last is not None and last == _digest(body)

    def has_applied(self, owner: tuple[str, str], body: Mapping[str, Any]) -> bool:
        """Whether this process has applied any body to that object for `owner` (since it last forgot it)."""
        with self._lock:
            return object_key(body) in self._bodies.get(owner, {})

    def start(self, owner: tuple[str, str]) -> None:
        """Remember that this process is about to write for `owner` (kept until `forget`)."""
        with self._lock:
            self._bodies.setdefault(owner, {})

    def started(self, owner: tuple[str, str]) -> bool:
        """Whether this process has begun writing for `owner` (an apply attempted, whatever its outcome)."""
        with self._lock:
            return owner in self._bodies

    def record(self, owner: tuple[str, str], body: Mapping[str, Any]) -> None:
        """Remember that `body` was just applied successfully."""
        digest = _digest(body)
        with self._lock:
            self._bodies.setdefault(owner, {})[object_key(body)] = digest

    def forget(self, owner: tuple[str, str]) -> None:
        """Drop everything remembered for a TrainJob (it is gone, or finished)."""
        with self._lock:
            self._bodies.pop(owner, None)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._bodies.values())

    def __repr__(self) -> str:
        with self._lock:
            return f"<AppliedBodies trainjobs={len(self._bodies)}>"
