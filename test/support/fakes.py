"""In-memory fakes of what the TrainJob reconciler talks to: the cache, the client and the reader in one
`FakeCluster`, and a `FakeRecorder` for its events. Shared by the reconciler's unit tests
(`test_trainjob_reconciler.py`) and its fuzz properties (`test/unit/fuzz/test_fuzz_reconciler.py`).

`FakeCluster` satisfies the reconciler's protocols (`controller.interfaces.Reader`, `Writer` and
`StatusWriter`); `FakeRecorder` its `Recorder`.

What the fakes model: objects by key; an apply stores the body as given (with a `uid`); a patch applies its
JSON merge patch (RFC 7386) to the stored object, a status write to the stored status; a delete forgets the
object. `fail_apply`
makes every apply fail; `fail_deletes` makes the next deletes fail, one exception each. Every write
(attempted) is recorded in `FakeCluster.writes` and every read through the reader is counted in
`FakeCluster.reads`.

What they do not model: defaulting, resource versions, conflicts and delete preconditions, deletion with
finalizers (a delete removes the object at once), field ownership (an apply replaces the
stored object), admission, watches and the cache's lag (the cache is the store itself).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from controller.client.errors import NotFound
from controller.client.gvk import GVK
from runtime.framework import MemoryReader

__all__ = ["CountingReader", "FakeCluster", "FakeRecorder", "apply_merge_patch"]


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: `patch` applied to `target` (a new value; `None` in an object removes the key)."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = apply_merge_patch(merged.get(key), value)
    return merged


class CountingReader(MemoryReader):
    """A `MemoryReader` that counts its reads (`gets` and `lists`), to bound what one reconcile does."""

    def __init__(self, objects: Any = ()) -> None:
        self.reads = 0
        super().__init__(objects)

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Mapping[str, Any] | None:
        self.reads += 1
        return super().get(api_version, kind, name, namespace)

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Sequence[Mapping[str, Any]]:
        self.reads += 1
        return super().list(api_version, kind, namespace, labels)


class FakeCluster:
    """Objects in a `CountingReader`; records the writes made through it."""

    def __init__(self, *objects: Mapping[str, Any]) -> None:
        self.reader = CountingReader(dict(o) for o in objects)
        self.writes: list[tuple[str, str, str]] = []
        self.fail_apply: Exception | None = None
        self.fail_deletes: list[Exception] = []
        """The next deletes raise these, in order (one each), and delete nothing."""
        self._versions = itertools.count(1)

    @property
    def reads(self) -> int:
        """Reads made through `reader` so far (the cache's `get` of the TrainJob not included)."""
        return self.reader.reads

    # the cache's and the client's reads
    def get(self, gvk: GVK, name: str, namespace: str | None = None) -> dict[str, Any]:
        found = MemoryReader.get(self.reader, gvk.api_version, gvk.kind, name, namespace)
        if found is None:
            raise NotFound(f"{name} not found", status=404)
        return dict(found)

    # the client's writes
    def apply(self, obj: Mapping[str, Any], field_manager: str, *, force: bool = True) -> dict[str, Any]:
        assert field_manager == "trainer" and force
        self.writes.append(("apply", obj["kind"], obj["metadata"]["name"]))
        if self.fail_apply is not None:
            raise self.fail_apply
        metadata = {
            **obj["metadata"],
            "uid": "uid-" + obj["metadata"]["name"],
            "resourceVersion": str(next(self._versions)),  # a new one per write, as the API server's
        }
        stored = {**obj, "metadata": metadata}
        self.reader.add(stored)
        return stored

    def patch(self, gvk: GVK, name: str, patch: Any, namespace: str | None = None) -> dict[str, Any]:
        self.writes.append(("patch", gvk.kind, name))
        updated = apply_merge_patch(self.get(gvk, name, namespace), patch)
        self.reader.add(updated)
        return dict(updated)

    def patch_status(self, gvk: GVK, name: str, patch: Any, namespace: str | None = None) -> dict[str, Any]:
        self.writes.append(("status", gvk.kind, name))
        current = self.get(gvk, name, namespace)
        status = apply_merge_patch(current.get("status") or {}, patch["status"])
        updated = {**current, "status": status}
        self.reader.add(updated)
        return updated

    def delete(self, gvk: GVK, name: str, namespace: str | None = None, **_: Any) -> None:
        self.writes.append(("delete", gvk.kind, name))
        if self.fail_deletes:
            raise self.fail_deletes.pop(0)
        if MemoryReader.get(self.reader, gvk.api_version, gvk.kind, name, namespace) is None:
            raise NotFound(f"{name} not found", status=404)
        self.reader.delete(gvk.api_version, gvk.kind, name, namespace)


class FakeRecorder:
    """Records events as (type, reason, message)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        self.events.append((type, reason, message))
