"""examples/trainjob-mpi.yaml: its runtime is the shipped `deepspeed-distributed` with the example's image,
and it renders to the MPI objects that test/e2e/test_kind_mpi.py runs on kind.

The example brings its own TrainingRuntime because a TrainJob cannot change the image of the runtime's `node`
pods (the ones running sshd); this test keeps that runtime the shipped one in every other respect.
"""

from __future__ import annotations

import copy
import io
import tomllib
from pathlib import Path
from typing import Any

import yaml

from runtime.api import constants
from runtime.render import DEFAULT_CRD_DIR, SchemaChecker, run

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "trainjob-mpi.yaml"
SHIPPED = ROOT / "config" / "runtimes" / "deepspeed-distributed.yaml"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
IMAGE = f"kubeflow-trainer-py/example-mpi:{VERSION}"
"""What hack/build-images.sh tags examples/images/mpi as, and the example must run."""


def _documents(path: Path) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d}


def test_the_examples_runtime_is_the_shipped_deepspeed_runtime_with_the_example_image() -> None:
    example = _documents(EXAMPLE)[constants.TRAINING_RUNTIME_KIND]
    shipped = copy.deepcopy(_documents(SHIPPED)[constants.CLUSTER_TRAINING_RUNTIME_KIND])
    for rjob in shipped["spec"]["template"]["spec"]["replicatedJobs"]:
        for container in rjob["template"]["spec"]["template"]["spec"]["containers"]:
            container["image"] = IMAGE
    assert example["metadata"]["name"] == "mpi-distributed"
    assert example["metadata"]["labels"] == shipped["metadata"]["labels"]
    assert example["spec"] == shipped["spec"]


def test_the_example_renders_a_hostfile_of_the_launcher_and_two_nodes_and_mpirun_on_the_launcher() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(EXAMPLE)], stdout=out, stderr=err, schemas=SchemaChecker.from_crd_dir(DEFAULT_CRD_DIR))
    assert code == 0, err.getvalue()
    objects = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(out.getvalue())}
    assert objects["ConfigMap", "mpi-demo-mpi-hostfile"]["data"]["hostfile"] == (
        "mpi-demo-node-0-0.mpi-demo slots=1\n"
        "mpi-demo-node-0-1.mpi-demo slots=1\n"
        "mpi-demo-launcher-0-0.mpi-demo slots=1\n"
    )
    assert objects["Secret", "mpi-demo-mpi-ssh-auth"]["type"] == "kubernetes.io/ssh-auth"
    jobs = {r["name"]: r["template"]["spec"] for r in objects["JobSet", "mpi-demo"]["spec"]["replicatedJobs"]}
    assert jobs[constants.NODE]["parallelism"] == 2
    launcher = jobs[constants.LAUNCHER]["template"]["spec"]["containers"][0]
    assert launcher["command"][:2] == ["mpirun", "python3"]
    assert launcher["image"] == IMAGE
    env = {e["name"]: e["value"] for e in launcher["env"]}
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
