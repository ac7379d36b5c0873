"""Env vars merge by name (Go `apply.UpsertEnvVar`): `runtime.info.upsert_env`, and a TrainJob's env over the
runtime's in the JobSet that is built.

Each rule has its own case: a var of the same name is replaced where it stands, whole (a `valueFrom` does not
survive a `value`); a new name is appended; names compare exactly; the last of several wins; the list holds
its own copies; nothing to upsert writes no `env: []`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from runtime.core import RuntimeRegistry
from runtime.framework import Framework, MemoryReader
from runtime.info import Container, upsert_env
from runtime.plugins import builtin_registry

if TYPE_CHECKING:
    from runtime.testing import Make

REGISTRY = RuntimeRegistry(Framework(builtin_registry()))


def _env(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def _from_secret(name: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}


# --- upsert_env ---------------------------------------------------------------------------------------------


def test_a_var_of_the_same_name_is_replaced_where_it_stands() -> None:
    items = [_env("A", "1"), _env("B", "2"), _env("C", "3")]
    upsert_env(items, _env("B", "9"))
    assert items == [_env("A", "1"), _env("B", "9"), _env("C", "3")]


def test_a_new_name_is_appended_after_the_others() -> None:
    items = [_env("A", "1")]
    upsert_env(items, _env("D", "4"))
    assert items == [_env("A", "1"), _env("D", "4")]


def test_the_replacement_is_whole_a_value_from_does_not_survive_a_value() -> None:
    items = [_from_secret("TOKEN")]
    upsert_env(items, _env("TOKEN", "plain"))
    assert items == [_env("TOKEN", "plain")]


def test_names_compare_exactly() -> None:
    items = [_env("path", "lower")]
    upsert_env(items, _env("PATH", "upper"))
    assert items == [_env("path", "lower"), _env("PATH", "upper")]


def test_of_several_vars_of_one_name_in_one_call_the_last_wins_once() -> None:
    items: list[dict[str, Any]] = []
    upsert_env(items, _env("X", "first"), _env("X", "second"))
    assert items == [_env("X", "second")]


def test_the_list_keeps_its_own_copy_of_what_was_upserted() -> None:
    new = _from_secret("TOKEN")
    items: list[dict[str, Any]] = []
    upsert_env(items, new)
    new["valueFrom"]["secretKeyRef"]["key"] = "changed afterwards"
    assert items == [_from_secret("TOKEN")]


def test_a_container_gets_an_env_list_only_when_there_is_something_to_put_in_it() -> None:
    bare: dict[str, Any] = {"name": "node"}
    Container(bare).upsert_env()
    assert "env" not in bare
    Container(bare).upsert_env(_env("A", "1"))
    assert bare["env"] == [_env("A", "1")]


# --- a TrainJob's env over the runtime's, in the built JobSet -----------------------------------------------


def _node_env(jobset: dict[str, Any], job: str = "node") -> list[dict[str, Any]]:
    [rjob] = [r for r in jobset["spec"]["replicatedJobs"] if r["name"] == job]
    [node] = [c for c in rjob["template"]["spec"]["template"]["spec"]["containers"] if c["name"] == "node"]
    return list(node.get("env", []))


@pytest.mark.parametrize("ml_policy", [{"numNodes": 1}, {"numNodes": 1, "torch": {}}], ids=["plain", "torch"])
def test_the_trainjob_env_replaces_the_runtime_env_by_name_and_adds_new_names(
    make: Make, ml_policy: dict[str, Any]
) -> None:
    runtime_env = [_env("KEEP", "runtime"), _from_secret("SHARED"), _env("ALSO_KEEP", "runtime")]
    node = make.container("node", image="img", env=runtime_env)
    runtime = make.runtime(
        make.runtime_spec(make.job("node", ancestor="trainer", containers=[node]), ml_policy=ml_policy)
    )
    trainjob = make.trainjob(trainer={"env": [_env("SHARED", "trainjob"), _env("NEW", "trainjob")]})
    _, jobset = REGISTRY.new_objects(trainjob, MemoryReader([runtime]))
    env = _node_env(jobset)
    names = [e["name"] for e in env]
    # The runtime's order is kept; SHARED is replaced in place (its valueFrom gone); NEW comes after them.
    assert names[:4] == ["KEEP", "SHARED", "ALSO_KEEP", "NEW"]
    assert env[:4] == [
        _env("KEEP", "runtime"),
        _env("SHARED", "trainjob"),
        _env("ALSO_KEEP", "runtime"),
        _env("NEW", "trainjob"),
    ]
    assert len(names) == len(set(names)), f"a name appears twice: {names}"


def test_a_trainjob_env_from_a_secret_replaces_a_runtime_value(make: Make) -> None:
    node = make.container("node", image="img", env=[_env("TOKEN", "runtime")])
    runtime = make.runtime(
        make.runtime_spec(make.job("node", ancestor="trainer", containers=[node]), ml_policy={"numNodes": 1})
    )
    trainjob = make.trainjob(trainer={"env": [_from_secret("TOKEN")]})
    _, jobset = REGISTRY.new_objects(trainjob, MemoryReader([runtime]))
    assert _node_env(jobset) == [_from_secret("TOKEN")]


def test_with_the_mpi_launcher_as_a_node_the_node_job_gets_the_trainjob_env_too(make: Make) -> None:
    # The launcher is the trainer ancestor; the `node` job's container gets the TrainJob env at render time.
    launcher = make.container("node", image="img", env=[_env("SHARED", "runtime")])
    worker = make.container("node", image="img", env=[_env("SHARED", "runtime"), _env("KEEP", "runtime")])
    mpi = {
        "numProcPerNode": 1,
        "mpiImplementation": "OpenMPI",
        "sshAuthMountPath": "/root/.ssh",
        "runLauncherAsNode": True,
    }
    spec = make.runtime_spec(
        make.job("launcher", ancestor="trainer", containers=[launcher]),
        make.job("node", containers=[worker]),
        ml_policy={"numNodes": 2, "mpi": mpi},
    )
    trainjob = make.trainjob(trainer={"numNodes": 2, "env": [_env("SHARED", "trainjob")]})
    objects = REGISTRY.new_objects(trainjob, MemoryReader([make.runtime(spec)]))
    [jobset] = [o for o in objects if o["kind"] == "JobSet"]
    for job in ("launcher", "node"):
        env = {e["name"]: e.get("value") for e in _node_env(jobset, job)}
        assert env["SHARED"] == "trainjob", job
    assert {e["name"]: e.get("value") for e in _node_env(jobset, "node")}["KEEP"] == "runtime"
