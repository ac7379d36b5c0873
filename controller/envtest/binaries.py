"""Where the etcd and kube-apiserver binaries of a test control plane come from.

Go origin: controller-runtime ``pkg/envtest`` (``TEST_ASSET_ETCD``, ``TEST_ASSET_KUBE_APISERVER`` and
``KUBEBUILDER_ASSETS``). Each binary is looked up on its own, first match wins:

1. ``TEST_ASSET_ETCD`` / ``TEST_ASSET_KUBE_APISERVER``: the path of that one binary;
2. ``KUBEBUILDER_ASSETS``: a directory holding both;
3. in a checkout of this project, the directories ``hack/build-binaries.sh --print`` names (the pinned,
   version-stamped builds in the user cache).

Guarantees: a path is returned only if it is an executable file; otherwise :class:`BinariesNotFound` says
every place that was tried and how to build the binaries. Deliberately missing: building anything. The
library never runs a 30-minute Go build behind a caller's back; the test suite's conftest (or ``make``)
runs ``hack/build-binaries.sh``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from controller.envtest.errors import EnvtestError

# This file lives at <checkout>/controller/envtest/binaries.py.
_CHECKOUT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = _CHECKOUT / "hack" / "build-binaries.sh"


class BinariesNotFound(EnvtestError):
    """etcd or kube-apiserver is not where any of the documented sources point."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Binaries:
    """The two executables a Tier 1 control plane runs."""

    etcd: Path
    kube_apiserver: Path


# (binary name, its TEST_ASSET_* variable, the build-binaries.sh --print key of its directory)
_SOURCES = (
    ("etcd", "TEST_ASSET_ETCD", "ETCD_BIN"),
    ("kube-apiserver", "TEST_ASSET_KUBE_APISERVER", "KUBERNETES_BIN"),
)


def find_binaries(
    environ: Mapping[str, str] | None = None, build_script: Path | None = BUILD_SCRIPT
) -> Binaries:
    """Resolve both binaries as described in the module docstring; raise BinariesNotFound if one is missing.

    ``build_script=None`` skips the checkout lookup (e.g. for an installed copy of the library).
    """
    env = os.environ if environ is None else environ
    script_dirs: dict[str, str] | None = None
    found: dict[str, Path] = {}
    tried: list[str] = []
    for binary, variable, print_key in _SOURCES:
        candidates: list[tuple[str, Path]] = []
        if env.get(variable):
            candidates.append((f"${variable}", Path(env[variable])))
        if env.get("KUBEBUILDER_ASSETS"):
            candidates.append(("$KUBEBUILDER_ASSETS", Path(env["KUBEBUILDER_ASSETS"]) / binary))
        if build_script is not None and build_script.is_file():
            if script_dirs is None:
                script_dirs = _print_build_dirs(build_script)
            if print_key in script_dirs:
                candidates.append((f"{build_script.name} --print", Path(script_dirs[print_key]) / binary))
        for source, path in candidates:
            if _is_executable(path):
                found[binary] = path
                break
            tried.append(f"{binary}: {path} (from {source}) is not an executable file")
        else:
            if not candidates:
                tried.append(f"{binary}: no ${variable}, no $KUBEBUILDER_ASSETS and no checkout build script")
    if len(found) < len(_SOURCES):
        hint = f"build them with `bash {BUILD_SCRIPT}`" if BUILD_SCRIPT.is_file() else "set $TEST_ASSET_*"
        raise BinariesNotFound("control-plane binaries not found; " + hint + ":\n  " + "\n  ".join(tried))
    return Binaries(etcd=found["etcd"], kube_apiserver=found["kube-apiserver"])


def parse_print_output(text: str) -> dict[str, str]:
    """Parse the ``KEY=value`` lines ``build-binaries.sh --print`` writes; other lines are ignored."""
    dirs: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.isidentifier() and value:
            dirs[key] = value
    return dirs


def _print_build_dirs(script: Path) -> dict[str, str]:
    try:
        done = subprocess.run(
            ["bash", str(script), "--print"], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise BinariesNotFound(f"`bash {script} --print` failed: {exc}") from exc
    return parse_print_output(done.stdout)


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)
