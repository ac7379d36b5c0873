"""The Trainer CRDs themselves against a real kube-apiserver (Tier 1): what the published OpenAPI and
`kubectl explain` show, and what it takes to store and install each CRD.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from controller.envtest import Binaries, ControlPlane
from support.crd_acceptance import (
    GROUP,
    PLURALS,
    VERSION,
)

pytest_plugins = ("support.crd_acceptance",)


# -- the CRDs themselves: what `kubectl explain` shows, and what it takes to install them ---------------


def served_schema(control_plane: ControlPlane, kind: str) -> dict[str, Any]:
    """The kind's schema in the apiserver's published OpenAPI v3 document, which `kubectl explain` reads."""
    response = control_plane.admin_request("GET", f"/openapi/v3/apis/{GROUP}/{VERSION}")
    assert response.status == 200, response.body
    schemas = json.loads(response.body)["components"]["schemas"]
    return dict(schemas[f"org.kubeflow.trainer.{VERSION}.{kind}"])


def test_the_published_openapi_describes_our_fields_and_embedded_ones(
    control_plane: ControlPlane, eventually: Callable[..., Any]
) -> None:
    schema = eventually(lambda: served_schema(control_plane, "TrainJob"))
    trainer_fields = schema["properties"]["spec"]["properties"]["trainer"]["properties"]
    assert "Number of training nodes" in trainer_fields["numNodes"]["description"]
    env = trainer_fields["env"]["items"]["properties"]["name"]
    assert env["description"]  # from the apiserver's own EnvVar schema
    runtime = eventually(lambda: served_schema(control_plane, "TrainingRuntime"))
    replicated = runtime["properties"]["spec"]["properties"]["template"]["properties"]["spec"]["properties"]
    assert replicated["replicatedJobs"]["description"]  # from JobSet's CRD


def test_kubectl_explain_prints_the_description_of_spec_trainer_num_nodes(
    control_plane: ControlPlane, envtest_binaries: Binaries, eventually: Callable[..., Any]
) -> None:
    kubectl = envtest_binaries.kube_apiserver.parent / "kubectl"
    if not kubectl.is_file():
        pytest.skip(f"no kubectl beside kube-apiserver ({kubectl})")
    eventually(lambda: served_schema(control_plane, "TrainJob"))

    def explain() -> str:
        done = subprocess.run(
            [
                str(kubectl),
                "--kubeconfig",
                str(control_plane.kubeconfig),
                "explain",
                "trainjobs.spec.trainer.numNodes",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    out = eventually(explain, timeout=30.0)
    assert "FIELD: numNodes <integer>" in out
    assert "Number of training nodes" in out


@pytest.mark.parametrize("plural", sorted(PLURALS.values()))
def test_each_crd_as_stored_fits_etcd_and_the_runtimes_need_server_side_apply(
    control_plane: ControlPlane, plural: str
) -> None:
    path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.{GROUP}"
    stored = control_plane.admin_request("GET", path)
    assert stored.status == 200, stored.body
    # As stored (server-side applied: managedFields included), well under etcd's 1.5 MiB request limit.
    assert len(stored.body) < 1024 * 1024, len(stored.body)
    # Client-side apply keeps the whole CRD in an annotation, and annotations may hold 256 KiB in all: too
    # little for the runtime CRDs (as for upstream's), so they must be applied server-side.
    crd = json.loads(stored.body)
    last_applied = json.dumps(
        {key: crd[key] for key in ("apiVersion", "kind", "spec")}, separators=(",", ":")
    )
    annotated = control_plane.admin_request(
        "PATCH",
        f"{path}?dryRun=All",
        {"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied}}},
        content_type="application/merge-patch+json",
    )
    too_large = len(last_applied) > 256 * 1024
    assert too_large == (plural != "trainjobs"), len(last_applied)
    assert annotated.status == (422 if too_large else 200), annotated.body[:500]
    if too_large:
        assert b"Too long" in annotated.body
