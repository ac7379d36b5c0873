"""Where the etcd and kube-apiserver binaries of a test control plane come from.

Go origin: controller-runtime ``pkg/envtest`` (``TEST_ASSET_ETCD``, ``TEST_ASSET_KUBE_APISERVER`` and
``KUBEBUILDER_ASSETS``) and setup-envtest's versioned store. Each binary is looked up on its own, first
match wins:

1. ``TEST_ASSET_ETCD`` / ``TEST_ASSET_KUBE_APISERVER``: the path of that one binary;
2. ``TRAINER_TEST_ASSETS``, then ``KUBEBUILDER_ASSETS``: a directory holding both;
3. the versioned cache, for the versions the caller names: ``<cache>/bin/etcd-<etcd_version>/etcd`` and
   ``<cache>/bin/kubernetes-<kubernetes_version>/kube-apiserver``, where ``<cache>`` is
   ``$TRAINER_CACHE_DIR``, else ``$XDG_CACHE_HOME/kubeflow-trainer-py``, else
   ``~/.cache/kubeflow-trainer-py`` (the layout ``hack/build-binaries.sh`` writes).

Guarantees: a path is returned only if it is an executable file; otherwise :class:`BinariesNotFound` says
every place that was tried. The library knows nothing of a checkout: which versions to use is the caller's
business (this repository's test conftest reads ``hack/versions.env``). Deliberately missing: building or
downloading anything; the test suite's conftest (or ``make``) runs ``hack/build-binaries.sh``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from controller.envtest.errors import EnvtestError

__all__ = ["ASSETS_VARIABLE", "Binaries", "BinariesNotFound", "cache_directory", "find_binaries"]

ASSETS_VARIABLE = "TRAINER_TEST_ASSETS"
"""A directory holding both binaries (this project's ``KUBEBUILDER_ASSETS``)."""

CACHE_NAME = "kubeflow-trainer-py"


class BinariesNotFound(EnvtestError):
    """etcd or kube-apiserver is not where any of the documented sources point."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Binaries:
    """The two executables a Tier 1 control plane runs."""

    etcd: Path
    kube_apiserver: Path


# (binary name, its TEST_ASSET_* variable, the cache component that ships it)
_SOURCES = (
    ("etcd", "TEST_ASSET_ETCD", "etcd"),
    ("kube-apiserver", "TEST_ASSET_KUBE_APISERVER", "kubernetes"),
)


def cache_directory(environ: Mapping[str, str] | None = None) -> Path:
    """``$TRAINER_CACHE_DIR``, else ``$XDG_CACHE_HOME/kubeflow-trainer-py``, else
    ``~/.cache/kubeflow-trainer-py``."""
    env = os.environ if environ is None else environ
    if env.get("TRAINER_CACHE_DIR"):
        return Path(env["TRAINER_CACHE_DIR"])
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / CACHE_NAME


def find_binaries(
    *,
    etcd_version: str | None = None,
    kubernetes_version: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Binaries:
    """Resolve both binaries as described in the module docstring; raise BinariesNotFound if one is missing.

    A version left None skips the cache for that component.
    """
    env = os.environ if environ is None else environ
    versions = {"etcd": etcd_version, "kubernetes": kubernetes_version}
    found: dict[str, Path] = {}
    tried: list[str] = []
    for binary, variable, component in _SOURCES:
        candidates: list[tuple[str, Path]] = []
        if env.get(variable):
            candidates.append((f"${variable}", Path(env[variable])))
        for assets in (ASSETS_VARIABLE, "KUBEBUILDER_ASSETS"):
            if env.get(assets):
                candidates.append((f"${assets}", Path(env[assets]) / binary))
        version = versions[component]
        if version:
            directory = cache_directory(env) / "bin" / f"{component}-{version}"
            candidates.append((f"the cache, {component} {version}", directory / binary))
        for source, path in candidates:
            if _is_executable(path):
                found[binary] = path
                break
            tried.append(f"{binary}: {path} (from {source}) is not an executable file")
        else:
            if not candidates:
                tried.append(
                    f"{binary}: no ${variable}, no ${ASSETS_VARIABLE}, no $KUBEBUILDER_ASSETS "
                    f"and no {component} version to look up in the cache"
                )
    if len(found) < len(_SOURCES):
        raise BinariesNotFound(
            "control-plane binaries not found (build them into the cache, or set $TEST_ASSET_* or "
            f"${ASSETS_VARIABLE}):\n  " + "\n  ".join(tried)
        )
    return Binaries(etcd=found["etcd"], kube_apiserver=found["kube-apiserver"])


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)
