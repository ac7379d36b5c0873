"""Informers: list+watch one kind into a thread-safe indexed cache and notify handlers, as client-go does.

Go origin: client-go ``tools/cache``. Read top-down:

- :mod:`controller.informers.store` — ``ThreadSafeStore``: objects by ``namespace/name`` with named indices;
  ``meta_namespace_key``; the ``DeletedFinalStateUnknown`` tombstone.
- :mod:`controller.informers.reflector` — ``Reflector``: list then watch, resourceVersion bookkeeping, relist
  on 410, pagination, bookmarks, backoff; the ``ListerWatcher`` seam the API client implements.
- :mod:`controller.informers.shared_informer` — ``SharedIndexInformer``: one reflector and cache per kind,
  in-order delivery to any number of handlers, each with its own buffer and thread; resync; transforms.
- :mod:`controller.informers.mutation_detector` — catches code that mutates cached objects (tests only).
- :mod:`controller.informers.testing` — ``FakeWatcher`` and ``FakeListerWatcher`` for tests.

Cached objects are shared and read-only by contract: copy before mutating.
"""

from __future__ import annotations

from controller.informers.mutation_detector import CacheMutationError, MutationDetector
from controller.informers.reflector import (
    Backoff,
    ListerWatcher,
    ListPage,
    ListWatch,
    Reflector,
    VeryShortWatchError,
    Watch,
    WatchEvent,
)
from controller.informers.shared_informer import (
    Registration,
    ResourceEventHandler,
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    TransformFunc,
    strip_managed_fields,
)
from controller.informers.store import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    IndexFunc,
    ThreadSafeStore,
    deletion_handling_meta_namespace_key,
    meta_namespace_index_func,
    meta_namespace_key,
    split_meta_namespace_key,
)

__all__ = [
    "NAMESPACE_INDEX",
    "Backoff",
    "CacheMutationError",
    "DeletedFinalStateUnknown",
    "IndexFunc",
    "ListPage",
    "ListWatch",
    "ListerWatcher",
    "MutationDetector",
    "Reflector",
    "Registration",
    "ResourceEventHandler",
    "ResourceEventHandlerFuncs",
    "SharedIndexInformer",
    "ThreadSafeStore",
    "TransformFunc",
    "VeryShortWatchError",
    "Watch",
    "WatchEvent",
    "deletion_handling_meta_namespace_key",
    "meta_namespace_index_func",
    "meta_namespace_key",
    "split_meta_namespace_key",
    "strip_managed_fields",
]
