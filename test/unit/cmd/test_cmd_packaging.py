"""The console script reaches cmd/trainer_controller_manager/ both from a wheel and from an editable install,
and no top-level ``cmd`` package is ever installed (it would shadow the standard library's ``cmd``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SCRIPT = "trainer-controller-manager"


def test_the_wheel_declares_the_script_and_carries_its_package(tmp_path: Path) -> None:
    # Build from a copy, so the shared work tree gets no build/ or egg-info from the test.
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in ("controller", "runtime", "cmd"):
        shutil.copytree(REPO / name, source / name, ignore=ignore)
    out = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            ".",
        ],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        declared = archive.read(entry_points).decode()
    assert f"{SCRIPT} = trainer_controller_manager.entrypoint:main" in declared.splitlines()
    assert "trainer_controller_manager/main.py" in names
    assert "trainer_controller_manager/entrypoint.py" in names
    assert "trainer_controller_manager/__init__.py" in names
    assert not [n for n in names if n.startswith("cmd/")]


def test_the_installed_script_runs() -> None:
    script = Path(sys.executable).parent / SCRIPT
    assert script.exists(), f"{script} is missing: run `pip install -e .` after pulling this change"
    done = subprocess.run([str(script), "--help"], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {SCRIPT}")


def test_python_dash_m_runs_the_same_entry_point() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trainer_controller_manager", "--help"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"usage: {SCRIPT}" in done.stdout


def test_the_standard_library_cmd_module_is_not_shadowed() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import cmd; print(hasattr(cmd, 'Cmd'))"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert done.stdout.strip() == "True"
