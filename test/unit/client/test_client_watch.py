"""Watches against the scripted HTTP stub: event decoding, stopping from another thread, timeouts, breakage.

Cases mirror client-go ``rest/watch/decoder_test.go`` and ``watch/streamwatcher_test.go``
(``TestStreamWatcher``: events in order; ``TestStreamWatcherError``: a decode error becomes an ERROR event
and ends the watch; ``TestStreamWatcherRace``: Stop while a reader is blocked).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

from controller.client import errors
from controller.client.client import Client
from controller.client.gvk import GVK
from controller.client.transport import Transport
from controller.client.watch import Watch, WatchEvent

CM = GVK("", "v1", "ConfigMap")
PATH = "/api/v1/namespaces/ns/configmaps"


def event(kind: str, name: str, rv: str) -> bytes:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "resourceVersion": rv}}
    return orjson.dumps({"type": kind, "object": obj}) + b"\n"


def names(events: list[WatchEvent]) -> list[tuple[str, str | None]]:
    return [(e.type, e.object.get("metadata", {}).get("name")) for e in events]


def test_events_arrive_in_order_whatever_the_chunking(stub: Any, client: Client) -> None:
    stream = event("ADDED", "a", "1") + event("MODIFIED", "a", "2") + event("DELETED", "a", "3")
    # Cut mid-line and mid-UTF-8-free JSON: the splitter must reassemble.
    chunks = [stream[:10], stream[10:70], stream[70:71], stream[71:]]
    stub.route("GET", PATH, stub.Response(chunks=chunks))
    with client.watch(CM, "ns", resource_version="1") as watch:
        got = list(watch)
    assert names(got) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    assert [e.object["metadata"]["resourceVersion"] for e in got] == ["1", "2", "3"]


def test_the_watch_request_asks_for_bookmarks_and_the_server_timeout(stub: Any, client: Client) -> None:
    stub.route("GET", PATH, stub.Response(chunks=[]))
    list(client.watch(CM, "ns", resource_version="5", timeout_seconds=300, label_selector="a=b"))
    list(client.watch(CM, "ns", allow_bookmarks=False))
    with_bookmarks, without = stub.requests
    assert {k: v[0] for k, v in with_bookmarks.query.items()} == {
        "watch": "true",
        "resourceVersion": "5",
        "timeoutSeconds": "300",
        "allowWatchBookmarks": "true",
        "labelSelector": "a=b",
    }
    assert {k: v[0] for k, v in without.query.items()} == {"watch": "true"}


def test_bookmarks_and_errors_are_passed_through(stub: Any, client: Client) -> None:
    bookmark = {"type": "BOOKMARK", "object": {"kind": "ConfigMap", "metadata": {"resourceVersion": "9"}}}
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "reason": "Expired"}
    gone = {"type": "ERROR", "object": {**status, "message": "too old resource version: 1 (9)"}}
    stub.route(
        "GET", PATH, stub.Response(chunks=[orjson.dumps(bookmark) + b"\n" + orjson.dumps(gone) + b"\n"])
    )
    got = list(client.watch(CM, "ns"))
    assert [e.type for e in got] == ["BOOKMARK", "ERROR"]
    assert got[0].object["metadata"]["resourceVersion"] == "9"
    err = got[1].as_error()
    assert isinstance(err, errors.Gone)
    assert errors.is_expired(err)


def test_an_undecodable_line_ends_the_watch_with_an_error_event(stub: Any, client: Client) -> None:
    # TestStreamWatcherError
    stub.route(
        "GET",
        PATH,
        stub.Response(chunks=[event("ADDED", "a", "1") + b"{not json\n" + event("ADDED", "b", "2")]),
    )
    got = list(client.watch(CM, "ns"))
    assert [e.type for e in got] == ["ADDED", "ERROR"]
    err = got[1].as_error()
    assert isinstance(err, errors.ServerError)
    assert err.has_cause("ClientWatchDecoding")


def test_a_truncated_last_line_is_dropped_and_the_watch_ends(stub: Any, client: Client) -> None:
    stub.route("GET", PATH, stub.Response(chunks=[event("ADDED", "a", "1") + b'{"type":"ADD']))
    assert names(list(client.watch(CM, "ns"))) == [("ADDED", "a")]


def _read_in_thread(watch: Watch) -> tuple[threading.Thread, list[Any], threading.Event]:
    got: list[Any] = []
    first = threading.Event()

    def run() -> None:
        try:
            for ev in watch:
                got.append(ev)
                first.set()
        except BaseException as exc:
            got.append(exc)
            first.set()

    thread = threading.Thread(target=run, name="test/watch-reader", daemon=True)
    thread.start()
    return thread, got, first


def test_stop_from_another_thread_wakes_a_blocked_reader(stub: Any, client: Client) -> None:
    # TestStreamWatcherRace: Stop while the reader waits for the next event.
    stub.route("GET", PATH, lambda _r: stub.Response(chunks=stub.then_silence([event("ADDED", "a", "1")])))
    watch = client.watch(CM, "ns")
    thread, got, first = _read_in_thread(watch)
    assert first.wait(5)
    watch.stop()
    thread.join(5)
    assert not thread.is_alive()
    assert names(got) == [("ADDED", "a")]  # ended quietly: no exception after stop
    assert watch.stopped
    watch.stop()  # idempotent


def test_stopping_before_reading_releases_the_connection(stub: Any, client: Client) -> None:
    stub.route("GET", PATH, lambda _r: stub.Response(chunks=stub.then_silence()))
    stub.route("GET", "/api/v1/namespaces/ns/configmaps/a", stub.Response(body={"kind": "ConfigMap"}))
    for _ in range(6):  # more than the pool's 4 connections: each stopped watch gave its slot back
        with client.watch(CM, "ns") as watch:
            pass
        assert list(watch) == []
    assert client.get(CM, "a", "ns") == {"kind": "ConfigMap"}


def test_a_silent_stream_raises_watch_timeout(stub: Any, transport: Transport) -> None:
    stub.route("GET", PATH, lambda _r: stub.Response(chunks=stub.then_silence([event("ADDED", "a", "1")])))
    client = Client(transport, qps=0, watch_read_timeout=0.2)
    try:
        watch = client.watch(CM, "ns")
        assert next(watch).type == "ADDED"
        with pytest.raises(errors.WatchTimeout) as info:
            next(watch)
        assert info.value.__cause__ is not None
        with pytest.raises(StopIteration):  # a failed watch stays finished
            next(watch)
    finally:
        client.close()


def test_a_watch_with_a_server_timeout_may_be_silent_past_the_read_timeout(
    stub: Any, transport: Transport
) -> None:
    # kube-apiserver sends no bookmark on a kind its watch cache has seen no event of (until etcd's next
    # progress notification, 10 minutes by default): a quiet watch with a server timeout is not dead, and
    # is not re-opened before the server ends it.
    quiet = threading.Event()

    def quiet_then_closed() -> Iterator[bytes]:
        yield event("ADDED", "a", "1")
        quiet.wait(0.6)  # three read timeouts of silence, then the server ends the watch
        yield event("MODIFIED", "a", "2")

    stub.route("GET", PATH, lambda _r: stub.Response(chunks=quiet_then_closed()))
    client = Client(transport, qps=0, watch_read_timeout=0.2)
    try:
        watch = client.watch(CM, "ns", timeout_seconds=1, allow_bookmarks=True)
        assert names(list(watch)) == [("ADDED", "a"), ("MODIFIED", "a")]
    finally:
        client.close()


def test_a_connection_dropped_mid_stream_raises_connection_failed(stub: Any, client: Client) -> None:
    def broken() -> Iterator[bytes]:
        yield event("ADDED", "a", "1")
        yield b'{"type":"MODIFIED","obj'
        raise stub.Abort

    stub.route("GET", PATH, lambda _r: stub.Response(chunks=broken()))
    watch = client.watch(CM, "ns")
    assert next(watch).type == "ADDED"
    with pytest.raises(errors.ConnectionFailed):
        next(watch)


def test_a_refused_watch_raises_the_mapped_error(stub: Any, client: Client) -> None:
    stub.route("GET", PATH, stub.Response(status=403, body=stub.status(403, "Forbidden", "no watching")))
    with pytest.raises(errors.Forbidden, match="no watching"):
        client.watch(CM, "ns")


def test_a_watch_start_answered_429_is_retried(stub: Any, client: Client) -> None:
    busy = stub.Response(
        status=429, body=stub.status(429, "TooManyRequests", "wait"), headers={"Retry-After": "0"}
    )
    stub.route("GET", PATH, [busy, stub.Response(chunks=[event("ADDED", "a", "1")])])
    assert names(list(client.watch(CM, "ns"))) == [("ADDED", "a")]
    assert len(stub.requests) == 2


def test_the_lister_watcher_watches_with_its_selectors(stub: Any, client: Client) -> None:
    stub.route("GET", PATH, stub.Response(chunks=[event("ADDED", "a", "1")]))
    lw = client.lister_watcher(CM, "ns", field_selector="metadata.name=a")
    got = list(lw.watch(resource_version="1", timeout_seconds=60, allow_bookmarks=True))
    assert names(got) == [("ADDED", "a")]
    sent = stub.requests[-1]
    assert (sent.param("fieldSelector"), sent.param("timeoutSeconds")) == ("metadata.name=a", "60")


def test_a_large_event_split_into_many_chunks_decodes_whole(stub: Any, client: Client) -> None:
    big = {
        "type": "ADDED",
        "object": {"kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"k": "v" * 3_000_000}},
    }
    line = orjson.dumps(big) + b"\n"
    stub.route("GET", PATH, stub.Response(chunks=[line[i : i + 8192] for i in range(0, len(line), 8192)]))
    (got,) = list(client.watch(CM, "ns"))
    assert got.object == big["object"]


def test_repr_shows_live_state(stub: Any, client: Client, wait_until: Callable[..., None]) -> None:
    stub.route("GET", PATH, stub.Response(chunks=[event("ADDED", "a", "1")]))
    watch = client.watch(CM, "ns")
    assert repr(watch) == "Watch(kind='ConfigMap', events=0, open)"
    list(watch)
    assert repr(watch) == "Watch(kind='ConfigMap', events=1, done)"
    watch.stop()
    assert repr(watch) == "Watch(kind='ConfigMap', events=1, stopped)"
