"""What the gang-scheduling plugins share: PodGroup sizing, the build gate, the watches, a common base class.

Go origin: kubeflow/trainer `pkg/runtime/framework/plugins/coscheduling/coscheduling.go` (`Build`'s sums,
`ReconcilerBuilders`, `PodGroupRuntimeClassHandler`, `PodGroupLimitRangeHandler`), the same parts of
`plugins/volcano/volcano.go`, which repeats them for Volcano's PodGroup, and the runtime-class indexers of
`pkg/runtime/indexer`. Not a plugin: `runtime.plugins.coscheduling` and `runtime.plugins.volcano` are.

`PodGroupPlugin` is the part both plugins run the same way:
- activity: the runtime's `podGroupPolicy.<policy_key>` is set (`policy`);
- ComponentBuilder: the PodGroup `<trainjob>` in the TrainJob's namespace, controlled by it, with
  `minMember` = the pods of all replicated jobs (initializers and launcher included) and `minResources` =
  the sum over PodSets of one pod's requests times its count (`pod_group_totals`; requests only, limits
  never count, as upstream), then the plugin's own spec fields (`pod_group_spec_fields`). It is built
  only while the TrainJob is suspended or the PodGroup does not exist yet: a running gang is never resized
  under the scheduler's feet.
- WatchExtension (`pod_group_watches`):
  - PodGroups controlled by a TrainJob (optional: skipped when the PodGroup CRD is not served);
  - LimitRanges: a change can alter the requests of pods not created yet, so every *suspended* TrainJob
    in the LimitRange's namespace is reconciled (`suspended_trainjobs_in_namespace`);
  - RuntimeClasses: their pod overhead counts in `minResources`, so suspended TrainJobs whose runtime's pod
    templates use that `runtimeClassName` are reconciled (`suspended_trainjobs_using_runtime_class`).
  The mapping functions are module-level, so both plugins declare equal LimitRange and RuntimeClass
  `Watch` values and the framework lists each once.
Each plugin keeps what differs: the pod label or annotation (EnforcePodGroupPolicy), its spec fields, and
Volcano's validation.

Deliberately different from upstream: without the PodGroup CRD upstream registers none of the three
watches; here only the PodGroup watch is skipped (the other two then enqueue suspended TrainJobs that have
no PodGroup, which is harmless). The RuntimeClass mapping matches a TrainingRuntime's TrainJobs in the
runtime's own namespace (upstream lists same-named references in every namespace) and removes duplicates
by key (upstream compacts adjacent names only).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, cast

from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import RuntimeView, TrainJobView, as_dict, as_list, replicated_job_pod_spec
from runtime.framework import Reader, TrainJobKey, Watch
from runtime.info import Info
from runtime.ownership import owner_reference
from runtime.resources import ResourceList, add_resource_lists, format_resource_list

__all__ = [
    "PodGroupPlugin",
    "pod_group_totals",
    "pod_group_watches",
    "pod_template_values",
    "runtime_class_names",
    "suspended_trainjobs_in_namespace",
    "suspended_trainjobs_using_runtime_class",
]


def pod_group_totals(info: Info) -> tuple[int, ResourceList]:
    """(pods, summed requests) over all PodSets: the gang's `minMember` and `minResources`."""
    members = 0
    resources: ResourceList = {}
    for pod_set in info.pod_sets:
        members += pod_set.count
        add_resource_lists(resources, pod_set.total_requests)
    return members, resources


def pod_template_values(template_spec: Mapping[str, Any], field: str) -> list[str]:
    """The string `field` of each replicated job's pod spec that sets one, in template order."""
    values = []
    for job in as_list(template_spec.get("replicatedJobs")):
        value = replicated_job_pod_spec(job).get(field)
        if isinstance(value, str):
            values.append(value)
    return values


def runtime_class_names(runtime: Mapping[str, Any]) -> set[str]:
    """The `runtimeClassName`s of a runtime's pod templates (Go: the runtime-class field indexers)."""
    return set(pod_template_values(as_dict(RuntimeView(runtime).template.get("spec")), "runtimeClassName"))


# Watch mapping functions ---------------------------------------------------------------------------------


def _metadata_field(obj: Mapping[str, Any], key: str) -> str:
    return str(as_dict(obj.get("metadata")).get(key) or "")


def _suspended_keys(trainjobs: Iterable[Mapping[str, Any]]) -> list[TrainJobKey]:
    keys = {
        (view.namespace, view.name) for view in map(TrainJobView, trainjobs) if view.suspend and view.name
    }
    return sorted(keys)


def suspended_trainjobs_in_namespace(obj: Mapping[str, Any], reader: Reader) -> list[TrainJobKey]:
    """The suspended TrainJobs in the namespace of `obj` (a LimitRange)."""
    namespace = _metadata_field(obj, "namespace")
    return _suspended_keys(reader.list(constants.API_VERSION, constants.TRAINJOB_KIND, namespace))


def suspended_trainjobs_using_runtime_class(obj: Mapping[str, Any], reader: Reader) -> list[TrainJobKey]:
    """The suspended TrainJobs whose runtime's pod templates name this RuntimeClass."""
    runtime_class = _metadata_field(obj, "name")
    namespaced = {
        (_metadata_field(r, "namespace"), _metadata_field(r, "name"))
        for r in reader.list(constants.API_VERSION, constants.TRAINING_RUNTIME_KIND)
        if runtime_class in runtime_class_names(r)
    }
    cluster = {
        _metadata_field(r, "name")
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


# The shared base -----------------------------------------------------------------------------------------


class PodGroupPlugin(ABC):
    """The WatchExtension and ComponentBuilder halves of a gang-scheduling plugin, and its policy lookup.

    A subclass sets `policy_key` and `pod_group_api_version`, implements `pod_group_spec_fields` (and
    `enforce_pod_group_policy`), and names its extension points after this class, so that its header
    stays its capability list: `class Volcano(PodGroupPlugin, EnforcePodGroupPolicy, WatchExtension,
    ComponentBuilder)`. This class is not a plugin and subclasses no extension point itself.
    """

    policy_key: ClassVar[str]
    """The `podGroupPolicy` member that activates the plugin (`coscheduling`, `volcano`)."""
    pod_group_api_version: ClassVar[str]
    """The apiVersion of the plugin's PodGroup kind."""

    def policy(self, info: Info) -> dict[str, Any] | None:
        """Info's copy of `podGroupPolicy.<policy_key>`, or None when the runtime does not set it."""
        return self._policy_in(info.pod_group_policy)

    def _policy_in(self, pod_group_policy: Any) -> dict[str, Any] | None:
        source = as_dict(pod_group_policy).get(self.policy_key)
        return cast(dict[str, Any], source) if isinstance(source, dict) else None

    @abstractmethod
    def pod_group_spec_fields(self, info: Info, policy: Mapping[str, Any]) -> dict[str, Any]:
        """The PodGroup spec fields after `minMember` and `minResources`, in the order to write them."""

    def watches(self) -> Sequence[Watch]:
        return pod_group_watches(self.pod_group_api_version)

    def build(self, info: Info, trainjob: TrainJob, reader: Reader) -> list[dict[str, Any]]:
        # Decided from the runtime as written and the cluster before anything computed is read, so that a
        # running TrainJob's reconcile does not compute Info (`runtime.info.DeferredInfo`).
        if self._policy_in(info.runtime_spec.get("podGroupPolicy")) is None:
            return []
        view = TrainJobView(trainjob)
        existing = reader.get(self.pod_group_api_version, constants.POD_GROUP_KIND, view.name, view.namespace)
        if existing is not None and not view.suspend:
            return []  # a running gang is never resized
        policy = self.policy(info)
        if policy is None:
            return []
        members, resources = pod_group_totals(info)
        return [
            {
                "apiVersion": self.pod_group_api_version,
                "kind": constants.POD_GROUP_KIND,
                "metadata": {
                    "name": view.name,
                    "namespace": view.namespace,
                    "ownerReferences": [owner_reference(trainjob)],
                },
                "spec": {
                    "minMember": members,
                    "minResources": format_resource_list(resources),
                    **self.pod_group_spec_fields(info, policy),
                },
            }
        ]
