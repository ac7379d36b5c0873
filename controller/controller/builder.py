"""The builder: declares what a controller watches and registers it, and its informers, with a manager.

Go origin: controller-runtime ``pkg/builder/controller.go`` (``ControllerManagedBy(mgr).For(...).Owns(...)
.Watches(...).WithEventFilter(...).WithOptions(...).Complete(r)``).

::

    ControllerBuilder(manager)
        .for_(TRAINJOB, GenerationChangedPredicate())      # reconcile TrainJobs on spec changes
        .owns(JOBSET)                                      # and when a JobSet they control changes
        .watches(RUNTIME, map_runtime_to_trainjobs)        # and when a runtime they use changes
        .with_options(max_concurrent_reconciles=5)
        .complete(TrainJobReconciler(...))

Guarantees:

- ``for_(kind)`` watches the kind with :class:`~controller.controller.handler.EnqueueRequestForObject`; it may
  be called once. ``owns(kind)`` watches the kind with ``EnqueueRequestForOwner(for_ kind,
  only_controller=True)``; whether the owner kind is namespaced is asked of the manager's client (its REST
  mapper), as upstream. ``watches(kind, x)`` takes an :class:`~controller.controller.handler.EventHandler` or
  a map function (object → requests).
- Predicates given to ``for_``/``owns``/``watches`` apply to that watch only; ``with_event_filter``
  predicates apply to every watch, before the per-watch ones.
- Handlers that are not this library's own are wrapped with ``with_low_priority_when_unchanged`` (the
  library's handlers do it themselves), so initial-list and resync events yield to real changes.
- Each kind's informer comes from the manager's cache (``cache.get_informer``): one informer per kind,
  shared by every controller of the manager. Nothing starts here; the manager starts the cache and then the
  controller.
- The controller's name defaults to the ``for_`` kind in lower case and must be unique in the manager.

Deliberately missing: ``Named`` validation beyond uniqueness, ``WatchesRawSource``, ``WatchesMetadata``
(metadata-only informers), ``OnlyMetadata``, ``MatchEveryOwner`` for ``owns`` (use
``watches(kind, EnqueueRequestForOwner(..., only_controller=False))``) and webhooks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from controller.cache.informer_cache import Informers
from controller.client.gvk import GVK, Resource
from controller.clock import Clock
from controller.controller.controller import Controller
from controller.controller.handler import (
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
    EventHandler,
    MapFunc,
    with_low_priority_when_unchanged,
)
from controller.controller.predicate import Predicate
from controller.controller.reconcile import Reconciler, Request
from controller.controller.source import Kind
from controller.manager.manager import Runnable
from controller.workqueue.rate_limiters import RateLimiter

__all__ = ["BuilderManager", "ControllerBuilder", "ResourceMapper"]

_OWN_HANDLERS = (EnqueueRequestForObject, EnqueueRequestForOwner, EnqueueRequestsFromMapFunc)


class ResourceMapper(Protocol):
    """Where a kind is served (``client.resource_for``): the builder asks whether the ``for_`` kind is
    namespaced."""

    def resource_for(self, gvk: GVK) -> Resource: ...


class BuilderManager(Protocol):
    """What the builder needs of a manager (``controller.manager.manager.Manager`` has it)."""

    @property
    def cache(self) -> Informers: ...

    @property
    def client(self) -> ResourceMapper: ...

    @property
    def clock(self) -> Clock: ...

    def add(self, runnable: Runnable) -> None: ...


@dataclass(frozen=True, slots=True)
class _Watch:
    gvk: GVK
    handler: EventHandler
    predicates: tuple[Predicate, ...]


@dataclass(slots=True)
class _Options:
    max_concurrent_reconciles: int = 1
    rate_limiter: RateLimiter[Request] | None = None
    use_priority_queue: bool = True
    cache_sync_timeout: float = 120.0
    need_leader_election: bool = True


class ControllerBuilder:
    """Collects a controller's watches and options; :meth:`complete` builds and registers it."""

    def __init__(self, manager: BuilderManager) -> None:
        self._manager = manager
        self._name = ""
        self._for: _Watch | None = None
        self._owns: list[tuple[GVK, tuple[Predicate, ...]]] = []
        self._watches: list[_Watch] = []
        self._global_predicates: tuple[Predicate, ...] = ()
        self._options = _Options()
        self._completed = False

    def named(self, name: str) -> ControllerBuilder:
        """The controller's name (metrics label, log key, thread names); defaults to the ``for_`` kind."""
        self._name = name
        return self

    def for_(self, gvk: GVK, *predicates: Predicate) -> ControllerBuilder:
        """The kind this controller reconciles: each of its events enqueues the object itself."""
        if self._for is not None:
            raise ValueError("for_() may only be called once; use watches() for other kinds")
        self._for = _Watch(gvk, EnqueueRequestForObject(), predicates)
        return self

    def owns(self, gvk: GVK, *predicates: Predicate) -> ControllerBuilder:
        """A kind this controller creates: events enqueue the controlling owner of the ``for_`` kind."""
        self._owns.append((gvk, predicates))
        return self

    def watches(self, gvk: GVK, handler: EventHandler | MapFunc, *predicates: Predicate) -> ControllerBuilder:
        """Another kind whose events ``handler`` (or a map function) turns into requests."""
        resolved: EventHandler
        if isinstance(handler, _OWN_HANDLERS):
            resolved = handler
        elif _is_handler(handler):
            resolved = with_low_priority_when_unchanged(handler)  # type: ignore[arg-type]
        elif callable(handler):
            resolved = EnqueueRequestsFromMapFunc(handler)
        else:
            raise TypeError(f"watches() needs an EventHandler or a map function, not {handler!r}")
        self._watches.append(_Watch(gvk, resolved, predicates))
        return self

    def with_event_filter(self, *predicates: Predicate) -> ControllerBuilder:
        """Predicates applied to every watch of this controller (``WithEventFilter``)."""
        self._global_predicates += predicates
        return self

    def with_options(
        self,
        *,
        max_concurrent_reconciles: int | None = None,
        rate_limiter: RateLimiter[Request] | None = None,
        use_priority_queue: bool | None = None,
        cache_sync_timeout: float | None = None,
        need_leader_election: bool | None = None,
    ) -> ControllerBuilder:
        """Controller options; arguments left None keep their defaults (see :class:`Controller`)."""
        if max_concurrent_reconciles is not None:
            self._options.max_concurrent_reconciles = max_concurrent_reconciles
        if rate_limiter is not None:
            self._options.rate_limiter = rate_limiter
        if use_priority_queue is not None:
            self._options.use_priority_queue = use_priority_queue
        if cache_sync_timeout is not None:
            self._options.cache_sync_timeout = cache_sync_timeout
        if need_leader_election is not None:
            self._options.need_leader_election = need_leader_election
        return self

    def complete(self, reconciler: Reconciler) -> Controller:
        """Builds the controller, wires its informers from the manager's cache, and adds it to the manager."""
        if self._completed:
            raise RuntimeError("this builder was already completed")
        if self._for is None and not self._watches and not self._owns:
            raise ValueError("a controller needs for_(), owns() or watches()")
        if self._owns and self._for is None:
            raise ValueError("owns() needs for_(): it enqueues the owner of the for_ kind")
        name = self._name or (self._for.gvk.kind.lower() if self._for is not None else "")
        if not name:
            raise ValueError("a controller without for_() needs named()")
        opts = self._options
        ctrl = Controller(
            name,
            reconciler,
            max_concurrent_reconciles=opts.max_concurrent_reconciles,
            rate_limiter=opts.rate_limiter,
            use_priority_queue=opts.use_priority_queue,
            cache_sync_timeout=opts.cache_sync_timeout,
            need_leader_election=opts.need_leader_election,
            clock=self._manager.clock,
        )
        watches: list[_Watch] = []
        if self._for is not None:
            owner_namespaced = self._manager.client.resource_for(self._for.gvk).namespaced
            watches.append(self._for)
            for gvk, predicates in self._owns:
                handler = EnqueueRequestForOwner(
                    self._for.gvk, only_controller=True, owner_namespaced=owner_namespaced
                )
                watches.append(_Watch(gvk, handler, predicates))
        watches += self._watches
        for watch in watches:
            informer = self._manager.cache.get_informer(watch.gvk, block_until_synced=False)
            ctrl.watch(Kind(informer, watch.handler, *self._global_predicates, *watch.predicates))
        self._manager.add(ctrl)
        self._completed = True
        return ctrl


def _is_handler(candidate: object) -> bool:
    return all(hasattr(candidate, m) for m in ("create", "update", "delete", "generic"))
