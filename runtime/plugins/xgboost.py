"""The XGBoost plugin: the `DMLC_*` environment of XGBoost's collective (Rabit) tracker and workers.

Go origin: kubeflow/trainer `pkg/runtime/framework/plugins/xgboost/xgboost.go` (`Validate`,
`EnforceMLPolicy`) and the XGBoost constants of `pkg/constants/constants.go`.

Active when the runtime's `mlPolicy.xgboost` is set. The PlainML plugin runs for XGBoost runtimes too,
before this one (registry order), so `spec.trainer.env` precedes the `DMLC_*` variables.

CustomValidation: each `spec.trainer.env[i]` named `DMLC_TRACKER_URI`, `DMLC_TRACKER_PORT`,
`DMLC_TASK_ID` or `DMLC_NUM_WORKER` is `Forbidden` ("<NAME> is reserved for the XGBoost runtime").

EnforceMLPolicy (needs a PodSet labelled ancestor `trainer`):
1. `spec.trainer.numNodes`, when set, becomes its count.
2. Only when `spec.trainer` is set (as upstream, even if empty), the trainer `node` container gets
   `DMLC_TRACKER_URI=<trainjob>-node-0-0.<trainjob>` (rank 0 runs the tracker), `DMLC_TRACKER_PORT=29500`,
   `DMLC_TASK_ID` (the Job completion index) and `DMLC_NUM_WORKER` = count * workers per node, where a
   node runs one worker per GPU (`resourcesPerNode`, else the runtime's `node` container) or one without
   GPUs (above `runtime.buildable.MAX_INT32` an `UnbuildableError` naming the GPU resource); and
   container port 29500.

Deliberately missing: nothing beyond upstream.
"""

from __future__ import annotations

from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView
from runtime.framework import CustomValidation, EnforceMLPolicy, FieldError, PluginContext, Reader, Validation
from runtime.info import Info
from runtime.plugins.trainernode import (
    JOB_COMPLETION_INDEX_FIELD_PATH,
    apply_num_nodes,
    env_var,
    env_var_from_field,
    first_trainer_pod_host,
    resource_count,
    trainer_resources_per_node,
)
from runtime.resources import gpu_resource

__all__ = ["RESERVED_ENV_NAMES", "XGBoost"]

NAME = "XGBoost"
ENV_TRACKER_URI = "DMLC_TRACKER_URI"
ENV_TRACKER_PORT = "DMLC_TRACKER_PORT"
ENV_TASK_ID = "DMLC_TASK_ID"
ENV_NUM_WORKER = "DMLC_NUM_WORKER"
RESERVED_ENV_NAMES = frozenset({ENV_TRACKER_URI, ENV_TRACKER_PORT, ENV_TASK_ID, ENV_NUM_WORKER})


class XGBoost(CustomValidation, EnforceMLPolicy):
    """Distributed XGBoost: the tracker on rank 0, one worker per GPU (or per node on CPUs)."""

    name = NAME

    def __init__(self, context: PluginContext | None = None) -> None:
        del context  # no settings

    def validate(self, info: Info, old: TrainJob | None, new: TrainJob, reader: Reader) -> Validation:
        if info.ml.xgboost is None:
            return Validation()
        trainer = TrainJobView(new).trainer
        if trainer is None:
            return Validation()
        env = trainer.get("env") or []
        return Validation.of(
            FieldError.forbidden(
                f"spec.trainer.env[{index}]", f"{item['name']} is reserved for the XGBoost runtime"
            )
            for index, item in enumerate(env)
            if isinstance(item, dict) and item.get("name") in RESERVED_ENV_NAMES
        )

    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None:
        if info.ml.xgboost is None:
            return
        view = TrainJobView(trainjob)
        trainer_pod_set = apply_num_nodes(info, trainjob)
        if trainer_pod_set is None or view.trainer is None:
            return
        container = info.find_container_by_ancestor(constants.ANCESTOR_TRAINER, constants.NODE)
        if container is None:
            return
        gpus = gpu_resource(trainer_resources_per_node(info, trainjob))
        workers_per_node = gpus[2] if gpus is not None else 1
        workers = resource_count(
            info,
            trainjob,
            gpus[:2] if gpus is not None else None,
            trainer_pod_set.count * workers_per_node,
            what=ENV_NUM_WORKER,
        )
        container.upsert_env(
            env_var(ENV_TRACKER_URI, first_trainer_pod_host(view.name)),
            env_var(ENV_TRACKER_PORT, str(constants.CONTAINER_TRAINER_PORT)),
            env_var_from_field(ENV_TASK_ID, JOB_COMPLETION_INDEX_FIELD_PATH),
            env_var(ENV_NUM_WORKER, str(workers)),
        )
        container.upsert_ports({"containerPort": constants.CONTAINER_TRAINER_PORT})
