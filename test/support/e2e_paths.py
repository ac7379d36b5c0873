"""The two ways the e2e suite gets a running Trainer controller, and everything that differs between them.

The suite (``test/e2e``) is the same on both paths; only how the manager runs and how kube-apiserver reaches
its admission webhooks differ, and those differences live here and nowhere else:

- **The manager.** kwok: ``trainer-controller-manager`` from ``.venv``, a host process that the fixture
  starts and stops (``support.cluster_manager`` ``start_manager``/``stop_manager``). kind: the Deployment
  ``kubeflow-system/kubeflow-trainer-controller-manager`` from ``config/default``, running the image built
  from ``Dockerfile`` and loaded into kind; the script installs it and it outlives the session.
- **Webhook addressing** (``clientConfig``). kwok: ``url: https://127.0.0.1:<port>/<path>``, since a host
  process has no Service. kind: ``service`` ``kubeflow-trainer-controller-manager`` in ``kubeflow-system``,
  port 443, with the path (``config/webhook/``). :func:`webhook_configurations` returns either.
- **The serving certificate.** kwok: a throwaway CA, ``--webhook-cert-dir``, ``certManagement.enable:
  false``; ``start_manager`` registers the ``caBundle``. kind: the manager's certificate rotator fills the
  Secret ``kubeflow-trainer-webhook-cert`` and injects the ``caBundle``.
- **Ready when.** kwok: ``/readyz`` on its loopback health port, then the registration. kind: the
  Deployment is Available and the validating webhook answers (:func:`wait_until_serving`).
- **Its log.** kwok: ``<cache>/kwok/trainer/<name>/manager/manager.log``. kind: ``kubectl -n
  kubeflow-system logs deployment/kubeflow-trainer-controller-manager`` (:func:`manager_log_hint`).
- **Its Configuration.** kwok: the file ``start_manager`` passes. kind: what the install put into the
  ConfigMap ``kubeflow-trainer-config``; the Helm install of ``hack/e2e-setup-kind.sh`` enables the example
  third-party plugin and the ``TrainJobStatus`` gate there, the kustomize install ships the defaults
  (:func:`installed_manager` reads it, with the image the Deployment runs).

Both paths check "serving" the same way: a TrainJob with ``numNodes: 0`` is valid for the CRD schema and
refused by the validating webhook, so kube-apiserver's answer tells whether the webhook was reached (a denial
naming the field) or not (``failed calling webhook``); nothing is ever created by the probe.

- **Kueue** (``test/e2e/test_kueue.py``). kwok: the ``kueue`` binary as a host process
  (``support.kueue`` ``start_kueue``/``stop_kueue``: URL webhooks on 127.0.0.1, the TrainJob integration).
  kind: the Deployment ``kueue-system/kueue-controller-manager`` that ``hack/e2e-setup-kind.sh``
  installed from Kueue's own manifests (the image built from its Go module, the TrainJob integration);
  see :func:`running_kueue`. A ``kueue`` binary or Kueue manifests missing on this machine (kwok), or no
  Kueue installed (kind), is a missing prerequisite (:class:`KueueMissing`), as Go is for the whole tier:
  the tests skip with the reason locally and fail under ``CI`` or ``TRAINER_REQUIRE_CLUSTER``
  (``test/conftest.py``'s ``prerequisite``).

What the pods do is not a difference of the controller's path but of the nodes: kwok's stages play a pod's
lifecycle on a timer, kind runs containers. Tests that rely on stages say so themselves and skip on kind.

The e2e tests import this module; ``hack/e2e-setup-kind.sh`` runs ``python hack/e2e_paths.py wait-serving
--flavour kind`` (a command line over :func:`wait_until_serving`) so that the script and the suite wait for
the same thing.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import yaml

from controller.client.client import Client
from controller.client.errors import ApiError, NotFound, TransportError
from controller.client.gvk import GVK
from runtime.api import constants
from support import cluster_manager, install, kueue, kwok, launcher
from support.process import ClusterError

MANAGER_NAMESPACE = "kubeflow-system"
MANAGER_NAME = "kubeflow-trainer-controller-manager"
"""The Deployment and the Service of an installed manager (``config/manager/``)."""
CONFIG_MAP = "kubeflow-trainer-config"
CONFIG_KEY = "controller_manager_config.yaml"
"""The ConfigMap of an installed manager's Configuration, and its key (mounted at ``/<key>``)."""

FLAVOURS = ("kwok", "kind")
DEPLOYMENT_GVK = GVK("apps", "v1", "Deployment")
TRAINJOB_GVK = GVK(constants.GROUP, constants.VERSION, constants.TRAINJOB_KIND)


class ManagerUnavailable(Exception):
    """The path cannot give this session a manager (an external kwok cluster without ``make demo``'s)."""


# ------------------------------------------------------------------------------------- webhook addressing


def webhook_configurations(flavour: str, *, port: int = 0, ca_bundle: bytes = b"") -> list[dict[str, Any]]:
    """The admission webhook configurations this path registers, read from where each path keeps them.

    kwok: ``support.launcher.webhook_configurations``, derived from ``config/webhook/`` (``url`` to the host
    manager on ``port``, the throwaway CA as ``caBundle``). kind: ``config/webhook/`` as ``kubectl apply -k
    config/default`` installs them (``service`` of the manager in ``kubeflow-system``; the rotator injects
    ``caBundle`` later). They must differ only in ``clientConfig`` (and the labels the manifests carry),
    which a unit test checks.
    """
    if flavour == "kwok":
        return launcher.webhook_configurations(port, ca_bundle)
    if flavour == "kind":
        return [yaml.safe_load(path.read_text()) for path in launcher.WEBHOOK_MANIFESTS]
    raise ValueError(f"unknown e2e cluster flavour {flavour!r} (one of {', '.join(FLAVOURS)})")


def webhook_client_config(flavour: str, webhook: str, *, port: int = 0) -> dict[str, Any]:
    """How kube-apiserver reaches the manager's webhook ``webhook`` on this path (``caBundle`` aside)."""
    for configuration in webhook_configurations(flavour, port=port):
        for hook in configuration["webhooks"]:
            if hook["name"] == webhook:
                return {k: v for k, v in hook["clientConfig"].items() if k != "caBundle"}
    raise KeyError(f"no webhook {webhook!r} on the {flavour} path")


def _probe_trainjob(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": constants.API_VERSION,
        "kind": constants.TRAINJOB_KIND,
        "metadata": {"name": "webhook-probe", "namespace": namespace},
        "spec": {
            "runtimeRef": {"name": "torch-distributed", "kind": constants.CLUSTER_TRAINING_RUNTIME_KIND},
            "trainer": {"numNodes": 0},
        },
    }


def webhook_answer(client: Client, namespace: str = MANAGER_NAMESPACE) -> str:
    """kube-apiserver's answer to a TrainJob only the validating webhook refuses; ``""`` if it was stored.

    Raises :class:`TransportError` when the API server itself is not reachable.
    """
    try:
        created = client.create(_probe_trainjob(namespace))
    except ApiError as exc:
        return exc.message
    with contextlib.suppress(NotFound):  # no validating webhook registered at all: undo
        client.delete(TRAINJOB_GVK, created["metadata"]["name"], created["metadata"]["namespace"])
    return ""


def webhook_serving(answer: str) -> bool:
    """Whether ``answer`` (from :func:`webhook_answer`) came from our validating webhook."""
    return "denied the request" in answer and "spec.trainer.numNodes" in answer


# ------------------------------------------------------------------------------------------------ readiness


def deployment_available(client: Client) -> bool:
    try:
        deployment = client.get(DEPLOYMENT_GVK, MANAGER_NAME, MANAGER_NAMESPACE)
    except NotFound:
        return False
    conditions = (deployment.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)


def wait_until_serving(client: Client, flavour: str, *, timeout: float = 300.0) -> None:
    """Return once the manager is up on this path and kube-apiserver reaches its webhooks.

    Raises :class:`TimeoutError` with the last thing seen.
    """
    deadline = time.monotonic() + timeout
    last = "nothing checked yet"
    while True:
        try:
            if flavour == "kind" and not deployment_available(client):
                last = f"Deployment {MANAGER_NAMESPACE}/{MANAGER_NAME} is not Available"
            else:
                answer = webhook_answer(client)
                if webhook_serving(answer):
                    return
                last = f"the validating webhook did not answer: {answer or 'the probe TrainJob was stored'}"
        except (ApiError, TransportError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() >= deadline:
            raise TimeoutError(f"the Trainer manager is not serving after {timeout:.0f} s: {last}")
        time.sleep(2.0)


def feature_gate_on(client: Client, name: str) -> bool:
    """Whether the installed manager runs with the feature gate ``name`` on, as its Configuration says
    (``featureGates`` of the ConfigMap ``kubeflow-system/kubeflow-trainer-config``, which the Helm chart and
    ``config/default`` both install). Without that ConfigMap (the kwok path: a host manager started with the
    shipped Configuration and no gates) every gate reads off. The Deployment passes no ``--feature-gates``.
    """
    try:
        configuration = _installed_configuration(client)
    except NotFound:
        return False
    return (configuration.get("featureGates") or {}).get(name) is True


def _installed_configuration(client: Client) -> dict[str, Any]:
    """The decoded Configuration of the ConfigMap ``kubeflow-trainer-config`` (NotFound when absent)."""
    config_map = client.get(CONFIG_MAP_GVK, CONFIG_MAP, MANAGER_NAMESPACE)
    configuration = yaml.safe_load((config_map.get("data") or {}).get(CONFIG_KEY) or "") or {}
    return dict(configuration)


def manager_log_hint(flavour: str, cluster_name: str = "") -> str:
    """Where to read the manager's log on this path (for messages)."""
    if flavour == "kind":
        return f"kubectl -n {MANAGER_NAMESPACE} logs deployment/{MANAGER_NAME}"
    return str(kwok.own_dir(cluster_name or kwok.DEFAULT_NAME) / "manager" / "manager.log")


# ------------------------------------------------------------------------------------ the installed manager


@dataclass(frozen=True, slots=True, kw_only=True)
class InstalledManager:
    """What an installed manager (kind) runs: its image and its Configuration as the install wrote it."""

    image: str
    """The manager container's image in the Deployment."""
    configuration: dict[str, Any]
    """The decoded ``controller_manager_config.yaml`` of the ConfigMap ``kubeflow-trainer-config``."""

    @property
    def plugins(self) -> tuple[str, ...]:
        """``plugins.enabled``: the third-party plugins it runs, by entry-point name."""
        return tuple((self.configuration.get("plugins") or {}).get("enabled") or ())


CONFIG_MAP_GVK = GVK("", "v1", "ConfigMap")


def installed_manager(client: Client) -> InstalledManager:
    """The image and Configuration of the manager installed in ``kubeflow-system`` (kind's Helm or kustomize
    install). Raises :class:`ManagerUnavailable` when the Deployment or its ConfigMap is missing."""
    try:
        deployment = client.get(DEPLOYMENT_GVK, MANAGER_NAME, MANAGER_NAMESPACE)
        configuration = _installed_configuration(client)
    except NotFound as exc:
        raise ManagerUnavailable(f"no installed manager in {MANAGER_NAMESPACE}: {exc}") from exc
    containers = deployment["spec"]["template"]["spec"]["containers"]
    (manager,) = [c for c in containers if c["name"] == "manager"]
    return InstalledManager(image=manager["image"], configuration=configuration)


# ------------------------------------------------------------------------------------ the manager, per path


@dataclass(frozen=True, slots=True, kw_only=True)
class RunningManager:
    """The manager a test session talks to."""

    flavour: str
    started_here: bool
    """True when this session started it (and stops it when done)."""
    log: str
    """Where its log is (a path, or the kubectl command that prints it)."""
    process: Any = None
    """On kwok, ``support.cluster_manager.ManagerProcess``; on kind, None."""


@contextlib.contextmanager
def running_manager(
    flavour: str, kubeconfig: Path, *, owned: bool, cluster_name: str
) -> Iterator[RunningManager]:
    """The manager for the session's cluster, for as long as the ``with`` block runs.

    - kwok, a cluster this session started (``owned``): start ``trainer-controller-manager`` on the host,
      register its webhooks by URL, and stop it (removing the registrations) afterwards.
    - kwok, an external cluster: the manager ``make demo`` left running, if any; else
      :class:`ManagerUnavailable`.
    - kind: the installed Deployment, once it serves; left running.
    """
    if flavour == "kind":
        client = Client.load(str(kubeconfig), user_agent="e2e-paths")
        try:
            wait_until_serving(client, flavour, timeout=120.0)
        finally:
            client.close()
        yield RunningManager(flavour=flavour, started_here=False, log=manager_log_hint(flavour))
        return
    if flavour != "kwok":
        raise ValueError(f"unknown e2e cluster flavour {flavour!r} (one of {', '.join(FLAVOURS)})")
    log = manager_log_hint(flavour, cluster_name)
    if not owned:
        process = cluster_manager.manager_process(cluster_name)
        if process is None:
            raise ManagerUnavailable(
                "an external kwok cluster needs its manager running (`make demo` starts one)"
            )
        yield RunningManager(flavour=flavour, started_here=False, log=log, process=process)
        return
    state = kwok.ClusterState.read(cluster_name)
    if state is None:
        raise ManagerUnavailable(f"the kwok cluster {cluster_name!r} has no state file")
    client = install.connect(state)
    try:
        with contextlib.suppress(ApiError):  # the Lease's namespace; AlreadyExists on a re-run
            client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MANAGER_NAMESPACE}})
    finally:
        client.close()
    process = cluster_manager.start_manager(state)
    try:
        yield RunningManager(flavour=flavour, started_here=True, log=log, process=process)
    finally:
        cluster_manager.stop_manager(state.name)


# ---------------------------------------------------------------------------------------------------- Kueue


class KueueUnavailable(Exception):
    """This path cannot run Kueue for the session; the message says why. Skip the Kueue tests."""


class KueueMissing(KueueUnavailable):
    """This machine lacks what Kueue needs (its binary, its manifests in the Go module cache); the message
    says what and how to get it. A missing prerequisite: skip locally, fail when prerequisites are required.
    """


KUEUE_NOT_ON_KIND = (
    f"no Kueue in the kind cluster (Deployment {kueue.KUEUE_NAMESPACE}/{kueue.KIND_DEPLOYMENT}): "
    "hack/e2e-setup-kind.sh up installs it"
)


@contextlib.contextmanager
def running_kueue(flavour: str, *, cluster_name: str, kubeconfig: Path | None = None) -> Iterator[Any]:
    """Kueue with the TrainJob integration for the session's cluster, for as long as the ``with`` block runs.

    - kwok: ``support.kueue`` ``start_kueue`` (the Kueue and Trainer CRDs, the host process, its webhook
      configurations), stopped afterwards (the configurations removed). A Kueue that ``kueue-up`` left
      running for the cluster is used as it is and left running. Yields ``support.kueue.KueueProcess``.
    - kind (``kubeconfig`` required): the Kueue ``hack/e2e-setup-kind.sh`` installed, once it serves; left
      running. Yields ``support.kueue.InstalledKueue`` (its image and integrations, as installed); none
      installed is :class:`KueueMissing` (:data:`KUEUE_NOT_ON_KIND`).
    - kwok without the ``kueue`` binary of the pinned version, or without Kueue's manifests:
      :class:`KueueMissing`, naming the build command (checked before anything is started).
    """
    if flavour == "kind":
        if kubeconfig is None:
            raise ValueError("running_kueue on kind needs the cluster's kubeconfig")
        api = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
        try:
            installed = kueue.installed_kueue(
                kubernetes.client.AppsV1Api(api), kubernetes.client.CoreV1Api(api)
            )
            if installed is None:
                raise KueueMissing(KUEUE_NOT_ON_KIND)
            kueue.wait_until_kind_kueue_serving(
                kubernetes.client.CustomObjectsApi(api), kubernetes.client.AppsV1Api(api), timeout=120.0
            )
        finally:
            api.close()
        yield installed
        return
    if flavour != "kwok":
        raise ValueError(f"unknown e2e cluster flavour {flavour!r} (one of {', '.join(FLAVOURS)})")
    existing = kueue.kueue_process(cluster_name)
    if existing is not None:
        yield existing
        return
    try:
        kueue.kueue_binary()
        kueue.kueue_manifests()
    except ClusterError as exc:
        raise KueueMissing(f"Kueue cannot run here: {exc}") from exc
    state = kwok.ClusterState.read(cluster_name)
    if state is None:
        raise KueueUnavailable(f"the kwok cluster {cluster_name!r} has no state file")
    process = kueue.start_kueue(state)
    try:
        yield process
    finally:
        kueue.stop_kueue(cluster_name)
