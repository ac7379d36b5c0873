"""The builder: controller-runtime pkg/builder/controller_test.go, as behaviour, with in-memory informers.

``FakeManager`` supplies what the builder needs: a cache handing out one ``FakeInformer`` per kind, a REST
mapper that knows which kinds are namespaced, a clock, and ``add``. Controllers are run one worker turn at a
time on the test thread (``warmup`` + ``process_next_work_item``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.client.gvk import GVK
from controller.clock import FakeClock
from controller.controller.builder import ControllerBuilder
from controller.controller.controller import Controller
from controller.controller.handler import EnqueueRequestForOwner, Funcs
from controller.controller.predicate import Funcs as PredicateFuncs
from controller.controller.predicate import GenerationChangedPredicate
from controller.controller.reconcile import Request, Result
from controller.workqueue.priority import LOW_PRIORITY

TRAINJOB = GVK("trainer.kubeflow.org", "v1alpha1", "TrainJob")
JOBSET = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")
RUNTIME = GVK("trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime")
CONFIGMAP = GVK("", "v1", "ConfigMap")


class FakeResource:
    def __init__(self, namespaced: bool) -> None:
        self.namespaced = namespaced


class FakeMapper:
    def resource_for(self, gvk: GVK) -> FakeResource:
        return FakeResource(gvk.kind != "ClusterTrainingRuntime")


class FakeCache:
    def __init__(self, new_informer: Callable[..., Any]) -> None:
        self._new = new_informer
        self.informers: dict[GVK, Any] = {}

    def get_informer(self, gvk: GVK, *, block_until_synced: bool = True) -> Any:
        return self.informers.setdefault(gvk, self._new())


class FakeManager:
    def __init__(self, clock: FakeClock, new_informer: Callable[..., Any]) -> None:
        self.cache = FakeCache(new_informer)
        self.client = FakeMapper()
        self.clock = clock
        self.runnables: list[Any] = []

    def add(self, runnable: Any) -> None:
        self.runnables.append(runnable)


class Seen:
    def __init__(self) -> None:
        self.requests: list[Request] = []

    def reconcile(self, request: Request) -> Result:
        self.requests.append(request)
        return Result()


@pytest.fixture
def mgr(clock: FakeClock, new_informer: Callable[..., Any]) -> Iterator[FakeManager]:
    manager = FakeManager(clock, new_informer)
    yield manager
    for runnable in manager.runnables:
        runnable.stop()


def run_all(ctrl: Controller) -> list[tuple[Request, int]]:
    """Hands out everything ready, in order, with priorities, then reconciles none of it."""
    out = []
    while len(ctrl.queue):
        item, priority, _ = ctrl.queue.get_with_priority()
        assert item is not None
        ctrl.queue.done(item)
        out.append((item, priority))
    return out


def owned(mkobj: Callable[..., Any], name: str, owner_kind: str, owner: str, **kw: Any) -> dict[str, Any]:
    ref = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": owner_kind,
        "name": owner,
        "uid": "u",
        "controller": True,
    }
    return mkobj(name, owners=[ref], **kw)


def test_for_owns_and_watches_wire_every_kind_to_the_right_requests(
    mgr: FakeManager, mkobj: Callable[..., Any], fresh_name: str
) -> None:
    seen = Seen()
    ctrl = (
        ControllerBuilder(mgr)
        .named(fresh_name)
        .for_(TRAINJOB)
        .owns(JOBSET)
        .watches(CONFIGMAP, lambda o: [Request("ns", "from-cm-" + o["metadata"]["name"])])
        .complete(seen)
    )
    assert mgr.runnables == [ctrl]
    assert ctrl.warmup()
    mgr.cache.informers[TRAINJOB].add(mkobj("job-a"))
    mgr.cache.informers[JOBSET].add(owned(mkobj, "js", "TrainJob", "job-b"))
    mgr.cache.informers[CONFIGMAP].add(mkobj("cm"))
    for _ in range(3):
        assert ctrl.process_next_work_item()
    assert seen.requests == [Request("ns", "job-a"), Request("ns", "job-b"), Request("ns", "from-cm-cm")]


def test_the_name_defaults_to_the_for_kind_in_lower_case(mgr: FakeManager) -> None:
    assert ControllerBuilder(mgr).for_(TRAINJOB).complete(Seen()).name == "trainjob"


def test_owns_a_kind_of_a_cluster_scoped_owner_enqueues_without_namespace(
    mgr: FakeManager, mkobj: Callable[..., Any], fresh_name: str
) -> None:
    ctrl = ControllerBuilder(mgr).named(fresh_name).for_(RUNTIME).owns(CONFIGMAP).complete(Seen())
    assert ctrl.warmup()
    mgr.cache.informers[CONFIGMAP].add(owned(mkobj, "cm", "ClusterTrainingRuntime", "torch"))
    assert run_all(ctrl) == [(Request("", "torch"), 0)]


def test_event_filters_apply_to_every_watch_and_watch_predicates_to_their_own(
    mgr: FakeManager, mkobj: Callable[..., Any], fresh_name: str
) -> None:
    no_deletes = PredicateFuncs(delete_fn=lambda e: False)
    ctrl = (
        ControllerBuilder(mgr)
        .named(fresh_name)
        .for_(TRAINJOB, GenerationChangedPredicate())
        .owns(JOBSET)
        .with_event_filter(no_deletes)
        .complete(Seen())
    )
    assert ctrl.warmup()
    jobs, jobsets = mgr.cache.informers[TRAINJOB], mgr.cache.informers[JOBSET]
    jobs.update(mkobj("status-write", generation=1, rv="1"), mkobj("status-write", generation=1, rv="2"))
    jobs.update(mkobj("spec-change", generation=1, rv="1"), mkobj("spec-change", generation=2, rv="2"))
    jobs.delete(mkobj("deleted"))
    child_old = owned(mkobj, "js", "TrainJob", "owner-of-js", generation=1, rv="1")
    child_new = owned(mkobj, "js", "TrainJob", "owner-of-js", generation=1, rv="2")
    jobsets.update(child_old, child_new)  # the generation predicate is for_'s only
    jobsets.delete(child_new)
    assert run_all(ctrl) == [(Request("ns", "spec-change"), 0), (Request("ns", "owner-of-js"), 0)]


def test_a_custom_handler_gets_low_priority_for_the_initial_list(
    mgr: FakeManager, mkobj: Callable[..., Any], fresh_name: str
) -> None:
    def add_fixed(event: Any, queue: Any) -> None:
        queue.add(Request("ns", "fixed"))

    ctrl = (
        ControllerBuilder(mgr)
        .named(fresh_name)
        .watches(CONFIGMAP, Funcs(create_fn=add_fixed))
        .complete(Seen())
    )
    assert ctrl.warmup()
    mgr.cache.informers[CONFIGMAP].add(mkobj("cm"), initial=True)
    assert run_all(ctrl) == [(Request("ns", "fixed"), LOW_PRIORITY)]


def test_watches_accepts_a_library_handler_as_is(
    mgr: FakeManager, mkobj: Callable[..., Any], fresh_name: str
) -> None:
    every_owner = EnqueueRequestForOwner(TRAINJOB, only_controller=False)
    ctrl = ControllerBuilder(mgr).named(fresh_name).watches(JOBSET, every_owner).complete(Seen())
    assert ctrl.warmup()
    child = mkobj(
        "js",
        owners=[{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "j", "uid": "u"}],
    )
    mgr.cache.informers[JOBSET].add(child)
    assert run_all(ctrl) == [(Request("ns", "j"), 0)]


def test_two_controllers_share_one_informer_per_kind(mgr: FakeManager, fresh_name: str) -> None:
    ControllerBuilder(mgr).named(fresh_name + "-1").for_(TRAINJOB).complete(Seen())
    ControllerBuilder(mgr).named(fresh_name + "-2").for_(TRAINJOB).owns(JOBSET).complete(Seen())
    for ctrl in mgr.runnables:
        assert ctrl.warmup()
    assert set(mgr.cache.informers) == {TRAINJOB, JOBSET}
    assert len(mgr.cache.informers[TRAINJOB].handlers) == 2


def test_options_reach_the_controller(mgr: FakeManager, fresh_name: str) -> None:
    ctrl = (
        ControllerBuilder(mgr)
        .named(fresh_name)
        .for_(TRAINJOB)
        .with_options(max_concurrent_reconciles=5, use_priority_queue=False, need_leader_election=False)
        .complete(Seen())
    )
    assert ctrl.need_leader_election() is False
    assert ctrl.warmup()
    assert "PriorityQueueWrapper" in repr(ctrl.queue)
    assert "workers=5" in repr(ctrl)


@pytest.mark.parametrize(
    ("build", "error"),
    [
        pytest.param(lambda b: b.for_(TRAINJOB).for_(JOBSET), ValueError, id="for-twice"),
        pytest.param(lambda b: b.owns(JOBSET).complete(Seen()), ValueError, id="owns-without-for"),
        pytest.param(lambda b: b.complete(Seen()), ValueError, id="nothing-watched"),
        pytest.param(lambda b: b.watches(JOBSET, lambda o: []).complete(Seen()), ValueError, id="no-name"),
        pytest.param(lambda b: b.watches(JOBSET, 42), TypeError, id="not-a-handler"),
    ],
)
def test_misuse_fails_loudly(
    mgr: FakeManager, build: Callable[[ControllerBuilder], Any], error: type
) -> None:
    with pytest.raises(error):
        build(ControllerBuilder(mgr))
