"""The reflector's streaming list (WatchList, KEP-3157), as client-go's reflector_watchlist_test.go.

The table cases of upstream ``TestWatchList`` run ``list_and_watch`` against scripted watches (a watch
function that runs out of scripted watches sets the stop event and ends the run); the others run against the
in-memory API server, :class:`FakeListerWatcher`, which serves streaming lists or refuses them. What is
asserted is what the server was asked, what the store holds and when, and what the handlers were told.
"""

from __future__ import annotations

import gc
import random
import threading
from typing import Any

import pytest

from controller.client import errors
from controller.clock import FakeClock
from controller.informers.reflector import (
    INITIAL_EVENTS_ANNOTATION_KEY,
    LIST_GC_THRESHOLDS,
    WATCH_LIST_CLIENT_ENV,
    ListPage,
    Reflector,
    watch_list_client_enabled,
)
from controller.informers.shared_informer import SharedIndexInformer
from controller.informers.store import ThreadSafeStore
from controller.informers.testing import FakeListerWatcher, FakeWatcher, WatchEvent

from .test_informers_reflector import Script, closed_watch, expired, pod, status, store_rvs, too_many_requests


def end_bookmark(rv: str, value: str = "true") -> tuple[str, dict[str, Any]]:
    """The BOOKMARK that ends a streaming list's initial events."""
    return (
        "BOOKMARK",
        {"metadata": {"resourceVersion": rv, "annotations": {INITIAL_EVENTS_ANNOTATION_KEY: value}}},
    )


def open_watch(*events: tuple[str, dict[str, Any]]) -> FakeWatcher:
    """A watch that has sent ``events`` and stays open (until stopped)."""
    w = FakeWatcher()
    for event_type, obj in events:
        w.action(event_type, obj)
    return w


def make_reflector(lw: Any, store: Any, **kwargs: Any) -> Reflector:
    kwargs.setdefault("clock", FakeClock())
    kwargs.setdefault("gc_tuning", False)
    kwargs.setdefault("rng", random.Random(1))
    kwargs.setdefault("use_watch_list", True)
    return Reflector(lw, store, name="test", **kwargs)


class RecordingStore(ThreadSafeStore):
    """A store that writes down each call the reflector makes to it, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, ...]] = []

    def add(self, obj: Any) -> None:
        self.calls.append(("add", obj["metadata"]["name"]))
        super().add(obj)

    def replace(self, items: list[Any], resource_version: str) -> None:
        self.calls.append(("replace", sorted(o["metadata"]["name"] for o in items), resource_version))
        super().replace(items, resource_version)

    def bookmark(self, resource_version: str) -> None:
        self.calls.append(("bookmark", resource_version))


# --- upstream TestWatchList ---------------------------------------------------------------------------------


def test_the_store_is_not_replaced_until_the_initial_events_end_bookmark() -> None:
    # TestWatchList "the reflector won't be synced if the bookmark event has been received" and "check if
    # stopping a watcher before sync results in creating a new watch-list request": a stream that ends before
    # the bookmark is opened again at once (no backoff, no fallback), with a clean temporary store.
    clock = FakeClock()
    stop = threading.Event()
    script = Script(
        stop,
        watches=[
            closed_watch(("ADDED", pod("p1", "1"))),
            closed_watch(("ADDED", pod("p1", "1")), end_bookmark("1")),
        ],
    )
    store = RecordingStore()
    r = make_reflector(script.lw(), store, clock=clock)
    r.list_and_watch(stop)
    assert script.list_calls == []
    # (The second stream closes right after its bookmark: a very short watch, which ends the run.)
    assert [c[0] for c in script.watch_calls] == ["", ""]
    assert script.watch_list_calls == [0, 1]
    assert store.calls == [("replace", ["p1"], "1")]
    assert r.last_sync_resource_version == "1"


def test_with_use_watch_list_off_the_reflector_lists_then_watches() -> None:
    # TestWatchList "the reflector uses the old LIST/WATCH semantics if the UseWatchList is turned off"
    stop = threading.Event()
    script = Script(stop, lists=[ListPage([pod("p1", "1")], "1")], watches=[])
    store = ThreadSafeStore()
    make_reflector(script.lw(), store, use_watch_list=False).list_and_watch(stop)
    assert script.list_calls == [("0", 500, None)]
    assert [c[0] for c in script.watch_calls] == ["1"]
    assert script.watch_list_calls == []
    assert store_rvs(store) == {"p1": "1"}


@pytest.mark.parametrize(
    "refusal",
    [
        RuntimeError("dummy error"),
        errors.Invalid("streaming is not allowed", status=422, reason="Invalid"),
        errors.BadRequest("unknown parameter sendInitialEvents", status=400, reason="BadRequest"),
        errors.Forbidden("sendInitialEvents is forbidden", status=403, reason="Forbidden"),
    ],
    ids=["any error", "422 Invalid", "400 BadRequest", "403 Forbidden"],
)
def test_a_refused_stream_falls_back_to_list_and_watch(refusal: Exception) -> None:
    # TestWatchList "returning any other error than apierrors.NewInvalid forces fallback" and "the reflector
    # can fall back to old LIST/WATCH semantics when a server doesn't support streaming".
    stop = threading.Event()
    script = Script(
        stop,
        lists=[ListPage([pod("p1", "1")], "1")],
        watches=[refusal, closed_watch(("ADDED", pod("p2", "2")))],
    )
    store = ThreadSafeStore()
    make_reflector(script.lw(), store).list_and_watch(stop)
    assert script.watch_list_calls == [0]
    assert script.list_calls == [("0", 500, None)]
    assert [c[0] for c in script.watch_calls] == ["", "1", "2"]
    assert store_rvs(store) == {"p1": "1", "p2": "2"}


def test_updates_and_deletes_during_the_stream_apply_to_the_temporary_store() -> None:
    # TestWatchList "check if Updates and Deletes events are propagated during streaming (until the bookmark
    # is received)"
    stop = threading.Event()
    script = Script(
        stop,
        watches=[
            closed_watch(
                ("ADDED", pod("p1", "1")),
                ("ADDED", pod("p2", "2")),
                ("MODIFIED", pod("p1", "3")),
                ("ADDED", pod("p3", "4")),
                ("DELETED", pod("p3", "5")),
                end_bookmark("5"),
            )
        ],
    )
    store = RecordingStore()
    r = make_reflector(script.lw(), store)
    r.list_and_watch(stop)
    assert store.calls == [("replace", ["p1", "p2"], "5")]
    assert store_rvs(store) == {"p1": "3", "p2": "2"}
    assert r.last_sync_resource_version == "5"


def test_a_429_at_the_start_of_a_stream_backs_off_and_streams_again(auto_clock) -> None:
    # TestWatchList "checks if the reflector retries 429"
    stop = threading.Event()
    script = Script(
        stop,
        watches=[
            too_many_requests(),
            too_many_requests(),
            closed_watch(("ADDED", pod("p1", "1")), end_bookmark("2")),
        ],
    )
    store = ThreadSafeStore()
    make_reflector(script.lw(), store, clock=auto_clock).list_and_watch(stop)
    assert script.watch_list_calls == [0, 1, 2]
    assert script.list_calls == []
    assert len(auto_clock.waited) == 2  # a backoff before each new stream
    assert store_rvs(store) == {"p1": "1"}


def test_the_same_watch_goes_on_after_the_bookmark_then_a_new_one_starts_from_the_last_rv() -> None:
    # TestWatchList "stopping a watcher after synchronization results in creating a new watch request"
    stop = threading.Event()
    script = Script(
        stop,
        watches=[
            closed_watch(
                ("ADDED", pod("p1", "1")),
                ("ADDED", pod("p2", "2")),
                end_bookmark("2"),
                ("ADDED", pod("p3", "3")),
            ),
            closed_watch(("ADDED", pod("p4", "4"))),
        ],
    )
    store = RecordingStore()
    make_reflector(script.lw(), store).list_and_watch(stop)
    assert script.watch_list_calls == [0]
    assert [c[0] for c in script.watch_calls] == ["", "3", "4"]
    assert store.calls == [("replace", ["p1", "p2"], "2"), ("add", "p3"), ("add", "p4")]


def test_an_expired_rewatch_after_the_stream_is_an_error_of_the_run() -> None:
    # TestWatchList "expiring an established watcher results in returning an error from the reflector"
    stop = threading.Event()
    script = Script(
        stop,
        watches=[
            closed_watch(("ADDED", pod("p1", "1")), end_bookmark("2"), ("ADDED", pod("p3", "3"))),
            expired(),
        ],
    )
    store = ThreadSafeStore()
    with pytest.raises(errors.Gone):
        make_reflector(script.lw(), store).list_and_watch(stop)
    assert [c[0] for c in script.watch_calls] == ["", "3"]
    assert store_rvs(store) == {"p1": "1", "p3": "3"}


def test_only_a_bookmark_annotated_true_ends_the_initial_events() -> None:
    # TestWatchList "prove that the reflector is checking the value of the initialEventsEnd annotation"
    stop = threading.Event()
    script = Script(
        stop,
        watches=[
            closed_watch(("ADDED", pod("p1", "1")), ("ADDED", pod("p2", "2")), end_bookmark("2", "false"))
        ],
    )
    store = RecordingStore()
    r = make_reflector(script.lw(), store)
    r.list_and_watch(stop)
    assert store.calls == []  # never replaced: the stream was opened again, and the run then stopped
    assert script.watch_list_calls == [0, 1]
    assert r.last_sync_resource_version == ""


# --- how streams fail ---------------------------------------------------------------------------------------


def test_an_expired_error_during_the_stream_streams_again_from_a_consistent_read() -> None:
    # watchList's isErrorRetriableWithSideEffectsFn: an Expired ERROR event in the middle of the initial
    # events marks the RV unavailable; the stream is opened again at once from "", not listed.
    stop = threading.Event()
    script = Script(
        stop,
        watches=[
            # Run 1: streamed at 5; the watch then ends with 410 (the run returns, to relist).
            closed_watch(("ADDED", pod("a", "2")), end_bookmark("5"), ("ERROR", status(410, "Expired"))),
            # Run 2: the stream from 5 is cut by 410, then one from "" completes (and closes at once).
            closed_watch(("ADDED", pod("a", "2")), ("ERROR", status(410, "Expired"))),
            closed_watch(("ADDED", pod("a", "2")), ("ADDED", pod("b", "6")), end_bookmark("6")),
        ],
    )
    store = RecordingStore()
    r = make_reflector(script.lw(), store)
    r.list_and_watch(stop)
    assert r.last_sync_resource_version == "5"
    r.list_and_watch(stop)
    assert script.list_calls == []
    assert [c[0] for c in script.watch_calls] == ["", "5", ""]
    assert script.watch_list_calls == [0, 1, 2]
    assert [c for c in store.calls if c[0] == "replace"] == [
        ("replace", ["a"], "5"),
        ("replace", ["a", "b"], "6"),
    ]
    assert r.relist_resource_version() == "6"  # the unavailable mark is cleared by the completed stream


def test_a_too_large_resource_version_streams_again_from_a_consistent_read() -> None:
    lw = FakeListerWatcher()
    lw.add(pod("a", "", ns="ns"))
    stop = threading.Event()
    store = ThreadSafeStore()
    r = make_reflector(lw, store)
    r._set_last_sync_resource_version("100")  # ahead of the server (e.g. restored from another one)
    runner = threading.Thread(target=r.list_and_watch, args=(stop,), name="test/reflector")
    runner.start()
    try:
        assert lw.wait_for(lambda: len(lw.watch_requests()) == 2 and lw.open_watches() == 1)
        assert [(w.resource_version, w.send_initial_events) for w in lw.watch_requests()] == [
            ("100", True),
            ("", True),
        ]
        assert lw.list_requests() == []
    finally:
        stop.set()
        r.interrupt()
        runner.join(10)
    assert store.list_keys() == ["ns/a"]


def test_a_stream_that_closes_at_once_with_nothing_falls_back_to_a_list() -> None:
    # handleAnyWatch: closed within a second without an event is a VeryShortWatchError, which watchList does
    # not retry: ListAndWatch lists.
    stop = threading.Event()
    script = Script(stop, lists=[ListPage([pod("p1", "1")], "1")], watches=[closed_watch()])
    store = ThreadSafeStore()
    make_reflector(script.lw(), store).list_and_watch(stop)
    assert script.watch_list_calls == [0]
    assert script.list_calls == [("0", 500, None)]
    assert store_rvs(store) == {"p1": "1"}


def test_the_fallback_is_per_run_the_next_run_streams_again() -> None:
    # client-go keeps no memory of a fallback: useWatchList is fixed at construction and each
    # ListAndWatchWithContext tries the stream first.
    lw = FakeListerWatcher(watch_list=False)
    lw.add(pod("a", "", ns="ns"))
    store = ThreadSafeStore()
    r = make_reflector(lw, store)
    for _ in range(2):
        stop = threading.Event()
        runner = threading.Thread(target=r.list_and_watch, args=(stop,), name="test/reflector")
        runner.start()
        assert lw.wait_for(lambda: lw.open_watches() == 1)
        stop.set()
        r.interrupt()
        runner.join(10)
        assert not runner.is_alive()
    assert [(w.send_initial_events, w.resource_version_match) for w in lw.watch_requests()] == [
        (True, "NotOlderThan"),
        (False, ""),
        (True, "NotOlderThan"),
        (False, ""),
    ]
    assert [lr.resource_version for lr in lw.list_requests()] == ["0", "2"]
    assert store.list_keys() == ["ns/a"]


def test_a_stop_during_the_stream_stops_its_watch_and_replaces_nothing() -> None:
    stop = threading.Event()

    class StopsMidStream(FakeWatcher):
        def __next__(self) -> WatchEvent:
            event = super().__next__()
            stop.set()
            return event

    w = StopsMidStream()
    w.add(pod("p1", "1"))
    w.add(pod("p2", "2"))
    w.action(*end_bookmark("2"))
    script = Script(stop, watches=[w])
    store = RecordingStore()
    make_reflector(script.lw(), store).list_and_watch(stop)
    assert store.calls == []
    assert w.is_stopped
    assert script.list_calls == []


# --- memory: one object at a time ---------------------------------------------------------------------------


def test_each_object_is_transformed_as_it_arrives_not_after_the_whole_list() -> None:
    journal: list[str] = []

    class Journaled(FakeWatcher):
        def __next__(self) -> WatchEvent:
            event = super().__next__()
            journal.append(f"received {event.type} {event.object['metadata'].get('name', '')}".rstrip())
            return event

    def transform(obj: dict[str, Any]) -> dict[str, Any]:
        journal.append(f"transformed {obj['metadata']['name']}")
        obj["metadata"].pop("managedFields", None)
        return obj

    w = Journaled()
    for i in range(3):
        obj = pod(f"p{i}", str(i + 1))
        obj["metadata"]["managedFields"] = [{"manager": "kubectl"}]
        w.add(obj)
    w.action(*end_bookmark("3"))
    w.close()
    store = ThreadSafeStore()
    make_reflector(Script(threading.Event(), watches=[w]).lw(), store, transform=transform).list_and_watch(
        threading.Event()
    )
    assert journal[:7] == [
        "received ADDED p0",
        "transformed p0",
        "received ADDED p1",
        "transformed p1",
        "received ADDED p2",
        "transformed p2",
        "received BOOKMARK",
    ]
    assert all("managedFields" not in o["metadata"] for o in store.list())


def test_the_gc_tactic_applies_around_the_stream_and_freezes_after_the_first_only() -> None:
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []

    class Observed(FakeWatcher):
        def __next__(self) -> WatchEvent:
            seen.append(gc.get_threshold())
            return super().__next__()

    def stream() -> FakeWatcher:
        w = Observed()
        w.add(pod("p1", "1"))
        w.action(*end_bookmark("1"))
        w.close()
        return w

    script = Script(threading.Event(), watches=[])
    r = make_reflector(script.lw(), ThreadSafeStore(), gc_tuning=True)
    gc.unfreeze()
    try:
        for attempt in range(2):
            stop = threading.Event()
            script.stop = stop
            script._watches = [stream()]
            r.list_and_watch(stop)
            frozen = gc.get_freeze_count()
            gc.unfreeze()
            if attempt == 0:
                assert frozen > 0  # the cache built by the first stream is out of the collector's reach
            else:
                assert frozen == 0  # later streams do not freeze again
            # Raised while the initial events arrive; restored once the store is replaced and the same
            # watch goes on.
            assert seen[:2] == [LIST_GC_THRESHOLDS] * 2
            assert seen[2:] == [before]
            seen.clear()
        assert gc.get_threshold() == before
    finally:
        gc.unfreeze()


# --- against the fake API server ----------------------------------------------------------------------------


def test_an_informer_syncs_from_the_stream_and_its_handlers_see_initial_adds(recorder) -> None:
    lw = FakeListerWatcher()
    for name in ("a", "b"):
        lw.add(pod(name, "", ns="ns"))
    informer = SharedIndexInformer(lw, name="pods", clock=FakeClock(), gc_tuning=False, use_watch_list=True)
    rec = recorder()
    informer.add_event_handler(rec)
    informer.start()
    try:
        assert informer.wait_for_synced(10)
        assert informer.last_sync_resource_version == "3"  # the bookmark's
        lw.add(pod("c", "", ns="ns"))
        lw.delete(pod("a", "", ns="ns"))
        assert rec.wait_for_count(4) == [
            ("add", "ns/a", "2", True),
            ("add", "ns/b", "3", True),
            ("add", "ns/c", "4", False),
            ("delete", "ns/a", "5", False),
        ]
        # One request: the stream, which went on as the watch.
        assert [(w.resource_version, w.send_initial_events) for w in lw.watch_requests()] == [("", True)]
        assert lw.list_requests() == []
    finally:
        informer.stop()
    assert lw.open_watches() == 0


def test_a_server_that_refuses_streams_serves_the_informer_by_list_and_watch(recorder) -> None:
    lw = FakeListerWatcher(watch_list=False)
    lw.add(pod("a", "", ns="ns"))
    informer = SharedIndexInformer(lw, name="pods", clock=FakeClock(), gc_tuning=False, use_watch_list=True)
    rec = recorder()
    informer.add_event_handler(rec)
    informer.start()
    try:
        assert informer.wait_for_synced(10)
        assert lw.wait_for(lambda: lw.open_watches() == 1)
        lw.add(pod("b", "", ns="ns"))
        assert rec.wait_for_count(2) == [("add", "ns/a", "2", True), ("add", "ns/b", "3", False)]
        assert [(w.resource_version, w.send_initial_events) for w in lw.watch_requests()] == [
            ("", True),
            ("2", False),
        ]
        assert [r.resource_version for r in lw.list_requests()] == ["0"]
    finally:
        informer.stop()


def test_the_fake_server_validates_streaming_parameters_as_kube_apiserver() -> None:
    lw = FakeListerWatcher()
    with pytest.raises(errors.Invalid, match="sendInitialEvents requires setting resourceVersionMatch"):
        lw.watch("", 300, True, send_initial_events=True)
    with pytest.raises(errors.Invalid, match="forbidden for watch unless sendInitialEvents"):
        lw.watch("", 300, True, resource_version_match="NotOlderThan")
    lw.watch_list = False
    with pytest.raises(errors.Invalid, match="unless the WatchList feature gate is enabled"):
        lw.watch("", 300, True, send_initial_events=True, resource_version_match="NotOlderThan")
    lw.watch_list = True
    lw.add(pod("a", "", ns="ns"))
    # Without bookmarks allowed, no end marker comes: the objects only.
    w = lw.watch("", 300, False, send_initial_events=True, resource_version_match="NotOlderThan")
    lw.close_watches()
    assert [e.type for e in w] == ["ADDED"]


# --- the feature gate ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "enabled"),
    [
        (None, True),
        ("", True),
        ("true", True),
        ("1", True),
        ("false", False),
        ("0", False),
        ("F", False),
        ("nonsense", True),
    ],
)
def test_watch_list_client_is_on_unless_the_environment_says_false(value: str | None, enabled: bool) -> None:
    environ = {} if value is None else {WATCH_LIST_CLIENT_ENV: value}
    assert watch_list_client_enabled(environ) is enabled


def test_a_reflector_reads_the_gate_when_not_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WATCH_LIST_CLIENT_ENV, "false")
    assert not Reflector(FakeListerWatcher(), ThreadSafeStore(), name="off").use_watch_list
    assert Reflector(FakeListerWatcher(), ThreadSafeStore(), name="told", use_watch_list=True).use_watch_list
    monkeypatch.delenv(WATCH_LIST_CLIENT_ENV)
    assert Reflector(FakeListerWatcher(), ThreadSafeStore(), name="default").use_watch_list
