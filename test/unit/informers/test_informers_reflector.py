"""The reflector as client-go's reflector_test.go: resourceVersion choices, pagination, watches, backoff.

Most cases run ``list_and_watch`` synchronously against scripted list/watch functions (client-go's
``ListWatch`` + ``FakeWatcher`` pattern): a watch function that sets the stop event ends the run. What is
asserted is what the API server was asked (its access log), what the store holds, and how much fake time
the reflector waited.
"""

from __future__ import annotations

import gc
import random
import threading
from collections.abc import Callable
from typing import Any

import pytest

from controller.client import errors
from controller.clock import FakeClock
from controller.informers.reflector import (
    Backoff,
    BackoffManager,
    ListPage,
    ListWatch,
    Reflector,
    VeryShortWatchError,
    is_watch_error_retriable,
)
from controller.informers.store import ThreadSafeStore
from controller.informers.testing import FakeListerWatcher, FakeWatcher, ListRequest


def pod(name: str, rv: str, ns: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv}
    if ns:
        meta["namespace"] = ns
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


def pods(n: int) -> list[dict[str, Any]]:
    return [pod(f"pod-{i}", str(i)) for i in range(n)]


def store_rvs(store: ThreadSafeStore) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in store.list()}


def status(code: int, reason: str, message: str = "") -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message or reason,
    }


def expired() -> errors.Gone:
    return errors.Gone("The resourceVersion for the provided watch is too old.", status=410, reason="Expired")


def too_many_requests() -> errors.TooManyRequests:
    return errors.TooManyRequests("too many requests", status=429, reason="TooManyRequests", retry_after=1)


def connection_refused() -> errors.ConnectionFailed:
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as exc:
            raise errors.ConnectionFailed("could not connect to 127.0.0.1:6443") from exc
    except errors.ConnectionFailed as failed:
        return failed


class Script:
    """Scripted list and watch functions that log what they were asked (client-go's ListWatch in tests)."""

    def __init__(
        self,
        stop: threading.Event,
        *,
        lists: Callable[[str, int, str | None], ListPage] | list[Any] | None = None,
        watches: list[Any] | None = None,
    ) -> None:
        self.stop = stop
        self._lists = lists
        self._watches = list(watches or [])
        self.list_calls: list[tuple[str, int, str | None]] = []
        self.watch_calls: list[tuple[str, int, bool]] = []
        self.watch_list_calls: list[int] = []  # indexes into watch_calls of the streaming lists

    def list(self, resource_version: str, limit: int, continue_: str | None) -> ListPage:
        self.list_calls.append((resource_version, limit, continue_))
        if callable(self._lists):
            return self._lists(resource_version, limit, continue_)
        assert self._lists, f"unexpected list call {self.list_calls[-1]}"
        result = self._lists.pop(0)
        if isinstance(result, BaseException):
            raise result
        assert isinstance(result, ListPage)
        return result

    def watch(
        self,
        resource_version: str,
        timeout_seconds: int,
        allow_bookmarks: bool,
        *,
        send_initial_events: bool = False,
        resource_version_match: str = "",
    ) -> FakeWatcher:
        """Hands out the scripted watches (or raises scripted errors); when they run out, stops the run."""
        if send_initial_events:
            assert resource_version_match == "NotOlderThan"
            self.watch_list_calls.append(len(self.watch_calls))
        self.watch_calls.append((resource_version, timeout_seconds, allow_bookmarks))
        if not self._watches:
            self.stop.set()
            return FakeWatcher()
        result = self._watches.pop(0)
        if isinstance(result, BaseException):
            raise result
        assert isinstance(result, FakeWatcher)
        return result

    def lw(self) -> ListWatch:
        return ListWatch(self.list, self.watch)


def closed_watch(*events: tuple[str, dict[str, Any]]) -> FakeWatcher:
    w = FakeWatcher()
    for event_type, obj in events:
        w.action(event_type, obj)
    w.close()
    return w


def make_reflector(lw: Any, store: Any, **kwargs: Any) -> Reflector:
    kwargs.setdefault("clock", FakeClock())
    kwargs.setdefault("gc_tuning", False)
    kwargs.setdefault("rng", random.Random(1))
    # The cases of reflector_test.go run with WatchListClient off; the streaming list has its own file.
    kwargs.setdefault("use_watch_list", False)
    return Reflector(lw, store, name="test", **kwargs)


# --- list then watch ----------------------------------------------------------------------------------------


def test_reflector_list_and_watch() -> None:
    # reflector_test.go TestReflectorListAndWatch "UseWatchList disabled"
    stop = threading.Event()
    watch = closed_watch(
        ("MODIFIED", pod("foo", "2")),
        ("ADDED", pod("bar", "3")),
        ("ADDED", pod("baz", "4")),
        ("ADDED", pod("qux", "5")),
        ("ADDED", pod("zoo", "6")),
    )
    script = Script(stop, lists=[ListPage([pod("foo", "1")], "1")], watches=[watch])
    store = ThreadSafeStore()
    make_reflector(script.lw(), store).list_and_watch(stop)

    assert script.list_calls == [("0", 500, None)]
    first_watch = script.watch_calls[0]
    assert (first_watch[0], first_watch[2]) == ("1", True)
    assert 300 <= first_watch[1] <= 600
    # After a normal close the reflector watches again from the last event seen, without relisting.
    assert script.watch_calls[1][0] == "6"
    assert store_rvs(store) == {"foo": "2", "bar": "3", "baz": "4", "qux": "5", "zoo": "6"}


def test_reflector_list_and_watch_with_errors() -> None:
    # reflector_test.go TestReflectorListAndWatchWithErrors: one store across runs that fail in between.
    table: list[dict[str, Any]] = [
        {"list": ListPage([], "1"), "events": [("ADDED", pod("foo", "2")), ("ADDED", pod("bar", "3"))]},
        {
            "list": ListPage([pod("foo", "2"), pod("bar", "3")], "3"),
            "events": [("DELETED", pod("foo", "4")), ("ADDED", pod("qux", "5"))],
        },
        {"list_err": errors.ServerError("a list error", status=500)},
        {
            "list": ListPage([pod("bar", "3"), pod("qux", "5")], "5"),
            "watch_err": RuntimeError("a watch error"),
        },
        {"list": ListPage([pod("bar", "3"), pod("qux", "5")], "5"), "events": [("ADDED", pod("baz", "6"))]},
        {"list": ListPage([pod("bar", "3"), pod("qux", "5"), pod("baz", "6")], "6")},
    ]
    store = ThreadSafeStore()
    for line, item in enumerate(table):
        if "list" in item:
            # What the server lists now is what the store already holds.
            assert store_rvs(store) == {
                o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in item["list"].items
            }, line
        stop = threading.Event()
        watches: list[Any] = []
        if "watch_err" in item:
            watches.append(item["watch_err"])
        elif "events" in item:
            watches.append(closed_watch(*item["events"]))
        lists = [item["list_err"] if "list_err" in item else item["list"]]
        script = Script(stop, lists=lists, watches=watches)
        r = make_reflector(script.lw(), store)
        if "list_err" in item:
            with pytest.raises(errors.ServerError, match="a list error"):
                r.list_and_watch(stop)
        elif "watch_err" in item:
            with pytest.raises(RuntimeError, match="a watch error"):
                r.list_and_watch(stop)
        else:
            r.list_and_watch(stop)


# --- which resourceVersion, and pagination ------------------------------------------------------------------


def test_reflector_watch_list_page_size() -> None:
    # reflector_test.go TestReflectorWatchListPageSize: an explicit page size pages even a non-"0" RV.
    stop = threading.Event()
    items = pods(10)
    pages = {
        None: ListPage(items[0:4], "10", "C1"),
        "C1": ListPage(items[4:8], "10", "C2"),
        "C2": ListPage(items[8:10], "10"),
    }
    script = Script(stop, lists=lambda rv, limit, cont: pages[cont])
    store = ThreadSafeStore()
    r = make_reflector(script.lw(), store, watch_list_page_size=4)
    r._set_last_sync_resource_version("10")
    r.list_and_watch(stop)
    assert script.list_calls == [("10", 4, None), ("", 4, "C1"), ("", 4, "C2")]
    assert len(store) == 10


def test_reflector_not_paginating_not_consistent_reads() -> None:
    # reflector_test.go TestReflectorNotPaginatingNotConsistentReads: RV "10" is listed unpaged (watch cache).
    stop = threading.Event()
    script = Script(stop, lists=[ListPage(pods(10), "10")])
    store = ThreadSafeStore()
    r = make_reflector(script.lw(), store)
    r._set_last_sync_resource_version("10")
    r.list_and_watch(stop)
    assert script.list_calls == [("10", 0, None)]
    assert len(store) == 10


def test_reflector_paginating_non_consistent_reads_if_watch_cache_disabled() -> None:
    # reflector_test.go TestReflectorPaginatingNonConsistentReadsIfWatchCacheDisabled
    items = pods(10)
    pages = {
        None: ListPage(items[0:4], "10", "C1"),
        "C1": ListPage(items[4:8], "10", "C2"),
        "C2": ListPage(items[8:10], "10"),
    }
    store = ThreadSafeStore()
    stop = threading.Event()
    script = Script(stop, lists=lambda rv, limit, cont: pages[cont])
    r = make_reflector(script.lw(), store)
    r.list_and_watch(stop)
    assert len(store) == 10
    # The first list (RV "0") came back in pages: the watch cache is off, so relists keep paging.
    stop.clear()
    script.stop = stop
    r.list_and_watch(stop)
    assert len(store) == 10
    assert [c[:2] for c in script.list_calls] == [
        ("0", 500),
        ("", 500),
        ("", 500),
        ("10", 500),
        ("", 500),
        ("", 500),
    ]


def test_reflector_resync_with_resource_version() -> None:
    # reflector_test.go TestReflectorResyncWithResourceVersion: relists never go back in time.
    items = pods(8)
    by_rv = {"0": ListPage(items[0:4], "10"), "10": ListPage(items[0:8], "11")}
    store = ThreadSafeStore()
    script = Script(threading.Event(), lists=lambda rv, limit, cont: by_rv[rv])
    r = make_reflector(script.lw(), store)
    for _ in range(2):
        stop = threading.Event()
        script.stop = stop
        r.list_and_watch(stop)
    assert [c[0] for c in script.list_calls] == ["0", "10"]
    assert len(store) == 8


def test_reflector_expired_exact_resource_version() -> None:
    # reflector_test.go TestReflectorExpiredExactResourceVersion: an expired RV is relisted at once with "".
    items = pods(8)

    def lists(rv: str, limit: int, cont: str | None) -> ListPage:
        if rv == "10":
            raise expired()
        return {"0": ListPage(items[0:4], "10"), "": ListPage(items[0:8], "11")}[rv]

    store = ThreadSafeStore()
    script = Script(threading.Event(), lists=lists)
    r = make_reflector(script.lw(), store)
    for expected_items in (4, 8):
        stop = threading.Event()
        script.stop = stop
        r.list_and_watch(stop)
        assert len(store) == expected_items
    assert [c[0] for c in script.list_calls] == ["0", "10", ""]
    # The consistent list succeeded, so the next relist is at its RV again.
    assert r.relist_resource_version() == "11"


def test_reflector_full_list_if_expired() -> None:
    # reflector_test.go TestReflectorFullListIfExpired: page 2 expired → one unpaged list at the same RV.
    items = pods(8)

    def lists(rv: str, limit: int, cont: str | None) -> ListPage:
        match (rv, cont, limit):
            case ("0", None, 4):
                return ListPage(items[0:4], "10")
            case ("10", None, 4):
                return ListPage(items[0:4], "11", "C1")
            case ("", "C1", 4):
                raise expired()
            case ("10", None, 0):
                return ListPage(items[0:8], "11")
        raise AssertionError(f"unexpected list options {(rv, cont, limit)}")

    store = ThreadSafeStore()
    script = Script(threading.Event(), lists=lists)
    r = make_reflector(script.lw(), store, watch_list_page_size=4)
    for expected_items in (4, 8):
        stop = threading.Event()
        script.stop = stop
        r.list_and_watch(stop)
        assert len(store) == expected_items
    assert [c[0] for c in script.list_calls] == ["0", "10", "", "10"]


def test_reflector_full_list_if_too_large() -> None:
    # reflector_test.go TestReflectorFullListIfTooLarge: the three shapes of "too large resource version".
    version = [30]

    def too_large(shape: str) -> errors.ApiError:
        if shape == "cause":
            return errors.ServerError(
                "too large resource version",
                status=504,
                reason="Timeout",
                details={"causes": [{"reason": "ResourceVersionTooLarge"}]},
            )
        if shape == "cause message":
            return errors.ServerError(
                "too large resource version",
                status=504,
                reason="Timeout",
                details={"causes": [{"message": "Too large resource version"}]},
            )
        return errors.ServerError(
            "Too large resource version", status=504, reason="Timeout", details={"retryAfterSeconds": 1}
        )

    def lists(rv: str, limit: int, cont: str | None) -> ListPage:
        if rv == "0":
            return ListPage([], "20")
        if rv in ("20", "30", "40"):
            raise too_large({"20": "cause", "30": "cause message", "40": "message"}[rv])
        assert rv == "", rv
        current = str(version[0])
        version[0] += 10
        return ListPage([], current)

    script = Script(threading.Event(), lists=lists)
    r = make_reflector(script.lw(), ThreadSafeStore())
    for _ in range(4):
        stop = threading.Event()
        script.stop = stop
        r.list_and_watch(stop)
    assert [c[0] for c in script.list_calls] == ["0", "20", "", "30", "", "40", ""]


def test_continuation_pages_are_asked_without_a_resource_version() -> None:
    lw = FakeListerWatcher()
    for i in range(5):
        lw.add(pod(f"p{i}", "0", ns="ns"))
    stop = threading.Event()
    store = ThreadSafeStore()
    r = make_reflector(lw, store, watch_list_page_size=2)
    lw.watch_errors.append(RuntimeError("end of test"))
    with pytest.raises(RuntimeError, match="end of test"):
        r.list_and_watch(stop)
    assert lw.list_requests() == [
        ListRequest(resource_version="0", limit=2, continue_=None),
        ListRequest(resource_version="", limit=2, continue_="6:2"),
        ListRequest(resource_version="", limit=2, continue_="6:4"),
    ]
    assert sorted(store.list_keys()) == [f"ns/p{i}" for i in range(5)]
    assert r.last_sync_resource_version == "6"


# --- the watch ----------------------------------------------------------------------------------------------


def test_reflector_resource_version_update() -> None:
    # reflector_test.go TestReflectorResourceVersionUpdate: every event advances the RV, a bookmark too.
    stop = threading.Event()
    first = closed_watch(
        ("ADDED", pod("a", "10")),
        ("MODIFIED", pod("a", "20")),
        ("BOOKMARK", {"metadata": {"resourceVersion": "30"}}),
    )
    second = closed_watch(("DELETED", pod("a", "40")))
    script = Script(stop, lists=[ListPage([], "5")], watches=[first, second])
    store = ThreadSafeStore()
    r = make_reflector(script.lw(), store)
    r.list_and_watch(stop)
    assert [c[0] for c in script.watch_calls] == ["5", "30", "40"]
    assert r.last_sync_resource_version == "40"
    assert store.list() == []


def test_a_bookmark_only_advances_the_resource_version() -> None:
    stop = threading.Event()
    w = closed_watch(("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "9"}}))
    script = Script(stop, lists=[ListPage([pod("a", "3")], "3")], watches=[w])
    store = ThreadSafeStore()
    r = make_reflector(script.lw(), store)
    r.list_and_watch(stop)
    assert store_rvs(store) == {"a": "3"}
    assert script.watch_calls[1][0] == "9"
    assert store.resource_version == "9"


def test_a_watch_from_an_empty_resource_version_waits_for_a_non_added_event_to_advance() -> None:
    # reflector.go handleWatch: synthetic ADDED events of a watch from ""/"0" are not in RV order.
    stop = threading.Event()
    synthetic = closed_watch(("ADDED", pod("a", "5")), ("ADDED", pod("b", "3")))
    live = closed_watch(("ADDED", pod("c", "6")), ("MODIFIED", pod("a", "7")))
    script = Script(stop, lists=[ListPage([], "")], watches=[synthetic, live])
    store = ThreadSafeStore()
    r = make_reflector(script.lw(), store)
    r.list_and_watch(stop)
    assert [c[0] for c in script.watch_calls] == ["", "", "7"]
    assert store_rvs(store) == {"a": "7", "b": "3", "c": "6"}


def test_an_expired_watch_relists_from_the_last_resource_version_not_from_empty() -> None:
    # reflector.go watch(): isExpiredError → return; the next list is at the last RV ("at least as fresh").
    stop = threading.Event()
    w = FakeWatcher()
    w.add(pod("a", "6"))
    w.error(status(410, "Expired", "too old resource version: 5 (8)"))
    script = Script(
        stop, lists=[ListPage([], "5"), ListPage([pod("a", "6"), pod("b", "9")], "9")], watches=[w]
    )
    store = ThreadSafeStore()
    r = make_reflector(script.lw(), store)
    r.list_and_watch(stop)  # the watch ended with 410: back to the caller, who relists
    assert not stop.is_set()
    assert r.relist_resource_version() == "6"
    r.list_and_watch(stop)
    assert [c[0] for c in script.list_calls] == ["0", "6"]
    assert store_rvs(store) == {"a": "6", "b": "9"}


def test_an_error_event_ends_the_watch_and_the_next_iteration_relists() -> None:
    stop = threading.Event()
    w = FakeWatcher()
    w.error(status(500, "InternalError", "etcdserver: leader changed"))
    script = Script(stop, lists=[ListPage([], "5")], watches=[w])
    make_reflector(script.lw(), ThreadSafeStore()).list_and_watch(stop)
    assert len(script.watch_calls) == 1
    assert not stop.is_set()


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(errors.WatchTimeout("no data for 330 s"), id="a client read timeout"),
        pytest.param(errors.ConnectionFailed("connection reset by peer"), id="a broken stream"),
    ],
)
def test_a_dead_stream_is_a_normal_close_and_rewatches_without_a_relist(failure: Exception) -> None:
    stop = threading.Event()
    w = FakeWatcher()
    w.add(pod("a", "6"))
    w.fail(failure)
    script = Script(stop, lists=[ListPage([], "5")], watches=[w])
    make_reflector(script.lw(), ThreadSafeStore()).list_and_watch(stop)
    assert [c[0] for c in script.watch_calls] == ["5", "6"]
    assert len(script.list_calls) == 1


def test_a_very_short_watch_is_an_error() -> None:
    # reflector.go handleAnyWatch: closed within a second with no event → VeryShortWatchError → relist.
    clock = FakeClock()
    stop = threading.Event()
    script = Script(stop, lists=[ListPage([], "5")], watches=[closed_watch()])
    r = make_reflector(script.lw(), ThreadSafeStore(), clock=clock)
    outcome = r._handle_watch(
        closed_watch(),
        clock.monotonic(),
        stop,
        sink=ThreadSafeStore(),
        set_resource_version=lambda rv, besides: None,
        watch_list=False,
    )
    assert isinstance(outcome.error, VeryShortWatchError)
    r.list_and_watch(stop)
    assert len(script.watch_calls) == 1  # not rewatched: back to the caller, who relists


def test_an_empty_watch_that_lasted_over_a_second_is_a_normal_close() -> None:
    clock = FakeClock()
    stop = threading.Event()

    class SlowClose(FakeWatcher):
        def __next__(self) -> Any:
            clock.step(1.5)
            raise StopIteration

    script = Script(stop, lists=[ListPage([], "5")], watches=[SlowClose()])
    make_reflector(script.lw(), ThreadSafeStore(), clock=clock).list_and_watch(stop)
    assert [c[0] for c in script.watch_calls] == ["5", "5"]


def test_an_unknown_event_type_is_skipped_but_advances_the_resource_version() -> None:
    stop = threading.Event()
    w = closed_watch(("WEIRD", pod("a", "8")), ("ADDED", pod("b", "9")))
    script = Script(stop, lists=[ListPage([], "5")], watches=[w])
    store = ThreadSafeStore()
    make_reflector(script.lw(), store).list_and_watch(stop)
    assert store_rvs(store) == {"b": "9"}


def test_a_store_failure_is_logged_and_the_stream_goes_on() -> None:
    class Picky(ThreadSafeStore):
        def add(self, obj: Any) -> None:
            if obj["metadata"]["name"] == "bad":
                raise ValueError("cannot store this")
            super().add(obj)

    stop = threading.Event()
    w = closed_watch(("ADDED", pod("bad", "6")), ("ADDED", pod("good", "7")))
    script = Script(stop, lists=[ListPage([], "5")], watches=[w])
    store = Picky()
    make_reflector(script.lw(), store).list_and_watch(stop)
    assert store_rvs(store) == {"good": "7"}
    assert script.watch_calls[-1][0] == "7"


@pytest.mark.parametrize(
    ("min_watch_timeout", "expected_min"),
    [
        pytest.param(None, 300, id="no timeout"),
        pytest.param(1.0, 300, id="small timeout not honored"),
        pytest.param(1800.0, 1800, id="30m timeout"),
    ],
)
def test_watch_timeout(min_watch_timeout: float | None, expected_min: int) -> None:
    # reflector_test.go TestWatchTimeout
    stop = threading.Event()
    kwargs = {} if min_watch_timeout is None else {"min_watch_timeout": min_watch_timeout}
    for seed in range(20):
        stop.clear()
        script = Script(stop, lists=[ListPage([], "10")])
        make_reflector(script.lw(), ThreadSafeStore(), rng=random.Random(seed), **kwargs).list_and_watch(stop)
        timeout = script.watch_calls[0][1]
        assert expected_min <= timeout <= 2 * expected_min


# --- retrying the watch, and backoff ------------------------------------------------------------------------


def test_new_reflector_with_custom_backoff(auto_clock: Any) -> None:
    # reflector_test.go TestNewReflectorWithCustomBackoff "custom backoff": 10+20+40+80+100 ms of waiting.
    stop = threading.Event()
    script = Script(stop, lists=[ListPage([], "1")], watches=[connection_refused() for _ in range(5)])
    backoff = Backoff(duration=0.010, factor=2.0, jitter=0.0, steps=100, cap=0.100)
    start = auto_clock.monotonic()
    make_reflector(script.lw(), ThreadSafeStore(), clock=auto_clock, backoff=backoff).list_and_watch(stop)
    assert auto_clock.monotonic() - start == pytest.approx(0.250)
    assert len(script.list_calls) == 1  # refused connections retry the watch, never relist
    assert len(script.watch_calls) == 6


def test_reflector_list_and_watch_init_conn_backoff(auto_clock: Any) -> None:
    # reflector_test.go TestReflectorListAndWatchInitConnBackoff, with the default backoff and its jitter:
    # each wait is in [base, 2*base) with base 0.8 s doubling to a 30 s cap.
    stop = threading.Event()
    script = Script(stop, lists=[ListPage([], "1")], watches=[connection_refused() for _ in range(7)])
    make_reflector(script.lw(), ThreadSafeStore(), clock=auto_clock, rng=random.Random(7)).list_and_watch(
        stop
    )
    bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0]
    assert len(auto_clock.waited) == len(bases)
    for waited, base in zip(auto_clock.waited, bases, strict=True):
        assert base <= waited < 2 * base


def test_backoff_on_too_many_requests(auto_clock: Any) -> None:
    # reflector_test.go TestBackoffOnTooManyRequests: a 429 at start and a 429 ERROR event both back off.
    stop = threading.Event()
    second = FakeWatcher()
    second.error(status(429, "TooManyRequests", "too many requests"))
    immediately_closed = closed_watch()
    script = Script(
        stop, lists=[ListPage([], "1")], watches=[too_many_requests(), second, immediately_closed]
    )
    backoff = Backoff(duration=1.0, factor=1.0, jitter=0.0, steps=1)
    make_reflector(script.lw(), ThreadSafeStore(), clock=auto_clock, backoff=backoff).list_and_watch(stop)
    assert auto_clock.waited == [1.0, 1.0]
    assert len(script.watch_calls) == 3


def test_no_relist_on_too_many_requests(auto_clock: Any) -> None:
    # reflector_test.go TestNoRelistOnTooManyRequests
    stop = threading.Event()
    script = Script(
        stop, lists=[ListPage([], "1")], watches=[*(too_many_requests() for _ in range(4)), closed_watch()]
    )
    make_reflector(script.lw(), ThreadSafeStore(), clock=auto_clock).list_and_watch(stop)
    assert len(script.list_calls) == 1
    assert len(script.watch_calls) == 5


def test_a_watch_that_cannot_start_for_another_reason_ends_the_iteration() -> None:
    stop = threading.Event()
    tls_failure = errors.ConnectionFailed("certificate verify failed")
    script = Script(stop, lists=[ListPage([], "1")], watches=[tls_failure])
    with pytest.raises(errors.ConnectionFailed):
        make_reflector(script.lw(), ThreadSafeStore()).list_and_watch(stop)
    assert not is_watch_error_retriable(tls_failure)
    assert is_watch_error_retriable(connection_refused())
    assert is_watch_error_retriable(too_many_requests())


def test_backoff_sequence_doubles_to_the_cap_and_resets_after_two_minutes() -> None:
    # apimachinery wait.Backoff.DelayWithReset with the reflector's constants, jitter off to read the bases.
    clock = FakeClock()
    manager = BackoffManager(Backoff(jitter=0.0), clock=clock)
    assert [manager.step() for _ in range(9)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0]
    clock.step(120.0)
    assert manager.step() == 30.0  # not more than 2 minutes since the last reset yet
    clock.step(0.5)
    assert [manager.step() for _ in range(2)] == [0.8, 1.6]


def test_backoff_jitter_adds_up_to_the_delay_again() -> None:
    manager = BackoffManager(Backoff(), clock=FakeClock(), rng=random.Random(3))
    delays = [manager.step() for _ in range(12)]
    bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, *([30.0] * 6)]
    for delay, base in zip(delays, bases, strict=True):
        assert base <= delay < 2 * base


def test_reflector_resync(auto_clock: Any) -> None:
    # reflector_test.go TestReflectorResync: a failing resync ends the watch; the error is not returned.
    class ResyncingStore(ThreadSafeStore):
        iterations = 0

        def resync(self) -> None:
            self.iterations += 1
            if self.iterations == 2:
                raise RuntimeError("expected resync reached")

    stop = threading.Event()
    never_ending = FakeWatcher()
    script = Script(stop, lists=[ListPage([], "0")], watches=[never_ending])
    store = ResyncingStore()
    r = make_reflector(script.lw(), store, clock=auto_clock, resync_period=0.001)
    r.list_and_watch(stop)
    assert store.iterations == 2
    assert not stop.is_set()


# --- run, stop and the GC tactic ----------------------------------------------------------------------------


def test_run_backs_off_after_a_failed_list_and_stops_promptly_when_interrupted(auto_clock: Any) -> None:
    lw = FakeListerWatcher()
    lw.add(pod("a", "0", ns="ns"))
    lw.list_errors.append(errors.ServerError("etcd is down", status=500))
    store = ThreadSafeStore()
    r = make_reflector(lw, store, clock=auto_clock, rng=random.Random(5))
    stop = threading.Event()
    runner = threading.Thread(target=r.run, args=(stop,), name="test/reflector")
    runner.start()
    assert lw.wait_for(lambda: lw.open_watches() == 1)
    assert 0.8 <= auto_clock.waited[0] < 1.6  # one backoff between the failed list and the next one
    assert store.list_keys() == ["ns/a"]
    stop.set()
    r.interrupt()
    runner.join(10)
    assert not runner.is_alive()
    assert lw.open_watches() == 0
    assert [(w.resource_version, w.allow_bookmarks) for w in lw.watch_requests()] == [("2", True)]


def test_the_gc_tactic_raises_thresholds_during_lists_and_freezes_after_the_first_only() -> None:
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []

    def lists(rv: str, limit: int, cont: str | None) -> ListPage:
        seen.append(gc.get_threshold())
        return ListPage(pods(3), "3")

    script = Script(threading.Event(), lists=lists)
    r = make_reflector(script.lw(), ThreadSafeStore(), gc_tuning=True)
    gc.unfreeze()
    try:
        for attempt in range(2):
            stop = threading.Event()
            script.stop = stop
            r.list_and_watch(stop)
            frozen = gc.get_freeze_count()
            gc.unfreeze()
            if attempt == 0:
                assert frozen > 0  # the cache built by the first list is out of the collector's reach
            else:
                assert frozen == 0  # relists do not freeze again
        assert seen == [(50_000, 20, 100)] * 2
        assert gc.get_threshold() == before
    finally:
        gc.unfreeze()
