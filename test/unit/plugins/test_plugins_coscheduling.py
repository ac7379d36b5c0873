"""The CoScheduling plugin: the pod-group label, the scheduler-plugins PodGroup, its build gate, watches."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.framework import ReadError, Watch
from runtime.plugins.coscheduling import CoScheduling
from runtime.plugins.podgroup import suspended_trainjobs_in_namespace, suspended_trainjobs_using_runtime_class

COSCHEDULING_30 = {"coscheduling": {"scheduleTimeoutSeconds": 30}}


def pod_group(
    make: Any, spec: dict[str, Any], name: str = "trainJob", uid: str = "trainJob"
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "ownerReferences": [make.owner(name, uid)]},
        "spec": spec,
    }


def requests(cpu: str, memory: str) -> dict[str, Any]:
    return {"resources": {"requests": {"cpu": cpu, "memory": memory}}}


def test_no_action_without_a_pod_group_policy(make: Any) -> None:
    # upstream: "no action when podGroupPolicy is nil"
    trainjob = make.trainjob(trainer={"numNodes": 2})
    info = make.info(trainjob, make.runtime_spec(make.job("node")))
    CoScheduling().enforce_pod_group_policy(info, trainjob)
    assert info.scheduler.pod_labels == {}
    assert CoScheduling().build(info, trainjob, make.reader()) == []


def test_no_action_when_the_policy_is_volcano(make: Any) -> None:
    # upstream: "no action when coscheduling is nil"
    trainjob = make.trainjob()
    info = make.info(trainjob, make.runtime_spec(make.job("node"), pod_group_policy={"volcano": {}}))
    CoScheduling().enforce_pod_group_policy(info, trainjob)
    assert info.scheduler.pod_labels == {}
    assert CoScheduling().build(info, trainjob, make.reader()) == []


def test_builds_a_pod_group_for_one_pod_set(make: Any) -> None:
    # upstream: "succeeded to build PodGroup"
    trainjob = make.trainjob(trainer={"numNodes": 2})
    info = make.info(trainjob, make.runtime_spec(make.job("node"), pod_group_policy=COSCHEDULING_30))
    CoScheduling().enforce_pod_group_policy(info, trainjob)
    assert info.scheduler.pod_labels == {"scheduling.x-k8s.io/pod-group": "trainJob"}
    assert CoScheduling().build(info, trainjob, make.reader()) == [
        pod_group(make, {"minMember": 1, "minResources": {}, "scheduleTimeoutSeconds": 30})
    ]


def test_sums_members_and_requests_over_every_pod_set(make: Any) -> None:
    # upstream: "succeeded to build PodGroup with multiple PodSets"
    trainjob = make.trainjob()
    spec = make.runtime_spec(
        make.job("node", parallelism=2, containers=[make.container(**requests("500m", "1Gi"))]),
        make.job("dataset-initializer", containers=[make.container("init", **requests("250m", "512Mi"))]),
        pod_group_policy=COSCHEDULING_30,
    )
    info = make.info(trainjob, spec)
    assert CoScheduling().build(info, trainjob, make.reader()) == [
        pod_group(
            make,
            {
                "minMember": 3,
                "minResources": {"cpu": "1250m", "memory": "2560Mi"},
                "scheduleTimeoutSeconds": 30,
            },
        )
    ]


def test_multiplies_one_pods_requests_by_the_count(make: Any) -> None:
    # upstream: "succeeded to build PodGroup with MinResources"
    trainjob = make.trainjob()
    spec = make.runtime_spec(
        make.job("node", parallelism=2, containers=[make.container(**requests("500m", "1Gi"))]),
        pod_group_policy=COSCHEDULING_30,
    )
    info = make.info(trainjob, spec)
    assert CoScheduling().build(info, trainjob, make.reader()) == [
        pod_group(
            make,
            {"minMember": 2, "minResources": {"cpu": "1", "memory": "2Gi"}, "scheduleTimeoutSeconds": 30},
        )
    ]


def test_the_integration_fixture_gang_of_100_trainers_and_2_initializers(make: Any) -> None:
    # Upstream's integration fixture: numNodes 100 plus two initializers, 1 CPU / 4Gi each.
    trainjob = make.trainjob(suspend=True)
    each = requests("1", "4Gi")
    spec = make.runtime_spec(
        make.job(
            "dataset-initializer", ancestor="dataset-initializer", containers=[make.container("d", **each)]
        ),
        make.job("model-initializer", ancestor="model-initializer", containers=[make.container("m", **each)]),
        make.job("node", ancestor="trainer", containers=[make.container(**each)]),
        ml_policy={"numNodes": 100},
        pod_group_policy={"coscheduling": {"scheduleTimeoutSeconds": 100}},
    )
    info = make.info(trainjob, spec)
    assert CoScheduling().build(info, trainjob, make.reader()) == [
        pod_group(
            make,
            {
                "minMember": 102,
                "minResources": {"cpu": "102", "memory": "408Gi"},
                "scheduleTimeoutSeconds": 100,
            },
        )
    ]


def test_limits_do_not_count_towards_min_resources(make: Any) -> None:
    # As upstream: the scheduler gangs on requests; a GPU given only as a limit is not in minResources.
    trainjob = make.trainjob()
    gpu = make.container(resources={"limits": {"nvidia.com/gpu": 4}, "requests": {"cpu": "2"}})
    info = make.info(
        trainjob, make.runtime_spec(make.job("node", containers=[gpu]), pod_group_policy=COSCHEDULING_30)
    )
    assert CoScheduling().build(info, trainjob, make.reader())[0]["spec"]["minResources"] == {"cpu": "2"}


def test_the_schedule_timeout_defaults_to_60_seconds(make: Any) -> None:
    trainjob = make.trainjob()
    info = make.info(trainjob, make.runtime_spec(make.job("node"), pod_group_policy={"coscheduling": {}}))
    assert CoScheduling().build(info, trainjob, make.reader())[0]["spec"]["scheduleTimeoutSeconds"] == 60


def test_a_failing_pod_group_read_fails_the_build(make: Any) -> None:
    # upstream: "failed to get PodGroup due to API error"
    trainjob = make.trainjob()
    info = make.info(trainjob, make.runtime_spec(make.job("node"), pod_group_policy=COSCHEDULING_30))
    reader = make.reader()
    reader.errors[("scheduling.x-k8s.io/v1alpha1", "PodGroup")] = RuntimeError("failed to get PodGroup")
    with pytest.raises(ReadError, match="failed to get PodGroup"):
        CoScheduling().build(info, trainjob, reader)


def _existing(name: str = "trainJob") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": 1},
    }


@pytest.mark.parametrize("suspend", [False, None], ids=["suspend false", "suspend unset"])
def test_an_existing_pod_group_is_left_alone_while_the_trainjob_runs(make: Any, suspend: bool | None) -> None:
    # upstream: "no action when PodGroup already exists and TrainJob is not suspended"
    trainjob = make.trainjob(suspend=suspend)
    info = make.info(trainjob, make.runtime_spec(make.job("node"), pod_group_policy=COSCHEDULING_30))
    CoScheduling().enforce_pod_group_policy(info, trainjob)
    assert info.scheduler.pod_labels == {"scheduling.x-k8s.io/pod-group": "trainJob"}
    assert CoScheduling().build(info, trainjob, make.reader(_existing())) == []


def test_an_existing_pod_group_is_reapplied_while_the_trainjob_is_suspended(make: Any) -> None:
    trainjob = make.trainjob(suspend=True)
    info = make.info(
        trainjob, make.runtime_spec(make.job("node", parallelism=3), pod_group_policy=COSCHEDULING_30)
    )
    assert CoScheduling().build(info, trainjob, make.reader(_existing())) == [
        pod_group(make, {"minMember": 3, "minResources": {}, "scheduleTimeoutSeconds": 30})
    ]


def test_a_missing_pod_group_is_built_for_a_running_trainjob(make: Any) -> None:
    # upstream: "no action when TrainJob is not suspended" (its PodGroup belongs to another TrainJob)
    trainjob = make.trainjob("existingTrainJob", suspend=False)
    info = make.info(trainjob, make.runtime_spec(make.job("node"), pod_group_policy=COSCHEDULING_30))
    built = CoScheduling().build(info, trainjob, make.reader(_existing("trainJob")))
    assert [obj["metadata"]["name"] for obj in built] == ["existingTrainJob"]


# Watches ---------------------------------------------------------------------------------------------------


def test_the_plugin_watches_its_pod_groups_limit_ranges_and_runtime_classes() -> None:
    assert list(CoScheduling().watches()) == [
        Watch.owned("scheduling.x-k8s.io/v1alpha1", "PodGroup", optional=True),
        Watch(api_version="v1", kind="LimitRange", map_to_trainjobs=suspended_trainjobs_in_namespace),
        Watch(
            api_version="node.k8s.io/v1",
            kind="RuntimeClass",
            map_to_trainjobs=suspended_trainjobs_using_runtime_class,
        ),
    ]


def _runtime(kind: str, name: str, runtime_class: str | None, namespace: str | None = None) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"containers": [{"name": "node"}]}
    if runtime_class is not None:
        pod_spec["runtimeClassName"] = runtime_class
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": kind,
        "metadata": metadata,
        "spec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": "node", "template": {"spec": {"template": {"spec": pod_spec}}}}
                    ]
                }
            }
        },
    }


def _trainjob(
    make: Any, name: str, namespace: str, runtime: str, *, kind: str, suspend: bool
) -> dict[str, Any]:
    trainjob = make.trainjob(name, namespace, runtime=runtime, suspend=suspend)
    trainjob["spec"]["runtimeRef"]["kind"] = kind
    return trainjob


def test_a_limit_range_enqueues_the_suspended_trainjobs_of_its_namespace(make: Any) -> None:
    reader = make.reader(
        make.trainjob("b", "team", suspend=True),
        make.trainjob("a", "team", suspend=True),
        make.trainjob("running", "team", suspend=False),
        make.trainjob("elsewhere", "other", suspend=True),
    )
    limit_range = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "limits", "namespace": "team"},
    }
    assert suspended_trainjobs_in_namespace(limit_range, reader) == [("team", "a"), ("team", "b")]


def test_a_runtime_class_enqueues_suspended_trainjobs_whose_runtime_uses_it(make: Any) -> None:
    reader = make.reader(
        _runtime("TrainingRuntime", "gvisor-rt", "gvisor", "team"),
        _runtime("TrainingRuntime", "plain-rt", None, "team"),
        _runtime("ClusterTrainingRuntime", "gvisor-crt", "gvisor"),
        _trainjob(make, "uses-namespaced", "team", "gvisor-rt", kind="TrainingRuntime", suspend=True),
        _trainjob(make, "uses-cluster", "other", "gvisor-crt", kind="ClusterTrainingRuntime", suspend=True),
        _trainjob(make, "running", "team", "gvisor-rt", kind="TrainingRuntime", suspend=False),
        _trainjob(make, "plain", "team", "plain-rt", kind="TrainingRuntime", suspend=True),
        # Same runtime name in another namespace: a different TrainingRuntime (upstream matched it).
        _trainjob(make, "other-namespace", "other", "gvisor-rt", kind="TrainingRuntime", suspend=True),
    )
    runtime_class = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "gvisor"}}
    assert suspended_trainjobs_using_runtime_class(runtime_class, reader) == [
        ("other", "uses-cluster"),
        ("team", "uses-namespaced"),
    ]
    unused = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"}}
    assert suspended_trainjobs_using_runtime_class(unused, reader) == []
