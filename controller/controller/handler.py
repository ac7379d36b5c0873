"""Event handlers: they turn events into reconcile requests on a controller's queue.

Go origin: controller-runtime ``pkg/handler`` (``EnqueueRequestForObject``, ``EnqueueRequestForOwner``,
``EnqueueRequestsFromMapFunc``, ``Funcs``, ``WithLowPriorityWhenUnchanged``). The events are
:mod:`controller.controller.event`; the bridge from an informer through predicates to a handler is
:mod:`controller.controller.source`.

Guarantees:

- A handler only adds :class:`~controller.controller.reconcile.Request` keys to the queue; it never
  reconciles, never blocks on the API server and never mutates the objects it is given (they are the cache's,
  shared).
- Requests are deduplicated per event (an update whose old and new objects map to the same request adds it
  once); the queue deduplicates across events.
- **Low priority when unchanged.** When the queue is a priority queue (it has ``add_with_opts``), a create
  event from the informer's initial list and an update whose old and new ``resourceVersion`` are equal (a
  relist or resync) add their requests with :data:`LOW_PRIORITY`, so on a cold start real changes overtake
  the replay of every existing object. The three handlers here do this themselves (upstream relies on the
  builder's ``WithLowPriorityWhenUnchanged`` wrapper for the owner handler); wrap a handler of your own with
  :func:`with_low_priority_when_unchanged` to get the same. Deletes and generic events use the default
  priority.

Deliberately missing: typed (generic) events and requests, ``EnqueueRequestForOwner``'s REST-mapper lookup
of the owner's scope (the caller says whether the owner kind is namespaced), and ``context`` arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from controller.client.object import Object
from controller.controller.event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from controller.controller.reconcile import Request
from controller.workqueue.priority import LOW_PRIORITY

__all__ = [
    "LOW_PRIORITY",
    "EnqueueRequestForObject",
    "EnqueueRequestForOwner",
    "EnqueueRequestsFromMapFunc",
    "EventHandler",
    "Funcs",
    "GroupKind",
    "MapFunc",
    "PriorityRequestQueue",
    "RequestQueue",
    "with_low_priority_when_unchanged",
]

_log = structlog.get_logger("controller.controller.handler")


# --- queues as handlers see them --------------------------------------------------------------------------


class RequestQueue(Protocol):
    """The part of a controller's queue a handler uses."""

    def add(self, item: Request) -> None: ...


class PriorityRequestQueue(RequestQueue, Protocol):
    """A queue with priorities (``controller.workqueue``'s priority queue)."""

    def add_with_opts(
        self, item: Request, *, priority: int = 0, after: float = 0.0, rate_limited: bool = False
    ) -> None: ...


class EventHandler(Protocol):
    """Turns one event into zero or more requests on ``queue``. Must not block and must not mutate objects."""

    def create(self, event: CreateEvent, queue: RequestQueue) -> None: ...

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None: ...

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None: ...

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None: ...


def _is_priority_queue(queue: RequestQueue) -> bool:
    return getattr(queue, "add_with_opts", None) is not None


def _resource_version(obj: Object) -> str | None:
    meta = obj.get("metadata")
    return meta.get("resourceVersion") if meta else None


def _unchanged(event: UpdateEvent) -> bool:
    return _resource_version(event.object_old) == _resource_version(event.object_new)


def _low_priority_queue(queue: RequestQueue, low_priority: bool) -> RequestQueue:
    """``queue``, or when asked for and the queue has priorities, a view whose plain adds use
    :data:`LOW_PRIORITY`."""
    if low_priority and _is_priority_queue(queue):
        return _DefaultPriorityQueue(queue, LOW_PRIORITY)  # type: ignore[arg-type]
    return queue


def _adder(queue: RequestQueue, low_priority: bool) -> Callable[[Request], None]:
    """``queue.add``, or an add at :data:`LOW_PRIORITY` when asked for and the queue has priorities."""
    return _low_priority_queue(queue, low_priority).add


def _request_for(obj: Object) -> Request | None:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        return None
    return Request(meta.get("namespace") or "", name)


# --- EnqueueRequestForObject ------------------------------------------------------------------------------


class EnqueueRequestForObject:
    """Enqueues the object itself: the handler behind ``ControllerBuilder.for_``."""

    __slots__ = ()

    @staticmethod
    def _enqueue(request: Request | None, event_kind: str, add: Callable[[Request], None]) -> None:
        if request is None:
            _log.error("handler.object_without_name", event_kind=event_kind)
            return
        add(request)

    def create(self, event: CreateEvent, queue: RequestQueue) -> None:
        self._enqueue(_request_for(event.object), "create", _adder(queue, event.is_in_initial_list))

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        # Upstream enqueues the new object, or the old one if the new one has no name.
        request = _request_for(event.object_new) or _request_for(event.object_old)
        self._enqueue(request, "update", _adder(queue, _unchanged(event)))

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None:
        self._enqueue(_request_for(event.object), "delete", queue.add)

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None:
        self._enqueue(_request_for(event.object), "generic", queue.add)

    def __repr__(self) -> str:
        return "EnqueueRequestForObject()"


# --- handlers that map objects to requests ---------------------------------------------------------------


class _EnqueueMapped:
    """What the owner and map-function handlers share: each object of an event is mapped to requests
    (:meth:`_requests`); an update maps both the old and the new object; each request is added once, in the
    order first mapped."""

    __slots__ = ()

    def _requests(self, obj: Object) -> Iterable[Request]:
        raise NotImplementedError

    def _enqueue(self, objs: Sequence[Object], add: Callable[[Request], None]) -> None:
        requests: dict[Request, None] = {}  # ordered, deduplicated
        for obj in objs:
            for request in self._requests(obj):
                requests[request] = None
        for request in requests:
            add(request)

    def create(self, event: CreateEvent, queue: RequestQueue) -> None:
        self._enqueue((event.object,), _adder(queue, event.is_in_initial_list))

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        self._enqueue((event.object_old, event.object_new), _adder(queue, _unchanged(event)))

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None:
        self._enqueue((event.object,), queue.add)

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None:
        self._enqueue((event.object,), queue.add)


# --- EnqueueRequestForOwner -------------------------------------------------------------------------------


class GroupKind(Protocol):
    """Anything with ``group`` and ``kind`` (a ``GroupVersionKind`` will do; its version is ignored)."""

    @property
    def group(self) -> str: ...

    @property
    def kind(self) -> str: ...


def _group_of(api_version: str) -> str:
    group, _, version = api_version.rpartition("/")
    return group if version else api_version  # "v1" is the core group ""


class EnqueueRequestForOwner(_EnqueueMapped):
    """Enqueues the owner(s) of the object, matched on the owner reference's group and kind only.

    With ``only_controller`` (the default, and what ``ControllerBuilder.owns`` uses) only the owner reference
    with ``controller: true`` counts. An update enqueues the owners of both the old and the new object, so a
    child that changes owner wakes both. ``owner_namespaced=False`` for cluster-scoped owner kinds: their
    requests then carry namespace ``""``; otherwise the owner is taken to live in the child's namespace.
    """

    __slots__ = ("_group", "_kind", "_namespaced", "_only_controller")

    def __init__(
        self, owner: GroupKind, *, only_controller: bool = True, owner_namespaced: bool = True
    ) -> None:
        self._group = owner.group
        self._kind = owner.kind
        self._only_controller = only_controller
        self._namespaced = owner_namespaced

    def _requests(self, obj: Object) -> Iterator[Request]:
        meta = obj.get("metadata") or {}
        for ref in meta.get("ownerReferences") or ():
            if self._only_controller and not ref.get("controller"):
                continue
            if ref.get("kind") != self._kind or _group_of(ref.get("apiVersion", "")) != self._group:
                continue
            namespace = (meta.get("namespace") or "") if self._namespaced else ""
            yield Request(namespace, ref["name"])

    def __repr__(self) -> str:
        return (
            f"EnqueueRequestForOwner(group={self._group!r}, kind={self._kind!r}, "
            f"only_controller={self._only_controller})"
        )


# --- EnqueueRequestsFromMapFunc ---------------------------------------------------------------------------

MapFunc = Callable[[Object], Iterable[Request]]
"""Maps an object to the requests it should wake. Runs on the informer's thread: read the cache only."""


class EnqueueRequestsFromMapFunc(_EnqueueMapped):
    """Enqueues whatever a function maps the object to; an update maps both old and new objects."""

    __slots__ = ("_fn",)

    def __init__(self, fn: MapFunc) -> None:
        self._fn = fn

    def _requests(self, obj: Object) -> Iterable[Request]:
        return self._fn(obj)

    def __repr__(self) -> str:
        return f"EnqueueRequestsFromMapFunc({getattr(self._fn, '__qualname__', self._fn)!r})"


# --- Funcs and WithLowPriorityWhenUnchanged ---------------------------------------------------------------


class _DefaultPriorityQueue:
    """A priority queue whose plain adds carry a fixed priority (``workqueueWithDefaultPriority``)."""

    __slots__ = ("_priority", "_queue")

    def __init__(self, queue: PriorityRequestQueue, priority: int) -> None:
        self._queue = queue
        self._priority = priority

    def add(self, item: Request) -> None:
        self._queue.add_with_opts(item, priority=self._priority)

    def add_with_opts(
        self, item: Request, *, priority: int | None = None, after: float = 0.0, rate_limited: bool = False
    ) -> None:
        self._queue.add_with_opts(
            item,
            priority=self._priority if priority is None else priority,
            after=after,
            rate_limited=rate_limited,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Funcs:
    """An :class:`EventHandler` from optional functions; a missing function ignores its event kind.

    Like upstream's ``TypedFuncs``, create events from the initial list and unchanged updates see a queue
    whose plain ``add`` uses :data:`LOW_PRIORITY` when the queue has priorities.
    """

    create_fn: Callable[[CreateEvent, RequestQueue], None] | None = None
    update_fn: Callable[[UpdateEvent, RequestQueue], None] | None = None
    delete_fn: Callable[[DeleteEvent, RequestQueue], None] | None = None
    generic_fn: Callable[[GenericEvent, RequestQueue], None] | None = None

    def create(self, event: CreateEvent, queue: RequestQueue) -> None:
        if self.create_fn is not None:
            self.create_fn(event, _low_priority_queue(queue, event.is_in_initial_list))

    def update(self, event: UpdateEvent, queue: RequestQueue) -> None:
        if self.update_fn is not None:
            self.update_fn(event, _low_priority_queue(queue, _unchanged(event)))

    def delete(self, event: DeleteEvent, queue: RequestQueue) -> None:
        if self.delete_fn is not None:
            self.delete_fn(event, queue)

    def generic(self, event: GenericEvent, queue: RequestQueue) -> None:
        if self.generic_fn is not None:
            self.generic_fn(event, queue)


def with_low_priority_when_unchanged(handler: EventHandler) -> EventHandler:
    """Wraps ``handler``: its adds for initial-list creates and unchanged updates use :data:`LOW_PRIORITY`."""
    return Funcs(
        create_fn=handler.create,
        update_fn=handler.update,
        delete_fn=handler.delete,
        generic_fn=handler.generic,
    )
