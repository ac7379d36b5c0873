"""The core runtimes: build order, the runtime snapshot, webhook validation, and TrainJob status.

Upstream tables mirrored: `trainingruntime_test.go` / `clustertrainingruntime_test.go`
(TestTrainingRuntimeNewObjects, TestClusterTrainingRuntimeNewObjects), `snapshot_test.go`
(TestGetRuntimeSnapshot, TestRuntimeSnapshotRoundTrip), and the status part of the TrainJob controller.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from runtime.api.gojson import go_json_training_runtime
from runtime.core import (
    InvalidTrainJobError,
    RuntimeNotFoundError,
    RuntimeRegistry,
    SnapshotError,
    UnsupportedRuntimeError,
)
from runtime.core.snapshot import build_snapshot, read_snapshot
from runtime.core.status import format_time
from runtime.framework import Framework, MemoryReader
from runtime.info import RuntimePatchError
from runtime.plugins import builtin_registry

if TYPE_CHECKING:
    from runtime.testing import Make

REGISTRY = RuntimeRegistry(Framework(builtin_registry()))


def _torch_distributed(make: Make) -> dict[str, Any]:
    """A ClusterTrainingRuntime shaped like upstream's `torch-distributed`, as the API server stores it."""
    node = make.container("node", image="pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime")
    job = make.job("node", ancestor="trainer", containers=[node])
    job["groupName"] = "default"
    spec = make.runtime_spec(job, ml_policy={"numNodes": 1, "torch": {}})
    return make.runtime(
        spec,
        name="torch-distributed",
        kind="ClusterTrainingRuntime",
        labels={"trainer.kubeflow.org/framework": "torch"},
    )


def test_the_worked_example_builds_the_snapshot_then_the_jobset(make: Make) -> None:
    # The worked example: TrainJob team/demo on torch-distributed, 2 nodes, 1 GPU each.
    runtime = _torch_distributed(make)
    gpu = {"nvidia.com/gpu": 1}
    trainjob = make.trainjob(
        "demo",
        "team",
        uid="demo-uid",
        runtime="torch-distributed",
        kind=None,  # defaults to ClusterTrainingRuntime
        suspend=False,
        trainer={
            "image": "X",
            "command": ["torchrun", "train.py"],
            "numNodes": 2,
            "resourcesPerNode": {"requests": gpu, "limits": gpu},
        },
    )
    snapshot, jobset = REGISTRY.new_objects(trainjob, MemoryReader([runtime]))

    owner = make.owner("demo", "demo-uid")
    assert snapshot["apiVersion"] == "v1" and snapshot["kind"] == "ConfigMap"
    assert snapshot["metadata"] == {
        "name": "demo-runtime-snapshot",
        "namespace": "team",
        # Not upstream's: the label lets a controller cache only the ConfigMaps TrainJobs own (trainer#3374).
        "labels": {"trainer.kubeflow.org/trainjob-name": "demo"},
        "ownerReferences": [owner],
    }
    assert yaml.safe_load(snapshot["data"]["runtime"]) == go_json_training_runtime(
        runtime
    )  # Go's typed runtime
    assert "kind: ClusterTrainingRuntime" in snapshot["data"]["runtime"]

    assert jobset == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "demo", "namespace": "team", "ownerReferences": [owner]},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "node",
                    "replicas": 1,
                    "groupName": "default",
                    "template": {
                        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "template": {
                                "metadata": {},  # Go writes empty structs (docs/compatibility.md)
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "node",
                                            "image": "X",
                                            "command": ["torchrun", "train.py"],
                                            # quantities as Go writes them: strings
                                            "resources": {
                                                "requests": {"nvidia.com/gpu": "1"},
                                                "limits": {"nvidia.com/gpu": "1"},
                                            },
                                            "env": [
                                                make.env("PET_NNODES", "2"),
                                                make.env("PET_NPROC_PER_NODE", "auto"),
                                                make.rank_env("PET_NODE_RANK"),
                                                make.env("PET_MASTER_ADDR", "demo-node-0-0.demo"),
                                                make.env("PET_MASTER_PORT", "29500"),
                                            ],
                                            "ports": [{"containerPort": 29500}],
                                        }
                                    ]
                                },
                            },
                        },
                    },
                }
            ],
            "suspend": False,
        },
    }


def test_an_existing_snapshot_wins_over_the_live_runtime(make: Make) -> None:
    # e2e 113/114: later runtime edits (or its deletion) never reach an existing TrainJob.
    runtime = _torch_distributed(make)
    trainjob = make.trainjob("demo", runtime="torch-distributed", kind="ClusterTrainingRuntime", trainer={})
    snapshot = build_snapshot(trainjob, runtime, "ClusterTrainingRuntime")
    edited = yaml.safe_load(yaml.safe_dump(runtime))
    edited["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]["image"] = "new"
    for reader in (MemoryReader([snapshot, edited]), MemoryReader([snapshot])):
        objects = REGISTRY.new_objects(trainjob, reader)
        assert [o["kind"] for o in objects] == ["JobSet"]
        container = objects[0]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
            "containers"
        ][0]
        assert container["image"] == "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"


def test_an_unlabelled_snapshot_of_an_older_controller_still_wins_over_the_live_runtime(make: Make) -> None:
    runtime = _torch_distributed(make)
    trainjob = make.trainjob("demo", runtime="torch-distributed", kind="ClusterTrainingRuntime", trainer={})
    snapshot = build_snapshot(trainjob, runtime, "ClusterTrainingRuntime")
    assert snapshot["metadata"].pop("labels") == {"trainer.kubeflow.org/trainjob-name": "demo"}
    # The Reader finds it though a label-narrowed ConfigMap cache would not hold it: it is not rewritten.
    objects = REGISTRY.new_objects(trainjob, MemoryReader([snapshot, runtime]))
    assert [o["kind"] for o in objects] == ["JobSet"]


def test_a_running_jobset_leaves_nothing_to_apply(make: Make) -> None:
    runtime = _torch_distributed(make)
    trainjob = make.trainjob(
        "demo", runtime="torch-distributed", kind="ClusterTrainingRuntime", suspend=False
    )
    snapshot = build_snapshot(trainjob, runtime, "ClusterTrainingRuntime")
    assert REGISTRY.new_objects(trainjob, MemoryReader([snapshot, make.jobset("demo", suspend=False)])) == []


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        # upstream "missing trainingRuntime resource" (both kinds)
        (
            "TrainingRuntime",
            "TrainingRuntime specified in TrainJob is not found: "
            'trainingruntimes.trainer.kubeflow.org "nope" not found',
        ),
        (
            "ClusterTrainingRuntime",
            "not found ClusterTrainingRuntime specified in TrainJob: "
            'clustertrainingruntimes.trainer.kubeflow.org "nope" not found',
        ),
    ],
)
def test_a_missing_runtime_is_an_error(make: Make, kind: str, message: str) -> None:
    with pytest.raises(RuntimeNotFoundError) as raised:
        REGISTRY.new_objects(make.trainjob(runtime="nope", kind=kind), MemoryReader())
    assert str(raised.value) == message


def test_a_namespaced_runtime_is_looked_up_in_the_trainjobs_namespace(make: Make) -> None:
    runtime = make.runtime(make.runtime_spec(*make.default_jobs()), namespace="other")
    with pytest.raises(RuntimeNotFoundError):
        REGISTRY.new_objects(make.trainjob(), MemoryReader([runtime]))
    assert len(REGISTRY.new_objects(make.trainjob(namespace="other"), MemoryReader([runtime]))) == 2


_SNAPSHOT_YAML = """apiVersion: trainer.kubeflow.org/v1alpha1
kind: {kind}
metadata:
  name: {name}
spec:
  template:
    spec:
      replicatedJobs: []
"""


@pytest.mark.parametrize(
    ("owner_uid", "data", "message"),
    [
        # upstream "returns error when ConfigMap is not owned and controlled by the TrainJob"
        (
            None,
            {"runtime": _SNAPSHOT_YAML.format(kind="TrainingRuntime", name="test-runtime")},
            "invalid runtime snapshot: a snapshot configmap exists but is owned by another object",
        ),
        (
            "someone-else",
            {"runtime": ""},
            "invalid runtime snapshot: a snapshot configmap exists but is owned by another object",
        ),
        # upstream "returns error when ConfigMap is missing runtime data key"
        ("uid", {"wrong-key": ""}, 'invalid runtime snapshot: snapshot ConfigMap missing "runtime" data key'),
        # upstream "returns error when ConfigMap contains invalid YAML"
        (
            "uid",
            {"runtime": "invalid: yaml: content:\n  - broken"},
            "invalid runtime snapshot: unable to unmarshal the snapshot: ",
        ),
        (
            "uid",
            {"runtime": "- a list"},
            "invalid runtime snapshot: unable to unmarshal the snapshot: not a runtime object",
        ),
        # upstream "returns error when snapshot runtime name does not match RuntimeRef"
        (
            "uid",
            {"runtime": _SNAPSHOT_YAML.format(kind="TrainingRuntime", name="other-runtime")},
            "invalid runtime snapshot: the snapshot refers to the wrong runtime: "
            "expecting a runtime with name, api group and kind of "
            '"test-runtime", "trainer.kubeflow.org", "TrainingRuntime" '
            "but found runtime with name, api group and kind of "
            '"other-runtime", "trainer.kubeflow.org", "TrainingRuntime"',
        ),
        # upstream "returns error when snapshot runtime kind does not match RuntimeRef"
        (
            "uid",
            {"runtime": _SNAPSHOT_YAML.format(kind="ClusterTrainingRuntime", name="test-runtime")},
            "the snapshot refers to the wrong runtime",
        ),
    ],
)
def test_invalid_snapshots_are_rejected(
    make: Make, owner_uid: str | None, data: dict[str, str], message: str
) -> None:
    owners = [] if owner_uid is None else [{**make.owner(), "uid": owner_uid}]
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "test-job-runtime-snapshot", "namespace": "default", "ownerReferences": owners},
        "data": data,
    }
    with pytest.raises(SnapshotError, match="invalid runtime snapshot") as raised:
        read_snapshot(configmap, make.trainjob())
    assert message in str(raised.value)
    with pytest.raises(SnapshotError, match=r"^unable to get runtime snapshot: invalid runtime snapshot"):
        REGISTRY.new_objects(make.trainjob(), MemoryReader([configmap]))


def test_a_snapshot_round_trips(make: Make) -> None:
    # upstream TestRuntimeSnapshotRoundTrip; managedFields never reach the snapshot.
    runtime = make.runtime(make.runtime_spec(*make.default_jobs(), ml_policy={"numNodes": 2, "torch": {}}))
    runtime["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    trainjob = make.trainjob()
    read_back = read_snapshot(build_snapshot(trainjob, runtime, "TrainingRuntime"), trainjob)
    assert read_back["spec"] == go_json_training_runtime(runtime)["spec"]
    assert "managedFields" not in read_back["metadata"]
    assert (read_back["kind"], read_back["metadata"]["name"]) == ("TrainingRuntime", "test-runtime")


def test_runtime_kinds_are_keyed_by_kind_and_group(make: Make) -> None:
    assert sorted(REGISTRY) == [
        "ClusterTrainingRuntime.trainer.kubeflow.org",
        "TrainingRuntime.trainer.kubeflow.org",
    ]
    assert REGISTRY.key_of(make.trainjob(kind=None)) == "ClusterTrainingRuntime.trainer.kubeflow.org"
    assert REGISTRY.runtime_for(make.trainjob()).kind.kind == "TrainingRuntime"


def test_an_unsupported_runtime_kind_is_a_typed_permanent_error(make: Make) -> None:
    trainjob = make.trainjob(kind="MyRuntime")
    with pytest.raises(
        UnsupportedRuntimeError, match=r"^unsupported runtime: MyRuntime.trainer.kubeflow.org$"
    ):
        REGISTRY.new_objects(trainjob, MemoryReader())


def test_an_unsupported_runtime_kind_gets_a_failed_condition_to_persist(make: Make) -> None:
    # Upstream: the condition was set in memory, then lost to a nil-runtime panic; here it is the status.
    update = REGISTRY.next_status(make.trainjob(kind="MyRuntime"), MemoryReader(), make.now)
    assert update.terminal is True
    assert update.status == {
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "TrainingRuntimeNotSupported",
                "message": "unsupported runtime: MyRuntime.trainer.kubeflow.org",
                "lastTransitionTime": format_time(make.now),
            }
        ]
    }
    assert [
        str(e) for e in REGISTRY.validate(None, make.trainjob(kind="MyRuntime"), MemoryReader()).errors
    ] == [
        "spec.runtimeRef: Invalid value: "
        '{"name":"test-runtime","kind":"MyRuntime","apiGroup":"trainer.kubeflow.org"}: '
        "unsupported runtime: MyRuntime.trainer.kubeflow.org"
    ]


def test_zero_nodes_are_rejected_by_validation_and_build(make: Make) -> None:
    # Upstream: numNodes 0 passes the schema and builds parallelism 0 with PET_NNODES=0; we refuse it.
    runtime = make.runtime(make.runtime_spec(*make.default_jobs(), ml_policy={"torch": {}}))
    trainjob = make.trainjob(trainer={"numNodes": 0})
    assert [str(e) for e in REGISTRY.validate(None, trainjob, MemoryReader([runtime])).errors] == [
        "spec.trainer.numNodes: Invalid value: 0: must be greater than or equal to 1"
    ]
    with pytest.raises(InvalidTrainJobError, match=r"spec\.trainer\.numNodes"):
        REGISTRY.new_objects(trainjob, MemoryReader([runtime]))


def test_runtime_patches_that_are_not_objects_are_field_errors_in_validation_and_build(make: Make) -> None:
    # Only an object that bypassed the CRD schema has them; the plugins read every patch as an object.
    runtime = make.runtime(make.runtime_spec(*make.default_jobs(), ml_policy={"torch": {}}))
    trainjob = make.trainjob()
    trainjob["spec"]["runtimePatches"] = ["a", [1], 2]
    assert [str(e) for e in REGISTRY.validate(None, trainjob, MemoryReader([runtime])).errors] == [
        'spec.runtimePatches[0]: Invalid value: "a": must be of type object, not string',
        "spec.runtimePatches[1]: Invalid value: [1]: must be of type object, not array",
        "spec.runtimePatches[2]: Invalid value: 2: must be of type object, not integer",
    ]
    with pytest.raises(InvalidTrainJobError, match=r"spec\.runtimePatches\[0\]"):
        REGISTRY.new_objects(trainjob, MemoryReader([runtime]))


def test_an_invalid_trainjob_error_is_bounded_however_many_fields_are_wrong(make: Make) -> None:
    # Its message becomes a condition and an event: 100,000 bad items are a few lines, not 100,000.
    runtime = make.runtime(make.runtime_spec(*make.default_jobs(), ml_policy={"torch": {}}))
    trainjob = make.trainjob()
    trainjob["spec"]["runtimePatches"] = ["a"] * 100_000
    with pytest.raises(InvalidTrainJobError) as raised:
        REGISTRY.new_objects(trainjob, MemoryReader([runtime]))
    assert len(raised.value.errors) == 100_000
    assert str(raised.value).endswith(
        "; and 99995 more Invalid value errors: must be of type object, not string"
    )
    assert len(str(raised.value)) < 1000


@pytest.mark.parametrize(
    ("trainer", "error"),
    [
        ({"numNodes": -1}, "spec.trainer.numNodes: Invalid value: -1: must be greater than or equal to 1"),
        (
            {"numProcPerNode": 0},
            "spec.trainer.numProcPerNode: Invalid value: 0: must be greater than or equal to 1",
        ),
        (
            {"numProcPerNode": -5},
            "spec.trainer.numProcPerNode: Invalid value: -5: must be greater than or equal to 1",
        ),
    ],
    ids=["negative nodes", "zero processes per node", "negative processes per node"],
)
def test_counts_the_schema_accepts_as_upstream_does_are_refused_below_one(
    make: Make, trainer: dict[str, int], error: str
) -> None:
    # Upstream v2.3.0's CRD has no minimum on either field (nor do ours, which match it); validation refuses.
    runtime = make.runtime(make.runtime_spec(*make.default_jobs(), ml_policy={"torch": {}}))
    trainjob = make.trainjob(trainer=trainer)
    assert [str(e) for e in REGISTRY.validate(None, trainjob, MemoryReader([runtime])).errors] == [error]
    with pytest.raises(InvalidTrainJobError, match=error.split(":", maxsplit=1)[0].replace(".", r"\.")):
        REGISTRY.new_objects(trainjob, MemoryReader([runtime]))


def test_a_bad_runtime_patch_is_a_validation_error_and_a_build_error(make: Make) -> None:
    runtime = make.runtime(make.runtime_spec(*make.default_jobs()))
    patch = {
        "manager": "acme.io/m",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}},
                        }
                    ]
                }
            }
        },
    }
    trainjob = make.trainjob(runtime_patches=[patch])
    errors = REGISTRY.validate(None, trainjob, MemoryReader([runtime])).errors
    assert [(e.path, e.value) for e in errors] == [("spec.runtimePatches[0]", "acme.io/m")]
    with pytest.raises(RuntimePatchError):
        REGISTRY.new_objects(trainjob, MemoryReader([runtime]))


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        (
            "TrainingRuntime",
            "spec.runtimeRef: Invalid value: "
            '{"name":"gone","kind":"TrainingRuntime","apiGroup":"trainer.kubeflow.org"}: '
            'trainingruntimes.trainer.kubeflow.org "gone" not found: '
            "specified trainingRuntime must be created before the TrainJob is created",
        ),
        (
            "ClusterTrainingRuntime",
            "spec.RuntimeRef: Invalid value: "
            '{"name":"gone","kind":"ClusterTrainingRuntime","apiGroup":"trainer.kubeflow.org"}: '
            'clustertrainingruntimes.trainer.kubeflow.org "gone" not found: '
            "specified clusterTrainingRuntime must be created before the TrainJob is created",
        ),
    ],
)
def test_creating_a_trainjob_needs_its_runtime(make: Make, kind: str, error: str) -> None:
    result = REGISTRY.validate(None, make.trainjob(runtime="gone", kind=kind), MemoryReader())
    assert [str(e) for e in result.errors] == [error]


def test_updates_after_the_runtime_was_deleted_are_validated_against_the_snapshot(make: Make) -> None:
    # Upstream: any update (a label, a suspend toggle) was rejected once the runtime was gone.
    runtime = make.runtime(make.runtime_spec(*make.default_jobs(), ml_policy={"torch": {}}))
    old = make.trainjob(trainer={"numNodes": 2}, suspend=False)
    snapshot = build_snapshot(old, runtime, "TrainingRuntime")
    resumed = make.trainjob(trainer={"numNodes": 2}, suspend=True)
    assert REGISTRY.validate(old, resumed, MemoryReader([snapshot])).errors == ()
    # The snapshot's runtime still drives the plugins' checks.
    bad = make.trainjob(trainer={"numNodes": 2, "env": [make.env("PET_NNODES", "9")]}, suspend=True)
    errors = REGISTRY.validate(old, bad, MemoryReader([snapshot])).errors
    assert [e.path for e in errors] == ["spec.trainer.env"]
    # Without a usable snapshot, upstream's error stands.
    assert [e.path for e in REGISTRY.validate(old, resumed, MemoryReader()).errors] == ["spec.runtimeRef"]


def test_a_deprecated_cluster_training_runtime_warns(make: Make) -> None:
    runtime = _torch_distributed(make)
    runtime["metadata"]["labels"]["trainer.kubeflow.org/support"] = "deprecated"
    result = REGISTRY.validate(
        None, make.trainjob(runtime="torch-distributed", kind=None), MemoryReader([runtime])
    )
    assert result.errors == ()
    assert result.warnings == (
        'Referenced ClusterTrainingRuntime "torch-distributed" is deprecated and will be removed in a future '
        "release of Kubeflow Trainer. See runtime deprecation policy: "
        "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy",
    )


# Status ---------------------------------------------------------------------------------------------------


def _cond(type_: str, status: str, reason: str, message: str, time: str) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": time}


_JOBSET_STATUS = {"replicatedJobsStatus": [{"name": "node", "ready": 2, "active": 2}]}
_JOBS = [{"name": "node", "ready": 2, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0}]


def test_a_suspended_trainjob_gets_suspended_then_resumed(make: Make) -> None:
    now = format_time(make.now)
    reader = MemoryReader([make.jobset(status=_JOBSET_STATUS)])
    suspended = REGISTRY.next_status(make.trainjob(suspend=True), reader, make.now)
    assert suspended.status == {
        "conditions": [_cond("Suspended", "True", "Suspended", "TrainJob is suspended", now)],
        "jobsStatus": _JOBS,
    }
    later = make.now + timedelta(minutes=5)
    resumed = REGISTRY.next_status(make.trainjob(suspend=False, status=suspended.status), reader, later)
    assert resumed.status["conditions"] == [
        _cond("Suspended", "False", "Resumed", "TrainJob is resumed", format_time(later))
    ]
    # A TrainJob never suspended has no Suspended condition at all.
    assert "conditions" not in REGISTRY.next_status(make.trainjob(), reader, make.now).status


def test_status_follows_the_jobset_and_keeps_a_deadline_failure(make: Make) -> None:
    failed = _cond(
        "Failed",
        "True",
        "FailedJobs",
        "jobset failed due to one or more job failures",
        "2026-01-01T00:00:00Z",
    )
    deadline = _cond(
        "Failed", "True", "DeadlineExceeded", "TrainJob exceeded its active deadline", "2025-12-31T00:00:00Z"
    )
    reader = MemoryReader([make.jobset(status={**_JOBSET_STATUS, "conditions": [failed]})])
    update = REGISTRY.next_status(make.trainjob(status={"conditions": [deadline]}), reader, make.now)
    assert update.status["conditions"] == [deadline]
    assert update.status["jobsStatus"] == _JOBS


def test_the_active_deadline_requeues_then_fails_the_trainjob(make: Make) -> None:
    reader = MemoryReader([make.jobset(status=_JOBSET_STATUS)])
    trainjob = make.trainjob(
        activeDeadlineSeconds=600, created=format_time(make.now - timedelta(seconds=100))
    )
    pending = REGISTRY.next_status(trainjob, reader, make.now)
    assert (pending.requeue_after, pending.delete_jobset) == (500.0, False)
    late = make.now + timedelta(seconds=501)
    over = REGISTRY.next_status(trainjob, reader, late)
    assert over.delete_jobset is True and over.requeue_after is None
    assert over.status["conditions"] == [
        _cond(
            "Failed", "True", "DeadlineExceeded", "TrainJob exceeded its active deadline", format_time(late)
        )
    ]
    # The clock restarts at the last resume; suspended TrainJobs are not timed.
    resumed_at = format_time(late - timedelta(seconds=10))
    resumed = make.trainjob(
        activeDeadlineSeconds=600,
        status={"conditions": [_cond("Suspended", "False", "Resumed", "TrainJob is resumed", resumed_at)]},
    )
    assert REGISTRY.next_status(resumed, reader, late).requeue_after == 590.0
    assert (
        REGISTRY.next_status(make.trainjob(activeDeadlineSeconds=1, suspend=True), reader, late).requeue_after
        is None
    )


def test_a_status_plugin_failure_is_reported_with_the_rest_of_the_status(make: Make) -> None:
    update = REGISTRY.next_status(make.trainjob(suspend=True), MemoryReader(), make.now)
    assert update.error is not None and 'jobsets.jobset.x-k8s.io "test-job" not found' in str(update.error)
    assert update.status["conditions"][0]["type"] == "Suspended"


def test_next_status_never_mutates_the_trainjob(make: Make) -> None:
    trainjob = make.trainjob(suspend=True, status={"conditions": []})
    REGISTRY.next_status(trainjob, MemoryReader([make.jobset(status=_JOBSET_STATUS)]), make.now)
    assert trainjob["status"] == {"conditions": []}


def test_the_registry_declares_the_plugins_watches_once() -> None:
    # Both runtime kinds share one framework; upstream registers the watches with the TrainingRuntime only.
    watches = REGISTRY.watches()
    assert watches == REGISTRY.framework.watches()
    assert watches[0].kind == "JobSet"  # the JobSet plugin is first in registry order
    assert sum(w.kind == "JobSet" for w in watches) == 1
