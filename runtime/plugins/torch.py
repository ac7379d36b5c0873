"""The Torch plugin: torchrun's `PET_*` environment, the rendezvous port, and torchtune command rewriting.

Go origin: kubeflow/trainer `pkg/runtime/framework/plugins/torch` (`torch.go`: `Validate`,
`EnforceMLPolicy`, `getNumCPUPerNode`; `torchtune.go`: `validateTorchTune`, `getRecipeAndConfig`,
`extractOverridesFromRuntime`, `getModelFromRuntimeRef`).

Active when the runtime's `mlPolicy.torch` is set.

EnforceMLPolicy:
1. `spec.trainer.numNodes`, when set, becomes the trainer PodSet's count.
2. Processes per node: `spec.trainer.numProcPerNode`, else `auto`; `auto` without GPUs becomes the CPU
   count (requests, else limits, rounded up; at least 1; above `runtime.buildable.MAX_INT32` an
   `UnbuildableError` naming the cpu resource). Resources are `spec.trainer.resourcesPerNode`,
   else the runtime's `node` container's; the GPU count is deterministic (`runtime.resources.gpu_count`).
3. Only when `spec.trainer` is set (as upstream, even if empty): into the trainer `node` container,
   `spec.trainer.env`, then `PET_NNODES`, `PET_NPROC_PER_NODE`, `PET_NODE_RANK` (the Job completion index)
   and, unless the command is torchtune's `tune run`, `PET_MASTER_ADDR=<tj>-node-0-0.<tj>` and
   `PET_MASTER_PORT=29500`;
   for torchtune the command gets the rendezvous endpoint, recipe, config and the runtime's immutable
   configs instead. Then container port 29500.
4. Every `envInjection` target container (container or init container of the named job) gets the three
   `PET_*` envs and both master envs, torchtune or not; a missing target fails the phase.

CustomValidation: envInjection targets exist; `spec.trainer.env` sets no `PET_*` env; torchtune rules
(supported model, single node except Llama 3.3 70B, QLoRA limits, no LoRA on several nodes, no immutable
configs in `args`).

Deliberately missing: elastic PyTorch (waits on JobSet support upstream).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView, as_dict, as_list
from runtime.framework import (
    CustomValidation,
    EnforceMLPolicy,
    FieldError,
    PhaseError,
    PluginContext,
    Reader,
    Validation,
)
from runtime.info import Info
from runtime.plugins.trainernode import (
    JOB_COMPLETION_INDEX_FIELD_PATH,
    apply_num_nodes,
    env_var,
    env_var_from_field,
    first_trainer_pod_host,
    reserved_env_error,
    resource_count,
    trainer_env,
    trainer_resources_per_node,
)
from runtime.resources import cpu_resource, gpu_count

__all__ = [
    "Torch",
    "extract_overrides_from_runtime",
    "is_lora_config_enabled",
    "is_use_qlora_finetune",
    "model_from_runtime_ref",
    "recipe_and_config",
]

NAME = "Torch"

ENV_NUM_NODES = "PET_NNODES"
ENV_NUM_PROC_PER_NODE = "PET_NPROC_PER_NODE"
ENV_NODE_RANK = "PET_NODE_RANK"
ENV_MASTER_ADDR = "PET_MASTER_ADDR"
ENV_MASTER_PORT = "PET_MASTER_PORT"
RESERVED_ENV_NAMES = frozenset(
    {ENV_NUM_NODES, ENV_NUM_PROC_PER_NODE, ENV_NODE_RANK, ENV_MASTER_ADDR, ENV_MASTER_PORT}
)

TORCHTUNE_ENTRYPOINT = ["tune", "run"]
TORCHTUNE_ARG_RDZV_ENDPOINT = "--rdzv_endpoint"
TORCHTUNE_ARG_CONFIG = "--config"
FULL_FINETUNE_SINGLE_DEVICE = "full_finetune_single_device"
FULL_FINETUNE_DISTRIBUTED = "full_finetune_distributed"
LORA_FINETUNE_SINGLE_DEVICE = "lora_finetune_single_device"
LORA_FINETUNE_DISTRIBUTED = "lora_finetune_distributed"
SUFFIX_FULL_SINGLE_DEVICE = "_full_single_device"
SUFFIX_FULL_MULTI_DEVICES = "_full"
SUFFIX_FULL_MULTI_NODES = "_full_multinode"
SUFFIX_LORA_SINGLE_DEVICE = "_lora_single_device"
SUFFIX_QLORA_SINGLE_DEVICE = "_qlora_single_device"
SUFFIX_LORA_DISTRIBUTED = "_lora"
SUFFIX_QLORA_DISTRIBUTED = "_qlora"
LORA_ATTN_MODULES = "model.lora_attn_modules"
QUANTIZE_BASE = "model.quantize_base"
USE_DORA = "model.use_dora"
IMMUTABLE_CONFIGS = frozenset(
    {"output_dir", "tokenizer.path", "checkpointer.checkpoint_dir", "tokenizer.merges_file"}
)
MODEL_LLAMA3_2_1B = "llama3_2/1B"
MODEL_LLAMA3_2_3B = "llama3_2/3B"
MODEL_LLAMA3_3_70B = "llama3_3/70B"
MODEL_QWEN2_5_1_5B = "qwen2_5/1.5B"
SUPPORTED_MODELS = frozenset({MODEL_LLAMA3_2_1B, MODEL_LLAMA3_2_3B, MODEL_LLAMA3_3_70B, MODEL_QWEN2_5_1_5B})

NumProcPerNode = int | str
"""An explicit process count, or the string `auto` (Go `intstr.IntOrString`)."""


# torchtune -----------------------------------------------------------------------------------------------


def model_from_runtime_ref(runtime_ref_name: str) -> str:
    """`torchtune-llama3.2-1b` → `llama3_2/1B`; "" unless the name has exactly three `-` fields."""
    fields = runtime_ref_name.split("-")
    if len(fields) != 3:
        return ""
    return f"{fields[1].replace('.', '_')}/{fields[2].upper()}"


def is_lora_config_enabled(args: Sequence[str]) -> bool:
    """Any arg mentions `model.lora_attn_modules`."""
    return any(LORA_ATTN_MODULES in arg for arg in args)


def _is_bool_arg_enabled(args: Sequence[str], config_item: str) -> bool:
    for arg in args:
        key, sep, value = arg.partition("=")
        if sep and config_item in key and value.strip().lower() == "true":
            return True
    return False


def is_use_qlora_finetune(args: Sequence[str]) -> bool:
    """`model.quantize_base=true` without `model.use_dora=true` (values case-insensitive)."""
    if _is_bool_arg_enabled(args, USE_DORA):
        return False
    return _is_bool_arg_enabled(args, QUANTIZE_BASE)


def recipe_and_config(
    num_nodes: int, num_proc_per_node: NumProcPerNode, gpus: int, args: Sequence[str], runtime_ref_name: str
) -> tuple[str, str]:
    """The torchtune recipe and config for this shape of job (Go `getRecipeAndConfig`)."""
    recipe, suffix = FULL_FINETUNE_DISTRIBUTED, SUFFIX_FULL_MULTI_DEVICES
    qlora, lora = is_use_qlora_finetune(args), is_lora_config_enabled(args)
    if num_nodes == 1 and (num_proc_per_node == 1 or gpus == 1):
        if qlora:
            recipe, suffix = LORA_FINETUNE_SINGLE_DEVICE, SUFFIX_QLORA_SINGLE_DEVICE
        elif lora:
            recipe, suffix = LORA_FINETUNE_SINGLE_DEVICE, SUFFIX_LORA_SINGLE_DEVICE
        else:
            recipe, suffix = FULL_FINETUNE_SINGLE_DEVICE, SUFFIX_FULL_SINGLE_DEVICE
    elif num_nodes == 1 and qlora:
        recipe, suffix = LORA_FINETUNE_DISTRIBUTED, SUFFIX_QLORA_DISTRIBUTED
    elif num_nodes == 1 and lora:
        recipe, suffix = LORA_FINETUNE_DISTRIBUTED, SUFFIX_LORA_DISTRIBUTED
    elif num_nodes > 1:
        suffix = SUFFIX_FULL_MULTI_NODES
    return recipe, f"{model_from_runtime_ref(runtime_ref_name)}{suffix}"


def extract_overrides_from_runtime(info: Info) -> list[str]:
    """The runtime `node` container's command items that set an immutable config (`output_dir=...`)."""
    overrides: list[str] = []
    for pod_set in info.pod_sets:
        if pod_set.ancestor != constants.ANCESTOR_TRAINER:
            continue
        for container in pod_set.containers:
            if container.name == constants.NODE:
                overrides.extend(c for c in container.command or () if c.split("=")[0] in IMMUTABLE_CONFIGS)
    return overrides


def _torchtune_errors(info: Info, trainjob: TrainJob) -> list[FieldError]:
    view = TrainJobView(trainjob)
    trainer = as_dict(view.trainer)
    runtime_ref_name = view.runtime_ref_name
    model = model_from_runtime_ref(runtime_ref_name)
    errors = []
    if model not in SUPPORTED_MODELS:
        errors.append(
            FieldError.invalid(
                "spec.runtimeRef.name",
                runtime_ref_name,
                f"must have a supported pretrained model, invalid model configured: {model}",
            )
        )
    num_nodes = 1 if trainer.get("numNodes") is None else int(trainer["numNodes"])
    if num_nodes > 1 and model != MODEL_LLAMA3_3_70B:
        errors.append(FieldError.invalid("spec.trainer.numNodes", num_nodes, f"must be 1 for {model} model"))
    num_proc: NumProcPerNode = (
        "auto" if trainer.get("numProcPerNode") is None else int(trainer["numProcPerNode"])
    )
    gpus = gpu_count(trainer_resources_per_node(info, trainjob))
    args = [str(a) for a in as_list(trainer.get("args"))]
    _, config = recipe_and_config(num_nodes, num_proc, gpus, args, runtime_ref_name)
    if SUFFIX_QLORA_DISTRIBUTED in config:
        if model == MODEL_QWEN2_5_1_5B:
            errors.append(
                FieldError.invalid(
                    "spec.runtimeRef.name", runtime_ref_name, f"QLoRA is not supported for {model} model"
                )
            )
        if SUFFIX_QLORA_SINGLE_DEVICE not in config and model in (MODEL_LLAMA3_2_1B, MODEL_LLAMA3_2_3B):
            errors.append(
                FieldError.invalid(
                    "spec.trainer.numProcPerNode",
                    num_proc,
                    f"must be auto or 1 for {model} model when using QLoRA",
                )
            )
            errors.append(
                FieldError.invalid(
                    "spec.trainer.resourcesPerNode",
                    trainer.get("resourcesPerNode"),
                    f"must have gpu resource with value 1 for {model} model when using QLoRA",
                )
            )
    if num_nodes > 1 and (is_lora_config_enabled(args) or is_use_qlora_finetune(args)):
        errors.append(
            FieldError.invalid(
                "spec.trainer.numNodes",
                num_nodes,
                "LoRA fine-tuning is not supported for multi-node training in TorchTune",
            )
        )
    for index, arg in enumerate(args):
        key = arg.split("=", 1)[0]
        if key in IMMUTABLE_CONFIGS:
            errors.append(
                FieldError.invalid(
                    f"spec.trainer.args[{index}]",
                    arg,
                    f'must not set immutable config "{key}" in trainer args; it is managed by the runtime',
                )
            )
    return errors


# The plugin ----------------------------------------------------------------------------------------------


def _targets(info: Info) -> list[Mapping[str, Any]]:
    return [
        t
        for t in as_list(as_dict(as_dict(info.ml.torch).get("envInjection")).get("targets"))
        if isinstance(t, dict)
    ]


class Torch(CustomValidation, EnforceMLPolicy):
    """PyTorch distributed (torchrun) and torchtune."""

    name = NAME

    def __init__(self, context: PluginContext | None = None) -> None:
        del context  # no settings

    def validate(self, info: Info, old: TrainJob | None, new: TrainJob, reader: Reader) -> Validation:
        if info.ml.torch is None:
            return Validation()
        errors = []
        for target in _targets(info):
            job_name = str(target.get("jobName", ""))
            for container_name in as_list(target.get("containerNames")):
                if info.find_container(job_name, str(container_name)) is None:
                    errors.append(
                        FieldError.invalid(
                            "spec.runtimeRef",
                            dict(target),
                            f'envInjection target podSet "{job_name}" container "{container_name}" '
                            "not found in runtime template",
                        )
                    )
        trainer = TrainJobView(new).trainer
        if trainer is not None:
            reserved = reserved_env_error(new, RESERVED_ENV_NAMES)
            if reserved is not None:
                errors.append(reserved)
            if trainer.get("command") == TORCHTUNE_ENTRYPOINT:
                errors.extend(_torchtune_errors(info, new))
        return Validation.of(errors)

    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None:
        if info.ml.torch is None:
            return
        view = TrainJobView(trainjob)
        trainer = view.trainer
        trainer_pod_set = apply_num_nodes(info, trainjob)

        num_proc: NumProcPerNode = "auto"
        if trainer is not None and trainer.get("numProcPerNode") is not None:
            num_proc = int(trainer["numProcPerNode"])
        resources = trainer_resources_per_node(info, trainjob)
        gpus = gpu_count(resources)
        if num_proc == "auto" and gpus == 0:
            cpus = cpu_resource(resources)
            source = (cpus[0], "cpu") if cpus is not None else None
            count = max(1, cpus[1] if cpus is not None else 0)
            num_proc = resource_count(info, trainjob, source, count, what=ENV_NUM_PROC_PER_NODE)

        num_nodes = trainer_pod_set.count if trainer_pod_set is not None else 1
        pet_envs = [
            env_var(ENV_NUM_NODES, str(num_nodes)),
            env_var(ENV_NUM_PROC_PER_NODE, str(num_proc)),
            env_var_from_field(ENV_NODE_RANK, JOB_COMPLETION_INDEX_FIELD_PATH),
        ]
        master_envs = [
            env_var(ENV_MASTER_ADDR, first_trainer_pod_host(view.name)),
            env_var(ENV_MASTER_PORT, str(constants.CONTAINER_TRAINER_PORT)),
        ]

        container = None
        if trainer is not None:
            container = info.find_container_by_ancestor(constants.ANCESTOR_TRAINER, constants.NODE)
        if container is not None and trainer is not None:
            container.upsert_env(*trainer_env(trainjob))
            container.upsert_env(*pet_envs)
            if trainer.get("command") != TORCHTUNE_ENTRYPOINT:
                container.upsert_env(*master_envs)
            else:
                info.trainer.command = [
                    *(info.trainer.command or ()),
                    *self._torchtune_args(info, view, num_nodes, num_proc, gpus),
                ]
            container.upsert_ports({"containerPort": constants.CONTAINER_TRAINER_PORT})

        # Auxiliary containers (preflight checks, sidecars) may need the master address even for torchtune.
        for target in _targets(info):
            job_name = str(target.get("jobName", ""))
            for container_name in as_list(target.get("containerNames")):
                found = info.find_container(job_name, str(container_name))
                if found is None:
                    raise PhaseError(
                        f'envInjection target podSet "{job_name}" container "{container_name}" '
                        "not found in runtime template"
                    )
                found.upsert_env(*pet_envs)
                found.upsert_env(*master_envs)

    @staticmethod
    def _torchtune_args(
        info: Info, view: TrainJobView, num_nodes: int, num_proc: NumProcPerNode, gpus: int
    ) -> list[str]:
        """What torchtune's `tune run` needs appended (Go: the command mutation in `EnforceMLPolicy`)."""
        args: list[str] = []
        if (
            num_nodes > 1
            or (isinstance(num_proc, int) and num_proc > 1)
            or (isinstance(num_proc, str) and gpus > 1)
        ):
            args.append(
                f"{TORCHTUNE_ARG_RDZV_ENDPOINT}={first_trainer_pod_host(view.name)}:"
                f"{constants.CONTAINER_TRAINER_PORT}"
            )
        trainer_args = [str(a) for a in as_list(as_dict(view.trainer).get("args"))]
        recipe, config = recipe_and_config(num_nodes, num_proc, gpus, trainer_args, view.runtime_ref_name)
        args.extend([recipe, TORCHTUNE_ARG_CONFIG, config])
        args.extend(extract_overrides_from_runtime(info))
        return args
