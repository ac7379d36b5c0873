"""The CoScheduling plugin: gang scheduling with the scheduler-plugins `PodGroup` (`scheduling.x-k8s.io`).

Go origin: kubeflow/trainer `pkg/runtime/framework/plugins/coscheduling/coscheduling.go`
(`EnforcePodGroupPolicy`, `Build`, `ReconcilerBuilders`, `PodGroupRuntimeClassHandler`,
`PodGroupLimitRangeHandler`) and the runtime-class indexers of `pkg/runtime/indexer`.

Active when the runtime's `podGroupPolicy.coscheduling` is set.

EnforcePodGroupPolicy: every pod gets the label `scheduling.x-k8s.io/pod-group: <trainjob>`.

ComponentBuilder: the PodGroup `<trainjob>` (`scheduling.x-k8s.io/v1alpha1`) with `minMember` and
`minResources` (`runtime.plugins.podgroup`: all pods, their summed requests) and `scheduleTimeoutSeconds`
(default 60); built only while the TrainJob is suspended or the PodGroup does not exist yet.

WatchExtension: owned PodGroups, LimitRanges and RuntimeClasses, as `runtime.plugins.podgroup` describes
(the LimitRange and RuntimeClass watches are the ones Volcano declares too).

Deliberately missing: a `schedulerName` on the pods. Upstream sets none either: the pods go to the scheduler
their runtime's pod templates name, the default one if none, which must be a scheduler-plugins build with the
Coscheduling plugin enabled. With scheduler-plugins installed as a second scheduler (its chart
`as-a-second-scheduler`), the runtime's pod templates name it (`schedulerName: scheduler-plugins-scheduler`).
The kind tier runs that set-up (`test/e2e/test_kind_gang.py`): a gang that cannot fit whole stays Pending
with no pod bound while one of its pods alone would fit, starts whole once capacity frees and completes,
and members that wait longer than `scheduleTimeoutSeconds` for the rest of the gang are rejected together.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView
from runtime.framework import ComponentBuilder, EnforcePodGroupPolicy, PluginContext, WatchExtension
from runtime.info import Info
from runtime.plugins.podgroup import PodGroupPlugin

__all__ = ["POD_GROUP_API_VERSION", "POD_GROUP_LABEL", "CoScheduling"]

NAME = "CoScheduling"
POD_GROUP_API_VERSION = "scheduling.x-k8s.io/v1alpha1"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
"""The pod label that puts a pod in a scheduler-plugins PodGroup (Go `PodGroupLabel`)."""


class CoScheduling(PodGroupPlugin, EnforcePodGroupPolicy, WatchExtension, ComponentBuilder):
    """Gang scheduling through the scheduler-plugins coscheduling plugin."""

    name = NAME
    policy_key = "coscheduling"
    pod_group_api_version = POD_GROUP_API_VERSION

    def __init__(self, context: PluginContext | None = None) -> None:
        del context  # no settings

    def enforce_pod_group_policy(self, info: Info, trainjob: TrainJob) -> None:
        if self.policy(info) is None:
            return
        info.scheduler.pod_labels[POD_GROUP_LABEL] = TrainJobView(trainjob).name

    def pod_group_spec_fields(self, info: Info, policy: Mapping[str, Any]) -> dict[str, Any]:
        timeout = policy.get("scheduleTimeoutSeconds")
        return {
            "scheduleTimeoutSeconds": (
                constants.DEFAULT_SCHEDULE_TIMEOUT_SECONDS if timeout is None else int(timeout)
            )
        }
