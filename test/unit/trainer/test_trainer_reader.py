"""`controller.trainer.reader`: the runtime pipeline's Reader over a cache, with live reads where a
label-narrowed cache cannot prove absence. The fakes model only get/list by key and label equality; they do
not model informers, resource versions or staleness."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from controller.client.errors import NotFound, ServerError
from controller.client.gvk import GVK
from controller.client.object import ListResult
from controller.serving.webhook.admission import AdmissionRequest
from controller.trainer.kinds import CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME
from controller.trainer.reader import CacheReader
from controller.trainer.setup import new_registry
from controller.trainer.webhooks import RUNTIME_KINDS, TrainJobValidator
from runtime.api import constants
from runtime.framework import ReadError
from runtime.testing import Make

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

    def _list(self, gvk: GVK, namespace: str | None, wanted: Mapping[str, str]) -> list[dict[str, Any]]:
        self.reads += 1
        return [
            o
            for (g, ns, _n), o in self.objects.items()
            if g == gvk
            and (namespace is None or ns == namespace)
            and all(o["metadata"]["labels"].get(k) == v for k, v in wanted.items())
        ]


class FakeCache(FakeStore):
    """A `FakeStore` that lists as an informer cache does (a `CachedReader`)."""

    def list(
        self, gvk: GVK, namespace: str | None = None, *, label_selector: Mapping[str, str] | None = None
    ) -> list[dict[str, Any]]:
        return self._list(gvk, namespace, label_selector or {})


class FakeAPI(FakeStore):
    """A `FakeStore` that lists as the API server does (an `APIReader`; the selector is ignored)."""

    def list(
        self, gvk: GVK, namespace: str | None = None, *, label_selector: str | None = None
    ) -> ListResult:
        return ListResult(items=self._list(gvk, namespace, {}), resource_version="1")


def test_a_cached_kind_is_read_from_the_cache_and_a_miss_is_absent() -> None:
    cache = FakeCache(obj(JOBSET, "a", "ns"))
    live = FakeAPI(obj(JOBSET, "b", "ns"))
    reader = CacheReader(cache, live, cached=[JOBSET])
    assert reader.get(JOBSET.api_version, "JobSet", "a", "ns") is not None
    assert reader.get(JOBSET.api_version, "JobSet", "b", "ns") is None  # not in the cache: absent
    assert live.reads == 0


def test_a_miss_in_a_label_narrowed_cache_is_confirmed_live() -> None:
    unlabelled = obj(CONFIGMAP, "old-snapshot", "ns")
    cache = FakeCache(obj(CONFIGMAP, "new", "ns", **{"trainer.kubeflow.org/trainjob-name": "x"}))
    live = FakeAPI(unlabelled)
    reader = CacheReader(cache, live, cached=[CONFIGMAP], narrowed=[CONFIGMAP])
    assert reader.get("v1", "ConfigMap", "new", "ns") is not None
    assert live.reads == 0
    assert reader.get("v1", "ConfigMap", "old-snapshot", "ns") is unlabelled
    assert reader.get("v1", "ConfigMap", "missing", "ns") is None
    assert live.reads == 2


def test_a_reader_trusting_misses_answers_from_the_cache_alone_for_the_owners_objects() -> None:
    live = FakeAPI(obj(CONFIGMAP, "old-snapshot", "ns"))
    reader = CacheReader(FakeCache(), live, cached=[CONFIGMAP], narrowed=[CONFIGMAP])
    trusting = reader.trusting_misses("ns", "old")
    assert trusting.get("v1", "ConfigMap", "old-snapshot", "ns") is None
    assert live.reads == 0
    assert reader.get("v1", "ConfigMap", "old-snapshot", "ns") is not None  # the original still confirms


def test_a_reader_trusting_misses_still_confirms_objects_the_owner_does_not_own() -> None:
    # The status server's CA Secret: a Secret (cached only when labelled) that no TrainJob owns.
    ca = obj(CONFIGMAP, "trainer-webhook-cert", "operator")
    other = obj(CONFIGMAP, "older-snapshot", "ns")
    same_name_elsewhere = obj(CONFIGMAP, "old-snapshot", "other-ns")
    live = FakeAPI(ca, other, same_name_elsewhere)
    trusting = CacheReader(FakeCache(), live, cached=[CONFIGMAP], narrowed=[CONFIGMAP]).trusting_misses(
        "ns", "old"
    )
    assert trusting.get("v1", "ConfigMap", "trainer-webhook-cert", "operator") is ca
    assert trusting.get("v1", "ConfigMap", "older-snapshot", "ns") is other  # `old` owns `old-...` only
    assert trusting.get("v1", "ConfigMap", "old-snapshot", "other-ns") is same_name_elsewhere
    assert live.reads == 3


def test_an_uncached_kind_is_read_live() -> None:
    live = FakeAPI(obj(PRIORITY_CLASS, "high"))
    reader = CacheReader(FakeCache(), live, cached=[JOBSET])
    assert reader.get("scheduling.k8s.io/v1", "PriorityClass", "high") is not None
    assert reader.get("scheduling.k8s.io/v1", "PriorityClass", "low") is None


def test_failures_other_than_absence_are_read_errors_with_the_cause() -> None:
    failing = FakeAPI(error=ServerError("etcd is down", status=500))
    reader = CacheReader(FakeCache(), failing, cached=[])
    with pytest.raises(ReadError, match="etcd is down") as caught:
        reader.get("v1", "ConfigMap", "x", "ns")
    assert isinstance(caught.value.__cause__, ServerError)


def test_list_filters_by_labels_and_sorts_by_namespace_and_name() -> None:
    cache = FakeCache(
        obj(JOBSET, "b", "ns2", team="a"),
        obj(JOBSET, "a", "ns2", team="a"),
        obj(JOBSET, "z", "ns1", team="a"),
        obj(JOBSET, "y", "ns1", team="b"),
    )
    reader = CacheReader(cache, FakeAPI(), cached=[JOBSET])
    found = reader.list(JOBSET.api_version, "JobSet", None, {"team": "a"})
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in found] == [
        ("ns1", "z"),
        ("ns2", "a"),
        ("ns2", "b"),
    ]


def test_the_webhook_admits_a_trainjob_whose_runtime_the_cache_does_not_hold_yet() -> None:
    # `kubectl apply -f` of a runtime and a TrainJob on it: the TrainJob is admitted before the runtime's
    # informer has seen the runtime. The webhook's reader confirms that miss with one live read.
    make = Make(runtime_kind=constants.CLUSTER_TRAINING_RUNTIME_KIND)
    runtime = make.runtime(
        make.runtime_spec(*make.default_jobs()), kind=constants.CLUSTER_TRAINING_RUNTIME_KIND
    )
    trainjob = make.trainjob("just-after-its-runtime")
    live = FakeAPI(runtime)
    cached = [TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME, JOBSET]
    validator = TrainJobValidator(
        new_registry(), CacheReader(FakeCache(), live, cached=cached).confirming_misses(RUNTIME_KINDS)
    )
    request = AdmissionRequest(uid="u", operation="CREATE", object=trainjob, old_object=None)
    assert validator.handle(request).allowed
    assert live.reads == 1
    # Without the confirmation the cache's miss is final: the TrainJob would be refused.
    refused = TrainJobValidator(new_registry(), CacheReader(FakeCache(), live, cached=cached))
    assert not refused.handle(request).allowed
