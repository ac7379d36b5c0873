"""Upstream's own e2e suite against this controller: a peer's test suite that nobody here wrote.

kind only (``E2E_CLUSTER=kind``, after ``hack/e2e-setup-kind.sh``); on kwok the test skips. The suite is the
package ``test/e2e`` of ``github.com/kubeflow/trainer/v2`` at ``TRAINER_VERSION``, compiled unmodified from
the Go module (``hack/build-binaries.sh upstream-e2e``: a Ginkgo test binary). It runs as upstream's CI runs
it, against the manager the script installed (``KUBECONFIG``), after the set-up upstream's
``hack/e2e-setup-cluster.sh`` makes:

- the TrainJobStatus feature gate on: the Helm install of ``hack/e2e-setup-kind.sh`` sets it, and the test
  refuses to run without it (the status server spec would fail for a reason that is not the controller's);
- the shipped runtimes' untagged images tagged ``test`` (upstream's CI images; untagged, the kubelet would
  pull them, and the kind node has no registry), restored afterwards;
- upstream's Flux runtime (``examples/flux/flux-runtime.yaml`` of the module) applied, deleted afterwards.

The images its specs run are stand-ins under the same names (``test/e2e/upstream/README.md``, loaded by the
script). Ginkgo's JSON report is read into the table of specs (``support.upstream_e2e``), printed whatever
the outcome, and the test fails on any spec that did not pass, was skipped without a stated reason, or is
not one of the twelve the project lists. The suite's output is kept in ``<tmp>/upstream-e2e.log``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from controller.client.client import Client
from runtime.api import constants
from runtime.features import TRAIN_JOB_STATUS
from support import e2e_paths as paths
from support import thirdparty, upstream_e2e
from support.kind_jobs import skip_unless_kind

ROOT = Path(__file__).resolve().parents[2]
SUITE_TIMEOUT_S = 1200
"""Ginkgo's suite timeout; each of its waits is bounded by upstream's own ``TimeoutE2E`` (10 min)."""


@pytest.fixture(scope="module", autouse=True)
def on_kind(e2e_cluster: Any) -> None:
    skip_unless_kind(e2e_cluster, "upstream's specs run real Pods")


@pytest.fixture(scope="module")
def suite_binary() -> Path:
    printed = subprocess.run(
        ["bash", str(ROOT / "hack" / "build-binaries.sh"), "--print"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    directories = dict(line.split("=", 1) for line in printed.splitlines() if "=" in line)
    binary = Path(directories["UPSTREAM_E2E_BIN"]) / "e2e.test"
    if not os.access(binary, os.X_OK):
        pytest.fail(
            f"{binary} is missing: build it with `bash hack/build-binaries.sh upstream-e2e`", pytrace=False
        )
    return binary


def _runtime(e2e_cluster: Any, name: str) -> dict[str, Any]:
    return dict(
        e2e_cluster.custom.get_cluster_custom_object(
            constants.GROUP, constants.VERSION, "clustertrainingruntimes", name
        )
    )


def _image_patch(runtime: dict[str, Any], tag: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """JSON patches that tag every untagged container image of the runtime, and the ones that undo it."""
    forward, back = [], []
    for j, job in enumerate(runtime["spec"]["template"]["spec"]["replicatedJobs"]):
        for c, container in enumerate(job["template"]["spec"]["template"]["spec"]["containers"]):
            image = str(container.get("image") or "")
            if not image or ":" in image.rsplit("/", 1)[-1]:
                continue
            path = f"/spec/template/spec/replicatedJobs/{j}/template/spec/template/spec/containers/{c}/image"
            forward.append({"op": "test", "path": path, "value": image})
            forward.append({"op": "replace", "path": path, "value": f"{image}:{tag}"})
            back.append({"op": "replace", "path": path, "value": image})
    return forward, back


@pytest.fixture(scope="module")
def upstream_setup(e2e_cluster: Any) -> Iterator[None]:
    """What upstream's ``hack/e2e-setup-cluster.sh`` does besides installing the manager, undone after."""
    client = Client.load(str(e2e_cluster.kubeconfig), user_agent="e2e-upstream")
    try:
        if not paths.feature_gate_on(client, TRAIN_JOB_STATUS):
            pytest.fail(
                f"the installed manager runs without the {TRAIN_JOB_STATUS} feature gate, which upstream's "
                "suite expects: install with hack/e2e-setup-kind.sh (its Helm install sets "
                f"manager.config.featureGates.{TRAIN_JOB_STATUS}=true)",
                pytrace=False,
            )
    finally:
        client.close()

    undo: list[tuple[str, list[dict[str, Any]]]] = []
    flux = yaml.safe_load(
        (
            thirdparty.module_dir(
                thirdparty.UPSTREAM_TRAINER_MODULE, thirdparty.read_versions()["TRAINER_VERSION"]
            )
            / upstream_e2e.FLUX_RUNTIME
        ).read_text(encoding="utf-8")
    )
    custom = e2e_cluster.custom
    try:
        for name, tag in upstream_e2e.RUNTIME_IMAGE_TAGS.items():
            forward, back = _image_patch(_runtime(e2e_cluster, name), tag)
            if forward:
                _json_patch(custom, name, forward)
                undo.append((name, back))
        _delete_cluster_runtime(custom, flux["metadata"]["name"])
        custom.create_cluster_custom_object(
            constants.GROUP, constants.VERSION, "clustertrainingruntimes", flux
        )
        yield
    finally:
        _delete_cluster_runtime(custom, flux["metadata"]["name"])
        for name, back in undo:
            _json_patch(custom, name, back)


def _json_patch(custom: Any, name: str, patch: list[dict[str, Any]]) -> None:
    custom.patch_cluster_custom_object(
        constants.GROUP,
        constants.VERSION,
        "clustertrainingruntimes",
        name,
        patch,
        _content_type="application/json-patch+json",
    )


def _delete_cluster_runtime(custom: Any, name: str) -> None:
    try:
        custom.delete_cluster_custom_object(
            constants.GROUP, constants.VERSION, "clustertrainingruntimes", name
        )
    except ApiException as exc:
        if exc.status != 404:
            raise


def test_upstreams_e2e_suite_passes_against_this_controller(
    e2e_cluster: Any,
    suite_binary: Path,
    upstream_setup: None,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    report = tmp_path / "report.json"
    upstream_e2e.run_and_check(
        upstream_e2e.command(suite_binary, report, timeout_s=SUITE_TIMEOUT_S),
        report=report,
        log=tmp_path / "upstream-e2e.log",
        env={**os.environ, "KUBECONFIG": str(e2e_cluster.kubeconfig)},
        timeout_s=SUITE_TIMEOUT_S + 120,
        title="upstream e2e",
        request=request,
    )
