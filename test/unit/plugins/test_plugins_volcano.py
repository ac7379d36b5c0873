"""The Volcano plugin: the group-name annotation, Volcano's PodGroup, and its validation."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.framework import FieldError, ReadError, Validation, Watch
from runtime.plugins.podgroup import suspended_trainjobs_in_namespace, suspended_trainjobs_using_runtime_class
from runtime.plugins.volcano import Volcano

QUEUE = "scheduling.volcano.sh/queue-name"


def _spec(
    make: Any, *, policy: dict[str, Any] | None = None, annotations: dict[str, str] | None = None
) -> Any:
    """Upstream's base Info: a launcher (300m/1Gi, priority class high-priority), 4 workers (500m/0.5Gi)."""
    return make.runtime_spec(
        make.job(
            "launcher",
            containers=[make.container(resources={"requests": {"cpu": "300m", "memory": "1Gi"}})],
            priorityClassName="high-priority",
        ),
        make.job(
            "worker",
            parallelism=4,
            containers=[make.container(resources={"requests": {"cpu": "500m", "memory": "0.5Gi"}})],
        ),
        pod_group_policy={"volcano": policy or {}},
        annotations=annotations,
    )


def pod_group(make: Any, spec: dict[str, Any], name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "test-ns", "ownerReferences": [make.owner(name, uid)]},
        "spec": spec,
    }


def _existing(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "test-ns"},
    }


def test_no_action_without_a_volcano_policy(make: Any) -> None:
    trainjob = make.trainjob("test-trainjob", "test-ns")
    info = make.info(trainjob, make.runtime_spec(make.job("node"), pod_group_policy={"coscheduling": {}}))
    Volcano().enforce_pod_group_policy(info, trainjob)
    assert info.scheduler.pod_annotations == {}
    assert Volcano().build(info, trainjob, make.reader()) == []


def test_injects_the_group_name_annotation_and_builds_an_empty_pod_group(make: Any) -> None:
    # upstream: "inject group-name annotation"
    trainjob = make.trainjob("test-trainjob", "test-ns", uid="")
    info = make.info(trainjob, make.runtime_spec(pod_group_policy={"volcano": {}}))
    Volcano().enforce_pod_group_policy(info, trainjob)
    assert info.scheduler.pod_annotations == {"scheduling.k8s.io/group-name": "test-trainjob"}
    assert Volcano().build(info, trainjob, make.reader()) == [
        pod_group(make, {"minMember": 0, "minResources": {}}, "test-trainjob", "")
    ]


def test_an_existing_pod_group_is_left_alone_while_the_trainjob_runs(make: Any) -> None:
    # upstream: "PodGroup exists and trainjob not suspended"
    trainjob = make.trainjob("job-exist-running", "test-ns", uid="1", suspend=False)
    info = make.info(trainjob, _spec(make))
    Volcano().enforce_pod_group_policy(info, trainjob)
    assert info.scheduler.pod_annotations == {"scheduling.k8s.io/group-name": "job-exist-running"}
    assert Volcano().build(info, trainjob, make.reader(_existing("job-exist-running"))) == []


def test_a_suspended_trainjob_reapplies_the_full_pod_group(make: Any) -> None:
    # upstream: "PodGroup exists but trainjob suspended"
    trainjob = make.trainjob("job-update", "test-ns", uid="2", suspend=True)
    policy = {"networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    info = make.info(trainjob, _spec(make, policy=policy, annotations={QUEUE: "q1"}))
    assert Volcano().build(info, trainjob, make.reader(_existing("job-update"))) == [
        pod_group(
            make,
            {
                "minMember": 5,
                "minResources": {"cpu": "2300m", "memory": "3Gi"},
                "queue": "q1",
                "priorityClassName": "high-priority",
                "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
            },
            "job-update",
            "2",
        )
    ]


def test_a_failing_pod_group_read_fails_the_build(make: Any) -> None:
    # upstream: "Error when getting existing PodGroup"
    trainjob = make.trainjob("job-error", "test-ns", uid="3", suspend=False)
    info = make.info(trainjob, _spec(make))
    reader = make.reader()
    reader.errors[("scheduling.volcano.sh/v1beta1", "PodGroup")] = RuntimeError(
        "error when getting existing PodGroup"
    )
    with pytest.raises(ReadError, match="error when getting existing PodGroup"):
        Volcano().build(info, trainjob, reader)


def test_network_topology_defaults_apply_to_an_undefaulted_policy(make: Any) -> None:
    trainjob = make.trainjob("tj", "test-ns")
    info = make.info(trainjob, _spec(make, policy={"networkTopology": {}}))
    spec = Volcano().build(info, trainjob, make.reader())[0]["spec"]
    assert spec["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}


def test_the_last_pod_template_with_a_priority_class_names_the_pod_groups(make: Any) -> None:
    trainjob = make.trainjob("tj", "test-ns")
    spec = make.runtime_spec(
        make.job("a", priorityClassName="first"),
        make.job("b"),
        make.job("c", priorityClassName="last"),
        pod_group_policy={"volcano": {}},
    )
    built = Volcano().build(make.info(trainjob, spec), trainjob, make.reader())
    assert built[0]["spec"]["priorityClassName"] == "last"


def test_the_plugin_declares_the_same_watches_as_coscheduling_for_its_pod_group_kind() -> None:
    assert list(Volcano().watches()) == [
        Watch.owned("scheduling.volcano.sh/v1beta1", "PodGroup", optional=True),
        Watch(api_version="v1", kind="LimitRange", map_to_trainjobs=suspended_trainjobs_in_namespace),
        Watch(
            api_version="node.k8s.io/v1",
            kind="RuntimeClass",
            map_to_trainjobs=suspended_trainjobs_using_runtime_class,
        ),
    ]


# CustomValidation (upstream TestValidate) -----------------------------------------------------------------


def _priority_class(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": 100,
    }


def _validate(make: Any, spec: Any, *objects: dict[str, Any]) -> Validation:
    trainjob = make.trainjob("test")
    return Volcano().validate(make.info(trainjob, spec), None, trainjob, make.reader(*objects))


def _jobs_with(make: Any, *priority_classes: str) -> Any:
    return make.runtime_spec(
        *(make.job(f"job-{i}", priorityClassName=name) for i, name in enumerate(priority_classes)),
        pod_group_policy={"volcano": {}},
    )


def _missing(name: str, index: int = 0, reason: str | None = None) -> FieldError:
    # Was spec.templateSpec.priorityClassName (upstream's path), a field of neither object.
    reason = reason or f'priorityclasses.scheduling.k8s.io "{name}" not found'
    field = (
        f"spec.template.spec.replicatedJobs[{index}].template.spec.template.spec.priorityClassName: "
        f'Invalid value: "{name}": PriorityClass "{name}" doesn\'t exist: {reason}'
    )
    runtime_ref = {"name": "test-runtime"}
    return FieldError.invalid("spec.runtimeRef", runtime_ref, field)


def test_validation_is_silent_without_a_volcano_policy(make: Any) -> None:
    # upstream: "no action when Volcano policy not enabled"
    assert _validate(make, make.runtime_spec(make.job("node", priorityClassName="missing"))) == Validation()


def test_an_empty_queue_annotation_is_rejected(make: Any) -> None:
    # upstream: "queue annotation is empty"
    spec = make.runtime_spec(pod_group_policy={"volcano": {}}, annotations={QUEUE: ""})
    assert _validate(make, spec) == Validation.of(
        [FieldError.invalid(f"spec.annotations[{QUEUE}]", "", "Volcano queue name must not be empty")]
    )


def test_a_missing_priority_class_is_rejected(make: Any) -> None:
    # upstream: "priorityClassName does not exist"
    assert _validate(make, _jobs_with(make, "non-existent")) == Validation.of([_missing("non-existent")])


def test_an_existing_priority_class_is_accepted(make: Any) -> None:
    # upstream: "priorityClassName exists"
    spec = _jobs_with(make, "existing-priority")
    assert _validate(make, spec, _priority_class("existing-priority")) == Validation()


def test_a_system_priority_class_ends_the_check_as_upstream(make: Any) -> None:
    # Upstream returns at the first system-* class: the classes of the jobs after it are not looked up.
    spec = _jobs_with(make, "system-cluster-critical", "missing", "system-node-critical", "missing")
    assert _validate(make, spec) == Validation()


def test_the_jobs_before_a_system_priority_class_are_checked(make: Any) -> None:
    spec = _jobs_with(make, "missing", "system-node-critical", "other")
    assert _validate(make, spec) == Validation.of([_missing("missing")])


def test_each_job_with_a_missing_priority_class_is_reported(make: Any) -> None:
    # One error per replicated job, as upstream appends one per job (no deduplication).
    spec = _jobs_with(make, "missing", "missing")
    assert _validate(make, spec) == Validation.of([_missing("missing", 0), _missing("missing", 1)])


def test_a_priority_class_that_cannot_be_read_is_reported(make: Any) -> None:
    trainjob = make.trainjob("test")
    reader = make.reader()
    reader.errors[("scheduling.k8s.io/v1", "PriorityClass")] = RuntimeError("forbidden")
    result = Volcano().validate(make.info(trainjob, _jobs_with(make, "p")), None, trainjob, reader)
    assert result == Validation.of(
        [_missing("p", reason="reading PriorityClass.scheduling.k8s.io/v1: forbidden")]
    )
