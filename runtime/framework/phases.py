"""The phases of the runtime framework, in the order they run: the framework iterates this enum.

Go origin: the order that kubeflow/trainer v2.3.0 writes as code in `pkg/runtime/core/trainingruntime.go`
(`RuntimeInfo`: EnforceMLPolicy → EnforcePodGroupPolicy → PodNetwork; then `RunComponentBuilderPlugins`)
and in the TrainJob controller (status), and only as prose elsewhere.

Guarantees:
- Iterating `Phase` yields the phases in execution order; the framework runs the Info phases by iterating
  it, and `docs/plugins.md` is generated from it (`hack/gen-plugin-docs.py`; a unit test fails on drift).
- Each phase names its extension point (the Protocol a plugin subclasses) and the one method it calls.
- Within a phase, plugins run in registry order (`runtime.plugins`), never in dict or set order.

Deliberately missing: per-phase timeouts (phases are pure and fast) and partial results (the first error
of a reconcile phase aborts the build, as upstream).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from runtime.framework.extensions import (
    ComponentBuilder,
    CustomValidation,
    EnforceMLPolicy,
    EnforcePodGroupPolicy,
    PodNetwork,
    TrainJobStatus,
    WatchExtension,
)

__all__ = ["Phase", "Stage"]


class Stage(enum.Enum):
    """When a phase runs."""

    START_UP = "start-up"
    """Once, when the controller builds the framework."""
    ADMISSION = "admission"
    """In the TrainJob validating webhook, on create and update."""
    BUILD_INFO = "build-info"
    """In every reconcile that builds objects: plugins mutate the Info, in phase order."""
    BUILD = "build"
    """In every reconcile that builds objects, after the Info phases: plugins return objects to apply."""
    STATUS = "status"
    """In every reconcile: the TrainJob status is computed from the objects it owns."""


@dataclass(frozen=True, slots=True)
class _PhaseSpec:
    title: str
    extension_point: type
    method: str
    stage: Stage
    summary: str


class Phase(enum.Enum):
    """A phase of the framework. Members are declared in execution order."""

    WATCH_EXTENSION = _PhaseSpec(
        "WatchExtension",
        WatchExtension,
        "watches",
        Stage.START_UP,
        "Declare extra kinds the TrainJob controller watches and how their events map to TrainJobs.",
    )
    CUSTOM_VALIDATION = _PhaseSpec(
        "CustomValidation",
        CustomValidation,
        "validate",
        Stage.ADMISSION,
        "Check a created or updated TrainJob against its runtime; return field errors and warnings.",
    )
    ENFORCE_ML_POLICY = _PhaseSpec(
        "EnforceMLPolicy",
        EnforceMLPolicy,
        "enforce_ml_policy",
        Stage.BUILD_INFO,
        "Apply the runtime's mlPolicy to the Info: PodSet counts, envs, ports, volumes, init containers.",
    )
    ENFORCE_POD_GROUP_POLICY = _PhaseSpec(
        "EnforcePodGroupPolicy",
        EnforcePodGroupPolicy,
        "enforce_pod_group_policy",
        Stage.BUILD_INFO,
        "Apply the runtime's podGroupPolicy to the Info: scheduler pod labels and annotations.",
    )
    POD_NETWORK = _PhaseSpec(
        "PodNetwork",
        PodNetwork,
        "identify_pod_network",
        Stage.BUILD_INFO,
        "Give each PodSet its pods' network identity once counts are final (JobSet: lazy pod DNS names).",
    )
    COMPONENT_BUILDER = _PhaseSpec(
        "ComponentBuilder",
        ComponentBuilder,
        "build",
        Stage.BUILD,
        "Return the objects to server-side apply (JobSet, PodGroup, Secrets, ConfigMaps), in apply order.",
    )
    TRAINJOB_STATUS = _PhaseSpec(
        "TrainJobStatus",
        TrainJobStatus,
        "status",
        Stage.STATUS,
        "Compute the TrainJob status from the objects it owns (at most one plugin).",
    )

    @property
    def title(self) -> str:
        """The extension point's name, as upstream spells it (`EnforceMLPolicy`)."""
        return self.value.title

    @property
    def extension_point(self) -> type:
        """The Protocol a plugin subclasses to take part in this phase."""
        return self.value.extension_point

    @property
    def method(self) -> str:
        """The one method of the extension point the framework calls."""
        return self.value.method

    @property
    def stage(self) -> Stage:
        return self.value.stage

    @property
    def summary(self) -> str:
        return self.value.summary

    @classmethod
    def of_stage(cls, stage: Stage) -> tuple[Phase, ...]:
        """The phases of one stage, in execution order."""
        return tuple(phase for phase in cls if phase.stage is stage)
