"""Event handlers and the informer adapter: controller-runtime pkg/handler/eventhandler_test.go and
pkg/internal/source/event_handler.go, as behaviour, observed through real queues."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.clock import FakeClock
from controller.controller.event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from controller.controller.handler import (
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
    Funcs,
    with_low_priority_when_unchanged,
)
from controller.controller.predicate import Funcs as PredicateFuncs
from controller.controller.predicate import GenerationChangedPredicate
from controller.controller.reconcile import Request
from controller.controller.source import InformerEventAdapter
from controller.informers.store import DeletedFinalStateUnknown
from controller.workqueue.priority import LOW_PRIORITY, PriorityQueue
from controller.workqueue.queue import Queue

Obj = dict[str, Any]


@pytest.fixture
def pq(clock: FakeClock) -> Iterator[PriorityQueue[Request]]:
    with PriorityQueue[Request](clock=clock) as queue:
        yield queue


@pytest.fixture
def plain() -> Iterator[Queue[Request]]:
    with Queue[Request]() as queue:
        yield queue


def drain(queue: Any) -> list[tuple[Request, int]]:
    """Everything ready in a priority queue, as (request, priority), in hand-out order."""
    out = []
    while len(queue):
        item, priority, _ = queue.get_with_priority()
        queue.done(item)
        out.append((item, priority))
    return out


def drain_plain(queue: Queue[Request]) -> list[Request]:
    out = []
    while len(queue):
        item, _ = queue.get()
        assert item is not None
        queue.done(item)
        out.append(item)
    return out


class Gvk:
    def __init__(self, group: str, version: str, kind: str) -> None:
        self.group, self.version, self.kind = group, version, kind


TRAINJOB = Gvk("trainer.kubeflow.org", "v1alpha1", "TrainJob")


def owner(
    kind: str, name: str, *, api_version: str = "trainer.kubeflow.org/v1alpha1", controller: bool = True
) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": f"uid-{name}",
        "controller": controller,
    }


# --- EnqueueRequestForObject ------------------------------------------------------------------------------


def test_enqueue_request_for_object_enqueues_the_object_on_every_event_kind(
    pq: PriorityQueue[Request], mkobj: Callable[..., Obj]
) -> None:
    # "EnqueueRequestForObject": "should enqueue a Request with the Name / Namespace of the object in the
    # CreateEvent/DeleteEvent/GenericEvent" and "...of the new object in the UpdateEvent"
    h = EnqueueRequestForObject()
    h.create(CreateEvent(object=mkobj("a")), pq)
    h.update(UpdateEvent(object_old=mkobj("b", rv="1"), object_new=mkobj("b", rv="2")), pq)
    h.delete(DeleteEvent(object=mkobj("c")), pq)
    h.generic(GenericEvent(object=mkobj("d", namespace="")), pq)
    assert drain(pq) == [
        (Request("ns", "a"), 0),
        (Request("ns", "b"), 0),
        (Request("ns", "c"), 0),
        (Request("", "d"), 0),
    ]


def test_initial_list_and_resync_events_are_added_with_low_priority(
    pq: PriorityQueue[Request], mkobj: Callable[..., Obj]
) -> None:
    # controller-runtime: addToQueueCreate / addToQueueUpdate ("should lower the priority of a create
    # request for an object that was part of the initial list", "... of an update with the same RV")
    h = EnqueueRequestForObject()
    h.create(CreateEvent(object=mkobj("initial"), is_in_initial_list=True), pq)
    h.update(UpdateEvent(object_old=mkobj("resync", rv="7"), object_new=mkobj("resync", rv="7")), pq)
    h.create(CreateEvent(object=mkobj("new")), pq)
    h.update(UpdateEvent(object_old=mkobj("changed", rv="1"), object_new=mkobj("changed", rv="2")), pq)
    # Real changes overtake the replay of unchanged objects.
    assert drain(pq) == [
        (Request("ns", "new"), 0),
        (Request("ns", "changed"), 0),
        (Request("ns", "initial"), LOW_PRIORITY),
        (Request("ns", "resync"), LOW_PRIORITY),
    ]


def test_a_plain_queue_gets_plain_adds_for_initial_list_events(
    plain: Queue[Request], mkobj: Callable[..., Obj]
) -> None:
    EnqueueRequestForObject().create(CreateEvent(object=mkobj("a"), is_in_initial_list=True), plain)
    assert drain_plain(plain) == [Request("ns", "a")]


def test_an_object_without_a_name_is_not_enqueued(pq: PriorityQueue[Request]) -> None:
    EnqueueRequestForObject().create(CreateEvent(object={"metadata": {"namespace": "ns"}}), pq)
    assert len(pq) == 0


# --- EnqueueRequestForOwner -------------------------------------------------------------------------------


def test_owner_handler_enqueues_the_controller_owner_in_the_child_namespace(
    pq: PriorityQueue[Request], mkobj: Callable[..., Obj]
) -> None:
    # "EnqueueRequestForOwner": "should enqueue a Request with the Owner of the object in the CreateEvent"
    child = mkobj("child", owners=[owner("TrainJob", "job"), owner("TrainJob", "other", controller=False)])
    EnqueueRequestForOwner(TRAINJOB).create(CreateEvent(object=child), pq)
    assert drain(pq) == [(Request("ns", "job"), 0)]


def test_owner_handler_ignores_the_version_and_matches_group_and_kind(
    pq: PriorityQueue[Request], mkobj: Callable[..., Obj]
) -> None:
    # "should enqueue a Request if there are owners matching Group and Kind with a different version"
    child = mkobj(
        "child",
        owners=[
            owner("TrainJob", "other-version", api_version="trainer.kubeflow.org/v2", controller=False),
            owner("TrainJob", "other-group", api_version="batch/v1", controller=False),
            owner("JobSet", "other-kind", controller=False),
            owner("TrainJob", "match", controller=False),
        ],
    )
    EnqueueRequestForOwner(TRAINJOB, only_controller=False).generic(GenericEvent(object=child), pq)
    assert drain(pq) == [(Request("ns", "other-version"), 0), (Request("ns", "match"), 0)]


def test_owner_handler_with_only_controller_ignores_non_controller_owners(
    pq: PriorityQueue[Request], mkobj: Callable[..., Obj]
) -> None:
    # "should not enqueue a Request if there are no owners matching Group and Kind" (OnlyControllerOwner)
    child = mkobj("child", owners=[owner("TrainJob", "job", controller=False)])
    EnqueueRequestForOwner(TRAINJOB).delete(DeleteEvent(object=child), pq)
    assert len(pq) == 0


def test_owner_handler_update_enqueues_the_owners_of_old_and_new_once_each(
    pq: PriorityQueue[Request], mkobj: Callable[..., Obj]
) -> None:
    # "should enqueue a Request with the Owners of both objects in the UpdateEvent"
    old = mkobj("child", rv="1", owners=[owner("TrainJob", "before")])
    new = mkobj("child", rv="2", owners=[owner("TrainJob", "after")])
    same = mkobj("child", rv="3", owners=[owner("TrainJob", "after")])
    h = EnqueueRequestForOwner(TRAINJOB)
    h.update(UpdateEvent(object_old=old, object_new=new), pq)
    h.update(UpdateEvent(object_old=new, object_new=same), pq)
    assert drain(pq) == [(Request("ns", "before"), 0), (Request("ns", "after"), 0)]


def test_owner_handler_gives_cluster_scoped_owners_an_empty_namespace(
    pq: PriorityQueue[Request], mkobj: Callable[..., Obj]
) -> None:
    # "should enqueue a Request with the Owner of the object in the CreateEvent" (cluster-scoped owner)
    runtime = Gvk("trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime")
    child = mkobj("child", owners=[owner("ClusterTrainingRuntime", "torch")])
    EnqueueRequestForOwner(runtime, owner_namespaced=False).create(CreateEvent(object=child), pq)
    assert drain(pq) == [(Request("", "torch"), 0)]


def test_owner_handler_uses_low_priority_for_the_initial_list(
    pq: PriorityQueue[Request], mkobj: Callable[..., Obj]
) -> None:
    child = mkobj("child", owners=[owner("TrainJob", "job")])
    EnqueueRequestForOwner(TRAINJOB).create(CreateEvent(object=child, is_in_initial_list=True), pq)
    assert drain(pq) == [(Request("ns", "job"), LOW_PRIORITY)]


def test_core_group_owner_references_match_the_empty_group(
    pq: PriorityQueue[Request], mkobj: Callable[..., Obj]
) -> None:
    child = mkobj("child", owners=[owner("Pod", "p", api_version="v1")])
    EnqueueRequestForOwner(Gvk("", "v1", "Pod")).create(CreateEvent(object=child), pq)
    assert drain(pq) == [(Request("ns", "p"), 0)]


# --- EnqueueRequestsFromMapFunc ---------------------------------------------------------------------------


def test_map_func_enqueues_what_the_function_returns_for_old_and_new_without_duplicates(
    pq: PriorityQueue[Request], mkobj: Callable[..., Obj]
) -> None:
    # "EnqueueRequestsFromMapFunc": "should enqueue a Request with the function applied to both objects in
    # the UpdateEvent"
    def fn(o: Obj) -> list[Request]:
        return [Request("ns", "shared"), Request("ns", "from-" + o["metadata"]["resourceVersion"])]

    h = EnqueueRequestsFromMapFunc(fn)
    h.update(UpdateEvent(object_old=mkobj("x", rv="1"), object_new=mkobj("x", rv="2")), pq)
    assert drain(pq) == [
        (Request("ns", "shared"), 0),
        (Request("ns", "from-1"), 0),
        (Request("ns", "from-2"), 0),
    ]


def test_map_func_initial_list_is_low_priority_and_delete_is_not(
    pq: PriorityQueue[Request], mkobj: Callable[..., Obj]
) -> None:
    h = EnqueueRequestsFromMapFunc(lambda o: [Request("ns", "mapped-" + o["metadata"]["name"])])
    h.create(CreateEvent(object=mkobj("a"), is_in_initial_list=True), pq)
    h.delete(DeleteEvent(object=mkobj("b")), pq)
    assert drain(pq) == [(Request("ns", "mapped-b"), 0), (Request("ns", "mapped-a"), LOW_PRIORITY)]


# --- Funcs and WithLowPriorityWhenUnchanged ---------------------------------------------------------------


def test_with_low_priority_when_unchanged_lowers_plain_adds_of_a_custom_handler(
    pq: PriorityQueue[Request], mkobj: Callable[..., Obj]
) -> None:
    # "WithLowPriorityWhenUnchanged": "should lower the priority of a create request for an object that
    # was part of the initial list" / "... update request that was triggered by a resync"
    def add_named(e: Any, q: Any) -> None:
        o = e.object if hasattr(e, "object") else e.object_new
        q.add(Request("ns", "custom-" + o["metadata"]["name"]))

    h = with_low_priority_when_unchanged(Funcs(create_fn=add_named, update_fn=add_named))
    h.create(CreateEvent(object=mkobj("initial"), is_in_initial_list=True), pq)
    h.update(UpdateEvent(object_old=mkobj("resync", rv="5"), object_new=mkobj("resync", rv="5")), pq)
    h.create(CreateEvent(object=mkobj("fresh")), pq)
    assert drain(pq) == [
        (Request("ns", "custom-fresh"), 0),
        (Request("ns", "custom-initial"), LOW_PRIORITY),
        (Request("ns", "custom-resync"), LOW_PRIORITY),
    ]


def test_funcs_without_a_function_ignores_that_event_kind(
    pq: PriorityQueue[Request], mkobj: Callable[..., Obj]
) -> None:
    Funcs().create(CreateEvent(object=mkobj("a")), pq)
    Funcs().delete(DeleteEvent(object=mkobj("a")), pq)
    assert len(pq) == 0


# --- InformerEventAdapter ---------------------------------------------------------------------------------


class Recorder:
    """A handler that keeps the events it received (the state under test is what reached it)."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def create(self, event: CreateEvent, queue: Any) -> None:
        self.events.append(event)

    def update(self, event: UpdateEvent, queue: Any) -> None:
        self.events.append(event)

    def delete(self, event: DeleteEvent, queue: Any) -> None:
        self.events.append(event)

    def generic(self, event: GenericEvent, queue: Any) -> None:
        self.events.append(event)


def test_adapter_unwraps_a_tombstone_into_a_delete_with_state_unknown(
    plain: Queue[Request], mkobj: Callable[..., Obj]
) -> None:
    # pkg/internal/source/event_handler.go OnDelete: "Deal with tombstone events by pulling the object out"
    rec = Recorder()
    adapter = InformerEventAdapter(rec, plain)
    last_known = mkobj("gone")
    adapter.on_delete(DeletedFinalStateUnknown("ns/gone", last_known))
    adapter.on_delete(mkobj("seen-deleted"))
    assert rec.events == [
        DeleteEvent(object=last_known, delete_state_unknown=True),
        DeleteEvent(object=mkobj("seen-deleted"), delete_state_unknown=False),
    ]


def test_adapter_enqueues_through_the_handler_when_every_predicate_passes(
    pq: PriorityQueue[Request], mkobj: Callable[..., Obj]
) -> None:
    adapter = InformerEventAdapter(EnqueueRequestForObject(), pq, [GenerationChangedPredicate()])
    adapter.on_add(mkobj("listed"), True)
    adapter.on_update(mkobj("status-only", generation=1, rv="1"), mkobj("status-only", generation=1, rv="2"))
    adapter.on_update(mkobj("spec", generation=1, rv="1"), mkobj("spec", generation=2, rv="2"))
    adapter.on_delete(DeletedFinalStateUnknown("ns/gone", mkobj("gone")))
    assert drain(pq) == [
        (Request("ns", "spec"), 0),
        (Request("ns", "gone"), 0),
        (Request("ns", "listed"), LOW_PRIORITY),
    ]


def test_adapter_drops_an_event_any_predicate_rejects(
    pq: PriorityQueue[Request], mkobj: Callable[..., Obj]
) -> None:
    reject_deletes = PredicateFuncs(delete_fn=lambda e: False)
    adapter = InformerEventAdapter(EnqueueRequestForObject(), pq, [PredicateFuncs(), reject_deletes])
    adapter.on_delete(mkobj("a"))
    adapter.on_add(mkobj("b"), False)
    assert drain(pq) == [(Request("ns", "b"), 0)]
