"""The example third-party plugin (``test/plugins/example_plugin``), installed as a user installs one: ``pip
install`` of its distribution, so that its ``kubeflow_trainer.plugins`` entry point is in the installed
metadata."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

DISTRIBUTION = Path(__file__).resolve().parents[1] / "plugins" / "example_plugin"
ENTRY_POINT = "Example"
"""The name its entry point registers, which ``plugins.enabled`` names."""


def pip_install(tmp_path: Path) -> Path:
    """``pip install --target`` of the distribution, offline and without its dependencies (the manager
    provides them), built from a copy under ``tmp_path`` (the build writes beside its sources, never into the
    repository); the directory to put on ``sys.path`` or the manager's ``PYTHONPATH``."""
    source, site = tmp_path / "example-src", tmp_path / "example-site"
    shutil.copytree(DISTRIBUTION, source)
    pip = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
    ]
    subprocess.run([*pip, "--target", str(site), str(source)], check=True, timeout=300, capture_output=True)
    return site
