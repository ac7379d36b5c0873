"""Kinds, resources and discovery: GVK parsing, URL paths, the built-in table and the lazy RESTMapper."""

from __future__ import annotations

from typing import Any

import pytest

from controller.client import errors
from controller.client.gvk import BUILTIN_RESOURCES, GVK, Resource
from controller.client.restmapper import RESTMapper, parse_api_groups, parse_api_resource_list

POD = Resource(group="", version="v1", plural="pods", namespaced=True, kind="Pod")
JOB = Resource(group="batch", version="v1", plural="jobs", namespaced=True, kind="Job")
NODE = Resource(group="", version="v1", plural="nodes", namespaced=False, kind="Node")


@pytest.mark.parametrize(
    ("api_version", "group", "version"),
    [
        ("v1", "", "v1"),
        ("batch/v1", "batch", "v1"),
        ("trainer.kubeflow.org/v1alpha1", "trainer.kubeflow.org", "v1alpha1"),
    ],
)
def test_an_api_version_splits_into_group_and_version(api_version: str, group: str, version: str) -> None:
    gvk = GVK.from_api_version(api_version, "Thing")
    assert (gvk.group, gvk.version, gvk.kind) == (group, version, "Thing")
    assert gvk.api_version == api_version


@pytest.mark.parametrize("bad", ["", "/v1", "batch/", "a/b/c/"])
def test_a_malformed_api_version_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="apiVersion"):
        GVK.from_api_version(bad, "Thing")


def test_a_gvk_is_read_from_an_object_and_is_hashable() -> None:
    gvk = GVK.of({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {}})
    assert gvk == GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")
    assert {gvk: 1}[GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")] == 1
    assert str(gvk) == "jobset.x-k8s.io/v1alpha2, Kind=JobSet"
    with pytest.raises(ValueError, match="apiVersion/kind"):
        GVK.of({"kind": "Pod"})


@pytest.mark.parametrize(
    ("resource", "args", "path"),
    [
        (POD, (), "/api/v1/pods"),
        (POD, ("ns",), "/api/v1/namespaces/ns/pods"),
        (POD, ("ns", "p"), "/api/v1/namespaces/ns/pods/p"),
        (POD, ("ns", "p", "status"), "/api/v1/namespaces/ns/pods/p/status"),
        (JOB, ("ns", "j"), "/apis/batch/v1/namespaces/ns/jobs/j"),
        (NODE, (None, "n1"), "/api/v1/nodes/n1"),
        (NODE, ("ignored", "n1"), "/api/v1/nodes/n1"),  # cluster-scoped: the namespace is ignored
        (POD, ("ns", "a:b/c"), "/api/v1/namespaces/ns/pods/a%3Ab%2Fc"),  # names are escaped
    ],
    ids=[
        "all namespaces",
        "collection",
        "object",
        "subresource",
        "group",
        "cluster",
        "cluster+ns",
        "escaped",
    ],
)
def test_resource_paths(resource: Resource, args: tuple[Any, ...], path: str) -> None:
    assert resource.path(*args) == path


def test_a_subresource_needs_a_name_and_a_name_must_not_be_empty() -> None:
    with pytest.raises(ValueError, match="subresource"):
        POD.path("ns", None, "status")
    with pytest.raises(ValueError, match="empty"):
        POD.path("ns", "")


@pytest.mark.parametrize(
    ("api_version", "kind", "plural", "namespaced"),
    [
        ("v1", "Pod", "pods", True),
        ("v1", "ConfigMap", "configmaps", True),
        ("v1", "Secret", "secrets", True),
        ("v1", "Namespace", "namespaces", False),
        ("v1", "Event", "events", True),
        ("events.k8s.io/v1", "Event", "events", True),
        ("coordination.k8s.io/v1", "Lease", "leases", True),
        ("v1", "ServiceAccount", "serviceaccounts", True),
        ("v1", "Node", "nodes", False),
        ("v1", "Service", "services", True),
        ("v1", "LimitRange", "limitranges", True),
        ("node.k8s.io/v1", "RuntimeClass", "runtimeclasses", False),
        ("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False),
        ("batch/v1", "Job", "jobs", True),
        ("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", True),
        ("scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroups", True),
        ("scheduling.volcano.sh/v1beta1", "PodGroup", "podgroups", True),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", False),
        ("trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs", True),
        ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime", "trainingruntimes", True),
        ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "clustertrainingruntimes", False),
    ],
)
def test_built_in_kinds_resolve_without_a_round_trip(
    api_version: str, kind: str, plural: str, namespaced: bool
) -> None:
    mapper = RESTMapper(_Documents({}))
    resource = mapper.resource_for(GVK.from_api_version(api_version, kind))
    assert (resource.plural, resource.namespaced, resource.api_version) == (plural, namespaced, api_version)
    assert len({r.gvk for r in BUILTIN_RESOURCES}) == len(BUILTIN_RESOURCES)


WIDGETS_V1 = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": "example.com/v1",
    "resources": [
        {"name": "widgets", "singularName": "widget", "namespaced": True, "kind": "Widget", "verbs": ["get"]},
        {
            "name": "widgets/status",
            "singularName": "",
            "namespaced": True,
            "kind": "Widget",
            "verbs": ["get"],
        },
        {
            "name": "gadgets",
            "singularName": "gadget",
            "namespaced": False,
            "kind": "Gadget",
            "verbs": ["get"],
        },
        {
            "name": "widgets/scale",
            "namespaced": True,
            "kind": "Scale",
            "group": "autoscaling",
            "version": "v1",
        },
    ],
}

APIS = {
    "kind": "APIGroupList",
    "groups": [
        {
            "name": "example.com",
            "versions": [{"groupVersion": "example.com/v1", "version": "v1"},
                         {"groupVersion": "example.com/v2", "version": "v2"}],
            "preferredVersion": {"groupVersion": "example.com/v2", "version": "v2"},
        },
        {"name": "batch", "versions": [{"groupVersion": "batch/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "batch/v1", "version": "v1"}},
    ],
}  # fmt: skip
API = {"kind": "APIVersions", "versions": ["v1"]}


def test_an_api_resource_list_maps_kinds_and_skips_subresources() -> None:
    resources = parse_api_resource_list(WIDGETS_V1)
    assert resources == {
        "Widget": Resource(
            group="example.com", version="v1", plural="widgets", namespaced=True, kind="Widget"
        ),
        "Gadget": Resource(
            group="example.com", version="v1", plural="gadgets", namespaced=False, kind="Gadget"
        ),
    }


def test_the_group_list_puts_the_preferred_version_first() -> None:
    assert parse_api_groups(API, APIS) == {"": ["v1"], "example.com": ["v2", "v1"], "batch": ["v1"]}


class _Documents:
    """A discovery reader serving a dict of path → document; a missing path is the API server's 404.

    It does not model aggregated discovery (``application/json;g=apidiscovery.k8s.io``) or partial group
    failures (503 for one group-version), which the mapper does not use.
    """

    def __init__(self, docs: dict[str, Any]) -> None:
        self.docs = docs

    def get_raw(self, path: str) -> Any:
        if path not in self.docs:
            raise errors.NotFound(f"{path} not found", status=404, reason="NotFound")
        return self.docs[path]


def test_a_custom_kind_is_found_in_its_group_version() -> None:
    mapper = RESTMapper(_Documents({"/apis/example.com/v1": WIDGETS_V1}))
    widget = mapper.resource_for(GVK("example.com", "v1", "Widget"))
    assert widget.path("ns", "w") == "/apis/example.com/v1/namespaces/ns/widgets/w"
    assert mapper.resource_for(GVK("example.com", "v1", "Gadget")).namespaced is False


def test_a_kind_missing_from_a_cached_list_is_looked_up_again() -> None:
    # A CRD installed after the first lookup must be found without restarting (controller-runtime's lazy
    # mapper re-reads the group-version on a miss).
    docs = _Documents({"/apis/example.com/v1": {"groupVersion": "example.com/v1", "resources": []}})
    mapper = RESTMapper(docs)
    with pytest.raises(errors.NoKindMatch):
        mapper.resource_for(GVK("example.com", "v1", "Widget"))
    docs.docs["/apis/example.com/v1"] = WIDGETS_V1
    assert mapper.resource_for(GVK("example.com", "v1", "Widget")).plural == "widgets"


def test_a_removed_group_version_stops_resolving_after_a_miss() -> None:
    docs = _Documents({"/apis/example.com/v1": WIDGETS_V1})
    mapper = RESTMapper(docs)
    assert mapper.resource_for(GVK("example.com", "v1", "Widget")).plural == "widgets"
    del docs.docs["/apis/example.com/v1"]
    with pytest.raises(errors.NoKindMatch, match="Nothing"):
        mapper.resource_for(GVK("example.com", "v1", "Nothing"))


def test_an_unknown_group_version_is_no_kind_match() -> None:
    mapper = RESTMapper(_Documents({}))
    with pytest.raises(errors.NoKindMatch) as info:
        mapper.resource_for(GVK("nowhere.example.com", "v1", "Ghost"))
    assert isinstance(info.value.__cause__, errors.NotFound)


def test_an_empty_version_means_the_groups_preferred_version() -> None:
    v2 = {**WIDGETS_V1, "groupVersion": "example.com/v2"}
    mapper = RESTMapper(_Documents({"/api": API, "/apis": APIS, "/apis/example.com/v2": v2}))
    assert mapper.resource_for(GVK("example.com", "", "Widget")).version == "v2"
    assert mapper.preferred_version("") == "v1"
    with pytest.raises(errors.NoKindMatch):
        mapper.preferred_version("nowhere.example.com")


def test_invalidate_forgets_discovered_kinds_but_keeps_built_ins() -> None:
    docs = _Documents({"/apis/example.com/v1": WIDGETS_V1})
    mapper = RESTMapper(docs)
    mapper.resource_for(GVK("example.com", "v1", "Widget"))
    assert "example.com/v1" in repr(mapper)
    mapper.invalidate()
    docs.docs.clear()
    assert "example.com/v1" not in repr(mapper)
    assert mapper.resource_for(GVK("", "v1", "Pod")) == POD
    with pytest.raises(errors.NoKindMatch):
        mapper.resource_for(GVK("example.com", "v1", "Widget"))


def test_a_built_in_crd_kind_is_served_only_when_discovery_lists_it() -> None:
    # PodGroups resolve without a round trip (they are built in), but their CRD may not be installed: the
    # Trainer skips the PodGroup watches then, as upstream does when the CRD is not discoverable.
    pod_group = GVK("scheduling.x-k8s.io", "v1alpha1", "PodGroup")
    podgroups = {
        "groupVersion": "scheduling.x-k8s.io/v1alpha1",
        "resources": [{"name": "podgroups", "kind": "PodGroup", "namespaced": True, "verbs": ["get"]}],
    }
    docs = _Documents({})
    mapper = RESTMapper(docs)
    assert mapper.resource_for(pod_group).plural == "podgroups"
    assert mapper.is_served(pod_group) is False
    docs.docs["/apis/scheduling.x-k8s.io/v1alpha1"] = podgroups
    assert mapper.is_served(pod_group) is True
