"""Kueue for the e2e tests of its TrainJob integration: a host process of kwok's cluster, or in kind.

Kueue (``sigs.k8s.io/kueue`` at ``KUEUE_VERSION``, the ``kueue`` binary ``hack/build-binaries.sh`` builds)
runs against a running cluster. Neither ``up`` nor the demo starts it: ``python hack/cluster.py
kueue-up|kueue-down``, or :func:`start_kueue`/:func:`stop_kueue`; ``support.kwok.down`` stops it too. Rewired
for a controller outside the cluster the way JobSet is (``support.jobset``): a serving certificate from a
throwaway CA, URL webhook configurations pointing at 127.0.0.1, every listener on a free loopback port, no
leader election. It runs
with the cluster's admin kubeconfig (not with the RBAC of Kueue's manifests: this is a test cluster, and the
ClusterRole would be one more thing to install and keep). Its webhook configurations select only Kueue's own
kinds and TrainJobs labelled ``kueue.x-k8s.io/queue-name`` (:func:`kueue_webhook_configurations`).

Go origin: Kueue's install (``config/components/{crd,webhook}``) rewired for a controller outside the
cluster. Deliberately missing: MultiKueue, the visibility server, Kueue's other integrations.

In kind (the last section), Kueue runs as its users run it: ``hack/e2e-setup-kind.sh`` applies Kueue's own
``config/default`` from the Go module through the overlay :func:`write_kind_overlay` writes (the image built
here, the TrainJob integration, a small CPU request, the job webhooks narrowed as above), with Kueue's
ServiceAccount, RBAC, internal certificates, leader election and visibility server as shipped;
:func:`wait_until_kind_kueue_serving` is the readiness both the script and the tests wait for.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from kubernetes import client as kubernetes_client

from controller.client.errors import ApiError, NotFound, TransportError
from controller.client.gvk import GVK
from controller.envtest.certs import CertificateAuthority
from controller.envtest.process import free_port
from runtime.api import constants
from support import kwok, thirdparty
from support.install import INSTALL_FIELD_MANAGER, TRAINER_CRD_DIR, connect, install_crds
from support.kwok import DEFAULT_NAME, ClusterState, Kubectl, own_dir
from support.process import (
    HAVE_PROC,
    PORT_RACE,
    ClusterError,
    cmdline,
    http_ok,
    names_directory,
    pid_alive,
    say,
    tail_file,
    terminate,
    wait_for,
    write_yaml,
)

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_API_VERSION = f"{KUEUE_GROUP}/v1beta2"
"""The version Kueue v0.17 stores its objects in and uses (v1beta1 is served too, unconverted here)."""
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_TRAINJOB_FRAMEWORK = "trainer.kubeflow.org/trainjob"
"""Kueue's TrainJob integration in ``integrations.frameworks`` (kueue ``pkg/controller/jobs/trainjob``)."""
KUEUE_FRAMEWORKS = (KUEUE_TRAINJOB_FRAMEWORK,)
"""The integrations enabled here. The TrainJob one declares no dependency: it builds the JobSet it admits
in-process (the Trainer runtime framework, Go) and does not need Kueue's JobSet integration."""
KUEUE_NAMESPACE = "kueue-system"
"""Kueue's own namespace (``namespace`` of its Configuration): MultiKueue's Secrets would live there."""
KUEUE_WEBHOOK_PREFIX = "kueue-"
"""The name prefix of Kueue's webhook configurations, as its kustomize install names them."""
KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
"""Where Kueue v0.17 reads its metrics serving certificate when internal certificate management is off: a
path fixed in ``cmd/kueue/main.go`` (in a pod, a mounted Secret). A host process has to find a certificate
there or exits; :func:`start_kueue` writes a throwaway one if none is there."""

RESOURCE_FLAVOR_GVK = GVK(KUEUE_GROUP, "v1beta2", "ResourceFlavor")
CLUSTER_QUEUE_GVK = GVK(KUEUE_GROUP, "v1beta2", "ClusterQueue")
LOCAL_QUEUE_GVK = GVK(KUEUE_GROUP, "v1beta2", "LocalQueue")
WORKLOAD_GVK = GVK(KUEUE_GROUP, "v1beta2", "Workload")
_WEBHOOK_CONFIGURATION_GVKS = {
    kind: GVK("admissionregistration.k8s.io", "v1", kind)
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
}
# Job kinds of the enabled integrations whose webhooks are registered, each behind the queue-name selector.
_KUEUE_JOB_RESOURCES = {KUEUE_TRAINJOB_FRAMEWORK: (constants.GROUP, "trainjobs")}


def kueue_manifests() -> Any:
    """hack/thirdparty.py's ``KueueManifests`` (CRDs and webhook manifests) for the pinned Kueue."""
    try:
        return thirdparty.kueue_manifests()
    except thirdparty.ThirdPartyError as exc:
        raise ClusterError(f"cannot read Kueue's manifests from the Go module cache: {exc}") from exc


def kueue_binary() -> Path:
    """The ``kueue`` binary of the pinned version; ClusterError naming the build command if it is missing."""
    directory = kwok.binary_dirs().get("KUEUE_BIN")
    if directory is None:
        raise ClusterError("hack/build-binaries.sh --print did not name KUEUE_BIN")
    binary = directory / "kueue"
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise ClusterError(f"{binary} is missing: build it with `bash hack/build-binaries.sh kueue`")
    return binary


def _released_webhook_configurations(manifests: Path) -> Iterator[dict[str, Any]]:
    """The webhook configurations of Kueue's ``config/components/webhook/manifests.yaml``."""
    for doc in yaml.safe_load_all(manifests.read_text()):
        if doc and doc.get("kind") in _WEBHOOK_CONFIGURATION_GVKS:
            yield doc


def _groups(hook: dict[str, Any]) -> set[str]:
    """The API groups a webhook's rules name."""
    return {g for rule in hook.get("rules") or () for g in rule.get("apiGroups", [])}


def _prefixed(configuration: dict[str, Any], webhooks: list[dict[str, Any]]) -> dict[str, Any]:
    """The webhook configuration under the ``kueue-`` name of a release install, with these webhooks."""
    return {
        "apiVersion": configuration["apiVersion"],
        "kind": configuration["kind"],
        "metadata": {"name": f"{KUEUE_WEBHOOK_PREFIX}{configuration['metadata']['name']}"},
        "webhooks": webhooks,
    }


def kueue_webhook_configurations(
    manifests: Path, *, port: int, ca_bundle: bytes, frameworks: Sequence[str] = KUEUE_FRAMEWORKS
) -> list[dict[str, Any]]:
    """Kueue's webhook configurations, narrowed to what this setup needs and rewired to a URL on 127.0.0.1.

    Read from the module's ``config/components/webhook/manifests.yaml``. Kept: the webhooks of Kueue's own
    kinds (ClusterQueue, ResourceFlavor, Cohort, Workload; as installed), and those of the Job kinds of the
    enabled ``frameworks`` with the object selector ``kueue.x-k8s.io/queue-name Exists``. Dropped: every other
    integration's (pods, Jobs, JobSets, Deployments, ...). So only objects meant for Kueue reach the Kueue
    process, and a TrainJob without a queue name never depends on it (upstream's install sends every TrainJob
    to Kueue, which adds an empty runtime patch to those it does not manage, and defaults the queue name from
    a LocalQueue named ``default``: neither happens here). Names get the ``kueue-`` prefix of a release.
    """
    unknown = [f for f in frameworks if f not in _KUEUE_JOB_RESOURCES]
    if unknown:
        raise ClusterError(f"no webhook selection known for the Kueue integrations {unknown}")
    job_resources = {_KUEUE_JOB_RESOURCES[f] for f in frameworks}
    queued = {"matchExpressions": [{"key": KUEUE_QUEUE_LABEL, "operator": "Exists"}]}
    bundle = base64.b64encode(ca_bundle).decode()
    out = []
    for doc in _released_webhook_configurations(manifests):
        webhooks = []
        for original in doc.get("webhooks", []):
            rules = original.get("rules") or []
            groups = _groups(original)
            resources = {
                (g, r) for rule in rules for g in rule.get("apiGroups", []) for r in rule["resources"]
            }
            if groups == {KUEUE_GROUP}:
                selector = None
            elif resources and resources <= job_resources:
                selector = queued
            else:
                continue
            path = original["clientConfig"]["service"]["path"]
            hook = {
                **original,
                "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle},
            }
            if selector is not None:
                hook["objectSelector"] = selector
            hook.setdefault("timeoutSeconds", 10)
            webhooks.append(hook)
        if webhooks:
            out.append(_prefixed(doc, webhooks))
    if not out:
        raise ClusterError(f"no Kueue webhook configurations in {manifests}")
    return out


def kueue_configuration(
    *, health_port: int, metrics_port: int, webhook_port: int, cert_dir: Path, frameworks: Sequence[str]
) -> dict[str, Any]:
    """Kueue's Configuration (``config.kueue.x-k8s.io/v1beta2``) for a host process on loopback ports.

    Internal certificate management off (its rotator issues certificates for the in-cluster Service name,
    which a URL on 127.0.0.1 does not match), no leader election (one replica), jobs without a queue name
    left alone, and the visibility server off (it would bind every interface, and nothing here reads it).
    """
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "manageJobsWithoutQueueName": False,
        "internalCertManagement": {"enable": False},
        "leaderElection": {"leaderElect": False},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "integrations": {"frameworks": list(frameworks)},
        "featureGates": {"VisibilityOnDemand": False},
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class KueueProcess:
    """A running Kueue controller; written to ``<own dir>/kueue.json``."""

    pid: int
    health_port: int
    metrics_port: int
    webhook_port: int
    config: str
    log: str
    webhook_configurations: tuple[str, ...]
    """``Kind/name`` of the webhook configurations registered for it (removed by :func:`stop_kueue`)."""

    def ready(self) -> bool:
        return http_ok(f"http://127.0.0.1:{self.health_port}/readyz")


def _kueue_state(name: str) -> Path:
    return own_dir(name) / "kueue.json"


def _read_kueue_state(name: str) -> KueueProcess | None:
    try:
        raw = json.loads(_kueue_state(name).read_text())
        raw["webhook_configurations"] = tuple(raw.get("webhook_configurations", ()))
        return KueueProcess(**raw)
    except (OSError, ValueError, TypeError):
        return None


def kueue_process(name: str = DEFAULT_NAME) -> KueueProcess | None:
    """The Kueue controller ``start_kueue`` started for cluster ``name``, if it still runs."""
    process = _read_kueue_state(name)
    if process is None or not pid_alive(process.pid):
        return None
    if HAVE_PROC and not names_directory(cmdline(process.pid), own_dir(name)):
        return None  # the pid was reused
    return process


def _ensure_kueue_metrics_certificate(directory: Path = KUEUE_METRICS_CERT_DIR) -> None:
    """A certificate and key where Kueue reads its metrics certificate; kept if present and unexpired."""
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    with contextlib.suppress(OSError, ValueError):
        certificate = x509.load_pem_x509_certificate(cert_path.read_bytes())
        if key_path.is_file() and certificate.not_valid_after_utc.timestamp() > time.time() + 86400:
            return
    try:
        ca = CertificateAuthority.new("trainer-local-kueue-metrics-ca")
        ca.issue_serving(["127.0.0.1", "localhost"]).write(directory, "tls.crt", "tls.key")
    except OSError as exc:
        raise ClusterError(
            f"cannot write Kueue's metrics certificate to {directory} ({exc.strerror}): with internal "
            "certificate management off, Kueue v0.17 reads it from that fixed path and exits without it; "
            "create the directory writable for this user, or put a tls.crt/tls.key pair there"
        ) from exc


def _kueue_webhooks_serving(kubectl: Kubectl) -> bool:
    """True once kube-apiserver calls Kueue's mutating webhook: a dry-run ResourceFlavor gets a finalizer."""
    probe = {"apiVersion": KUEUE_API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": "webhook-probe"}}
    argv = [str(kubectl.binary), f"--kubeconfig={kubectl.kubeconfig}", "create", "--dry-run=server"]
    result = subprocess.run(
        [*argv, "-o", "json", "-f", "-"], input=json.dumps(probe), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        return False
    return bool(json.loads(result.stdout).get("metadata", {}).get("finalizers"))


def start_kueue(
    state: ClusterState,
    *,
    frameworks: Sequence[str] = KUEUE_FRAMEWORKS,
    timeout: float = 90.0,
    log_level: str = "info",
) -> KueueProcess:
    """(Re)start Kueue for the cluster and return once its webhooks answer.

    Installs, idempotently and server-side: Kueue's CRDs as released (without the conversion-webhook
    patches: only ``v1beta2``, the storage version, is converted correctly) and the Trainer CRDs (Kueue
    defers an integration whose kind is not served, and polls for it with back-off). Then: a serving
    certificate for 127.0.0.1 from a throwaway CA, the Configuration of :func:`kueue_configuration`, the
    process (a session of its own; retried when it loses a port race), ``/readyz``, the webhook
    configurations of :func:`kueue_webhook_configurations`, and a probe through kube-apiserver. A Kueue
    already running for this cluster is stopped first.
    """
    manifests = kueue_manifests()
    binary = kueue_binary()
    stop_kueue(state.name)
    client = connect(state)
    try:
        install_crds(client, [*manifests.crds, TRAINER_CRD_DIR], timeout=timeout)
    finally:
        client.close()
    _ensure_kueue_metrics_certificate()
    directory = Path(state.own_dir) / "kueue"
    cert_dir = directory / "certs"
    ca = CertificateAuthority.new("trainer-local-kueue-webhook-ca")
    ca.issue_serving(["127.0.0.1", "localhost"]).write(cert_dir, "tls.crt", "tls.key")
    log = directory / "kueue.log"
    for attempt in range(1, 4):
        health, metrics, webhook = free_port(), free_port(), free_port()
        configuration = kueue_configuration(
            health_port=health,
            metrics_port=metrics,
            webhook_port=webhook,
            cert_dir=cert_dir,
            frameworks=frameworks,
        )
        config_path = write_yaml(directory / "config.yaml", [configuration])
        argv = [
            str(binary),
            f"--kubeconfig={state.kubeconfig}",
            f"--config={config_path}",
            f"--zap-log-level={log_level}",
        ]
        registered = kueue_webhook_configurations(
            manifests.webhooks, port=webhook, ca_bundle=ca.cert_pem, frameworks=frameworks
        )
        with log.open("ab") as out:
            out.write(f"\n--- start attempt {attempt}: {' '.join(argv)}\n".encode())
            out.flush()
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            process = KueueProcess(
                pid=proc.pid,
                health_port=health,
                metrics_port=metrics,
                webhook_port=webhook,
                config=str(config_path),
                log=str(log),
                webhook_configurations=tuple(f"{c['kind']}/{c['metadata']['name']}" for c in registered),
            )
            _kueue_state(state.name).write_text(json.dumps(dataclasses.asdict(process), indent=2) + "\n")
            deadline = time.monotonic() + timeout
            while proc.poll() is None and time.monotonic() < deadline and not process.ready():
                time.sleep(0.2)
            if proc.poll() is None and process.ready():
                break
            if proc.poll() is None:
                stop_kueue(state.name)
                raise ClusterError(f"Kueue was not ready within {timeout:.0f} s; {log}:\n{tail_file(log)}")
            log_tail = tail_file(log)
            this_attempt = log.read_text(errors="replace").rsplit("\n--- start attempt ", 1)[-1]
            if not PORT_RACE.search(this_attempt):
                _kueue_state(state.name).unlink(missing_ok=True)
                raise ClusterError(f"Kueue exited with code {proc.returncode}; {log}:\n{log_tail}")
        except BaseException:  # an error or Ctrl-C here must not leave an untracked Kueue running
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
            _kueue_state(state.name).unlink(missing_ok=True)
            raise
        say(f"Kueue lost a port race (attempt {attempt}); retrying with new ports")
    else:
        _kueue_state(state.name).unlink(missing_ok=True)
        raise ClusterError(f"Kueue could not bind its ports in 3 attempts; {log}:\n{tail_file(log)}")
    kubectl = state.kubectl_runner()
    try:
        kubectl.apply(registered, field_manager=INSTALL_FIELD_MANAGER)
        wait_for(
            lambda: _kueue_webhooks_serving(kubectl),
            timeout=timeout,
            what="Kueue's webhooks to admit requests",
            explain=lambda: tail_file(log),
        )
    except BaseException:
        stop_kueue(state.name)
        raise
    return process


def stop_kueue(name: str = DEFAULT_NAME) -> None:
    """Stop the Kueue controller of cluster ``name`` and remove its webhook configurations; idempotent.

    The configurations go even when the process is already gone: with ``failurePolicy: Fail`` they would
    refuse every ClusterQueue, ResourceFlavor and Workload, and every TrainJob with a queue name. Kueue's
    CRDs and objects stay; ClusterQueues and ResourceFlavors carry Kueue's ``resource-in-use`` finalizer, so
    delete them while Kueue runs.
    """
    recorded = _read_kueue_state(name)
    process = kueue_process(name)
    if process is not None:
        terminate([process.pid], grace=30.0)
    state = None
    with contextlib.suppress(ClusterError):
        state = kwok.ClusterState.read(name)
    if recorded is not None and state is not None:
        with contextlib.suppress(ApiError, TransportError, OSError):
            client = connect(state)
            try:
                for entry in recorded.webhook_configurations:
                    kind, _, configuration = entry.partition("/")
                    with contextlib.suppress(NotFound):
                        client.delete(_WEBHOOK_CONFIGURATION_GVKS[kind], configuration)
            finally:
                client.close()
    _kueue_state(name).unlink(missing_ok=True)


# -------------------------------------------------------------------------------------- Kueue in kind

KIND_DEPLOYMENT = "kueue-controller-manager"
"""Kueue's Deployment in :data:`KUEUE_NAMESPACE`, as its ``config/default`` names it (and its e2e suite
waits for it)."""
KIND_CONFIG_MAP = "kueue-manager-config"
KIND_CONFIG_KEY = "controller_manager_config.yaml"
"""The ConfigMap of Kueue's Configuration in its install, and its key (mounted at ``/<key>``)."""
KIND_RELEASED_IMAGE = "us-central1-docker.pkg.dev/k8s-staging-images/kueue/kueue"
"""The image ``config/components/manager`` of Kueue's module names; the overlay replaces it."""
KUEUE_DEFAULT_DIR = "config/default"
KUEUE_MANAGER_CONFIG = "config/components/manager/controller_manager_config.yaml"
KIND_CONFIG_HASH_ANNOTATION = "trainer-e2e.kubeflow.org/configuration"
KIND_MANAGER_CPU = "50m"
"""The manager's CPU request in the overlay (Kueue's manifests ask for 500m, a quarter of a small node)."""


def kind_configuration(shipped: dict[str, Any], frameworks: Sequence[str]) -> dict[str, Any]:
    """Kueue's shipped Configuration with ``integrations.frameworks`` set to ``frameworks``; nothing else
    changes (leader election, internal certificates, the webhook, health and metrics ports as shipped)."""
    configuration = dict(shipped)
    configuration["integrations"] = {**(shipped.get("integrations") or {}), "frameworks": list(frameworks)}
    return configuration


def kind_webhook_patches(manifests: Path) -> list[dict[str, Any]]:
    """Strategic-merge patches of Kueue's two webhook configurations (after its ``kueue-`` name prefix):
    every webhook of a job kind (any group other than Kueue's own) selects only objects labelled
    ``kueue.x-k8s.io/queue-name``.

    As shipped, every Pod, Job, JobSet, Deployment, StatefulSet and TrainJob created anywhere but in
    kube-system and kueue-system goes through Kueue's webhooks (``failurePolicy: Fail``), those of disabled
    integrations too (no-op handlers), and every TrainJob gets Kueue's (empty) runtime patch. With the
    selector only objects meant for Kueue reach it, so the rest of the kind tier neither depends on Kueue
    being up nor sees its defaults; this is the same narrowing the kwok path makes
    (:func:`kueue_webhook_configurations`). Kueue's own kinds keep their webhooks as they are.
    """
    queued = {"matchExpressions": [{"key": KUEUE_QUEUE_LABEL, "operator": "Exists"}]}
    patches = []
    for doc in _released_webhook_configurations(manifests):
        hooks = []
        for hook in doc.get("webhooks") or ():
            groups = _groups(hook)
            if groups and groups != {KUEUE_GROUP}:
                hooks.append({"name": hook["name"], "objectSelector": queued})
        if hooks:
            patches.append(_prefixed(doc, hooks))
    if not patches:
        raise ClusterError(f"no job webhooks in {manifests}")
    return patches


def write_kind_overlay(
    directory: Path, *, module_dir: Path, image: str, frameworks: Sequence[str] = KUEUE_FRAMEWORKS
) -> Path:
    """A kustomize overlay of Kueue's ``config/default`` (in the Go module at ``module_dir``) for kind, in
    ``directory``; returns it. What it changes, and nothing else:

    - the image: ``image``, built here, with ``imagePullPolicy: IfNotPresent`` (the manifests say
      ``Always``; the node has the image and no registry), as Kueue's own e2e overlay does;
    - the Configuration: Kueue's ``controller_manager_config.yaml`` with ``integrations.frameworks`` set to
      ``frameworks`` (the TrainJob integration, ``trainer.kubeflow.org/trainjob``, as Kueue's docs tell
      users to enable it);
    - the manager's CPU request (:data:`KIND_MANAGER_CPU`), and an annotation of its pod template with a
      hash of the Configuration (:data:`KIND_CONFIG_HASH_ANNOTATION`), so that applying another one rolls
      the Deployment (Kueue reads its Configuration once, at start);
    - the job webhooks' object selector (:func:`kind_webhook_patches`).
    """
    directory.mkdir(parents=True, exist_ok=True)
    shipped = yaml.safe_load((module_dir / KUEUE_MANAGER_CONFIG).read_text())
    configuration = yaml.safe_dump(kind_configuration(shipped, frameworks))
    (directory / KIND_CONFIG_KEY).write_text(configuration)
    patch_files = []
    for patch in kind_webhook_patches(module_dir / thirdparty.KUEUE_WEBHOOK_MANIFESTS):
        name = f"{patch['metadata']['name']}.yaml"
        (directory / name).write_text(yaml.safe_dump(patch))
        patch_files.append(name)
    repository, _, tag = image.rpartition(":")
    deployment_patch = [
        {
            "op": "replace",
            "path": "/spec/template/spec/containers/0/imagePullPolicy",
            "value": "IfNotPresent",
        },
        {
            "op": "replace",
            "path": "/spec/template/spec/containers/0/resources/requests/cpu",
            "value": KIND_MANAGER_CPU,
        },
        {
            "op": "add",
            "path": "/spec/template/metadata/annotations/" + KIND_CONFIG_HASH_ANNOTATION.replace("/", "~1"),
            "value": hashlib.sha256(configuration.encode()).hexdigest()[:12],
        },
    ]
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(module_dir / KUEUE_DEFAULT_DIR, directory)],
        "images": [{"name": KIND_RELEASED_IMAGE, "newName": repository, "newTag": tag}],
        "configMapGenerator": [
            {
                "name": KIND_CONFIG_MAP,
                "namespace": KUEUE_NAMESPACE,
                "behavior": "merge",
                "files": [KIND_CONFIG_KEY],
            }
        ],
        "patches": [
            {
                "target": {"kind": "Deployment", "name": KIND_DEPLOYMENT},
                "patch": yaml.safe_dump(deployment_patch),
            },
            *({"path": name} for name in patch_files),
        ],
    }
    header = "# Written by hack/e2e-setup-kind.sh (support.kueue.write_kind_overlay): Kueue for kind.\n"
    (directory / "kustomization.yaml").write_text(header + yaml.safe_dump(kustomization, sort_keys=False))
    return directory


@dataclass(frozen=True, slots=True, kw_only=True)
class InstalledKueue:
    """Kueue as installed in a kind cluster: its Deployment's image and its Configuration's integrations."""

    image: str
    frameworks: tuple[str, ...]

    @property
    def trainjob_integration(self) -> bool:
        return KUEUE_TRAINJOB_FRAMEWORK in self.frameworks


def installed_kueue(apps: Any, core: Any) -> InstalledKueue | None:
    """The Kueue installed in :data:`KUEUE_NAMESPACE` (official ``kubernetes`` client APIs), or None."""
    try:
        deployment = apps.read_namespaced_deployment(KIND_DEPLOYMENT, KUEUE_NAMESPACE)
        config_map = core.read_namespaced_config_map(KIND_CONFIG_MAP, KUEUE_NAMESPACE)
    except kubernetes_client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    (manager,) = [c for c in deployment.spec.template.spec.containers if c.name == "manager"]
    configuration = yaml.safe_load((config_map.data or {}).get(KIND_CONFIG_KEY) or "") or {}
    frameworks = tuple((configuration.get("integrations") or {}).get("frameworks") or ())
    return InstalledKueue(image=str(manager.image), frameworks=frameworks)


def kind_kueue_serving(custom: Any, apps: Any) -> str:
    """What keeps Kueue in the kind cluster from serving, or ``""`` once it does: its Deployment Available,
    and kube-apiserver reaching its mutating webhook (a dry-run ResourceFlavor gets Kueue's finalizer)."""
    try:
        deployment = apps.read_namespaced_deployment(KIND_DEPLOYMENT, KUEUE_NAMESPACE)
    except kubernetes_client.ApiException as exc:
        if exc.status == 404:
            return f"no Deployment {KUEUE_NAMESPACE}/{KIND_DEPLOYMENT}"
        raise
    conditions = deployment.status.conditions or []
    if not any(c.type == "Available" and c.status == "True" for c in conditions):
        return f"Deployment {KUEUE_NAMESPACE}/{KIND_DEPLOYMENT} is not Available"
    probe = {"apiVersion": KUEUE_API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": "webhook-probe"}}
    try:
        answer = custom.create_cluster_custom_object(
            KUEUE_GROUP, "v1beta2", "resourceflavors", probe, dry_run="All"
        )
    except kubernetes_client.ApiException as exc:
        return f"a dry-run ResourceFlavor was refused: {exc.status} {exc.reason}: {exc.body}"
    if not (answer.get("metadata") or {}).get("finalizers"):
        return "a dry-run ResourceFlavor got no finalizer: Kueue's mutating webhook was not called"
    return ""


def wait_until_kind_kueue_serving(custom: Any, apps: Any, *, timeout: float = 300.0) -> None:
    """Return once :func:`kind_kueue_serving` says Kueue serves; TimeoutError naming the last thing seen."""
    deadline = time.monotonic() + timeout
    while True:
        last = kind_kueue_serving(custom, apps)
        if not last:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"Kueue is not serving after {timeout:.0f} s: {last}")
        time.sleep(2.0)


# ----------------------------------------------------------------------------------------------------- demo
