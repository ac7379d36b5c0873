"""What a reconciler reads and writes through: small Protocols, so it can depend on them and not on the
informer cache or the REST client.

Go origin: controller-runtime ``pkg/client/interfaces.go`` (``Reader``, ``Writer``, ``StatusWriter``) and
the manager's ``GetAPIReader``.

- :class:`Reader`: reads served from the informer cache
  (:class:`~controller.cache.informer_cache.InformerCache`): shared objects, read-only by contract.
- :class:`APIReader`: reads that go to the API server (:class:`~controller.client.client.Client`, e.g.
  ``Manager.api_reader``), for what a cache cannot answer; a list is a :class:`ListResult`.
- :class:`Writer` and :class:`StatusWriter`: the writes of :class:`~controller.client.client.Client` that
  reconcilers make (server-side apply, patch, delete; status patch and apply).

Failures raise :mod:`controller.client.errors`'s exceptions (``NotFound``, ``Conflict``...), whichever side
implements the Protocol.

Deliberately different from controller-runtime: the cache's ``list`` and the API server's ``list`` return
different shapes (a list of shared objects; a page with its resourceVersion), so they are two Protocols,
not one ``Reader``; and the Writer holds only the writes reconcilers make (``create`` and ``update`` are on
:class:`~controller.client.client.Client`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from controller.client.gvk import GVK
from controller.client.object import ListResult, Object

if TYPE_CHECKING:
    from controller.client.client import PatchType

__all__ = ["APIReader", "Reader", "StatusWriter", "Writer"]


class Reader(Protocol):
    """Reads from a cache (controller-runtime ``client.Reader`` as the cache serves it)."""

    def get(self, gvk: GVK, name: str, namespace: str | None = None) -> Object:
        """The object; raises :class:`~controller.client.errors.NotFound` if there is none of that name."""
        ...

    def list(
        self,
        gvk: GVK,
        namespace: str | None = None,
        *,
        label_selector: str | Mapping[str, str] | None = None,
    ) -> list[Object]:
        """Objects of ``gvk`` in ``namespace`` (None: all) matching ``label_selector``, in no order."""
        ...


class APIReader(Protocol):
    """Reads from the API server itself (controller-runtime ``client.Reader``, as ``GetAPIReader``)."""

    def get(self, gvk: GVK, name: str, namespace: str | None = None) -> Object:
        """The object; raises :class:`~controller.client.errors.NotFound` if absent."""
        ...

    def list(
        self, gvk: GVK, namespace: str | None = None, *, label_selector: str | None = None
    ) -> ListResult:
        """Every object of ``gvk`` in ``namespace`` (None: all) matching ``label_selector``."""
        ...


class Writer(Protocol):
    """Writes objects (controller-runtime ``client.Writer``: the writes reconcilers make)."""

    def apply(self, obj: Mapping[str, Any], field_manager: str, *, force: bool = True) -> Object:
        """Server-side apply ``obj`` as ``field_manager``; returns the object the API server stored."""
        ...

    def patch(
        self,
        gvk: GVK,
        name: str,
        patch: Any,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        *,
        field_manager: str | None = None,
    ) -> Object:
        """Patches one object (a JSON merge patch by default); returns the object the API server stored."""
        ...

    def delete(
        self,
        gvk: GVK,
        name: str,
        namespace: str | None = None,
        propagation_policy: str | None = "Background",
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        """Deletes one object; ``uid``/``resource_version`` are preconditions."""
        ...


class StatusWriter(Protocol):
    """Writes the ``status`` subresource (controller-runtime ``client.SubResourceWriter`` for status)."""

    def patch_status(
        self,
        gvk: GVK,
        name: str,
        patch: Any,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        *,
        field_manager: str | None = None,
    ) -> Object:
        """Patches the status of one object; returns the object the API server stored."""
        ...

    def apply_status(self, obj: Mapping[str, Any], field_manager: str, *, force: bool = True) -> Object:
        """Server-side apply to the ``status`` subresource."""
        ...
