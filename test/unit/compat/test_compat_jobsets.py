"""The rendered JobSets (golden files) as the Kubeflow Python SDK meets them: models, names, pods and steps.

The SDK never reads JobSets, but it reads their pods: it lists them with the selector
`jobset.sigs.k8s.io/jobset-name=<trainjob>,jobset.sigs.k8s.io/replicatedjob-name in (dataset-initializer,
model-initializer, launcher, node)`, turns each into a step (`node-<completion index>`, or the initializer's
name) from the container named like the step, and reads its devices. So every
golden JobSet of `test/golden/rendered/` is checked:

- it parses with the SDK's `JobsetV1alpha2JobSet` model without losing fields;
- it is named like its TrainJob, in the TrainJob's namespace and controlled by it, so the pods JobSet labels
  with `jobset-name=<JobSet name>` are the TrainJob's for the SDK;
- the pods it would run (`pods_of`) give the SDK a step each, without errors, with unique step names and
  as many node steps as the TrainJob has nodes (the SDK's `Running` rule).

Mirrored from the SDK's `backend_test.py` `get_mock_pod_list`: initializer pods carry a container named
like their job, node pods a container `node` and the completion-index label.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kubeflow_trainer_api import models

if TYPE_CHECKING:
    from conftest import SdkRules, Wire
    from runtime.render import Document

GOLDEN = Path(__file__).resolve().parents[3] / "test" / "golden"
GOLDEN_FILES = sorted((GOLDEN / "rendered").glob("*/*.yaml"))
SDK_JOBS = {"dataset-initializer", "model-initializer", "launcher", "node"}


def _jobset(path: Path) -> dict[str, Any]:
    (jobset,) = (d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "JobSet")
    return jobset


def _trainjob(path: Path) -> dict[str, Any]:
    trainjob: dict[str, Any] = yaml.safe_load((GOLDEN / "trainjobs" / path.name).read_text())
    return trainjob


def _runtime(path: Path, documents: list[Document]) -> dict[str, Any]:
    return next(d.obj for d in documents if d.name == path.parent.name)


def _launcher_pods(trainjob: dict[str, Any], runtime: dict[str, Any]) -> int:
    """The launcher's pods by upstream's rules: `mlPolicy.numNodes` when it is labelled ancestor trainer
    (the shipped MPI runtimes, at 1), else one."""
    policy = runtime["spec"].get("mlPolicy") or {}
    if policy.get("mpi") is None:
        return 0
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        labels = (job.get("template", {}).get("metadata") or {}).get("labels") or {}
        if (
            job["name"] == "launcher"
            and labels.get("trainer.kubeflow.org/trainjob-ancestor-step") == "trainer"
        ):
            return int(policy.get("numNodes") or 1)
    return 1


def _node_steps(trainjob: dict[str, Any], runtime: dict[str, Any]) -> int:
    """The node steps the SDK sees once every pod runs, by upstream's rules.

    Without MPI it is the TrainJob's node count, as the SDK expects. With MPI each launcher pod is a node
    step too (`node-<index>`, the nodes' steps shifted by one): with `runLauncherAsNode` the nodes are
    max(numNodes - 1, 1), so one node is counted twice at numNodes 1; without it the launcher comes on top.
    In those cases the SDK never reports `Running` (it still reports `Complete`/`Failed` from the
    conditions) — upstream does the same. Without `spec.trainer.numNodes` the node job keeps its own count
    when the launcher carries the trainer label.
    """
    policy = runtime["spec"].get("mlPolicy") or {}
    trainer_nodes = (trainjob["spec"].get("trainer") or {}).get("numNodes")
    nodes = int(trainer_nodes or policy.get("numNodes") or 1)
    mpi = policy.get("mpi")
    if mpi is None:
        return nodes
    launcher = _launcher_pods(trainjob, runtime)
    if trainer_nodes is None and launcher > 1:
        return launcher + 1  # the node job's parallelism (1), which only spec.trainer.numNodes moves
    if mpi.get("runLauncherAsNode"):
        return max(nodes - 1, 1) + launcher
    return nodes + launcher


@pytest.fixture(scope="module")
def all_runtimes(
    runtime_documents: list[Document], example_runtime_documents: list[Document]
) -> list[Document]:
    return [*runtime_documents, *example_runtime_documents]


def test_there_are_golden_jobsets_for_every_default_runtime(runtime_documents: list[Document]) -> None:
    assert {p.parent.name for p in GOLDEN_FILES} >= {d.name for d in runtime_documents}


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=[f"{p.parent.name}/{p.stem}" for p in GOLDEN_FILES])
def test_the_golden_jobset_parses_with_the_sdk_model_without_losing_fields(path: Path, wire: Wire) -> None:
    jobset = wire.sent(_jobset(path))
    parsed = models.JobsetV1alpha2JobSet.from_dict(jobset)
    assert parsed is not None and parsed.spec is not None and parsed.spec.replicated_jobs
    assert wire.losses(models.JobsetV1alpha2JobSet, jobset) == []


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=[f"{p.parent.name}/{p.stem}" for p in GOLDEN_FILES])
def test_the_jobset_is_named_like_its_trainjob_so_the_sdk_finds_its_pods(
    path: Path, all_runtimes: list[Document], sdk: SdkRules, wire: Wire
) -> None:
    jobset, trainjob = _jobset(path), _trainjob(path)
    name, namespace = trainjob["metadata"]["name"], trainjob["metadata"]["namespace"]
    assert (jobset["metadata"]["name"], jobset["metadata"]["namespace"]) == (name, namespace)
    (owner,) = (o for o in jobset["metadata"]["ownerReferences"] if o.get("controller"))
    assert (owner["apiVersion"], owner["kind"], owner["name"]) == (
        "trainer.kubeflow.org/v1alpha1",
        "TrainJob",
        name,
    )

    jobs = jobset["spec"]["replicatedJobs"]
    assert {job["name"] for job in jobs} <= SDK_JOBS  # no pod of the TrainJob is invisible to the SDK
    for job in jobs:
        # Indexed (JobSet's default) is what puts the completion-index label on pods.
        assert job["template"]["spec"].get("completionMode", "Indexed") == "Indexed"

    runtime = _runtime(path, all_runtimes)
    parsed = models.TrainerV1alpha1ClusterTrainingRuntime.from_dict(wire.sent(runtime))
    assert parsed is not None
    entrypoint = sdk.runtime_trainer(parsed).entrypoint
    steps = sdk.steps(name, jobset, entrypoint)
    assert len(steps) == sum(
        int(job.get("replicas", 1)) * int(job["template"]["spec"].get("parallelism", 1)) for job in jobs
    )
    names = [s.name for s in steps]
    if _launcher_pods(trainjob, runtime) <= 1:
        assert len(names) == len(set(names)), names
    # else the SDK's step names assume one launcher pod: its pods `node-0..n-1` meet the nodes' shifted
    # `node-1..`, as they would behind upstream, whose counts these are
    assert sum(n.startswith("node-") for n in names) == _node_steps(trainjob, runtime)
    assert {s.container for s in steps if s.name.startswith("node-")} <= {"node"}
    assert sdk.steps(f"{name}-other", jobset, entrypoint) == []  # the selector is the TrainJob's alone


@pytest.mark.parametrize(
    "path",
    [p for p in GOLDEN_FILES if p.stem in ("minimal", "gpus")],
    ids=lambda p: f"{p.parent.name}/{p.stem}",
)
def test_the_trainer_image_the_sdk_reports_is_the_one_that_runs(
    path: Path, all_runtimes: list[Document], sdk: SdkRules, wire: Wire
) -> None:
    jobset, trainjob = _jobset(path), _trainjob(path)
    parsed = models.TrainerV1alpha1ClusterTrainingRuntime.from_dict(wire.sent(_runtime(path, all_runtimes)))
    assert parsed is not None
    reported = sdk.runtime_trainer(parsed)
    job = next(j for j in jobset["spec"]["replicatedJobs"] if j["name"] == reported.trainer_job)
    (container,) = (
        c for c in job["template"]["spec"]["template"]["spec"]["containers"] if c["name"] == "node"
    )
    expected = (trainjob["spec"].get("trainer") or {}).get("image", reported.image)
    assert container["image"] == expected


def test_a_pod_without_the_node_container_or_index_is_refused_by_the_sdk(sdk: SdkRules) -> None:
    # The step checks can fail: a node job whose container is not named `node` breaks the SDK's get_job.
    jobset = _jobset(GOLDEN / "rendered" / "torch-distributed" / "minimal.yaml")
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["name"] = "trainer"
    with pytest.raises(sdk.Rejected, match="no container named"):
        sdk.steps("demo", jobset, "torchrun")
