"""The PlainML plugin: the trainer node count and envs for runtimes without a distributed-framework policy.

Go origin: kubeflow/trainer `pkg/runtime/framework/plugins/plainml/plainml.go`.

Active when the runtime's mlPolicy is absent or sets none of `torch`, `mpi`, `jax` -- so also for XGBoost and
Flux runtimes, where it runs before their plugins (registry order; upstream's order is random).

EnforceMLPolicy:
- `spec.trainer.numNodes`, when set, becomes the count of the PodSet labelled ancestor `trainer`;
- when `spec.trainer` is set, its `env` is upserted into that PodSet's `node` container.

Deliberately missing: nothing; the plugin is this small upstream too.
"""

from __future__ import annotations

from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView
from runtime.framework import EnforceMLPolicy, PluginContext
from runtime.info import Info
from runtime.plugins.trainernode import apply_num_nodes, trainer_env

__all__ = ["PlainML"]

NAME = "PlainML"


class PlainML(EnforceMLPolicy):
    """Trainer count and envs when no torch/mpi/jax policy takes care of them."""

    name = NAME

    def __init__(self, context: PluginContext | None = None) -> None:
        del context  # no settings

    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None:
        if info.ml.torch is not None or info.ml.mpi is not None or info.ml.jax is not None:
            return
        if TrainJobView(trainjob).trainer is None:
            return
        apply_num_nodes(info, trainjob)
        container = info.find_container_by_ancestor(constants.ANCESTOR_TRAINER, constants.NODE)
        if container is not None:
            container.upsert_env(*trainer_env(trainjob))
