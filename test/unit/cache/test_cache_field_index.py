"""Field indexes: controller-runtime informer_cache.go ``indexByField``, cache_reader.go ``byIndexes``."""

from __future__ import annotations

from typing import Any

import pytest

from controller.client.gvk import GVK
from controller.indexers import (
    ALL_NAMESPACES,
    field_index_name,
    index_field,
    key_to_namespaced_key,
    namespaced_index_func,
)

POD = GVK("", "v1", "Pod")
PV = GVK("", "v1", "PersistentVolume")


def pod(name: str, ns: str, node: str = "", *owners: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owners:
        meta["ownerReferences"] = [{"kind": "JobSet", "name": o} for o in owners]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"nodeName": node}}


def by_node(obj: dict[str, Any]) -> list[str]:
    node = obj["spec"].get("nodeName")
    return [node] if node else []


def by_owner(obj: dict[str, Any]) -> list[str]:
    return [ref["name"] for ref in obj["metadata"].get("ownerReferences", [])]


def names(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in objs)


def test_index_names_and_keys_are_controller_runtimes() -> None:
    assert field_index_name("spec.nodeName") == "field:spec.nodeName"
    assert key_to_namespaced_key("ns", "v") == "ns/v"
    assert key_to_namespaced_key(None, "v") == "__all_namespaces/v"
    assert key_to_namespaced_key("", "v") == f"{ALL_NAMESPACES}/v"


def test_a_namespaced_object_is_filed_under_its_namespace_and_all_namespaces() -> None:
    # indexByField: namespaced variants first, then the __all_namespaces ones.
    fn = namespaced_index_func(by_owner)
    assert fn(pod("p", "ns1", "", "js-a", "js-b")) == [
        "ns1/js-a",
        "ns1/js-b",
        "__all_namespaces/js-a",
        "__all_namespaces/js-b",
    ]


def test_a_cluster_scoped_object_is_filed_under_all_namespaces_only() -> None:
    fn = namespaced_index_func(lambda o: [o["spec"]["claimRef"]])
    assert fn({"metadata": {"name": "pv1"}, "spec": {"claimRef": "data"}}) == ["__all_namespaces/data"]


def test_lookups_by_field_in_one_namespace_or_all(servers, make_cache) -> None:
    for p in (
        pod("a", "ns1", "node-1"),
        pod("b", "ns1", "node-2"),
        pod("c", "ns2", "node-1"),
        pod("d", "ns2"),
    ):
        servers[POD].add(p)
    cache = make_cache()
    index_field(cache, POD, "spec.nodeName", by_node)  # before start, as controllers register
    cache.start()

    assert names(cache.list(POD, namespace="ns1", index=("spec.nodeName", "node-1"))) == ["ns1/a"]
    assert names(cache.list(POD, index=("spec.nodeName", "node-1"))) == ["ns1/a", "ns2/c"]
    assert cache.list(POD, index=("spec.nodeName", "node")) == []  # exact matches only
    # The Reader seam: by_index is the same lookup (client.MatchingFields, optionally InNamespace).
    assert names(cache.by_index(POD, "spec.nodeName", "node-1")) == ["ns1/a", "ns2/c"]
    assert names(cache.by_index(POD, "spec.nodeName", "node-1", namespace="ns1")) == ["ns1/a"]
    store = cache.get_informer(POD).get_store()
    assert sorted(store.list_index_func_values("field:spec.nodeName")) == [
        "__all_namespaces/node-1",
        "__all_namespaces/node-2",
        "ns1/node-1",
        "ns1/node-2",
        "ns2/node-1",
    ]


def test_an_index_added_after_start_covers_the_objects_already_cached(servers, make_cache) -> None:
    servers[POD].add(pod("a", "ns1", "", "js-1"))
    cache = make_cache()
    cache.start()
    assert cache.wait_for_cache_sync(10) or cache.get_informer(POD).has_synced()
    index_field(cache, POD, "owner", by_owner)
    assert names(cache.list(POD, index=("owner", "js-1"))) == ["ns1/a"]


def test_cluster_scoped_lookups_use_all_namespaces(servers, make_cache) -> None:
    servers[PV].add(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv1"},
            "spec": {"claimRef": "data"},
        }
    )
    cache = make_cache(is_namespaced=lambda gvk: gvk != PV)
    index_field(cache, PV, "claim", lambda o: [o["spec"]["claimRef"]])
    cache.start()
    assert names(cache.list(PV, index=("claim", "data"))) == ["/pv1"]


def test_label_selectors_narrow_an_index_lookup(servers, make_cache) -> None:
    a, b = pod("a", "ns1", "n1"), pod("b", "ns1", "n1")
    a["metadata"]["labels"] = {"role": "worker"}
    servers[POD].add(a)
    servers[POD].add(b)
    cache = make_cache()
    index_field(cache, POD, "spec.nodeName", by_node)
    cache.start()
    assert names(cache.list(POD, index=("spec.nodeName", "n1"), label_selector="role=worker")) == ["ns1/a"]


def test_a_lookup_on_an_unregistered_index_says_how_to_register_it(servers, make_cache) -> None:
    cache = make_cache()
    cache.start()
    with pytest.raises(ValueError, match="index_field"):
        cache.list(POD, index=("spec.nodeName", "n1"))


def test_registering_the_same_field_twice_is_rejected(make_cache) -> None:
    cache = make_cache()
    index_field(cache, POD, "spec.nodeName", by_node)
    with pytest.raises(ValueError, match="conflict"):
        index_field(cache, POD, "spec.nodeName", by_node)
