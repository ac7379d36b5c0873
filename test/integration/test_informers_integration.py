"""Informers and the informer cache against a real kube-apiserver (Tier 1).

What is checked: an informer sees create/update/delete in order; it fills its cache by a streaming list
(kube-apiserver serves a WATCH with sendInitialEvents, no LIST) and loses nothing created while the server
streams; a watch broken by restarting kube-apiserver and one expired by etcd compaction both recover by
relisting with no change lost; field index lookups over real objects. Each test builds its own client and
informers and stops them (the leak check joins every thread)."""

from __future__ import annotations

import secrets
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.cache.informer_cache import ByObject, InformerCache
from controller.client.client import Client
from controller.client.gvk import GVK
from controller.envtest import ControlPlane
from controller.indexers import index_field
from controller.informers.reflector import ListerWatcher, ListPageLike, Watch
from controller.informers.shared_informer import ResourceEventHandlerFuncs, SharedIndexInformer
from controller.informers.store import DeletedFinalStateUnknown, meta_namespace_key

CONFIGMAP = GVK("", "v1", "ConfigMap")


class Recorder:
    """Writes down every notification as ``(verb, key, data)``; tombstoned deletes as ``delete?``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[tuple[str, str, Any]] = []

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        with self._lock:
            self.events.append(("add", meta_namespace_key(obj), obj.get("data")))

    def on_update(self, old: Any, new: Any) -> None:
        if old["metadata"]["resourceVersion"] == new["metadata"]["resourceVersion"]:
            return  # a relist or resync replay, not a change
        with self._lock:
            self.events.append(("update", meta_namespace_key(new), new.get("data")))

    def on_delete(self, obj: Any) -> None:
        with self._lock:
            if isinstance(obj, DeletedFinalStateUnknown):
                self.events.append(("delete?", obj.key, None))
            else:
                self.events.append(("delete", meta_namespace_key(obj), None))

    def snapshot(self) -> list[tuple[str, str, Any]]:
        with self._lock:
            return list(self.events)


def configmap(namespace: str, name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


@pytest.fixture
def client_for() -> Iterator[Callable[[Path], Client]]:
    clients: list[Client] = []

    def make(kubeconfig: Path) -> Client:
        c = Client.load(str(kubeconfig))
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


@pytest.fixture
def running() -> Iterator[Callable[[SharedIndexInformer], SharedIndexInformer]]:
    """Starts informers and stops them at teardown, whatever the test did."""
    started: list[SharedIndexInformer] = []

    def start(informer: SharedIndexInformer) -> SharedIndexInformer:
        informer.start()
        started.append(informer)
        return informer

    yield start
    for informer in started:
        informer.stop()


def cache_state(informer: SharedIndexInformer) -> dict[str, Any]:
    return {meta_namespace_key(o): o.get("data") for o in informer.get_store().list()}


def server_state(client: Client, namespace: str) -> dict[str, Any]:
    return {meta_namespace_key(o): o.get("data") for o in client.list(CONFIGMAP, namespace).items}


def test_an_informer_sees_create_update_delete_in_order(
    kubeconfig: Path, namespace: str, client_for, running, eventually
) -> None:
    client = client_for(kubeconfig)
    informer = SharedIndexInformer(client.lister_watcher(CONFIGMAP, namespace=namespace), name="configmaps")
    rec = Recorder()
    informer.add_event_handler(rec)
    running(informer)
    assert informer.wait_for_synced(30)

    client.create(configmap(namespace, "a", v="1"))
    obj = client.get(CONFIGMAP, "a", namespace)
    client.update({**obj, "data": {"v": "2"}})
    client.create(configmap(namespace, "b", v="1"))
    client.delete(CONFIGMAP, "a", namespace)

    key_a, key_b = f"{namespace}/a", f"{namespace}/b"
    expected = [
        ("add", key_a, {"v": "1"}),
        ("update", key_a, {"v": "2"}),
        ("add", key_b, {"v": "1"}),
        ("delete", key_a, None),
    ]

    def delivered() -> None:
        assert rec.snapshot() == expected

    eventually(delivered, timeout=30)
    assert cache_state(informer) == {key_b: {"v": "1"}}
    # managedFields (set by every write) were stripped before storage.
    assert "managedFields" not in informer.get_store().get_by_key(key_b)["metadata"]


def apiserver_requests(plane: ControlPlane, resource: str) -> Counter[str]:
    """kube-apiserver's ``apiserver_request_total`` for ``resource``, by verb (summed over codes and scopes).

    A WATCH is counted when it ends; a LIST when it is answered."""
    answer = plane.admin_request("GET", "/metrics")
    assert answer.status == 200, answer.body[:200]
    lines = "".join(
        f"{line}\n"
        for line in answer.body.decode().splitlines()
        if line.startswith("apiserver_request_total{")
    )
    counts: Counter[str] = Counter()
    for family in text_string_to_metric_families(lines):
        for sample in family.samples:
            if sample.labels.get("resource") == resource and not sample.labels.get("subresource"):
                counts[sample.labels["verb"]] += int(sample.value)
    return counts


class CreatesWhileStreaming:
    """Passes list and watch through to the real ones; while a streaming list's initial events arrive (after
    the ``after``-th), runs ``during`` once, in the reading thread: changes made while the server streams."""

    def __init__(self, inner: ListerWatcher, *, after: int, during: Callable[[], None]) -> None:
        self.inner = inner
        self.after = after
        self.during: Callable[[], None] | None = during

    def list(self, resource_version: str, limit: int, continue_: str | None) -> ListPageLike:
        return self.inner.list(resource_version, limit, continue_)

    def watch(
        self,
        resource_version: str,
        timeout_seconds: int,
        allow_bookmarks: bool,
        *,
        send_initial_events: bool = False,
        resource_version_match: str = "",
    ) -> Watch:
        w = self.inner.watch(
            resource_version,
            timeout_seconds,
            allow_bookmarks,
            send_initial_events=send_initial_events,
            resource_version_match=resource_version_match,
        )
        return _Interposed(w, self) if send_initial_events else w


class _Interposed:
    def __init__(self, w: Watch, owner: CreatesWhileStreaming) -> None:
        self._w = w
        self._owner = owner

    def __iter__(self) -> Iterator[Any]:
        for n, event in enumerate(self._w, start=1):
            if n == self._owner.after and self._owner.during is not None:
                during, self._owner.during = self._owner.during, None
                during()
            yield event

    def stop(self) -> None:
        self._w.stop()


@pytest.mark.parametrize("use_watch_list", [True, False], ids=["streaming list", "list"])
def test_an_informer_fills_its_cache_by_a_streaming_list_losing_nothing_created_meanwhile(
    control_plane: ControlPlane, namespace: str, client_for, running, *, eventually, use_watch_list
) -> None:
    client = client_for(control_plane.kubeconfig)
    before = {f"before-{i:02d}" for i in range(30)}
    for name in sorted(before):
        client.create(configmap(namespace, name, v="1"))
    during = {f"during-{i:02d}" for i in range(10)}

    def changes_while_streaming() -> None:
        for name in sorted(during):
            client.create(configmap(namespace, name, v="1"))
        changed = client.get(CONFIGMAP, "before-00", namespace)
        client.update({**changed, "data": {"v": "2"}})
        client.delete(CONFIGMAP, "before-01", namespace)

    lw = CreatesWhileStreaming(
        client.lister_watcher(CONFIGMAP, namespace=namespace), after=5, during=changes_while_streaming
    )
    informer = SharedIndexInformer(lw, name="configmaps", use_watch_list=use_watch_list)
    initial: list[str] = []
    informer.add_event_handler(
        ResourceEventHandlerFuncs(
            add_func=lambda obj, is_in_initial_list: (
                initial.append(obj["metadata"]["name"]) if is_in_initial_list else None
            )
        )
    )
    own_lists = 0  # this test's own LISTs of configmaps, to tell the informer's apart

    def converged() -> None:
        nonlocal own_lists
        own_lists += 1
        assert cache_state(informer) == server_state(client, namespace)

    requests_before = apiserver_requests(control_plane, "configmaps")
    running(informer)
    assert informer.wait_for_synced(30)
    if not use_watch_list:
        changes_while_streaming()  # no stream to make them during: after the list, then
    eventually(converged, timeout=30, interval=0.2)
    assert set(cache_state(informer)) == {f"{namespace}/{n}" for n in (before | during) - {"before-01"}}
    assert cache_state(informer)[f"{namespace}/before-00"] == {"v": "2"}
    # The handler's initial adds are the state the stream started from: what was there before it.
    assert sorted(initial) == sorted(before)
    informer.stop()

    def served() -> Counter[str]:
        delta = apiserver_requests(control_plane, "configmaps")
        delta.subtract(requests_before)
        assert delta["WATCH"] >= 1  # the informer's watch is counted once it has ended
        return delta

    delta = eventually(served, timeout=30, interval=0.2)
    # kube-apiserver served the informer's initial state by a WATCH (sendInitialEvents), not a LIST.
    assert delta["LIST"] - own_lists == (0 if use_watch_list else 1), (delta, own_lists)


def test_a_watch_broken_by_an_apiserver_restart_recovers_with_no_change_lost(
    control_plane: ControlPlane, namespace: str, client_for, running, eventually
) -> None:
    client = client_for(control_plane.kubeconfig)
    for name in ("keep", "change", "remove"):
        client.create(configmap(namespace, name, v="1"))
    informer = SharedIndexInformer(client.lister_watcher(CONFIGMAP, namespace=namespace), name="configmaps")
    rec = Recorder()
    registration = informer.add_event_handler(rec)
    running(informer)
    assert registration.wait_for_synced(30)  # the informer synced and the handler ran on the initial list
    assert len(rec.snapshot()) == 3

    control_plane.restart_apiserver()
    # Right away, while the informer is still reconnecting (its watch broke; it is backing off):
    changed = client.get(CONFIGMAP, "change", namespace)
    client.update({**changed, "data": {"v": "2"}})
    client.delete(CONFIGMAP, "remove", namespace)
    client.create(configmap(namespace, "new", v="1"))

    def converged() -> None:
        assert cache_state(informer) == server_state(client, namespace)

    eventually(converged, timeout=60, interval=0.2)
    events = rec.snapshot()
    assert ("update", f"{namespace}/change", {"v": "2"}) in events
    assert ("add", f"{namespace}/new", {"v": "1"}) in events
    # The delete arrives as an event, or as a tombstone if a relist found it missing.
    assert {e[0] for e in events if e[1] == f"{namespace}/remove"} & {"delete", "delete?"}


class GatedListerWatcher:
    """Passes list and watch through to the real one, but holds a new watch until ``gate`` is set, and can
    close the watch in flight: the test decides when the informer is disconnected and for how long."""

    def __init__(self, inner: ListerWatcher) -> None:
        self.inner = inner
        self.gate = threading.Event()
        self.gate.set()
        self.watch_rvs: list[str] = []
        self.watches: list[tuple[str, bool]] = []  # (resourceVersion, sendInitialEvents)
        self.list_rvs: list[str] = []
        self.waiting = threading.Event()
        self._current: Watch | None = None

    def list(self, resource_version: str, limit: int, continue_: str | None) -> ListPageLike:
        self.list_rvs.append(resource_version)
        return self.inner.list(resource_version, limit, continue_)

    def watch(
        self,
        resource_version: str,
        timeout_seconds: int,
        allow_bookmarks: bool,
        *,
        send_initial_events: bool = False,
        resource_version_match: str = "",
    ) -> Watch:
        self.watch_rvs.append(resource_version)
        self.watches.append((resource_version, send_initial_events))
        if not self.gate.is_set():
            self.waiting.set()
            self.gate.wait(60)
        w = self.inner.watch(
            resource_version,
            timeout_seconds,
            allow_bookmarks,
            send_initial_events=send_initial_events,
            resource_version_match=resource_version_match,
        )
        self._current = w
        return w

    def disconnect(self) -> None:
        if self._current is not None:
            self._current.stop()


@pytest.mark.parametrize("use_watch_list", [False, True], ids=["list", "streaming list"])
def test_a_watch_expired_by_etcd_compaction_relists_with_no_change_lost(
    control_plane_without_watch_cache: ControlPlane, client_for, running, eventually, use_watch_list
) -> None:
    plane = control_plane_without_watch_cache
    client = client_for(plane.kubeconfig)
    ns = f"compaction-{secrets.token_hex(3)}"
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for name in ("keep", "change", "remove"):
        client.create(configmap(ns, name, v="1"))
    gated = GatedListerWatcher(client.lister_watcher(CONFIGMAP, namespace=ns))
    informer = SharedIndexInformer(gated, name="configmaps", use_watch_list=use_watch_list)
    rec = Recorder()
    informer.add_event_handler(rec)
    running(informer)
    assert informer.wait_for_synced(30)
    client.create(configmap(ns, "first", v="1"))
    eventually(lambda: cache_state(informer)[f"{ns}/first"], timeout=30, retry_on=(KeyError,))

    # Disconnect and hold the informer off while changes land and etcd compacts them away.
    gated.gate.clear()
    gated.disconnect()
    assert gated.waiting.wait(30)
    resume_from = gated.watch_rvs[-1]
    changed = client.get(CONFIGMAP, "change", ns)
    client.update({**changed, "data": {"v": "2"}})
    client.delete(CONFIGMAP, "remove", ns)
    client.create(configmap(ns, "new", v="1"))
    plane.compact_etcd()
    gated.gate.set()

    def converged() -> None:
        assert cache_state(informer) == server_state(client, ns)

    eventually(converged, timeout=60, interval=0.2)
    # The watch from before the compaction got 410 and the informer relisted from its last resourceVersion:
    # by a list, or by a new streaming list "not older than" it.
    if use_watch_list:
        assert gated.watches[0] == ("", True)
        assert (resume_from, True) in gated.watches[1:]
        assert gated.list_rvs == []
    else:
        assert gated.list_rvs[0] == "0"
        assert resume_from in gated.list_rvs[1:]
    events = rec.snapshot()
    assert ("delete?", f"{ns}/remove", None) in events  # the missed delete, found by the relist
    assert ("update", f"{ns}/change", {"v": "2"}) in events
    assert ("add", f"{ns}/new", {"v": "1"}) in events


def test_field_index_lookups_over_real_objects(
    control_plane: ControlPlane, namespace: str, client_for, eventually
) -> None:
    client = client_for(control_plane.kubeconfig)
    other = f"{namespace[:50]}-b"
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    run = secrets.token_hex(4)
    labels = {"informers-test": run}
    client.create(configmap(namespace, "a", labels, owner="trainer-1"))
    client.create(configmap(namespace, "b", labels, owner="trainer-2"))
    client.create(configmap(other, "c", labels, owner="trainer-1"))
    client.create(configmap(other, "unlabelled", owner="trainer-1"))

    cache = InformerCache(
        client.lister_watcher,
        by_object={CONFIGMAP: ByObject(label_selector=f"informers-test={run}")},
        is_namespaced=lambda gvk: client.resource_for(gvk).namespaced,
    )
    index_field(cache, CONFIGMAP, "data.owner", lambda o: [o.get("data", {}).get("owner", "")])
    cache.start()
    try:
        assert cache.wait_for_cache_sync(timeout=30)

        def keys(objs: list[dict[str, Any]]) -> list[str]:
            return sorted(meta_namespace_key(o) for o in objs)

        assert keys(cache.list(CONFIGMAP, index=("data.owner", "trainer-1"))) == sorted(
            [f"{namespace}/a", f"{other}/c"]
        )
        assert keys(cache.list(CONFIGMAP, namespace=namespace, index=("data.owner", "trainer-1"))) == [
            f"{namespace}/a"
        ]
        assert cache.get(CONFIGMAP, "b", namespace)["data"] == {"owner": "trainer-2"}

        client.create(configmap(namespace, "d", labels, owner="trainer-1"))

        def indexed() -> None:
            found = cache.list(CONFIGMAP, namespace=namespace, index=("data.owner", "trainer-1"))
            assert keys(found) == [f"{namespace}/a", f"{namespace}/d"]

        eventually(indexed, timeout=30)
    finally:
        cache.stop()
