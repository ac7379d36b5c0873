"""``make cluster-env`` (``hack/cluster.py env``): the exports that point a shell at the Tier 2 cluster.

The shell must get the pinned kubectl, not whichever kubectl the machine has: the machine's own may be
outside the version skew Kubernetes supports. The test evaluates the printed lines in bash, with a decoy
``kubectl`` already on ``PATH``, and asserts which kubectl the shell then runs.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support import kwok

ROOT = Path(__file__).resolve().parents[3]
NAME = "env-test"


def _fake_kubectl(directory: Path, says: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    binary = directory / "kubectl"
    binary.write_text(f"#!/bin/sh\necho {says}\n")
    binary.chmod(0o755)
    return binary


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache directory holding the state of a cluster ``NAME`` whose pinned kubectl says ``pinned``."""
    cache = tmp_path / "cache with space"
    monkeypatch.setenv("TRAINER_CACHE_DIR", str(cache))
    own = kwok.own_dir(NAME)
    own.mkdir(parents=True)
    known: dict[str, Any] = {
        "name": NAME,
        "kubeconfig": str(cache / "kwok" / "clusters" / NAME / "kubeconfig.yaml"),
        "own_dir": str(own),
        "cluster_dir": str(kwok.cluster_dir(NAME)),
        "kubectl": str(_fake_kubectl(cache / "bin" / "kubernetes-v1.36.3", "pinned")),
        "nodes": ("kwok-node-0",),
    }
    blanks = {"int": 0, "float": 0.0, "str": ""}
    fields = {
        f.name: known.get(f.name, blanks.get(str(f.type), ())) for f in dataclasses.fields(kwok.ClusterState)
    }
    kwok.ClusterState(**fields).write()
    return cache


def _shell(script: str, path: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "E2E_CLUSTER")}
    env["PATH"] = path
    done = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_env_output_puts_the_pinned_kubectl_first_on_path(cache: Path, tmp_path: Path) -> None:
    decoy = _fake_kubectl(tmp_path / "machine-bin", "machine")
    path = f"{decoy.parent}:/usr/bin:/bin"
    assert _shell("kubectl", path).strip() == "machine"  # the decoy wins before the exports

    out = _shell(
        f'eval "$({sys.executable} hack/cluster.py env --name {NAME})"; '
        'kubectl; echo "KUBECONFIG=$KUBECONFIG"; echo "E2E_CLUSTER=$E2E_CLUSTER"; echo "PATH=$PATH"',
        path,
    )
    lines = out.splitlines()
    assert lines[0] == "pinned"
    assert f"KUBECONFIG={cache}/kwok/clusters/{NAME}/kubeconfig.yaml" in lines
    assert "E2E_CLUSTER=kwok" in lines
    # The rest of PATH is kept, after the pinned directory.
    assert f"PATH={cache}/bin/kubernetes-v1.36.3:{path}" in lines


def test_env_for_a_cluster_that_is_not_up_fails_with_a_hint(cache: Path) -> None:
    done = subprocess.run(
        [sys.executable, "hack/cluster.py", "env", "--name", "not-up"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 1
    assert "make cluster-up" in done.stderr
    assert done.stdout == ""
