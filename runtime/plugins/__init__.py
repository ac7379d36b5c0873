"""runtime.plugins: the built-in plugins, in the one order every phase runs them.

Go origin: kubeflow/trainer `pkg/runtime/framework/plugins/registry.go`, whose map gave a random order
within each phase, different from run to run. Here the order is data, fixed and tested:

    JobSet, PlainML, Torch, MPI, JAX, XGBoost, Flux, CoScheduling, Volcano, TrainJobStatus

`BUILTIN_ORDER` is that list; `builtin_registry()` the registry of the plugins that exist, in that order.
The `TrainJobStatus` plugin (status server wiring) joins only under the feature gate of the same name.

Adding a built-in plugin: write `runtime/plugins/<name>.py` (a class that subclasses its extension points;
see docs/plugins.md) and add one `PluginEntry` line to `_BUILTINS` below; the unit test checks that the
entries follow `BUILTIN_ORDER`.
"""

from __future__ import annotations

from runtime.features import TRAIN_JOB_STATUS
from runtime.framework import PluginEntry, PluginRegistry
from runtime.plugins.coscheduling import CoScheduling
from runtime.plugins.flux import Flux
from runtime.plugins.jax import JAX
from runtime.plugins.jobset import JobSet
from runtime.plugins.mpi import MPI
from runtime.plugins.plainml import PlainML
from runtime.plugins.torch import Torch
from runtime.plugins.trainjobstatus import TrainJobStatusPlugin
from runtime.plugins.volcano import Volcano
from runtime.plugins.xgboost import XGBoost

__all__ = ["BUILTIN_ORDER", "TRAINJOB_STATUS_GATE", "builtin_registry"]

BUILTIN_ORDER: tuple[str, ...] = (
    "JobSet",
    "PlainML",
    "Torch",
    "MPI",
    "JAX",
    "XGBoost",
    "Flux",
    "CoScheduling",
    "Volcano",
    "TrainJobStatus",
)
"""Every built-in plugin name, in execution order within each phase."""

TRAINJOB_STATUS_GATE = TRAIN_JOB_STATUS
"""The feature gate that adds the `TrainJobStatus` plugin (defined with the others in `runtime.features`)."""

_BUILTINS: tuple[PluginEntry, ...] = (
    PluginEntry(JobSet.name, JobSet),
    PluginEntry(PlainML.name, PlainML),
    PluginEntry(Torch.name, Torch),
    PluginEntry(MPI.name, MPI),
    PluginEntry(JAX.name, JAX),
    PluginEntry(XGBoost.name, XGBoost),
    PluginEntry(Flux.name, Flux),
    PluginEntry(CoScheduling.name, CoScheduling),
    PluginEntry(Volcano.name, Volcano),
    PluginEntry(TrainJobStatusPlugin.name, TrainJobStatusPlugin),
)


def builtin_registry(feature_gates: frozenset[str] = frozenset()) -> PluginRegistry:
    """The built-in plugins in `BUILTIN_ORDER`; `TrainJobStatus` only with its feature gate."""
    entries = [
        e for e in _BUILTINS if e.name != TRAINJOB_STATUS_GATE or TRAINJOB_STATUS_GATE in feature_gates
    ]
    return PluginRegistry(entries)
