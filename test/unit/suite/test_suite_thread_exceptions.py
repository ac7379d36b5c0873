"""An exception in a thread a test started fails the test (``pyproject.toml``'s ``filterwarnings``).

pytest reports an unhandled exception in another thread as ``PytestUnhandledThreadExceptionWarning``; left a
warning, an ``assert`` inside a worker thread passes silently. The project's configuration makes it an
error. The case runs a small session in a subprocess with that configuration and asserts its outcome.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

_TEST = """
import threading


def test_asserts_in_a_worker_thread():
    def work():
        assert 1 + 1 == 3, "checked inside the worker"

    worker = threading.Thread(target=work, name="test/worker")
    worker.start()
    worker.join(10)
"""


def test_an_assert_failing_in_a_worker_thread_fails_the_test(tmp_path: Path) -> None:
    (tmp_path / "test_worker.py").write_text(_TEST)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_worker.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout, done.stdout
    assert "checked inside the worker" in done.stdout
