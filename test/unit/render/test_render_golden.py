"""Golden files: every default runtime (and four example runtimes) x representative TrainJobs, rendered.

Each case renders `test/golden/trainjobs/<case>.yaml`, pointed at one runtime, with the real command
line (`--runtime config/runtimes --runtime test/golden/runtimes --existing test/golden/existing`) and
compares the result byte for byte with `test/golden/rendered/<runtime>/<case>.yaml` (stdout, exit 0) or
`<case>.err` (stderr, exit 2).

Regenerate on purpose only, after a deliberate change of output, and review the diff:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest test/unit/render/test_render_golden.py -q

A file that no case produces fails `test_every_golden_file_belongs_to_a_case`.
"""

from __future__ import annotations

import difflib
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.render import run
from support.golden import CASES, GOLDEN, RENDERED, ROOT, SCHEMAS, UPDATE, Case


def _render(case: Case, workdir: Path) -> tuple[int, str, str]:
    trainjob = yaml.safe_load((GOLDEN / "trainjobs" / f"{case.trainjob}.yaml").read_text())
    trainjob["spec"]["runtimeRef"] = {"name": case.runtime, "kind": case.kind}
    (workdir / "trainjob.yaml").write_text(yaml.safe_dump(trainjob, sort_keys=False))
    out, err = io.StringIO(), io.StringIO()
    code = run(
        [
            "trainjob.yaml",
            "--runtime",
            str(ROOT / "config" / "runtimes"),
            "--runtime",
            str(GOLDEN / "runtimes"),
            "--existing",
            str(GOLDEN / "existing"),
        ],
        stdout=out,
        stderr=err,
        schemas=SCHEMAS,
    )
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rendered_output_matches_the_golden_file(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # error messages name the TrainJob file relative to here
    code, out, err = _render(case, tmp_path)
    assert code in (0, 2), err
    actual, suffix, stale = (out, ".yaml", ".err") if code == 0 else (err, ".err", ".yaml")
    path = RENDERED / case.runtime / f"{case.trainjob}{suffix}"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
        path.with_suffix(stale).unlink(missing_ok=True)
        return
    assert path.exists(), (
        f"{path.relative_to(ROOT)} is missing: regenerate with UPDATE_GOLDEN=1 (see module doc)"
    )
    expected = path.read_text()
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                fromfile=str(path.relative_to(ROOT)),
                tofile="rendered",
            )
        )
        pytest.fail(f"render output differs from the golden file:\n{diff}", pytrace=False)


def test_every_golden_file_belongs_to_a_case() -> None:
    wanted = {(c.runtime, c.trainjob) for c in CASES}
    found = {(p.parent.name, p.stem) for p in RENDERED.rglob("*") if p.is_file()}
    assert found - wanted == set(), "stale golden files: delete them"
    assert found >= wanted or UPDATE, "missing golden files: regenerate with UPDATE_GOLDEN=1"


def test_rendering_is_deterministic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    case = Case("deepspeed-distributed", "gpus")
    first, second = _render(case, tmp_path), _render(case, tmp_path)
    assert first == second
    assert first[0] == 0


# --- key facts of each golden case, asserted explicitly -----------------------------------------------------
#
# The golden files are regenerated on purpose after a change of output, and a reviewer may wave a large
# diff through. These facts are written by hand, from what the plugins must do, and checked on every case
# that renders: the env of every `node` container of the JobSet, per replicated job, in order, with values.
# They hold whatever the quantity formatting is.

INDEX = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
HF_TOKEN = {"secretKeyRef": {"name": "hf", "key": "token"}}
TRAINER_ENV = [("LOG_LEVEL", "debug"), ("HF_TOKEN", HF_TOKEN)]  # test/golden/trainjobs/gpus.yaml


def _pet(nnodes: int, nproc: str, *, master: bool = True) -> list[tuple[str, Any]]:
    env = [("PET_NNODES", str(nnodes)), ("PET_NPROC_PER_NODE", nproc), ("PET_NODE_RANK", INDEX)]
    if master:
        env += [("PET_MASTER_ADDR", "demo-node-0-0.demo"), ("PET_MASTER_PORT", "29500")]
    return env


def _openmpi_launcher(slots: int) -> list[tuple[str, Any]]:
    return [
        ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
        ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
        ("OMPI_MCA_orte_set_default_slots", str(slots)),
        ("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
    ]


def _jax(processes: int) -> list[tuple[str, Any]]:
    return [
        ("JAX_NUM_PROCESSES", str(processes)),
        ("JAX_PROCESS_ID", INDEX),
        ("JAX_COORDINATOR_ADDRESS", "demo-node-0-0.demo:29500"),
    ]


def _dmlc(workers: int) -> list[tuple[str, Any]]:
    return [
        ("DMLC_TRACKER_URI", "demo-node-0-0.demo"),
        ("DMLC_TRACKER_PORT", "29500"),
        ("DMLC_TASK_ID", INDEX),
        ("DMLC_NUM_WORKER", str(workers)),
    ]


def _torch_facts(nproc: str, patched_nproc: str) -> dict[str, dict[str, list[tuple[str, Any]]]]:
    """minimal: no trainer, runtime as written; gpus: 2 nodes x 4 GPUs, the TrainJob env first; the
    runtime-patches and suspend TrainJobs set 2 and 3 nodes."""
    return {
        "minimal": {"node": []},
        "gpus": {"node": TRAINER_ENV + _pet(2, nproc)},
        "runtime-patches": {"node": _pet(2, patched_nproc)},
        "suspend": {"node": _pet(3, patched_nproc)},
    }


def _torchtune_facts() -> dict[str, dict[str, list[tuple[str, Any]]]]:
    return {
        **_torch_facts("auto", "auto"),
        "initializers": {"node": _pet(1, "auto")},
        # A `tune run` command on one node: torchtune rendezvous without a master address.
        "tune-run": {"node": _pet(1, "auto", master=False)},
    }


def _mpi_facts(*, launcher_first: bool, node_gets_trainer_env: bool) -> dict[str, dict[str, Any]]:
    """OpenMPI: the launcher gets the hostfile envs (slots = GPUs per node, else 1)."""

    def jobs(slots: int, trainer: list[tuple[str, Any]]) -> dict[str, Any]:
        launcher = _openmpi_launcher(slots) + ([] if launcher_first else trainer)
        node = trainer if node_gets_trainer_env else []
        return {"launcher": launcher, "node": node}

    return {
        "minimal": jobs(1, []),
        "gpus": jobs(4, TRAINER_ENV),
        "runtime-patches": jobs(1, []),
        "suspend": jobs(1, []),
    }


NODE_ENV_FACTS: dict[str, dict[str, dict[str, list[tuple[str, Any]]]]] = {
    "torch-distributed": _torch_facts("auto", "1"),
    "torch-coscheduling": {
        **_torch_facts("auto", "4"),
        "initializers": {"node": _pet(2, "auto")},
        "quantities": {"node": _pet(2, "auto")},  # 2 GPUs per node, no trainer env
    },
    "torchtune-llama3.2-1b": _torchtune_facts(),
    "torchtune-llama3.2-3b": _torchtune_facts(),
    "torchtune-qwen2.5-1.5b": _torchtune_facts(),
    # DeepSpeed and MLX run the launcher as a node: it gets the TrainJob env after the OpenMPI envs.
    "deepspeed-distributed": _mpi_facts(launcher_first=False, node_gets_trainer_env=True),
    "mlx-distributed": _mpi_facts(launcher_first=False, node_gets_trainer_env=True),
    "mpi-launcher-nodes": _mpi_facts(launcher_first=False, node_gets_trainer_env=True),
    # mpi-volcano's launcher is not a node: only the node job gets the TrainJob env.
    "mpi-volcano": _mpi_facts(launcher_first=True, node_gets_trainer_env=True),
    "jax-distributed": {
        "minimal": {"node": []},
        "gpus": {"node": _jax(2) + TRAINER_ENV},
        "runtime-patches": {"node": _jax(2)},
        "suspend": {"node": _jax(3)},
    },
    # jax-volcano: the JAX envs of jax-distributed; Volcano and the passed-through fields add none.
    "jax-volcano": {
        "minimal": {"node": []},
        "gpus": {"node": _jax(2) + TRAINER_ENV},
        "runtime-patches": {"node": _jax(2)},
        "suspend": {"node": _jax(3)},
    },
    # DMLC_NUM_WORKER counts GPUs across nodes: 2 nodes x 4 GPUs = 8.
    "xgboost-distributed": {
        "minimal": {"node": []},
        "gpus": {"node": TRAINER_ENV + _dmlc(8)},
        "runtime-patches": {"node": _dmlc(2)},
        "suspend": {"node": _dmlc(3)},
    },
    "flux-distributed": {
        "minimal": {"node": []},
        "gpus": {"node": TRAINER_ENV},
        "runtime-patches": {"node": []},
        "suspend": {"node": []},
    },
}


def _node_envs(rendered: str) -> dict[str, list[tuple[str, Any]]]:
    """The env of the `node` container of each replicated job of the one JobSet, as (name, value) pairs."""
    [jobset] = [d for d in yaml.safe_load_all(rendered) if d and d.get("kind") == "JobSet"]
    envs = {}
    for rjob in jobset["spec"]["replicatedJobs"]:
        for container in rjob["template"]["spec"]["template"]["spec"].get("containers", []):
            if container["name"] == "node":
                envs[rjob["name"]] = [
                    (e["name"], e["valueFrom"] if "valueFrom" in e else e.get("value"))
                    for e in container.get("env", [])
                ]
    return envs


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_node_containers_env_is_what_the_plugins_must_set(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = _render(case, tmp_path)
    facts = NODE_ENV_FACTS.get(case.runtime, {}).get(case.trainjob)
    if code != 0:
        assert facts is None, f"{case.id} has env facts but does not render:\n{err}"
        return
    assert facts is not None, f"{case.id} renders: write down its node env in NODE_ENV_FACTS"
    assert _node_envs(out) == facts


def test_every_env_fact_belongs_to_a_case() -> None:
    cases = {(c.runtime, c.trainjob) for c in CASES}
    facts = {(runtime, trainjob) for runtime, table in NODE_ENV_FACTS.items() for trainjob in table}
    assert facts - cases == set()


def _documents(runtime: str, trainjob: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((RENDERED / runtime / f"{trainjob}.yaml").read_text()) if d]


def _pod_specs(jobset: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {j["name"]: j["template"]["spec"]["template"] for j in jobset["spec"]["replicatedJobs"]}


def test_golden_objects_are_written_as_upstream_writes_them() -> None:
    # docs/compatibility.md, "Objects as written": quantities as Go's Quantity writes them (strings,
    # canonical), and `{}` for the Go structs upstream's typed round trip never omits.
    documents = _documents("torch-coscheduling", "quantities")
    jobset = next(d for d in documents if d["kind"] == "JobSet")
    node = next(c for c in _pod_specs(jobset)["node"]["spec"]["containers"] if c["name"] == "node")
    assert node["resources"] == {
        "requests": {"cpu": "1500m", "memory": "1536Mi", "nvidia.com/gpu": "2"},
        "limits": {"memory": "1536Mi", "nvidia.com/gpu": "2"},
    }
    pod_group = next(d for d in documents if d["kind"] == "PodGroup")
    assert all(isinstance(q, str) for q in pod_group["spec"]["minResources"].values())

    templates = _pod_specs(
        next(d for d in _documents("torch-distributed", "minimal") if d["kind"] == "JobSet")
    )
    assert templates["node"]["metadata"] == {}

    tune = next(d for d in _documents("torchtune-llama3.2-1b", "minimal") if d["kind"] == "JobSet")
    initializer = _pod_specs(tune)["dataset-initializer"]["spec"]["containers"][0]
    assert initializer["resources"] == {}
    assert tune["spec"]["volumeClaimPolicies"][0]["templates"][0]["status"] == {}
    trainer = next(c for c in _pod_specs(tune)["node"]["spec"]["containers"] if c["name"] == "node")
    assert trainer["resources"]["limits"] == {"nvidia.com/gpu": "2"}  # the runtime writes the integer 2

    flux = next(d for d in _documents("flux-distributed", "minimal") if d["kind"] == "JobSet")
    installer = _pod_specs(flux)["node"]["spec"]["initContainers"][0]
    assert "resources" not in installer  # appended by the plugin, after upstream's typed round trip


def test_jax_volcano_is_rendered_as_upstream_renders_it() -> None:
    # Facts checked against upstream v2.3.0's own pipeline (docs/compatibility.md, "Checks stricter than
    # upstream's"): the runtime, written with a namespace, is found; resourcesPerNode keeps only limits and
    # requests (the container's resource claims go, the pod's stay); the PodGroup gets the queue, the
    # priority class and the network topology.
    documents = _documents("jax-volcano", "gpus")
    snapshot = next(d for d in documents if d["kind"] == "ConfigMap")
    assert "namespace" not in yaml.safe_load(snapshot["data"]["runtime"])["metadata"]
    jobset = next(d for d in documents if d["kind"] == "JobSet")
    pod = _pod_specs(jobset)["node"]["spec"]
    assert set(pod["containers"][0]["resources"]) == {"limits", "requests"}
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "jax-gpu"}]
    assert [job.get("dependsOn") for job in jobset["spec"]["replicatedJobs"]] == [
        None,
        [{"name": "dataset-initializer", "status": "Complete"}],
    ]
    pod_group = next(d for d in documents if d["kind"] == "PodGroup")
    assert pod_group["spec"] == {
        "minMember": 3,
        "minResources": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "8"},
        "networkTopology": {"highestTierAllowed": 2, "mode": "hard"},
        "priorityClassName": "training-high",
        "queue": "research",
    }
    minimal = next(d for d in _documents("jax-volcano", "minimal") if d["kind"] == "JobSet")
    assert _pod_specs(minimal)["node"]["spec"]["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]
