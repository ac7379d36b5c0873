"""SharedIndexInformer handler semantics, against the in-memory FakeListerWatcher.

Mirrors client-go shared_informer_test.go (named per case) and the processDeltas/RealFIFO rules of
controller.go. Background threads are awaited on conditions (the recorder's, the fake server's), never by
sleeping; fake time moves only when a test steps it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.client import errors
from controller.clock import FakeClock
from controller.envtest.suite import wait_until
from controller.informers.mutation_detector import CacheMutationError
from controller.informers.shared_informer import (
    ResourceEventHandlerFuncs,
    SharedIndexInformer,
    strip_managed_fields,
)
from controller.informers.store import NAMESPACE_INDEX, meta_namespace_index_func
from controller.informers.testing import FakeListerWatcher


def cm(name: str, ns: str = "ns", **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": data,
    }


@pytest.fixture
def lw() -> FakeListerWatcher:
    return FakeListerWatcher()


@pytest.fixture
def informers() -> Iterator[Callable[..., SharedIndexInformer]]:
    """Builds informers (FakeClock by default, no GC tactic) and stops every one at teardown."""
    made: list[SharedIndexInformer] = []

    def make(lister_watcher: FakeListerWatcher, **kwargs: Any) -> SharedIndexInformer:
        kwargs.setdefault("clock", FakeClock())
        kwargs.setdefault("gc_tuning", False)
        kwargs.setdefault("name", "configmaps")
        informer = SharedIndexInformer(lister_watcher, **kwargs)
        made.append(informer)
        return informer

    yield make
    for informer in made:
        informer.stop()


def watching(lw: FakeListerWatcher, n: int = 1) -> None:
    """Block until the informer has opened its ``n``-th watch (the fake server notifies on each request)."""
    assert lw.wait_for(lambda: len(lw.watch_requests()) >= n and lw.open_watches() >= 1), lw


def resyncing(name: str = "configmaps") -> None:
    """Block until the informer's resync thread runs: its period counts from then. (A streaming list's
    watch is open before its initial events are stored and the resync thread starts.)"""
    wait_until(lambda: any(t.name == f"informer/{name}/resync" for t in threading.enumerate()), timeout=10)


# --- delivery -----------------------------------------------------------------------------------------------


def test_initial_list_adds_are_flagged_and_later_changes_arrive_in_order(lw, informers, recorder) -> None:
    lw.add(cm("a"))
    lw.add(cm("b"))
    informer = informers(lw)
    rec = recorder()
    reg = informer.add_event_handler(rec)
    assert not informer.has_synced()
    informer.start()
    assert informer.wait_for_synced(10)
    assert reg.wait_for_synced(10)
    watching(lw)

    lw.add(cm("c"))
    lw.modify(cm("a", k="v"))
    lw.delete(cm("b"))
    events = rec.wait_for_count(5)
    assert events == [
        ("add", "ns/a", "2", True),
        ("add", "ns/b", "3", True),
        ("add", "ns/c", "4", False),
        ("update", "ns/a", "2", "5"),
        ("delete", "ns/b", "6", False),
    ]
    assert sorted(informer.get_store().list_keys()) == ["ns/a", "ns/c"]
    assert informer.last_sync_resource_version == "6"


def test_a_handler_sees_the_cache_already_holding_what_it_is_told(lw, informers) -> None:
    informer = informers(lw)
    seen: list[bool] = []
    done = threading.Event()

    def on_add(obj: Any, initial: bool) -> None:
        seen.append(informer.get_store().get(obj) is not None)
        done.set()

    informer.add_event_handler(ResourceEventHandlerFuncs(add_func=on_add))
    informer.start()
    watching(lw)
    lw.add(cm("x"))
    assert done.wait(10)
    assert seen == [True]


class DownForAWhile(FakeListerWatcher):
    """A server that, when armed, changes state and refuses the next watch with a non-retriable error,
    so the informer misses those changes on the watch and must relist (after a backoff) to see them."""

    def __init__(self) -> None:
        super().__init__()
        self.while_down: Callable[[], None] | None = None

    def watch(self, resource_version: str, timeout_seconds: int, allow_bookmarks: bool, **how: Any) -> Any:
        if self.while_down is not None:
            changes, self.while_down = self.while_down, None
            changes()
            self.compact()
            raise errors.ConnectionFailed("TLS handshake failed: the API server is restarting")
        return super().watch(resource_version, timeout_seconds, allow_bookmarks, **how)


@pytest.mark.parametrize("use_watch_list", [False, True], ids=["list", "streaming list"])
def test_relist_sends_tombstones_for_deletes_missed_while_the_watch_was_down(
    informers, recorder, auto_clock, use_watch_list
):
    # controller.go processReplacedAllInfo + the_real_fifo.go reconcileReplacement: deletions first, as
    # DeletedFinalStateUnknown carrying the last known state, then updates and adds in list order.
    lw = DownForAWhile()
    lw.add(cm("a"))
    lw.add(cm("b"))
    informer = informers(lw, clock=auto_clock, use_watch_list=use_watch_list)
    rec = recorder()
    informer.add_event_handler(rec)
    informer.start()
    watching(lw)
    # An event on the watch: it is consumed (a streaming list's watch is open before its events are).
    lw.add(cm("z"))
    rec.wait_for(lambda ev: ("add", "ns/z", "4", False) in ev)

    def changes() -> None:
        lw.modify(cm("a", k="v"))
        lw.delete(cm("b"))
        lw.add(cm("c"))

    lw.while_down = changes
    auto_clock.advance(2.0)  # the watch has been open a while: its close is normal, not a "very short watch"
    lw.close_watches()
    events = rec.wait_for_count(7)
    assert events[3:] == [
        ("delete", "ns/b", "3", True),
        ("update", "ns/a", "2", "5"),
        ("add", "ns/c", "7", False),
        ("update", "ns/z", "4", "4"),  # unchanged: a sync update
    ]
    tombstone = rec.objects[3]
    assert tombstone.key == "ns/b"
    assert tombstone.obj["metadata"]["name"] == "b"
    assert sorted(informer.get_store().list_keys()) == ["ns/a", "ns/c", "ns/z"]
    # The relist asked for "at least as fresh as" the last RV the informer had seen.
    if use_watch_list:
        # (The refused rewatch never reached the fake server's log.)
        assert [(r.resource_version, r.send_initial_events) for r in lw.watch_requests()] == [
            ("", True),
            ("4", True),
        ]
        assert lw.list_requests() == []
    else:
        assert [r.resource_version for r in lw.list_requests()] == ["0", "4"]


def test_a_relist_with_nothing_changed_replays_updates_flagged_as_sync(informers, recorder, auto_clock):
    lw = DownForAWhile()
    lw.add(cm("a"))
    informer = informers(lw, clock=auto_clock)
    rec = recorder()
    informer.add_event_handler(rec)
    informer.start()
    watching(lw)
    lw.while_down = lambda: None
    auto_clock.advance(2.0)
    lw.close_watches()
    # Without resync, every handler is "syncing" (client-go adds listeners so): it gets old.RV == new.RV.
    assert rec.wait_for_count(2)[1] == ("update", "ns/a", "2", "2")


@pytest.mark.parametrize("use_watch_list", [False, True], ids=["list", "streaming list"])
def test_expired_watch_recovers_by_relisting_with_no_change_lost(
    lw, informers, recorder, auto_clock, use_watch_list
):
    lw.add(cm("a"))
    informer = informers(lw, clock=auto_clock, use_watch_list=use_watch_list)
    rec = recorder()
    informer.add_event_handler(rec)
    informer.start()
    watching(lw)
    # An event on the watch: it is consumed (a streaming list's watch is open before its events are).
    lw.add(cm("z"))
    rec.wait_for(lambda ev: ("add", "ns/z", "3", False) in ev)
    # Changes land and history is compacted while the stream is closed: the rewatch gets 410 Expired.
    auto_clock.advance(2.0)
    with lw._cond:
        lw.close_watches()
        lw.modify(cm("a", k="1"))
        lw.add(cm("b"))
        lw.compact()
    rec.wait_for(lambda ev: ("add", "ns/b", "5", False) in ev)
    watching(lw, 3)
    assert {
        k: o["metadata"]["resourceVersion"]
        for k, o in ((k, informer.get_store().get_by_key(k)) for k in ("ns/a", "ns/b"))
    } == {"ns/a": "4", "ns/b": "5"}
    if use_watch_list:
        # Streamed at first; the rewatch at 3 is expired; streamed again "not older than" 3, and that stream
        # goes on as the watch.
        assert [(r.resource_version, r.send_initial_events) for r in lw.watch_requests()] == [
            ("", True),
            ("3", False),
            ("3", True),
        ]
        assert lw.list_requests() == []
    else:
        assert [r.resource_version for r in lw.watch_requests()] == ["2", "3", "5"]
        assert [r.resource_version for r in lw.list_requests()] == ["0", "3"]


def test_slow_handler_does_not_block_another(lw, informers, recorder) -> None:
    gate = threading.Event()
    informer = informers(lw)
    slow, fast = recorder(gate=gate), recorder()
    slow_reg = informer.add_event_handler(slow)
    informer.add_event_handler(fast)
    informer.start()
    watching(lw)
    for i in range(50):
        lw.add(cm(f"c{i}"))
    assert len(fast.wait_for_count(50)) == 50
    assert slow.events == []
    assert slow_reg.pending() >= 49  # buffered, not lost
    gate.set()
    assert [e[1] for e in slow.wait_for_count(50)] == [f"ns/c{i}" for i in range(50)]


def test_a_handler_has_synced_only_after_running_on_every_initial_add(lw, informers, recorder) -> None:
    lw.add(cm("a"))
    gate = threading.Event()
    informer = informers(lw)
    reg = informer.add_event_handler(recorder(gate=gate))
    informer.start()
    assert informer.wait_for_synced(10)
    assert not reg.has_synced()
    gate.set()
    assert reg.wait_for_synced(10)


def test_add_while_active_gets_synthetic_adds_then_live_events(lw, informers, recorder) -> None:
    # shared_informer_test.go TestAddWhileActive / TestSharedInformerMultipleRegistration
    lw.add(cm("a"))
    lw.add(cm("b"))
    informer = informers(lw)
    informer.start()
    assert informer.wait_for_synced(10)
    watching(lw)
    late = recorder()
    reg = informer.add_event_handler(late)
    assert reg.wait_for_synced(10)
    lw.add(cm("c"))
    events = late.wait_for_count(3)
    assert sorted(events[:2]) == [("add", "ns/a", "2", True), ("add", "ns/b", "3", True)]
    assert events[2] == ("add", "ns/c", "4", False)


@pytest.mark.parametrize("use_watch_list", [False, True], ids=["list", "streaming list"])
def test_a_handler_registered_before_the_first_list_is_not_synced_until_then(
    lw, informers, recorder, use_watch_list
) -> None:
    informer = informers(lw, use_watch_list=use_watch_list)
    # The streaming list fails (and falls back to the list), then the list fails.
    lw.watch_errors.append(errors.ServerError("not yet", status=503, reason="ServiceUnavailable"))
    lw.list_errors.append(errors.ServerError("not yet", status=503, reason="ServiceUnavailable"))
    reg = informer.add_event_handler(recorder())
    informer.start()
    assert lw.wait_for(lambda: len(lw.list_requests()) == 1)
    assert not reg.has_synced()
    assert not informer.has_synced()


def test_remove_event_handler_stops_delivery(lw, informers, recorder) -> None:
    # shared_informer_test.go TestSharedInformerRemoveHandler
    informer = informers(lw)
    kept, removed = recorder(), recorder()
    informer.add_event_handler(kept)
    reg = informer.add_event_handler(removed)
    informer.start()
    watching(lw)
    lw.add(cm("a"))
    removed.wait_for_count(1)
    informer.remove_event_handler(reg)
    informer.remove_event_handler(reg)  # idempotent
    lw.add(cm("b"))
    kept.wait_for_count(2)
    assert [e[1] for e in removed.events] == ["ns/a"]


def test_a_handler_that_raises_gets_the_next_notification(lw, informers, recorder) -> None:
    # shared_informer_test.go TestEventPanics (a crash skips the item and delivery goes on)
    informer = informers(lw)
    rec = recorder()

    def explode_on_a(obj: Any, initial: bool) -> None:
        if obj["metadata"]["name"] == "a":
            raise RuntimeError("handler bug")
        rec.on_add(obj, initial)

    informer.add_event_handler(ResourceEventHandlerFuncs(add_func=explode_on_a))
    informer.start()
    watching(lw)
    lw.add(cm("a"))
    lw.add(cm("b"))
    assert rec.wait_for_count(1) == [("add", "ns/b", "3", False)]


# --- resync ------------------------------------------------------------------------------------------------


def test_resync_replays_the_cache_to_handlers_whose_period_elapsed(lw, informers, recorder) -> None:
    # shared_informer_test.go TestListenerResyncPeriods: handler periods 10 s and 20 s, and one that never
    # resyncs; the informer checks every 10 s; resyncs are sync updates (same RV) and make no API call.
    lw.add(cm("a"))
    clock = FakeClock()
    informer = informers(lw, clock=clock, resync_period=10.0)
    every10, every20, never = recorder(), recorder(), recorder()
    informer.add_event_handler(every10)
    informer.add_event_handler(every20, resync_period=20.0)
    informer.add_event_handler(never, resync_period=0.0)
    informer.start()
    watching(lw)
    resyncing()
    for r in (every10, every20, never):
        r.wait_for_count(1)
    requests_before = len(lw.requests)

    clock.step(10.0)
    assert every10.wait_for_count(2)[1] == ("update", "ns/a", "2", "2")
    clock.step(10.0)
    every10.wait_for_count(3)
    assert every20.wait_for_count(2)[1] == ("update", "ns/a", "2", "2")
    lw.add(cm("z"))  # a live change reaches every handler, and flushes what each was sent before it
    for r in (every10, every20, never):
        r.wait_for(lambda ev: ev[-1][1] == "ns/z")
    assert [e[0] for e in every10.events] == ["add", "update", "update", "add"]
    assert [e[0] for e in every20.events] == ["add", "update", "add"]
    assert [e[0] for e in never.events] == ["add", "add"]
    assert len(lw.requests) == requests_before


def test_resync_periods_are_bounded_as_client_go_does(lw, informers, recorder) -> None:
    # shared_informer_test.go TestResyncCheckPeriod
    informer = informers(lw, resync_period=60.0)
    tiny = informer.add_event_handler(recorder(), resync_period=0.1)
    assert tiny.resync_period == 1.0  # minimumResyncPeriod; also lowers the informer's check period
    default = informer.add_event_handler(recorder())
    assert default.resync_period == 60.0
    informer.start()
    watching(lw)
    late = informer.add_event_handler(recorder(), resync_period=0.5)
    assert late.resync_period == 1.0  # raised to the check period once started
    off = informers(FakeListerWatcher(), name="off").add_event_handler(recorder(), resync_period=30.0)
    assert off.resync_period == 0.0  # an informer without resync cannot resync its handlers


# --- transform, indexers, mutation detector ---------------------------------------------------------------


def test_managed_fields_are_stripped_before_storage(lw, informers, recorder) -> None:
    obj = cm("a")
    obj["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {}}]
    lw.add(obj)
    informer = informers(lw)
    rec = recorder()
    informer.add_event_handler(rec)
    informer.start()
    rec.wait_for_count(1)
    assert "managedFields" not in informer.get_store().get_by_key("ns/a")["metadata"]
    assert "managedFields" not in rec.objects[0]["metadata"]
    assert strip_managed_fields({"metadata": {"name": "x"}}) == {"metadata": {"name": "x"}}


def test_a_custom_transform_runs_before_storage(lw, informers, recorder) -> None:
    # shared_informer_test.go TestSharedInformerTransformer
    lw.add(cm("a", big="x" * 100))

    def drop_data(obj: dict[str, Any]) -> dict[str, Any]:
        obj.pop("data", None)
        return obj

    informer = informers(lw, transform=drop_data)
    rec = recorder()
    informer.add_event_handler(rec)
    informer.start()
    watching(lw)
    lw.modify(cm("a", big="y"))
    rec.wait_for_count(2)
    assert all("data" not in o for o in informer.get_store().list())
    assert all("data" not in o for o in rec.objects)


def test_indexers_given_at_construction_and_added_later_are_maintained(lw, informers) -> None:
    lw.add(cm("a", ns="one"))
    lw.add(cm("b", ns="two"))
    informer = informers(lw, indexers={NAMESPACE_INDEX: meta_namespace_index_func})
    informer.start()
    assert informer.wait_for_synced(10)
    informer.add_indexers({"by-name": lambda o: [o["metadata"]["name"]]})
    store = informer.get_store()
    assert store.index_keys(NAMESPACE_INDEX, "two") == ["two/b"]
    assert store.index_keys("by-name", "a") == ["one/a"]


def test_mutation_detector_catches_a_handler_mutating_a_cached_object(lw, informers) -> None:
    lw.add(cm("a"))
    informer = SharedIndexInformer(lw, name="configmaps", clock=FakeClock(), mutation_detector=True)
    mutated = threading.Event()

    def vandal(obj: Any, initial: bool) -> None:
        obj["data"] = {"oops": "mutated"}
        mutated.set()

    informer.add_event_handler(ResourceEventHandlerFuncs(add_func=vandal))
    informer.start()
    assert mutated.wait(10)
    with pytest.raises(CacheMutationError, match="configmaps"):
        informer.stop()


def test_mutation_detector_is_switched_on_by_the_environment(lw, monkeypatch) -> None:
    monkeypatch.setenv("KUBE_CACHE_MUTATION_DETECTOR", "true")
    assert SharedIndexInformer(lw, name="x").mutation_detector is not None
    monkeypatch.setenv("KUBE_CACHE_MUTATION_DETECTOR", "false")
    assert SharedIndexInformer(lw, name="x").mutation_detector is None


def test_mutation_detector_stays_quiet_when_nobody_mutates(lw, informers, recorder) -> None:
    lw.add(cm("a"))
    informer = informers(lw, mutation_detector=True)
    rec = recorder()
    informer.add_event_handler(rec)
    informer.start()
    rec.wait_for_count(1)
    informer.mutation_detector.compare_objects()  # raises on a mutation


# --- lifecycle --------------------------------------------------------------------------------------------


def test_informer_threads_are_named_and_joined_on_stop(lw, informers, recorder) -> None:
    informer = informers(lw, resync_period=60.0)
    informer.add_event_handler(recorder())
    informer.start()
    watching(lw)

    def names() -> set[str]:
        return {t.name for t in threading.enumerate() if t.name.startswith("informer/configmaps")}

    resyncing()
    assert names() == {
        "informer/configmaps",
        "informer/configmaps/stop",
        "informer/configmaps/handler-0",
        "informer/configmaps/resync",
    }
    informer.stop()
    assert not [t for t in threading.enumerate() if t.name.startswith("informer/configmaps")]
    assert lw.open_watches() == 0


def test_run_in_the_callers_thread_stops_when_the_event_is_set(lw, informers) -> None:
    informer = informers(lw)
    stop = threading.Event()
    runner = threading.Thread(target=informer.run, args=(stop,), name="test/informer-owner")
    runner.start()
    watching(lw)
    stop.set()
    runner.join(10)
    assert not runner.is_alive()
    assert informer.is_stopped()
    with pytest.raises(RuntimeError, match="already started"):
        informer.start()


def test_misuse_fails_loudly(lw, informers, recorder) -> None:
    # shared_informer_test.go TestAddOnStoppedSharedInformer, and "run more than once"
    informer = informers(lw)
    informer.start()
    with pytest.raises(RuntimeError, match="already started"):
        informer.start()
    informer.stop()
    with pytest.raises(RuntimeError, match="has stopped"):
        informer.add_event_handler(recorder())
    with pytest.raises(RuntimeError, match="has stopped"):
        informer.add_indexers({"x": lambda o: []})


def test_stopping_an_informer_that_never_ran_releases_its_waiters(lw, recorder) -> None:
    informer = SharedIndexInformer(lw, name="never", clock=FakeClock())
    reg = informer.add_event_handler(recorder())
    informer.stop()
    assert not informer.wait_for_synced(None)
    assert not reg.wait_for_synced(None)
    assert informer.is_stopped()


def test_an_informer_stopped_before_it_ran_returns_from_run_at_once(lw) -> None:
    # start() followed at once by stop() can reach run() after the stop; that must be a quiet, clean exit.
    informer = SharedIndexInformer(lw, name="stopped-early", clock=FakeClock())
    informer.stop()
    informer.run(threading.Event())  # returns instead of raising "may run only once"
    assert not informer.has_synced()


def test_running_an_informer_twice_is_refused(lw) -> None:
    informer = SharedIndexInformer(lw, name="twice", clock=FakeClock())
    informer.start()
    try:
        wait_until(informer.has_synced)  # its own thread is inside run() now
        with pytest.raises(RuntimeError, match="may run only once"):
            informer.run(threading.Event())
    finally:
        informer.stop()
