"""The Volcano plugin: gang scheduling with Volcano's `PodGroup` (`scheduling.volcano.sh/v1beta1`).

Go origin: kubeflow/trainer `pkg/runtime/framework/plugins/volcano/volcano.go` (`Validate`,
`EnforcePodGroupPolicy`, `Build`, `ReconcilerBuilders`) and the annotation keys of Volcano's
`scheduling/v1beta1` API.

Active when the runtime's `podGroupPolicy.volcano` is set.

CustomValidation:
- the JobSet annotation `scheduling.volcano.sh/queue-name`, when present (runtime template or runtime
  patches), must not be empty;
- the `priorityClassName` of each (patched) pod template that sets one, in replicated-job order, must
  name an existing PriorityClass, read through the Reader (`scheduling.k8s.io/v1`): one error per job
  whose class is missing, at `spec.runtimeRef`, naming the runtime's field
  (`spec.template.spec.replicatedJobs[i].template.spec.template.spec.priorityClassName`; upstream names
  `spec.templateSpec.priorityClassName`, a field of neither object). The first built-in class
  (`system-cluster-critical`, `system-node-critical`) ends the check, as upstream's: the classes of the
  jobs after it are not looked up, so a missing one there is admitted (its pods wait until the class
  exists). The Reader needs get access to
  PriorityClasses, which upstream's ClusterRole lacks.

EnforcePodGroupPolicy: every pod gets the annotation `scheduling.k8s.io/group-name: <trainjob>`.

ComponentBuilder: the PodGroup `<trainjob>` with `minMember` and `minResources` computed as for
CoScheduling (`runtime.plugins.podgroup`), `queue` from the queue-name annotation,
`priorityClassName` from the last pod template that sets one, and `networkTopology` (`mode` default
`hard`, `highestTierAllowed` default 1) when the policy has one. Built only while the TrainJob is
suspended or the PodGroup is missing, as for CoScheduling.

WatchExtension: the same three watches as CoScheduling (`runtime.plugins.podgroup`), for Volcano's PodGroup
kind.

Deliberately missing: Volcano's `minTaskMember` and per-task minimums (upstream sets neither).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView, as_dict, as_list, replicated_job_pod_spec
from runtime.framework import (
    ComponentBuilder,
    CustomValidation,
    EnforcePodGroupPolicy,
    FieldError,
    PluginContext,
    Reader,
    ReadError,
    Validation,
    WatchExtension,
)
from runtime.info import Info
from runtime.plugins.podgroup import PodGroupPlugin, pod_template_values

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
_REPLICATED_JOBS = "spec.template.spec.replicatedJobs"


def priority_class_names(info: Info) -> list[str]:
    """The `priorityClassName` of each replicated job's pod template that sets one, in template order."""
    return pod_template_values(info.template, "priorityClassName")


def _priority_classes_by_job(info: Info) -> list[tuple[int, str]]:
    """(index of the replicated job, its pod template's `priorityClassName`) for each job that sets one."""
    found = []
    for index, job in enumerate(as_list(info.template.get("replicatedJobs"))):
        name = replicated_job_pod_spec(job).get("priorityClassName")
        if isinstance(name, str):
            found.append((index, name))
    return found


class Volcano(PodGroupPlugin, CustomValidation, EnforcePodGroupPolicy, WatchExtension, ComponentBuilder):
    """Gang scheduling through Volcano."""

    name = NAME
    policy_key = "volcano"
    pod_group_api_version = POD_GROUP_API_VERSION

    def __init__(self, context: PluginContext | None = None) -> None:
        del context  # no settings

    def validate(self, info: Info, old: TrainJob | None, new: TrainJob, reader: Reader) -> Validation:
        if self.policy(info) is None:
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
        runtime_ref = dict(as_dict(TrainJobView(new).spec.get("runtimeRef")))
        for index, name in _priority_classes_by_job(info):
            if name in SYSTEM_PRIORITY_CLASSES:
                break  # as upstream: a built-in class ends the check (see the module doc)
            try:
                found = reader.get(PRIORITY_CLASS_API_VERSION, "PriorityClass", name)
            except ReadError as exc:
                reason = str(exc)
            else:
                if found is not None:
                    continue
                reason = f'priorityclasses.scheduling.k8s.io "{name}" not found'
            # The class is the runtime's (a runtime patch cannot set one): name its field, under the
            # TrainJob's spec.runtimeRef (upstream names spec.templateSpec.priorityClassName, a field of
            # neither object).
            field = FieldError.invalid(
                f"{_REPLICATED_JOBS}[{index}].template.spec.template.spec.priorityClassName",
                name,
                f'PriorityClass "{name}" doesn\'t exist: {reason}',
            )
            errors.append(FieldError.invalid("spec.runtimeRef", runtime_ref, str(field)))
        return Validation.of(errors)

    def enforce_pod_group_policy(self, info: Info, trainjob: TrainJob) -> None:
        if self.policy(info) is None:
            return
        info.scheduler.pod_annotations[GROUP_NAME_ANNOTATION] = TrainJobView(trainjob).name

    def pod_group_spec_fields(self, info: Info, policy: Mapping[str, Any]) -> dict[str, Any]:
        spec: dict[str, Any] = {}
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
        return spec
