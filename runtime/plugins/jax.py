"""The JAX plugin: the environment `jax.distributed.initialize()` reads, and the coordinator port.

Go origin: kubeflow/trainer `pkg/runtime/framework/plugins/jax/jax.go` (`Validate`, `EnforceMLPolicy`).

Active when the runtime's `mlPolicy.jax` is set.

EnforceMLPolicy:
1. `spec.trainer.numNodes`, when set, becomes the count of the PodSet labelled ancestor `trainer`.
2. Only when `spec.trainer` is set (as upstream: a TrainJob without it gets the runtime as written), the
   trainer `node` container gets `JAX_NUM_PROCESSES` (the trainer count: one process per host),
   `JAX_PROCESS_ID` (the Job completion index) and `JAX_COORDINATOR_ADDRESS`
   (`<trainjob>-node-0-0.<trainjob>:29500`), and container port 29500. `spec.trainer.env` is added after
   these by the JobSet plugin when it renders the JobSet.

CustomValidation: nothing to check (upstream's is a no-op too); the plugin does not declare it.

Deliberately missing: a reserved-env check (upstream has none for JAX), and several processes per host
(`numProcPerNode` is ignored, as upstream).
"""

from __future__ import annotations

from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView
from runtime.framework import EnforceMLPolicy, PluginContext
from runtime.info import Info
from runtime.plugins.trainernode import (
    JOB_COMPLETION_INDEX_FIELD_PATH,
    apply_num_nodes,
    env_var,
    env_var_from_field,
    first_trainer_pod_host,
)

__all__ = ["JAX"]

NAME = "JAX"
ENV_NUM_PROCESSES = "JAX_NUM_PROCESSES"
ENV_PROCESS_ID = "JAX_PROCESS_ID"
ENV_COORDINATOR_ADDRESS = "JAX_COORDINATOR_ADDRESS"


class JAX(EnforceMLPolicy):
    """JAX multi-host training: one process per node, coordinated by the first pod."""

    name = NAME

    def __init__(self, context: PluginContext | None = None) -> None:
        del context  # no settings

    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None:
        if info.ml.jax is None:
            return
        view = TrainJobView(trainjob)
        trainer_pod_set = apply_num_nodes(info, trainjob)
        if view.trainer is None:
            return
        container = info.find_container_by_ancestor(constants.ANCESTOR_TRAINER, constants.NODE)
        if container is None:
            return
        num_nodes = trainer_pod_set.count if trainer_pod_set is not None else 1
        coordinator = f"{first_trainer_pod_host(view.name)}:{constants.CONTAINER_TRAINER_PORT}"
        container.upsert_env(
            env_var(ENV_NUM_PROCESSES, str(num_nodes)),
            env_var_from_field(ENV_PROCESS_ID, JOB_COMPLETION_INDEX_FIELD_PATH),
            env_var(ENV_COORDINATOR_ADDRESS, coordinator),
        )
        container.upsert_ports({"containerPort": constants.CONTAINER_TRAINER_PORT})
