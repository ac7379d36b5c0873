"""ThreadSafeStore, keys and tombstones: client-go thread_safe_store_test.go, index_test.go, store_test.go."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest

from controller.envtest import wait_until
from controller.informers.store import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    KeyFuncError,
    ThreadSafeStore,
    deletion_handling_meta_namespace_key,
    meta_namespace_index_func,
    meta_namespace_key,
    split_meta_namespace_key,
)


def pod(
    name: str, *, ns: str = "", rv: str = "1", labels: dict[str, str] | None = None, users: str = ""
) -> dict:
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv}
    if ns:
        meta["namespace"] = ns
    if labels:
        meta["labels"] = labels
    if users:
        meta["annotations"] = {"users": users}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


def by_foo_label(obj: dict) -> list[str]:
    return [obj["metadata"].get("labels", {}).get("foo", "")]


def by_users(obj: dict) -> list[str]:
    return obj["metadata"].get("annotations", {}).get("users", "").split(",")


def names(objs: list[dict]) -> set[str]:
    return {o["metadata"]["name"] for o in objs}


# --- keys -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "key"),
    [
        pytest.param(pod("a", ns="ns1"), "ns1/a", id="namespaced object is keyed namespace/name"),
        pytest.param(pod("node-1"), "node-1", id="cluster-scoped object is keyed by name"),
    ],
)
def test_meta_namespace_key(obj: dict, key: str) -> None:
    # store_test.go TestMetaNamespaceKeyFunc (as behaviour)
    assert meta_namespace_key(obj) == key
    assert split_meta_namespace_key(key) == (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def test_an_object_without_a_name_cannot_be_keyed() -> None:
    with pytest.raises(KeyFuncError):
        meta_namespace_key({"metadata": {}})


def test_a_tombstone_is_keyed_by_the_key_it_carries() -> None:
    tombstone = DeletedFinalStateUnknown("ns/gone", pod("gone", ns="ns"))
    assert deletion_handling_meta_namespace_key(tombstone) == "ns/gone"
    assert deletion_handling_meta_namespace_key(pod("x", ns="ns")) == "ns/x"


def test_a_tombstone_is_a_frozen_value() -> None:
    tombstone = DeletedFinalStateUnknown("k", None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tombstone.key = "other"  # type: ignore[misc]
    assert tombstone == DeletedFinalStateUnknown("k", None)


def test_a_malformed_key_is_rejected() -> None:
    with pytest.raises(ValueError, match="unexpected key format"):
        split_meta_namespace_key("a/b/c")


# --- store basics -----------------------------------------------------------------------------------------


def test_add_get_update_delete_round_trip() -> None:
    store = ThreadSafeStore()
    store.add(pod("a", ns="ns", rv="1"))
    store.add(pod("b", ns="ns", rv="2"))
    assert store.get_by_key("ns/a")["metadata"]["resourceVersion"] == "1"
    store.update(pod("a", ns="ns", rv="3"))
    assert store.get(pod("a", ns="ns"))["metadata"]["resourceVersion"] == "3"
    assert sorted(store.list_keys()) == ["ns/a", "ns/b"]
    store.delete(pod("a", ns="ns", rv="4"))
    assert store.get_by_key("ns/a") is None
    assert names(store.list()) == {"b"}
    assert len(store) == 1


def test_add_of_an_existing_key_replaces_the_object() -> None:
    store = ThreadSafeStore()
    store.add(pod("a", rv="1"))
    store.add(pod("a", rv="2"))
    assert len(store) == 1
    assert store.get_by_key("a")["metadata"]["resourceVersion"] == "2"


def test_deleting_a_tombstone_removes_the_key_it_carries() -> None:
    store = ThreadSafeStore()
    store.add(pod("a", ns="ns"))
    store.delete(DeletedFinalStateUnknown("ns/a", None))
    assert store.list_keys() == []


def test_the_store_hands_out_the_stored_objects_without_copying() -> None:
    store = ThreadSafeStore()
    obj = pod("a")
    store.add(obj)
    assert store.get_by_key("a") is obj
    assert store.list()[0] is obj


def test_thread_safe_store_rv() -> None:
    # thread_safe_store_test.go TestThreadSafeStoreRV: the store follows the RV of what was applied last.
    store = ThreadSafeStore()
    assert store.resource_version == ""
    store.add(pod("a", rv="5"))
    assert store.resource_version == "5"
    store.update(pod("a", rv="7"))
    assert store.resource_version == "7"
    store.delete(pod("a", rv="9"))
    assert store.resource_version == "9"
    store.replace([pod("b", rv="3")], "11")
    assert store.resource_version == "11"
    store.bookmark("12")
    assert store.resource_version == "12"


def test_replace_swaps_the_whole_content_and_rebuilds_the_indices() -> None:
    store = ThreadSafeStore({"foo": by_foo_label})
    store.add(pod("old", labels={"foo": "x"}))
    store.replace([pod("new1", labels={"foo": "y"}), pod("new2", labels={"foo": "y"})], "20")
    assert sorted(store.list_keys()) == ["new1", "new2"]
    assert store.list_index_func_values("foo") == ["y"]
    assert store.index_keys("foo", "y") == ["new1", "new2"]
    assert store.by_index("foo", "x") == []


# --- indices ----------------------------------------------------------------------------------------------


def test_get_index_func_values() -> None:
    # index_test.go TestGetIndexFuncValues
    store = ThreadSafeStore({"testmodes": by_foo_label})
    store.add(pod("one", labels={"foo": "bar"}))
    store.add(pod("two", labels={"foo": "bar"}))
    store.add(pod("tre", labels={"foo": "biz"}))
    assert sorted(store.list_index_func_values("testmodes")) == ["bar", "biz"]


def test_multi_index_keys() -> None:
    # index_test.go TestMultiIndexKeys
    store = ThreadSafeStore({"byUser": by_users})
    pod1, pod2, pod3 = (
        pod("one", users="ernie,bert"),
        pod("two", users="bert,oscar"),
        pod("tre", users="ernie,elmo"),
    )
    for p in (pod1, pod2, pod3):
        store.add(p)
    expected = {
        "ernie": {"one", "tre"},
        "bert": {"one", "two"},
        "elmo": {"tre"},
        "oscar": {"two"},
        "elmo1": set(),
    }
    for user, pods in expected.items():
        assert names(store.by_index("byUser", user)) == pods, user

    store.delete(pod3)
    assert names(store.by_index("byUser", "ernie")) == {"one"}
    assert store.by_index("byUser", "elmo") == []

    store.update(pod("two", users="oscar"))
    assert names(store.by_index("byUser", "bert")) == {"one"}


def test_index_returns_objects_sharing_any_value_with_the_given_object() -> None:
    store = ThreadSafeStore({"byUser": by_users})
    store.add(pod("one", users="ernie,bert"))
    store.add(pod("two", users="bert,oscar"))
    store.add(pod("tre", users="elmo"))
    assert names(store.index("byUser", pod("probe", users="oscar,ernie"))) == {"one", "two"}


def test_thread_safe_store_delete_removes_empty_sets_from_index() -> None:
    # thread_safe_store_test.go TestThreadSafeStoreDeleteRemovesEmptySetsFromIndex
    store = ThreadSafeStore({"foo": by_foo_label})
    store.add(pod("a", labels={"foo": "bar"}))
    store.delete(pod("a"))
    assert store.list_index_func_values("foo") == []


def test_thread_safe_store_add_keeps_non_empty_set_post_delete_from_index() -> None:
    # thread_safe_store_test.go TestThreadSafeStoreAddKeepsNonEmptySetPostDeleteFromIndex
    store = ThreadSafeStore({"foo": by_foo_label})
    store.add(pod("a", labels={"foo": "bar"}))
    store.add(pod("b", labels={"foo": "bar"}))
    store.delete(pod("a"))
    assert store.index_keys("foo", "bar") == ["b"]


def test_thread_safe_store_indexing_functions_with_multiple_values() -> None:
    # thread_safe_store_test.go TestThreadSafeStoreIndexingFunctionsWithMultipleValues
    store = ThreadSafeStore({"users": by_users})

    def index_state() -> dict[str, list[str]]:
        return {v: store.index_keys("users", v) for v in sorted(store.list_index_func_values("users"))}

    store.add(pod("a", users="x"))
    store.add(pod("b", users="x,y"))
    assert index_state() == {"x": ["a", "b"], "y": ["b"]}
    store.update(pod("b", users="y,z"))
    assert index_state() == {"x": ["a"], "y": ["b"], "z": ["b"]}
    store.update(pod("a", users="z"))
    assert index_state() == {"y": ["b"], "z": ["a", "b"]}
    store.delete(pod("b"))
    assert index_state() == {"z": ["a"]}


def test_indexer_add_indexers_after_items_exist() -> None:
    # index_test.go TestIndexer (AddIndexers on a populated store) — allowed since client-go 1.27.
    store = ThreadSafeStore({NAMESPACE_INDEX: meta_namespace_index_func})
    store.add(pod("a", ns="ns1", labels={"foo": "bar"}))
    store.add(pod("b", ns="ns2", labels={"foo": "bar"}))
    store.add_indexers({"foo": by_foo_label})
    assert store.index_keys("foo", "bar") == ["ns1/a", "ns2/b"]
    assert store.index_keys(NAMESPACE_INDEX, "ns2") == ["ns2/b"]
    store.add(pod("c", ns="ns1", labels={"foo": "baz"}))
    assert store.index_keys("foo", "baz") == ["ns1/c"]
    assert sorted(store.get_indexers()) == ["foo", NAMESPACE_INDEX]


def test_adding_an_indexer_with_an_existing_name_is_rejected() -> None:
    store = ThreadSafeStore({"foo": by_foo_label})
    with pytest.raises(ValueError, match="indexer conflict"):
        store.add_indexers({"foo": by_users})


def test_looking_up_an_unknown_index_fails() -> None:
    store = ThreadSafeStore()
    with pytest.raises(KeyError, match="does not exist"):
        store.by_index("nope", "x")
    with pytest.raises(KeyError, match="does not exist"):
        store.index_keys("nope", "x")
    assert store.list_index_func_values("nope") == []


def test_an_index_function_that_raises_leaves_the_store_unchanged() -> None:
    def picky(obj: dict) -> list[str]:
        if obj["metadata"].get("labels", {}).get("foo") == "boom":
            raise RuntimeError("bad object")
        return by_foo_label(obj)

    store = ThreadSafeStore({"foo": picky})
    store.add(pod("a", rv="1", labels={"foo": "bar"}))
    with pytest.raises(RuntimeError):
        store.update(pod("a", rv="2", labels={"foo": "boom"}))
    assert store.get_by_key("a")["metadata"]["resourceVersion"] == "1"
    assert store.index_keys("foo", "bar") == ["a"]


def test_namespace_index_files_cluster_scoped_objects_under_the_empty_namespace() -> None:
    assert meta_namespace_index_func(pod("node")) == [""]
    assert meta_namespace_index_func(pod("p", ns="ns")) == ["ns"]


def test_readers_run_concurrently_and_a_writer_waits_for_them() -> None:
    store = ThreadSafeStore()
    store.add(pod("a"))
    entered = threading.Barrier(3, timeout=10)
    release = threading.Event()
    written = threading.Event()

    def reader() -> None:
        with store._lock.read():
            entered.wait()  # both readers are inside at once, or this times out
            release.wait(10)

    def writer() -> None:
        store.add(pod("b"))
        written.set()

    readers = [threading.Thread(target=reader, name=f"test/reader-{i}") for i in range(2)]
    for t in readers:
        t.start()
    entered.wait()
    w = threading.Thread(target=writer, name="test/writer")
    w.start()
    wait_until(lambda: store._lock._writers_waiting != 0, timeout=10)  # the writer is parked on the lock
    assert store._lock._writers_waiting == 1
    assert not written.is_set()  # held off while the readers hold the lock
    release.set()
    for t in [*readers, w]:
        t.join(10)
    assert written.is_set()
    assert sorted(store.list_keys()) == ["a", "b"]
