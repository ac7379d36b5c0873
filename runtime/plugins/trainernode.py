"""The trainer node as the plugins see it: what `spec.trainer` asks of it and the env vars they give it.

Go origin: `apply.EnvVar` and the env-var apply configurations of kubeflow/trainer `pkg/apply`, and the steps
each upstream ML-policy plugin (`torch.go`, `jax.go`, `xgboost.go`, `plainml.go`, `mpi.go`, `flux.go`) repeats
inline: `spec.trainer.numNodes` onto the trainer PodSet, the node's resources (`resourcesPerNode`, else the
runtime's), the reserved-env check, and the host where rank 0 runs.

Guarantees: pure functions of their arguments; builders return fresh dicts; nothing reads another plugin's
state. `apply_num_nodes` is the only one that mutates (the trainer PodSet's count, in the `Info` it is given).

Deliberately missing: defaulting and bounds of `spec.trainer.numNodes` (`runtime.core.trainjob_field_errors`
checks it before any plugin runs, so here it is a valid count).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from runtime.api import constants
from runtime.api.gojson import go_json
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView, as_dict, as_list
from runtime.buildable import MAX_INT32, checked_count
from runtime.framework.validation import FieldError
from runtime.info import Info, PodSet

__all__ = [
    "JOB_COMPLETION_INDEX_FIELD_PATH",
    "apply_num_nodes",
    "convert_env_var",
    "env_var",
    "env_var_from_field",
    "first_trainer_pod_host",
    "reserved_env_error",
    "resource_count",
    "trainer_env",
    "trainer_resources_path",
    "trainer_resources_per_node",
]

JOB_COMPLETION_INDEX_FIELD_PATH = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
"""The Job completion index of a pod: the node rank for Torch, JAX and XGBoost."""


def env_var(name: str, value: str) -> dict[str, Any]:
    """`{name, value}`."""
    return {"name": name, "value": value}


def env_var_from_field(name: str, field_path: str) -> dict[str, Any]:
    """An env var whose value is a field of the pod (`valueFrom.fieldRef.fieldPath`)."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


def convert_env_var(env: Mapping[str, Any]) -> dict[str, Any]:
    """Convert a TrainJob env var for applying, as Go's `apply.EnvVar` builds it from a `corev1.EnvVar`.

    The env var is read as Go's type holds it (`runtime.api.gojson`: unknown keys gone, quantities
    canonical), then rebuilt as upstream does: `name` always; without `valueFrom`, `value` always, `""`
    when unset; with it, only `fieldRef` (its `fieldPath`), `resourceFieldRef` (`containerName`,
    `resource` and `divisor`, each always: `""`, `""`, `"0"`), `configMapKeyRef` and `secretKeyRef`
    (`name` and `key` always, `optional` when set).
    """
    typed = go_json(dict(env), "core/v1.EnvVar")
    if not isinstance(typed, dict):
        return {"name": env.get("name")}
    converted: dict[str, Any] = {"name": typed.get("name", "")}
    source = typed.get("valueFrom")
    if not isinstance(source, dict):
        converted["value"] = typed.get("value", "")
        return converted
    picked: dict[str, Any] = {}
    if isinstance(ref := source.get("fieldRef"), dict):
        picked["fieldRef"] = {"fieldPath": ref.get("fieldPath", "")}
    if isinstance(ref := source.get("resourceFieldRef"), dict):
        picked["resourceFieldRef"] = {
            "containerName": ref.get("containerName", ""),
            "resource": ref.get("resource", ""),
            "divisor": ref.get("divisor", "0"),
        }
    for kind in ("configMapKeyRef", "secretKeyRef"):
        if isinstance(ref := source.get(kind), dict):
            selector = {"name": ref.get("name", ""), "key": ref.get("key", "")}
            if "optional" in ref:
                selector["optional"] = ref["optional"]
            picked[kind] = selector
    converted["valueFrom"] = picked
    return converted


def trainer_env(trainjob: TrainJob) -> list[dict[str, Any]]:
    """`spec.trainer.env`, converted for applying (empty without a trainer)."""
    return [
        convert_env_var(env)
        for env in as_list(as_dict(TrainJobView(trainjob).trainer).get("env"))
        if isinstance(env, dict)
    ]


def reserved_env_error(trainjob: TrainJob, reserved: Set[str]) -> FieldError | None:
    """The `spec.trainer.env` error for setting env vars a plugin owns (named sorted, as Go prints a
    `[]string`), or None when it sets none of `reserved`."""
    env = as_list(as_dict(TrainJobView(trainjob).trainer).get("env"))
    names = sorted({str(e.get("name")) for e in env if isinstance(e, dict)} & reserved)
    if not names:
        return None
    return FieldError.invalid(
        "spec.trainer.env",
        env,
        f"must not have reserved envs, invalid envs configured: [{' '.join(names)}]",
    )


def apply_num_nodes(info: Info, trainjob: TrainJob) -> PodSet | None:
    """The trainer PodSet (the first labelled ancestor `trainer`), its count set to `spec.trainer.numNodes`
    when the TrainJob sets it; None without such a PodSet."""
    pod_set = info.find_pod_set_by_ancestor(constants.ANCESTOR_TRAINER)
    num_nodes = as_dict(TrainJobView(trainjob).trainer).get("numNodes")
    if pod_set is not None and num_nodes is not None:
        pod_set.count = int(num_nodes)
    return pod_set


def trainer_resources_per_node(info: Info, trainjob: TrainJob) -> dict[str, Any]:
    """A trainer node's resources as the plugins size processes by them: `spec.trainer.resourcesPerNode`
    when set (as written, not merged), else the runtime's `node` container's (`Info.trainer_resources`),
    else {}."""
    resources = as_dict(TrainJobView(trainjob).trainer).get("resourcesPerNode")
    if resources is not None:
        return as_dict(resources)
    return info.trainer_resources() or {}


def trainer_resources_path(info: Info, trainjob: TrainJob) -> tuple[str, bool]:
    """Where `trainer_resources_per_node` read its resources, for an error that names the field: (the
    path, whether it is the TrainJob's). `spec.trainer.resourcesPerNode`, else the runtime's `node`
    container's `resources` (a path in the runtime's spec, after the TrainJob's runtime patches)."""
    if as_dict(TrainJobView(trainjob).trainer).get("resourcesPerNode") is not None:
        return "spec.trainer.resourcesPerNode", True
    jobs = as_list(info.template.get("replicatedJobs"))
    for pod_set in info.pod_sets:
        if pod_set.name != constants.NODE and pod_set.ancestor != constants.ANCESTOR_TRAINER:
            continue
        containers = as_list(pod_set.pod_spec.get("containers"))
        for index, container in enumerate(containers):
            if isinstance(container, dict) and container.get("name") == constants.NODE:
                if container.get("resources") is None:
                    continue
                job_index = next(i for i, job in enumerate(jobs) if job is pod_set.job)
                path = f"spec.template.spec.replicatedJobs[{job_index}].template.spec.template.spec"
                return f"{path}.containers[{index}].resources", False
    return "spec.trainer.resourcesPerNode", True  # nothing read: no count can come from it


def resource_count(
    info: Info, trainjob: TrainJob, source: tuple[str, str] | None, count: int, *, what: str
) -> int:
    """`count`, a count a plugin renders (`what`: `DMLC_NUM_WORKER`) from the trainer node's resource
    `source` (`requests` or `limits`, and the name), checked by `runtime.buildable.checked_count`: above
    `MAX_INT32` it raises `UnbuildableError` naming the resource
    (`spec.trainer.resourcesPerNode.limits[nvidia.com/gpu]`, or the runtime container's)."""
    if source is None or count <= MAX_INT32:
        return count
    key, name = source
    path, in_trainjob = trainer_resources_path(info, trainjob)
    value = as_dict(trainer_resources_per_node(info, trainjob).get(key)).get(name)
    return checked_count(f"{path}.{key}[{name}]", value, count, in_trainjob=in_trainjob, what=what)


def first_trainer_pod_host(trainjob_name: str) -> str:
    """`<trainjob>-node-0-0.<trainjob>`: the first trainer pod, where rank 0 (master, coordinator, tracker)
    runs. As upstream, the subdomain is the TrainJob name whatever `spec.network.subdomain` says."""
    return f"{trainjob_name}-{constants.NODE}-0-0.{trainjob_name}"
