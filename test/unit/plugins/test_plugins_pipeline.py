"""These plugins inside the whole pipeline: the built-in registry, a reconcile's build, upstream's scenarios.

Each case is one of upstream's TrainJob controller integration cases
(`test/integration/controller/trainjob_controller_test.go`), run through `RuntimeRegistry.new_objects` with
the built-in plugins in registry order, so env order across plugins (PlainML before XGBoost, the JobSet plugin
adding `spec.trainer.env` after JAX) is checked too."""

from __future__ import annotations

import base64
from typing import Any

from runtime.core import RuntimeRegistry
from runtime.framework import Framework, PluginContext, PluginEntry, PluginRegistry
from runtime.plugins import builtin_registry
from runtime.plugins.mpi import MPI, SSHKeyPair

KEYS = SSHKeyPair(private_key=b"private\n", public_key=b"public\n")
RANK = {
    "valueFrom": {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }
}


def _registry() -> RuntimeRegistry:
    entries = [
        PluginEntry(MPI.name, lambda ctx: MPI(ctx, keygen=lambda: KEYS)) if e.name == MPI.name else e
        for e in builtin_registry()
    ]
    return RuntimeRegistry(Framework(PluginRegistry(entries), PluginContext()))


def _runtime(make: Any, spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "alpha", "namespace": "default"},
        "spec": spec,
    }


def _trainjob(make: Any, **trainer: Any) -> Any:
    trainjob = make.trainjob("alpha", runtime="alpha", uid="alpha-uid", trainer=trainer)
    trainjob["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    return trainjob


def _build(make: Any, trainjob: Any, spec: Any) -> dict[str, dict[str, Any]]:
    reader = make.reader(_runtime(make, spec))
    registry = _registry()
    assert registry.validate(None, trainjob, reader).errors == ()
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in registry.new_objects(trainjob, reader)}


def _jobs(jobset: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {job["name"]: job for job in jobset["spec"]["replicatedJobs"]}


def _container(job: dict[str, Any], name: str = "node") -> dict[str, Any]:
    containers = job["template"]["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == name)


def test_openmpi_runtime_builds_keys_hostfile_and_launcher_envs(make: Any) -> None:
    # upstream 7.1 #10: "Create TrainJob with OpenMPI TrainingRuntime"
    spec = make.runtime_spec(
        make.job(
            "launcher",
            containers=[make.container(image="test:runtime", command=["mpirun"], args=["echo.sh"])],
        ),
        make.job("node", ancestor="trainer", containers=[make.container(image="test:runtime")]),
        ml_policy={
            "numNodes": 1,
            "mpi": {
                "numProcPerNode": 8,
                "mpiImplementation": "OpenMPI",
                "sshAuthMountPath": "/root/.ssh",
                "runLauncherAsNode": False,
            },
        },
    )
    trainjob = _trainjob(make, numNodes=2, env=[make.env("TRAIN_JOB", "value")])
    objects = _build(make, trainjob, spec)
    assert list(objects) == [
        "ConfigMap/alpha-runtime-snapshot",
        "JobSet/alpha",
        "Secret/alpha-mpi-ssh-auth",
        "ConfigMap/alpha-mpi-hostfile",
    ]
    jobs = _jobs(objects["JobSet/alpha"])
    assert jobs["node"]["template"]["spec"]["parallelism"] == 2
    assert _container(jobs["launcher"])["env"] == [
        make.env("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
        make.env("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
        make.env("OMPI_MCA_orte_set_default_slots", "8"),
        make.env("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
    ]
    assert _container(jobs["node"])["env"] == [make.env("TRAIN_JOB", "value")]
    assert _container(jobs["launcher"])["volumeMounts"] == [
        {"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"},
        {"name": "mpi-hostfile", "mountPath": "/etc/mpi"},
    ]
    assert objects["ConfigMap/alpha-mpi-hostfile"]["data"] == {
        "hostfile": "alpha-node-0-0.alpha slots=8\nalpha-node-0-1.alpha slots=8\n"
    }
    secret = objects["Secret/alpha-mpi-ssh-auth"]
    assert (secret["type"], secret["immutable"]) == ("kubernetes.io/ssh-auth", True)
    assert {k: base64.b64decode(v) for k, v in secret["data"].items()} == {
        "ssh-privatekey": b"private\n",
        "ssh-publickey": b"public\n",
    }


def test_jax_runtime_gets_jax_envs_then_the_trainjob_env(make: Any) -> None:
    # upstream 7.1 #17: "Create TrainJob with Jax TrainingRuntime"
    spec = make.runtime_spec(
        make.job("node", ancestor="trainer", containers=[make.container(image="test:runtime")]),
        ml_policy={"numNodes": 1, "jax": {}},
    )
    objects = _build(make, _trainjob(make, numNodes=2, env=[make.env("TRAIN_JOB", "value")]), spec)
    node = _jobs(objects["JobSet/alpha"])["node"]
    assert node["template"]["spec"]["parallelism"] == 2
    assert _container(node)["env"] == [
        make.env("JAX_NUM_PROCESSES", "2"),
        {"name": "JAX_PROCESS_ID", **RANK},
        make.env("JAX_COORDINATOR_ADDRESS", "alpha-node-0-0.alpha:29500"),
        make.env("TRAIN_JOB", "value"),
    ]
    assert _container(node)["ports"] == [{"containerPort": 29500}]


def test_xgboost_runtime_gets_the_trainjob_env_then_dmlc_envs(make: Any) -> None:
    # upstream 7.1 #20: "Create TrainJob with XGBoost TrainingRuntime"
    spec = make.runtime_spec(
        make.job("node", ancestor="trainer", containers=[make.container(image="test:runtime")]),
        ml_policy={"numNodes": 1, "xgboost": {}},
    )
    objects = _build(make, _trainjob(make, numNodes=2, env=[make.env("TRAIN_JOB", "value")]), spec)
    node = _jobs(objects["JobSet/alpha"])["node"]
    assert node["template"]["spec"]["parallelism"] == 2
    assert _container(node)["env"] == [
        make.env("TRAIN_JOB", "value"),
        make.env("DMLC_TRACKER_URI", "alpha-node-0-0.alpha"),
        make.env("DMLC_TRACKER_PORT", "29500"),
        {"name": "DMLC_TASK_ID", **RANK},
        make.env("DMLC_NUM_WORKER", "2"),
    ]


def test_flux_runtime_wraps_the_command_and_adds_the_installer(make: Any) -> None:
    # upstream 7.1 #23: "Create TrainJob with Flux TrainingRuntime"
    spec = make.runtime_spec(
        make.job("dataset-initializer", ancestor="dataset-initializer", containers=[make.container("d")]),
        make.job("model-initializer", ancestor="model-initializer", containers=[make.container("m")]),
        make.job(
            "node", ancestor="trainer", containers=[make.container(image="test:runtime", command=["runtime"])]
        ),
        ml_policy={"numNodes": 2, "flux": {"numProcPerNode": 1}},
    )
    trainjob = _trainjob(make, numNodes=2, image="test:trainjob", command=["trainjob"], args=["trainjob"])
    objects = _build(make, trainjob, spec)
    assert list(objects) == [
        "ConfigMap/alpha-runtime-snapshot",
        "JobSet/alpha",
        "ConfigMap/alpha-flux-entrypoint",
        "Secret/alpha-flux-curve",
    ]
    node = _jobs(objects["JobSet/alpha"])["node"]
    assert (node["replicas"], node["template"]["spec"]["parallelism"]) == (1, 2)
    pod = node["template"]["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["flux-installer"]
    assert _container(node)["image"] == "test:trainjob"
    assert _container(node)["command"] == ["/bin/bash", "/etc/flux-config/entrypoint.sh", "trainjob trainjob"]
    assert "args" not in _container(node)
    assert [v["name"] for v in pod["volumes"]] == [
        "spack-install",
        "flux-install",
        "alpha-flux-entrypoint",
        "shared-memory",
        "flux-curve",
    ]
    assert sorted(objects["ConfigMap/alpha-flux-entrypoint"]["data"]) == ["entrypoint.sh", "init.sh"]
    cert = base64.b64decode(objects["Secret/alpha-flux-curve"]["data"]["curve.cert"]).decode()
    assert "public-key" in cert
    assert "secret-key" in cert


def test_coscheduling_labels_every_pod_and_builds_the_pod_group_last(make: Any) -> None:
    # upstream 7.1 #1, the PodGroup half: pod label on all jobs, PodGroup 102 members.
    each = {"resources": {"requests": {"cpu": "1", "memory": "4Gi"}}}
    spec = make.runtime_spec(
        make.job(
            "dataset-initializer", ancestor="dataset-initializer", containers=[make.container("d", **each)]
        ),
        make.job("model-initializer", ancestor="model-initializer", containers=[make.container("m", **each)]),
        make.job("node", ancestor="trainer", containers=[make.container(**each)]),
        ml_policy={"numNodes": 100},
        pod_group_policy={"coscheduling": {"scheduleTimeoutSeconds": 100}},
    )
    trainjob = _trainjob(make)
    trainjob["spec"]["suspend"] = True
    objects = _build(make, trainjob, spec)
    assert list(objects) == ["ConfigMap/alpha-runtime-snapshot", "JobSet/alpha", "PodGroup/alpha"]
    for job in objects["JobSet/alpha"]["spec"]["replicatedJobs"]:
        assert job["template"]["spec"]["template"]["metadata"]["labels"] == {
            "scheduling.x-k8s.io/pod-group": "alpha"
        }
    assert objects["PodGroup/alpha"]["spec"] == {
        "minMember": 102,
        "minResources": {"cpu": "102", "memory": "408Gi"},
        "scheduleTimeoutSeconds": 100,
    }
