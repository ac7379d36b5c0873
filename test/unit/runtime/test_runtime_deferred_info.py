"""A build computes Info only when a builder reads it (`runtime.info.DeferredInfo`): a running TrainJob's
reconcile skips `build_info` and the Enforce phases, and nothing else about a build changes."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

import pytest

from runtime.core import InvalidTrainJobError, RuntimeRegistry, UnbuildableRuntimeError
from runtime.core.snapshot import build_snapshot
from runtime.framework import (
    ComponentBuilder,
    EnforceMLPolicy,
    Framework,
    MemoryReader,
    PluginEntry,
    PluginError,
    Reader,
)
from runtime.info import DeferredInfo, Info, build_info
from runtime.plugins import builtin_registry

if TYPE_CHECKING:
    from runtime.api.v1alpha1 import TrainJob
    from runtime.testing import Make

REGISTRY = RuntimeRegistry(Framework(builtin_registry()))


class _FailingEnforce(EnforceMLPolicy):
    """A third-party Enforce phase that refuses every TrainJob."""

    name = "FailingEnforce"

    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None:
        raise ValueError("refused by the third-party phase")


class _SwallowingBuilder(ComponentBuilder):
    """A third-party builder that reads Info and carries on when the read fails."""

    name = "Swallowing"

    def build(self, info: Info, trainjob: TrainJob, reader: Reader) -> list[dict[str, Any]]:
        try:
            _ = info.template
        except Exception:  # what the test is about: a builder that hides the failure
            return []
        return []


def _registry(*plugins: type[Any]) -> RuntimeRegistry:
    entries = [PluginEntry(plugin.name, lambda _context, plugin=plugin: plugin()) for plugin in plugins]
    return RuntimeRegistry(Framework(builtin_registry().extended(entries)))


def _torch(make: Make, **policy: Any) -> dict[str, Any]:
    spec = make.runtime_spec(*make.default_jobs(), ml_policy={"torch": {}}, **policy)
    return make.runtime(spec)


def test_a_running_trainjob_is_never_built_from_so_its_values_are_not_checked(make: Make) -> None:
    # numNodes 0 bypassed admission (the webhook refuses it). Once its JobSet runs nothing is built from it,
    # so nothing refuses it; suspended, the JobSet is built from it, and the build names the field.
    runtime = _torch(make)
    running = make.trainjob(trainer={"numNodes": 0}, suspend=False)
    snapshot = build_snapshot(running, runtime, "TrainingRuntime")
    assert REGISTRY.new_objects(running, MemoryReader([snapshot, make.jobset(suspend=False)])) == []
    suspended = make.trainjob(trainer={"numNodes": 0}, suspend=True)
    with pytest.raises(InvalidTrainJobError, match=r"spec\.trainer\.numNodes"):
        REGISTRY.new_objects(suspended, MemoryReader([snapshot, make.jobset(suspend=True)]))


def test_the_first_build_checks_every_value_before_the_snapshot_freezes_the_runtime(make: Make) -> None:
    # No snapshot yet, so the live runtime is about to be frozen into one: it is checked whatever the
    # builders read (here none does: the JobSet exists and runs), and nothing is returned to apply.
    node = make.container("node", env=[{"name": "A=B", "value": "x"}])
    spec = make.runtime_spec(make.job("node", ancestor="trainer", containers=[node]), ml_policy={"torch": {}})
    runtime = make.runtime(spec)
    with pytest.raises(UnbuildableRuntimeError, match="A=B"):
        REGISTRY.new_objects(make.trainjob(suspend=False), MemoryReader([runtime, make.jobset()]))
    # An invalid TrainJob is failed for its own fields before its runtime is looked for.
    with pytest.raises(InvalidTrainJobError, match=r"spec\.trainer\.numNodes"):
        REGISTRY.new_objects(make.trainjob(trainer={"numNodes": 0}), MemoryReader([]))


def test_the_enforce_phases_run_only_when_something_is_built(make: Make) -> None:
    registry = _registry(_FailingEnforce)
    runtime = _torch(make, pod_group_policy={"coscheduling": {"scheduleTimeoutSeconds": 60}})
    trainjob = make.trainjob(suspend=False)
    snapshot = build_snapshot(trainjob, runtime, "TrainingRuntime")
    pod_group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": make.name, "namespace": make.namespace},
    }
    # JobSet and PodGroup exist and run: no builder reads Info, so the failing phase never runs.
    assert registry.new_objects(trainjob, MemoryReader([snapshot, make.jobset(), pod_group])) == []
    # Without the PodGroup the CoScheduling plugin builds one: Info is computed, and the build fails naming
    # the plugin whose Enforce phase failed, not the builder whose read met it.
    with pytest.raises(PluginError) as raised:
        registry.new_objects(trainjob, MemoryReader([snapshot, make.jobset()]))
    assert (raised.value.plugin, raised.value.phase.title) == ("FailingEnforce", "EnforceMLPolicy")
    assert "refused by the third-party phase" in str(raised.value)


def test_info_failure_fails_the_build_even_when_the_builder_that_met_it_carried_on(make: Make) -> None:
    registry = _registry(_SwallowingBuilder)
    runtime = _torch(make)
    trainjob = make.trainjob(trainer={"numNodes": 0}, suspend=False)
    snapshot = build_snapshot(trainjob, runtime, "TrainingRuntime")
    with pytest.raises(InvalidTrainJobError, match=r"spec\.trainer\.numNodes"):
        registry.new_objects(trainjob, MemoryReader([snapshot, make.jobset()]))


def test_a_deferred_info_reads_as_the_eager_one(make: Make) -> None:
    runtime = _torch(make, pod_group_policy={"coscheduling": {}})
    trainjob = make.trainjob(trainer={"numNodes": 3, "image": "x"})
    framework = REGISTRY.framework
    spec = runtime["spec"]

    def compute() -> Info:
        info = build_info(trainjob, spec)
        framework.enforce(info, trainjob)
        return info

    eager = compute()
    deferred = DeferredInfo(compute, runtime_spec=spec)
    assert deferred.runtime_spec is spec
    assert deferred.runtime_ml.torch == {}
    assert not deferred.computed  # the runtime's spec and policy are read without computing
    assert deferred.template == eager.template
    assert deferred.computed
    for item in fields(Info):
        if item.name == "pod_sets":
            counts = [(p.name, p.count) for p in deferred.pod_sets]
            assert counts == [(p.name, p.count) for p in eager.pod_sets]
        else:
            assert getattr(deferred, item.name) == getattr(eager, item.name), item.name
    node = deferred.find_pod_set("node")
    assert node is not None
    assert node.count == 3  # the TrainJob's numNodes, set by the Torch plugin's Enforce phase


def test_a_deferred_info_computes_once_and_keeps_its_failure() -> None:
    calls: list[int] = []

    def failing() -> Info:
        calls.append(1)
        raise ValueError("no")

    deferred = DeferredInfo(failing, runtime_spec={})
    for _ in range(3):
        with pytest.raises(ValueError, match="no") as raised:
            _ = deferred.labels
        assert raised.value is deferred.failure
    assert len(calls) == 1
    assert repr(deferred) == "<DeferredInfo failed>"
    assert not hasattr(deferred, "not_a_field")  # a missing name stays an AttributeError, after the failure

    def working() -> Info:
        calls.append(1)
        return build_info({"spec": {}}, {})  # type: ignore[typeddict-item]

    calls.clear()
    deferred = DeferredInfo(working, runtime_spec={})
    assert repr(deferred) == "<DeferredInfo deferred>"
    assert deferred.labels == {}
    assert deferred.pod_sets == []
    assert len(calls) == 1
    assert repr(deferred) == "<DeferredInfo computed>"


def test_an_attribute_error_while_computing_is_not_read_as_a_missing_field() -> None:
    def broken() -> Info:
        raise AttributeError("'NoneType' object has no attribute 'get'")

    deferred = DeferredInfo(broken, runtime_spec={})
    with pytest.raises(RuntimeError, match="computing the TrainJob's Info"):
        _ = deferred.ml  # a property: it must not turn into "no attribute 'ml'"
    assert isinstance(deferred.failure, RuntimeError)
