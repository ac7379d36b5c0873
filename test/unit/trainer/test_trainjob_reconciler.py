"""The TrainJob reconciler with in-memory fakes, for the cases that need no API server: what it applies and
writes, its events and its verdicts. The integration tier runs the same reconciler against a real one.

The fakes model objects by key only: no defaulting, no resource versions, no field ownership (an apply
replaces the stored object), no watches. `FakeCluster` is the cache, the client and the reader at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from controller.clock import FakeClock
from controller.errors import NotFound, ServerError
from controller.gvk import GVK
from controller.reconcile import Request
from controller.trainer.setup import new_registry
from controller.trainer.trainjob_controller import TrainJobReconciler, event_message
from runtime.framework import MemoryReader

TRAINJOB = GVK("trainer.kubeflow.org", "v1alpha1", "TrainJob")


class FakeCluster:
    """Objects in a `MemoryReader`; records the writes made through it."""

    def __init__(self, *objects: Mapping[str, Any]) -> None:
        self.reader = MemoryReader(dict(o) for o in objects)
        self.writes: list[tuple[str, str, str]] = []
        self.fail_apply: Exception | None = None

    # the cache's and the client's reads
    def get(self, gvk: GVK, name: str, namespace: str | None = None) -> dict[str, Any]:
        found = self.reader.get(gvk.api_version, gvk.kind, name, namespace)
        if found is None:
            raise NotFound(f"{name} not found", status=404)
        return dict(found)

    # the client's writes
    def apply(self, obj: Mapping[str, Any], field_manager: str, *, force: bool = True) -> dict[str, Any]:
        assert field_manager == "trainer" and force
        self.writes.append(("apply", obj["kind"], obj["metadata"]["name"]))
        if self.fail_apply is not None:
            raise self.fail_apply
        stored = {**obj, "metadata": {**obj["metadata"], "uid": "uid-" + obj["metadata"]["name"]}}
        self.reader.add(stored)
        return stored

    def patch_status(self, gvk: GVK, name: str, patch: Any, namespace: str | None = None, **_: Any) -> Any:
        self.writes.append(("status", gvk.kind, name))
        current = self.get(gvk, name, namespace)
        status = {**(current.get("status") or {}), **patch["status"]}
        self.reader.add({**current, "status": {k: v for k, v in status.items() if v is not None}})
        return current

    def delete(self, gvk: GVK, name: str, namespace: str | None = None, **_: Any) -> None:
        self.writes.append(("delete", gvk.kind, name))
        self.reader.delete(gvk.api_version, gvk.kind, name, namespace)


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        self.events.append((type, reason, message))


NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def runtime_object(name: str = "torch") -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "replicas": 1,
                            "template": {
                                "metadata": {
                                    "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                                },
                                "spec": {
                                    "template": {"spec": {"containers": [{"name": "node", "image": "x"}]}}
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


def trainjob_object(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": "tj",
            "namespace": "ns",
            "uid": "tj-uid",
            "creationTimestamp": "2026-12-01T11:00:00Z",
        },
        "spec": {
            "runtimeRef": {
                "name": "torch",
                "kind": "ClusterTrainingRuntime",
                "apiGroup": "trainer.kubeflow.org",
            },
            **spec,
        },
    }


def reconciler(cluster: FakeCluster, recorder: FakeRecorder) -> TrainJobReconciler:
    return TrainJobReconciler(
        cache=cluster,  # type: ignore[arg-type]
        client=cluster,  # type: ignore[arg-type]
        reader=cluster.reader,
        registry=new_registry(),
        recorder=recorder,  # type: ignore[arg-type]
        clock=FakeClock(wall=NOW),
    )


REQUEST = Request(namespace="ns", name="tj")


def test_first_reconcile_applies_snapshot_then_jobset_and_a_second_writes_nothing() -> None:
    cluster, recorder = FakeCluster(runtime_object(), trainjob_object()), FakeRecorder()
    r = reconciler(cluster, recorder)
    r.reconcile(REQUEST)
    assert cluster.writes == [("apply", "ConfigMap", "tj-runtime-snapshot"), ("apply", "JobSet", "tj")]
    cluster.writes.clear()
    r.reconcile(REQUEST)
    assert cluster.writes == []
    assert recorder.events == []


def test_a_suspended_trainjob_is_not_reapplied_when_nothing_changed() -> None:
    cluster, recorder = FakeCluster(runtime_object(), trainjob_object(suspend=True)), FakeRecorder()
    r = reconciler(cluster, recorder)
    r.reconcile(REQUEST)
    assert ("status", "TrainJob", "tj") in cluster.writes  # Suspended=True
    cluster.writes.clear()
    r.reconcile(REQUEST)
    assert cluster.writes == []


def test_a_missing_trainjob_is_done_without_a_request() -> None:
    cluster, recorder = FakeCluster(), FakeRecorder()
    assert reconciler(cluster, recorder).reconcile(REQUEST).is_zero()
    assert cluster.writes == []


def test_managed_by_another_controller_is_left_alone() -> None:
    tj = trainjob_object(managedBy="kueue.x-k8s.io/multikueue")
    cluster, recorder = FakeCluster(runtime_object(), tj), FakeRecorder()
    reconciler(cluster, recorder).reconcile(REQUEST)
    assert cluster.writes == []


def test_a_missing_runtime_is_a_warning_event_and_a_retry() -> None:
    cluster, recorder = FakeCluster(trainjob_object()), FakeRecorder()
    with pytest.raises(Exception, match="not found ClusterTrainingRuntime"):
        reconciler(cluster, recorder).reconcile(REQUEST)
    assert recorder.events[0][:2] == ("Warning", "TrainJobResourcesCreationFailed")
    assert recorder.events[0][2].startswith("TrainJob resources reconciliation failed: not found")
    assert cluster.writes == []


def test_an_apply_failure_is_a_warning_event_and_a_retry() -> None:
    cluster, recorder = FakeCluster(runtime_object(), trainjob_object()), FakeRecorder()
    cluster.fail_apply = ServerError("etcd is down", status=500)
    with pytest.raises(Exception, match="etcd is down") as caught:
        reconciler(cluster, recorder).reconcile(REQUEST)
    assert isinstance(caught.value, ServerError) or isinstance(caught.value.__cause__, ServerError)
    assert [e[1] for e in recorder.events] == ["TrainJobResourcesCreationFailed"]


def test_an_unsupported_runtime_kind_is_a_persisted_failure_without_retry() -> None:
    tj = trainjob_object()
    tj["spec"]["runtimeRef"]["kind"] = "Other"
    cluster, recorder = FakeCluster(tj), FakeRecorder()
    result = reconciler(cluster, recorder).reconcile(REQUEST)
    assert result.is_zero()
    status = cluster.get(TRAINJOB, "tj", "ns")["status"]
    assert [(c["type"], c["reason"]) for c in status["conditions"]] == [
        ("Failed", "TrainingRuntimeNotSupported")
    ]


def test_a_trainjob_that_bypassed_the_webhook_is_failed_for_good() -> None:
    cluster, recorder = (
        FakeCluster(runtime_object(), trainjob_object(trainer={"numNodes": 0})),
        FakeRecorder(),
    )
    result = reconciler(cluster, recorder).reconcile(REQUEST)
    assert result.is_zero()
    status = cluster.get(TRAINJOB, "tj", "ns")["status"]
    failed = [c for c in status["conditions"] if c["type"] == "Failed"]
    assert failed and failed[0]["reason"] == "InvalidTrainJob"
    assert "spec.trainer.numNodes" in failed[0]["message"]
    assert ("apply", "JobSet", "tj") not in cluster.writes


def test_a_finished_trainjob_is_never_rebuilt() -> None:
    tj = trainjob_object()
    tj["status"] = {
        "conditions": [
            {
                "type": "Complete",
                "status": "True",
                "reason": "AllJobsCompleted",
                "message": "jobset completed successfully",
                "lastTransitionTime": "2026-12-01T11:30:00Z",
            }
        ]
    }
    cluster, recorder = FakeCluster(runtime_object(), tj), FakeRecorder()  # its JobSet is gone (TTL)
    reconciler(cluster, recorder).reconcile(REQUEST)
    assert [w for w in cluster.writes if w[0] == "apply"] == []


def test_an_expired_deadline_fails_the_trainjob_and_deletes_the_jobset() -> None:
    cluster, recorder = (
        FakeCluster(runtime_object(), trainjob_object(activeDeadlineSeconds=60)),
        FakeRecorder(),
    )
    result = reconciler(cluster, recorder).reconcile(REQUEST)  # created an hour ago
    assert result.is_zero()
    assert ("delete", "JobSet", "tj") in cluster.writes
    reasons = [c["reason"] for c in cluster.get(TRAINJOB, "tj", "ns")["status"]["conditions"]]
    assert "DeadlineExceeded" in reasons


def test_a_pending_deadline_requeues_for_the_time_left() -> None:
    cluster, recorder = (
        FakeCluster(runtime_object(), trainjob_object(activeDeadlineSeconds=7200)),
        FakeRecorder(),
    )
    result = reconciler(cluster, recorder).reconcile(REQUEST)
    assert result.requeue_after == pytest.approx(3600)


@pytest.mark.parametrize(
    ("length", "suffix"), [(950, False), (951, True), (5000, True)], ids=["950", "951", "5000"]
)
def test_event_message_cuts_the_error_at_950_characters_as_upstream(length: int, suffix: bool) -> None:
    message = event_message("x" * length)
    assert message.startswith("TrainJob resources reconciliation failed: ")
    assert message.endswith(" ...") is suffix
    assert message.count("x") == min(length, 950)


def _failures(reason: str) -> float:
    from controller.metrics import REGISTRY

    value = REGISTRY.get_sample_value("kubeflow_trainer_reconcile_failures_total", {"reason": reason})
    return value or 0.0


def test_a_failed_reconcile_counts_once_under_its_first_reason() -> None:
    cluster, recorder = FakeCluster(trainjob_object()), FakeRecorder()  # no runtime: and so no JobSet either
    before = {r: _failures(r) for r in ("RuntimeNotFound", "JobSetStatusFailed")}
    with pytest.raises(Exception, match="not found"):
        reconciler(cluster, recorder).reconcile(REQUEST)
    assert _failures("RuntimeNotFound") == before["RuntimeNotFound"] + 1
    assert _failures("JobSetStatusFailed") == before["JobSetStatusFailed"]


def test_an_unsupported_runtime_is_counted_once_when_it_is_recorded() -> None:
    tj = trainjob_object()
    tj["spec"]["runtimeRef"]["kind"] = "Other"
    cluster, recorder = FakeCluster(tj), FakeRecorder()
    r = reconciler(cluster, recorder)
    before = _failures("UnsupportedRuntime")
    r.reconcile(REQUEST)
    r.reconcile(REQUEST)
    assert _failures("UnsupportedRuntime") == before + 1


def test_the_jobset_creation_is_observed_once_per_trainjob() -> None:
    from controller.metrics import REGISTRY

    def count() -> float:
        value = REGISTRY.get_sample_value("kubeflow_trainer_trainjob_jobset_creation_seconds_count")
        return value or 0.0

    class StaleReader(MemoryReader):
        """A cache that never sees the JobSet (the informer lags the apply)."""

        def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
            return None if kind == "JobSet" else super().get(api_version, kind, name, namespace)

    cluster, recorder = FakeCluster(runtime_object(), trainjob_object(suspend=True)), FakeRecorder()
    stale = StaleReader(list(cluster.reader._objects.values()))
    r = TrainJobReconciler(
        cache=cluster,  # type: ignore[arg-type]
        client=cluster,  # type: ignore[arg-type]
        reader=stale,
        registry=new_registry(),
        recorder=recorder,  # type: ignore[arg-type]
        clock=FakeClock(wall=NOW),
    )
    before = count()
    r.reconcile(REQUEST)
    r.reconcile(REQUEST)  # the JobSet is re-applied (suspended, and the stale cache has no JobSet)
    assert count() == before + 1
