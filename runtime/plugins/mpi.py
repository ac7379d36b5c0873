"""The MPI plugin: SSH keys, a hostfile and the OpenMPI environment that let a launcher `mpirun` the nodes.

Go origin: kubeflow/trainer `pkg/runtime/framework/plugins/mpi/mpi.go` (`Validate`, `EnforceMLPolicy`,
`ReconcilerBuilders`, `Build`, `buildSSHAuthSecret`, `buildHostFileConfigMap`) and the MPI constants of
`pkg/constants/constants.go`.

Active when the runtime's `mlPolicy.mpi` is set. Only OpenMPI is implemented, as upstream.

CustomValidation:
- `spec.trainer.numNodes` ≥ 2 with `runLauncherAsNode` needs both a `launcher` and a `node` replicated job;
- `spec.trainer.env` must not set the four `OMPI_MCA_*` variables the plugin owns.

EnforceMLPolicy:
1. Counts, exactly as upstream v2.3.0: only when the TrainJob sets `spec.trainer.numNodes` (N) does the
   `node` PodSet change, to N, or N - 1 (at least 1) with `runLauncherAsNode`, since the launcher is then
   one of the N hosts. Every other count stays as `runtime.info.build_info` set it: `mlPolicy.numNodes`
   for a job labelled ancestor `trainer` (the `launcher` of the shipped MPI runtimes, so a runtime with
   `mlPolicy.numNodes` 3 runs three launcher pods), else the job's `parallelism`. Kueue sizes a TrainJob's
   Workload by running upstream's Go code on it, so any other count here would make its quota disagree
   with the pods (docs/compatibility.md, "Kueue").
2. Slots per host: `spec.trainer.numProcPerNode` if set, else the policy's; a policy value of 1 becomes the
   GPU count when that is above 1 (`resourcesPerNode`, else the runtime's `node` container; above
   `runtime.buildable.MAX_INT32` an `UnbuildableError` naming the GPU resource). The result is written back
   into Info's copy of the policy, which the hostfile reads.
3. Volumes: `mpi-ssh-auth` (Secret `<tj>-mpi-ssh-auth`, mode 0400; private key as `id_rsa` 0640, public key
   as `id_rsa.pub` and `authorized_keys` 0644) on the `node` and `launcher` PodSets; `mpi-hostfile`
   (ConfigMap `<tj>-mpi-hostfile`, `hostfile` 0444) on `launcher`. Their `node` containers mount the keys at
   `sshAuthMountPath`; the launcher's also mounts the hostfile at `/etc/mpi` and gets
   `OMPI_MCA_orte_default_hostfile`, `OMPI_MCA_orte_keep_fqdn_hostnames`, `OMPI_MCA_orte_set_default_slots`
   and `OMPI_MCA_plm_rsh_args`.

ComponentBuilder, in this order:
- the Secret `<tj>-mpi-ssh-auth` (type `kubernetes.io/ssh-auth`, immutable, ECDSA P-521: `ssh-privatekey`
  a SEC1 `EC PRIVATE KEY` PEM block, `ssh-publickey` an `authorized_keys` line), only when the Reader
  does not have it: a key pair is never replaced;
- the ConfigMap `<tj>-mpi-hostfile`, on every build: one `<endpoint> slots=<n>` line per pod of `node`
  (and of `launcher` with `runLauncherAsNode`), in template order.
Both carry the TrainJob as controller owner and the label `trainer.kubeflow.org/trainjob-name`
(`constants.LABEL_TRAINJOB_NAME`).

PodNetwork (after the JobSet plugin has named the pods): a hostfile of more than a ConfigMap holds
(`runtime.buildable.MAX_CONFIGMAP_BYTES`; some 35,000 nodes, fewer for long names) is an `UnbuildableError`
of `spec.trainer.numNodes`, or of the runtime's `spec.mlPolicy.numNodes` when the TrainJob sets none, so the
webhook refuses the TrainJob (upstream admits it, and the API server refuses the hostfile on every build).

WatchExtension: ConfigMaps and Secrets controlled by a TrainJob, only those with that label, so the
controller caches the objects TrainJobs own rather than every ConfigMap and Secret of the cluster
(trainer#3374: upstream's cluster-wide watches ran its controller out of memory). The hostfile is
re-applied on every build, so an old unlabelled one gains the label; the Secret is applied only when the
Reader does not find it, and the Reader finds unlabelled ones too (see `runtime.framework.reader`), so a
Secret an older controller wrote is never replaced.

Randomness: key generation is the one impure step of the pipeline. It goes through a `KeyGenerator`
given to the plugin (default `generate_ssh_key_pair`, from the OS's randomness); tests and `render` inject
deterministic or placeholder generators.

Deliberately missing: Intel MPI and MPICH (upstream rejects them at EnforceMLPolicy, as here, with upstream's
message as a field error of the runtime: `spec.mlPolicy.mpi.mpiImplementation: Invalid value: "MPICH": MPI
implementation for MPICH doesn't supported`, the value cut at `runtime.echo.ECHO_LIMIT` characters; an
`UnbuildableError`, so the TrainJob webhook refuses such a TrainJob at `spec.runtimeRef`, where upstream
admits it and fails every build).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView, as_dict
from runtime.buildable import MAX_CONFIGMAP_BYTES, MAX_INT32, UnbuildableError, checked_count
from runtime.echo import elide
from runtime.framework import (
    ComponentBuilder,
    CustomValidation,
    EnforceMLPolicy,
    FieldError,
    PluginContext,
    PodNetwork,
    Reader,
    Validation,
    Watch,
    WatchExtension,
)
from runtime.info import Info, PodSet
from runtime.ownership import owned_object_metadata, owned_object_watches
from runtime.plugins.trainernode import (
    env_var,
    reserved_env_error,
    resource_count,
    trainer_resources_per_node,
)
from runtime.resources import gpu_resource

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec

__all__ = [
    "MPI",
    "RESERVED_ENV_NAMES",
    "KeyGenerator",
    "SSHKeyPair",
    "generate_ssh_key_pair",
    "hostfile_name",
    "ssh_auth_secret_name",
    "ssh_key_pair",
]

NAME = "MPI"

SSH_AUTH_SECRET_SUFFIX = "-mpi-ssh-auth"
SSH_AUTH_VOLUME = "mpi-ssh-auth"
SSH_PRIVATE_KEY = "ssh-privatekey"
"""Secret key of the private key (Go `corev1.SSHAuthPrivateKey`)."""
SSH_PUBLIC_KEY = "ssh-publickey"
SSH_PRIVATE_KEY_FILE = "id_rsa"
SSH_PUBLIC_KEY_FILE = "id_rsa.pub"
SSH_AUTHORIZED_KEYS_FILE = "authorized_keys"
SSH_AUTH_DEFAULT_MODE = 0o400
SSH_PRIVATE_KEY_FILE_MODE = 0o640
SSH_PUBLIC_KEY_FILE_MODE = 0o644
SECRET_TYPE_SSH_AUTH = "kubernetes.io/ssh-auth"

HOSTFILE_DIR = "/etc/mpi"
HOSTFILE_NAME = "hostfile"
HOSTFILE_CONFIGMAP_SUFFIX = "-mpi-hostfile"
HOSTFILE_VOLUME = "mpi-hostfile"
HOSTFILE_MODE = 0o444

ENV_HOSTFILE_LOCATION = "OMPI_MCA_orte_default_hostfile"
ENV_RSH_ARGS = "OMPI_MCA_plm_rsh_args"
ENV_KEEP_FQDN_HOSTNAMES = "OMPI_MCA_orte_keep_fqdn_hostnames"
ENV_DEFAULT_SLOTS = "OMPI_MCA_orte_set_default_slots"
DEFAULT_RSH_ARGS = "-o ConnectionAttempts=10"
RESERVED_ENV_NAMES = frozenset(
    {ENV_HOSTFILE_LOCATION, ENV_RSH_ARGS, ENV_KEEP_FQDN_HOSTNAMES, ENV_DEFAULT_SLOTS}
)

_SLOTS = "the MPI slots per host"
_SLOTS_PATH = "spec.mlPolicy.mpi.numProcPerNode"
_IMPLEMENTATION_PATH = "spec.mlPolicy.mpi.mpiImplementation"
"""The runtime's field an unsupported implementation comes from (named in the EnforceMLPolicy error)."""
_NUM_NODES_MESSAGE = (
    "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode "
    "does not have either launcher and node"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SSHKeyPair:
    """An SSH key pair as the Secret stores it; its repr omits the private key, so a log line or a failed
    assertion never prints it."""

    private_key: bytes = field(repr=False)
    """PEM (`-----BEGIN EC PRIVATE KEY-----` ...)."""
    public_key: bytes
    """One `authorized_keys` line, newline-terminated (`ecdsa-sha2-nistp521 AAAA...\\n`)."""


KeyGenerator = Callable[[], SSHKeyPair]
"""Makes a fresh key pair for one TrainJob."""


def ssh_key_pair(private_key: ec.EllipticCurvePrivateKey) -> SSHKeyPair:
    """The Secret's encoding of an EC key (Go `x509.MarshalECPrivateKey` + `ssh.MarshalAuthorizedKey`)."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 - see generate_ssh_key_pair

    pem = private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    public = private_key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return SSHKeyPair(private_key=pem, public_key=public + b"\n")


def generate_ssh_key_pair() -> SSHKeyPair:
    """A new ECDSA P-521 key pair from the operating system's randomness.

    `cryptography` (8 MiB resident) is imported by the first key made, not with the plugin: a manager
    that never builds an MPI TrainJob's Secret (nor rotates certificates) never loads it."""
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415 - on first use, see above

    return ssh_key_pair(ec.generate_private_key(ec.SECP521R1()))


def ssh_auth_secret_name(trainjob_name: str) -> str:
    """`<trainjob>-mpi-ssh-auth`."""
    return trainjob_name + SSH_AUTH_SECRET_SUFFIX


def hostfile_name(trainjob_name: str) -> str:
    """`<trainjob>-mpi-hostfile`."""
    return trainjob_name + HOSTFILE_CONFIGMAP_SUFFIX


def _is_host(pod_set: PodSet, run_launcher_as_node: bool) -> bool:
    """Whether the PodSet's pods are MPI hosts (hostfile entries)."""
    return pod_set.name == constants.NODE or (run_launcher_as_node and pod_set.name == constants.LAUNCHER)


class MPI(CustomValidation, EnforceMLPolicy, PodNetwork, WatchExtension, ComponentBuilder):
    """OpenMPI: a launcher that reaches every node over SSH, with a hostfile listing them."""

    name = NAME

    def __init__(self, context: PluginContext | None = None, *, keygen: KeyGenerator | None = None) -> None:
        del context  # no settings
        self._keygen = keygen or generate_ssh_key_pair

    # CustomValidation -------------------------------------------------------------------------------------

    def validate(self, info: Info, old: TrainJob | None, new: TrainJob, reader: Reader) -> Validation:
        if info.ml.mpi is None:
            return Validation()
        trainer = TrainJobView(new).trainer
        if trainer is None:
            return Validation()
        errors: list[FieldError] = []
        num_nodes = trainer.get("numNodes")
        if (
            num_nodes is not None
            and num_nodes >= 2
            and info.ml.mpi_run_launcher_as_node
            and (info.find_pod_set(constants.LAUNCHER) is None or info.find_pod_set(constants.NODE) is None)
        ):
            errors.append(FieldError.invalid("spec.trainer.numNodes", num_nodes, _NUM_NODES_MESSAGE))
        reserved = reserved_env_error(new, RESERVED_ENV_NAMES)
        if reserved is not None:
            errors.append(reserved)
        return Validation.of(errors)

    # EnforceMLPolicy --------------------------------------------------------------------------------------

    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None:
        policy = info.ml.mpi
        if policy is None:
            return
        view = TrainJobView(trainjob)
        trainer = as_dict(view.trainer)
        run_launcher_as_node = info.ml.mpi_run_launcher_as_node
        self._set_counts(info, trainer, run_launcher_as_node)

        if trainer.get("numProcPerNode") is not None:
            policy["numProcPerNode"] = int(trainer["numProcPerNode"])
        elif info.ml.mpi_num_proc_per_node > MAX_INT32:  # the schema's int32, for a runtime that skipped it
            slots = policy.get("numProcPerNode")
            checked_count(_SLOTS_PATH, slots, info.ml.mpi_num_proc_per_node, in_trainjob=False, what=_SLOTS)
        elif info.ml.mpi_num_proc_per_node == 1:
            gpus = gpu_resource(trainer_resources_per_node(info, trainjob))
            if gpus is not None and gpus[2] > 1:
                slots = resource_count(info, trainjob, gpus[:2], gpus[2], what=_SLOTS)
                policy["numProcPerNode"] = slots

        for pod_set in info.pod_sets:
            if pod_set.name not in (constants.NODE, constants.LAUNCHER):
                continue
            pod_set.upsert_volumes(self._ssh_auth_volume(view.name))
            is_launcher = pod_set.name == constants.LAUNCHER
            if is_launcher:
                pod_set.upsert_volumes(self._hostfile_volume(view.name))
            for container in pod_set.containers:
                if container.name != constants.NODE:
                    continue
                container.upsert_volume_mounts(
                    {"name": SSH_AUTH_VOLUME, "mountPath": info.ml.mpi_ssh_auth_mount_path}
                )
                if not is_launcher:
                    continue
                container.upsert_volume_mounts({"name": HOSTFILE_VOLUME, "mountPath": HOSTFILE_DIR})
                implementation = info.ml.mpi_implementation
                if implementation != constants.MPI_IMPLEMENTATION_OPENMPI:
                    message = f"MPI implementation for {elide(implementation)} doesn't supported"
                    error = FieldError.invalid(_IMPLEMENTATION_PATH, implementation, message)
                    raise UnbuildableError(error, in_trainjob=False)
                container.upsert_env(
                    env_var(ENV_HOSTFILE_LOCATION, f"{HOSTFILE_DIR}/{HOSTFILE_NAME}"),
                    env_var(ENV_KEEP_FQDN_HOSTNAMES, "true"),
                    env_var(ENV_DEFAULT_SLOTS, str(info.ml.mpi_num_proc_per_node)),
                    env_var(ENV_RSH_ARGS, DEFAULT_RSH_ARGS),
                )

    # PodNetwork -------------------------------------------------------------------------------------------

    def identify_pod_network(self, info: Info, trainjob: TrainJob) -> None:
        """Refuses a hostfile the API server would not store (more than `MAX_CONFIGMAP_BYTES`), once the
        JobSet plugin (earlier in the phase) has named the pods: one line per host pod, so the node count
        decides, blamed on `spec.trainer.numNodes` when the TrainJob sets it, else the runtime's."""
        if info.ml.mpi is None or info.ml.mpi_implementation != constants.MPI_IMPLEMENTATION_OPENMPI:
            return
        limit = MAX_CONFIGMAP_BYTES - len(HOSTFILE_NAME)
        slots = len(f" slots={info.ml.mpi_num_proc_per_node}\n")
        size = 0
        for pod_set in info.pod_sets:
            if not _is_host(pod_set, info.ml.mpi_run_launcher_as_node):
                continue
            for endpoint in pod_set.endpoints:  # stops past the limit: at most ~50,000 names are made
                size += len(endpoint.encode()) + slots
                if size > limit:
                    break
        if size <= limit:
            return
        num_nodes = as_dict(TrainJobView(trainjob).trainer).get("numNodes")
        in_trainjob = num_nodes is not None
        path = "spec.trainer.numNodes" if in_trainjob else "spec.mlPolicy.numNodes"
        value = num_nodes if in_trainjob else info.ml.num_nodes
        message = f"must make the MPI hostfile at most {limit} bytes (what a ConfigMap holds), not more"
        raise UnbuildableError(FieldError.invalid(path, value, message), in_trainjob=in_trainjob)

    @staticmethod
    def _set_counts(info: Info, trainer: Mapping[str, Any], run_launcher_as_node: bool) -> None:
        num_nodes = trainer.get("numNodes")
        node = info.find_pod_set(constants.NODE)
        if num_nodes is None or node is None:
            return
        node.count = max(int(num_nodes) - 1, 1) if run_launcher_as_node else int(num_nodes)

    @staticmethod
    def _ssh_auth_volume(trainjob_name: str) -> dict[str, Any]:
        return {
            "name": SSH_AUTH_VOLUME,
            "secret": {
                "secretName": ssh_auth_secret_name(trainjob_name),
                "defaultMode": SSH_AUTH_DEFAULT_MODE,
                "items": [
                    {"key": SSH_PRIVATE_KEY, "path": SSH_PRIVATE_KEY_FILE, "mode": SSH_PRIVATE_KEY_FILE_MODE},
                    {"key": SSH_PUBLIC_KEY, "path": SSH_PUBLIC_KEY_FILE, "mode": SSH_PUBLIC_KEY_FILE_MODE},
                    {
                        "key": SSH_PUBLIC_KEY,
                        "path": SSH_AUTHORIZED_KEYS_FILE,
                        "mode": SSH_PUBLIC_KEY_FILE_MODE,
                    },
                ],
            },
        }

    @staticmethod
    def _hostfile_volume(trainjob_name: str) -> dict[str, Any]:
        return {
            "name": HOSTFILE_VOLUME,
            "configMap": {
                "name": hostfile_name(trainjob_name),
                "items": [{"key": HOSTFILE_NAME, "path": HOSTFILE_NAME, "mode": HOSTFILE_MODE}],
            },
        }

    # WatchExtension ---------------------------------------------------------------------------------------

    def watches(self) -> Sequence[Watch]:
        return owned_object_watches()

    # ComponentBuilder -------------------------------------------------------------------------------------

    def build(self, info: Info, trainjob: TrainJob, reader: Reader) -> list[dict[str, Any]]:
        if info.runtime_ml.mpi is None:  # asked of the runtime: Info is computed only for MPI TrainJobs
            return []
        view = TrainJobView(trainjob)
        objects: list[dict[str, Any]] = []
        secret_name = ssh_auth_secret_name(view.name)
        if reader.get("v1", "Secret", secret_name, view.namespace) is None:
            objects.append(self._ssh_auth_secret(trainjob, secret_name))
        objects.append(self._hostfile(info, trainjob))
        return objects

    def _ssh_auth_secret(self, trainjob: TrainJob, name: str) -> dict[str, Any]:
        keys = self._keygen()
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": owned_object_metadata(trainjob, name),
            "type": SECRET_TYPE_SSH_AUTH,
            "immutable": True,
            "data": {
                SSH_PRIVATE_KEY: base64.b64encode(keys.private_key).decode(),
                SSH_PUBLIC_KEY: base64.b64encode(keys.public_key).decode(),
            },
        }

    @staticmethod
    def _hostfile(info: Info, trainjob: TrainJob) -> dict[str, Any]:
        run_launcher_as_node = info.ml.mpi_run_launcher_as_node
        slots = info.ml.mpi_num_proc_per_node
        lines: list[str] = []
        if info.ml.mpi_implementation == constants.MPI_IMPLEMENTATION_OPENMPI:
            for pod_set in info.pod_sets:
                if _is_host(pod_set, run_launcher_as_node):
                    lines.extend(f"{endpoint} slots={slots}\n" for endpoint in pod_set.endpoints)
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": owned_object_metadata(trainjob, hostfile_name(TrainJobView(trainjob).name)),
            "data": {HOSTFILE_NAME: "".join(lines)},
        }
