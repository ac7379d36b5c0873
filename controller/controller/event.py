"""Events: what happened to an object, as a controller's predicates and handlers see it.

Go origin: controller-runtime ``pkg/event`` (``CreateEvent``, ``UpdateEvent``, ``DeleteEvent``,
``GenericEvent``). A module of its own, as upstream, so that :mod:`controller.controller.predicate` and
:mod:`controller.controller.handler` both depend on it and not on each other.

Guarantees: events are frozen values; the objects they carry are the cache's, shared and read-only by
contract (copy with :func:`controller.client.object.deep_copy` before changing one).

Deliberately missing: typed (generic) events over typed objects.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.client.object import Object

__all__ = ["CreateEvent", "DeleteEvent", "GenericEvent", "UpdateEvent"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateEvent:
    """An object appeared in the cache; ``is_in_initial_list`` when it came from the informer's first list."""

    object: Object
    is_in_initial_list: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateEvent:
    """An object changed, or was replayed by a relist or resync (then both resourceVersions are equal)."""

    object_old: Object
    object_new: Object


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteEvent:
    """An object left the cache; ``delete_state_unknown`` when the delete was missed and seen on relist."""

    object: Object
    delete_state_unknown: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class GenericEvent:
    """An event from outside the API server (a channel source, a timer) about an object."""

    object: Object
