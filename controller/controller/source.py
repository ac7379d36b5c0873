"""Sources: what feeds a controller's queue; :class:`Kind` feeds one informer's events through a handler.

Go origin: controller-runtime ``pkg/source`` (``Source``, ``SyncingSource``, ``Kind``) and
``pkg/internal/source/event_handler.go`` (:class:`InformerEventAdapter`, the bridge from an informer's
``on_add``/``on_update``/``on_delete`` callbacks to predicates and a handler).

Guarantees:

- A :class:`Source` is started once, with the controller's queue (:meth:`Source.start`); from then on it
  adds requests to it until :meth:`Source.stop`. :meth:`Source.has_synced` says when it has delivered its
  initial list: the controller starts no worker before every source has synced.
- :class:`Kind` registers one :class:`InformerEventAdapter` on its informer at start and removes it on stop,
  so a stopped controller receives nothing more. It has synced once *its* registration has seen every
  object of the informer's initial list, not merely once the informer has.
- :class:`InformerEventAdapter` unwraps a ``DeletedFinalStateUnknown`` tombstone into a
  :class:`~controller.controller.event.DeleteEvent` with ``delete_state_unknown=True`` (the object is the last
  state the cache knew), runs the predicates in order (all must pass; the first False stops), then calls the
  handler. It runs on the informer's delivery thread and holds no lock while predicates and handlers run.

Deliberately missing: ``source.Channel`` (generic events from a channel), ``source.Func``, ``TypedKind``
over typed objects, and a source that fetches its informer from a cache itself (``Kind(cache, obj, ...)``
upstream): the builder asks the cache and hands the informer over.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar

import structlog

from controller.client.object import Object
from controller.controller.event import CreateEvent, DeleteEvent, UpdateEvent
from controller.controller.handler import EventHandler, RequestQueue
from controller.controller.predicate import Predicate
from controller.informers.shared_informer import ResourceEventHandler
from controller.informers.store import DeletedFinalStateUnknown

__all__ = ["HandlerRegistration", "Informer", "InformerEventAdapter", "Kind", "Source"]

_log = structlog.get_logger("controller.controller.source")


class Source(Protocol):
    """Feeds a controller's queue (``source.SyncingSource``)."""

    def start(self, queue: RequestQueue) -> None:
        """Begin adding requests to ``queue``. Called once, before the controller waits for sync."""
        ...

    def has_synced(self) -> bool:
        """True once the source has delivered its initial list to the queue."""
        ...

    def stop(self) -> None:
        """Add nothing more to the queue. Idempotent; a no-op before :meth:`start`."""
        ...


class HandlerRegistration(Protocol):
    """What an informer hands back for an event handler (``cache.ResourceEventHandlerRegistration``)."""

    def has_synced(self) -> bool: ...


_R = TypeVar("_R", bound=HandlerRegistration)


class Informer(Protocol[_R]):
    """What :class:`Kind` needs of an informer; :class:`~controller.informers.SharedIndexInformer` has it."""

    def add_event_handler(self, handler: ResourceEventHandler) -> _R: ...

    def remove_event_handler(self, registration: _R) -> None: ...


class Kind(Generic[_R]):
    """A :class:`Source` of one informer's events, filtered by ``predicates`` and mapped by ``handler``.

    ``Kind(informer, EnqueueRequestForObject(), GenerationChangedPredicate())``.
    """

    __slots__ = ("_handler", "_informer", "_lock", "_predicates", "_registration", "_started", "_stopped")

    def __init__(self, informer: Informer[_R], handler: EventHandler, *predicates: Predicate) -> None:
        self._informer = informer
        self._handler = handler
        self._predicates = predicates
        self._lock = threading.Lock()
        # Guarded by _lock: the registration is set by start and cleared by stop; the flags are never unset.
        self._registration: _R | None = None
        self._started = False
        self._stopped = False

    @property
    def handler(self) -> EventHandler:
        return self._handler

    @property
    def predicates(self) -> tuple[Predicate, ...]:
        return self._predicates

    def start(self, queue: RequestQueue) -> None:
        """Registers the adapter on the informer. Raises RuntimeError if started twice."""
        with self._lock:
            started, self._started = self._started, True
        if started:
            raise RuntimeError(f"{self!r} was started more than once")
        # Not under our lock: an informer that has started delivers the initial list from another thread.
        registration = self._informer.add_event_handler(
            InformerEventAdapter(self._handler, queue, self._predicates)
        )
        if not self._keep(registration):  # stop() ran meanwhile and did not see this registration
            self._informer.remove_event_handler(registration)

    def _keep(self, registration: _R) -> bool:
        """Records ``registration`` unless stop() has run; False means the caller must remove it."""
        with self._lock:
            if self._stopped:
                return False
            self._registration = registration
            return True

    def has_synced(self) -> bool:
        with self._lock:
            registration = self._registration
        return registration is not None and registration.has_synced()

    def stop(self) -> None:
        with self._lock:
            registration, self._registration = self._registration, None
            self._stopped = True
        if registration is not None:
            self._informer.remove_event_handler(registration)

    def __repr__(self) -> str:
        with self._lock:
            state = "stopped" if self._stopped else "started" if self._started else "new"
        return f"Kind({self._handler!r}, predicates={len(self._predicates)}, {state})"


class InformerEventAdapter:
    """An informer event handler that feeds one controller: predicates, then the handler, into the queue.

    Register it with ``informer.add_event_handler(adapter)``.
    """

    __slots__ = ("_handler", "_predicates", "_queue")

    def __init__(
        self, handler: EventHandler, queue: RequestQueue, predicates: Sequence[Predicate] = ()
    ) -> None:
        self._handler = handler
        self._queue = queue
        self._predicates = tuple(predicates)

    def on_add(self, obj: Object, is_in_initial_list: bool) -> None:
        event = CreateEvent(object=obj, is_in_initial_list=is_in_initial_list)
        for predicate in self._predicates:
            if not predicate.create(event):
                return
        self._handler.create(event, self._queue)

    def on_update(self, old: Object, new: Object) -> None:
        event = UpdateEvent(object_old=old, object_new=new)
        for predicate in self._predicates:
            if not predicate.update(event):
                return
        self._handler.update(event, self._queue)

    def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            if not isinstance(obj.obj, dict):
                _log.error("handler.unexpected_tombstone_object", key=obj.key, type=type(obj.obj).__name__)
                return
            event = DeleteEvent(object=obj.obj, delete_state_unknown=True)
        else:
            event = DeleteEvent(object=obj)
        for predicate in self._predicates:
            if not predicate.delete(event):
                return
        self._handler.delete(event, self._queue)

    def __repr__(self) -> str:
        return f"InformerEventAdapter({self._handler!r}, predicates={len(self._predicates)})"
