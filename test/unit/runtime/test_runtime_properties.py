"""Properties of arbitrary TrainJobs and runtimes: validation answers, builds succeed or raise typed errors.

The generated objects respect the CRD schemas' types (the API server guarantees that much) and nothing else:
unknown jobs and containers, duplicate names, missing trainer jobs, patches against nothing, any policy.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.core import RuntimeRegistry, StatusUpdate
from runtime.core.snapshot import build_snapshot
from runtime.framework import Framework, FrameworkError, MemoryReader, Validation
from runtime.plugins import builtin_registry

REGISTRY = RuntimeRegistry(Framework(builtin_registry()))
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"

_names = st.sampled_from(["node", "launcher", "dataset-initializer", "model-initializer", "aux"])
_env_names = st.sampled_from(["A", "B", "PET_NNODES", "PET_MASTER_ADDR", "STORAGE_URI"])
_quantities = st.one_of(
    st.integers(0, 8), st.sampled_from(["0", "1", "500m", "2", "4Gi", "1.5", "100Mi", "1e3", "1e1.5"])
)
_resource_lists = st.dictionaries(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "amd.com/gpu"]), _quantities, max_size=3
)
_resources = st.fixed_dictionaries({}, optional={"requests": _resource_lists, "limits": _resource_lists})
_env = st.lists(
    st.fixed_dictionaries({"name": _env_names}, optional={"value": st.sampled_from(["", "1", "x"])}),
    max_size=3,
    unique_by=lambda e: e["name"],
)
_commands = st.one_of(
    st.none(),
    st.just(["tune", "run"]),
    st.lists(st.sampled_from(["torchrun", "train.py", "output_dir=/o", "tokenizer.path=/t"]), max_size=3),
)
_args = st.lists(
    st.sampled_from(
        ["epochs=1", "model.lora_attn_modules=['q']", "model.quantize_base=True", "output_dir=/x"]
    ),
    max_size=3,
)
_containers = st.lists(
    st.fixed_dictionaries(
        {"name": _names},
        optional={
            "image": st.sampled_from(["img:1", "img:2"]),
            "command": _commands.filter(lambda c: c is not None),
            "env": _env,
            "resources": _resources,
            "volumeMounts": st.lists(
                st.fixed_dictionaries(
                    {
                        "name": st.sampled_from(["initializer", "data"]),
                        "mountPath": st.sampled_from(["/a", "/b"]),
                    }
                ),
                max_size=2,
                unique_by=lambda m: m["mountPath"],
            ),
            "ports": st.lists(
                st.fixed_dictionaries({"containerPort": st.sampled_from([8080, 29500])}), max_size=2
            ),
            "restartPolicy": st.just("Always"),
        },
    ),
    max_size=2,
)


@st.composite
def _replicated_jobs(draw: st.DrawFn) -> dict[str, Any]:
    job_spec: dict[str, Any] = {
        "template": {"spec": {"containers": draw(_containers), "initContainers": draw(_containers)}}
    }
    if draw(st.booleans()):
        job_spec["parallelism"] = draw(st.integers(0, 3))
    template: dict[str, Any] = {"spec": job_spec}
    ancestor = draw(st.sampled_from([None, "trainer", "dataset-initializer", "model-initializer", "other"]))
    if ancestor is not None:
        template["metadata"] = {"labels": {ANCESTOR: ancestor}}
    job: dict[str, Any] = {"name": draw(_names), "template": template}
    if draw(st.booleans()):
        job["replicas"] = draw(st.integers(1, 2))
    return job


_ml_policies = st.one_of(
    st.none(),
    st.just({}),
    st.fixed_dictionaries({}, optional={"numNodes": st.integers(0, 3)}).map(
        lambda p: {
            **p,
            "torch": {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["aux"]}]}},
        }
    ),
    st.sampled_from(
        [{"torch": {}}, {"mpi": {"runLauncherAsNode": True}}, {"jax": {}}, {"xgboost": {}}, {"flux": {}}]
    ),
    st.fixed_dictionaries({"numNodes": st.integers(0, 3)}),
)


@st.composite
def _runtime_specs(draw: st.DrawFn) -> dict[str, Any]:
    jobset_spec: dict[str, Any] = {"replicatedJobs": draw(st.lists(_replicated_jobs(), max_size=3))}
    if draw(st.booleans()):
        jobset_spec["network"] = {"subdomain": "sub"}
    spec: dict[str, Any] = {"template": {"spec": jobset_spec}}
    if draw(st.booleans()):
        spec["template"]["metadata"] = {"labels": {"team": "a"}, "annotations": {"note": "b"}}
    policy = draw(_ml_policies)
    if policy is not None:
        spec["mlPolicy"] = policy
    return spec


@st.composite
def _patches(draw: st.DrawFn) -> dict[str, Any]:
    pod_spec = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "containers": st.lists(
                    st.fixed_dictionaries({"name": _names}, optional={"env": _env}),
                    max_size=2,
                    unique_by=lambda c: c["name"],
                ),
                "initContainers": st.lists(st.fixed_dictionaries({"name": _names}), max_size=1),
                "nodeSelector": st.dictionaries(
                    st.sampled_from(["k", "j"]), st.sampled_from(["v", "w"]), max_size=2
                ),
                "tolerations": st.lists(
                    st.fixed_dictionaries({"key": st.sampled_from(["a", "b"])}), max_size=2
                ),
                "serviceAccountName": st.sampled_from(["sa"]),
            },
        )
    )
    jobs = [{"name": draw(_names), "template": {"spec": {"template": {"spec": pod_spec}}}}]
    template: dict[str, Any] = {"spec": {"replicatedJobs": jobs}}
    if draw(st.booleans()):
        template["metadata"] = {"labels": {"patched": "yes"}}
    return {
        "manager": draw(st.sampled_from(["acme.io/m", "bad", "kueue.k8s.io/"])),
        "trainingRuntimeSpec": {"template": template},
    }


_trainers = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "image": st.just("user:img"),
            "command": _commands.filter(lambda c: c is not None),
            "args": _args,
            "env": _env,
            "numNodes": st.integers(0, 4),
            "numProcPerNode": st.integers(1, 3),
            "resourcesPerNode": _resources,
        },
    ),
)


@st.composite
def _trainjobs(draw: st.DrawFn, kind: str, runtime_name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"runtimeRef": {"name": runtime_name}}
    if kind != "default":
        spec["runtimeRef"].update({"kind": kind, "apiGroup": "trainer.kubeflow.org"})
    trainer = draw(_trainers)
    if trainer is not None:
        spec["trainer"] = trainer
    if draw(st.booleans()):
        spec["initializer"] = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "dataset": st.fixed_dictionaries(
                        {}, optional={"storageUri": st.just("s3://b/d"), "env": _env}
                    ),
                    "model": st.fixed_dictionaries({}, optional={"secretRef": st.just({"name": "s"})}),
                },
            )
        )
    if draw(st.booleans()):
        spec["runtimePatches"] = draw(st.lists(_patches(), max_size=2, unique_by=lambda p: p["manager"]))
    if draw(st.booleans()):
        spec["suspend"] = draw(st.booleans())
    if draw(st.booleans()):
        spec["activeDeadlineSeconds"] = draw(st.integers(1, 10_000))
    trainjob: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": "tj",
            "namespace": "ns",
            "uid": "u",
            "creationTimestamp": "2026-01-02T00:00:00Z",
        },
        "spec": spec,
    }
    if draw(st.booleans()):
        trainjob["status"] = {
            "conditions": draw(
                st.lists(
                    st.fixed_dictionaries(
                        {
                            "type": st.sampled_from(["Suspended", "Complete", "Failed"]),
                            "status": st.sampled_from(["True", "False"]),
                            "reason": st.sampled_from(["Suspended", "DeadlineExceeded", "FailedJobs"]),
                            "message": st.just("m"),
                            "lastTransitionTime": st.just("2026-01-01T00:00:00Z"),
                        }
                    ),
                    max_size=3,
                    unique_by=lambda c: c["type"],
                )
            )
        }
    return trainjob


@st.composite
def _worlds(draw: st.DrawFn) -> tuple[dict[str, Any], MemoryReader]:
    kinds = ["TrainingRuntime", "ClusterTrainingRuntime", "default"] * 3 + ["Unknown"]
    kind = draw(st.sampled_from(kinds))
    trainjob = draw(_trainjobs(kind, "rt"))
    reader = MemoryReader()
    if draw(st.sampled_from([True, True, True, True, False])):  # mostly, the runtime exists
        stored_kind = "TrainingRuntime" if kind == "TrainingRuntime" else "ClusterTrainingRuntime"
        metadata: dict[str, Any] = {"name": "rt"}
        if stored_kind == "TrainingRuntime":
            metadata["namespace"] = "ns"
        if draw(st.booleans()):
            metadata["labels"] = {"trainer.kubeflow.org/support": "deprecated"}
        runtime = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": stored_kind,
            "metadata": metadata,
            "spec": draw(_runtime_specs()),
        }
        reader.add(runtime)
        if draw(st.booleans()) and kind != "Unknown":
            reader.add(build_snapshot(trainjob, runtime, stored_kind))
            if draw(st.booleans()):  # the runtime was deleted since: the snapshot carries on
                reader.delete(runtime["apiVersion"], stored_kind, "rt", metadata.get("namespace"))
    if draw(st.booleans()):
        status = {"replicatedJobsStatus": [{"name": "node", "active": draw(st.integers(0, 2))}]}
        conditions = draw(
            st.sampled_from(
                [
                    [],
                    [
                        {
                            "type": "Completed",
                            "status": "True",
                            "reason": "AllJobsCompleted",
                            "message": "ok",
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                        }
                    ],
                ]
            )
        )
        spec: dict[str, Any] = {"suspend": draw(st.booleans())}
        reader.add(
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": {"name": "tj", "namespace": "ns"},
                "spec": spec,
                "status": {**status, "conditions": conditions},
            }
        )
    return trainjob, reader


_SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(_worlds(), st.one_of(st.none(), _trainjobs("TrainingRuntime", "rt")))
def test_validation_always_answers_and_never_mutates(
    world: tuple[dict[str, Any], MemoryReader], old: dict[str, Any] | None
) -> None:
    trainjob, reader = world
    before = orjson.dumps([trainjob, old])
    result = REGISTRY.validate(old, trainjob, reader)
    assert isinstance(result, Validation)
    assert all(str(error) for error in result.errors)
    assert orjson.dumps([trainjob, old]) == before


@_SETTINGS
@given(_worlds())
def test_builds_succeed_or_fail_with_a_framework_error(world: tuple[dict[str, Any], MemoryReader]) -> None:
    trainjob, reader = world
    before = orjson.dumps(trainjob)
    try:
        objects = REGISTRY.new_objects(trainjob, reader)
    except FrameworkError as exc:
        assert str(exc)
    else:
        for obj in objects:
            assert obj["metadata"]["namespace"] == "ns"
            assert obj["metadata"]["ownerReferences"][0]["uid"] == "u"
            orjson.dumps(obj)  # every object is plain JSON
        for job in next((o for o in objects if o["kind"] == "JobSet"), {"spec": {"replicatedJobs": []}})[
            "spec"
        ].get("replicatedJobs", []):  # Go omits an empty list
            assert job["template"]["spec"]["parallelism"] >= 1
    assert orjson.dumps(trainjob) == before


@_SETTINGS
@given(_worlds())
def test_status_is_always_computed(world: tuple[dict[str, Any], MemoryReader]) -> None:
    trainjob, reader = world
    update = REGISTRY.next_status(trainjob, reader, NOW)
    assert isinstance(update, StatusUpdate)
    types = [c["type"] for c in update.status.get("conditions", [])]
    assert len(types) == len(set(types))
    if update.delete_jobset:
        assert any(c["reason"] == "DeadlineExceeded" for c in update.status["conditions"])
