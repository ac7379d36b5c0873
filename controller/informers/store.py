"""A thread-safe, indexed store of Kubernetes objects keyed by ``namespace/name``.

Go origin: client-go ``tools/cache/store.go`` (``MetaNamespaceKeyFunc``,
``DeletionHandlingMetaNamespaceKeyFunc``, ``DeletedFinalStateUnknown``), ``index.go`` (``Indexers``,
``MetaNamespaceIndexFunc``) and ``thread_safe_store.go`` (``threadSafeMap`` with its ``storeIndex``).

Guarantees:

- **Keys.** An object's key is ``namespace/name``, or ``name`` for a cluster-scoped object
  (:func:`meta_namespace_key`). A :class:`DeletedFinalStateUnknown` tombstone is keyed by the key it carries
  (:func:`deletion_handling_meta_namespace_key`).
- **Indices are always consistent with the items.** ``indexers`` maps an index name to a function
  ``fn(obj) -> list[str]`` of the values the object is filed under; for every index, value ``v`` maps to the
  set of keys of the stored objects whose function returned ``v``. A value whose set becomes empty is
  removed, so :meth:`ThreadSafeStore.list_index_func_values` only names values some object has. Every
  mutation recomputes the new object's index values *before* changing anything, so an index function that
  raises leaves the store exactly as it was.
- **Readers and writers.** Every public method takes the store's reader-writer lock: any number of readers at
  once, or one writer. :meth:`ThreadSafeStore.replace` swaps the whole content and rebuilds every index as
  one write. Returned lists are new lists; the objects in them are the stored ones.
- **Objects are shared and read-only by contract.** The store never copies: what you put in is what every
  reader gets. Copy before mutating (see ``controller.informers.shared_informer`` for the mutation detector).
- :meth:`ThreadSafeStore.add_indexers` works on a store that already holds items (as client-go allows since
  1.27): the new indices are built from the current content. Names must not collide with existing ones.

Index functions run under the store's write lock, exactly as in client-go: they must be pure, fast
functions of the object that never call back into the store.

Deliberately missing: the ``Store`` vs ``ThreadSafeStore`` split (one class here, keyed by a key function),
``ExplicitKey``, transactions (``ThreadSafeStoreWithTransaction``: batch processing is off here), and the
store resourceVersion metric.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

IndexFunc = Callable[[Any], list[str]]
"""Maps an object to the index values it is filed under (client-go ``IndexFunc``)."""

KeyFunc = Callable[[Any], str]
"""Maps an object to its store key (client-go ``KeyFunc``)."""

NAMESPACE_INDEX = "namespace"
"""The index every informer cache adds: objects by namespace (client-go ``NamespaceIndex``)."""


class KeyFuncError(ValueError):
    """An object has no ``metadata.name`` and cannot be keyed."""


@dataclass(frozen=True, slots=True)
class DeletedFinalStateUnknown:
    """A tombstone: the object was deleted while the watch was down, and this is its last known state.

    Handed to ``on_delete`` when a relist finds that an object the cache held is gone. ``obj`` may be stale.
    """

    key: str
    obj: Any


def meta_namespace_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object (client-go ``MetaNamespaceKeyFunc``)."""
    try:
        meta = obj["metadata"]
        name = meta["name"]
    except (KeyError, TypeError) as exc:
        raise KeyFuncError(f"object has no metadata.name: {type(obj).__name__}") from exc
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


def deletion_handling_meta_namespace_key(obj: Any) -> str:
    """Like :func:`meta_namespace_key`, but a tombstone yields the key it carries."""
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    return meta_namespace_key(obj)


def split_meta_namespace_key(key: str) -> tuple[str, str]:
    """``(namespace, name)`` from a store key; the namespace is ``""`` for a cluster-scoped key."""
    parts = key.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise ValueError(f"unexpected key format: {key!r}")


def meta_namespace_index_func(obj: Mapping[str, Any]) -> list[str]:
    """Files an object under its namespace (``""`` when cluster-scoped), as ``MetaNamespaceIndexFunc``."""
    return [obj.get("metadata", {}).get("namespace", "")]


class RWLock:
    """A reader-writer lock that prefers writers, so a stream of readers cannot starve the informer.

    ``with lock.read():`` admits any number of readers at once; ``with lock.write():`` waits until no reader
    or writer holds the lock and no new reader gets in meanwhile. Not reentrant.
    """

    __slots__ = ("_cond", "_readers", "_writer", "_writers_waiting")

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0  # invariant: readers > 0 implies not writer
        self._writer = False
        self._writers_waiting = 0

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if self._readers == 0:
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            self._writers_waiting += 1
            try:
                while self._writer or self._readers:
                    self._cond.wait()
            finally:
                self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


class ThreadSafeStore:
    """Objects by key, plus named indices over them (client-go ``cache.Indexer`` over ``threadSafeMap``).

    Fields and their invariants (all guarded by ``_lock``):

    - ``_items``: key → object, where ``key == key_func(object)``.
    - ``_indexers``: index name → index function; names never change once added.
    - ``_indices``: index name → (value → non-empty set of keys); ``k`` is in ``_indices[n][v]`` exactly
      when ``k`` is in ``_items`` and ``v`` is in ``_indexers[n](_items[k])``.
    - ``_resource_version``: the resourceVersion of the last list, watch event or bookmark applied.
    """

    def __init__(
        self,
        indexers: Mapping[str, IndexFunc] | None = None,
        *,
        key_func: KeyFunc = deletion_handling_meta_namespace_key,
    ) -> None:
        self._lock = RWLock()
        self._key_func = key_func
        self._items: dict[str, Any] = {}
        self._indexers: dict[str, IndexFunc] = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
        self._resource_version = ""

    # --- writes --------------------------------------------------------------------------------------------

    def add(self, obj: Any) -> None:
        """Insert ``obj``, or replace the object with the same key (client-go ``Add`` is an upsert)."""
        self.update(obj)

    def update(self, obj: Any) -> None:
        """Insert or replace ``obj`` and refile it in every index."""
        key = self._key_func(obj)
        rv = _resource_version_of(obj)
        with self._lock.write():
            self._update_locked(key, obj)
            if rv is not None:
                self._resource_version = rv

    def delete(self, obj: Any) -> None:
        """Remove the object with ``obj``'s key, if present; a tombstone removes the key it carries."""
        key = self._key_func(obj)
        rv = _resource_version_of(obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj)
        with self._lock.write():
            self._delete_locked(key)
            if rv is not None:
                self._resource_version = rv

    def delete_by_key(self, key: str) -> None:
        """Remove the object stored under ``key``, if present."""
        with self._lock.write():
            self._delete_locked(key)

    def replace(self, items: Iterable[Any], resource_version: str) -> None:
        """Make ``items`` the whole content and rebuild every index (client-go ``Replace``)."""
        new_items = {self._key_func(obj): obj for obj in items}
        with self._lock.write():
            indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
            for key, obj in new_items.items():
                for name, fn in self._indexers.items():
                    index = indices[name]
                    for value in fn(obj):
                        index.setdefault(value, set()).add(key)
            self._items = new_items
            self._indices = indices
            self._resource_version = resource_version

    def bookmark(self, resource_version: str) -> None:
        """Record the resourceVersion of a watch bookmark; the content is unchanged."""
        with self._lock.write():
            self._resource_version = resource_version

    def resync(self) -> None:
        """Nothing to do for a plain store (client-go ``Resync`` is meaningful only for queues)."""

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add new indices and build them from the current content. Raises ``ValueError`` on a name clash."""
        with self._lock.write():
            clash = sorted(set(indexers) & set(self._indexers))
            if clash:
                raise ValueError(f"indexer conflict: {clash}")
            built: dict[str, dict[str, set[str]]] = {}
            for name, fn in indexers.items():
                index: dict[str, set[str]] = {}
                for key, obj in self._items.items():
                    for value in fn(obj):
                        index.setdefault(value, set()).add(key)
                built[name] = index
            self._indexers.update(indexers)
            self._indices.update(built)

    # --- reads ---------------------------------------------------------------------------------------------

    def get(self, obj: Any) -> Any | None:
        """The stored object with ``obj``'s key, or None."""
        return self.get_by_key(self._key_func(obj))

    def get_by_key(self, key: str) -> Any | None:
        """The stored object under ``key``, or None."""
        with self._lock.read():
            return self._items.get(key)

    def list(self) -> builtins.list[Any]:
        """Every stored object, in no particular order."""
        with self._lock.read():
            return list(self._items.values())

    def list_keys(self) -> builtins.list[str]:
        """Every key, in no particular order."""
        with self._lock.read():
            return list(self._items)

    def index(self, index_name: str, obj: Any) -> builtins.list[Any]:
        """The stored objects that share at least one of ``obj``'s values in ``index_name``."""
        with self._lock.read():
            fn = self._indexer_locked(index_name)
            index = self._indices[index_name]
            keys: set[str] = set()
            for value in fn(obj):
                keys.update(index.get(value, ()))
            return [self._items[k] for k in keys]

    def index_keys(self, index_name: str, indexed_value: str) -> builtins.list[str]:
        """The keys filed under ``indexed_value`` in ``index_name``, sorted."""
        with self._lock.read():
            self._indexer_locked(index_name)
            return sorted(self._indices[index_name].get(indexed_value, ()))

    def by_index(self, index_name: str, indexed_value: str) -> builtins.list[Any]:
        """The stored objects filed under ``indexed_value`` in ``index_name``."""
        with self._lock.read():
            self._indexer_locked(index_name)
            keys = self._indices[index_name].get(indexed_value, ())
            return [self._items[k] for k in keys]

    def list_index_func_values(self, index_name: str) -> builtins.list[str]:
        """Every value some stored object is filed under in ``index_name`` (empty for an unknown index)."""
        with self._lock.read():
            return list(self._indices.get(index_name, ()))

    def get_indexers(self) -> dict[str, IndexFunc]:
        """A copy of the index name → function mapping."""
        with self._lock.read():
            return dict(self._indexers)

    @property
    def resource_version(self) -> str:
        """The resourceVersion of the last list, watch event or bookmark applied."""
        with self._lock.read():
            return self._resource_version

    def __len__(self) -> int:
        with self._lock.read():
            return len(self._items)

    def __repr__(self) -> str:
        with self._lock.read():
            return (
                f"ThreadSafeStore(items={len(self._items)}, indexers={sorted(self._indexers)}, "
                f"resource_version={self._resource_version!r})"
            )

    # --- internals (caller holds the write lock) -----------------------------------------------------------

    def _indexer_locked(self, index_name: str) -> IndexFunc:
        fn = self._indexers.get(index_name)
        if fn is None:
            raise KeyError(f"index with name {index_name!r} does not exist")
        return fn

    def _update_locked(self, key: str, obj: Any) -> None:
        old = self._items.get(key)
        # Compute every new value first: an index function that raises must leave the store untouched.
        new_values = [(name, fn(obj)) for name, fn in self._indexers.items()]
        self._items[key] = obj
        for name, values in new_values:
            old_values = self._indexers[name](old) if old is not None else []
            self._refile(self._indices[name], key, old_values, values)

    def _delete_locked(self, key: str) -> None:
        old = self._items.pop(key, None)
        if old is None:
            return
        for name, fn in self._indexers.items():
            self._refile(self._indices[name], key, fn(old), [])

    @staticmethod
    def _refile(
        index: dict[str, set[str]], key: str, old_values: builtins.list[str], new_values: builtins.list[str]
    ) -> None:
        # The common case (one unchanged value, e.g. the namespace) touches nothing, as in client-go.
        if len(old_values) == 1 and len(new_values) == 1 and old_values[0] == new_values[0]:
            return
        for value in old_values:
            keys = index.get(value)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del index[value]
        for value in new_values:
            index.setdefault(value, set()).add(key)


def _resource_version_of(obj: Any) -> str | None:
    if isinstance(obj, Mapping):
        meta = obj.get("metadata")
        if isinstance(meta, Mapping):
            rv = meta.get("resourceVersion")
            if isinstance(rv, str):
                return rv
    return None
