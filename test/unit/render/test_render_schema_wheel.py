"""An installed (non-editable) package finds its CRDs: `trainer-render` from a wheel, outside the source tree.

Builds a wheel of a copy of the source tree (so the build leaves nothing in the checkout), installs it into a
fresh virtual environment that reuses this one's packages (through a .pth file; no network), and runs
the installed `trainer-render` from an empty directory. Takes about 20 s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# What a build needs is everything but these (tests, docs and tools, caches, other builds).
_NOT_BUILT = shutil.ignore_patterns(
    ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", "_artifacts",
    "test", "docs", "hack", "examples",
)  # fmt: skip


def _run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `bin` directory of a venv where the wheel of this tree is installed."""
    base = tmp_path_factory.mktemp("wheel")
    source, wheels, env_dir = base / "source", base / "wheels", base / "venv"
    shutil.copytree(ROOT, source, symlinks=True, ignore=_NOT_BUILT)
    built = _run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", wheels, ".",
        cwd=source,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    venv.EnvBuilder(with_pip=True).create(env_dir)  # ensurepip: offline
    python = env_dir / "bin" / "python"
    # Reuse this venv's packages (the dependencies) without network: a plain path in a .pth file. Its own
    # .pth files are not processed, so an editable install of the checkout stays out of the new venv.
    inner = _run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=base)
    outer = [p for p in sys.path if p.endswith("site-packages")]
    Path(inner.stdout.strip(), "outer-venv.pth").write_text("\n".join(outer) + "\n")
    (wheel,) = wheels.glob("kubeflow_trainer_py-*.whl")
    pip = _run(python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel, cwd=base)
    assert pip.returncode == 0, pip.stderr
    assert (python.parent / "trainer-render").exists()
    return python.parent


def test_the_installed_render_finds_its_crds(installed: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = _run(
        installed / "python", "-c", "import runtime.schema as s; print(s.CRD_DIR)", cwd=tmp_path, env=env
    )
    assert where.returncode == 0, where.stderr
    crd_dir = Path(where.stdout.strip())
    assert not crd_dir.is_relative_to(ROOT)  # the installed copy, not the checkout
    assert sorted(p.name for p in crd_dir.glob("*.yaml")) == sorted(
        p.name for p in (ROOT / "config" / "crd").glob("*.yaml")
    )

    rendered = _run(
        installed / "trainer-render", ROOT / "examples" / "trainjob-torch.yaml",
        "-r", ROOT / "config" / "runtimes", cwd=tmp_path, env=env,
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    assert "CRDs not found" not in rendered.stderr
    assert "kind: JobSet" in rendered.stdout

    # The installed CRDs carry the CEL rules too.
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: Bad}\n"
        "spec: {runtimeRef: {name: torch-distributed}, managedBy: someone/else}\n"
    )
    refused = _run(
        installed / "trainer-render", bad, "-r", ROOT / "config" / "runtimes", cwd=tmp_path, env=env
    )
    assert refused.returncode == 2, refused.stderr
    assert "spec.managedBy: Invalid value" in refused.stderr
