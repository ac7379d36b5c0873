"""TrainJobs shaped like the Kubeflow Python SDK's `train()` requests pass our schema and webhook, and render.

Each case builds its request body the way the SDK does (the SDK's
`kubeflow/trainer/backends/kubernetes/{backend,utils}.py` and `options/kubernetes.py`): a
`TrainerV1alpha1TrainJob` model turned into JSON by `to_dict()` and the `kubernetes` client, then options
(labels, annotations, runtime patches) added to the dict. The body goes through what kube-apiserver does to
it (`Wire.stored`), then through `runtime.render.render` against the default runtimes with the CRD schemas:
structural schema and defaults, the TrainJob webhook's validation, and the build. The tests then check what
the SDK relies on in the result: the JobSet is named like the TrainJob, the trainer container carries the
SDK's image, command, args, env and resources, and the pods give as many node steps as nodes.

Mirrored from the SDK's `backend_test.py` `test_train`: "valid flow with built in trainer" (batch size,
epochs, loss), "... and lora config" (the LoRA args), "valid flow with custom trainer container" (cpu 5,
gpu 3 as requests and limits), "train with metadata labels and annotations", "train with runtime patches"
(a node selector under manager `trainer.kubeflow.org/kubeflow-sdk`), and `test_get_runtime_packages` (one
node with `cpu: 1`).
"""

from __future__ import annotations

import copy
import textwrap
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
from kubeflow_trainer_api import models

from runtime.render import Document, RenderError, RenderOptions, render
from runtime.resources import Quantity

if TYPE_CHECKING:
    from conftest import SdkRules, Wire
    from runtime.render import SchemaChecker

NAME = "k3f9a0c1d2e4"
"""A name as the SDK generates them: a lowercase letter and 11 hex digits."""
NAMESPACE = "team-a"
SDK_MANAGER = "trainer.kubeflow.org/kubeflow-sdk"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"

Option = Callable[[dict[str, Any]], None]


# -- request bodies, built as the SDK builds them -----------------------------------------------------------


def _script(entrypoint: str, path: str) -> str:
    """The SDK's CustomTrainer script: write the training function to a file, then run it."""
    code = "def train(lr):\n    print('training with', lr)\n\ntrain(**{'lr': 0.001})\n"
    return textwrap.dedent(
        f"""
        read -r -d '' SCRIPT << EOM

        {code}
        EOM
        printf "%s" "$SCRIPT" > "{path}"
        {entrypoint} "{path}\""""
    )


TORCH_COMMAND = ["bash", "-c", _script("torchrun", "train.py")]
MPI_COMMAND = [
    "mpirun",
    "--hostfile",
    "/etc/mpi/hostfile",
    "bash",
    "-c",
    _script("python", "/home/mpiuser/t.py"),
]
PYTHON_COMMAND = ["bash", "-c", _script("python", "train.py")]
TUNE_COMMAND = ["tune", "run"]


def _resources(per_node: Mapping[str, Any]) -> models.IoK8sApiCoreV1ResourceRequirements:
    """The SDK's `resourcesPerNode`: aliases resolved (gpu, storage, mig-*), one map for both."""
    resources: dict[str, models.IoK8sApimachineryPkgApiResourceQuantity] = {}
    for key, value in per_node.items():
        lowered = key.lower()
        name = lowered if lowered in {"cpu", "memory", "gpu", "storage", "ephemeral-storage"} else key
        name = {"gpu": "nvidia.com/gpu", "storage": "ephemeral-storage"}.get(name, name)
        if lowered.startswith("mig-"):
            name = f"nvidia.com/{lowered}"
        resources[name] = models.IoK8sApimachineryPkgApiResourceQuantity(value)
    return models.IoK8sApiCoreV1ResourceRequirements(requests=resources, limits=resources)


def _env(**values: str) -> list[models.IoK8sApiCoreV1EnvVar]:
    return [models.IoK8sApiCoreV1EnvVar(name=name, value=value) for name, value in values.items()]


def _trainjob(
    runtime: str,
    trainer: models.TrainerV1alpha1Trainer | None = None,
    initializer: models.TrainerV1alpha1Initializer | None = None,
    kind: str | None = None,
) -> models.TrainerV1alpha1TrainJob:
    return models.TrainerV1alpha1TrainJob(
        apiVersion="trainer.kubeflow.org/v1alpha1",
        kind="TrainJob",
        metadata=models.IoK8sApimachineryPkgApisMetaV1ObjectMeta(name=NAME),
        spec=models.TrainerV1alpha1TrainJobSpec(
            runtimeRef=models.TrainerV1alpha1RuntimeRef(name=runtime, kind=kind),
            trainer=trainer,
            initializer=initializer,
        ),
    )


def _labels(labels: dict[str, str]) -> Option:
    def apply(body: dict[str, Any]) -> None:
        body.setdefault("metadata", {})["labels"] = labels

    return apply


def _annotations(annotations: dict[str, str]) -> Option:
    def apply(body: dict[str, Any]) -> None:
        body.setdefault("metadata", {})["annotations"] = annotations

    return apply


def _runtime_patch(training_runtime_spec: dict[str, Any]) -> Option:
    """The SDK's `RuntimePatch` option: camelCase dict, manager fixed to the SDK's."""

    def apply(body: dict[str, Any]) -> None:
        patches = body.setdefault("spec", {}).setdefault("runtimePatches", [])
        patches.append({"trainingRuntimeSpec": training_runtime_spec, "manager": SDK_MANAGER})

    return apply


def _active_deadline(seconds: int) -> Option:
    def apply(body: dict[str, Any]) -> None:
        body.setdefault("spec", {})["activeDeadlineSeconds"] = seconds

    return apply


# -- the cases ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    trainjob: models.TrainerV1alpha1TrainJob
    options: tuple[Option, ...] = ()
    nodes: int = 1
    """The node steps the SDK should count once every pod runs (its `Running` rule)."""
    tune: tuple[str, str] | None = None
    """torchtune: the recipe and config the Torch plugin picks."""
    checks: tuple[Callable[[dict[str, Any]], None], ...] = field(default=())
    """Extra checks on the rendered JobSet."""


def _custom(runtime: str, command: list[str], nodes: int, per_node: Mapping[str, Any] | None = None) -> Case:
    trainer = models.TrainerV1alpha1Trainer(
        command=command,
        numNodes=nodes,
        resourcesPerNode=_resources(per_node) if per_node else None,
        env=_env(LEARNING_RATE="0.001", WANDB_MODE="offline"),
    )
    return Case(f"custom-trainer/{runtime}", _trainjob(runtime, trainer), nodes=nodes)


def _hf_initializer(dataset: str, model: str) -> models.TrainerV1alpha1Initializer:
    return models.TrainerV1alpha1Initializer(
        dataset=models.TrainerV1alpha1DatasetInitializer(storageUri=dataset, env=_env(ACCESS_TOKEN="hf_x")),
        model=models.TrainerV1alpha1ModelInitializer(
            storageUri=model, env=_env(IGNORE_PATTERNS="*.msgpack,*.h5,*.bin,*.pt,*.pth")
        ),
    )


def _builtin(
    runtime: str,
    *,
    model: str,
    args: list[str],
    gpus: int,
    tune: tuple[str, str],
    suffix: str,
) -> Case:
    trainer = models.TrainerV1alpha1Trainer(
        command=TUNE_COMMAND, args=args, resourcesPerNode=_resources({"gpu": gpus})
    )
    initializer = _hf_initializer("hf://tatsu-lab/alpaca/data", model)
    return Case(f"builtin-trainer/{runtime}/{suffix}", _trainjob(runtime, trainer, initializer), tune=tune)


FULL_ARGS = [
    "dtype=bf16",
    "batch_size=2",
    "epochs=2",
    "loss=torchtune.modules.loss.CEWithChunkedOutputLoss",
    "dataset.data_dir=/workspace/dataset/data",
]
LORA_ARGS = [
    "model.apply_lora_to_mlp=True",
    "model.lora_rank=8",
    "model.lora_alpha=16",
    "model.lora_dropout=0.1",
    "model.lora_attn_modules=[q_proj,v_proj,output_proj]",
]
QLORA_ARGS = [*LORA_ARGS[:4], "model.quantize_base=True", LORA_ARGS[4]]

TUNE_MODELS = {
    "torchtune-llama3.2-1b": ("hf://meta-llama/Llama-3.2-1B-Instruct", "llama3_2/1B"),
    "torchtune-llama3.2-3b": ("hf://meta-llama/Llama-3.2-3B-Instruct", "llama3_2/3B"),
    "torchtune-qwen2.5-1.5b": ("hf://Qwen/Qwen2.5-1.5B-Instruct", "qwen2_5/1.5B"),
}


SCRATCH = {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}


def _patched_node_pods(jobset: dict[str, Any]) -> None:
    assert jobset["metadata"]["labels"]["app"] == "training"  # the patch's JobSet metadata
    node = next(j for j in jobset["spec"]["replicatedJobs"] if j["name"] == "node")
    pod = node["template"]["spec"]["template"]
    assert pod["metadata"]["labels"]["team"] == "vision"
    assert pod["spec"]["nodeSelector"] == {"node-type": "gpu-a100"}
    assert pod["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert SCRATCH in pod["spec"]["volumes"]
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "node")
    assert {"name": "scratch", "mountPath": "/scratch"} in container["volumeMounts"]


SDK_PATCH = {
    "template": {
        "metadata": {"labels": {"app": "training"}},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "node",
                    "template": {
                        "spec": {
                            "template": {
                                "metadata": {"labels": {"team": "vision"}},
                                "spec": {
                                    "nodeSelector": {"node-type": "gpu-a100"},
                                    "tolerations": [
                                        {
                                            "key": "nvidia.com/gpu",
                                            "operator": "Exists",
                                            "effect": "NoSchedule",
                                        }
                                    ],
                                    "containers": [
                                        {
                                            "name": "node",
                                            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                                        }
                                    ],
                                    "volumes": [SCRATCH],
                                },
                            }
                        }
                    },
                }
            ]
        },
    }
}


def _cases() -> Iterator[Case]:
    yield _custom("torch-distributed", TORCH_COMMAND, 2)
    yield _custom("deepspeed-distributed", MPI_COMMAND, 2, {"gpu": 1})
    yield _custom("mlx-distributed", MPI_COMMAND, 3)
    yield _custom("jax-distributed", PYTHON_COMMAND, 2, {"gpu": 4, "memory": "64Gi"})
    yield _custom("xgboost-distributed", PYTHON_COMMAND, 2, {"CPU": 8, "Memory": "16Gi"})
    # backend_test.py "valid flow with custom trainer container": no command, cpu 5 and gpu 3.
    container = models.TrainerV1alpha1Trainer(
        image="example.com/my-image",
        numNodes=2,
        resourcesPerNode=_resources({"cpu": 5, "gpu": 3}),
        env=_env(TEST_ENV="test_value", ANOTHER_ENV="another_value"),
    )
    yield Case(
        "custom-trainer-container/torch-distributed", _trainjob("torch-distributed", container), nodes=2
    )
    # backend_test.py test_get_runtime_packages: one node with one CPU, the runtime's image (mpirun gets
    # `-np 1`). With MPI the launcher counts as a node besides the one `node` pod, so the SDK sees two node
    # steps for numNodes 1 and never reports Running: upstream's MPI plugin does the same (the node
    # count is max(numNodes - 1, 1)).
    for runtime, command, nodes in (
        ("torch-distributed", TORCH_COMMAND, 1),
        ("jax-distributed", PYTHON_COMMAND, 1),
        ("deepspeed-distributed", ["mpirun", "-np", "1", *MPI_COMMAND[3:]], 2),
    ):
        probe = models.TrainerV1alpha1Trainer(
            command=command, numNodes=1, resourcesPerNode=_resources({"cpu": 1})
        )
        yield Case(f"runtime-packages/{runtime}", _trainjob(runtime, probe), nodes=nodes)
    for runtime, (model, config) in TUNE_MODELS.items():
        full = ("full_finetune_distributed", f"{config}_full")
        lora = ("lora_finetune_distributed", f"{config}_lora")
        yield _builtin(runtime, model=model, args=FULL_ARGS, gpus=2, tune=full, suffix="full")
        yield _builtin(runtime, model=model, args=LORA_ARGS, gpus=2, tune=lora, suffix="lora")
    yield _builtin(
        "torchtune-llama3.2-1b",
        model=TUNE_MODELS["torchtune-llama3.2-1b"][0],
        args=QLORA_ARGS,
        gpus=1,
        tune=("lora_finetune_single_device", "llama3_2/1B_qlora_single_device"),
        suffix="qlora",
    )
    # backend_test.py "train with metadata labels and annotations" and "train with runtime patches", with
    # the runtime found as a ClusterTrainingRuntime (newer SDKs set runtimeRef.kind) and a deadline.
    for runtime, command in (("torch-distributed", TORCH_COMMAND), ("deepspeed-distributed", MPI_COMMAND)):
        trainer = models.TrainerV1alpha1Trainer(command=command, numNodes=2)
        yield Case(
            f"options/{runtime}",
            _trainjob(runtime, trainer, kind="ClusterTrainingRuntime"),
            options=(
                _labels({"team": "ml-platform"}),
                _annotations({"created-by": "sdk"}),
                _runtime_patch(SDK_PATCH),
                _active_deadline(3600),
            ),
            nodes=2,
            checks=(_patched_node_pods,),
        )


CASES = list(_cases())


# -- the pipeline: SDK → kube-apiserver → our webhook and render --------------------------------------------


def _request(case: Case, wire: Wire) -> dict[str, Any]:
    body = wire.sent(case.trainjob)
    for option in case.options:
        option(body)
    return body


def _as_created(body: dict[str, Any], wire: Wire) -> dict[str, Any]:
    """The body after kube-apiserver created it in the SDK's namespace."""
    created: dict[str, Any] = wire.stored(copy.deepcopy(body))
    created["metadata"].update(
        namespace=NAMESPACE,
        uid="0b9f5c8e-1111-4222-8333-944455556666",
        creationTimestamp="2026-01-02T03:04:05Z",
    )
    return created


def _render(
    trainjob: dict[str, Any], runtimes: list[Document], schemas: SchemaChecker
) -> list[dict[str, Any]]:
    return render(Document(source="sdk", obj=trainjob), runtimes, (), RenderOptions(schemas=schemas)).objects


def _trainer_container(jobset: Mapping[str, Any]) -> dict[str, Any]:
    for job in jobset["spec"]["replicatedJobs"]:
        if (job["template"].get("metadata") or {}).get("labels", {}).get(ANCESTOR) == "trainer":
            pod = job["template"]["spec"]["template"]["spec"]
            return next(c for c in pod["containers"] if c["name"] == "node")
    raise AssertionError("no trainer job in the JobSet")


def _names(items: list[dict[str, Any]] | None) -> set[str]:
    return {item["name"] for item in items or ()}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_sdk_request_passes_our_schema_and_validation_and_renders(
    case: Case,
    runtime_documents: list[Document],
    schemas: SchemaChecker,
    sdk: SdkRules,
    wire: Wire,
) -> None:
    request = _request(case, wire)
    assert models.TrainerV1alpha1TrainJob.from_dict(request) is not None  # what the SDK itself accepts
    created = _as_created(request, wire)
    objects = _render(created, runtime_documents, schemas)

    jobsets = [o for o in objects if o["kind"] == "JobSet"]
    assert len(jobsets) == 1
    jobset = jobsets[0]
    assert (jobset["metadata"]["name"], jobset["metadata"]["namespace"]) == (NAME, NAMESPACE)

    sent = created["spec"].get("trainer") or {}
    container = _trainer_container(jobset)
    if "image" in sent:
        assert container["image"] == sent["image"]
    if case.tune is None and "command" in sent:
        assert container["command"] == sent["command"]
    if case.tune is not None:
        recipe, config = case.tune
        command = container["command"]
        assert command[:2] == TUNE_COMMAND and recipe in command
        assert command[command.index("--config") + 1] == config
        assert container["args"] == sent["args"]
    assert _names(sent.get("env")) <= _names(container.get("env"))
    for kind, quantities in (sent.get("resourcesPerNode") or {}).items():
        for resource, value in quantities.items():
            # Written as Go writes the quantity (a string: `1` and `1.0` both become "1"), same value.
            assert container["resources"][kind][resource] == str(Quantity.parse(value)), (kind, resource)

    initializer = created["spec"].get("initializer") or {}
    for step, source in (("dataset-initializer", "dataset"), ("model-initializer", "model")):
        if source not in initializer:
            continue
        job = next(j for j in jobset["spec"]["replicatedJobs"] if j["name"] == step)
        init = next(c for c in job["template"]["spec"]["template"]["spec"]["containers"] if c["name"] == step)
        env = {e["name"]: e.get("value") for e in init["env"]}
        assert env["STORAGE_URI"] == initializer[source]["storageUri"]
        assert _names(initializer[source]["env"]) <= set(env)

    runtime_name = created["spec"]["runtimeRef"]["name"]
    runtime = next(d for d in runtime_documents if d.name == runtime_name)
    parsed = models.TrainerV1alpha1ClusterTrainingRuntime.from_dict(wire.sent(runtime.obj))
    assert parsed is not None
    trainer = sdk.runtime_trainer(parsed)
    steps = sdk.steps(NAME, jobset, trainer.entrypoint)
    node_steps = [s.name for s in steps if s.name.startswith("node")]
    assert len(node_steps) == len(set(node_steps)) == case.nodes
    for check in case.checks:
        check(jobset)


def test_the_sdk_keeps_runtime_patches_keyed_by_its_manager(wire: Wire) -> None:
    case = next(c for c in CASES if c.id == "options/torch-distributed")
    request = _request(case, wire)
    parsed = models.TrainerV1alpha1TrainJob.from_dict(request)
    assert parsed is not None and parsed.spec is not None and parsed.spec.runtime_patches is not None
    assert [p.manager for p in parsed.spec.runtime_patches] == [SDK_MANAGER]
    assert wire.losses(models.TrainerV1alpha1TrainJob, request) == []


def test_a_builtin_trainer_on_two_nodes_is_rejected_like_upstream(
    runtime_documents: list[Document], schemas: SchemaChecker, wire: Wire
) -> None:
    # backend_test.py "valid flow with built in trainer" asks for num_nodes=2; against the real
    # torchtune-llama3.2-1b runtime the TrainJob webhook refuses it, upstream as here.
    trainer = models.TrainerV1alpha1Trainer(command=TUNE_COMMAND, args=FULL_ARGS[1:4], numNodes=2)
    body = _as_created(wire.sent(_trainjob("torchtune-llama3.2-1b", trainer)), wire)
    with pytest.raises(RenderError) as raised:
        _render(body, runtime_documents, schemas)
    assert "spec.trainer.numNodes: Invalid value: 2: must be 1 for llama3_2/1B model" in raised.value.problems


def test_render_accepts_the_sdks_float_quantities_as_kube_apiserver_does(
    runtime_documents: list[Document], schemas: SchemaChecker, wire: Wire
) -> None:
    probe = models.TrainerV1alpha1Trainer(
        command=TORCH_COMMAND, numNodes=1, resourcesPerNode=_resources({"cpu": 1})
    )
    request = wire.sent(_trainjob("torch-distributed", probe))
    assert request["spec"]["trainer"]["resourcesPerNode"]["limits"]["cpu"] == 1.0  # a float on the wire
    request["metadata"]["namespace"] = NAMESPACE
    objects = _render(request, runtime_documents, schemas)
    assert [o["kind"] for o in objects] == ["ConfigMap", "JobSet"]


def test_an_sdk_runtime_patch_keeps_an_empty_dir_volume_source(
    runtime_documents: list[Document], schemas: SchemaChecker, wire: Wire
) -> None:
    patch = copy.deepcopy(SDK_PATCH)
    pod_patch = patch["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_patch["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    trainer = models.TrainerV1alpha1Trainer(command=TORCH_COMMAND, numNodes=2)
    request = wire.sent(_trainjob("torch-distributed", trainer))
    _runtime_patch(patch)(request)
    jobset = next(
        o for o in _render(_as_created(request, wire), runtime_documents, schemas) if o["kind"] == "JobSet"
    )
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert {"name": "scratch", "emptyDir": {}} in pod["volumes"]


def test_an_sdk_request_for_a_namespaced_runtime_renders_from_that_runtime(
    runtime_documents: list[Document], schemas: SchemaChecker, sdk: SdkRules, wire: Wire
) -> None:
    # backend_test.py get_train_job: the SDK prefers a TrainingRuntime of its namespace and names its kind;
    # here one shadows the cluster-wide torch-distributed, with a different image. S3 initializers without
    # optional settings send `env: []`.
    cluster = next(d for d in runtime_documents if d.name == "torch-distributed")
    namespaced = copy.deepcopy(cluster.obj)
    namespaced["kind"] = "TrainingRuntime"
    namespaced["metadata"]["namespace"] = NAMESPACE
    pod = namespaced["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["image"] = "registry.example.com/team-a/torch:2"
    parsed = models.TrainerV1alpha1TrainingRuntime.from_dict(wire.sent(namespaced))
    assert parsed is not None and sdk.runtime_trainer(parsed).image == "registry.example.com/team-a/torch:2"

    trainer = models.TrainerV1alpha1Trainer(command=TORCH_COMMAND, numNodes=2)
    request = wire.sent(_trainjob("torch-distributed", trainer, kind="TrainingRuntime"))
    objects = _render(
        _as_created(request, wire), [*runtime_documents, Document(source="ns", obj=namespaced)], schemas
    )
    (jobset,) = (o for o in objects if o["kind"] == "JobSet")
    assert _trainer_container(jobset)["image"] == "registry.example.com/team-a/torch:2"
    (snapshot,) = (o for o in objects if o["kind"] == "ConfigMap")
    assert "kind: TrainingRuntime" in snapshot["data"]["runtime"]

    s3 = models.TrainerV1alpha1Initializer(
        dataset=models.TrainerV1alpha1DatasetInitializer(storageUri="s3://bucket/data", env=[]),
        model=models.TrainerV1alpha1ModelInitializer(storageUri="s3://bucket/model", env=[]),
    )
    tune = models.TrainerV1alpha1Trainer(command=TUNE_COMMAND, args=FULL_ARGS[1:3])
    request = wire.sent(_trainjob("torchtune-llama3.2-1b", tune, s3))
    assert request["spec"]["initializer"]["dataset"]["env"] == []
    objects = _render(_as_created(request, wire), runtime_documents, schemas)
    (jobset,) = (o for o in objects if o["kind"] == "JobSet")
    uris = {
        job["name"]: job["template"]["spec"]["template"]["spec"]["containers"][0]["env"][0]
        for job in jobset["spec"]["replicatedJobs"][:2]
    }
    assert uris == {
        "dataset-initializer": {"name": "STORAGE_URI", "value": "s3://bucket/data"},
        "model-initializer": {"name": "STORAGE_URI", "value": "s3://bucket/model"},
    }
