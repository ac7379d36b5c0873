"""The Volcano plugin: gang scheduling with Volcano's `PodGroup` (`scheduling.volcano.sh/v1beta1`).

Go origin: kubeflow/trainer `pkg/runtime/framework/plugins/volcano/volcano.go` (`Validate`,
`EnforcePodGroupPolicy`, `Build`, `ReconcilerBuilders`) and the annotation keys of Volcano's
`scheduling/v1beta1` API.

Active when the runtime's `podGroupPolicy.volcano` is set.

CustomValidation:
- the JobSet annotation `scheduling.volcano.sh/queue-name`, when present (runtime template or runtime
  patches), must not be empty;
- every `priorityClassName` of the (patched) pod templates must name an existing PriorityClass, read
  through the Reader (`scheduling.k8s.io/v1`); the built-in `system-cluster-critical` and
  `system-node-critical` always exist. Upstream stops checking at the first built-in class, so a later
  missing class slipped through (Q9); here every distinct name is checked. The Reader needs get access to
  PriorityClasses, which upstream's ClusterRole lacks.

EnforcePodGroupPolicy: every pod gets the annotation `scheduling.k8s.io/group-name: <trainjob>`.

ComponentBuilder: the PodGroup `<trainjob>` with `minMember` and `minResources` computed as for
CoScheduling (`runtime.plugins.coscheduling.pod_group_totals`), `queue` from the queue-name annotation,
`priorityClassName` from the last pod template that sets one, and `networkTopology` (`mode` default
`hard`, `highestTierAllowed` default 1) when the policy has one. Built only while the TrainJob is
suspended or the PodGroup is missing, as for CoScheduling.

WatchExtension: the same three watches as CoScheduling, for Volcano's PodGroup kind.

Deliberately missing: Volcano's `minTaskMember` and per-task minimums (upstream sets neither).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView
from runtime.framework import (
    ComponentBuilder,
    CustomValidation,
    EnforcePodGroupPolicy,
    FieldError,
    PluginContext,
    Reader,
    ReadError,
    Validation,
    Watch,
    WatchExtension,
)
from runtime.info import Info
from runtime.plugins.coscheduling import (
    existing_pod_group_blocks_build,
    pod_group_metadata,
    pod_group_totals,
    pod_group_watches,
)
from runtime.resources import format_resource_list

__all__ = [
    "GROUP_NAME_ANNOTATION",
    "POD_GROUP_API_VERSION",
    "QUEUE_NAME_ANNOTATION",
    "Volcano",
    "priority_class_names",
]

NAME = "Volcano"
POD_GROUP_API_VERSION = "scheduling.volcano.sh/v1beta1"
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
"""JobSet annotation (runtime template or patches) naming the Volcano queue (Go `QueueNameAnnotationKey`)."""
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
"""On every pod: the PodGroup it belongs to (Go `KubeGroupNameAnnotationKey`)."""
PRIORITY_CLASS_API_VERSION = "scheduling.k8s.io/v1"
SYSTEM_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
DEFAULT_NETWORK_TOPOLOGY_MODE = "hard"
DEFAULT_HIGHEST_TIER_ALLOWED = 1


def _map(value: object) -> dict[str, Any]:
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def priority_class_names(info: Info) -> list[str]:
    """The `priorityClassName` of each replicated job's pod template that sets one, in template order."""
    names = []
    for job in _list(info.template.get("replicatedJobs")):
        pod_spec = _map(_map(_map(_map(job).get("template")).get("spec")).get("template")).get("spec")
        name = _map(pod_spec).get("priorityClassName")
        if isinstance(name, str):
            names.append(name)
    return names


class Volcano(CustomValidation, EnforcePodGroupPolicy, WatchExtension, ComponentBuilder):
    """Gang scheduling through Volcano."""

    name = NAME

    def __init__(self, context: PluginContext | None = None) -> None:
        del context  # no settings

    @staticmethod
    def _policy(info: Info) -> dict[str, Any] | None:
        source = _map(info.pod_group_policy).get("volcano")
        return cast(dict[str, Any], source) if isinstance(source, dict) else None

    def validate(self, info: Info, old: TrainJob | None, new: TrainJob, reader: Reader) -> Validation:
        if self._policy(info) is None:
            return Validation()
        errors: list[FieldError] = []
        queue = info.annotations.get(QUEUE_NAME_ANNOTATION)
        if queue is not None and queue == "":
            errors.append(
                FieldError.invalid(
                    f"spec.annotations[{QUEUE_NAME_ANNOTATION}]",
                    queue,
                    "Volcano queue name must not be empty",
                )
            )
        checked: set[str] = set()
        for name in priority_class_names(info):
            if name in SYSTEM_PRIORITY_CLASSES or name in checked:
                continue
            checked.add(name)
            try:
                found = reader.get(PRIORITY_CLASS_API_VERSION, "PriorityClass", name)
            except ReadError as exc:
                reason = str(exc)
            else:
                if found is not None:
                    continue
                reason = f'priorityclasses.scheduling.k8s.io "{name}" not found'
            errors.append(
                FieldError.invalid(
                    "spec.templateSpec.priorityClassName",
                    name,
                    f'PriorityClass "{name}" doesn\'t exist: {reason}',
                )
            )
        return Validation.of(errors)

    def enforce_pod_group_policy(self, info: Info, trainjob: TrainJob) -> None:
        if self._policy(info) is None:
            return
        info.scheduler.pod_annotations[GROUP_NAME_ANNOTATION] = TrainJobView(trainjob).name

    def watches(self) -> Sequence[Watch]:
        return pod_group_watches(POD_GROUP_API_VERSION)

    def build(self, info: Info, trainjob: TrainJob, reader: Reader) -> list[dict[str, Any]]:
        policy = self._policy(info)
        if policy is None or existing_pod_group_blocks_build(reader, POD_GROUP_API_VERSION, trainjob):
            return []
        members, resources = pod_group_totals(info)
        spec: dict[str, Any] = {"minMember": members, "minResources": format_resource_list(resources)}
        if QUEUE_NAME_ANNOTATION in info.annotations:
            spec["queue"] = info.annotations[QUEUE_NAME_ANNOTATION]
        priority_classes = priority_class_names(info)
        if priority_classes:
            spec["priorityClassName"] = priority_classes[-1]
        topology = policy.get("networkTopology")
        if isinstance(topology, dict):
            mode = topology.get("mode")
            tier = topology.get("highestTierAllowed")
            spec["networkTopology"] = {
                "mode": DEFAULT_NETWORK_TOPOLOGY_MODE if mode is None else mode,
                "highestTierAllowed": DEFAULT_HIGHEST_TIER_ALLOWED if tier is None else int(tier),
            }
        return [
            {
                "apiVersion": POD_GROUP_API_VERSION,
                "kind": constants.POD_GROUP_KIND,
                "metadata": pod_group_metadata(trainjob),
                "spec": spec,
            }
        ]
