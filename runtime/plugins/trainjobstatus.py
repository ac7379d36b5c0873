"""The TrainJobStatus plugin: gives the trainer pods what they need to report progress to the status server.

Go origin: kubeflow/trainer `pkg/runtime/framework/plugins/trainjobstatus/trainjobstatus.go` (`Status`,
`createEnvVars`, `createTokenVolumeMount`, `createTokenVolume`, `buildStatusServerCaCrtConfigMap`), the URL
and audience of `pkg/statusserver`, `cert.GetOperatorNamespace` and the `certManagement` and `statusServer`
defaults of `pkg/apis/config/v1alpha1/defaults.go`.

Registered only with the feature gate `TrainJobStatus` (`runtime.plugins.builtin_registry`); active for
every TrainJob then. Not to be confused with the `TrainJobStatus` extension point (the status phase, which
the JobSet plugin implements): this plugin computes no status. It wires the pods to the status server
(served by the controller), which lets them write `status.trainerStatus` with a token bound to their
TrainJob instead of RBAC on TrainJobs. Hence the class name `TrainJobStatusPlugin`; its name is upstream's.

Settings (`StatusServerSettings`, given to the plugin): the operator namespace, the Service and port the
status server is reached at, and the Secret holding its CA. `StatusServerSettings.from_config` reads the
controller `Configuration` (`certManagement.webhookServiceName`, `certManagement.webhookSecretName`,
`statusServer.port`, defaulted as upstream defaults them). The operator namespace is not configuration:
upstream reads it, inside the plugin, from the pod's service-account namespace file
(`SERVICE_ACCOUNT_NAMESPACE_FILE`, `kubeflow-system` when unreadable). Reading that file is the
controller's job; it passes the result (`from_config(config, operator_namespace=...)`) when it builds the
plugin. Built from a bare `PluginContext`, the plugin assumes `kubeflow-system`; `trainer-render` takes
`--operator-namespace`.

EnforceMLPolicy (as upstream v2.3.0, whatever the runtime's mlPolicy), on the PodSet labelled ancestor
`trainer` (nothing without one), for every regular
container (init containers are left alone, as upstream):
- envs `KUBEFLOW_TRAINER_SERVER_URL` (`https://<service>.<operator ns>.svc:<port>/apis/trainer.kubeflow.org/
  v1alpha1/namespaces/<ns>/trainjobs/<name>/status`), `KUBEFLOW_TRAINER_SERVER_CA_CERT`
  (`/var/run/secrets/kubeflow/trainer/ca.crt`) and `KUBEFLOW_TRAINER_SERVER_TOKEN`
  (`/var/run/secrets/kubeflow/trainer/token`);
- a read-only mount of the volume `kubeflow-trainer-token` at `/var/run/secrets/kubeflow/trainer`;
and the pod spec gets that volume: projected, a service-account token (`token`, audience
`trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/<name>/status`, valid 3600 s) next to `ca.crt`
from the ConfigMap `<trainjob>-tls-config`. Settings without a port fail the phase with upstream's
"missing status server port" (`from_config` always yields one; only hand-built settings can lack it).
As upstream: a `spec.trainer.env` entry of the same name wins (the JobSet plugin writes those last, at
build time); and in MPI runtimes whose `launcher` is the trainer ancestor only the launcher is wired, so
processes `mpirun` starts on the nodes see the envs only if it forwards them (`-x`), and cannot read the
token or CA files, which are mounted in the launcher alone.

ComponentBuilder, on every build: the ConfigMap `<trainjob>-tls-config` in the TrainJob's namespace, its
`ca.crt` copied from the key `ca.crt` of the Secret `<operator ns>/<webhook secret name>` (the one the
webhook's certificate rotator writes), with upstream's errors: "failed to look up status server
tls secret: ..." when the Secret cannot be read or does not exist, "failed to find status server ca.crt in
tls secret" when it has no (or an empty) `ca.crt`. Re-applying it on every build carries a rotated CA into
the ConfigMap, and the kubelet refreshes projected ConfigMaps in running pods.

WatchExtension: ConfigMaps controlled by a TrainJob and carrying the label `trainer.kubeflow.org/trainjob-
name` (the same watch value as MPI and Flux, so the controller registers it once), so a deleted
`<trainjob>-tls-config` is re-created. Upstream declares no watch and relies on MPI's.

What changed from upstream, on purpose:
- Settings are a value passed in, not a file read and a configuration pointer inside the plugin (pure).
- The ConfigMap carries the label `trainer.kubeflow.org/trainjob-name` like every ConfigMap built here
  (`runtime.ownership.owned_object_metadata`), so the controller's narrowed ConfigMap cache holds it.
- The pod changes run in EnforceMLPolicy, as in upstream v2.3.0, but at a fixed place: last of the
  built-in plugins (registry order), so after every ML-policy plugin. Upstream's place in that phase is
  random; no other plugin touches these envs, mounts or volume, so the output is the same either way.

Cost: one Secret read per build. The webhook Secret has no TrainJob label, so the controller's narrowed
Secret cache never holds it and its `Reader` asks the API server (the `Reader` contract): one GET per
build of a TrainJob while the gate is on.

Deliberately missing: the status server itself (the controller's), and a watch of the webhook Secret (a
rotated CA reaches the ConfigMaps at their TrainJobs' next reconcile, as upstream).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView, as_dict
from runtime.framework import (
    ComponentBuilder,
    EnforceMLPolicy,
    PhaseError,
    PluginConfigurationError,
    PluginContext,
    Reader,
    ReadError,
    Watch,
    WatchExtension,
)
from runtime.info import Info
from runtime.ownership import owned_object_metadata
from runtime.plugins.trainernode import env_var

__all__ = [
    "DEFAULT_OPERATOR_NAMESPACE",
    "SERVICE_ACCOUNT_NAMESPACE_FILE",
    "StatusServerSettings",
    "TrainJobStatusPlugin",
    "status_path",
    "tls_config_name",
    "token_audience",
]

NAME = "TrainJobStatus"

SERVICE_ACCOUNT_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
"""Where the controller reads its own namespace (the operator namespace) inside its pod."""
DEFAULT_OPERATOR_NAMESPACE = "kubeflow-system"
"""The operator namespace when that file cannot be read (upstream `cert.GetOperatorNamespace`)."""
DEFAULT_SERVICE_NAME = "kubeflow-trainer-controller-manager"
"""`certManagement.webhookServiceName` when unset: the Service in front of webhook and status server."""
DEFAULT_TLS_SECRET_NAME = "kubeflow-trainer-webhook-cert"
"""`certManagement.webhookSecretName` when unset: the Secret with the CA and serving certificate."""
DEFAULT_PORT = 10443
"""`statusServer.port` when unset."""

ENV_SERVER_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_SERVER_CA_CERT = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_SERVER_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"

MOUNT_PATH = "/var/run/secrets/kubeflow/trainer"
TOKEN_VOLUME = "kubeflow-trainer-token"
TOKEN_FILE = "token"
TOKEN_EXPIRATION_SECONDS = 3600
CA_CERT_KEY = "ca.crt"
"""The key of the CA certificate in the webhook Secret, in the ConfigMap, and its file name in the pod."""
TLS_CONFIG_SUFFIX = "-tls-config"


def status_path(namespace: str, name: str) -> str:
    """The status server's path for a TrainJob (`/apis/trainer.kubeflow.org/v1alpha1/namespaces/<ns>/
    trainjobs/<name>/status`): what the pods POST to, and what the server routes."""
    return f"/apis/{constants.API_VERSION}/namespaces/{namespace}/trainjobs/{name}/status"


def token_audience(namespace: str, name: str) -> str:
    """The audience of a TrainJob's projected token (`trainer.kubeflow.org/v1alpha1/namespaces/<ns>/
    trainjobs/<name>/status`): the status server accepts a token for this TrainJob only."""
    return f"{constants.API_VERSION}/namespaces/{namespace}/trainjobs/{name}/status"


def tls_config_name(trainjob_name: str) -> str:
    """`<trainjob>-tls-config`: the ConfigMap holding the status server's CA for the TrainJob's pods."""
    return trainjob_name + TLS_CONFIG_SUFFIX


def _config_section(config: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    section = config.get(key)
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise PluginConfigurationError(f"{key}: must be an object, got {section!r}")
    return section


def _config_name(section: Mapping[str, Any], path: str, key: str, default: str) -> str:
    value = section.get(key)
    if value is None or value == "":
        return default  # upstream defaults an empty string too
    if not isinstance(value, str):
        raise PluginConfigurationError(f"{path}.{key}: must be a string, got {value!r}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusServerSettings:
    """Where the trainer pods reach the status server, and where its CA certificate is kept."""

    operator_namespace: str = DEFAULT_OPERATOR_NAMESPACE
    """The controller's namespace: of its Service and of the webhook Secret."""
    service_name: str = DEFAULT_SERVICE_NAME
    """The Service in front of the status server (`certManagement.webhookServiceName`)."""
    port: int | None = DEFAULT_PORT
    """The status server's port (`statusServer.port`); None fails every build ("missing status server
    port"), as a Configuration without it does upstream."""
    tls_secret_name: str = DEFAULT_TLS_SECRET_NAME
    """The Secret in `operator_namespace` whose `ca.crt` the pods trust
    (`certManagement.webhookSecretName`)."""

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], *, operator_namespace: str = DEFAULT_OPERATOR_NAMESPACE
    ) -> StatusServerSettings:
        """The settings of a controller `Configuration` (a decoded document; absent and empty values take
        upstream's defaults). An empty `operator_namespace` means the default, as an unreadable namespace
        file does upstream. A value of the wrong type, or a port outside 1..65535, is a
        `PluginConfigurationError`."""
        cert_management = _config_section(config, "certManagement")
        status_server = _config_section(config, "statusServer")
        port = status_server.get("port")
        if port is None:
            port = DEFAULT_PORT
        elif isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise PluginConfigurationError(
                f"statusServer.port: must be an integer between 1 and 65535, got {port!r}"
            )
        return cls(
            operator_namespace=operator_namespace or DEFAULT_OPERATOR_NAMESPACE,
            service_name=_config_name(
                cert_management, "certManagement", "webhookServiceName", DEFAULT_SERVICE_NAME
            ),
            port=port,
            tls_secret_name=_config_name(
                cert_management, "certManagement", "webhookSecretName", DEFAULT_TLS_SECRET_NAME
            ),
        )

    def server_url(self, namespace: str, name: str) -> str:
        """The URL a TrainJob's pods POST their status to (`KUBEFLOW_TRAINER_SERVER_URL`)."""
        if self.port is None:
            raise PhaseError("missing status server port")
        host = f"{self.service_name}.{self.operator_namespace}.svc"
        return f"https://{host}:{self.port}{status_path(namespace, name)}"


class TrainJobStatusPlugin(EnforceMLPolicy, ComponentBuilder, WatchExtension):
    """The status server's address, token and CA, in every trainer container."""

    name = NAME

    def __init__(
        self, context: PluginContext | None = None, *, settings: StatusServerSettings | None = None
    ) -> None:
        if settings is None:
            settings = StatusServerSettings.from_config(context.config if context is not None else {})
        self.settings = settings

    def __repr__(self) -> str:
        return f"<TrainJobStatusPlugin {self.settings!r}>"

    # EnforceMLPolicy --------------------------------------------------------------------------------------

    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None:
        view = TrainJobView(trainjob)
        envs = (
            env_var(ENV_SERVER_URL, self.settings.server_url(view.namespace, view.name)),
            env_var(ENV_SERVER_CA_CERT, f"{MOUNT_PATH}/{CA_CERT_KEY}"),
            env_var(ENV_SERVER_TOKEN, f"{MOUNT_PATH}/{TOKEN_FILE}"),
        )
        pod_set = info.find_pod_set_by_ancestor(constants.ANCESTOR_TRAINER)
        if pod_set is None:
            return
        for container in pod_set.containers:
            container.upsert_env(*envs)
            container.upsert_volume_mounts({"name": TOKEN_VOLUME, "mountPath": MOUNT_PATH, "readOnly": True})
        pod_set.upsert_volumes(self._token_volume(view))

    @staticmethod
    def _token_volume(view: TrainJobView) -> dict[str, Any]:
        return {
            "name": TOKEN_VOLUME,
            "projected": {
                "sources": [
                    {
                        "serviceAccountToken": {
                            "audience": token_audience(view.namespace, view.name),
                            "expirationSeconds": TOKEN_EXPIRATION_SECONDS,
                            "path": TOKEN_FILE,
                        }
                    },
                    {
                        "configMap": {
                            "name": tls_config_name(view.name),
                            "items": [{"key": CA_CERT_KEY, "path": CA_CERT_KEY}],
                        }
                    },
                ]
            },
        }

    # WatchExtension ---------------------------------------------------------------------------------------

    def watches(self) -> Sequence[Watch]:
        return [Watch.owned("v1", "ConfigMap", label_selector=constants.LABEL_TRAINJOB_NAME)]

    # ComponentBuilder -------------------------------------------------------------------------------------

    def build(self, info: Info, trainjob: TrainJob, reader: Reader) -> list[dict[str, Any]]:
        name = TrainJobView(trainjob).name
        return [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": owned_object_metadata(trainjob, tls_config_name(name)),
                "data": {CA_CERT_KEY: self._ca_certificate(reader)},
            }
        ]

    def _ca_certificate(self, reader: Reader) -> str:
        """The `ca.crt` of the webhook Secret, as text (Go's `string([]byte)`, written out as JSON)."""
        namespace, name = self.settings.operator_namespace, self.settings.tls_secret_name
        try:
            secret = reader.get("v1", "Secret", name, namespace)
        except ReadError as exc:
            raise PhaseError(f"failed to look up status server tls secret: {exc}") from exc
        if secret is None:
            raise PhaseError(f'failed to look up status server tls secret: secrets "{name}" not found')
        encoded = as_dict(secret.get("data")).get(CA_CERT_KEY)
        try:
            certificate = base64.b64decode(encoded, validate=True) if isinstance(encoded, str) else b""
        except binascii.Error as exc:
            raise PhaseError(f"status server tls secret {namespace}/{name}: {CA_CERT_KEY}: {exc}") from exc
        if not certificate:
            raise PhaseError("failed to find status server ca.crt in tls secret")
        return certificate.decode("utf-8", errors="replace")
