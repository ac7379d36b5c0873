"""Wire objects: the one ``Object`` type of ``controller/``, a decoded list, and the one deep copy.

Go origin: apimachinery ``unstructured.Unstructured`` / ``UnstructuredList`` and ``DeepCopy``.

Guarantees: an :data:`Object` is a JSON-shaped ``dict`` decoded once by orjson (never a generated model;
unknown fields survive a round trip). Objects handed out by a cache are shared and read-only by contract:
:func:`deep_copy` one (an orjson round trip, several times faster than ``copy.deepcopy``) before changing it.

Deliberately missing: typed views (they live with the code that reads the fields) and conversion between
versions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["ListResult", "Object", "deep_copy"]

Object = dict[str, Any]
"""A Kubernetes object as decoded JSON: ``apiVersion``, ``kind``, ``metadata`` and the rest."""


def deep_copy(obj: Any) -> Any:
    """A deep copy of a JSON-shaped value, by an orjson round trip (several times faster than deepcopy)."""
    return orjson.loads(orjson.dumps(obj))


@dataclass(frozen=True, slots=True, kw_only=True)
class ListResult:
    """A list response: the items, the list's resourceVersion, and the continue token for the next page."""

    items: list[Object]
    resource_version: str
    continue_: str = ""
    remaining_item_count: int | None = None
