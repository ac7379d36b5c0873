"""Field indexes on an informer cache: look objects up by a value computed from them, in one namespace or all.

Go origin: controller-runtime ``pkg/cache/informer_cache.go`` (``IndexField``, ``indexByField``) and
``pkg/cache/internal/cache_reader.go`` (``FieldIndexName``, ``KeyToNamespacedKey``, ``byIndexes``).

Guarantees, exactly as controller-runtime:

- :func:`index_field` registers, on the informer of ``gvk``, an index named ``field:<field_name>``.
- For a namespaced object, each value ``v`` that ``fn`` returns is filed twice: as ``<namespace>/v`` (for
  lookups within a namespace) and as ``__all_namespaces/v`` (for lookups across all namespaces); the
  namespaced keys come first. A cluster-scoped object is filed under ``__all_namespaces/v`` only.
- Lookups go through the cache: ``cache.list(gvk, namespace=ns, index=(field_name, value))`` matches ``value``
  exactly, in ``ns`` (or in all namespaces when ``ns`` is None).
- Register before the informer starts (as controllers do at set-up). Registering later also works: the index
  is built from the objects already cached.

``fn`` receives the cached object (shared, read-only) and runs under the cache's write lock: keep it a pure,
fast function of the object. Deliberately missing: field selectors with several requirements (controller-
runtime intersects them; one index per lookup here) and non-exact matches (refused upstream too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from controller.informers.store import IndexFunc

if TYPE_CHECKING:
    from controller.client.gvk import GVK
    from controller.informers.shared_informer import SharedIndexInformer

ALL_NAMESPACES = "__all_namespaces"
"""The pseudo-namespace under which every value is also filed, for cluster-wide lookups."""

IndexerFunc = Callable[[Any], list[str]]
"""Extracts the values to index an object under (controller-runtime ``client.IndexerFunc``)."""


class InformerSource(Protocol):
    """What :func:`index_field` needs from a cache: the informer of a kind, created if need be."""

    def get_informer(self, gvk: GVK, *, block_until_synced: bool = True) -> SharedIndexInformer: ...


def field_index_name(field_name: str) -> str:
    """The index name a field is registered under: ``field:<field_name>``."""
    return "field:" + field_name


def key_to_namespaced_key(namespace: str | None, value: str) -> str:
    """The index key of ``value`` in ``namespace``; ``None`` or ``""`` means all namespaces."""
    return f"{namespace}/{value}" if namespace else f"{ALL_NAMESPACES}/{value}"


def namespaced_index_func(fn: IndexerFunc) -> IndexFunc:
    """Wrap ``fn`` so it files each value under the object's namespace and under all namespaces."""

    def index(obj: Any) -> list[str]:
        raw = fn(obj)
        namespace = obj.get("metadata", {}).get("namespace") or ""
        everywhere = [key_to_namespaced_key(None, v) for v in raw]
        if not namespace:
            return everywhere
        return [key_to_namespaced_key(namespace, v) for v in raw] + everywhere

    return index


def index_field(cache: InformerSource, gvk: GVK, field_name: str, fn: IndexerFunc) -> None:
    """Index objects of ``gvk`` by the values ``fn`` extracts, under ``field:<field_name>``.

    Creates the kind's informer if the cache has none yet (without waiting for it to sync). Raises
    ``ValueError`` if an index of that name already exists.
    """
    informer = cache.get_informer(gvk, block_until_synced=False)
    informer.add_indexers({field_index_name(field_name): namespaced_index_func(fn)})
