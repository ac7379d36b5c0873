"""A controller on a real SharedIndexInformer (fed by the library's FakeListerWatcher): the seam between
controller.controller.controller and controller.informers, with real delivery threads and a real clock.

What the fake does not model is listed in ``controller.informers.testing``; nothing here depends on it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from controller.controller.controller import Controller
from controller.controller.handler import EnqueueRequestForObject
from controller.controller.reconcile import Request, Result
from controller.controller.source import Kind
from controller.informers.shared_informer import SharedIndexInformer
from controller.informers.testing import FakeListerWatcher


def cm(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}}


class Seen:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.requests: list[Request] = []

    def reconcile(self, request: Request) -> Result:
        with self.cond:
            self.requests.append(request)
            self.cond.notify_all()
        return Result()

    def wait_for(self, *requests: Request) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: set(requests) <= set(self.requests), 10)


@pytest.fixture
def api() -> FakeListerWatcher:
    return FakeListerWatcher()


@pytest.fixture
def informer(api: FakeListerWatcher) -> Iterator[SharedIndexInformer]:
    inf = SharedIndexInformer(api, name="configmaps")
    yield inf
    inf.stop()


def test_the_initial_list_and_later_changes_are_reconciled(
    api: FakeListerWatcher, informer: SharedIndexInformer, fresh_name: str
) -> None:
    api.add(cm("listed-1"))
    api.add(cm("listed-2"))
    seen = Seen()
    ctrl = Controller(fresh_name, seen)
    ctrl.watch(Kind(informer, EnqueueRequestForObject()))
    informer.start()
    try:
        ctrl.start()  # returns once the informer's initial list reached the controller's handler
        assert seen.wait_for(Request("ns", "listed-1"), Request("ns", "listed-2"))
        api.add(cm("created"))
        assert seen.wait_for(Request("ns", "created"))
        api.delete(cm("listed-1"))
        with seen.cond:
            assert seen.cond.wait_for(lambda: seen.requests.count(Request("ns", "listed-1")) == 2, 10)
    finally:
        assert ctrl.stop(10)
    # The controller unregistered its handler (its delivery thread is joined) and its workers are gone.
    assert not any(t.name.startswith("informer/configmaps/handler") for t in threading.enumerate())
    assert not any(t.name.startswith(f"controller/{fresh_name}/") for t in threading.enumerate())
