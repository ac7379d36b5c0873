"""The CoScheduling plugin: gang scheduling with the scheduler-plugins `PodGroup` (`scheduling.x-k8s.io`).

Go origin: kubeflow/trainer `pkg/runtime/framework/plugins/coscheduling/coscheduling.go`
(`EnforcePodGroupPolicy`, `Build`, `ReconcilerBuilders`, `PodGroupRuntimeClassHandler`,
`PodGroupLimitRangeHandler`) and the runtime-class indexers of `pkg/runtime/indexer`.

Active when the runtime's `podGroupPolicy.coscheduling` is set.

EnforcePodGroupPolicy: every pod gets the label `scheduling.x-k8s.io/pod-group: <trainjob>`.

ComponentBuilder: the PodGroup `<trainjob>` (`scheduling.x-k8s.io/v1alpha1`) with `minMember` = the pods of
all replicated jobs (initializers and launcher included), `minResources` = the sum over PodSets of one
pod's requests times its count (`pod_group_totals`; requests only, limits never count: upstream Q5), and
`scheduleTimeoutSeconds` (default 60). It is built only while the TrainJob is suspended or the PodGroup
does not exist yet: a running gang is never resized under the scheduler's feet.

WatchExtension (also used by the Volcano plugin, with its own PodGroup kind):
- PodGroups controlled by a TrainJob (optional: skipped when the PodGroup CRD is not served);
- LimitRanges: a change can alter the requests of pods not created yet, so every *suspended* TrainJob in
  the LimitRange's namespace is reconciled (`suspended_trainjobs_in_namespace`);
- RuntimeClasses: their pod overhead counts in `minResources`, so suspended TrainJobs whose runtime's pod
  templates use that `runtimeClassName` are reconciled (`suspended_trainjobs_using_runtime_class`).
The two mapping functions are module-level, so both plugins declare equal `Watch` values and a controller
can register each watch once.

Deliberately missing: a `schedulerName` on the pods. Upstream sets none either: the pods go to the default
scheduler, which must be a scheduler-plugins build with the coscheduling plugin enabled.

Deliberately different from upstream: without the PodGroup CRD upstream registers none of the three
watches; here only the PodGroup watch is skipped (the other two then enqueue suspended TrainJobs that have
no PodGroup, which is harmless). The RuntimeClass mapping matches a TrainingRuntime's TrainJobs in the
runtime's own namespace (upstream lists same-named references in every namespace) and removes duplicates
by key (upstream compacts adjacent names only).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView
from runtime.framework import (
    ComponentBuilder,
    EnforcePodGroupPolicy,
    PluginContext,
    Reader,
    TrainJobKey,
    Watch,
    WatchExtension,
)
from runtime.info import Info, owner_reference
from runtime.resources import ResourceList, add_resource_lists, format_resource_list

__all__ = [
    "POD_GROUP_API_VERSION",
    "POD_GROUP_LABEL",
    "CoScheduling",
    "existing_pod_group_blocks_build",
    "pod_group_metadata",
    "pod_group_totals",
    "pod_group_watches",
    "runtime_class_names",
    "suspended_trainjobs_in_namespace",
    "suspended_trainjobs_using_runtime_class",
]

NAME = "CoScheduling"
POD_GROUP_API_VERSION = "scheduling.x-k8s.io/v1alpha1"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
"""The pod label that puts a pod in a scheduler-plugins PodGroup (Go `PodGroupLabel`)."""


def _map(value: object) -> dict[str, Any]:
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def pod_group_totals(info: Info) -> tuple[int, ResourceList]:
    """(pods, summed requests) over all PodSets: the gang's `minMember` and `minResources`."""
    members = 0
    resources: ResourceList = {}
    for pod_set in info.pod_sets:
        count = pod_set.count
        members += count
        add_resource_lists(resources, {name: q * count for name, q in pod_set.single_pod_requests.items()})
    return members, resources


def existing_pod_group_blocks_build(reader: Reader, api_version: str, trainjob: TrainJob) -> bool:
    """True when the PodGroup exists and the TrainJob runs: then it must not be re-applied."""
    view = TrainJobView(trainjob)
    existing = reader.get(api_version, constants.POD_GROUP_KIND, view.name, view.namespace)
    return existing is not None and not view.suspend


def pod_group_metadata(trainjob: TrainJob) -> dict[str, Any]:
    """A PodGroup's metadata: named like the TrainJob, in its namespace, controlled by it."""
    view = TrainJobView(trainjob)
    return {"name": view.name, "namespace": view.namespace, "ownerReferences": [owner_reference(trainjob)]}


# Watch mapping functions (shared with the Volcano plugin) -------------------------------------------------


def _suspended_keys(trainjobs: Iterable[Mapping[str, Any]]) -> list[TrainJobKey]:
    keys = {
        (view.namespace, view.name) for view in map(TrainJobView, trainjobs) if view.suspend and view.name
    }
    return sorted(keys)


def suspended_trainjobs_in_namespace(obj: Mapping[str, Any], reader: Reader) -> list[TrainJobKey]:
    """The suspended TrainJobs in the namespace of `obj` (a LimitRange)."""
    namespace = str(_map(obj.get("metadata")).get("namespace") or "")
    return _suspended_keys(reader.list(constants.API_VERSION, constants.TRAINJOB_KIND, namespace))


def runtime_class_names(runtime: Mapping[str, Any]) -> set[str]:
    """The `runtimeClassName`s of a runtime's pod templates (Go: the runtime-class field indexers)."""
    jobs = _list(_map(_map(_map(runtime.get("spec")).get("template")).get("spec")).get("replicatedJobs"))
    names = set()
    for job in jobs:
        pod_spec = _map(_map(_map(_map(job).get("template")).get("spec")).get("template")).get("spec")
        name = _map(pod_spec).get("runtimeClassName")
        if isinstance(name, str):
            names.add(name)
    return names


def suspended_trainjobs_using_runtime_class(obj: Mapping[str, Any], reader: Reader) -> list[TrainJobKey]:
    """The suspended TrainJobs whose runtime's pod templates name this RuntimeClass."""
    runtime_class = str(_map(obj.get("metadata")).get("name") or "")
    namespaced = {
        (str(_map(r.get("metadata")).get("namespace") or ""), str(_map(r.get("metadata")).get("name") or ""))
        for r in reader.list(constants.API_VERSION, constants.TRAINING_RUNTIME_KIND)
        if runtime_class in runtime_class_names(r)
    }
    cluster = {
        str(_map(r.get("metadata")).get("name") or "")
        for r in reader.list(constants.API_VERSION, constants.CLUSTER_TRAINING_RUNTIME_KIND)
        if runtime_class in runtime_class_names(r)
    }
    if not namespaced and not cluster:
        return []
    matching = []
    for trainjob in reader.list(constants.API_VERSION, constants.TRAINJOB_KIND):
        view = TrainJobView(trainjob)
        if view.runtime_ref_api_group != constants.GROUP:
            continue
        kind, name = view.runtime_ref_kind, view.runtime_ref_name
        if (kind == constants.TRAINING_RUNTIME_KIND and (view.namespace, name) in namespaced) or (
            kind == constants.CLUSTER_TRAINING_RUNTIME_KIND and name in cluster
        ):
            matching.append(trainjob)
    return _suspended_keys(matching)


def pod_group_watches(pod_group_api_version: str) -> list[Watch]:
    """The watches of a PodGroup plugin: its owned PodGroups, LimitRanges and RuntimeClasses."""
    return [
        Watch.owned(pod_group_api_version, constants.POD_GROUP_KIND, optional=True),
        Watch(api_version="v1", kind="LimitRange", map_to_trainjobs=suspended_trainjobs_in_namespace),
        Watch(
            api_version="node.k8s.io/v1",
            kind="RuntimeClass",
            map_to_trainjobs=suspended_trainjobs_using_runtime_class,
        ),
    ]


# The plugin ----------------------------------------------------------------------------------------------


class CoScheduling(EnforcePodGroupPolicy, WatchExtension, ComponentBuilder):
    """Gang scheduling through the scheduler-plugins coscheduling plugin."""

    name = NAME

    def __init__(self, context: PluginContext | None = None) -> None:
        del context  # no settings

    @staticmethod
    def _policy(info: Info) -> dict[str, Any] | None:
        source = _map(info.pod_group_policy).get("coscheduling")
        return cast(dict[str, Any], source) if isinstance(source, dict) else None

    def enforce_pod_group_policy(self, info: Info, trainjob: TrainJob) -> None:
        if self._policy(info) is None:
            return
        info.scheduler.pod_labels[POD_GROUP_LABEL] = TrainJobView(trainjob).name

    def watches(self) -> Sequence[Watch]:
        return pod_group_watches(POD_GROUP_API_VERSION)

    def build(self, info: Info, trainjob: TrainJob, reader: Reader) -> list[dict[str, Any]]:
        policy = self._policy(info)
        if policy is None or existing_pod_group_blocks_build(reader, POD_GROUP_API_VERSION, trainjob):
            return []
        members, resources = pod_group_totals(info)
        timeout = policy.get("scheduleTimeoutSeconds")
        return [
            {
                "apiVersion": POD_GROUP_API_VERSION,
                "kind": constants.POD_GROUP_KIND,
                "metadata": pod_group_metadata(trainjob),
                "spec": {
                    "minMember": members,
                    "minResources": format_resource_list(resources),
                    "scheduleTimeoutSeconds": (
                        constants.DEFAULT_SCHEDULE_TIMEOUT_SECONDS if timeout is None else int(timeout)
                    ),
                },
            }
        ]
