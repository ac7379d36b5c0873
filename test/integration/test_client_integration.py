"""controller.client.client against a real kube-apiserver (Tier 1): what the API server actually answers.

Each test states a behaviour of the server that the client must expose faithfully: CRUD, pagination, watch
ordering and bookmarks, 410 after compaction, server-side apply conflicts and forced ownership, the status
subresource, delete propagation, discovery of a CRD installed after start, and the error mapping of real
404/409/422/403 answers (with their Status details).
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.client import errors
from controller.client.client import Client
from controller.client.gvk import GVK
from controller.client.transport import Transport
from controller.client.watch import WatchEvent
from controller.envtest import ControlPlane, namespaced_crd

CM = GVK("", "v1", "ConfigMap")
NS = GVK("", "v1", "Namespace")
CRD = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")


def cm(name: str, namespace: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


@pytest.fixture
def client(kubeconfig: Path) -> Iterator[Client]:
    c = Client(Transport.from_kubeconfig(str(kubeconfig), pool_size=8), qps=0)
    try:
        yield c
    finally:
        c.close()


def test_a_config_map_is_created_read_updated_patched_and_deleted(client: Client, namespace: str) -> None:
    created = client.create(cm("crud", namespace, a="1"), field_manager="test")
    assert created["metadata"]["uid"]
    assert client.get(CM, "crud", namespace)["data"] == {"a": "1"}

    created["data"]["a"] = "2"
    updated = client.update(created)
    assert updated["data"] == {"a": "2"}
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])

    patched = client.patch(CM, "crud", {"data": {"b": "3"}}, namespace)
    assert patched["data"] == {"a": "2", "b": "3"}
    patched = client.patch(CM, "crud", [{"op": "remove", "path": "/data/a"}], namespace, "json")
    assert patched["data"] == {"b": "3"}
    patched = client.patch(CM, "crud", {"data": {"c": "4"}}, namespace, "strategic")
    assert patched["data"] == {"b": "3", "c": "4"}

    client.delete(CM, "crud", namespace)
    with pytest.raises(errors.NotFound):
        client.get(CM, "crud", namespace)


def test_an_update_with_a_stale_resource_version_conflicts(client: Client, namespace: str) -> None:
    stale = client.create(cm("stale", namespace, a="1"))
    client.patch(CM, "stale", {"data": {"a": "2"}}, namespace)
    stale["data"]["a"] = "3"
    with pytest.raises(errors.Conflict) as info:
        client.update(stale)
    assert info.value.status == 409
    assert "modified" in info.value.message


def test_creating_a_taken_name_raises_already_exists(client: Client, namespace: str) -> None:
    client.create(cm("taken", namespace))
    with pytest.raises(errors.AlreadyExists) as info:
        client.create(cm("taken", namespace))
    assert info.value.details["name"] == "taken"


def test_a_missing_object_is_not_found_with_details(client: Client, namespace: str) -> None:
    with pytest.raises(errors.NotFound) as info:
        client.get(CM, "nothing-here", namespace)
    assert info.value.reason == "NotFound"
    assert info.value.details == {"name": "nothing-here", "kind": "configmaps"}


def test_an_invalid_object_is_rejected_with_field_causes(client: Client, namespace: str) -> None:
    bad = cm("Not_A_Valid_Name", namespace)
    bad["data"] = {"bad key!": "x"}
    with pytest.raises(errors.Invalid) as info:
        client.create(bad)
    fields = {c["field"] for c in info.value.causes}
    assert {"metadata.name", "data[bad key!]"} <= fields
    assert all(c["reason"] == "FieldValueInvalid" for c in info.value.causes)


def test_a_list_of_five_is_read_two_per_page(client: Client, namespace: str) -> None:
    for i in range(5):
        client.create(cm(f"page-{i}", namespace))
    first = client.list_page(CM, namespace, limit=2)
    assert len(first.items) == 2 and first.continue_
    assert first.remaining_item_count == 3
    pages = [first]
    while pages[-1].continue_:
        pages.append(client.list_page(CM, namespace, limit=2, continue_=pages[-1].continue_))
    assert [len(p.items) for p in pages] == [2, 2, 1]
    assert {p.resource_version for p in pages} == {first.resource_version}  # one consistent snapshot

    everything = client.list(CM, namespace, limit=2)
    assert sorted(i["metadata"]["name"] for i in everything.items) == [f"page-{i}" for i in range(5)]
    assert all(i["kind"] == "ConfigMap" and i["apiVersion"] == "v1" for i in everything.items)
    assert everything.resource_version == everything.resource_version.strip() and everything.resource_version


def test_a_label_selector_filters_the_list(client: Client, namespace: str) -> None:
    for name, tier in (("l-a", "x"), ("l-b", "y")):
        obj = cm(name, namespace)
        obj["metadata"]["labels"] = {"tier": tier}
        client.create(obj)
    assert [i["metadata"]["name"] for i in client.list(CM, namespace, label_selector="tier=y").items] == [
        "l-b"
    ]


def _collect(events: Iterator[WatchEvent], stop_when: Callable[[WatchEvent], bool]) -> list[WatchEvent]:
    out: list[WatchEvent] = []
    for ev in events:
        out.append(ev)
        if stop_when(ev):
            break
    return out


def test_a_watch_sees_added_modified_deleted_in_order(client: Client, namespace: str) -> None:
    start = client.list(CM, namespace).resource_version
    with client.watch(CM, namespace, resource_version=start, timeout_seconds=30) as watch:
        client.create(cm("watched", namespace, v="1"))
        client.patch(CM, "watched", {"data": {"v": "2"}}, namespace)
        client.delete(CM, "watched", namespace)
        got = _collect(watch, lambda e: e.type == "DELETED")
    changes = [(e.type, e.object["data"]["v"]) for e in got if e.type != "BOOKMARK"]
    assert changes == [("ADDED", "1"), ("MODIFIED", "2"), ("DELETED", "2")]
    versions = [int(e.object["metadata"]["resourceVersion"]) for e in got if e.type != "BOOKMARK"]
    assert versions == sorted(versions)


def test_bookmarks_carry_progress_that_no_event_shows(client: Client, namespace: str) -> None:
    # The watch cache sends a bookmark shortly before the watch's deadline (and about every minute) once
    # its resourceVersion has moved past the watcher's: here a ConfigMap changes in another namespace,
    # which this watch filters out, and only the bookmark tells the watcher it may resume from there.
    start = client.list(CM, namespace).resource_version
    elsewhere = f"elsewhere-{secrets.token_hex(3)}"
    with client.watch(CM, namespace, resource_version=start, timeout_seconds=4, allow_bookmarks=True) as w:
        moved = client.create(cm(elsewhere, "default"))["metadata"]["resourceVersion"]
        got = list(w)  # ends when the server closes the watch at its timeout
    client.delete(CM, elsewhere, "default")
    assert [e.type for e in got if e.type != "BOOKMARK"] == []
    bookmarks = [e for e in got if e.type == "BOOKMARK"]
    assert bookmarks, "no bookmark before the watch timed out"
    assert int(bookmarks[-1].object["metadata"]["resourceVersion"]) >= int(moved)
    assert bookmarks[-1].object["kind"] == "ConfigMap"


def test_without_bookmarks_a_quiet_watch_just_ends_at_its_timeout(client: Client, namespace: str) -> None:
    start = client.list(CM, namespace).resource_version
    with client.watch(CM, namespace, resource_version=start, timeout_seconds=2, allow_bookmarks=False) as w:
        assert list(w) == []


def test_a_watch_from_a_compacted_resource_version_is_gone(
    control_plane_without_watch_cache: ControlPlane,
) -> None:
    plane = control_plane_without_watch_cache
    client = Client(Transport.from_kubeconfig(str(plane.kubeconfig)), qps=0)
    try:
        namespace = f"compact-{secrets.token_hex(3)}"
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        old = client.create(cm("old", namespace))["metadata"]["resourceVersion"]
        client.patch(CM, "old", {"data": {"x": "1"}}, namespace)
        client.create(cm("newer", namespace))
        plane.compact_etcd()
        # The server may refuse at once or start the stream and send an ERROR event: both are "expired".
        try:
            with client.watch(CM, namespace, resource_version=old, timeout_seconds=10) as watch:
                got = list(watch)
        except errors.Gone as exc:
            err: errors.ApiError = exc
        else:
            assert [e.type for e in got] == ["ERROR"], [e.type for e in got]
            err = got[0].as_error()
        assert isinstance(err, errors.Gone)
        assert errors.is_expired(err)
        assert err.status == 410

        # An exact list at the compacted revision is expired too (the reflector then relists from "").
        with pytest.raises(errors.Gone) as listed:
            client.list_page(CM, namespace, resource_version=old, resource_version_match="Exact")
        assert errors.is_expired(listed.value)
    finally:
        client.close()


def test_server_side_apply_by_a_second_manager_conflicts_until_forced(client: Client, namespace: str) -> None:
    client.apply(cm("ssa", namespace, owner="first"), "manager-one")
    with pytest.raises(errors.Conflict) as info:
        client.apply(cm("ssa", namespace, owner="second"), "manager-two", force=False)
    assert info.value.has_cause(errors.CAUSE_FIELD_MANAGER_CONFLICT)
    assert info.value.causes[0]["field"] == ".data.owner"

    forced = client.apply(cm("ssa", namespace, owner="second"), "manager-two", force=True)
    assert forced["data"] == {"owner": "second"}
    owners = {m["manager"]: m.get("fieldsV1", {}) for m in forced["metadata"]["managedFields"]}
    assert "f:owner" in str(owners["manager-two"])
    assert "f:owner" not in str(owners.get("manager-one", {}))


def test_applying_the_same_object_twice_is_a_no_op(client: Client, namespace: str) -> None:
    first = client.apply(cm("idem", namespace, k="v"), "trainer")
    second = client.apply(cm("idem", namespace, k="v"), "trainer")
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


GIZMO_GROUP = "client.test.example.com"


def _gizmo_crd(group: str) -> dict[str, Any]:
    return namespaced_crd(
        group,
        "Gizmo",
        spec={"type": "object", "properties": {"size": {"type": "integer"}}},
        status={"type": "object", "properties": {"phase": {"type": "string"}}},
    )


@pytest.fixture(scope="module")
def gizmo_group(control_plane: ControlPlane) -> Iterator[str]:
    """A CRD unique to this module, installed by a test through the client (not by the fixture)."""
    group = f"g{secrets.token_hex(3)}.{GIZMO_GROUP}"
    yield group
    control_plane.admin_request(
        "DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.{group}"
    )


def _install_gizmos(client: Client, group: str, eventually: Callable[..., Any]) -> GVK:
    gvk = GVK(group, "v1", "Gizmo")
    with contextlib.suppress(errors.AlreadyExists):  # another test of this module installed it
        client.create(_gizmo_crd(group))

    def established() -> None:
        crd = client.get(CRD, f"gizmos.{group}")
        conditions = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or ()}
        assert conditions.get("Established") == "True", conditions

    eventually(established, timeout=30)
    return gvk


def test_a_crd_installed_after_a_miss_is_discovered(
    client: Client, gizmo_group: str, namespace: str, eventually: Callable[..., Any]
) -> None:
    gvk = GVK(gizmo_group, "v1", "Gizmo")
    with pytest.raises(errors.NoKindMatch):
        client.resource_for(gvk)
    _install_gizmos(client, gizmo_group, eventually)
    resource = eventually(lambda: client.resource_for(gvk), timeout=30, retry_on=(errors.NoKindMatch,))
    assert (resource.plural, resource.namespaced) == ("gizmos", True)
    assert client.mapper.preferred_version(gizmo_group) == "v1"
    created = client.create(
        {"apiVersion": gvk.api_version, "kind": "Gizmo", "metadata": {"name": "g", "namespace": namespace}}
    )
    assert created["kind"] == "Gizmo"


def test_the_status_subresource_is_written_apart_from_the_object(
    client: Client, gizmo_group: str, namespace: str, eventually: Callable[..., Any]
) -> None:
    gvk = _install_gizmos(client, gizmo_group, eventually)
    eventually(lambda: client.resource_for(gvk), timeout=30, retry_on=(errors.NoKindMatch,))
    body = {"apiVersion": gvk.api_version, "kind": "Gizmo", "metadata": {"name": "s", "namespace": namespace}}
    created = client.create({**body, "spec": {"size": 1}, "status": {"phase": "ignored"}})
    assert "status" not in created  # the main resource ignores status

    patched = client.patch_status(gvk, "s", {"status": {"phase": "Running"}, "spec": {"size": 9}}, namespace)
    assert patched["status"] == {"phase": "Running"}
    assert patched["spec"] == {"size": 1}  # the status subresource ignores spec

    current = client.get(gvk, "s", namespace)
    current["status"]["phase"] = "Done"
    assert client.update_status(current)["status"] == {"phase": "Done"}
    applied = client.apply_status({**body, "status": {"phase": "Applied"}}, "status-writer")
    assert applied["status"] == {"phase": "Applied"}


@pytest.mark.parametrize(
    ("policy", "finalizer"),
    [("Foreground", "foregroundDeletion"), ("Orphan", "orphan"), ("Background", None)],
)
def test_delete_propagation_is_recorded_on_the_object(
    client: Client, namespace: str, policy: str, finalizer: str | None
) -> None:
    # Tier 1 runs no garbage collector, so the GC finalizers the policy asks for stay on the object: the
    # state of the world shows which policy the server received.
    name = f"del-{policy.lower()}"
    client.create(cm(name, namespace))
    client.delete(CM, name, namespace, policy)
    if finalizer is None:
        with pytest.raises(errors.NotFound):
            client.get(CM, name, namespace)
        return
    remaining = client.get(CM, name, namespace)
    assert remaining["metadata"]["finalizers"] == [finalizer]
    assert remaining["metadata"]["deletionTimestamp"]
    client.patch(CM, name, {"metadata": {"finalizers": None}}, namespace)  # let it go


def test_a_delete_precondition_that_does_not_hold_conflicts(client: Client, namespace: str) -> None:
    created = client.create(cm("guarded", namespace))
    with pytest.raises(errors.Conflict):
        client.delete(CM, "guarded", namespace, uid="00000000-0000-0000-0000-000000000000")
    client.delete(CM, "guarded", namespace, uid=created["metadata"]["uid"])
    with pytest.raises(errors.NotFound):
        client.delete(CM, "guarded", namespace)


def test_a_service_account_without_rbac_is_forbidden(control_plane: ControlPlane, namespace: str) -> None:
    kubeconfig = control_plane.kubeconfig_for_service_account(namespace, "nobody")
    client = Client(Transport.from_kubeconfig(str(kubeconfig)), qps=0)
    try:
        with pytest.raises(errors.Forbidden) as info:
            client.list(CM, namespace)
        assert "system:serviceaccount:" in info.value.message
    finally:
        client.close()


def test_stop_ends_a_watch_blocked_on_a_quiet_stream(client: Client, namespace: str) -> None:
    start = client.list(CM, namespace).resource_version
    watch = client.watch(CM, namespace, resource_version=start, timeout_seconds=300)
    done = threading.Event()
    got: list[Any] = []

    def read() -> None:
        got.extend(watch)
        done.set()

    reader = threading.Thread(target=read, name="test/watch-reader", daemon=True)
    reader.start()
    began = time.monotonic()
    watch.stop()
    reader.join(10)
    assert done.is_set() and not reader.is_alive()
    assert time.monotonic() - began < 5
    # The connection pool is still usable afterwards.
    assert client.get(NS, namespace)["metadata"]["name"] == namespace


# --- benchmark ---------------------------------------------------------------------------------------------


def _rate(fn: Callable[[int], None], n: int, threads: int) -> tuple[float, float]:
    """Requests per second, and this process's CPU microseconds per request (all threads)."""
    per_thread = n // threads

    def run(offset: int) -> None:
        for i in range(per_thread):
            fn(offset * per_thread + i)

    workers = [threading.Thread(target=run, args=(t,), name=f"bench/{t}") for t in range(threads)]
    began, cpu = time.perf_counter(), time.process_time()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    done = per_thread * threads
    return done / (time.perf_counter() - began), (time.process_time() - cpu) / done * 1e6


@pytest.mark.benchmark
def test_benchmark_get_and_server_side_apply_requests_per_second(kubeconfig: Path, namespace: str) -> None:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    client = Client(Transport.from_kubeconfig(str(kubeconfig), pool_size=8), qps=0)
    official = k8s_client.CoreV1Api(k8s_config.new_client_from_config(str(kubeconfig)))
    try:
        client.apply(cm("bench", namespace, k="v"), "bench")
        for i in range(20):  # warm up connections and the server's caches
            client.get(CM, "bench", namespace)
            client.apply(cm(f"bench-{i}", namespace, k="v"), "bench")
        results = {
            "official GET x1": _rate(
                lambda _i: official.read_namespaced_config_map("bench", namespace), 300, 1
            )
        }
        for threads in (1, 4):
            results[f"GET x{threads}"] = _rate(lambda _i: client.get(CM, "bench", namespace), 600, threads)
            results[f"SSA no-op x{threads}"] = _rate(
                lambda i: client.apply(cm(f"bench-{i % 20}", namespace, k="v"), "bench"), 400, threads
            )
            results[f"SSA change x{threads}"] = _rate(
                lambda i, t=threads: client.apply(cm(f"bench-{i % 20}", namespace, k=f"{t}-{i}"), "bench"),
                400,
                threads,
            )
        print()
        for name, (rate, cpu_us) in results.items():
            print(f"client {name:>16}: {rate:6.0f} req/s, client CPU {cpu_us:5.0f} us/req (Tier 1, TLS)")
    finally:
        official.api_client.close()
        client.close()
