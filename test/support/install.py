"""The Trainer installed into the kwok cluster: its CRDs and default runtimes, the manager's namespace,
ServiceAccount and RBAC for a manager on the host, and the TrainJob a user creates (and clears again).

The CRDs and default runtimes are server-side applied by an installer's field manager
(:data:`INSTALL_FIELD_MANAGER`), so the controller's fields stay its own; clearing a TrainJob deletes what it
owned too, for a demo that runs again.

Go origin: none; the manifests are the shipped ones (``config/crd``, ``config/runtimes``, ``config/local``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from controller.client.client import Client
from controller.client.errors import NoKindMatch, NotFound
from controller.client.gvk import GVK
from controller.envtest.kubeconfig import write_kubeconfig
from runtime.api import constants
from runtime.render import RenderError, load_documents
from support.jobset import JOBSET_NAME_LABEL
from support.kwok import REPO, ClusterState, scheduler_plugins_podgroup_crd
from support.process import ClusterError, wait_for

TRAINER_CRD_DIR = REPO / "config" / "crd"
TRAINER_RUNTIMES_DIR = REPO / "config" / "runtimes"
INSTALL_FIELD_MANAGER = "trainer-install"
"""Who server-side applies the CRDs and default runtimes (an installer, not the controller)."""
USER_FIELD_MANAGER = "trainer-demo"
"""Who creates the TrainJob: the user's part, so its fields are not the controller's."""

CRD_GVK = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
TRAINJOB_GVK = GVK(constants.GROUP, constants.VERSION, constants.TRAINJOB_KIND)
JOBSET_GVK = GVK(constants.JOBSET_GROUP, constants.JOBSET_VERSION, constants.JOBSET_KIND)
JOB_GVK = GVK("batch", "v1", "Job")
POD_GVK = GVK("", "v1", "Pod")
_RUNTIME_KINDS = (constants.CLUSTER_TRAINING_RUNTIME_KIND, constants.TRAINING_RUNTIME_KIND)
# Kinds a TrainJob's plugins create besides its JobSet (the PodGroups only when their CRD is served).
OWNED_GVKS = (
    GVK("", "v1", "ConfigMap"),
    GVK("", "v1", "Secret"),
    GVK("scheduling.x-k8s.io", "v1alpha1", constants.POD_GROUP_KIND),
    GVK("scheduling.volcano.sh", "v1beta1", constants.POD_GROUP_KIND),
)


def connect(state: ClusterState) -> Client:
    """A `controller.client.client.Client` for the cluster (close it when done)."""
    return Client.load(state.kubeconfig, user_agent="support.install")


def read_manifests(path: Path, kinds: Sequence[str]) -> list[dict[str, Any]]:
    """The objects of the given kinds in a YAML file or directory (``kustomization.yaml`` and the like
    are skipped)."""
    try:
        documents = load_documents(path)
    except RenderError as exc:
        raise ClusterError(str(exc)) from exc
    return [d.obj for d in documents if d.kind in kinds]


def install_crds(client: Client, paths: Sequence[Path], *, timeout: float = 60.0) -> list[str]:
    """Server-side apply the CRDs in ``paths`` (files or directories) and wait until each is Established.

    Returns their names. Server-side, so the CRDs' size does not matter (no last-applied annotation);
    idempotent.
    """
    crds = [crd for path in paths for crd in read_manifests(path, ("CustomResourceDefinition",))]
    for crd in crds:
        client.apply(crd, INSTALL_FIELD_MANAGER, force=True)
    names = [crd["metadata"]["name"] for crd in crds]

    def established() -> bool:
        return all(
            any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in client.get(CRD_GVK, name).get("status", {}).get("conditions") or []
            )
            for name in names
        )

    wait_for(established, timeout=timeout, what=f"CRDs Established: {', '.join(names)}")
    return names


def install_runtimes(client: Client, path: Path = TRAINER_RUNTIMES_DIR) -> list[str]:
    """Server-side apply the (Cluster)TrainingRuntimes in ``path``; returns ``Kind/name`` of each."""
    installed = []
    for runtime in read_manifests(path, _RUNTIME_KINDS):
        client.apply(runtime, INSTALL_FIELD_MANAGER, force=True)
        installed.append(f"{runtime['kind']}/{runtime['metadata']['name']}")
    return installed


def install_trainer(client: Client) -> tuple[list[str], list[str]]:
    """The Trainer CRDs (``config/crd/``) and default ClusterTrainingRuntimes (``config/runtimes/``)."""
    return install_crds(client, [TRAINER_CRD_DIR]), install_runtimes(client)


def controlled_by_trainjob(obj: Mapping[str, Any], name: str) -> bool:
    return any(
        ref.get("controller") is True
        and ref.get("kind") == constants.TRAINJOB_KIND
        and ref.get("name") == name
        for ref in obj.get("metadata", {}).get("ownerReferences") or ()
    )


def _delete(client: Client, gvk: GVK, name: str, namespace: str) -> None:
    with contextlib.suppress(NotFound):
        client.delete(gvk, name, namespace, propagation_policy="Background")


def clear_trainjob(client: Client, namespace: str, name: str, *, timeout: float = 60.0) -> None:
    """Delete the TrainJob ``name`` and what it owns, and wait until its JobSet's Jobs and Pods are gone.

    The children are deleted here rather than left to the garbage collector, which notices a freshly
    installed CRD's objects only at its next resource rediscovery (every 30 s): a re-run of the demo right
    after the first would otherwise wait for it, or find the old JobSet in its way.
    """
    _delete(client, TRAINJOB_GVK, name, namespace)
    _delete(client, JOBSET_GVK, name, namespace)
    for gvk in OWNED_GVKS:
        try:
            items = client.list(gvk, namespace).items
        except (NoKindMatch, NotFound):  # a PodGroup kind whose CRD is not installed
            continue
        for obj in items:
            if controlled_by_trainjob(obj, name):
                _delete(client, gvk, obj["metadata"]["name"], namespace)
    selector = f"{JOBSET_NAME_LABEL}={name}"
    for job in client.list(JOB_GVK, namespace, label_selector=selector).items:
        _delete(client, JOB_GVK, job["metadata"]["name"], namespace)

    def gone() -> bool:
        with contextlib.suppress(NotFound):
            client.get(TRAINJOB_GVK, name, namespace)
            return False
        with contextlib.suppress(NotFound):
            client.get(JOBSET_GVK, name, namespace)
            return False
        return not any(
            client.list(gvk, namespace, label_selector=selector).items for gvk in (JOB_GVK, POD_GVK)
        )

    wait_for(gone, timeout=timeout, what=f"TrainJob {namespace}/{name} and its JobSet, Jobs and Pods to go")


def create_trainjob(client: Client, manifest: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """Create the TrainJob in ``namespace`` (as a user would) and return it as stored, with its UID."""
    trainjob = {**manifest, "metadata": {**manifest["metadata"], "namespace": namespace}}
    return client.create(trainjob, field_manager=USER_FIELD_MANAGER)


def finished_condition(obj: Mapping[str, Any], types: Sequence[str]) -> str | None:
    for condition in obj.get("status", {}).get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in types:
            return str(condition["type"])
    return None


LOCAL_INSTALL = REPO / "config" / "local"
"""The kustomize overlay for a manager outside the cluster: CRDs, RBAC, ServiceAccount, public ConfigMap."""
MANAGER_SERVICE_ACCOUNT = "kubeflow-trainer-controller-manager"
MANAGER_NAMESPACE = "kubeflow-system"
"""Where the manager's Lease lives (and, installed in a cluster, the manager itself)."""


def install_for_local_manager(state: ClusterState, *, timeout: float = 60.0) -> list[str]:
    """``kubectl apply --server-side -k config/local``: the CRDs, the manager's namespace, ServiceAccount and
    RBAC, and the public ConfigMap, as the shipped manifests install them (without the Deployment and the
    Service-addressed webhooks); and scheduler-plugins' PodGroup CRD, so CoScheduling runtimes work (the
    manager watches PodGroups only when their CRD is installed before it starts, as upstream). Waits until
    the CRDs are Established; returns the Trainer CRDs' names."""
    kubectl = state.kubectl_runner()
    apply = ("apply", "--server-side", "--force-conflicts", f"--field-manager={INSTALL_FIELD_MANAGER}")
    kubectl(*apply, "-k", str(LOCAL_INSTALL), timeout=120.0)
    kubectl(*apply, "-f", str(scheduler_plugins_podgroup_crd()), timeout=120.0)
    crds = read_manifests(TRAINER_CRD_DIR, ("CustomResourceDefinition",))
    names = [crd["metadata"]["name"] for crd in crds]
    for name in [*names, "podgroups.scheduling.x-k8s.io"]:
        kubectl("wait", "--for=condition=Established", f"--timeout={timeout:.0f}s", f"crd/{name}",
                timeout=timeout + 10)  # fmt: skip
    return names


def service_account_kubeconfig(state: ClusterState, path: Path, *, hours: int = 24) -> Path:
    """A kubeconfig that authenticates as the manager's ServiceAccount (a TokenRequest token valid for
    ``hours``), on the cluster's server and CA: the manager runs with the shipped RBAC, not as admin."""
    token = state.kubectl_runner()(
        "create", "token", MANAGER_SERVICE_ACCOUNT, "-n", MANAGER_NAMESPACE, f"--duration={hours}h"
    ).strip()
    admin = yaml.safe_load(Path(state.kubeconfig).read_text())
    user = f"system:serviceaccount:{MANAGER_NAMESPACE}:{MANAGER_SERVICE_ACCOUNT}"
    context = admin["contexts"][0]["context"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": context["cluster"], "user": user}}],
        "current-context": user,
    }
    return write_kubeconfig(path, config)
