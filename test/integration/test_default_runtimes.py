"""The default ClusterTrainingRuntimes and everything `trainer-render` prints, against a real kube-apiserver.

Tier 1 (etcd + kube-apiserver with this project's CRDs and the JobSet, scheduler-plugins and Volcano CRDs).
Every request is a server-side dry run with strict field validation, so the API server checks schemas, CEL
rules and unknown fields, applies its defaults, and stores nothing (the tests share one control plane).

- Each `config/runtimes/*.yaml` is accepted as written, and comes back with the defaults upstream's
  runtimes get (MPI settings), and with the SDK's framework label.
- Each golden rendering (`test/golden/rendered/**/*.yaml`) is accepted object by object, in a real
  namespace: the JobSets, PodGroups, Secrets and ConfigMaps the plugins build are valid API objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.envtest import ControlPlane

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_FILES = sorted(
    p for p in (ROOT / "config" / "runtimes").glob("*.yaml") if p.name != "kustomization.yaml"
)
GOLDEN_FILES = sorted((ROOT / "test" / "golden" / "rendered").rglob("*.yaml"))
DRY_RUN = "?dryRun=All&fieldValidation=Strict"

# kind -> (API path prefix, plural): what the rendered output may contain.
RESOURCES = {
    ("v1", "ConfigMap"): ("/api/v1", "configmaps"),
    ("v1", "Secret"): ("/api/v1", "secrets"),
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): ("/apis/jobset.x-k8s.io/v1alpha2", "jobsets"),
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"): ("/apis/scheduling.x-k8s.io/v1alpha1", "podgroups"),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): ("/apis/scheduling.volcano.sh/v1beta1", "podgroups"),
}


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_kustomization_lists_every_runtime_file() -> None:
    kustomization = yaml.safe_load((ROOT / "config" / "runtimes" / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(p.name for p in RUNTIME_FILES)


@pytest.mark.parametrize("path", RUNTIME_FILES, ids=[p.stem for p in RUNTIME_FILES])
def test_each_default_runtime_is_accepted_by_the_api_server(control_plane: ControlPlane, path: Path) -> None:
    runtime = yaml.safe_load(path.read_text())
    answer = control_plane.admin_request(
        "POST", f"/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes{DRY_RUN}", runtime
    )
    assert answer.status == 201, answer.body.decode()
    created = answer.json()
    assert created["metadata"]["name"] == path.stem
    assert created["metadata"]["labels"]["trainer.kubeflow.org/framework"] in {
        "torch",
        "deepspeed",
        "mlx",
        "jax",
        "xgboost",
        "torchtune",
    }
    mpi = created["spec"].get("mlPolicy", {}).get("mpi")
    if mpi is not None:
        assert mpi == {
            "numProcPerNode": 1,
            "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": "/home/mpiuser/.ssh",
            "runLauncherAsNode": True,
        }


def _volcano_crd_has_network_topology(control_plane: ControlPlane) -> bool:
    crd = control_plane.admin_request(
        "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/podgroups.scheduling.volcano.sh"
    ).json()
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    return "networkTopology" in spec


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=[_relative(p) for p in GOLDEN_FILES])
def test_each_rendered_object_is_accepted_by_the_api_server(
    control_plane: ControlPlane, namespace: str, path: Path
) -> None:
    objects: list[dict[str, Any]] = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert objects, "a golden rendering with no objects"
    stripped = False
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
        prefix, plural = RESOURCES[(obj["apiVersion"], obj["kind"])]
        topology = obj["kind"] == "PodGroup" and "networkTopology" in obj["spec"]
        if topology and not _volcano_crd_has_network_topology(control_plane):
            del obj["spec"]["networkTopology"]  # still check the rest of the PodGroup
            stripped = True
        answer = control_plane.admin_request(
            "POST", f"{prefix}/namespaces/{namespace}/{plural}{DRY_RUN}", obj
        )
        assert answer.status == 201, f"{obj['kind']} {obj['metadata']['name']}: {answer.body.decode()}"
    if stripped:
        pytest.xfail(
            "the Volcano PodGroup CRD installed by hack/thirdparty.py predates spec.networkTopology "
            "(upstream builds against volcano.sh/apis v1.13); the rest of the PodGroup was accepted"
        )
