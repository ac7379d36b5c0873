"""The per-kind ListerWatcher: list and watch one kind, in one namespace, through selectors.

Go origin: client-go ``tools/cache`` ``ListWatch`` / ``NewFilteredListWatchFromClient``. It satisfies the
``ListerWatcher`` protocol of :mod:`controller.informers.reflector`, which is what a reflector runs on.

Guarantees: a list with a continue token never sends a resourceVersion (the server refuses both); every list
and watch carries the same namespace and selectors, so the informer's view is exactly the filtered set; a
watch passes ``sendInitialEvents``/``resourceVersionMatch`` through (a streaming list, ``WatchList``) only
when asked for, so a plain watch is the same request it always was.

Deliberately missing: metadata-only lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from controller.client.gvk import GVK
from controller.client.object import ListResult
from controller.client.watch import Watch

__all__ = ["KindListerWatcher", "ListWatchClient"]


class ListWatchClient(Protocol):
    """The slice of :class:`controller.client.client.Client` a :class:`KindListerWatcher` uses."""

    def list_page(
        self,
        gvk: GVK,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> ListResult: ...

    def watch(
        self,
        gvk: GVK,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
        label_selector: str | None = None,
        field_selector: str | None = None,
        read_timeout: float | None = None,
        send_initial_events: bool | None = None,
        resource_version_match: str | None = None,
    ) -> Watch: ...


@dataclass(frozen=True, slots=True)
class KindListerWatcher:
    """List and watch one kind, optionally in one namespace and filtered by selectors: what a reflector needs.

    ``list`` and ``watch`` match the ``ListerWatcher`` protocol of ``controller.informers``.
    """

    client: ListWatchClient
    gvk: GVK
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None

    def list(
        self, resource_version: str | None = None, limit: int | None = None, continue_: str | None = None
    ) -> ListResult:
        """One page. ``resource_version`` ``""``/None is a consistent read, ``"0"`` any cached state;
        ``limit`` 0/None is unpaginated; ``continue_`` continues a previous page (and then
        ``resource_version`` is not sent, as the server requires)."""
        return self.client.list_page(
            self.gvk,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            resource_version=None if continue_ else resource_version,
            limit=limit,
            continue_=continue_,
        )

    def watch(
        self,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
        *,
        send_initial_events: bool = False,
        resource_version_match: str = "",
    ) -> Watch:
        """A watch from ``resource_version``; with ``send_initial_events`` (and ``resource_version_match``
        ``"NotOlderThan"``, which the server requires with it) a streaming list: the initial state as
        ``ADDED`` events, then the bookmark that ends it, then the changes."""
        return self.client.watch(
            self.gvk,
            self.namespace,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            allow_bookmarks=allow_bookmarks,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            send_initial_events=send_initial_events or None,
            resource_version_match=resource_version_match or None,
        )
