"""The MPI plugin: counts, slots, SSH and hostfile volumes, OpenMPI envs, the Secret and the hostfile."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from runtime.buildable import UnbuildableError
from runtime.framework import FieldError, ReadError, Validation, Watch
from runtime.plugins.mpi import MPI, SSHKeyPair, generate_ssh_key_pair, ssh_key_pair

# A fixed key, so the Secret the plugin builds is an exact, comparable value.
FIXED_KEY = ec.derive_private_key(0x5EED_CAFE_F00D, ec.SECP521R1())
FIXED_PAIR = ssh_key_pair(FIXED_KEY)


def _plugin() -> MPI:
    return MPI(keygen=lambda: FIXED_PAIR)


def _mpi(num_proc: int = 1, *, launcher_as_node: bool = False, path: str = "/root/.ssh") -> dict[str, Any]:
    return {
        "numProcPerNode": num_proc,
        "mpiImplementation": "OpenMPI",
        "sshAuthMountPath": path,
        "runLauncherAsNode": launcher_as_node,
    }


def ssh_volume(tj: str = "trainJob") -> dict[str, Any]:
    return {
        "name": "mpi-ssh-auth",
        "secret": {
            "secretName": f"{tj}-mpi-ssh-auth",
            "defaultMode": 256,
            "items": [
                {"key": "ssh-privatekey", "path": "id_rsa", "mode": 416},
                {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 420},
                {"key": "ssh-publickey", "path": "authorized_keys", "mode": 420},
            ],
        },
    }


def hostfile_volume(tj: str = "trainJob") -> dict[str, Any]:
    return {
        "name": "mpi-hostfile",
        "configMap": {
            "name": f"{tj}-mpi-hostfile",
            "items": [{"key": "hostfile", "path": "hostfile", "mode": 292}],
        },
    }


def owned_metadata(name: str, tj: str, uid: str) -> dict[str, Any]:
    """What the plugin's Secret and ConfigMap carry: the TrainJob as controller, and its name as a label."""
    owner = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "name": tj,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "name": name,
        "namespace": "default",
        "labels": {"trainer.kubeflow.org/trainjob-name": tj},
        "ownerReferences": [owner],
    }


def secret(tj: str = "trainJob", uid: str = "trainJob", pair: SSHKeyPair = FIXED_PAIR) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": owned_metadata(f"{tj}-mpi-ssh-auth", tj, uid),
        "type": "kubernetes.io/ssh-auth",
        "immutable": True,
        "data": {
            "ssh-privatekey": base64.b64encode(pair.private_key).decode(),
            "ssh-publickey": base64.b64encode(pair.public_key).decode(),
        },
    }


def hostfile(text: str, tj: str = "trainJob", uid: str = "trainJob") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": owned_metadata(f"{tj}-mpi-hostfile", tj, uid),
        "data": {"hostfile": text},
    }


OPENMPI_LAUNCHER_ENV = [
    {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
    {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
    {"name": "OMPI_MCA_orte_set_default_slots", "value": "1"},
    {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
]


# EnforceMLPolicy and Build ---------------------------------------------------------------------------------


def test_no_action_without_an_ml_policy(make: Any) -> None:
    # upstream: "no action when mlPolicySource is nil"
    trainjob = make.trainjob(trainer={"numNodes": 2})
    info = make.info(
        trainjob, make.runtime_spec(make.job("node", ancestor="trainer", containers=[make.container()]))
    )
    before = repr(info.template)
    _plugin().enforce_ml_policy(info, trainjob)
    assert repr(info.template) == before
    assert _plugin().build(info, trainjob, make.reader()) == []


def test_no_action_when_the_ml_policy_has_no_mpi_source(make: Any) -> None:
    # upstream: "no action when mlPolicySource mpi is null"
    trainjob = make.trainjob(trainer={"numNodes": 2})
    spec = make.runtime_spec(make.job("node", ancestor="trainer"), ml_policy={"numNodes": 1, "torch": {}})
    info = make.info(trainjob, spec)
    _plugin().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].volumes == []
    assert _plugin().build(info, trainjob, make.reader()) == []


def test_trainjob_num_nodes_is_respected_rather_than_the_ml_policy_one(make: Any) -> None:
    # upstream: "trainJob numNodes is respected rather than mlPolicy one"
    trainjob = make.trainjob(trainer={"numNodes": 2})
    spec = make.runtime_spec(
        make.job("launcher", containers=[make.container()]),
        make.job("node", ancestor="trainer", containers=[make.container()]),
        ml_policy={"numNodes": 1, "mpi": _mpi()},
    )
    info = make.info(trainjob, spec)
    _plugin().enforce_ml_policy(info, trainjob)
    launcher, node = info.pod_sets
    assert (launcher.count, node.count) == (1, 2)
    assert launcher.volumes == [ssh_volume(), hostfile_volume()]
    assert node.volumes == [ssh_volume()]
    assert launcher.containers[0].obj == {
        "name": "node",
        "volumeMounts": [
            {"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"},
            {"name": "mpi-hostfile", "mountPath": "/etc/mpi"},
        ],
        "env": OPENMPI_LAUNCHER_ENV,
    }
    assert node.containers[0].obj == {
        "name": "node",
        "volumeMounts": [{"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"}],
    }

    make.identify_pod_network(info, trainjob)
    assert _plugin().build(info, trainjob, make.reader()) == [
        secret(),
        hostfile("trainJob-node-0-0.trainJob slots=1\ntrainJob-node-0-1.trainJob slots=1\n"),
    ]


def test_trainjob_num_proc_per_node_is_respected_rather_than_the_ml_policy_one(make: Any) -> None:
    # upstream: "trainJob numProcPerNode is respected rather than mlPolicy one"
    trainjob = make.trainjob(trainer={"numNodes": 1, "numProcPerNode": 2})
    spec = make.runtime_spec(
        make.job("launcher", containers=[make.container()]),
        make.job("node", ancestor="trainer", containers=[make.container()]),
        ml_policy={"numNodes": 1, "mpi": _mpi()},
    )
    info = make.info(trainjob, spec)
    _plugin().enforce_ml_policy(info, trainjob)
    assert info.ml_policy is not None
    assert info.ml_policy["mpi"]["numProcPerNode"] == 2
    assert {"name": "OMPI_MCA_orte_set_default_slots", "value": "2"} in info.pod_sets[0].containers[0].env
    make.identify_pod_network(info, trainjob)
    assert _plugin().build(info, trainjob, make.reader())[1] == hostfile(
        "trainJob-node-0-0.trainJob slots=2\n"
    )


def test_num_proc_per_node_becomes_the_gpu_count_of_the_trainjob(make: Any) -> None:
    # upstream: "numProcPerNode is set to number of GPUs in TrainJob"
    trainjob = make.trainjob(
        trainer={
            "numNodes": 1,
            "image": "test:trainjob",
            "command": ["trainjob"],
            "args": ["trainjob"],
            "resourcesPerNode": {"requests": {"custom.com/gpu": "5"}},
        }
    )
    spec = make.runtime_spec(
        make.job("launcher"), make.job("node", ancestor="trainer"), ml_policy={"numNodes": 1, "mpi": _mpi()}
    )
    info = make.info(trainjob, spec)
    _plugin().enforce_ml_policy(info, trainjob)
    assert info.ml_policy is not None
    assert info.ml_policy["mpi"]["numProcPerNode"] == 5
    make.identify_pod_network(info, trainjob)
    assert _plugin().build(info, trainjob, make.reader())[1] == hostfile(
        "trainJob-node-0-0.trainJob slots=5\n"
    )


def test_the_runtime_gpu_count_sets_the_slots_when_the_trainjob_has_no_resources(make: Any) -> None:
    trainjob = make.trainjob(trainer={"numNodes": 1})
    gpu_node = make.container(resources={"limits": {"nvidia.com/gpu": 8}})
    spec = make.runtime_spec(
        make.job("launcher"),
        make.job("node", ancestor="trainer", containers=[gpu_node]),
        ml_policy={"numNodes": 1, "mpi": _mpi()},
    )
    info = make.info(trainjob, spec)
    _plugin().enforce_ml_policy(info, trainjob)
    assert info.ml.mpi_num_proc_per_node == 8


def test_an_explicit_policy_num_proc_per_node_is_kept_despite_gpus(make: Any) -> None:
    trainjob = make.trainjob(trainer={"resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}})
    spec = make.runtime_spec(make.job("node", ancestor="trainer"), ml_policy={"numNodes": 1, "mpi": _mpi(3)})
    info = make.info(trainjob, spec)
    _plugin().enforce_ml_policy(info, trainjob)
    assert info.ml.mpi_num_proc_per_node == 3


def test_run_launcher_as_node_counts_the_launcher_as_one_of_the_nodes(make: Any) -> None:
    # upstream: "runLauncherAsNode is true"
    trainjob = make.trainjob(trainer={"numNodes": 10})
    spec = make.runtime_spec(
        make.job("launcher", containers=[make.container()]),
        make.job("node", ancestor="trainer", containers=[make.container()]),
        ml_policy={"numNodes": 1, "mpi": _mpi(launcher_as_node=True)},
    )
    info = make.info(trainjob, spec)
    _plugin().enforce_ml_policy(info, trainjob)
    launcher, node = info.pod_sets
    assert (launcher.count, node.count) == (1, 9)
    assert launcher.containers[0].env == OPENMPI_LAUNCHER_ENV
    make.identify_pod_network(info, trainjob)
    text = "trainJob-launcher-0-0.trainJob slots=1\n" + "".join(
        f"trainJob-node-0-{i}.trainJob slots=1\n" for i in range(9)
    )
    assert _plugin().build(info, trainjob, make.reader())[1] == hostfile(text)


@pytest.mark.parametrize(
    ("ancestor", "launcher_as_node", "num_nodes", "counts"),
    [
        # The deepspeed/mlx shape: the launcher carries the trainer label, so it starts at mlPolicy.numNodes
        # (3) pods and keeps them; node keeps its parallelism (1) unless the TrainJob sets numNodes.
        ("launcher", True, None, {"launcher": 3, "node": 1}),
        ("launcher", True, 5, {"launcher": 3, "node": 4}),
        ("launcher", False, None, {"launcher": 3, "node": 1}),
        ("launcher", False, 5, {"launcher": 3, "node": 5}),
        # Upstream's e2e shape: node carries the label, so it starts at mlPolicy.numNodes (3).
        ("node", True, None, {"launcher": 1, "node": 3}),
        ("node", True, 5, {"launcher": 1, "node": 4}),
        ("node", False, None, {"launcher": 1, "node": 3}),
        ("node", False, 5, {"launcher": 1, "node": 5}),
        # Neither: every job keeps its parallelism (1); only numNodes sizes node.
        (None, True, None, {"launcher": 1, "node": 1}),
        (None, True, 5, {"launcher": 1, "node": 4}),
        (None, False, None, {"launcher": 1, "node": 1}),
        (None, False, 5, {"launcher": 1, "node": 5}),
    ],
)
def test_counts_are_upstreams_so_that_kueue_sizes_the_pods_that_run(
    make: Any, ancestor: str | None, launcher_as_node: bool, num_nodes: int | None, counts: dict[str, int]
) -> None:
    # Upstream v2.3.0 (trainingruntime.go newRuntimeInfo, mpi.go EnforceMLPolicy), which Kueue runs on the
    # TrainJob to size its Workload: only spec.trainer.numNodes moves a count, and only node's.
    trainjob = make.trainjob(trainer={"numNodes": num_nodes} if num_nodes is not None else None)
    spec = make.runtime_spec(
        make.job(
            "launcher", ancestor="trainer" if ancestor == "launcher" else None, containers=[make.container()]
        ),
        make.job("node", ancestor="trainer" if ancestor == "node" else None, containers=[make.container()]),
        ml_policy={"numNodes": 3, "mpi": _mpi(launcher_as_node=launcher_as_node)},
    )
    info = make.info(trainjob, spec)
    _plugin().enforce_ml_policy(info, trainjob)
    assert {p.name: p.count for p in info.pod_sets} == counts
    make.identify_pod_network(info, trainjob)
    hosts = [f"trainJob-node-0-{i}.trainJob" for i in range(counts["node"])]
    if launcher_as_node:
        hosts = [f"trainJob-launcher-0-{i}.trainJob" for i in range(counts["launcher"])] + hosts
    text = "".join(f"{host} slots=1\n" for host in hosts)
    assert _plugin().build(info, trainjob, make.reader())[1] == hostfile(text)


def test_the_keys_are_mounted_at_the_policy_ssh_auth_mount_path(make: Any) -> None:
    trainjob = make.trainjob()
    spec = make.runtime_spec(
        make.job("node", ancestor="trainer", containers=[make.container(), make.container("sidecar")]),
        ml_policy={"numNodes": 1, "mpi": _mpi(path="/home/mpiuser/.ssh")},
    )
    info = make.info(trainjob, spec)
    _plugin().enforce_ml_policy(info, trainjob)
    node, sidecar = info.pod_sets[0].containers
    assert node.volume_mounts == [{"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"}]
    assert sidecar.volume_mounts == []


def test_an_implementation_other_than_openmpi_fails_the_phase(make: Any) -> None:
    trainjob = make.trainjob()
    policy = {**_mpi(), "mpiImplementation": "MPICH"}
    spec = make.runtime_spec(
        make.job("launcher", containers=[make.container()]), ml_policy={"numNodes": 1, "mpi": policy}
    )
    info = make.info(trainjob, spec)
    with pytest.raises(UnbuildableError) as raised:
        _plugin().enforce_ml_policy(info, trainjob)
    assert not raised.value.in_trainjob  # the runtime's field
    assert str(raised.value.error) == (
        'spec.mlPolicy.mpi.mpiImplementation: Invalid value: "MPICH": MPI implementation for MPICH '
        "doesn't supported"
    )


def test_an_existing_ssh_auth_secret_is_never_replaced(make: Any) -> None:
    # upstream: "sshAuth secret already has existed in the cluster"
    trainjob = make.trainjob()
    spec = make.runtime_spec(
        make.job("launcher"), ml_policy={"numNodes": 1, "mpi": _mpi(launcher_as_node=True)}
    )
    info = make.info(trainjob, spec)
    _plugin().enforce_ml_policy(info, trainjob)
    make.identify_pod_network(info, trainjob)
    existing = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "trainJob-mpi-ssh-auth", "namespace": "default"},
    }
    assert _plugin().build(info, trainjob, make.reader(existing)) == [
        hostfile("trainJob-launcher-0-0.trainJob slots=1\n")
    ]


def test_a_failing_secret_read_fails_the_build(make: Any) -> None:
    # upstream: "failed to get sshAuth secret due to API error"
    trainjob = make.trainjob()
    spec = make.runtime_spec(
        make.job("launcher"), ml_policy={"numNodes": 1, "mpi": _mpi(launcher_as_node=True)}
    )
    info = make.info(trainjob, spec)
    reader = make.reader()
    reader.errors[("v1", "Secret")] = RuntimeError("failed to get SSH Auth Secret from API during Build")
    with pytest.raises(ReadError, match="failed to get SSH Auth Secret"):
        _plugin().build(info, trainjob, reader)


def test_the_default_key_generator_makes_a_matching_p521_pair() -> None:
    pair = generate_ssh_key_pair()
    assert pair.private_key.startswith(b"-----BEGIN EC PRIVATE KEY-----\n")
    private = serialization.load_pem_private_key(pair.private_key, password=None)
    assert isinstance(private, ec.EllipticCurvePrivateKey)
    assert private.curve.name == "secp521r1"
    assert pair.public_key.startswith(b"ecdsa-sha2-nistp521 AAAA")
    assert pair.public_key.endswith(b"\n")
    public = serialization.load_ssh_public_key(pair.public_key.strip())
    assert isinstance(public, ec.EllipticCurvePublicKey)
    assert public.public_numbers() == private.public_key().public_numbers()
    assert generate_ssh_key_pair() != pair  # fresh randomness every time


def test_the_plugin_watches_only_the_labelled_configmaps_and_secrets_trainjobs_own() -> None:
    # trainer#3374: no cluster-wide ConfigMap/Secret watches.
    assert list(MPI().watches()) == [
        Watch.owned("v1", "ConfigMap", label_selector="trainer.kubeflow.org/trainjob-name"),
        Watch.owned("v1", "Secret", label_selector="trainer.kubeflow.org/trainjob-name"),
    ]


def test_an_unlabelled_secret_of_an_older_controller_is_kept_though_the_watch_does_not_select_it(
    make: Any,
) -> None:
    trainjob = make.trainjob()
    spec = make.runtime_spec(make.job("launcher"), make.job("node"), ml_policy={"mpi": _mpi()})
    info = make.info(trainjob, spec)
    _plugin().enforce_ml_policy(info, trainjob)
    make.identify_pod_network(info, trainjob)
    older = secret(pair=generate_ssh_key_pair())
    del older["metadata"]["labels"]
    (selector,) = {w.label_selector for w in MPI().watches() if w.kind == "Secret"}
    assert selector is not None and selector not in older["metadata"].get("labels", {})  # not cached
    # The Reader finds it anyway (its contract), so no new key pair is applied over the immutable Secret.
    assert _plugin().build(info, trainjob, make.reader(older)) == [
        hostfile("trainJob-node-0-0.trainJob slots=1\n")
    ]


# CustomValidation (upstream TestValidate) -----------------------------------------------------------------


def _validate(make: Any, spec: Any, trainer: dict[str, Any] | None) -> Validation:
    trainjob = make.trainjob(trainer=trainer)
    return MPI().validate(make.info(trainjob, spec), None, trainjob, make.reader())


NUM_NODES_MESSAGE = (
    "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode "
    "does not have either launcher and node"
)


@pytest.mark.parametrize(
    ("jobs", "trainer", "errors"),
    [
        # upstream: "no action when info does not have MLPolicySource" is covered below, without a policy
        # upstream: "numProcPerNode typed is int"
        (["node"], {"numProcPerNode": 8}, []),
        # upstream: "runtime does not have Launcher but TrainJob has only 1 numNodes"
        (["node"], {"numNodes": 1}, []),
        # upstream: "runtime does not have Launcher even though MPI with runLauncherAsNode has 2 numNodes"
        (["node"], {"numNodes": 2}, [FieldError.invalid("spec.trainer.numNodes", 2, NUM_NODES_MESSAGE)]),
        # upstream: "runtime does not have Node even though MPI with runLauncherAsNode has 2 numNodes"
        (["launcher"], {"numNodes": 2}, [FieldError.invalid("spec.trainer.numNodes", 2, NUM_NODES_MESSAGE)]),
        # upstream: "runtime does not have Launcher and Node even though MPI with runLauncherAsNode has 2
        # numNodes"
        ([], {"numNodes": 2}, [FieldError.invalid("spec.trainer.numNodes", 2, NUM_NODES_MESSAGE)]),
        (["launcher", "node"], {"numNodes": 2}, []),
    ],
    ids=["int numProcPerNode", "one node", "no launcher", "no node", "neither", "both"],
)
def test_validation_of_num_nodes_with_run_launcher_as_node(
    make: Any, jobs: list[str], trainer: dict[str, Any], errors: list[FieldError]
) -> None:
    spec = make.runtime_spec(
        *(make.job(j, containers=[make.container()]) for j in jobs),
        ml_policy={"numNodes": 1, "mpi": _mpi(launcher_as_node=True)},
    )
    assert _validate(make, spec, trainer) == Validation.of(errors)


def test_validation_is_silent_without_an_mpi_policy(make: Any) -> None:
    # upstream: "no action when info does not have MLPolicySource", "info does not have MPIPolicySource"
    env = [{"name": "OMPI_MCA_plm_rsh_args", "value": "x"}]
    assert _validate(make, make.runtime_spec(), {"numNodes": 5, "env": env}) == Validation()
    spec = make.runtime_spec(ml_policy={"numNodes": 1})
    assert _validate(make, spec, {"numNodes": 5, "env": env}) == Validation()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        # upstream: "trainer has reserved MPI env OMPI_MCA_orte_default_hostfile"
        (
            [{"name": "OMPI_MCA_orte_default_hostfile", "value": "/custom/hostfile"}],
            "must not have reserved envs, invalid envs configured: [OMPI_MCA_orte_default_hostfile]",
        ),
        # upstream: "trainer has multiple reserved MPI envs"
        (
            [
                {"name": "OMPI_MCA_orte_default_hostfile", "value": "/custom/hostfile"},
                {"name": "OMPI_MCA_plm_rsh_args", "value": "custom-args"},
            ],
            "must not have reserved envs, invalid envs configured: "
            "[OMPI_MCA_orte_default_hostfile OMPI_MCA_plm_rsh_args]",
        ),
        # upstream: "trainer has non-reserved env is valid"
        ([{"name": "CUSTOM_ENV", "value": "custom-value"}], None),
    ],
    ids=["one reserved", "two reserved", "not reserved"],
)
def test_validation_rejects_the_reserved_openmpi_envs(make: Any, env: list[Any], message: str | None) -> None:
    spec = make.runtime_spec(ml_policy={"numNodes": 1, "mpi": _mpi()})
    expected = [] if message is None else [FieldError.invalid("spec.trainer.env", env, message)]
    assert _validate(make, spec, {"env": env}) == Validation.of(expected)


def test_the_private_key_stays_out_of_the_key_pairs_repr() -> None:
    pair = generate_ssh_key_pair()
    assert pair.private_key.decode() not in repr(pair)
    assert b"PRIVATE KEY" not in repr(pair).encode()
    assert repr(pair.public_key) in repr(pair)
