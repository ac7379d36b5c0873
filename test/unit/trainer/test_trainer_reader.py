"""`controller.trainer.reader`: the runtime pipeline's Reader over a cache, with live reads where a
label-narrowed cache cannot prove absence. The fakes model only get/list by key and label equality; they do
not model informers, resource versions or staleness."""

from __future__ import annotations

from typing import Any

import pytest

from controller.client.errors import NotFound, ServerError
from controller.client.gvk import GVK
from controller.trainer.reader import AppliedObjects, CacheReader
from runtime.framework import ReadError

CONFIGMAP = GVK("", "v1", "ConfigMap")
JOBSET = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")
PRIORITY_CLASS = GVK("scheduling.k8s.io", "v1", "PriorityClass")


def obj(gvk: GVK, name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": labels}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": gvk.api_version, "kind": gvk.kind, "metadata": metadata}


class FakeStore:
    """Objects by (gvk, namespace, name); counts reads so tests can tell cache reads from live ones."""

    def __init__(self, *objects: dict[str, Any], error: Exception | None = None) -> None:
        self.objects = {
            (GVK.of(o), o["metadata"].get("namespace") or "", o["metadata"]["name"]): o for o in objects
        }
        self.reads = 0
        self.error = error

    def get(self, gvk: GVK, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.reads += 1
        if self.error is not None:
            raise self.error
        try:
            return self.objects[(gvk, namespace or "", name)]
        except KeyError:
            raise NotFound(f"{name} not found", status=404) from None

    def list(self, gvk: GVK, namespace: str | None = None, label_selector: Any = None, **_: Any) -> Any:
        self.reads += 1
        wanted = dict(label_selector or {}) if not isinstance(label_selector, str) else {}
        found = [
            o
            for (g, ns, _n), o in self.objects.items()
            if g == gvk
            and (namespace is None or ns == namespace)
            and all(o["metadata"]["labels"].get(k) == v for k, v in wanted.items())
        ]
        return _Items(found)


class _Items(list):  # type: ignore[type-arg]
    @property
    def items(self) -> list[Any]:
        return list(self)


def test_a_cached_kind_is_read_from_the_cache_and_a_miss_is_absent() -> None:
    cache = FakeStore(obj(JOBSET, "a", "ns"))
    live = FakeStore(obj(JOBSET, "b", "ns"))
    reader = CacheReader(cache, live, cached=[JOBSET])  # type: ignore[arg-type]
    assert reader.get(JOBSET.api_version, "JobSet", "a", "ns") is not None
    assert reader.get(JOBSET.api_version, "JobSet", "b", "ns") is None  # not in the cache: absent
    assert live.reads == 0


def test_a_miss_in_a_label_narrowed_cache_is_confirmed_live() -> None:
    unlabelled = obj(CONFIGMAP, "old-snapshot", "ns")
    cache = FakeStore(obj(CONFIGMAP, "new", "ns", **{"trainer.kubeflow.org/trainjob-name": "x"}))
    live = FakeStore(unlabelled)
    reader = CacheReader(cache, live, cached=[CONFIGMAP], narrowed=[CONFIGMAP])  # type: ignore[arg-type]
    assert reader.get("v1", "ConfigMap", "new", "ns") is not None
    assert live.reads == 0
    assert reader.get("v1", "ConfigMap", "old-snapshot", "ns") is unlabelled
    assert reader.get("v1", "ConfigMap", "missing", "ns") is None
    assert live.reads == 2


def test_a_reader_trusting_misses_answers_from_the_cache_alone() -> None:
    live = FakeStore(obj(CONFIGMAP, "old-snapshot", "ns"))
    reader = CacheReader(FakeStore(), live, cached=[CONFIGMAP], narrowed=[CONFIGMAP])  # type: ignore[arg-type]
    trusting = reader.trusting_misses()
    assert trusting.get("v1", "ConfigMap", "old-snapshot", "ns") is None
    assert live.reads == 0
    assert reader.get("v1", "ConfigMap", "old-snapshot", "ns") is not None  # the original still confirms


def test_an_uncached_kind_is_read_live() -> None:
    live = FakeStore(obj(PRIORITY_CLASS, "high"))
    reader = CacheReader(FakeStore(), live, cached=[JOBSET])  # type: ignore[arg-type]
    assert reader.get("scheduling.k8s.io/v1", "PriorityClass", "high") is not None
    assert reader.get("scheduling.k8s.io/v1", "PriorityClass", "low") is None


def test_failures_other_than_absence_are_read_errors_with_the_cause() -> None:
    failing = FakeStore(error=ServerError("etcd is down", status=500))
    reader = CacheReader(FakeStore(), failing, cached=[])  # type: ignore[arg-type]
    with pytest.raises(ReadError, match="etcd is down") as caught:
        reader.get("v1", "ConfigMap", "x", "ns")
    assert isinstance(caught.value.__cause__, ServerError)


def test_list_filters_by_labels_and_sorts_by_namespace_and_name() -> None:
    cache = FakeStore(
        obj(JOBSET, "b", "ns2", team="a"),
        obj(JOBSET, "a", "ns2", team="a"),
        obj(JOBSET, "z", "ns1", team="a"),
        obj(JOBSET, "y", "ns1", team="b"),
    )
    reader = CacheReader(cache, FakeStore(), cached=[JOBSET])  # type: ignore[arg-type]
    found = reader.list(JOBSET.api_version, "JobSet", None, {"team": "a"})
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in found] == [
        ("ns1", "z"),
        ("ns2", "a"),
        ("ns2", "b"),
    ]


def test_applied_objects_answer_before_the_cache_has_seen_them() -> None:
    reader = CacheReader(FakeStore(), FakeStore(), cached=[JOBSET])  # type: ignore[arg-type]
    overlay = AppliedObjects(reader)
    assert overlay.get(JOBSET.api_version, "JobSet", "a", "ns") is None
    applied = obj(JOBSET, "a", "ns")
    overlay.record(applied)
    assert overlay.get(JOBSET.api_version, "JobSet", "a", "ns") is applied
    assert overlay.get(JOBSET.api_version, "JobSet", "a", "other") is None
