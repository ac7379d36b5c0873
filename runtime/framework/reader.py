"""The reader protocol: the only way the runtime pipeline reads the cluster, plus an in-memory implementation.

Go origin: the `client.Reader` half of controller-runtime's client that kubeflow/trainer's plugins and core
runtimes call (`Get` of the JobSet, the snapshot ConfigMap, the runtime, the MPI Secret; `List` for the
watch mapping functions). Here `runtime/` defines the protocol and the controller supplies a cache-backed
implementation; `render` and the tests use `MemoryReader`.

Contract of every `Reader`:
- `get` returns the object or None when it does not exist; any other failure raises `ReadError`
  (implementations chain their own exception with `raise ReadError(...) from exc`).
- Objects returned are shared and read-only: callers must not mutate them.
- `list` filters by namespace (None: all namespaces) and by label equality; the order is by namespace then
  name, so callers that iterate it stay deterministic.
- Reads may be stale (a cache); callers treat what they read as a hint and the API server as the truth.
- `get` finds every object that exists, whatever the controller chose to cache. A cache narrowed by a
  `Watch.label_selector` holds only the labelled objects of its kind, so a miss there proves nothing:
  the controller's Reader then asks the API server (a live GET; NotFound → None) before answering None.
  Plugins decide "create only when missing" on `get`, and what they look for may predate the label: the
  MPI SSH Secret and the runtime snapshot ConfigMap an older controller wrote carry none. Taking them
  for absent would re-apply them: a fresh key pair on an immutable Secret is rejected on every
  reconcile, and a rewritten snapshot silently moves a running TrainJob to the current runtime. The
  fallback costs one request per miss: once before such an object is first created, and on every read
  of an object older than the label. A controller may skip it for an owner nothing can have built for yet
  (a new TrainJob), handing the pipeline a reader whose misses are final.
- `list` of a kind the controller caches under a label selector returns only the matching objects.

Deliberately missing: field selectors, set-based label selectors, resource versions and writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from runtime.framework.errors import FrameworkError

__all__ = ["MemoryReader", "ObjectKey", "ReadError", "Reader", "object_key"]


class ReadError(FrameworkError):
    """A read failed for a reason other than absence (a cache not synced, a kind not served, ...)."""


class Reader(Protocol):
    """Read access to cluster objects by apiVersion and kind."""

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Mapping[str, Any] | None:
        """The object, or None when it does not exist. Raises `ReadError` for any other failure.

        None means "not in the cluster", never merely "not in a cache narrowed by a label selector".
        """
        ...

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Sequence[Mapping[str, Any]]:
        """Objects of a kind, in one namespace (or all), whose labels include `labels`."""
        ...


ObjectKey = tuple[str, str, str, str]
"""(apiVersion, kind, namespace, name) of an object; the namespace is "" for a cluster-scoped one."""


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    """The `ObjectKey` an object declares (a missing field reads as "")."""
    metadata = obj.get("metadata") or {}
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(metadata.get("namespace") or ""),
        str(metadata.get("name") or ""),
    )


class MemoryReader:
    """A `Reader` over a dict of objects: for `render`, for tests, and anywhere there is no cluster.

    Objects are stored as given (not copied); `add` replaces an object with the same apiVersion, kind,
    namespace and name. `errors` makes reads of a kind fail, to test error paths. It models no caching,
    staleness, label-selected caches, defaulting or discovery: a kind nobody added simply has no objects,
    and `get` finds every object added, labelled or not (what the controller's Reader owes too).
    """

    def __init__(self, objects: Iterable[Mapping[str, Any]] = ()) -> None:
        self._objects: dict[ObjectKey, Mapping[str, Any]] = {}
        self.errors: dict[tuple[str, str], Exception] = {}
        """(apiVersion, kind) → the exception a read of that kind raises (wrapped in `ReadError`)."""
        for obj in objects:
            self.add(obj)

    def add(self, obj: Mapping[str, Any]) -> None:
        """Store (or replace) an object."""
        self._objects[object_key(obj)] = obj

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        """Forget an object (no error when absent)."""
        self._objects.pop((api_version, kind, namespace or "", name), None)

    def _check(self, api_version: str, kind: str) -> None:
        failure = self.errors.get((api_version, kind))
        if failure is not None:
            raise ReadError(f"reading {kind}.{api_version}: {failure}") from failure

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Mapping[str, Any] | None:
        self._check(api_version, kind)
        return self._objects.get((api_version, kind, namespace or "", name))

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Sequence[Mapping[str, Any]]:
        self._check(api_version, kind)
        found = []
        for key in sorted(self._objects):
            if key[0] != api_version or key[1] != kind or (namespace is not None and key[2] != namespace):
                continue
            obj = self._objects[key]
            have = (obj.get("metadata") or {}).get("labels") or {}
            if all(have.get(k) == v for k, v in (labels or {}).items()):
                found.append(obj)
        return found

    def __len__(self) -> int:
        return len(self._objects)

    def __repr__(self) -> str:
        return f"<MemoryReader objects={len(self._objects)}>"
