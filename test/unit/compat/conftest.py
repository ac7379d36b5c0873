"""Fixtures for the SDK wire-compatibility tests: the Kubeflow Python SDK's rules, and the wire between.

The Kubeflow Python SDK (`kubeflow` 0.5 with the generated models of `kubeflow_trainer_api` 2.3.0) reads
(Cluster)TrainingRuntimes, TrainJobs and Pods through strict pydantic models plus a few rules of its own.
The models are installed here as a dev dependency; the `kubeflow` package is not
(it pins an older `kubernetes` client), so `SdkRules` restates its rules from the SDK's source
(`kubeflow/trainer/backends/kubernetes/{backend,utils}.py`, `kubeflow/trainer/constants/constants.py`),
and `test_compat_runtimes.py` checks the restatement against cases of the SDK's own `backend_test.py`.

Fixtures:
- `sdk`: `SdkRules`, what the SDK concludes from the objects it reads.
- `wire`: `Wire`, what happens to an object between the SDK and us: the `kubernetes` client's JSON
  encoding, what kube-apiserver stores, and what a model round trip keeps.
- `runtime_documents` (session): the default ClusterTrainingRuntimes of `config/runtimes/`, as
  `trainer-render` loads them; `example_runtime_documents` (session): the example runtimes of the golden
  files (`test/golden/runtimes/`).
- `schemas` (session): the structural schemas of `config/crd/`, parsed once (`runtime.render.SchemaChecker`).

Pods are emulated (`pods_of`: what the JobSet and Job controllers would create from a JobSet). Not
modelled: the SDK's HTTP calls, and pod phases (the `Running` rule takes the count of running node steps).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubeflow_trainer_api import models
from pydantic import BaseModel

from runtime.render import DEFAULT_CRD_DIR, Document, SchemaChecker, load_documents

ROOT = Path(__file__).resolve().parents[3]
RUNTIMES_DIR = ROOT / "config" / "runtimes"
GOLDEN_DIR = ROOT / "test" / "golden"

# The SDK's vocabulary (kubeflow/trainer/constants/constants.py), spelled out here on purpose: these tests
# pin the strings the SDK was built against, not our own constants.
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
RJOB_NAME_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
NODE = "node"
LAUNCHER = "launcher"
INITIALIZERS = ("dataset-initializer", "model-initializer")
STEP_JOBS = (*INITIALIZERS, LAUNCHER, NODE)
"""The replicated jobs whose pods the SDK lists (its pod label selector)."""
TORCHTUNE = "torchtune"
CUSTOM_TRAINER = "CustomTrainer"
BUILTIN_TRAINER = "BuiltinTrainer"
UNKNOWN = "Unknown"

GPU_LABEL = "nvidia.com/gpu"
TPU_LABEL = "google.com/tpu"
MIG_PREFIX = "nvidia.com/mig-"
CPU_LABEL = "cpu"

RuntimeModel = models.TrainerV1alpha1ClusterTrainingRuntime | models.TrainerV1alpha1TrainingRuntime


class SdkRejected(Exception):
    """The SDK raises for this object (the message says what it would complain about)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeTrainer:
    """What the SDK makes of a runtime (its `types.RuntimeTrainer`, plus where it found the container)."""

    framework: str
    trainer_type: str
    """`CustomTrainer`, or `BuiltinTrainer` for the `torchtune` framework."""
    image: str
    entrypoint: str
    """The command family the SDK generates: `tune run`, `torchrun`, `mpirun` or `python`."""
    trainer_job: str
    """The replicated job whose `node` container the SDK took as the trainer."""
    num_nodes: int = 1
    device: str = UNKNOWN
    device_count: str = UNKNOWN


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One step of a TrainJob as the SDK lists it (one pod)."""

    name: str
    pod_name: str
    container: str
    device: str = UNKNOWN
    device_count: str = UNKNOWN


@dataclass(frozen=True, slots=True, kw_only=True)
class Pod:
    """A pod as the JobSet and Job controllers would create it from a JobSet (see `pods_of`)."""

    name: str
    labels: dict[str, str]
    spec: dict[str, Any]


class SdkRules:
    """The SDK's reading rules, restated (source files in the module docstring)."""

    Rejected = SdkRejected

    def trainer_container(
        self, replicated_jobs: Sequence[models.JobsetV1alpha2ReplicatedJob]
    ) -> tuple[str, models.IoK8sApiCoreV1Container] | None:
        """The first `node` container of a replicated job whose template carries the ancestor label key."""
        for job in replicated_jobs:
            job_spec = job.template.spec
            if job_spec is None or job_spec.template.spec is None:
                raise SdkRejected(f"Invalid ReplicatedJob template: {job.name}")
            metadata = job.template.metadata
            if metadata is None or not metadata.labels or ANCESTOR_LABEL not in metadata.labels:
                continue
            for container in job_spec.template.spec.containers:
                if container.name == NODE:
                    return job.name, container
        return None

    def container_devices(
        self, resources: models.IoK8sApiCoreV1ResourceRequirements | None
    ) -> tuple[str, str] | None:
        """(device, count) from `resources.limits`; None without limits; raises for unknown devices."""
        if resources is None or resources.limits is None:
            return None
        limits = resources.limits
        mig = [key for key in limits if key.startswith(MIG_PREFIX)]
        if GPU_LABEL in limits:
            device, key = "gpu", GPU_LABEL
        elif TPU_LABEL in limits:
            device, key = "tpu", TPU_LABEL
        elif mig:
            if len(mig) > 1:
                raise SdkRejected(f"Multiple MIG resource types are not supported yet: {mig}")
            device, key = mig[0].split("/")[1], mig[0]
        elif CPU_LABEL in limits:
            device, key = CPU_LABEL, CPU_LABEL
        else:
            raise SdkRejected(f"Unknown device type in the container resources: {sorted(limits)}")
        count = limits[key].actual_instance
        if count is None:
            raise SdkRejected(f"Failed to get device count for resources: {sorted(limits)}")
        return device, str(count)

    def runtime_trainer(self, runtime: RuntimeModel) -> RuntimeTrainer:
        """The SDK's `get_runtime`/`list_runtimes` view of a runtime; raises `SdkRejected` like the SDK."""
        metadata, spec = runtime.metadata, runtime.spec
        if (
            metadata is None
            or not metadata.name
            or spec is None
            or spec.ml_policy is None
            or spec.template.spec is None
            or not spec.template.spec.replicated_jobs
        ):
            raise SdkRejected(
                "invalid — missing one or more required fields: "
                "metadata.name, spec.mlPolicy, spec.template.spec.replicatedJobs"
            )
        if not metadata.labels or FRAMEWORK_LABEL not in metadata.labels:
            raise SdkRejected(f"Runtime {metadata.name} must have {FRAMEWORK_LABEL} label")
        framework = metadata.labels[FRAMEWORK_LABEL]
        found = self.trainer_container(spec.template.spec.replicated_jobs)
        if found is None or not found[1].image:
            raise SdkRejected("Runtime doesn't have trainer container")
        job_name, container = found
        policy = spec.ml_policy
        device, device_count = self.container_devices(container.resources) or (UNKNOWN, UNKNOWN)
        if policy.mpi is not None and policy.mpi.num_proc_per_node:
            device_count = str(policy.mpi.num_proc_per_node)
        if device_count.isdigit() and policy.num_nodes:
            device_count = str(int(device_count) * policy.num_nodes)
        if framework == TORCHTUNE:
            entrypoint = "tune run"
        elif policy.torch is not None:
            entrypoint = "torchrun"
        elif policy.mpi is not None:
            entrypoint = "mpirun"
        else:
            entrypoint = "python"
        return RuntimeTrainer(
            framework=framework,
            trainer_type=BUILTIN_TRAINER if framework == TORCHTUNE else CUSTOM_TRAINER,
            image=container.image,
            entrypoint=entrypoint,
            trainer_job=job_name,
            num_nodes=policy.num_nodes or 1,
            device=device,
            device_count=device_count,
        )

    def listed(self, runtimes: Sequence[RuntimeModel]) -> list[str]:
        """The names `list_runtimes` returns: runtimes without the framework label are skipped."""
        return [
            r.metadata.name
            for r in runtimes
            if r.metadata is not None and r.metadata.labels and FRAMEWORK_LABEL in r.metadata.labels
        ]

    def selects(self, trainjob_name: str, pod_labels: Mapping[str, str]) -> bool:
        """The SDK's pod label selector: `jobset-name=<trainjob>,replicatedjob-name in (<STEP_JOBS>)`."""
        return pod_labels.get(JOBSET_NAME_LABEL) == trainjob_name and pod_labels.get(RJOB_NAME_LABEL) in (
            STEP_JOBS
        )

    def steps(self, trainjob_name: str, jobset: Mapping[str, Any], entrypoint: str) -> list[Step]:
        """The SDK's `get_job` steps from the pods the JobSet runs (`pods_of`); raises `SdkRejected` where
        the SDK would fail (a listed pod without the expected container or completion-index label)."""
        steps: list[Step] = []
        for pod in pods_of(jobset):
            if not self.selects(trainjob_name, pod.labels):
                continue
            spec = models.IoK8sApiCoreV1PodSpec.from_dict(pod.spec)
            if spec is None:
                raise SdkRejected(f"TrainJob Pod is invalid: {pod.name}")
            job = pod.labels[RJOB_NAME_LABEL]
            if job in INITIALIZERS:
                wanted: tuple[str, ...] = INITIALIZERS
                name = ""
            else:
                wanted = (NODE,)
                index = pod.labels.get(JOB_INDEX_LABEL)
                if index is None or not index.isdigit():
                    raise SdkRejected(f"pod {pod.name} has no {JOB_INDEX_LABEL} label")
                shift = 1 if entrypoint == "mpirun" and job != LAUNCHER else 0
                name = f"{NODE}-{int(index) + shift}"
            container = next((c for c in spec.containers if c.name in wanted), None)
            if container is None:
                raise SdkRejected(f"pod {pod.name} has no container named one of {wanted}")
            device, count = self.container_devices(container.resources) or (UNKNOWN, UNKNOWN)
            for env in container.env or ():
                if env.name == "PET_NPROC_PER_NODE" and env.value and env.value.isdigit():
                    count = env.value
            steps.append(
                Step(
                    name=name or container.name,
                    pod_name=pod.name,
                    container=container.name,
                    device=device,
                    device_count=count,
                )
            )
        return steps

    def trainjob_status(
        self, trainjob: models.TrainerV1alpha1TrainJob, *, running_node_steps: int = 0, num_nodes: int = 1
    ) -> str:
        """`Complete`/`Failed` from True conditions; else `Running` when every node step runs; else `Created`.

        As in the SDK, a TrainJob with any conditions at all (say `Suspended=False`) never becomes
        `Running`: the pod count is only consulted when there are no conditions.
        """
        status = "Created"
        if trainjob.status is not None and trainjob.status.conditions:
            for condition in trainjob.status.conditions:
                if condition.type in ("Complete", "Failed") and condition.status == "True":
                    status = condition.type
        elif running_node_steps == num_nodes:
            status = "Running"
        return status


def pods_of(jobset: Mapping[str, Any]) -> Iterator[Pod]:
    """The pods of a JobSet once it runs: one per (job index, completion index) of each replicated job.

    Labels are those JobSet v0.12 and the Job controller put on pods (the template's own labels first;
    `jobset.sigs.k8s.io/jobset-name` is the JobSet's name); completion mode is Indexed (JobSet's default).
    Names follow `<jobset>-<job>-<jobIndex>-<completionIndex>` (the pod's hostname; real names add a
    random suffix).
    """
    name = jobset["metadata"]["name"]
    for job in jobset["spec"]["replicatedJobs"]:
        job_spec = job["template"]["spec"]
        pod_template = job_spec["template"]
        for job_index in range(int(job.get("replicas", 1))):
            for completion in range(int(job_spec.get("parallelism", 1))):
                labels = {
                    **((pod_template.get("metadata") or {}).get("labels") or {}),
                    JOBSET_NAME_LABEL: name,
                    RJOB_NAME_LABEL: job["name"],
                    "jobset.sigs.k8s.io/job-index": str(job_index),
                    JOB_INDEX_LABEL: str(completion),
                }
                yield Pod(
                    name=f"{name}-{job['name']}-{job_index}-{completion}",
                    labels=labels,
                    spec=pod_template["spec"],
                )


def _json_default(value: object) -> str:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        if not value:
            yield path, {}
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        if not value:
            yield path, []
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{index}]")
    else:
        yield path, value


def _same(original: Any, kept: Any) -> bool:
    """Equal as the SDK means it: numbers by value (Quantity 2 comes back 2.0), times as instants."""
    if isinstance(kept, dt.datetime) and isinstance(original, str):
        return kept == dt.datetime.fromisoformat(original.replace("Z", "+00:00"))
    return bool(original == kept)


class Wire:
    """What happens to objects between the SDK and the API server."""

    @staticmethod
    def sent(body: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
        """The JSON the SDK sends: `model.to_dict()` encoded as the `kubernetes` client does."""
        value = body.to_dict() if isinstance(body, BaseModel) else body  # type: ignore[attr-defined]
        decoded: dict[str, Any] = json.loads(json.dumps(value, default=_json_default))
        return decoded

    @classmethod
    def stored(cls, value: Any) -> Any:
        """`value` as kube-apiserver stores a custom resource and returns it: integral floats become ints.

        kube-apiserver accepts `1.0` where the schema says integer (go-openapi treats whole floats as
        integers) and writes it back as `1`; checked against kube-apiserver v1.36 (see
        docs/compatibility.md). Other values are unchanged.
        """
        if isinstance(value, dict):
            return {key: cls.stored(item) for key, item in value.items()}
        if isinstance(value, list):
            return [cls.stored(item) for item in value]
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value

    @staticmethod
    def losses(model: type[BaseModel], obj: Mapping[str, Any]) -> list[str]:
        """Fields of `obj` a `model.from_dict(obj).to_dict()` round trip drops or changes (sorted paths)."""
        parsed = model.from_dict(dict(obj))  # type: ignore[attr-defined]
        kept = dict(_leaves(parsed.to_dict()))
        return sorted(
            f"{path}={value!r}"
            for path, value in _leaves(dict(obj))
            if path not in kept or not _same(value, kept[path])
        )


@pytest.fixture
def sdk() -> SdkRules:
    return SdkRules()


@pytest.fixture
def wire() -> Wire:
    return Wire()


def _runtimes(directory: Path) -> list[Document]:
    return [
        d
        for d in load_documents(directory)
        if d.api_version == "trainer.kubeflow.org/v1alpha1"
        and d.kind in ("ClusterTrainingRuntime", "TrainingRuntime")
    ]


@pytest.fixture(scope="session")
def runtime_documents() -> list[Document]:
    return _runtimes(RUNTIMES_DIR)


@pytest.fixture(scope="session")
def example_runtime_documents() -> list[Document]:
    return _runtimes(GOLDEN_DIR / "runtimes")


@pytest.fixture(scope="session")
def schemas() -> SchemaChecker:
    return SchemaChecker.from_crd_dir(DEFAULT_CRD_DIR)
