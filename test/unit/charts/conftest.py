"""Fixtures for the Helm chart ``charts/kubeflow-trainer-py``.

- ``helm`` (session): the pinned helm (``HELM_VERSION`` of ``hack/versions.env``, built from
  ``hack/tools/helm`` into the binaries cache). Built on first use when Go is on PATH
  (``hack/build-binaries.sh helm``); without Go the tests are skipped, or fail when prerequisites are
  required (``make test``, CI: the ``prerequisite`` fixture of ``test/conftest.py``); ``support.helm``.
  Helm's own cache, config and data directories point into a session temporary directory.
- ``template`` (session): ``helm template`` of the chart as release ``kubeflow-trainer`` in
  ``kubeflow-system`` (``--include-crds``), with values given as a dict (written to a values file) and
  memoised per values; returns the parsed objects.
- ``lint``: ``helm lint --strict`` with the same kind of values; returns helm's exit status and output.
- ``kubectl`` / ``kustomize`` (session): the pinned kubectl, and ``kubectl kustomize <dir>`` parsed.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.envtest import cache_directory
from support import helm as _binary

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "kubeflow-trainer-py"
RELEASE = "kubeflow-trainer"
NAMESPACE = "kubeflow-system"

Objects = list[dict[str, Any]]


def _parse(text: str) -> Objects:
    return [doc for doc in yaml.load_all(text, Loader=yaml.CSafeLoader) if doc]


@pytest.fixture(scope="session")
def helm(
    prerequisite: Any, tmp_path_factory: pytest.TempPathFactory
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the pinned helm with arguments; returns the finished process (the caller checks it)."""
    path = _binary.ensure_helm(prerequisite)
    env = _binary.helm_env(tmp_path_factory.mktemp("helm-home"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(path), *args], capture_output=True, text=True, timeout=120, env=env, check=False
        )

    return run


@pytest.fixture(scope="session")
def values_file(tmp_path_factory: pytest.TempPathFactory) -> Callable[[dict[str, Any]], Path]:
    directory = tmp_path_factory.mktemp("values")
    written: dict[str, Path] = {}

    def write(values: dict[str, Any]) -> Path:
        key = json.dumps(values, sort_keys=True)
        if key not in written:
            path = directory / f"values-{len(written)}.yaml"
            path.write_text(yaml.safe_dump(values))
            written[key] = path
        return written[key]

    return write


@pytest.fixture(scope="session")
def template(
    helm: Callable[..., subprocess.CompletedProcess[str]], values_file: Callable[[dict[str, Any]], Path]
) -> Callable[..., Objects]:
    rendered: dict[tuple[str, str], Objects] = {}

    def run(values: dict[str, Any] | None = None, *, namespace: str = NAMESPACE) -> Objects:
        key = (json.dumps(values or {}, sort_keys=True), namespace)
        if key not in rendered:
            done = helm(
                "template", RELEASE, str(CHART), "--namespace", namespace, "--include-crds",
                "--values", str(values_file(values or {})),
            )  # fmt: skip
            assert done.returncode == 0, f"helm template failed:\n{done.stderr}"
            rendered[key] = _parse(done.stdout)
        return rendered[key]

    return run


@pytest.fixture(scope="session")
def lint(
    helm: Callable[..., subprocess.CompletedProcess[str]], values_file: Callable[[dict[str, Any]], Path]
) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(values: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
        return helm(
            "lint",
            "--strict",
            str(CHART),
            "--namespace",
            NAMESPACE,
            "--values",
            str(values_file(values or {})),
        )

    return run


@pytest.fixture(scope="session")
def kubectl(prerequisite: Any) -> Path:
    path = cache_directory() / "bin" / f"kubernetes-{_binary.versions()['KUBERNETES_VERSION']}" / "kubectl"
    if not path.is_file():
        prerequisite.missing(f"the pinned kubectl is not built ({path}); run hack/build-binaries.sh")
    return path


@pytest.fixture(scope="session")
def kustomize(kubectl: Path) -> Callable[[Path], Objects]:
    built: dict[Path, Objects] = {}

    def run(directory: Path) -> Objects:
        if directory not in built:
            done = subprocess.run(
                [str(kubectl), "kustomize", str(directory)],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert done.returncode == 0, f"kubectl kustomize {directory} failed:\n{done.stderr}"
            built[directory] = _parse(done.stdout)
        return built[directory]

    return run
