"""Kueue's own TrainJob e2e specs against this controller: a peer's tests of its integration with us.

kind only (``E2E_CLUSTER=kind``, after ``hack/e2e-setup-kind.sh``, which installs Kueue from its own
manifests); on kwok the test skips. The suite is the package ``test/e2e/singlecluster`` of
``sigs.k8s.io/kueue`` at ``KUEUE_VERSION``, compiled unmodified from the Go module (``hack/build-binaries.sh
kueue-e2e``: a Ginkgo test binary), run with the label filter ``feature:trainjob`` (the specs of its
``trainjob_test.go``), against the Trainer manager and the Kueue the script installed; what its set-up
expects and how it is given is ``support.kueue_e2e``'s docstring. Its pods run the agnhost image built here
(``hack/build-images.sh agnhost``) under the name the specs use.

Ginkgo's JSON report is read into the table of specs (``support.upstream_e2e``, as for upstream Trainer's
suite), printed whatever the outcome, and the test fails on any selected spec that did not pass, a suite node
that failed, or a spec the project does not list. The suite's output is kept in ``<tmp>/kueue-e2e.log``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support import kueue_e2e, thirdparty, upstream_e2e
from support.kind_jobs import skip_unless_kind

ROOT = Path(__file__).resolve().parents[2]
SUITE_TIMEOUT_S = 900
"""Ginkgo's suite timeout; each of its waits is bounded by Kueue's own (45 s to 5 min)."""


@pytest.fixture(scope="module", autouse=True)
def on_kind(e2e_cluster: Any) -> None:
    skip_unless_kind(e2e_cluster, "Kueue's specs run real Pods against the Kueue installed in the cluster")


def _printed(script: str) -> dict[str, str]:
    """``hack/<script> --print``: NAME=value lines (quotes around a list removed)."""
    printed = subprocess.run(
        ["bash", str(ROOT / "hack" / script), "--print"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return {k: v.strip('"') for k, v in (line.split("=", 1) for line in printed.splitlines() if "=" in line)}


@pytest.fixture(scope="module")
def suite_binary() -> Path:
    binary = Path(_printed("build-binaries.sh")["KUEUE_E2E_BIN"]) / "e2e.test"
    if not os.access(binary, os.X_OK):
        pytest.fail(
            f"{binary} is missing: build it with `bash hack/build-binaries.sh kueue-e2e`", pytrace=False
        )
    return binary


def test_kueues_trainjob_e2e_specs_pass_against_this_controller(
    e2e_cluster: Any, suite_binary: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    report = tmp_path / "report.json"
    environment = kueue_e2e.environment(
        os.environ,
        kubeconfig=Path(e2e_cluster.kubeconfig),
        agnhost_image=_printed("build-images.sh")["AGNHOST_IMAGE"],
        module_dir=thirdparty.kueue_manifests().module_dir,
        artifacts=tmp_path,
    )
    upstream_e2e.run_and_check(
        kueue_e2e.command(suite_binary, report, timeout_s=SUITE_TIMEOUT_S),
        report=report,
        log=tmp_path / "kueue-e2e.log",
        env=environment,
        cwd=tmp_path,
        timeout_s=SUITE_TIMEOUT_S + 120,
        title="Kueue's e2e",
        request=request,
        specs=kueue_e2e.SPECS,
        select=kueue_e2e.selected,
    )
