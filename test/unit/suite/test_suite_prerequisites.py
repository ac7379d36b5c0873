"""The suite cannot pass by skipping: ``test/conftest.py``'s ``prerequisite`` fixture and skip summary.

Each case runs a small pytest session in a subprocess, with ``test/conftest.py`` copied next to a test that
depends on a missing prerequisite, and asserts on the session's outcome: its exit status and its output.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

_TESTS = """
import pytest


@pytest.fixture(scope="session")
def toolchain(prerequisite):
    prerequisite.missing("the toolchain is not installed")


def test_needs_the_toolchain(toolchain):
    pass


def test_needs_the_toolchain_too(toolchain):
    pass


@pytest.mark.skip(reason="only on kind")
def test_deliberately_skipped():
    pass


def test_passes():
    pass
"""


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(ROOT / "test" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_sample.py").write_text(_TESTS)
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "TRAINER_REQUIRE_CLUSTER")}
    environ.update(env)
    environ.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_developer_without_the_prerequisite_gets_skips_and_a_counted_summary(tmp_path: Path) -> None:
    done = _run(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "prerequisites: optional (neither TRAINER_REQUIRE_CLUSTER nor CI is set)" in done.stdout
    assert (
        "skipped: 3 (reasons: 2 x prerequisite missing: the toolchain is not installed; 1 x only on kind)"
        in done.stdout
    ), done.stdout
    assert "1 passed, 3 skipped" in done.stdout


@pytest.mark.parametrize(
    "env",
    [{"TRAINER_REQUIRE_CLUSTER": "1"}, {"CI": "true"}, {"CI": "1"}],
    ids=["make test sets TRAINER_REQUIRE_CLUSTER", "CI=true", "CI=1"],
)
def test_a_required_prerequisite_fails_the_run_with_its_reason(tmp_path: Path, env: dict[str, str]) -> None:
    done = _run(tmp_path, **env)
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert "prerequisite missing: the toolchain is not installed" in done.stdout
    assert "prerequisites: required" in done.stdout
    # The fixture's failure is an error of each test that needs it; deliberate skips stay skips.
    assert "1 passed, 1 skipped, 2 errors" in done.stdout, done.stdout
    assert "skipped: 1 (reasons: 1 x only on kind)" in done.stdout


@pytest.mark.parametrize(
    "env",
    [{"CI": "false"}, {"CI": "0"}, {"CI": ""}, {"CI": "true", "TRAINER_REQUIRE_CLUSTER": "0"}],
    ids=["CI=false", "CI=0", "CI empty", "TRAINER_REQUIRE_CLUSTER=0 overrides CI"],
)
def test_prerequisites_stay_optional_when_ci_says_no(tmp_path: Path, env: dict[str, str]) -> None:
    done = _run(tmp_path, **env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "prerequisites: optional" in done.stdout
    assert "1 passed, 3 skipped" in done.stdout


def test_a_prerequisite_skip_made_by_hand_still_fails_a_required_run(tmp_path: Path) -> None:
    """Belt and braces: a plain ``pytest.skip`` with the prerequisite prefix fails the session too."""
    shutil.copy(ROOT / "test" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n\n\ndef test_by_hand():\n    pytest.skip('prerequisite missing: etcd')\n"
    )
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    environ["TRAINER_REQUIRE_CLUSTER"] = "yes"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    assert "prerequisite skips are failures in this run" in done.stdout
