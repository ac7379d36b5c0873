"""Fixtures for the shipped manifests (``config/``) and the image (``Dockerfile``).

- ``kubectl`` (session): the pinned kubectl (``hack/versions.env``'s Kubernetes version in the binaries
  cache), whose built-in kustomize builds ``config/``. Missing: skipped, or failed when prerequisites are
  required (``make test``, CI), as the integration tier does.
- ``build`` (session): the objects of ``kubectl kustomize <dir>``, memoised per directory.
- ``default_objects`` (session): ``build(config/default)``.
- ``project_version`` (session): ``[project] version`` of pyproject.toml.
"""

from __future__ import annotations

import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.envtest import cache_directory
from support import thirdparty

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "config"


@pytest.fixture(scope="session")
def kubectl(prerequisite: Any) -> Path:
    versions = thirdparty.read_versions()
    path = cache_directory() / "bin" / f"kubernetes-{versions['KUBERNETES_VERSION']}" / "kubectl"
    if not path.is_file():
        prerequisite.missing(f"the pinned kubectl is not built ({path}); run hack/build-binaries.sh")
    return path


@pytest.fixture(scope="session")
def build(kubectl: Path) -> Callable[[Path], list[dict[str, Any]]]:
    built: dict[Path, list[dict[str, Any]]] = {}

    def run(directory: Path) -> list[dict[str, Any]]:
        if directory not in built:
            done = subprocess.run(
                [str(kubectl), "kustomize", str(directory)],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert done.returncode == 0, f"kubectl kustomize {directory} failed:\n{done.stderr}"
            built[directory] = [d for d in yaml.load_all(done.stdout, Loader=yaml.CSafeLoader) if d]
        return built[directory]

    return run


@pytest.fixture(scope="session")
def default_objects(build: Callable[[Path], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return build(CONFIG / "default")


@pytest.fixture(scope="session")
def project_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])
