"""Field indexers for the informer cache (controller-runtime's ``IndexField``); see :mod:`.field`."""

from __future__ import annotations

from controller.indexers.field import (
    ALL_NAMESPACES,
    IndexerFunc,
    InformerSource,
    field_index_name,
    index_field,
    key_to_namespaced_key,
    namespaced_index_func,
)

__all__ = [
    "ALL_NAMESPACES",
    "IndexerFunc",
    "InformerSource",
    "field_index_name",
    "index_field",
    "key_to_namespaced_key",
    "namespaced_index_func",
]
