"""The committed CRDs equal what hack/gen-crds.py makes from the types and the Tier 1 apiserver's schemas.

A change to runtime/api/ without regenerating, a hand edit of config/crd/, or a bump of the pinned
Kubernetes or JobSet version all show up here as a diff (fix: run `hack/gen-crds.py`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from controller.envtest import ControlPlane
from support import crdgen

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gen_crds() -> ModuleType:
    return crdgen


@pytest.fixture(scope="module")
def openapi_dir(
    control_plane: ControlPlane, gen_crds: ModuleType, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The running apiserver's core/v1 OpenAPI v3 document, saved where `--openapi-dir` reads it."""
    directory = tmp_path_factory.mktemp("openapi")
    document = gen_crds.fetch_core_document_from(control_plane)
    (directory / gen_crds.CORE_DOCUMENT_FILE).write_text(json.dumps(document))
    return directory


def test_committed_crds_match_a_fresh_generation(
    gen_crds: ModuleType, openapi_dir: Path, tmp_path: Path
) -> None:
    core = gen_crds.load_core_document(openapi_dir)
    files = gen_crds.generate(core, gen_crds.load_jobset_crd(None))
    gen_crds.write(files, tmp_path)
    drift = "".join(gen_crds.diff(tmp_path, ROOT / "config" / "crd"))
    assert drift == "", f"config/crd is stale; run hack/gen-crds.py\n{drift[:4000]}"


def test_the_check_command_passes_as_ci_runs_it(openapi_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "gen-crds.py"), "--check", "--openapi-dir", str(openapi_dir)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "up to date" in done.stdout


def test_the_check_command_fails_with_a_diff_on_drift(openapi_dir: Path, tmp_path: Path) -> None:
    stale = tmp_path / "crd"
    stale.mkdir()
    for path in (ROOT / "config" / "crd").glob("*.yaml"):
        (stale / path.name).write_text(path.read_text().replace("maxItems: 16", "maxItems: 15"))
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "hack" / "gen-crds.py"),
            "--check",
            "--openapi-dir",
            str(openapi_dir),
            "--output-dir",
            str(stale),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 1
    assert "-                maxItems: 15" in done.stdout
    assert "is stale" in done.stderr
