"""runtime.core: the runtime kinds, the runtime snapshot, the build order of a reconcile, and TrainJob status.

Go origin: kubeflow/trainer `pkg/runtime/core` and the status half of `pkg/controller/trainjob_controller.go`.

Module map:
- `runtime.core.runtime`: `RuntimeRegistry` (keyed `<Kind>.<group>`; `new_objects`, `validate`,
  `next_status`, `watches`), `Runtime`, the two `RuntimeKind`s.
- `runtime.core.snapshot`: the `<trainjob>-runtime-snapshot` ConfigMap (build, read, check).
- `runtime.core.status`: `set_condition` (meta.SetStatusCondition), the Suspended condition, the deadline.
- `runtime.core.errors`: `UnsupportedRuntimeError`, `InvalidTrainJobError`, `UnbuildableRuntimeError`,
  `InvalidSnapshotError` (permanent),
  `RuntimeNotFoundError`, `InvalidRuntimeError`, `SnapshotError`.
- `runtime.core.runtime_rules`: what the (Cluster)TrainingRuntime webhooks check (replicated-job rules,
  the deprecation warning).
- `runtime.core.defaulting`: what the TrainJob mutating webhook fills in (`runtimePatches[].time`).
"""

from __future__ import annotations

from runtime.core.errors import (
    InvalidRuntimeError,
    InvalidSnapshotError,
    InvalidTrainJobError,
    PermanentError,
    RuntimeNotFoundError,
    SnapshotError,
    UnbuildableRuntimeError,
    UnsupportedRuntimeError,
)
from runtime.core.runtime import (
    CLUSTER_TRAINING_RUNTIME,
    TRAINING_RUNTIME,
    Runtime,
    RuntimeKind,
    RuntimeRegistry,
    StatusUpdate,
    registry_key,
    trainjob_field_errors,
)

__all__ = [
    "CLUSTER_TRAINING_RUNTIME",
    "TRAINING_RUNTIME",
    "InvalidRuntimeError",
    "InvalidSnapshotError",
    "InvalidTrainJobError",
    "PermanentError",
    "Runtime",
    "RuntimeKind",
    "RuntimeNotFoundError",
    "RuntimeRegistry",
    "SnapshotError",
    "StatusUpdate",
    "UnbuildableRuntimeError",
    "UnsupportedRuntimeError",
    "registry_key",
    "trainjob_field_errors",
]
