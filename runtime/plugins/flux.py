"""The Flux plugin: turns the trainer pods into a Flux Framework cluster that runs the TrainJob's command.

Go origin: kubeflow/trainer `pkg/runtime/framework/plugins/flux/flux.go` (`Validate`, `EnforceMLPolicy`,
`Build`, `brokerSettingsFromEnvironment`, `getOriginalCommand`, `generateHostlist`, `generateRange`,
`encodeZ85`, `buildCurveSecret`) and its `templates/` (broker.toml, init.sh, entrypoint.sh), whose job the
scripts below do in their own words: same paths, same Flux configuration keys, same control flow.

Active when the runtime's `mlPolicy.flux` is set. Flux runs on the pods of the replicated job `node`.

Settings (`FLUX_VIEW_IMAGE`, `FLUX_NETWORK_DEVICE`, `FLUX_QUEUE_POLICY`): the defaults below, overridden by
same-named literal env vars of the runtime's trainer `node` container, then by `spec.trainer.env`.

CustomValidation: the runtime's `node` job must not already have an init container `flux-installer`.

EnforceMLPolicy:
- The trainer command becomes `/bin/bash /etc/flux-config/entrypoint.sh "<original>"`, where the original
  is the runtime `node` container's command (or `spec.trainer.command`) followed by `spec.trainer.args`,
  joined by spaces; `spec.trainer.args` is dropped (the runtime container's own args stay, as upstream).
  The command is written both to the trainer overrides and to the trainer `node` container itself, so it
  takes effect with or without a `spec.trainer` section.
- The `node` PodSet gets the volumes `spack-install`, `flux-install`, `<tj>-flux-entrypoint` (mode 0755),
  `shared-memory` (memory-backed) and `flux-curve` (Secret `<tj>-flux-curve`, mode 0400); an init container
  `flux-installer` (the Flux view image) that copies Flux into `flux-install`; and the mounts its `node`
  container needs (`/mnt/flux`, `/opt/software`, `/etc/flux-config`, `/curve`, `/dev/shm`).

ComponentBuilder, in this order:
- ConfigMap `<tj>-flux-entrypoint`, on every build: `init.sh` (writes the hostlist and broker.toml, copies
  the view) and `entrypoint.sh` (prepares the environment, encodes the resources, starts the lead broker on
  pod 0 with `flux run <flags> <command>`, followers elsewhere). Hosts are `<tj>-node-0-[0-(N-1)]`.
- Secret `<tj>-flux-curve` (immutable), key `curve.cert`: a ZeroMQ CURVE certificate, the X25519 key pair
  all brokers share, Z85-encoded; only when the Reader does not have it, so a key is never replaced.
Both carry the TrainJob as controller owner and the label `trainer.kubeflow.org/trainjob-name`.

The CURVE key, a deliberate difference from upstream: upstream seeds the private key with SHA-256 of the
TrainJob UID and re-applies the same Secret on every build, so anyone who can read the TrainJob can derive
the brokers' secret key. Here the key comes from the `CurveKeyGenerator` given to the plugin (default
`generate_curve_key_pair`, from the OS's randomness) and is stored once, as the MPI plugin stores its SSH
keys. A Secret deleted while its TrainJob is unfinished is recreated with a new key (brokers already
running keep the certificate they copied at start-up; a pod started later gets the new one). The Reader
finds unlabelled Secrets too (see `runtime.framework.reader`), so a Secret upstream or an older controller
wrote is kept as it is, derived key included.

Randomness: key generation is impure; it is confined to the `CurveKeyGenerator`, which tests and `render`
replace with deterministic or placeholder generators. The secret key is never logged: `CurveKeyPair`'s
repr leaves it out.

WatchExtension: ConfigMaps and Secrets controlled by a TrainJob and carrying that label (the same watches
as MPI, declared once by the framework; trainer#3374).

An upstream crash, fixed by defaulting: upstream dereferences `spec.trainer` and `spec.trainer.numNodes` and
crashes without them. Here N, the number of Flux hosts, is `spec.trainer.numNodes`, else the `node`
PodSet's count (`mlPolicy.numNodes` for a trainer job, default 1, else the job's parallelism), so a
TrainJob without a trainer section runs on the runtime's defaults, like the other ML policies.
The brokers connect through the JobSet's subdomain (`spec.network.subdomain`, else the TrainJob name,
as the JobSet plugin names the pods); upstream always uses the TrainJob name.

Deliberately missing: the pod (anti-)affinity sketched in upstream's proposal (upstream does not set it).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView, as_dict, as_list
from runtime.framework import (
    ComponentBuilder,
    CustomValidation,
    EnforceMLPolicy,
    FieldError,
    PhaseError,
    PluginContext,
    Reader,
    Validation,
    Watch,
    WatchExtension,
)
from runtime.info import Info
from runtime.ownership import owned_object_metadata, owned_object_watches
from runtime.plugins.trainernode import trainer_resources_per_node
from runtime.resources import gpu_count

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import x25519

__all__ = [
    "DEFAULT_SETTINGS",
    "CurveKeyGenerator",
    "CurveKeyPair",
    "Flux",
    "broker_settings",
    "curve_certificate",
    "curve_key_pair",
    "curve_secret_name",
    "encode_z85",
    "generate_curve_key_pair",
    "host_range",
    "hostlist",
    "original_command",
]

NAME = "Flux"

INSTALLER_IMAGE = "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"
INSTALLER_CONTAINER = "flux-installer"
INSTALL_VOLUME = "flux-install"
INSTALL_PATH = "/mnt/flux"
CONFIG_PATH = "/etc/flux-config"
CURVE_VOLUME = "flux-curve"
CURVE_PATH = "/curve"
CURVE_KEY = "curve.cert"
MEMORY_VOLUME = "shared-memory"
MEMORY_PATH = "/dev/shm"
SPACK_VOLUME = "spack-install"
SPACK_PATH = "/opt/software"
ENTRYPOINT_SUFFIX = "-flux-entrypoint"
CURVE_SUFFIX = "-flux-curve"
ENTRYPOINT_KEY = "entrypoint.sh"
INIT_KEY = "init.sh"
BROKER_PORT = 8050
VIEW_ROOT = "/opt/view"

DEFAULT_SETTINGS: Mapping[str, str] = {
    "FLUX_VIEW_IMAGE": INSTALLER_IMAGE,
    "FLUX_NETWORK_DEVICE": "eth0",
    "FLUX_QUEUE_POLICY": "fcfs",
}
"""The settings a TrainJob may override through env vars of the same name."""

_RESERVED_MESSAGE = f"InitContainer '{INSTALLER_CONTAINER}' is reserved"
_Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


# Pure helpers --------------------------------------------------------------------------------------------


def host_range(size: int, start: int = 0) -> str:
    """`start` for one host, else `start-end` (Go `generateRange`): `host_range(4)` is `0-3`."""
    return str(start) if size == 1 else f"{start}-{start + size - 1}"


def hostlist(trainjob_name: str, size: int) -> str:
    """The Flux hostlist of the `node` job's pods: `<tj>-node-0-[0-3]`."""
    return f"{trainjob_name}-{constants.NODE}-0-[{host_range(size)}]"


def encode_z85(data: bytes) -> str:
    """ZeroMQ's Z85 text encoding (RFC 32/Z85); "" when the length is not a multiple of 4 (as upstream)."""
    if len(data) % 4:
        return ""
    out: list[str] = []
    for offset in range(0, len(data), 4):
        value = int.from_bytes(data[offset : offset + 4], "big")
        out.extend(_Z85_ALPHABET[(value // 85**power) % 85] for power in (4, 3, 2, 1, 0))
    return "".join(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class CurveKeyPair:
    """The brokers' CURVE key pair as the certificate spells it (Z85 text); its repr omits the secret key."""

    public_key: str
    secret_key: str = field(repr=False)


CurveKeyGenerator = Callable[[], CurveKeyPair]
"""Makes a fresh CURVE key pair for one TrainJob."""


def curve_key_pair(private_key: x25519.X25519PrivateKey) -> CurveKeyPair:
    """The certificate's encoding of an X25519 key (upstream's `encodeZ85` of the raw 32-byte keys)."""
    return CurveKeyPair(
        public_key=encode_z85(private_key.public_key().public_bytes_raw()),
        secret_key=encode_z85(private_key.private_bytes_raw()),
    )


def generate_curve_key_pair() -> CurveKeyPair:
    """A new X25519 key pair from the operating system's randomness. `cryptography` is imported by the
    first key made, not with the plugin (as `runtime.plugins.mpi.generate_ssh_key_pair`)."""
    from cryptography.hazmat.primitives.asymmetric import x25519  # noqa: PLC0415 - on first use

    return curve_key_pair(x25519.X25519PrivateKey.generate())


def curve_secret_name(trainjob_name: str) -> str:
    """`<trainjob>-flux-curve`."""
    return trainjob_name + CURVE_SUFFIX


def curve_certificate(trainjob_name: str, keys: CurveKeyPair) -> str:
    """The `curve.cert` of a TrainJob: a ZeroMQ CURVE certificate holding `keys`."""
    return (
        "#   ZeroMQ CURVE certificate for the Flux brokers of one TrainJob\n"
        "#   Written by the Kubeflow Trainer Flux plugin; keep it secret\n"
        "\n"
        "metadata\n"
        f'    name = "{trainjob_name}"\n'
        "curve\n"
        f'    public-key = "{keys.public_key}"\n'
        f'    secret-key = "{keys.secret_key}"\n'
    )


def broker_settings(info: Info, trainjob: TrainJob) -> dict[str, str]:
    """The Flux settings: defaults, then the runtime `node` container's literal envs, then the TrainJob's."""
    settings = dict(DEFAULT_SETTINGS)
    container = info.find_container_by_ancestor(constants.ANCESTOR_TRAINER, constants.NODE)
    if container is not None:
        for env in container.env:
            if env.get("name") in settings and isinstance(env.get("value"), str):
                settings[str(env["name"])] = str(env["value"])
    for env in as_list(as_dict(TrainJobView(trainjob).trainer).get("env")):
        if isinstance(env, dict) and env.get("name") in settings:
            settings[str(env["name"])] = str(env.get("value") or "")
    return settings


def original_command(info: Info, trainjob: TrainJob) -> str:
    """What Flux runs: the trainer command (runtime's, or `spec.trainer.command`) plus `spec.trainer.args`."""
    command: list[str] = []
    container = info.find_container_by_ancestor(constants.ANCESTOR_TRAINER, constants.NODE)
    if container is not None:
        command = [str(c) for c in container.command or ()]
    trainer = as_dict(TrainJobView(trainjob).trainer)
    if trainer.get("command") is not None:
        command = [str(c) for c in trainer["command"]]
    args = [str(a) for a in as_list(trainer.get("args"))]
    return " ".join([*command, *args]).strip()


def _toml_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


# The scripts (rendered into the ConfigMap) ---------------------------------------------------------------

_BROKER_TOML = """\
# Flux broker configuration, written by the Kubeflow Trainer Flux plugin.
[access]
allow-guest-user = true
allow-root-owner = true

[resource]
# Generated at start-up by `flux R encode` in entrypoint.sh.
path = "/mnt/flux/config/etc/flux/system/R"

[bootstrap]
curve_cert = "/mnt/flux/config/etc/curve/curve.cert"
default_port = @PORT@
default_bind = @BIND@
default_connect = @CONNECT@
hosts = [
  { host = @HOSTS@ },
]

[archive]
dbpath = "/mnt/flux/config/var/lib/flux/job-archive.sqlite"
period = "1m"
busytimeout = "50s"

[sched-fluxion-qmanager]
queue-policy = @QUEUE_POLICY@
"""

_INIT_SH = """\
#!/bin/bash
# Flux installer (init container): stage the Flux view and this cluster's configuration in /mnt/flux.
# Written by the Kubeflow Trainer Flux plugin for one TrainJob.
set -u

view_root=@VIEW_ROOT@
main_host=@MAIN_HOST@
hosts=@HOSTS@
install_root=/mnt/flux/config

echo "flux-installer on $(hostname): staging Flux from ${view_root} (lead broker: ${main_host})"
export PATH="${view_root}/bin:${PATH}"
mkdir -p "${view_root}/bin"

# Directories every broker needs: configuration, state, run directory, CURVE certificate.
mkdir -p "${install_root}/etc/flux/system/cron.d" "${install_root}/etc/flux/config" \\
  "${install_root}/var/lib/flux" "${install_root}/run/flux" "${install_root}/etc/curve"

# The hosts of this cluster, read by entrypoint.sh to describe the resources.
echo "${hosts}" > "${install_root}/etc/flux/system/hostlist"

cat > "${install_root}/etc/flux/config/broker.toml" <<'BROKER_TOML'
@BROKER_TOML@BROKER_TOML
echo "Broker configuration:"
cat "${install_root}/etc/flux/config/broker.toml"

# Copy the Spack view (Flux and its dependencies) into the shared volume; /opt/software is restored in the
# application container, since the view links into it.
mkdir -p /mnt/flux/view
view_dir="/opt/views/._view/$(ls /opt/views/._view/)"
cp -R "${view_dir}"/* /mnt/flux/view
cp -R /opt/software /mnt/flux/

touch /mnt/flux/flux-operator-done.txt
echo "flux-installer: done"
"""

_ENTRYPOINT_SH = """\
#!/bin/bash
# Flux entrypoint (trainer container): start a Flux broker on every pod; the lead broker runs the command.
# Written by the Kubeflow Trainer Flux plugin for one TrainJob. Usage: entrypoint.sh "<command>"

command="$*"
flux_user=$(whoami)
flux_uid=$(id -u "${flux_user}")

view_base=/mnt/flux
view_root="${view_base}/view"
config_root="${view_base}/config"
cfg="${config_root}/etc/flux/config"

# The view's tools come after the image's own, so the application keeps its Python and libraries.
export PATH="${PATH}:${view_root}/bin"
cp -R "${view_base}"/software/* /opt/software/

# Flux's Python bindings live in the view.
python_root=$(find "${view_root}" -maxdepth 2 -type d -path "${view_root}/lib/python3*" 2>/dev/null \\
  | head -n 1)
python_bin="${view_root}/bin/$(basename "${python_root}")"
echo "Flux Python: ${python_bin} (${python_root})"
if [[ -f "${python_bin}" ]]; then
  rm -rf "${view_root}/bin/python3" "${view_root}/bin/python"
  ln -s "${python_bin}" "${view_root}/lib/python" || true
  ln -s "${python_bin}" "${view_root}/lib/python3" || true
fi
export PYTHONPATH="${PYTHONPATH:-}:${python_root}/site-packages"
export FLUX_RC_EXTRA="${view_root}/etc/flux/rc1.d"

# Helpers for interactive use: switch to the Fluxion scheduler, and an environment file to source.
cat > "${view_base}/load-fluxion.sh" <<'FLUXION'
flux module remove sched-simple
flux module load sched-fluxion-resource
flux module load sched-fluxion-qmanager
FLUXION
cat > "${view_base}/flux-view.sh" <<FLUX_VIEW
#!/bin/bash
export PATH=${PATH}
export PYTHONPATH=${PYTHONPATH}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:${view_root}/lib
export fluxsocket=local://${config_root}/run/flux/local
FLUX_VIEW

# The CURVE certificate must be private to the broker's user.
curve="${config_root}/etc/curve/curve.cert"
cp /curve/curve.cert "${curve}"
chmod go-r "${curve}"
chown -R "${flux_uid}" "${curve}"

# Describe the cluster's resources.
hosts=$(cat "${config_root}/etc/flux/system/hostlist")
flux R encode --hosts="${hosts}" @RESOURCES@ > /tmp/R
mv /tmp/R "${config_root}/etc/flux/system/R"

export STATE_DIR="${config_root}/var/lib/flux"
export FLUX_OUTPUT_DIR=/tmp/fluxout
mkdir -p "${STATE_DIR}" "${FLUX_OUTPUT_DIR}" "${config_root}/etc/flux/system/cron.d"

main_host=@MAIN_HOST@
broker_options="-Scron.directory=${config_root}/etc/flux/system/cron.d -Stbon.fanout=256 \\
  -Srundir=${config_root}/run/flux -Sstatedir=${STATE_DIR} \\
  -Slocal-uri=local://${config_root}/run/flux/local -Slog-stderr-level=0 -Slog-stderr-mode=local"

if [ "$(hostname)" = "${main_host}" ]; then
  echo "Command: ${command}"
  if [ -z "${command}" ]; then
    # No command: keep an interactive cluster up.
    flux broker --config-path "${cfg}" ${broker_options}
  else
    flags="@FLAGS@"
    echo "flux run ${flags} ${command}"
    flux start -o --config "${cfg}" ${broker_options} flux run ${flags} ${command}
  fi
else
  # Followers join the lead broker, retrying until it is up and has finished.
  while true; do
    flux start -o --config "${cfg}" ${broker_options}
    status=$?
    if [ "${status}" -eq 0 ]; then
      echo "Follower broker exited cleanly."
      break
    fi
    echo "Follower broker exited with ${status}; retrying in 15s."
    sleep 15
  done
fi

touch "${view_base}/flux-operator-complete.txt"
"""


def _fill(template: str, values: Mapping[str, str]) -> str:
    for key, value in values.items():
        template = template.replace(f"@{key}@", value)
    return template


def _shell_word(value: str) -> str:
    """A single-quoted shell word."""
    return "'" + value.replace("'", "'\\''") + "'"


# The plugin ----------------------------------------------------------------------------------------------


class Flux(CustomValidation, EnforceMLPolicy, WatchExtension, ComponentBuilder):
    """HPC-style training under the Flux Framework resource manager."""

    name = NAME

    def __init__(
        self, context: PluginContext | None = None, *, keygen: CurveKeyGenerator | None = None
    ) -> None:
        del context  # no settings
        self._keygen = keygen or generate_curve_key_pair

    # CustomValidation -------------------------------------------------------------------------------------

    def validate(self, info: Info, old: TrainJob | None, new: TrainJob, reader: Reader) -> Validation:
        if info.ml.flux is None:
            return Validation()
        return Validation.of(
            FieldError.invalid("spec.trainer.initContainers", INSTALLER_CONTAINER, _RESERVED_MESSAGE)
            for pod_set in info.pod_sets
            if pod_set.name == constants.NODE
            for container in pod_set.init_containers
            if container.name == INSTALLER_CONTAINER
        )

    # EnforceMLPolicy --------------------------------------------------------------------------------------

    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None:
        if info.ml.flux is None:
            return
        view = TrainJobView(trainjob)
        settings = broker_settings(info, trainjob)
        entrypoint = view.name + ENTRYPOINT_SUFFIX

        wrapped = ["/bin/bash", f"{CONFIG_PATH}/{ENTRYPOINT_KEY}", original_command(info, trainjob)]
        info.trainer.command = wrapped
        info.trainer.args = None
        trainer_container = info.find_container_by_ancestor(constants.ANCESTOR_TRAINER, constants.NODE)
        if trainer_container is not None:
            trainer_container.command = wrapped

        for pod_set in info.pod_sets:
            if pod_set.name != constants.NODE:
                continue
            if any(c.name == INSTALLER_CONTAINER for c in pod_set.init_containers):
                raise PhaseError(_RESERVED_MESSAGE)
            pod_set.upsert_volumes(
                {"name": SPACK_VOLUME, "emptyDir": {}},
                {"name": INSTALL_VOLUME, "emptyDir": {}},
                {"name": entrypoint, "configMap": {"name": entrypoint, "defaultMode": 0o755}},
                {"name": MEMORY_VOLUME, "emptyDir": {"medium": "Memory"}},
                {
                    "name": CURVE_VOLUME,
                    "secret": {"secretName": curve_secret_name(view.name), "defaultMode": 0o400},
                },
            )
            installer = pod_set.add_init_container(INSTALLER_CONTAINER)
            installer.image = settings["FLUX_VIEW_IMAGE"]
            installer.command = ["/bin/bash", f"{CONFIG_PATH}/{INIT_KEY}"]
            installer.upsert_volume_mounts(
                {"name": INSTALL_VOLUME, "mountPath": INSTALL_PATH},
                {"name": entrypoint, "mountPath": CONFIG_PATH, "readOnly": True},
            )
            for container in pod_set.containers:
                if container.name == constants.NODE:
                    container.upsert_volume_mounts(
                        {"name": INSTALL_VOLUME, "mountPath": INSTALL_PATH},
                        {"name": SPACK_VOLUME, "mountPath": SPACK_PATH},
                        {"name": entrypoint, "mountPath": CONFIG_PATH, "readOnly": True},
                        {"name": CURVE_VOLUME, "mountPath": CURVE_PATH, "readOnly": True},
                        {"name": MEMORY_VOLUME, "mountPath": MEMORY_PATH, "readOnly": True},
                    )

    # WatchExtension ---------------------------------------------------------------------------------------

    def watches(self) -> Sequence[Watch]:
        return owned_object_watches()

    # ComponentBuilder -------------------------------------------------------------------------------------

    def build(self, info: Info, trainjob: TrainJob, reader: Reader) -> list[dict[str, Any]]:
        if info.runtime_ml.flux is None:  # asked of the runtime: Info is computed only for Flux TrainJobs
            return []
        view = TrainJobView(trainjob)
        settings = broker_settings(info, trainjob)
        scripts = {
            ENTRYPOINT_KEY: self._entrypoint_script(info, trainjob),
            INIT_KEY: self._init_script(info, view, settings),
        }
        objects: list[dict[str, Any]] = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": owned_object_metadata(trainjob, view.name + ENTRYPOINT_SUFFIX),
                "data": scripts,
            }
        ]
        secret_name = curve_secret_name(view.name)
        if reader.get("v1", "Secret", secret_name, view.namespace) is None:
            objects.append(self._curve_secret(trainjob, secret_name))
        return objects

    def _curve_secret(self, trainjob: TrainJob, name: str) -> dict[str, Any]:
        certificate = curve_certificate(TrainJobView(trainjob).name, self._keygen())
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": owned_object_metadata(trainjob, name),
            "immutable": True,
            "data": {CURVE_KEY: base64.b64encode(certificate.encode()).decode()},
        }

    @staticmethod
    def _num_hosts(info: Info, view: TrainJobView) -> int:
        """`spec.trainer.numNodes`, else the `node` PodSet's count, else `mlPolicy.numNodes`."""
        num_nodes = as_dict(view.trainer).get("numNodes")
        if num_nodes is not None:
            return int(num_nodes)
        node = info.find_pod_set(constants.NODE)
        return node.count if node is not None else info.ml.num_nodes

    def _entrypoint_script(self, info: Info, trainjob: TrainJob) -> str:
        view = TrainJobView(trainjob)
        trainer = as_dict(view.trainer)
        nodes = self._num_hosts(info, view)
        tasks = info.ml.flux_num_proc_per_node
        if trainer.get("numProcPerNode") is not None:
            tasks = int(trainer["numProcPerNode"])
        gpus = gpu_count(trainer_resources_per_node(info, trainjob))
        flags = f"-N {nodes} -n {tasks * nodes}"
        spec = f"--cores={host_range(tasks)}"
        if gpus > 0:
            flags += f" -g {gpus}"
            spec += f" --gpu={host_range(gpus)}"
        return _fill(
            _ENTRYPOINT_SH,
            {"RESOURCES": spec, "MAIN_HOST": f"{view.name}-{constants.NODE}-0-0", "FLAGS": flags},
        )

    def _init_script(self, info: Info, view: TrainJobView, settings: Mapping[str, str]) -> str:
        hosts = hostlist(view.name, self._num_hosts(info, view))
        subdomain = str(as_dict(info.template.get("network")).get("subdomain") or view.name)
        domain = f"{subdomain}.{view.namespace}.svc.cluster.local"
        broker = _fill(
            _BROKER_TOML,
            {
                "PORT": str(BROKER_PORT),
                "BIND": _toml_string(f"tcp://{settings['FLUX_NETWORK_DEVICE']}:%p"),
                "CONNECT": _toml_string(f"tcp://%h.{domain}:%p"),
                "HOSTS": _toml_string(hosts),
                "QUEUE_POLICY": _toml_string(settings["FLUX_QUEUE_POLICY"]),
            },
        )
        return _fill(
            _INIT_SH,
            {
                "VIEW_ROOT": VIEW_ROOT,
                "MAIN_HOST": _shell_word(f"{view.name}-0"),
                "HOSTS": _shell_word(hosts),
                "BROKER_TOML": broker,
            },
        )
