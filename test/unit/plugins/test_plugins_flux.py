"""The Flux plugin: pod mutations, the entrypoint ConfigMap, the CURVE Secret, helpers, and a TrainJob
without spec.trainer."""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import x25519

from runtime.framework import FieldError, PhaseError, ReadError, Validation, Watch
from runtime.plugins.flux import (
    CurveKeyPair,
    Flux,
    curve_certificate,
    curve_key_pair,
    encode_z85,
    generate_curve_key_pair,
    host_range,
    hostlist,
    original_command,
)
from runtime.plugins.mpi import MPI

ENTRYPOINT = "test-job-flux-entrypoint"
FIXED_KEYS = curve_key_pair(x25519.X25519PrivateKey.from_private_bytes(bytes(range(32))))


def _spec(make: Any, *, num_nodes: int | None = None, procs: int | None = 1, **node: Any) -> Any:
    policy: dict[str, Any] = {"flux": {} if procs is None else {"numProcPerNode": procs}}
    if num_nodes is not None:
        policy["numNodes"] = num_nodes
    return make.runtime_spec(
        make.job("node", ancestor="trainer", containers=[make.container(**node)]), ml_policy=policy
    )


def _owned(make: Any, name: str, uid: str = "test-uid") -> dict[str, Any]:
    return {
        "name": name,
        "namespace": "default",
        "labels": {"trainer.kubeflow.org/trainjob-name": "test-job"},
        "ownerReferences": [make.owner("test-job", uid)],
    }


def test_no_action_without_a_flux_policy(make: Any) -> None:
    # upstream: "no action when flux policy is nil"
    trainjob = make.trainjob("test-job")
    info = make.info(
        trainjob, make.runtime_spec(make.job("node", ancestor="trainer", containers=[make.container()]))
    )
    Flux().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].pod_spec == {"containers": [{"name": "node"}]}
    assert info.trainer.command is None
    assert Flux().build(info, trainjob, make.reader()) == []


def test_flux_mutations_are_applied_correctly(make: Any) -> None:
    # upstream: "flux mutations are applied correctly"
    trainjob = make.trainjob("test-job", uid="test-uid", trainer={"numNodes": 2})
    info = make.info(trainjob, _spec(make))
    Flux().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].pod_spec == {
        "containers": [
            {
                "name": "node",
                "command": ["/bin/bash", "/etc/flux-config/entrypoint.sh", ""],
                "volumeMounts": [
                    {"name": "flux-install", "mountPath": "/mnt/flux"},
                    {"name": "spack-install", "mountPath": "/opt/software"},
                    {"name": ENTRYPOINT, "mountPath": "/etc/flux-config", "readOnly": True},
                    {"name": "flux-curve", "mountPath": "/curve", "readOnly": True},
                    {"name": "shared-memory", "mountPath": "/dev/shm", "readOnly": True},
                ],
            }
        ],
        "volumes": [
            {"name": "spack-install", "emptyDir": {}},
            {"name": "flux-install", "emptyDir": {}},
            {"name": ENTRYPOINT, "configMap": {"name": ENTRYPOINT, "defaultMode": 0o755}},
            {"name": "shared-memory", "emptyDir": {"medium": "Memory"}},
            {"name": "flux-curve", "secret": {"secretName": "test-job-flux-curve", "defaultMode": 0o400}},
        ],
        "initContainers": [
            {
                "name": "flux-installer",
                "image": "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy",
                "command": ["/bin/bash", "/etc/flux-config/init.sh"],
                "volumeMounts": [
                    {"name": "flux-install", "mountPath": "/mnt/flux"},
                    {"name": ENTRYPOINT, "mountPath": "/etc/flux-config", "readOnly": True},
                ],
            }
        ],
    }
    assert info.trainer.command == ["/bin/bash", "/etc/flux-config/entrypoint.sh", ""]
    assert info.trainer.args is None

    configmap, secret = Flux(keygen=lambda: FIXED_KEYS).build(info, trainjob, make.reader())
    assert configmap["apiVersion"] == "v1"
    assert configmap["kind"] == "ConfigMap"
    assert configmap["metadata"] == _owned(make, ENTRYPOINT)
    assert sorted(configmap["data"]) == ["entrypoint.sh", "init.sh"]
    assert secret == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _owned(make, "test-job-flux-curve"),
        "immutable": True,
        "data": {"curve.cert": base64.b64encode(curve_certificate("test-job", FIXED_KEYS).encode()).decode()},
    }


def test_the_trainjob_command_and_args_are_wrapped_by_the_entrypoint(make: Any) -> None:
    # Upstream's integration case: command/args `trainjob` become one argument of entrypoint.sh.
    trainjob = make.trainjob(
        "test-job",
        trainer={"numNodes": 2, "image": "test:trainjob", "command": ["trainjob"], "args": ["trainjob"]},
    )
    info = make.info(trainjob, _spec(make, command=["runtime"], args=["runtime-arg"]))
    Flux().enforce_ml_policy(info, trainjob)
    wrapped = ["/bin/bash", "/etc/flux-config/entrypoint.sh", "trainjob trainjob"]
    assert info.trainer.command == wrapped
    assert info.trainer.args is None
    container = info.pod_sets[0].containers[0]
    assert container.command == wrapped
    assert container.obj["args"] == ["runtime-arg"]  # the runtime's own args stay, as upstream


def test_a_trainjob_without_a_trainer_section_runs_on_the_runtime_defaults(make: Any) -> None:
    # Upstream: a nil spec.trainer (or numNodes) crashed the controller. Here N comes from the node count.
    trainjob = make.trainjob("test-job")
    info = make.info(trainjob, _spec(make, num_nodes=3, command=["flux", "getattr", "rank"]))
    Flux().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].containers[0].command == [
        "/bin/bash",
        "/etc/flux-config/entrypoint.sh",
        "flux getattr rank",
    ]
    configmap, _ = Flux().build(info, trainjob, make.reader())
    assert "hosts='test-job-node-0-[0-2]'" in configmap["data"]["init.sh"]
    assert 'flags="-N 3 -n 3"' in configmap["data"]["entrypoint.sh"]


def test_the_scripts_describe_nodes_tasks_and_gpus(make: Any) -> None:
    trainjob = make.trainjob(
        "test-job",
        trainer={"numNodes": 2, "numProcPerNode": 4, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 2}}},
    )
    info = make.info(trainjob, _spec(make, procs=1))
    Flux().enforce_ml_policy(info, trainjob)
    configmap, _ = Flux().build(info, trainjob, make.reader())
    entrypoint, init = configmap["data"]["entrypoint.sh"], configmap["data"]["init.sh"]
    assert 'flags="-N 2 -n 8 -g 2"' in entrypoint
    assert 'flux R encode --hosts="${hosts}" --cores=0-3 --gpu=0-1 > /tmp/R' in entrypoint
    assert "main_host=test-job-node-0-0\n" in entrypoint
    assert "hosts='test-job-node-0-[0-1]'\n" in init
    assert 'default_bind = "tcp://eth0:%p"\n' in init
    assert 'default_connect = "tcp://%h.test-job.default.svc.cluster.local:%p"\n' in init
    assert '{ host = "test-job-node-0-[0-1]" },\n' in init
    assert 'queue-policy = "fcfs"\n' in init
    assert "@" not in entrypoint.replace("%p", "")  # every placeholder was filled


def test_settings_come_from_runtime_envs_then_trainjob_envs(make: Any) -> None:
    trainjob = make.trainjob(
        "test-job",
        trainer={"numNodes": 1, "env": [{"name": "FLUX_QUEUE_POLICY", "value": "easy"}]},
    )
    runtime_env = [
        {"name": "FLUX_VIEW_IMAGE", "value": "example.com/flux-view:rocky"},
        {"name": "FLUX_NETWORK_DEVICE", "value": "ib0"},
        {"name": "FLUX_QUEUE_POLICY", "value": "conservative"},
    ]
    info = make.info(trainjob, _spec(make, env=runtime_env))
    Flux().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].init_containers[0].image == "example.com/flux-view:rocky"
    init = Flux().build(info, trainjob, make.reader())[0]["data"]["init.sh"]
    assert 'default_bind = "tcp://ib0:%p"' in init
    assert 'queue-policy = "easy"' in init


def test_the_brokers_connect_through_the_jobset_subdomain(make: Any) -> None:
    trainjob = make.trainjob("test-job", trainer={"numNodes": 1})
    spec = _spec(make)
    spec["template"]["spec"]["network"] = {"subdomain": "shared"}
    info = make.info(trainjob, spec)
    init = Flux().build(info, trainjob, make.reader())[0]["data"]["init.sh"]
    assert 'default_connect = "tcp://%h.shared.default.svc.cluster.local:%p"' in init


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_generated_scripts_are_valid_bash(make: Any, tmp_path: Path) -> None:
    trainjob = make.trainjob(
        "test-job", trainer={"numNodes": 4, "env": [{"name": "FLUX_QUEUE_POLICY", "value": 'it\'s "odd"'}]}
    )
    info = make.info(trainjob, _spec(make))
    Flux().enforce_ml_policy(info, trainjob)
    for key, text in Flux().build(info, trainjob, make.reader())[0]["data"].items():
        script = tmp_path / key
        script.write_text(text)
        checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
        assert checked.returncode == 0, checked.stderr


def test_an_existing_flux_installer_fails_the_phase(make: Any) -> None:
    trainjob = make.trainjob("test-job", trainer={"numNodes": 1})
    spec = make.runtime_spec(
        make.job("node", ancestor="trainer", init_containers=[make.container("flux-installer")]),
        ml_policy={"flux": {}},
    )
    with pytest.raises(PhaseError, match="InitContainer 'flux-installer' is reserved"):
        Flux().enforce_ml_policy(make.info(trainjob, spec), trainjob)


def test_the_plugin_watches_only_the_labelled_configmaps_and_secrets_trainjobs_own() -> None:
    # trainer#3374: no cluster-wide ConfigMap/Secret watches; the same declarations as MPI's.
    assert list(Flux().watches()) == [
        Watch.owned("v1", "ConfigMap", label_selector="trainer.kubeflow.org/trainjob-name"),
        Watch.owned("v1", "Secret", label_selector="trainer.kubeflow.org/trainjob-name"),
    ]
    assert list(Flux().watches()) == list(MPI().watches())


# CustomValidation (upstream TestValidate) -----------------------------------------------------------------


def _validate(make: Any, spec: Any) -> Validation:
    trainjob = make.trainjob("test-job")
    return Flux().validate(make.info(trainjob, spec), None, trainjob, make.reader())


def test_validation_without_a_flux_policy(make: Any) -> None:
    # upstream: "valid when flux policy is nil"
    spec = make.runtime_spec(make.job("node", init_containers=[make.container("flux-installer")]))
    assert _validate(make, spec) == Validation()


def test_validation_with_a_flux_policy(make: Any) -> None:
    # upstream: "valid when flux policy is present"
    assert _validate(make, _spec(make)) == Validation()


def test_validation_rejects_a_reserved_flux_installer_init_container(make: Any) -> None:
    # upstream: "invalid when node podSet includes reserved flux installer init container"
    spec = make.runtime_spec(
        make.job("node", init_containers=[make.container("flux-installer")]), ml_policy={"flux": {}}
    )
    assert _validate(make, spec) == Validation.of(
        [
            FieldError.invalid(
                "spec.trainer.initContainers", "flux-installer", "InitContainer 'flux-installer' is reserved"
            )
        ]
    )


# Helpers (upstream TestGenerateRange, TestGenerateHostlist, TestEncodeZ85, TestDeterministicCurve,
# TestBuildCurveSecret, TestGetOriginalCommand) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "start", "expected"),
    [(1, 0, "0"), (4, 0, "0-3"), (3, 10, "10-12")],
    ids=["single node", "multiple nodes starting at zero", "multiple nodes with offset start"],
)
def test_host_range(size: int, start: int, expected: str) -> None:
    assert host_range(size, start) == expected


@pytest.mark.parametrize(
    ("prefix", "size", "expected"),
    [
        ("lammps-job", 1, "lammps-job-node-0-[0]"),
        ("flux-cluster", 4, "flux-cluster-node-0-[0-3]"),
        ("", 2, "-node-0-[0-1]"),
    ],
    ids=["prefix with one node", "prefix with four nodes", "empty prefix handled"],
)
def test_hostlist(prefix: str, size: int, expected: str) -> None:
    assert hostlist(prefix, size) == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (bytes(32), "0" * 40),  # "32 bytes produces 40 characters"
        (bytes([1, 2, 3]), ""),  # "invalid length returns empty string"
        (bytes(4), "00000"),  # "all zeros produces zeros in Z85"
        (bytes.fromhex("864FD26FB559F75B"), "HelloWorld"),  # the test vector of ZeroMQ RFC 32
    ],
    ids=["32 bytes", "invalid length", "zeros", "rfc 32 vector"],
)
def test_encode_z85(data: bytes, expected: str) -> None:
    assert encode_z85(data) == expected


def _decode_z85(text: str) -> bytes:
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
    out = b""
    for offset in range(0, len(text), 5):
        value = 0
        for char in text[offset : offset + 5]:
            value = value * 85 + alphabet.index(char)
        out += value.to_bytes(4, "big")
    return out


def _certificate_keys(cert: str) -> dict[str, str]:
    return dict(
        line.strip().replace('"', "").split(" = ") for line in cert.splitlines() if line.startswith("    ")
    )


def test_the_curve_certificate_holds_the_key_pair_as_czmq_writes_it() -> None:
    cert = curve_certificate("job", FIXED_KEYS)
    assert 'metadata\n    name = "job"\ncurve\n    public-key = "' in cert  # CZMQ's 4-space indentation
    fields = _certificate_keys(cert)
    assert fields == {"name": "job", "public-key": FIXED_KEYS.public_key, "secret-key": FIXED_KEYS.secret_key}
    secret = x25519.X25519PrivateKey.from_private_bytes(_decode_z85(fields["secret-key"]))
    assert secret.public_key().public_bytes_raw() == _decode_z85(fields["public-key"])


def test_curve_key_pair_encodes_as_go_does() -> None:
    # Go's crypto/ecdh gives this public key for the private key SHA-256("uid-123") (computed once, out of
    # band): upstream's encoding of the raw keys, kept.
    private = x25519.X25519PrivateKey.from_private_bytes(hashlib.sha256(b"uid-123").digest())
    assert _decode_z85(curve_key_pair(private).public_key).hex() == (
        "f77dda31738804b6e65e72e47adcc52ff3d831fa8335fb2b0ca7fac6b6f3243c"
    )


def test_the_default_key_generator_makes_a_fresh_matching_x25519_pair() -> None:
    pair = generate_curve_key_pair()
    assert len(pair.public_key) == len(pair.secret_key) == 40
    secret = x25519.X25519PrivateKey.from_private_bytes(_decode_z85(pair.secret_key))
    assert encode_z85(secret.public_key().public_bytes_raw()) == pair.public_key
    assert generate_curve_key_pair() != pair  # fresh randomness every time


def test_the_secret_key_stays_out_of_the_key_pairs_repr() -> None:
    assert FIXED_KEYS.secret_key not in repr(FIXED_KEYS)
    assert FIXED_KEYS.public_key in repr(FIXED_KEYS)


def _secret_key(secret: dict[str, Any]) -> bytes:
    return _decode_z85(
        _certificate_keys(base64.b64decode(secret["data"]["curve.cert"]).decode())["secret-key"]
    )


def _built_secret(make: Any, trainjob: Any, plugin: Flux, *existing: Any) -> dict[str, Any] | None:
    info = make.info(trainjob, _spec(make))
    Flux().enforce_ml_policy(info, trainjob)
    secrets = [o for o in plugin.build(info, trainjob, make.reader(*existing)) if o["kind"] == "Secret"]
    return secrets[0] if secrets else None


def test_the_curve_key_cannot_be_derived_from_the_trainjob_uid(make: Any) -> None:
    # Upstream seeds X25519 with SHA-256(uid): anyone who can read the TrainJob has the brokers' key.
    keys = []
    for uid in ("uid-1", "uid-2"):
        secret = _built_secret(make, make.trainjob("test-job", uid=uid, trainer={"numNodes": 1}), Flux())
        assert secret is not None
        key = _secret_key(secret)
        assert key != hashlib.sha256(uid.encode()).digest()
        keys.append(key)
    assert keys[0] != keys[1]


def test_an_existing_curve_secret_is_never_regenerated(make: Any) -> None:
    made: list[CurveKeyPair] = []

    def keygen() -> CurveKeyPair:
        made.append(generate_curve_key_pair())
        return made[-1]

    plugin = Flux(keygen=keygen)
    trainjob = make.trainjob("test-job", trainer={"numNodes": 1})
    first = _built_secret(make, trainjob, plugin)
    assert first is not None and len(made) == 1
    # The next build finds it (the cluster, as the Reader sees it): no Secret, and no new key either.
    assert _built_secret(make, trainjob, plugin, first) is None
    assert len(made) == 1


def test_an_unlabelled_curve_secret_of_an_older_controller_is_kept(make: Any) -> None:
    trainjob = make.trainjob("test-job", uid="test-uid", trainer={"numNodes": 1})
    older = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "test-job-flux-curve", "namespace": "default"},
        "data": {"curve.cert": "b2xkZXI="},
    }
    assert _built_secret(make, trainjob, Flux(keygen=lambda: FIXED_KEYS), older) is None


def test_a_deleted_curve_secret_is_recreated_with_a_new_key(make: Any) -> None:
    # As the MPI plugin's SSH Secret: gone from the cluster means built again, from fresh randomness.
    plugin = Flux()
    trainjob = make.trainjob("test-job", trainer={"numNodes": 1})
    first = _built_secret(make, trainjob, plugin)
    assert first is not None
    assert _built_secret(make, trainjob, plugin, first) is None
    recreated = _built_secret(make, trainjob, plugin)  # deleted: the Reader no longer has it
    assert recreated is not None
    assert _secret_key(recreated) != _secret_key(first)


def test_a_failing_secret_read_fails_the_build(make: Any) -> None:
    trainjob = make.trainjob("test-job", trainer={"numNodes": 1})
    info = make.info(trainjob, _spec(make))
    reader = make.reader()
    reader.errors[("v1", "Secret")] = RuntimeError("failed to get the CURVE Secret")
    with pytest.raises(ReadError, match="failed to get the CURVE Secret"):
        Flux().build(info, trainjob, reader)


@pytest.mark.parametrize(
    ("command", "args", "expected"),
    [
        (
            ["python"],
            ["train.py", "--epochs", "10"],
            "python train.py --epochs 10",
        ),  # "full command and args"
        (["  python  "], [" script.py "], "python    script.py"),  # "command and args with extra spaces"
        (None, ["--fast"], "runtime-cmd --fast"),
        (None, None, "runtime-cmd"),
    ],
    ids=["full command and args", "extra spaces", "runtime command with args", "runtime command"],
)
def test_original_command(
    make: Any, command: list[str] | None, args: list[str] | None, expected: str
) -> None:
    trainer: dict[str, Any] = {}
    if command is not None:
        trainer["command"] = command
    if args is not None:
        trainer["args"] = args
    trainjob = make.trainjob("test", trainer=trainer)
    info = make.info(trainjob, _spec(make, command=["runtime-cmd"]))
    assert original_command(info, trainjob) == expected
