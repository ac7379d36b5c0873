"""The shipped kustomize build (``config/``), as the integration fixtures install it.

Used by ``test/integration/test_install_manifests.py``, the reliability suite and
from the Trainer manager fixture (``test/integration/trainer/conftest.py``), which runs the manager as the
ServiceAccount and with the RBAC objects this build ships.

- :func:`kubectl_beside` is the pinned kubectl (built with kube-apiserver, kustomize inside it).
- :func:`kustomize_build` is ``kubectl kustomize <dir>``, parsed; a failed build raises with kubectl's words.
- :func:`rbac_objects` picks the manager's namespace, ServiceAccount, roles and bindings out of a build.
- :func:`service_account_kubeconfig` applies those, and returns a kubeconfig with a bound token for the
  ServiceAccount, once the API server's authorizer grants it what the roles say.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.client.client import Client
from controller.envtest import Binaries, ControlPlane, eventually

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config"
DEFAULT_OVERLAY = CONFIG / "default"
NAMESPACE = "kubeflow-system"
SERVICE_ACCOUNT = "kubeflow-trainer-controller-manager"
FIELD_MANAGER = "install-manifests-test"
RBAC_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


class BuildError(RuntimeError):
    """``kubectl kustomize`` failed."""


def kubectl_beside(kube_apiserver: Path) -> Path:
    """The pinned kubectl: hack/build-binaries.sh builds it beside kube-apiserver."""
    return kube_apiserver.parent / "kubectl"


def kustomize_build(kubectl: Path, directory: Path) -> list[dict[str, Any]]:
    """The objects of ``kubectl kustomize directory``, in kustomize's order."""
    done = subprocess.run(
        [str(kubectl), "kustomize", str(directory)], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        raise BuildError(f"kubectl kustomize {directory} failed: {done.stderr.strip()}")
    return [doc for doc in yaml.load_all(done.stdout, Loader=yaml.CSafeLoader) if doc]


def rbac_objects(objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The manager's namespace, identity and permissions: what a run as the ServiceAccount needs installed.

    The public ConfigMap's Role and RoleBinding come too (harmless, and part of the same build).
    """
    order = {kind: i for i, kind in enumerate(RBAC_KINDS)}
    picked = [obj for obj in objects if obj.get("kind") in order]
    return sorted(picked, key=lambda obj: order[obj["kind"]])


def apply_all(client: Client, objects: Sequence[dict[str, Any]]) -> None:
    """Server-side apply each object, in order, as the admin."""
    for obj in objects:
        client.apply(obj, FIELD_MANAGER, force=True)


def can_i(client: Client, verb: str, group: str, resource: str, namespace: str = "") -> bool:
    """A SelfSubjectAccessReview: may the client's user do this?"""
    review = client.create(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "verb": verb,
                    "group": group,
                    "resource": resource,
                    "namespace": namespace,
                }
            },
        }
    )
    return bool(review.get("status", {}).get("allowed"))


def service_account_kubeconfig(
    control_plane: ControlPlane,
    admin: Client,
    objects: Sequence[dict[str, Any]],
    *,
    wait: Callable[..., Any] = eventually,
) -> Path:
    """Install the RBAC objects of ``objects`` (a kustomize build) and return a kubeconfig that
    authenticates as the manager's ServiceAccount with a token from the TokenRequest API.

    Returns once the authorizer has seen the bindings (a SelfSubjectAccessReview as the ServiceAccount is
    allowed to list TrainJobs), so the first request of a manager started at once is not refused.
    """
    apply_all(admin, rbac_objects(objects))
    path = control_plane.kubeconfig_for_service_account(NAMESPACE, SERVICE_ACCOUNT)
    account = Client.load(str(path), user_agent="install-manifests-check")
    try:

        def granted() -> None:
            assert can_i(account, "list", "trainer.kubeflow.org", "trainjobs"), "the binding is not seen yet"

        wait(granted, timeout=30.0)
    finally:
        account.close()
    return path


def manager_kubeconfig(control_plane: ControlPlane, admin: Client, binaries: Binaries) -> Path:
    """The kubeconfig of the manager's ServiceAccount with ``config/default``'s RBAC installed
    (:func:`service_account_kubeconfig`); skips the test when no kubectl sits beside kube-apiserver to build
    the overlay. What the integration and reliability suites run the manager with."""
    kubectl = kubectl_beside(binaries.kube_apiserver)
    if not kubectl.is_file():
        pytest.skip(f"no kubectl beside kube-apiserver ({kubectl}) to build config/default")
    objects = kustomize_build(kubectl, DEFAULT_OVERLAY)
    return Path(service_account_kubeconfig(control_plane, admin, objects))
