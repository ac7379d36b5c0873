"""The seams a reconciler reads and writes through: `Reader`, `Writer` and `StatusWriter`, as protocols.

Go origin: controller-runtime `pkg/client/interfaces.go` (`client.Reader`, `client.Writer`,
`client.StatusWriter`) and the manager's `GetAPIReader`. A reconciler takes these rather than the concrete
informer cache and REST client, so its tests hand it small fakes that satisfy them.

Who satisfies what:

- `controller.cache.informer_cache.InformerCache` is a `CachedReader` (its own `Reader` protocol extends
  it with field indexes); `controller.client.client.Client` (and the manager's `api_reader`, which is one)
  is an `APIReader`, a `Writer` and a `StatusWriter`.
- `Reader` is `get` alone. Listing comes in two shapes, so it has two protocols: a cache answers a list of
  its shared objects (`CachedReader`), the API server a `ListResult` with its resourceVersion (`APIReader`).
- `Writer.patch` and `StatusWriter.patch_status` send a JSON merge patch (RFC 7386): the only patch the
  reconcilers here write.

Failures raise `controller.client.errors`' exceptions (`NotFound`, `Conflict`, ...), whichever side
implements the protocol.

Deliberately missing: `create` and `update` (no reconciler here calls them; they are on `Client`), field
selectors, and the cache's field-index reads (`controller.cache.informer_cache.Reader.by_index`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from controller.client.gvk import GVK
from controller.client.object import ListResult, Object

__all__ = ["APIReader", "CachedReader", "Reader", "StatusWriter", "Writer"]


class Reader(Protocol):
    """Gets one object by name (`client.Reader.Get`)."""

    def get(self, gvk: GVK, name: str, namespace: str | None = None) -> Object:
        """The object; raises `controller.client.errors.NotFound` when there is none of that name."""
        ...


class CachedReader(Reader, Protocol):
    """An informer cache's reads: what it returns is shared and read-only by contract."""

    def list(
        self, gvk: GVK, namespace: str | None = None, *, label_selector: Mapping[str, str] | None = None
    ) -> Sequence[Object]:
        """The cached objects of `gvk` in `namespace` (None: all) with these labels, in no order."""
        ...


class APIReader(Reader, Protocol):
    """Reads from the API server (controller-runtime's `Manager.GetAPIReader`); results are the caller's."""

    def list(
        self, gvk: GVK, namespace: str | None = None, *, label_selector: str | None = None
    ) -> ListResult:
        """Every object of `gvk` in `namespace` (None: all) matching `label_selector` (`k=v,...`)."""
        ...


class Writer(Protocol):
    """Writes objects (`client.Writer`: `Apply`, `Patch`, `Delete`)."""

    def apply(self, obj: Mapping[str, Any], field_manager: str, *, force: bool = True) -> Object:
        """Server-side apply `obj` as `field_manager` and return the object the API server stored."""
        ...

    def patch(self, gvk: GVK, name: str, patch: Any, namespace: str | None = None) -> Object:
        """JSON merge patch one object and return it as stored."""
        ...

    def delete(self, gvk: GVK, name: str, namespace: str | None = None, *, uid: str | None = None) -> None:
        """Delete one object, `uid` as a precondition when given; raises `controller.client.errors.NotFound`
        when it is gone already."""
        ...


class StatusWriter(Protocol):
    """Writes the `status` subresource (`client.StatusWriter.Patch`)."""

    def patch_status(self, gvk: GVK, name: str, patch: Any, namespace: str | None = None) -> Object:
        """JSON merge patch an object's status and return the object as stored."""
        ...
