"""The Torch plugin: upstream `torch_test.go` (EnforceMLPolicy, Validate) and `torchtune_test.go`."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.framework import MemoryReader, PhaseError
from runtime.info import Info, build_info
from runtime.plugins.torch import (
    Torch,
    extract_overrides_from_runtime,
    is_lora_config_enabled,
    is_use_qlora_finetune,
    model_from_runtime_ref,
    recipe_and_config,
)
from runtime.testing import Make

PLUGIN = Torch()


@pytest.fixture
def make() -> Make:
    """The builders with the core-runtime tables' defaults (`Make()`: the TrainJob `default/test-job` on the
    TrainingRuntime `test-runtime`), which these cases were written against, not the plugin tables' ones of
    this directory's conftest."""
    return Make()


def _enforce(
    make: Make,
    trainjob: dict[str, Any],
    *,
    torch: dict[str, Any] | None = None,
    jobs: list[dict[str, Any]] | None = None,
    ml_policy: dict[str, Any] | None = None,
) -> Info:
    if jobs is None:
        jobs = [make.job("node", ancestor="trainer", containers=[make.container("node")])]
    policy = ml_policy if ml_policy is not None else {"torch": torch if torch is not None else {}}
    info = build_info(trainjob, make.runtime_spec(*jobs, ml_policy=policy))
    PLUGIN.enforce_ml_policy(info, trainjob)
    return info


def _pet(make: Make, nodes: str, procs: str, master: str | None = None) -> list[dict[str, Any]]:
    env = [
        make.env("PET_NNODES", nodes),
        make.env("PET_NPROC_PER_NODE", procs),
        make.rank_env("PET_NODE_RANK"),
    ]
    if master is not None:
        env += [
            make.env("PET_MASTER_ADDR", f"{master}-node-0-0.{master}"),
            make.env("PET_MASTER_PORT", "29500"),
        ]
    return env


def test_no_action_without_a_torch_policy(make: Make) -> None:
    # upstream "no action when mlPolicySource is nil" / "no action when mlPolicySource torch is null"
    info = _enforce(make, make.trainjob(trainer={"numNodes": 3}), ml_policy={"numNodes": 1})
    assert info.pod_sets[0].count == 1
    assert info.pod_sets[0].containers[0].obj == {"name": "node"}


def test_trainjob_num_nodes_is_respected_rather_than_the_ml_policy(make: Make) -> None:
    # upstream "trainJob numNodes is respected rather than mlPolicy one"
    info = _enforce(make, make.trainjob("trainJob", trainer={"numNodes": 2}))
    assert info.pod_sets[0].count == 2
    assert info.pod_sets[0].containers[0].obj == {
        "name": "node",
        "env": _pet(make, "2", "1", master="trainJob"),
        "ports": [{"containerPort": 29500}],
    }


@pytest.mark.parametrize(
    ("resources", "num_proc_per_node", "procs"),
    [
        ({"requests": {"cpu": "4"}}, None, "4"),  # "nproc_per_node=auto with CPU limit"
        (None, None, "1"),  # "nproc_per_node=auto with no CPU resources"
        ({"requests": {"cpu": "2"}}, None, "2"),  # "nproc_per_node=auto with low CPU limit"
        ({"requests": {"cpu": "3"}}, None, "3"),  # "nproc_per_node=auto with CPU request but no limit"
        ({"requests": {"cpu": "2.5"}}, None, "3"),  # "nproc_per_node=auto with millicore CPU limit"
        ({"requests": {"cpu": "0.7"}}, None, "1"),  # "nproc_per_node=auto with fractional CPU limit"
        ({"requests": {"example.com/gpu": "2"}}, None, "auto"),  # "... with GPU request should remain auto"
        ({"requests": {"cpu": "8"}}, 3, "3"),  # "explicitly set nproc_per_node should be preserved"
        (
            {"requests": {"cpu": "2500m"}},
            None,
            "3",
        ),  # "nproc_per_node=auto with millicore CPU limit in m format"
        ({"requests": {"cpu": "6", "example.com/gpu": "2"}}, None, "auto"),  # "... resolves to GPU count ..."
        ({"requests": {"cpu": "3.7"}}, None, "4"),  # "nproc_per_node=cpu with fractional CPU"
        ({"limits": {"cpu": "5"}}, None, "5"),  # limits when no request
    ],
)
def test_processes_per_node(
    make: Make, resources: dict[str, Any] | None, num_proc_per_node: int | None, procs: str
) -> None:
    trainer: dict[str, Any] = {"image": "test:image"}
    if resources is not None:
        trainer["resourcesPerNode"] = resources
    if num_proc_per_node is not None:
        trainer["numProcPerNode"] = num_proc_per_node
    info = _enforce(make, make.trainjob(trainer=trainer))
    assert list(info.pod_sets[0].containers[0].env) == _pet(make, "1", procs, master="test-job")


def test_runtime_resources_count_when_the_trainjob_sets_none(make: Make) -> None:
    # upstream "multi-node multi-GPU training with complete info": GPUs from the runtime keep "auto".
    node = make.container("node", requests={"cpu": "8", "example.com/gpu": "4"})
    jobs = [make.job("node", ancestor="trainer", containers=[node])]
    info = _enforce(make, make.trainjob(trainer={"numNodes": 4}), jobs=jobs)
    assert list(info.pod_sets[0].containers[0].env) == _pet(make, "4", "auto", master="test-job")


def test_without_spec_trainer_no_env_and_no_port_are_injected(make: Make) -> None:
    # As upstream: the PET envs need `spec.trainer` (even an empty one).
    assert _enforce(make, make.trainjob()).pod_sets[0].containers[0].obj == {"name": "node"}
    assert _enforce(make, make.trainjob(trainer={})).pod_sets[0].containers[0].obj["ports"] == [
        {"containerPort": 29500}
    ]


def test_trainjob_env_comes_before_the_pet_envs(make: Make) -> None:
    node = make.container("node", env=[make.env("RUNTIME", "1")])
    trainjob = make.trainjob(trainer={"env": [make.env("USER", "x")]})
    info = _enforce(make, trainjob, jobs=[make.job("node", ancestor="trainer", containers=[node])])
    assert list(info.pod_sets[0].containers[0].env) == [
        make.env("RUNTIME", "1"),
        make.env("USER", "x"),
        *_pet(make, "1", "1", master="test-job"),
    ]


def _torchtune(
    make: Make, trainer: dict[str, Any], runtime: str, runtime_command: list[str] | None = None
) -> Info:
    node = make.container("node", command=runtime_command)
    jobs = [make.job("node", ancestor="trainer", containers=[node])]
    return _enforce(
        make,
        make.trainjob("torchtune-job", runtime=runtime, trainer={"command": ["tune", "run"], **trainer}),
        jobs=jobs,
    )


def test_multi_devices_full_fine_tuning_with_torchtune(make: Make) -> None:
    # upstream "multi-devices full fine-tuning with torchtune": no master envs, command rewritten.
    info = _torchtune(
        make,
        {
            "numNodes": 1,
            "resourcesPerNode": {"requests": {"cpu": "8", "memory": "16Gi", "example.com/gpu": "4"}},
        },
        "torchtune-llama3.2-1b",
    )
    assert list(info.pod_sets[0].containers[0].env) == _pet(make, "1", "auto")
    assert info.pod_sets[0].containers[0].ports == [{"containerPort": 29500}]
    assert info.trainer.command == [
        "tune",
        "run",
        "--rdzv_endpoint=torchtune-job-node-0-0.torchtune-job:29500",
        "full_finetune_distributed",
        "--config",
        "llama3_2/1B_full",
    ]


def test_single_device_full_fine_tuning_with_torchtune(make: Make) -> None:
    # upstream "single-device full fine-tuning with torchtune"
    info = _torchtune(
        make, {"resourcesPerNode": {"requests": {"example.com/gpu": "1"}}}, "torchtune-llama3.2-1b"
    )
    assert info.trainer.command == [
        "tune",
        "run",
        "full_finetune_single_device",
        "--config",
        "llama3_2/1B_full_single_device",
    ]


def test_multi_nodes_full_fine_tuning_keeps_the_runtimes_immutable_configs(make: Make) -> None:
    # upstream "multi-nodes full fine-tuning with torchtune" and core "succeeded to build JobSet with
    # TorchTune values from the TrainJob"
    runtime_command = [
        "tune",
        "run",
        "full_finetune_distributed",
        "--config",
        "llama3_3/70B_full_multinode",
        "output_dir=/workspace/model/llama3_3/70B",
        "tokenizer.path=/workspace/model/original/tokenizer.model",
        "checkpointer.checkpoint_dir=/workspace/model",
    ]
    info = _torchtune(make, {"numNodes": 30, "numProcPerNode": 3}, "torchtune-llama3.3-70b", runtime_command)
    assert list(info.pod_sets[0].containers[0].env) == _pet(make, "30", "3")
    assert info.trainer.command == [
        "tune",
        "run",
        "--rdzv_endpoint=torchtune-job-node-0-0.torchtune-job:29500",
        "full_finetune_distributed",
        "--config",
        "llama3_3/70B_full_multinode",
        "output_dir=/workspace/model/llama3_3/70B",
        "tokenizer.path=/workspace/model/original/tokenizer.model",
        "checkpointer.checkpoint_dir=/workspace/model",
    ]
    assert info.pod_sets[0].containers[0].command == runtime_command  # the runtime's own command is untouched


def _preflight_jobs(make: Make) -> list[dict[str, Any]]:
    return [
        make.job(
            "node",
            ancestor="trainer",
            containers=[make.container("node"), make.container("sidecar")],
            init_containers=[make.container("preflight-check")],
        ),
        make.job("other", containers=[make.container("main")], init_containers=[make.container("wait")]),
    ]


def test_env_injection_targets_get_the_pet_and_master_envs(make: Make) -> None:
    # upstream "envInjection with init container", "envInjection with sidecar (regular container)",
    # "envInjection with multiple targets in different jobs leaves unlisted init container unchanged"
    targets = [
        {"jobName": "node", "containerNames": ["preflight-check", "sidecar"]},
        {"jobName": "other", "containerNames": ["main"]},
    ]
    info = _enforce(
        make,
        make.trainjob(trainer={"numNodes": 2}),
        torch={"envInjection": {"targets": targets}},
        jobs=_preflight_jobs(make),
    )
    want = _pet(make, "2", "1", master="test-job")
    for job, container in (("node", "preflight-check"), ("node", "sidecar"), ("other", "main")):
        assert list(info.find_container(job, container).env) == want  # type: ignore[union-attr]
    assert info.find_container("other", "wait").obj == {"name": "wait"}  # type: ignore[union-attr]


def test_env_injection_gets_master_envs_even_with_torchtune(make: Make) -> None:
    # upstream "envInjection with torchtune command"
    targets = [{"jobName": "node", "containerNames": ["preflight-check"]}]
    trainjob = make.trainjob("tt", runtime="torchtune-llama3.2-1b", trainer={"command": ["tune", "run"]})
    info = _enforce(make, trainjob, torch={"envInjection": {"targets": targets}}, jobs=_preflight_jobs(make))
    assert list(info.find_container("node", "preflight-check").env) == _pet(make, "1", "1", master="tt")  # type: ignore[union-attr]
    assert list(info.find_container("node", "node").env) == _pet(make, "1", "1")  # type: ignore[union-attr]


def test_env_injection_without_targets_changes_only_the_node_container(make: Make) -> None:
    # upstream "envInjection with empty targets (no additional injection)"
    info = _enforce(
        make, make.trainjob(trainer={}), torch={"envInjection": {"targets": []}}, jobs=_preflight_jobs(make)
    )
    assert info.find_container("node", "preflight-check").obj == {"name": "preflight-check"}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "target",
    [
        {"jobName": "node", "containerNames": ["missing"]},  # "envInjection target container does not exist"
        {"jobName": "missing", "containerNames": ["node"]},  # "envInjection target job does not exist"
    ],
)
def test_a_missing_env_injection_target_fails_the_phase(make: Make, target: dict[str, Any]) -> None:
    with pytest.raises(PhaseError, match=f'envInjection target podSet "{target["jobName"]}" container'):
        _enforce(
            make,
            make.trainjob(trainer={}),
            torch={"envInjection": {"targets": [target]}},
            jobs=_preflight_jobs(make),
        )


# CustomValidation ------------------------------------------------------------------------------------------


def _validate(
    make: Make,
    trainjob: dict[str, Any],
    *,
    torch: dict[str, Any] | None = None,
    node: dict[str, Any] | None = None,
    ml_policy: dict[str, Any] | None = None,
) -> list[str]:
    jobs = [
        make.job(
            "node",
            ancestor="trainer",
            containers=[node or make.container("node")],
            init_containers=[make.container("preflight-check")],
        )
    ]
    policy = ml_policy if ml_policy is not None else {"torch": torch or {}}
    info = build_info(trainjob, make.runtime_spec(*jobs, ml_policy=policy))
    return [str(e) for e in PLUGIN.validate(info, None, trainjob, MemoryReader()).errors]


def test_validation_needs_a_torch_policy(make: Make) -> None:
    # upstream "no action when info does not have MLPolicySource" / "... but no Torch policy"
    trainjob = make.trainjob(trainer={"env": [make.env("PET_NNODES", "1")]})
    assert _validate(make, trainjob, ml_policy={"numNodes": 1}) == []


def test_env_injection_targets_must_exist(make: Make) -> None:
    # upstream TestTorchValidate "envInjection target container does not exist"
    targets = [{"jobName": "node", "containerNames": ["preflight-check", "nope"]}]
    assert _validate(make, make.trainjob(), torch={"envInjection": {"targets": targets}}) == [
        'spec.runtimeRef: Invalid value: {"jobName":"node","containerNames":["preflight-check","nope"]}: '
        'envInjection target podSet "node" container "nope" not found in runtime template'
    ]


def test_reserved_envs_are_rejected(make: Make) -> None:
    # upstream "reserved environment variable present" / "valid environment variable present"
    env = [make.env("PET_NODE_RANK", "1"), make.env("OK", "1"), make.env("PET_MASTER_ADDR", "x")]
    errors = _validate(make, make.trainjob(trainer={"env": env}))
    assert len(errors) == 1
    assert errors[0].startswith("spec.trainer.env: Invalid value: ")
    assert errors[0].endswith(
        ": must not have reserved envs, invalid envs configured: [PET_MASTER_ADDR PET_NODE_RANK]"
    )
    assert _validate(make, make.trainjob(trainer={"env": [make.env("OK", "1")]})) == []


def _tune(make: Make, runtime: str, **trainer: Any) -> list[str]:
    return _validate(make, make.trainjob(runtime=runtime, trainer={"command": ["tune", "run"], **trainer}))


def test_torchtune_validation(make: Make) -> None:
    # upstream "unsupported pretrained model"
    assert _tune(make, "torchtune-llama3.2-7b") == [
        'spec.runtimeRef.name: Invalid value: "torchtune-llama3.2-7b": '
        "must have a supported pretrained model, "
        "invalid model configured: llama3_2/7B"
    ]
    # upstream "multi-node mode is only enabled for Llama-3.3-70b"
    assert _tune(make, "torchtune-llama3.2-1b", numNodes=2) == [
        "spec.trainer.numNodes: Invalid value: 2: must be 1 for llama3_2/1B model"
    ]
    assert _tune(make, "torchtune-llama3.3-70b", numNodes=2) == []
    # upstream "qlora is not supported for qwen in torchtune"
    qlora = ["model.quantize_base=True"]
    assert _tune(
        make, "torchtune-qwen2.5-1.5b", args=qlora, resourcesPerNode={"requests": {"nvidia.com/gpu": 1}}
    ) == [
        'spec.runtimeRef.name: Invalid value: "torchtune-qwen2.5-1.5b": '
        "QLoRA is not supported for qwen2_5/1.5B model"
    ]
    # upstream "muti-devices qlora is not supported for llama3.2-1b in torchtune"
    assert _tune(
        make, "torchtune-llama3.2-1b", args=qlora, resourcesPerNode={"requests": {"nvidia.com/gpu": 2}}
    ) == [
        'spec.trainer.numProcPerNode: Invalid value: "auto": '
        "must be auto or 1 for llama3_2/1B model when using QLoRA",
        'spec.trainer.resourcesPerNode: Invalid value: {"requests":{"nvidia.com/gpu":2}}: '
        "must have gpu resource with value 1 for llama3_2/1B model when using QLoRA",
    ]
    # upstream "lora is not supported for multi-node training in torchtune"
    assert _tune(make, "torchtune-llama3.3-70b", numNodes=2, args=["model.lora_attn_modules=['q_proj']"]) == [
        "spec.trainer.numNodes: Invalid value: 2: "
        "LoRA fine-tuning is not supported for multi-node training in TorchTune"
    ]
    # upstream "lora is supported for single-node training in torchtune"
    assert _tune(make, "torchtune-llama3.2-1b", args=["model.lora_attn_modules=['q_proj']"]) == []


def test_immutable_runtime_configs_must_not_be_set_in_trainer_args(make: Make) -> None:
    # upstream "immutable runtime config must not be set in trainer args",
    # "multiple immutable runtime configs must not be set in trainer args"
    errors = _tune(make, "torchtune-llama3.2-1b", args=["epochs=1", "output_dir=/x", "tokenizer.path=/t"])
    assert errors == [
        'spec.trainer.args[1]: Invalid value: "output_dir=/x": '
        'must not set immutable config "output_dir" in trainer args; it is managed by the runtime',
        'spec.trainer.args[2]: Invalid value: "tokenizer.path=/t": '
        'must not set immutable config "tokenizer.path" in trainer args; it is managed by the runtime',
    ]


# torchtune helpers ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("torchtune-llama3.2-1b", "llama3_2/1B"),  # "llama3.2 1B is normalized"
        ("torchtune-qwen2.5-1.5b", "qwen2_5/1.5B"),  # "qwen2.5 1.5B is normalized"
        ("torchtune-llama", ""),  # "fewer than three parts returns empty"
        ("torchtune-llama-3-1b", ""),  # "more than three parts returns empty"
        ("", ""),  # "empty name returns empty"
    ],
)
def test_model_from_runtime_ref(name: str, model: str) -> None:
    assert model_from_runtime_ref(name) == model


def test_lora_and_qlora_detection() -> None:
    # upstream TestIsLoraConfigEnabled, TestIsUseQLoraFinetune
    assert is_lora_config_enabled(["model.lora_attn_modules=['q_proj']"])
    assert not is_lora_config_enabled(["epochs=1"]) and not is_lora_config_enabled([])
    assert is_use_qlora_finetune(["model.quantize_base=True"])
    assert not is_use_qlora_finetune(["model.quantize_base=False"])
    assert not is_use_qlora_finetune(
        ["model.quantize_base=True", "model.use_dora=true"]
    )  # dora short-circuits
    assert is_use_qlora_finetune(["model.quantize_base=True", "model.use_dora=False"])
    assert not is_use_qlora_finetune([])


_LORA = ["model.lora_attn_modules=['q_proj']"]
_QLORA = ["model.quantize_base=True"]


@pytest.mark.parametrize(
    ("nodes", "procs", "gpus", "args", "recipe", "suffix"),
    [
        (1, "auto", 1, [], "full_finetune_single_device", "_full_single_device"),  # "single device full"
        (1, "auto", 1, _LORA, "lora_finetune_single_device", "_lora_single_device"),  # "single device lora"
        (
            1,
            "auto",
            1,
            _QLORA,
            "lora_finetune_single_device",
            "_qlora_single_device",
        ),  # "single device qlora"
        (1, "auto", 4, [], "full_finetune_distributed", "_full"),  # "single node multi-gpu full"
        (1, "auto", 4, _LORA, "lora_finetune_distributed", "_lora"),  # "single node multi-gpu lora"
        (1, "auto", 4, _QLORA, "lora_finetune_distributed", "_qlora"),  # "single node multi-gpu qlora"
        (2, "auto", 8, [], "full_finetune_distributed", "_full_multinode"),  # "multi-node full"
        (
            1,
            1,
            4,
            [],
            "full_finetune_single_device",
            "_full_single_device",
        ),  # "numProcPerNode=1 forces single ..."
        (1, 4, 4, [], "full_finetune_distributed", "_full"),  # "numProcPerNode>1 uses distributed"
    ],
)
def test_recipe_and_config(
    *, nodes: int, procs: int | str, gpus: int, args: list[str], recipe: str, suffix: str
) -> None:
    assert recipe_and_config(nodes, procs, gpus, args, "torchtune-llama3.2-1b") == (
        recipe,
        f"llama3_2/1B{suffix}",
    )


@pytest.mark.parametrize(
    ("ancestor", "container", "want"),
    [
        (
            "trainer",
            "node",
            ["output_dir=/out", "tokenizer.path=/tok"],
        ),  # "trainer node container returns only ..."
        ("other", "node", []),  # "non-trainer ancestor is ignored"
        ("trainer", "sidecar", []),  # "non-node container is ignored"
    ],
)
def test_extract_overrides_from_runtime(make: Make, ancestor: str, container: str, want: list[str]) -> None:
    command = ["output_dir=/out", "tokenizer.path=/tok", "batch_size=32"]
    jobs = [make.job("j", ancestor=ancestor, containers=[make.container(container, command=command)])]
    assert extract_overrides_from_runtime(build_info(make.trainjob(), make.runtime_spec(*jobs))) == want
    assert extract_overrides_from_runtime(build_info(make.trainjob(), {})) == []  # "no jobset template"
