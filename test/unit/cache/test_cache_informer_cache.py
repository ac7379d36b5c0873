"""The informer cache, as controller-runtime's informer_cache_test.go and cache_test.go describe it."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from controller.cache.informer_cache import (
    DEFAULT_SYNC_PERIOD,
    STOP_CHECK_PERIOD,
    ByObject,
    CacheNotStarted,
    LabelSelector,
    informer_name,
)
from controller.client import errors
from controller.client.gvk import GVK
from controller.clock import FakeClock
from controller.informers.mutation_detector import CacheMutationError
from controller.informers.shared_informer import ResourceEventHandlerFuncs

CONFIGMAP = GVK("", "v1", "ConfigMap")
NODE = GVK("", "v1", "Node")
TRAINJOB = GVK("trainer.kubeflow.org", "v1alpha1", "TrainJob")


def cm(name: str, ns: str = "default", labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def names(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


def test_reads_before_start_fail_with_cache_not_started(servers, make_cache) -> None:
    # controller-runtime informer_cache.go Get/List: ErrCacheNotStarted
    cache = make_cache()
    with pytest.raises(CacheNotStarted):
        cache.get(CONFIGMAP, "a", "default")
    with pytest.raises(CacheNotStarted):
        cache.list(CONFIGMAP)


def test_get_and_list_read_the_synced_cache(servers, make_cache) -> None:
    servers[CONFIGMAP].add(cm("a", "one", labels={"app": "x"}))
    servers[CONFIGMAP].add(cm("b", "one", labels={"app": "y"}))
    servers[CONFIGMAP].add(cm("c", "two", labels={"app": "x", "tier": "db"}))
    cache = make_cache()
    cache.get_informer(CONFIGMAP)
    cache.start()
    assert cache.wait_for_cache_sync(timeout=10)
    assert cache.has_synced()

    assert cache.get(CONFIGMAP, "a", "one")["metadata"]["labels"] == {"app": "x"}
    with pytest.raises(errors.NotFound, match='ConfigMap "a" not found'):
        cache.get(CONFIGMAP, "a", "two")
    assert names(cache.list(CONFIGMAP)) == ["a", "b", "c"]
    assert names(cache.list(CONFIGMAP, namespace="one")) == ["a", "b"]
    assert names(cache.list(CONFIGMAP, label_selector="app=x")) == ["a", "c"]
    assert names(cache.list(CONFIGMAP, namespace="two", label_selector={"app": "x"})) == ["c"]
    assert names(cache.list(CONFIGMAP, label_selector="app in (x,y),!tier")) == ["a", "b"]
    assert cache.list(CONFIGMAP, namespace="nowhere") == []


def test_objects_are_shared_not_copied(servers, make_cache) -> None:
    servers[CONFIGMAP].add(cm("a"))
    cache = make_cache()
    cache.start()
    first = cache.get(CONFIGMAP, "a", "default")
    assert cache.get(CONFIGMAP, "a", "default") is first
    assert cache.list(CONFIGMAP)[0] is first


def test_a_first_read_after_start_creates_the_informer_and_blocks_until_it_synced(
    servers, make_cache
) -> None:
    servers[TRAINJOB].add(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "job", "namespace": "ml"},
        }
    )
    cache = make_cache()
    cache.start()
    assert cache.informers() == {}
    assert cache.get(TRAINJOB, "job", "ml")["kind"] == "TrainJob"
    assert list(cache.informers()) == [TRAINJOB]
    assert cache.get_informer(TRAINJOB) is cache.get_informer(TRAINJOB)  # one informer per kind
    threads = {t.name for t in threading.enumerate()}
    assert "informer/trainjob.trainer.kubeflow.org" in threads


def test_cluster_scoped_objects_are_keyed_by_name_even_when_a_namespace_is_given(servers, make_cache) -> None:
    servers[NODE].add(node("n1"))
    cache = make_cache()
    cache.start()
    assert cache.get(NODE, "n1")["metadata"]["name"] == "n1"
    assert cache.get(NODE, "n1", "default")["metadata"]["name"] == "n1"


def test_by_object_selectors_are_sent_to_the_server_and_transforms_apply_per_kind(
    servers, make_cache
) -> None:
    # controller-runtime cache.Options.ByObject: only watch ConfigMaps with a label.
    def keep_only_meta(obj: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": obj["metadata"]}

    by_object = {
        CONFIGMAP: ByObject(
            label_selector="trainer.kubeflow.org/owned=true",
            field_selector="x=y",
            namespace="ml",
            transform=keep_only_meta,
        )
    }
    obj = cm("a", "ml", big="data")
    obj["metadata"]["managedFields"] = [{"manager": "m"}]
    servers[CONFIGMAP].add(obj)
    node_obj = node("n")
    node_obj["metadata"]["managedFields"] = [{"manager": "m"}]
    servers[NODE].add(node_obj)
    cache = make_cache(by_object=by_object)
    cache.start()
    cached = cache.get(CONFIGMAP, "a", "ml")
    assert "data" not in cached
    assert "managedFields" in cached["metadata"]  # the per-kind transform replaced the default
    assert "managedFields" not in cache.get(NODE, "n")["metadata"]  # the default strips them
    assert servers.asked[CONFIGMAP] == {
        "namespace": "ml",
        "label_selector": "trainer.kubeflow.org/owned=true",
        "field_selector": "x=y",
    }
    assert servers.asked[NODE] == {"namespace": None, "label_selector": None, "field_selector": None}


def test_the_cache_follows_changes(servers, make_cache) -> None:
    cache = make_cache()
    informer = cache.get_informer(CONFIGMAP)
    seen = threading.Event()
    informer.add_event_handler(ResourceEventHandlerFuncs(update_func=lambda old, new: seen.set()))
    servers[CONFIGMAP].add(cm("a", k="1"))
    cache.start()
    assert cache.wait_for_cache_sync(timeout=10)
    assert servers[CONFIGMAP].wait_for(lambda: servers[CONFIGMAP].open_watches() == 1)
    servers[CONFIGMAP].modify(cm("a", k="2"))
    assert seen.wait(10)
    assert cache.get(CONFIGMAP, "a", "default")["data"] == {"k": "2"}


def test_wait_for_cache_sync_gives_up_at_its_timeout(servers, make_cache) -> None:
    servers[CONFIGMAP].list_errors.extend(errors.ServerError("down", status=503) for _ in range(1000))
    servers[CONFIGMAP].watch_errors.extend(errors.ServerError("down", status=503) for _ in range(1000))
    cache = make_cache()
    cache.get_informer(CONFIGMAP)
    assert not cache.wait_for_cache_sync(timeout=0)  # not even started
    cache.start()
    assert not cache.wait_for_cache_sync(timeout=0)
    assert not cache.has_synced()


def test_a_stop_event_ends_the_sync_wait_long_before_its_timeout(servers, make_cache) -> None:
    # controller-runtime WaitForCacheSync(ctx): a cancelled context ends the wait.
    servers[CONFIGMAP].list_errors.extend(errors.ServerError("down", status=503) for _ in range(10_000))
    servers[CONFIGMAP].watch_errors.extend(errors.ServerError("down", status=503) for _ in range(10_000))
    clock = FakeClock()
    cache = make_cache(clock=clock)
    cache.get_informer(CONFIGMAP)
    cache.start()
    stop, result = threading.Event(), []
    waiter = threading.Thread(
        target=lambda: result.append(cache.wait_for_cache_sync(timeout=120, stop=stop)), name="test/sync-wait"
    )
    waiter.start()
    try:
        for _ in range(20):  # 20 s of the 120 s pass: still waiting
            clock.step(1.0)
            waiter.join(0.005)
        assert waiter.is_alive()
        stop.set()
        for _ in range(int(STOP_CHECK_PERIOD / 0.05) + 1):
            clock.step(0.05)
            waiter.join(0.005)
        waiter.join(5)
        assert result == [False]
    finally:
        clock.step(200.0)  # should it fail: the timeout ends the wait
        waiter.join(10)
    assert not cache.has_synced()


def test_with_a_stop_event_a_sync_still_ends_the_wait_at_once(servers, make_cache) -> None:
    servers[CONFIGMAP].add(cm("a"))
    cache = make_cache()  # its fake clock never moves: only the informer's sync can end the wait
    cache.get_informer(CONFIGMAP)
    cache.start()
    assert cache.wait_for_cache_sync(timeout=10, stop=threading.Event())


def test_stop_joins_every_informer_and_later_reads_fail(servers, make_cache) -> None:
    cache = make_cache()
    cache.get_informer(CONFIGMAP)
    cache.get_informer(NODE)
    cache.start()
    assert cache.wait_for_cache_sync(timeout=10)
    cache.stop()
    assert not [t for t in threading.enumerate() if t.name.startswith("informer/")]
    with pytest.raises(CacheNotStarted):
        cache.get_informer(TRAINJOB)
    with pytest.raises(RuntimeError, match="already started"):
        cache.start()


def test_a_reader_that_mutates_a_cached_object_fails_the_test(servers, make_cache) -> None:
    servers[CONFIGMAP].add(cm("a"))
    cache = make_cache(mutation_detector=True)
    cache.start()
    cache.get(CONFIGMAP, "a", "default")["data"]["sneaky"] = "edit"
    with pytest.raises(CacheMutationError):
        cache.stop()


def test_informers_resync_near_the_sync_period_but_not_in_lock_step(servers, make_cache) -> None:
    # controller-runtime informers.go calculateResyncPeriod: a factor in [0.9, 1.1).
    cache = make_cache()
    periods = {
        cache.get_informer(gvk).add_event_handler(ResourceEventHandlerFuncs()).resync_period
        for gvk in (CONFIGMAP, NODE, TRAINJOB)
    }
    assert len(periods) == 3
    assert all(0.9 * DEFAULT_SYNC_PERIOD <= p < 1.1 * DEFAULT_SYNC_PERIOD for p in periods)


def test_informer_names() -> None:
    assert informer_name(CONFIGMAP) == "configmap"
    assert informer_name(TRAINJOB) == "trainjob.trainer.kubeflow.org"


# --- label selectors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        pytest.param("", {}, True, id="empty selects everything"),
        pytest.param("a=b", {"a": "b"}, True, id="equality"),
        pytest.param("a==b", {"a": "c"}, False, id="double equals is equality"),
        pytest.param("a!=b", {}, True, id="inequality matches a missing key"),
        pytest.param("a!=b", {"a": "b"}, False, id="inequality"),
        pytest.param("a in (x, y)", {"a": "y"}, True, id="set membership"),
        pytest.param("a in (x,y)", {}, False, id="in requires the key"),
        pytest.param("a notin (x,y)", {}, True, id="notin matches a missing key"),
        pytest.param("a", {"a": ""}, True, id="exists"),
        pytest.param("!a", {"a": "1"}, False, id="does not exist"),
        pytest.param(
            "app.kubernetes.io/name=x,tier",
            {"app.kubernetes.io/name": "x", "tier": "1"},
            True,
            id="prefixed keys and several requirements",
        ),
    ],
)
def test_label_selector_matching(selector: str, labels: dict[str, str], matches: bool) -> None:
    assert LabelSelector.parse(selector).matches(labels) is matches


@pytest.mark.parametrize("selector", ["a=b,", "a in (x", "=b", "a in ()x", "a b"])
def test_malformed_label_selectors_are_rejected(selector: str) -> None:
    with pytest.raises(ValueError):
        LabelSelector.parse(selector)
