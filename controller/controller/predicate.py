"""Predicates: filters that decide which informer events reach a controller's handler.

Go origin: controller-runtime ``pkg/predicate/predicate.go``.

Guarantees:

- A predicate answers per event kind (create, update, delete, generic); an event reaches the handler only if
  every predicate registered for it answers True, evaluated in order, stopping at the first False.
- Predicates are pure functions of the event: they read the (shared, read-only) objects and never mutate
  them, and they run on the informer's delivery thread, so they must be quick.
- The "changed" predicates filter **updates only**; creates, deletes and generic events pass.
  :class:`GenerationChangedPredicate` passes an update iff ``metadata.generation`` changed, so status-only
  writes and label/annotation edits are ignored; that includes someone wiping the status, which the
  controller then will not self-correct (upstream's documented caveat). Combine with :func:`or_` and
  :class:`LabelChangedPredicate`/:class:`AnnotationChangedPredicate` when metadata matters.

Deliberately missing: typed predicates over typed objects, ``LabelSelectorPredicate`` (use an informer
label selector, which also saves memory), and logging of events that predicates drop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from controller.client.object import Object
from controller.controller.event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent

__all__ = [
    "AnnotationChangedPredicate",
    "Funcs",
    "GenerationChangedPredicate",
    "LabelChangedPredicate",
    "Predicate",
    "ResourceVersionChangedPredicate",
    "and_",
    "new_predicate_funcs",
    "not_",
    "or_",
]


class Predicate(Protocol):
    """Answers, per event kind, whether the event should reach the handler."""

    def create(self, event: CreateEvent) -> bool: ...

    def update(self, event: UpdateEvent) -> bool: ...

    def delete(self, event: DeleteEvent) -> bool: ...

    def generic(self, event: GenericEvent) -> bool: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Funcs:
    """A :class:`Predicate` from optional functions; a missing function lets its event kind pass."""

    create_fn: Callable[[CreateEvent], bool] | None = None
    update_fn: Callable[[UpdateEvent], bool] | None = None
    delete_fn: Callable[[DeleteEvent], bool] | None = None
    generic_fn: Callable[[GenericEvent], bool] | None = None

    def create(self, event: CreateEvent) -> bool:
        return self.create_fn is None or self.create_fn(event)

    def update(self, event: UpdateEvent) -> bool:
        return self.update_fn is None or self.update_fn(event)

    def delete(self, event: DeleteEvent) -> bool:
        return self.delete_fn is None or self.delete_fn(event)

    def generic(self, event: GenericEvent) -> bool:
        return self.generic_fn is None or self.generic_fn(event)


def new_predicate_funcs(keep: Callable[[Object], bool]) -> Funcs:
    """A predicate that applies ``keep`` to the event's object (the new object for updates), all kinds."""
    return Funcs(
        create_fn=lambda e: keep(e.object),
        update_fn=lambda e: keep(e.object_new),
        delete_fn=lambda e: keep(e.object),
        generic_fn=lambda e: keep(e.object),
    )


def _meta(obj: Object) -> dict[str, Any]:
    meta: dict[str, Any] | None = obj.get("metadata")
    return meta if meta is not None else {}


class _UpdatesOnly:
    """Base for predicates that judge updates and let every other event kind pass."""

    __slots__ = ()

    def create(self, event: CreateEvent) -> bool:
        return True

    def delete(self, event: DeleteEvent) -> bool:
        return True

    def generic(self, event: GenericEvent) -> bool:
        return True

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class GenerationChangedPredicate(_UpdatesOnly):
    """Passes an update iff ``metadata.generation`` changed (a spec change, for kinds with a status)."""

    __slots__ = ()

    def update(self, event: UpdateEvent) -> bool:
        return _meta(event.object_new).get("generation") != _meta(event.object_old).get("generation")


class ResourceVersionChangedPredicate(_UpdatesOnly):
    """Passes an update iff ``metadata.resourceVersion`` changed, dropping resync replays."""

    __slots__ = ()

    def update(self, event: UpdateEvent) -> bool:
        old = _meta(event.object_old).get("resourceVersion")
        return bool(_meta(event.object_new).get("resourceVersion") != old)


class LabelChangedPredicate(_UpdatesOnly):
    """Passes an update iff the labels changed (absent and empty count as equal)."""

    __slots__ = ()

    def update(self, event: UpdateEvent) -> bool:
        old = _meta(event.object_old).get("labels") or {}
        new = _meta(event.object_new).get("labels") or {}
        return bool(old != new)


class AnnotationChangedPredicate(_UpdatesOnly):
    """Passes an update iff the annotations changed (absent and empty count as equal)."""

    __slots__ = ()

    def update(self, event: UpdateEvent) -> bool:
        old = _meta(event.object_old).get("annotations") or {}
        new = _meta(event.object_new).get("annotations") or {}
        return bool(old != new)


@dataclass(frozen=True, slots=True)
class _And:
    predicates: tuple[Predicate, ...]

    def create(self, event: CreateEvent) -> bool:
        return all(p.create(event) for p in self.predicates)

    def update(self, event: UpdateEvent) -> bool:
        return all(p.update(event) for p in self.predicates)

    def delete(self, event: DeleteEvent) -> bool:
        return all(p.delete(event) for p in self.predicates)

    def generic(self, event: GenericEvent) -> bool:
        return all(p.generic(event) for p in self.predicates)


@dataclass(frozen=True, slots=True)
class _Or:
    predicates: tuple[Predicate, ...]

    def create(self, event: CreateEvent) -> bool:
        return any(p.create(event) for p in self.predicates)

    def update(self, event: UpdateEvent) -> bool:
        return any(p.update(event) for p in self.predicates)

    def delete(self, event: DeleteEvent) -> bool:
        return any(p.delete(event) for p in self.predicates)

    def generic(self, event: GenericEvent) -> bool:
        return any(p.generic(event) for p in self.predicates)


@dataclass(frozen=True, slots=True)
class _Not:
    predicate: Predicate

    def create(self, event: CreateEvent) -> bool:
        return not self.predicate.create(event)

    def update(self, event: UpdateEvent) -> bool:
        return not self.predicate.update(event)

    def delete(self, event: DeleteEvent) -> bool:
        return not self.predicate.delete(event)

    def generic(self, event: GenericEvent) -> bool:
        return not self.predicate.generic(event)


def and_(*predicates: Predicate) -> Predicate:
    """Passes an event iff every predicate passes it (short-circuit, in order); no predicates pass all."""
    return _And(predicates)


def or_(*predicates: Predicate) -> Predicate:
    """Passes an event iff some predicate passes it (short-circuit, in order); no predicates pass none."""
    return _Or(predicates)


def not_(predicate: Predicate) -> Predicate:
    """Inverts ``predicate`` for every event kind."""
    return _Not(predicate)
