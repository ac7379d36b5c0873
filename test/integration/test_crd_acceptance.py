"""CRD acceptance against a real kube-apiserver (Tier 1): what the schema and CEL accept, default and refuse.

Mirrors the CRD half of upstream's `test/integration/webhooks/*_test.go`, for upstream v2.3.0's CRDs: with
no webhook installed, every rejection here comes from the CRD schema or its CEL rules and must be HTTP 422
`Invalid` (the webhook's own rejections, 403 `Forbidden`, are tested with the webhook). What upstream's
schema accepts and the TrainJob validation refuses (counts below one) is checked against both; so are what
`kubectl explain` prints and each CRD's size as stored. Objects are written
in the shapes of upstream's examples (torch-distributed, deepspeed/MPI, TrainJobs with trainer, initializer,
runtimePatches, suspend), in our own words. The official `kubernetes` client is the HTTP client, as the
Kubeflow Python SDK uses it.
"""

from __future__ import annotations

import copy
import json
import secrets
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from controller.envtest import Binaries, ControlPlane
from runtime.core import RuntimeRegistry
from runtime.framework import Framework, MemoryReader
from runtime.plugins import builtin_registry

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
PLURALS = {
    "TrainJob": "trainjobs",
    "TrainingRuntime": "trainingruntimes",
    "ClusterTrainingRuntime": "clustertrainingruntimes",
}
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


# -- client plumbing -------------------------------------------------------------------------------------


class Trainer:
    """A thin wrapper over CustomObjectsApi for the three Trainer kinds."""

    def __init__(self, api: k8s.CustomObjectsApi) -> None:
        self.api = api

    def create(self, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        plural = PLURALS[obj["kind"]]
        if obj["kind"] == "ClusterTrainingRuntime":
            return self.api.create_cluster_custom_object(GROUP, VERSION, plural, obj)  # type: ignore[no-any-return]
        return self.api.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, obj)  # type: ignore[no-any-return]

    def create_with_status(
        self, obj: dict[str, Any], namespace: str
    ) -> tuple[dict[str, Any], int, dict[str, str]]:
        """Create a namespaced object and return (object, HTTP status, headers)."""
        return self.api.create_namespaced_custom_object_with_http_info(  # type: ignore[no-any-return]
            GROUP, VERSION, namespace, PLURALS[obj["kind"]], obj
        )

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        if kind == "ClusterTrainingRuntime":
            return self.api.get_cluster_custom_object(GROUP, VERSION, PLURALS[kind], name)  # type: ignore[no-any-return]
        return self.api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURALS[kind], name)  # type: ignore[no-any-return]

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        return self.api.replace_namespaced_custom_object(  # type: ignore[no-any-return]
            GROUP, VERSION, meta["namespace"], PLURALS[obj["kind"]], meta["name"], obj
        )

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        return self.api.replace_namespaced_custom_object_status(  # type: ignore[no-any-return]
            GROUP, VERSION, meta["namespace"], PLURALS[obj["kind"]], meta["name"], obj
        )

    def apply(self, obj: dict[str, Any], namespace: str, manager: str) -> dict[str, Any]:
        """Server-side apply (force), as a controller or Kueue would."""
        return self.api.patch_namespaced_custom_object(  # type: ignore[no-any-return]
            GROUP,
            VERSION,
            namespace,
            PLURALS[obj["kind"]],
            obj["metadata"]["name"],
            obj,
            field_manager=manager,
            force=True,
            _content_type="application/apply-patch+yaml",
        )

    def delete_cluster(self, kind: str, name: str) -> None:
        self.api.delete_cluster_custom_object(GROUP, VERSION, PLURALS[kind], name)


@pytest.fixture(scope="module")
def trainer(kubeconfig: Path) -> Iterator[Trainer]:
    api_client = k8s_config.new_client_from_config(config_file=str(kubeconfig))
    try:
        yield Trainer(k8s.CustomObjectsApi(api_client))
    finally:
        api_client.close()


@pytest.fixture
def cluster_names(trainer: Trainer) -> Iterator[Callable[[str], str]]:
    """Unique names for cluster-scoped runtimes; every runtime created under one is deleted afterwards."""
    made: list[str] = []

    def name(prefix: str) -> str:
        made.append(f"{prefix}-{secrets.token_hex(3)}")
        return made[-1]

    yield name
    for each in made:
        try:
            trainer.delete_cluster("ClusterTrainingRuntime", each)
        except ApiException as exc:
            if exc.status != 404:
                raise


def expect_invalid(call: Callable[[], Any], *fragments: str) -> dict[str, Any]:
    """Run `call`; require HTTP 422, reason Invalid and every fragment in the message; return the Status."""
    with pytest.raises(ApiException) as caught:
        call()
    status = json.loads(caught.value.body)
    assert (caught.value.status, status.get("reason")) == (422, "Invalid"), status
    for fragment in fragments:
        assert fragment in status["message"], status["message"]
    return dict(status)


# -- objects in upstream's example shapes ----------------------------------------------------------------


def container(name: str, image: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": image, **extra}


def replicated_job(
    name: str, ancestor: str | None, *containers: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    metadata = {"labels": {ANCESTOR: ancestor}} if ancestor else {}
    return {
        "name": name,
        "template": {
            "metadata": metadata,
            "spec": {"template": {"spec": {"containers": list(containers)}}},
        },
        **extra,
    }


def torch_runtime(kind: str, name: str) -> dict[str, Any]:
    """A torch-distributed-like runtime: dataset and model initializers, then the `node` trainer job."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        replicated_job(
                            "dataset-initializer",
                            "dataset-initializer",
                            container(
                                "dataset-initializer",
                                "ghcr.io/kubeflow/trainer/dataset-initializer",
                                volumeMounts=[{"name": "initializer", "mountPath": "/workspace"}],
                            ),
                        ),
                        replicated_job(
                            "model-initializer",
                            "model-initializer",
                            container("model-initializer", "ghcr.io/kubeflow/trainer/model-initializer"),
                            dependsOn=[{"name": "dataset-initializer", "status": "Complete"}],
                        ),
                        replicated_job(
                            "node",
                            "trainer",
                            container(
                                "node",
                                "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
                                command=["/bin/bash", "-c", "torchrun train.py"],
                                resources={"limits": {"cpu": 2, "memory": "4Gi"}},
                            ),
                            dependsOn=[{"name": "model-initializer", "status": "Complete"}],
                        ),
                    ]
                }
            },
        },
    }


def mpi_runtime(name: str, **mpi: Any) -> dict[str, Any]:
    """A deepspeed-like MPI runtime: a launcher and the `node` workers."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "deepspeed"}},
        "spec": {
            "mlPolicy": {"numNodes": 2, "mpi": mpi},
            "template": {
                "spec": {
                    "network": {"publishNotReadyAddresses": True},
                    "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                    "replicatedJobs": [
                        replicated_job(
                            "launcher",
                            "trainer",
                            container(
                                "node", "ghcr.io/kubeflow/trainer/deepspeed-runtime", command=["mpirun"]
                            ),
                        ),
                        replicated_job(
                            "node",
                            None,
                            container(
                                "node",
                                "ghcr.io/kubeflow/trainer/deepspeed-runtime",
                                command=["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"],
                            ),
                        ),
                    ],
                }
            },
        },
    }


def trainjob(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec},
    }


def patch(manager: str, job: str = "node", **pod_spec: Any) -> dict[str, Any]:
    return {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [{"name": job, "template": {"spec": {"template": {"spec": pod_spec}}}}]
                }
            }
        },
    }


# -- runtimes (upstream: trainingruntime/clustertrainingruntime webhook tests, cases 32-46) -------------


def test_a_torch_distributed_cluster_training_runtime_is_accepted(
    trainer: Trainer, cluster_names: Callable[[str], str]
) -> None:
    # Upstream: "Should succeed to create ClusterTrainingRuntime".
    name = cluster_names("torch-distributed")
    trainer.create(torch_runtime("ClusterTrainingRuntime", name))
    got = trainer.get("ClusterTrainingRuntime", name)
    jobs = got["spec"]["template"]["spec"]["replicatedJobs"]
    assert [job["name"] for job in jobs] == ["dataset-initializer", "model-initializer", "node"]
    # JobSet's own schema defaults apply inside the embedded template.
    assert [(job["replicas"], job["groupName"]) for job in jobs] == [(1, "default")] * 3
    # Template metadata is typed, not pruned: the ancestor label survives.
    assert jobs[2]["template"]["metadata"]["labels"] == {ANCESTOR: "trainer"}
    # Quantities stay as written (an integer stays an integer).
    limits = jobs[2]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": 2, "memory": "4Gi"}


def test_a_training_runtime_is_accepted(trainer: Trainer, namespace: str) -> None:
    # Upstream: "Should succeed to create TrainingRuntime".
    created = trainer.create(torch_runtime("TrainingRuntime", "torch"), namespace)
    assert created["spec"]["mlPolicy"] == {"numNodes": 1, "torch": {}}


def test_an_mpi_runtime_gets_upstreams_mpi_defaults(trainer: Trainer, namespace: str) -> None:
    # Upstream cases 43-46: mpiImplementation, sshAuthMountPath, runLauncherAsNode, numProcPerNode defaulted.
    created = trainer.create(mpi_runtime("deepspeed"), namespace)
    assert created["spec"]["mlPolicy"]["mpi"] == {
        "mpiImplementation": "OpenMPI",
        "numProcPerNode": 1,
        "runLauncherAsNode": False,
        "sshAuthMountPath": "/root/.ssh",
    }
    assert created["spec"]["template"]["spec"]["successPolicy"]["targetReplicatedJobs"] == ["launcher"]


def test_explicit_mpi_values_are_kept(trainer: Trainer, namespace: str) -> None:
    created = trainer.create(
        mpi_runtime("mpi", numProcPerNode=4, sshAuthMountPath="/home/mpiuser/.ssh", runLauncherAsNode=True),
        namespace,
    )
    mpi = created["spec"]["mlPolicy"]["mpi"]
    assert (mpi["numProcPerNode"], mpi["sshAuthMountPath"], mpi["runLauncherAsNode"]) == (
        4,
        "/home/mpiuser/.ssh",
        True,
    )


POLICY_COMBINATIONS = {
    "mpi and torch": {"mpi": {}, "torch": {}},
    "jax and torch": {"jax": {}, "torch": {}},
    "torch and flux": {"torch": {}, "flux": {}},
    "mpi and flux": {"mpi": {}, "flux": {}},
    "jax and flux": {"jax": {}, "flux": {}},
    "jax and mpi": {"jax": {}, "mpi": {}},
    "all four": {"torch": {}, "mpi": {}, "jax": {}, "flux": {}},
    "xgboost and torch": {"xgboost": {}, "torch": {}},
}


@pytest.mark.parametrize("policies", POLICY_COMBINATIONS.values(), ids=POLICY_COMBINATIONS.keys())
def test_two_or_more_ml_policies_are_invalid(
    trainer: Trainer, namespace: str, policies: dict[str, Any]
) -> None:
    # Upstream cases 34-40.
    runtime = torch_runtime("TrainingRuntime", "too-many")
    runtime["spec"]["mlPolicy"] = {"numNodes": 1, **policies}
    expect_invalid(lambda: trainer.create(runtime, namespace), "Only one of the policy can be configured")


def test_an_unknown_mpi_implementation_is_invalid(trainer: Trainer, namespace: str) -> None:
    # Upstream case 41.
    expect_invalid(
        lambda: trainer.create(mpi_runtime("bad-mpi", mpiImplementation="invalid"), namespace),
        "spec.mlPolicy.mpi.mpiImplementation",
        "Unsupported value",
    )


def test_intel_mpi_is_refused_by_the_enum_although_go_defines_it(trainer: Trainer, namespace: str) -> None:
    expect_invalid(
        lambda: trainer.create(mpi_runtime("intel", mpiImplementation="Intel"), namespace), "Unsupported"
    )


def test_mpi_num_proc_per_node_has_no_bound_as_in_upstream_v2_3(trainer: Trainer, namespace: str) -> None:
    # The CEL rule `self >= 1` (upstream case 42) came after v2.3.0; its CRD accepts 0, and so does ours.
    data, status, _ = trainer.create_with_status(mpi_runtime("zero-procs", numProcPerNode=0), namespace)
    assert (status, data["spec"]["mlPolicy"]["mpi"]["numProcPerNode"]) == (201, 0)


def test_flux_num_proc_per_node_zero_is_invalid_and_one_is_the_default(
    trainer: Trainer, namespace: str
) -> None:
    runtime = torch_runtime("TrainingRuntime", "flux")
    runtime["spec"]["mlPolicy"] = {"numNodes": 1, "flux": {"numProcPerNode": 0}}
    expect_invalid(lambda: trainer.create(runtime, namespace), "NumProcPerNode in fluxPolicy must be >= 1")
    runtime["spec"]["mlPolicy"]["flux"] = {}
    assert trainer.create(runtime, namespace)["spec"]["mlPolicy"]["flux"] == {"numProcPerNode": 1}


def test_torch_env_injection_may_not_target_the_node_container(trainer: Trainer, namespace: str) -> None:
    runtime = torch_runtime("TrainingRuntime", "inject")
    targets = [{"jobName": "node", "containerNames": ["sidecar", "node"]}]
    runtime["spec"]["mlPolicy"]["torch"] = {"envInjection": {"targets": targets}}
    expect_invalid(
        lambda: trainer.create(runtime, namespace),
        "containerNames must not include the main node container because PET_* envs are always "
        "injected into it",
    )
    targets[0]["containerNames"] = ["sidecar"]
    created = trainer.create(runtime, namespace)
    assert created["spec"]["mlPolicy"]["torch"]["envInjection"]["targets"] == targets


def test_pod_group_policies_get_their_defaults(trainer: Trainer, namespace: str) -> None:
    runtime = torch_runtime("TrainingRuntime", "gang")
    runtime["spec"]["podGroupPolicy"] = {"coscheduling": {}}
    assert trainer.create(runtime, namespace)["spec"]["podGroupPolicy"] == {
        "coscheduling": {"scheduleTimeoutSeconds": 60}
    }
    runtime["metadata"]["name"] = "volcano"
    runtime["spec"]["podGroupPolicy"] = {"volcano": {"networkTopology": {}}}
    assert trainer.create(runtime, namespace)["spec"]["podGroupPolicy"] == {
        "volcano": {"networkTopology": {"highestTierAllowed": 1, "mode": "hard"}}
    }


def test_an_empty_runtime_spec_is_invalid(trainer: Trainer, namespace: str) -> None:
    runtime = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "TrainingRuntime", "metadata": {"name": "empty"}}
    runtime["spec"] = {}
    expect_invalid(lambda: trainer.create(runtime, namespace), "spec", "at least 1 properties")


def test_embedded_jobset_rules_apply_inside_a_runtime(trainer: Trainer, namespace: str) -> None:
    runtime = torch_runtime("TrainingRuntime", "startup")
    runtime["spec"]["template"]["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    expect_invalid(
        lambda: trainer.create(runtime, namespace), "StartupPolicy and DependsOn APIs are mutually exclusive"
    )


def test_server_side_apply_merges_runtime_containers_and_envs_by_name(
    trainer: Trainer, namespace: str
) -> None:
    # The embedded pod template keeps its list-map keys, so two managers' entries merge instead of replacing.
    runtime = torch_runtime("TrainingRuntime", "merged")
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][2]
    node["template"]["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    trainer.apply(runtime, namespace, "team-a")
    second = copy.deepcopy(runtime)
    second_node = second["spec"]["template"]["spec"]["replicatedJobs"][2]
    second_node["template"]["spec"]["template"]["spec"]["containers"] = [
        {"name": "node", "env": [{"name": "B", "value": "2"}]},
        {"name": "sidecar", "image": "busybox"},
    ]
    second["spec"] = {"template": {"spec": {"replicatedJobs": [second_node]}}}
    merged = trainer.apply(second, namespace, "team-b")
    jobs = {job["name"]: job for job in merged["spec"]["template"]["spec"]["replicatedJobs"]}
    assert sorted(jobs) == ["dataset-initializer", "model-initializer", "node"]
    containers = {c["name"]: c for c in jobs["node"]["template"]["spec"]["template"]["spec"]["containers"]}
    assert sorted(containers) == ["node", "sidecar"]
    assert containers["node"]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert containers["node"]["image"] == "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"


# -- TrainJobs (upstream: trainjob webhook and markers tests, cases 47-97) --------------------------------


def test_a_full_trainjob_is_accepted_and_defaulted(trainer: Trainer, namespace: str) -> None:
    job = trainjob(
        "full",
        suspend=True,
        activeDeadlineSeconds=3600,
        initializer={
            "dataset": {"storageUri": "hf://tatsu-lab/alpaca", "env": [{"name": "TOKEN", "value": "x"}]},
            "model": {"storageUri": "hf://meta-llama/Llama-3.2-1B", "secretRef": {"name": "hf-token"}},
        },
        trainer={
            "image": "docker.io/team/trainer:v1",
            "command": ["torchrun", "train.py"],
            "args": ["--epochs", "2"],
            "env": [{"name": "LR", "value": "0.01"}],
            "numNodes": 2,
            "numProcPerNode": 4,
            "resourcesPerNode": {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 1}},
        },
        runtimePatches=[patch("kueue.x-k8s.io/manager", nodeSelector={"pool": "a100"})],
    )
    created = trainer.create(job, namespace)
    spec = created["spec"]
    # Upstream cases 88-90: schema defaults for absent fields.
    assert spec["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    assert spec["managedBy"] == "trainer.kubeflow.org/trainjob-controller"
    assert spec["suspend"] is True
    assert spec["trainer"]["resourcesPerNode"]["limits"] == {"nvidia.com/gpu": 1}
    assert spec["runtimePatches"][0]["manager"] == "kueue.x-k8s.io/manager"


def test_defaults_apply_only_to_absent_fields(trainer: Trainer, namespace: str) -> None:
    # Upstream cases 87 and 89: suspend defaults to false with multikueue; an explicit kind is kept.
    job = trainjob("kept", managedBy="kueue.x-k8s.io/multikueue")
    job["spec"]["runtimeRef"] = {"name": "custom", "kind": "TrainingRuntime"}
    spec = trainer.create(job, namespace)["spec"]
    assert spec["suspend"] is False
    assert spec["runtimeRef"] == {
        "name": "custom",
        "kind": "TrainingRuntime",
        "apiGroup": "trainer.kubeflow.org",
    }
    assert spec["managedBy"] == "kueue.x-k8s.io/multikueue"


def test_a_trainjob_without_a_runtime_ref_is_invalid(trainer: Trainer, namespace: str) -> None:
    job = trainjob("no-ref")
    del job["spec"]["runtimeRef"]
    expect_invalid(lambda: trainer.create(job, namespace), "spec.runtimeRef", "Required value")


@pytest.mark.parametrize(
    ("trainer_spec", "fragments"),
    [
        ({"image": "x" * 501}, ("spec.trainer.image", "Too long")),
        ({"numNodes": 2**31}, ("spec.trainer.numNodes",)),
    ],
    ids=["image too long", "numNodes beyond int32"],
)
def test_invalid_trainer_values_are_rejected_by_the_schema(
    trainer: Trainer, namespace: str, trainer_spec: dict[str, Any], fragments: tuple[str, ...]
) -> None:
    expect_invalid(
        lambda: trainer.create(trainjob("bad-trainer", trainer=trainer_spec), namespace), *fragments
    )


@pytest.mark.parametrize(
    "trainer_spec",
    [{"numNodes": 0}, {"numNodes": 1, "numProcPerNode": 1}],
    ids=["numNodes 0 is accepted (case 50)", "one node one process (case 53)"],
)
def test_edge_trainer_values_are_accepted(
    trainer: Trainer, namespace: str, trainer_spec: dict[str, Any]
) -> None:
    assert (
        trainer.create(trainjob("edge", trainer=trainer_spec), namespace)["spec"]["trainer"] == trainer_spec
    )


NONSENSE_COUNTS = {
    "numNodes -1 (case 49)": ({"numNodes": -1}, "spec.trainer.numNodes: Invalid value: -1"),
    "numNodes 0": ({"numNodes": 0}, "spec.trainer.numNodes: Invalid value: 0"),
    "numProcPerNode -5 (case 51)": ({"numProcPerNode": -5}, "spec.trainer.numProcPerNode: Invalid value: -5"),
    "numProcPerNode 0 (case 52)": ({"numProcPerNode": 0}, "spec.trainer.numProcPerNode: Invalid value: 0"),
}


@pytest.mark.parametrize(("trainer_spec", "error"), NONSENSE_COUNTS.values(), ids=NONSENSE_COUNTS.keys())
def test_counts_below_one_pass_the_schema_as_upstreams_and_fail_the_trainjob_validation(
    trainer: Trainer,
    namespace: str,
    cluster_names: Callable[[str], str],
    trainer_spec: dict[str, Any],
    error: str,
) -> None:
    # Upstream v2.3.0's CRD has no bound on either count, so the API server stores them (201, no webhook
    # here); the TrainJob webhook's validation, run on the object as stored, refuses them with a field error.
    runtime_name = cluster_names("torch-distributed")
    runtime = trainer.create(torch_runtime("ClusterTrainingRuntime", runtime_name))
    job = trainjob("counts", trainer=trainer_spec)
    job["spec"]["runtimeRef"]["name"] = runtime_name
    stored, status, _ = trainer.create_with_status(job, namespace)
    assert (status, stored["spec"]["trainer"]) == (201, trainer_spec)
    registry = RuntimeRegistry(Framework(builtin_registry()))
    errors = [str(e) for e in registry.validate(None, stored, MemoryReader([runtime])).errors]
    assert errors == [f"{error}: must be greater than or equal to 1"]


STORAGE_URIS = [
    ("dataset", "invalid-uri", False),  # case 62
    ("dataset", "", True),  # case 63
    ("dataset", "s3://", False),  # case 64
    ("dataset", "s3://bucket/path", True),  # case 65
    ("model", "invalid-uri", False),  # case 66
    ("model", "gs://bucket/model", True),  # case 67
]


@pytest.mark.parametrize(("which", "uri", "ok"), STORAGE_URIS, ids=[f"{w} {u!r}" for w, u, _ in STORAGE_URIS])
def test_storage_uri_must_be_empty_or_scheme_and_path(
    trainer: Trainer, namespace: str, which: str, uri: str, ok: bool
) -> None:
    job = trainjob("uri", initializer={which: {"storageUri": uri}})
    if ok:
        assert trainer.create(job, namespace)["spec"]["initializer"][which]["storageUri"] == uri
    else:
        expect_invalid(
            lambda: trainer.create(job, namespace),
            f"spec.initializer.{which}.storageUri",
            "storageUri may be empty, or it must be a valid URI (scheme://...)",
        )


@pytest.mark.parametrize("field", ["command", "args"])
def test_command_and_args_items_may_be_one_mebibyte_and_no_more(
    trainer: Trainer, namespace: str, field: str
) -> None:
    # Upstream cases 68-71.
    limit = 1024 * 1024
    created = trainer.create(trainjob(f"{field}-max", trainer={field: ["x" * limit]}), namespace)
    assert len(created["spec"]["trainer"][field][0]) == limit
    expect_invalid(
        lambda: trainer.create(trainjob(f"{field}-over", trainer={field: ["x" * (limit + 1)]}), namespace),
        f"spec.trainer.{field}[0]",
        "Too long",
    )


@pytest.mark.parametrize(
    "name",
    ["valid-job-name", "a" * 63],
    ids=["a plain DNS label (case 72)", "63 characters (case 73)"],
)
def test_dns_label_names_are_accepted(trainer: Trainer, namespace: str, name: str) -> None:
    assert trainer.create(trainjob(name), namespace)["metadata"]["name"] == name


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("Invalid-Name", "a lowercase RFC 1123 subdomain"),  # case 74 (the API server's own name check)
        ("1-starts-with-digit", "metadata.name must match RFC 1035 DNS label format"),  # case 75
        ("ends-with-hyphen-", "a lowercase RFC 1123 subdomain"),  # case 76
        ("a" * 64, "metadata.name must be no more than 63 characters"),  # case 77
        ("has.a.dot", "metadata.name must match RFC 1035 DNS label format"),
    ],
    ids=["uppercase", "leading digit", "trailing hyphen", "64 characters", "dotted subdomain"],
)
def test_names_that_are_not_dns_labels_are_invalid(
    trainer: Trainer, namespace: str, name: str, fragment: str
) -> None:
    expect_invalid(lambda: trainer.create(trainjob(name), namespace), fragment)


@pytest.mark.parametrize(
    "managed_by",
    ["trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue"],
    ids=["trainjob controller (case 78)", "multikueue (case 79)"],
)
def test_managed_by_accepts_the_two_known_managers(trainer: Trainer, namespace: str, managed_by: str) -> None:
    assert (
        trainer.create(trainjob("managed", managedBy=managed_by), namespace)["spec"]["managedBy"]
        == managed_by
    )


def test_managed_by_refuses_anything_else(trainer: Trainer, namespace: str) -> None:
    # Upstream case 80.
    expect_invalid(
        lambda: trainer.create(trainjob("managed", managedBy="invalid"), namespace),
        "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set",
    )


def test_two_managers_may_each_patch_the_runtime(trainer: Trainer, namespace: str) -> None:
    # Upstream case 81; the domain-prefix check on `manager` (case 83) is the webhook's, not the schema's.
    patches = [
        patch("acme.io/manager-one", serviceAccountName="sa-one"),
        patch("acme.io/manager-two", serviceAccountName="sa-two"),
    ]
    created = trainer.create(trainjob("two-patches", runtimePatches=patches), namespace)
    assert [p["manager"] for p in created["spec"]["runtimePatches"]] == [
        "acme.io/manager-one",
        "acme.io/manager-two",
    ]


def test_duplicate_patch_managers_are_invalid(trainer: Trainer, namespace: str) -> None:
    patches = [patch("acme.io/same", nodeSelector={"a": "1"}), patch("acme.io/same", nodeSelector={"b": "2"})]
    expect_invalid(
        lambda: trainer.create(trainjob("dup", runtimePatches=patches), namespace), "Duplicate value"
    )


@pytest.mark.parametrize(("seconds", "ok"), [(300, True), (-1, False), (0, True)], ids=["300", "-1", "0"])
def test_termination_grace_period_in_a_patch_must_not_be_negative(
    trainer: Trainer, namespace: str, seconds: int, ok: bool
) -> None:
    # Upstream cases 84-86.
    job = trainjob("grace", runtimePatches=[patch("acme.io/grace", terminationGracePeriodSeconds=seconds)])
    if ok:
        trainer.create(job, namespace)
    else:
        expect_invalid(lambda: trainer.create(job, namespace), "terminationGracePeriodSeconds")


def test_active_deadline_must_be_positive(trainer: Trainer, namespace: str) -> None:
    expect_invalid(
        lambda: trainer.create(trainjob("deadline", activeDeadlineSeconds=0), namespace),
        "spec.activeDeadlineSeconds",
    )


def test_too_many_patches_are_invalid(trainer: Trainer, namespace: str) -> None:
    patches = [patch(f"acme.io/m{i}") for i in range(17)]
    expect_invalid(lambda: trainer.create(trainjob("many", runtimePatches=patches), namespace), "Too many")


# -- TrainJob updates (cases 92-97) ----------------------------------------------------------------------


@pytest.fixture
def suspended(trainer: Trainer, namespace: str) -> dict[str, Any]:
    """A suspended TrainJob with trainer, initializer and one runtime patch, as Kueue holds one."""
    job = trainjob(
        "held",
        suspend=True,
        activeDeadlineSeconds=600,
        initializer={"model": {"storageUri": "hf://org/model"}},
        trainer={"image": "trainer:v1", "numNodes": 1},
        runtimePatches=[
            patch(
                "kueue.x-k8s.io/manager",
                nodeSelector={"pool": "a"},
                terminationGracePeriodSeconds=30,
                containers=[{"name": "node", "env": [{"name": "A", "value": "1"}]}],
            )
        ],
    )
    return trainer.create(job, namespace)


def pod_spec_patch(job: dict[str, Any], index: int = 0) -> dict[str, Any]:
    jobs = job["spec"]["runtimePatches"][index]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    found: dict[str, Any] = jobs[0]["template"]["spec"]["template"]["spec"]
    return found


IMMUTABLE_UPDATES: dict[str, Callable[[dict[str, Any]], None]] = {
    "managedBy (case 92)": lambda j: j["spec"].update(managedBy="kueue.x-k8s.io/multikueue"),
    "runtimeRef.name (case 93)": lambda j: j["spec"]["runtimeRef"].update(name="other"),
    "initializer model storageUri (case 94)": lambda j: j["spec"]["initializer"]["model"].update(
        storageUri="hf://org/other"
    ),
    "trainer image (case 95)": lambda j: j["spec"]["trainer"].update(image="trainer:v2"),
    "activeDeadlineSeconds": lambda j: j["spec"].update(activeDeadlineSeconds=60),
    "terminationGracePeriodSeconds in a patch (case 97)": lambda j: pod_spec_patch(j).update(
        terminationGracePeriodSeconds=60
    ),
    "container env in a patch": lambda j: pod_spec_patch(j)["containers"][0]["env"].append({"name": "B"}),
}


@pytest.mark.parametrize("change", IMMUTABLE_UPDATES.values(), ids=IMMUTABLE_UPDATES.keys())
def test_immutable_fields_cannot_change_even_while_suspended(
    trainer: Trainer, suspended: dict[str, Any], change: Callable[[dict[str, Any]], None]
) -> None:
    updated = copy.deepcopy(suspended)
    change(updated)
    assert updated != suspended
    expect_invalid(lambda: trainer.replace(updated), "field is immutable")


def test_renaming_a_patch_manager_is_a_removal_and_an_addition(
    trainer: Trainer, suspended: dict[str, Any]
) -> None:
    # `manager` is the list-map key: CEL correlates old and new entries by it, so a renamed entry is a new one
    # and its immutability rule has no old value to compare with (as upstream).
    updated = copy.deepcopy(suspended)
    updated["spec"]["runtimePatches"][0]["manager"] = "acme.io/other"
    assert [p["manager"] for p in trainer.replace(updated)["spec"]["runtimePatches"]] == ["acme.io/other"]


def test_a_patch_node_selector_can_change_while_suspended(
    trainer: Trainer, suspended: dict[str, Any]
) -> None:
    # Upstream case 96: the scheduling fields stay mutable for Kueue.
    updated = copy.deepcopy(suspended)
    spec = pod_spec_patch(updated)
    spec["nodeSelector"] = {"pool": "b"}
    spec["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    spec["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    updated["spec"]["suspend"] = False
    replaced = trainer.replace(updated)
    assert pod_spec_patch(replaced)["nodeSelector"] == {"pool": "b"}
    assert pod_spec_patch(replaced)["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert replaced["spec"]["suspend"] is False


def test_a_second_manager_can_add_its_patch_by_server_side_apply(
    trainer: Trainer, namespace: str, suspended: dict[str, Any]
) -> None:
    # runtimePatches is a map list keyed by manager: each owner applies only its own entry.
    mine = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainJob",
        "metadata": {"name": suspended["metadata"]["name"]},
        "spec": {"runtimePatches": [patch("acme.io/scheduler", nodeSelector={"zone": "z1"})]},
    }
    applied = trainer.apply(mine, namespace, "acme-scheduler")
    assert [p["manager"] for p in applied["spec"]["runtimePatches"]] == [
        "kueue.x-k8s.io/manager",
        "acme.io/scheduler",
    ]


# -- TrainJob status ---------------------------------------------------------------------------------------


def condition(type_: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def test_status_is_a_subresource_with_well_formed_conditions_and_counters(
    trainer: Trainer, namespace: str
) -> None:
    created = trainer.create(trainjob("status", status={"conditions": []}), namespace)
    assert "status" not in created  # status on create is ignored with a status subresource
    created["status"] = {
        "conditions": [condition("Complete", "AllJobsCompleted", "jobset completed successfully")],
        "jobsStatus": [
            {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
        ],
    }
    written = trainer.replace_status(created)
    assert written["status"]["jobsStatus"][0]["succeeded"] == 1
    bad = copy.deepcopy(written)
    bad["status"]["jobsStatus"] = [{"name": "node", "succeeded": 1}]
    expect_invalid(lambda: trainer.replace_status(bad), "status.jobsStatus[0].ready", "Required value")
    bad = copy.deepcopy(written)
    bad["status"]["conditions"] = [{"type": "Complete", "status": "Maybe"}]
    expect_invalid(lambda: trainer.replace_status(bad), "status.conditions[0]")


def test_trainer_status_needs_last_updated_time_and_a_percentage(trainer: Trainer, namespace: str) -> None:
    created = trainer.create(trainjob("progress"), namespace)
    created["status"] = {"trainerStatus": {"progressPercentage": 50}}
    expect_invalid(
        lambda: trainer.replace_status(created), "lastUpdatedTime is required when trainerStatus is present"
    )
    created["status"] = {
        "trainerStatus": {"progressPercentage": 150, "lastUpdatedTime": "2026-01-01T00:00:00Z"}
    }
    expect_invalid(lambda: trainer.replace_status(created), "progressPercentage")
    metrics = [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}]
    created["status"] = {
        "trainerStatus": {
            "progressPercentage": 42,
            "metrics": metrics,
            "lastUpdatedTime": "2026-01-01T00:00:00Z",
        }
    }
    assert trainer.replace_status(created)["status"]["trainerStatus"]["metrics"] == metrics


# -- the CRDs themselves: what `kubectl explain` shows, and what it takes to install them ---------------


def served_schema(control_plane: ControlPlane, kind: str) -> dict[str, Any]:
    """The kind's schema in the apiserver's published OpenAPI v3 document, which `kubectl explain` reads."""
    response = control_plane.admin_request("GET", f"/openapi/v3/apis/{GROUP}/{VERSION}")
    assert response.status == 200, response.body
    schemas = json.loads(response.body)["components"]["schemas"]
    return dict(schemas[f"org.kubeflow.trainer.{VERSION}.{kind}"])


def test_the_published_openapi_describes_our_fields_and_embedded_ones(
    control_plane: ControlPlane, eventually: Callable[..., Any]
) -> None:
    schema = eventually(lambda: served_schema(control_plane, "TrainJob"))
    trainer_fields = schema["properties"]["spec"]["properties"]["trainer"]["properties"]
    assert "Number of training nodes" in trainer_fields["numNodes"]["description"]
    env = trainer_fields["env"]["items"]["properties"]["name"]
    assert env["description"]  # from the apiserver's own EnvVar schema
    runtime = eventually(lambda: served_schema(control_plane, "TrainingRuntime"))
    replicated = runtime["properties"]["spec"]["properties"]["template"]["properties"]["spec"]["properties"]
    assert replicated["replicatedJobs"]["description"]  # from JobSet's CRD


def test_kubectl_explain_prints_the_description_of_spec_trainer_num_nodes(
    control_plane: ControlPlane, envtest_binaries: Binaries, eventually: Callable[..., Any]
) -> None:
    kubectl = envtest_binaries.kube_apiserver.parent / "kubectl"
    if not kubectl.is_file():
        pytest.skip(f"no kubectl beside kube-apiserver ({kubectl})")
    eventually(lambda: served_schema(control_plane, "TrainJob"))

    def explain() -> str:
        done = subprocess.run(
            [
                str(kubectl),
                "--kubeconfig",
                str(control_plane.kubeconfig),
                "explain",
                "trainjobs.spec.trainer.numNodes",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    out = eventually(explain, timeout=30.0)
    assert "FIELD: numNodes <integer>" in out
    assert "Number of training nodes" in out


@pytest.mark.parametrize("plural", sorted(PLURALS.values()))
def test_each_crd_as_stored_fits_etcd_and_the_runtimes_need_server_side_apply(
    control_plane: ControlPlane, plural: str
) -> None:
    path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.{GROUP}"
    stored = control_plane.admin_request("GET", path)
    assert stored.status == 200, stored.body
    # As stored (server-side applied: managedFields included), well under etcd's 1.5 MiB request limit.
    assert len(stored.body) < 1024 * 1024, len(stored.body)
    # Client-side apply keeps the whole CRD in an annotation, and annotations may hold 256 KiB in all: too
    # little for the runtime CRDs (as for upstream's), so they must be applied server-side.
    crd = json.loads(stored.body)
    last_applied = json.dumps(
        {key: crd[key] for key in ("apiVersion", "kind", "spec")}, separators=(",", ":")
    )
    annotated = control_plane.admin_request(
        "PATCH",
        f"{path}?dryRun=All",
        {"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied}}},
        content_type="application/merge-patch+json",
    )
    too_large = len(last_applied) > 256 * 1024
    assert too_large == (plural != "trainjobs"), len(last_applied)
    assert annotated.status == (422 if too_large else 200), annotated.body[:500]
    if too_large:
        assert b"Too long" in annotated.body
