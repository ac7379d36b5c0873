"""The pinned helm for the chart tests (``test/unit/charts``, ``test/integration/test_helm_install.py``).

:func:`helm_path` is
``<cache>/bin/helm-<HELM_VERSION>/helm``; :func:`ensure_helm` builds it with ``hack/build-binaries.sh helm``
when it is missing and Go is on PATH, and otherwise calls ``prerequisite.missing`` (a skip, or a failure
when prerequisites are required: ``make test``, CI). :func:`helm_env` points Helm's cache, config and data
directories at a directory of the test's, so a test run never reads or writes the user's Helm setup.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from controller.envtest import cache_directory
from support import thirdparty

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kubeflow-trainer-py"


def versions() -> dict[str, str]:
    read: dict[str, str] = thirdparty.read_versions()
    return read


def helm_path() -> Path:
    return cache_directory() / "bin" / f"helm-{versions()['HELM_VERSION']}" / "helm"


def ensure_helm(prerequisite: Any) -> Path:
    path = helm_path()
    if path.is_file():
        return path
    if shutil.which("go") is None:
        prerequisite.missing(
            f"the chart tests need helm ({path}); building it needs Go >= 1.26 on PATH "
            "(`bash hack/build-binaries.sh helm`; see docs/development.md)"
        )
    done = subprocess.run(
        ["bash", str(ROOT / "hack" / "build-binaries.sh"), "helm"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not path.is_file():
        pytest.fail(f"hack/build-binaries.sh helm failed:\n{done.stderr[-4000:]}", pytrace=False)
    return path


def helm_env(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
