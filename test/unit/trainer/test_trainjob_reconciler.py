"""The TrainJob reconciler with in-memory fakes, for the cases that need no API server: what it applies and
writes, its events and its verdicts. The integration tier runs the same reconciler against a real one.

The fakes (`fakes.py`: what they model and what not) are shared with the reconciler's fuzz properties.
`FakeCluster` is the cache, the client and the reader at once.
"""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from controller.client.errors import Forbidden, ServerError
from controller.client.gvk import GVK
from controller.clock import FakeClock
from controller.controller.controller import Controller
from controller.controller.reconcile import Request
from controller.trainer.setup import new_registry
from controller.trainer.trainjob_controller import (
    MESSAGE_JOBSET_DELETION_PENDING,
    TrainJobReconciler,
    event_message,
)
from runtime.api.v1alpha1 import TrainJob
from runtime.core.snapshot import build_snapshot
from runtime.framework import MemoryReader
from support.fakes import FakeCluster, FakeRecorder

TRAINJOB = GVK("trainer.kubeflow.org", "v1alpha1", "TrainJob")
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


def reconciler(
    cluster: FakeCluster, recorder: FakeRecorder, clock: FakeClock | None = None
) -> TrainJobReconciler:
    return TrainJobReconciler(
        cache=cluster,
        client=cluster,
        reader=cluster.reader,
        registry=new_registry(),
        recorder=recorder,
        clock=clock or FakeClock(wall=NOW),
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


def _with_node_container(runtime: dict[str, Any], **fields: Any) -> dict[str, Any]:
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    job["template"]["spec"]["template"]["spec"]["containers"][0].update(fields)
    return runtime


def _failed(cluster: FakeCluster) -> dict[str, Any]:
    status = cluster.get(TRAINJOB, "tj", "ns")["status"]
    return next(c for c in status["conditions"] if c["type"] == "Failed")


def test_a_runtime_that_cannot_be_built_fails_the_trainjob_for_good_naming_the_runtime_and_field() -> None:
    # Was: a PluginError (or nothing: the value rendered and the API server refused the Job's pods), an
    # event, and a retry for ever.
    runtime = _with_node_container(runtime_object(), env=[{"name": "A=B", "value": "1"}])
    cluster, recorder = FakeCluster(runtime, trainjob_object(trainer={})), FakeRecorder()
    result = reconciler(cluster, recorder).reconcile(REQUEST)  # no exception: nothing to retry
    assert result.is_zero()
    failed = _failed(cluster)
    assert failed["reason"] == "RuntimeNotBuildable"
    assert failed["message"] == (
        'clustertrainingruntimes.trainer.kubeflow.org "torch" cannot be built: spec.template.spec.'
        'replicatedJobs[0].template.spec.template.spec.containers[0].env[0].name: Invalid value: "A=B": '
        "a valid environment variable name must consist only of printable ASCII characters other than '='"
    )
    assert [w for w in cluster.writes if w[0] == "apply"] == []
    assert reconciler(cluster, recorder).reconcile(REQUEST).is_zero()  # finished: nothing more happens
    assert [w for w in cluster.writes if w[0] == "apply"] == []


def test_a_snapshot_edited_to_an_unbuildable_value_fails_the_trainjob_naming_the_configmap() -> None:
    trainjob = trainjob_object(trainer={})
    edited = _with_node_container(runtime_object(), resources={"requests": {"cpu": "-1"}})
    snapshot = build_snapshot(cast(TrainJob, trainjob), edited, "ClusterTrainingRuntime")
    cluster, recorder = FakeCluster(runtime_object(), trainjob, snapshot), FakeRecorder()
    assert reconciler(cluster, recorder).reconcile(REQUEST).is_zero()
    failed = _failed(cluster)
    assert failed["reason"] == "RuntimeNotBuildable"
    assert failed["message"] == (
        'configmaps "tj-runtime-snapshot" (the snapshot of clustertrainingruntimes.trainer.kubeflow.org '
        '"torch") cannot be built: spec.template.spec.replicatedJobs[0].template.spec.template.spec.'
        'containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0'
    )
    assert [w for w in cluster.writes if w[0] == "apply"] == []


def test_a_snapshot_edited_into_text_that_is_no_runtime_fails_the_trainjob_naming_the_field() -> None:
    # Was retried for ever with only events: the snapshot is the tenant's to edit and nothing rewrites it.
    trainjob = trainjob_object(trainer={})
    snapshot = build_snapshot(cast(TrainJob, trainjob), runtime_object(), "ClusterTrainingRuntime")
    snapshot["data"]["runtime"] = snapshot["data"]["runtime"].replace("name: node", "name: [node]", 1)
    cluster, recorder = FakeCluster(runtime_object(), trainjob, snapshot), FakeRecorder()
    assert reconciler(cluster, recorder).reconcile(REQUEST).is_zero()
    failed = _failed(cluster)
    assert failed["reason"] == "RuntimeNotBuildable"
    assert failed["message"].startswith(
        "getting runtime snapshot: invalid runtime snapshot: unable to unmarshal"
    )
    assert "spec.template.spec.replicatedJobs[0]" in failed["message"]
    assert [w for w in cluster.writes if w[0] == "apply"] == []


def test_a_predecessors_snapshot_is_retried_until_it_is_garbage_collected() -> None:
    # A TrainJob deleted and created again under its name meets the old snapshot (another owner) until
    # garbage collection deletes it: not the new TrainJob's fault, so not a failure for good.
    trainjob = trainjob_object(trainer={})
    predecessor = build_snapshot(
        cast(TrainJob, {**trainjob, "metadata": {**trainjob["metadata"], "uid": "old-uid"}}),
        runtime_object(),
        "ClusterTrainingRuntime",
    )
    cluster, recorder = FakeCluster(runtime_object(), trainjob, predecessor), FakeRecorder()
    with pytest.raises(Exception, match="owned by another object"):
        reconciler(cluster, recorder).reconcile(REQUEST)
    assert "conditions" not in (cluster.get(TRAINJOB, "tj", "ns").get("status") or {})


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
        cache=cluster,
        client=cluster,
        reader=stale,
        registry=new_registry(),
        recorder=recorder,
        clock=FakeClock(wall=NOW),
    )
    before = count()
    r.reconcile(REQUEST)
    r.reconcile(REQUEST)  # the JobSet is re-applied (suspended, and the stale cache has no JobSet)
    assert count() == before + 1


def _with_an_older_snapshot(**trainjob: Any) -> tuple[FakeCluster, MemoryReader, TrainJobReconciler]:
    """A cluster holding an unlabelled snapshot an older controller wrote (from a runtime since changed), a
    cache that holds only labelled ConfigMaps, and a reconciler over both readers."""
    older = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "tj-runtime-snapshot", "namespace": "ns"},
        "data": {"older": "controller"},
    }
    cluster = FakeCluster(runtime_object(), trainjob_object(**trainjob), older)
    cache = MemoryReader([runtime_object(), cluster.get(TRAINJOB, "tj", "ns")])
    r = TrainJobReconciler(
        cache=cluster,
        client=cluster,
        reader=cluster.reader,  # confirms a miss live: sees the unlabelled snapshot
        registry=new_registry(),
        recorder=FakeRecorder(),
        clock=FakeClock(wall=NOW),
        new_owner_reader=lambda namespace, name: cache,  # misses are final
    )
    return cluster, cache, r


def test_a_new_trainjob_is_built_from_what_the_cache_holds() -> None:
    cluster, _, r = _with_an_older_snapshot()
    r.reconcile(REQUEST)
    snapshot = cluster.get(GVK("", "v1", "ConfigMap"), "tj-runtime-snapshot", "ns")
    assert "older" not in snapshot.get("data", {})  # nothing could have written it: the cache's miss holds


def test_a_trainjob_with_a_status_confirms_a_miss_live() -> None:
    status = {"conditions": [{"type": "Suspended", "status": "False", "reason": "Resumed"}]}
    cluster, _, r = _with_an_older_snapshot()
    cluster.reader.add({**cluster.get(TRAINJOB, "tj", "ns"), "status": status})
    with pytest.raises(Exception, match="runtime snapshot"):  # found, and refused: not this TrainJob's
        r.reconcile(REQUEST)
    snapshot = cluster.get(GVK("", "v1", "ConfigMap"), "tj-runtime-snapshot", "ns")
    assert snapshot["data"] == {"older": "controller"}  # found live, and left alone


def test_a_trainjob_this_process_has_written_for_confirms_a_miss_live() -> None:
    cluster, _, r = _with_an_older_snapshot()
    cluster.fail_apply = ServerError("etcd is down", status=500)
    with pytest.raises(Exception, match="etcd is down"):
        r.reconcile(REQUEST)  # a new TrainJob: the apply was attempted
    assert not cluster.get(TRAINJOB, "tj", "ns").get("status")  # nothing else tells it is not new
    cluster.fail_apply = None
    with pytest.raises(Exception, match="runtime snapshot"):
        r.reconcile(REQUEST)  # no longer new: the older snapshot is found live


# --- the JobSet of a TrainJob past its deadline: deleted until it is gone (trainer#3833, #3994) ------------

JOBSET = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")
DEADLINE_FAILED = {
    "type": "Failed",
    "status": "True",
    "reason": "DeadlineExceeded",
    "message": "TrainJob exceeded its active deadline",
    "lastTransitionTime": "2026-12-01T11:01:00Z",
}


def running_jobset(**metadata: Any) -> dict[str, Any]:
    """The TrainJob's JobSet, running (not suspended), controlled by the TrainJob."""
    owner = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "name": "tj",
        "uid": "tj-uid",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "tj", "namespace": "ns", "uid": "jobset-uid", "ownerReferences": [owner]},
        "spec": {"suspend": False},
        **metadata,
    }


def _jobset_exists(cluster: FakeCluster) -> bool:
    return MemoryReader.get(cluster.reader, JOBSET.api_version, JOBSET.kind, "tj", "ns") is not None


def _failed(cluster: FakeCluster) -> dict[str, Any]:
    status = cluster.get(TRAINJOB, "tj", "ns")["status"]
    return next(c for c in status["conditions"] if c["type"] == "Failed")


def test_a_failed_jobset_deletion_after_the_deadline_is_retried_with_backoff_until_the_jobset_is_gone() -> (
    None
):
    # trainer#3833: upstream logs the failed delete and never retries; the TrainJob says Failed while its
    # pods run. Here the reconcile fails (the queue's rate limiter backs off), with an event and a message.
    clock = FakeClock(wall=NOW)
    cluster = FakeCluster(runtime_object(), trainjob_object(activeDeadlineSeconds=60), running_jobset())
    cluster.fail_deletes = [
        ServerError("etcdserver: request timed out", status=500),
        Forbidden("denied by a webhook", status=403),
    ]
    recorder = FakeRecorder()
    ctrl = Controller("trainjob-deadline-delete-retry", reconciler(cluster, recorder, clock), clock=clock)
    try:
        assert ctrl.warmup()
        ctrl.queue.add(REQUEST)
        assert ctrl.process_next_work_item()  # the deadline passed an hour ago: Failed, and the delete fails
        assert ctrl.queue.num_requeues(REQUEST) == 1
        assert _jobset_exists(cluster)
        failed = _failed(cluster)
        assert (failed["status"], failed["reason"]) == ("True", "DeadlineExceeded")
        assert failed["message"] == MESSAGE_JOBSET_DELETION_PENDING
        assert recorder.events[-1][:2] == ("Warning", "JobSetDeletionFailed")
        assert "etcdserver: request timed out" in recorder.events[-1][2]

        clock.step(0.005)  # the first backoff; the TrainJob is finished now, and the delete is retried
        assert ctrl.process_next_work_item()
        assert ctrl.queue.num_requeues(REQUEST) == 2
        assert "denied by a webhook" in recorder.events[-1][2]
        assert _jobset_exists(cluster)

        clock.step(0.01)  # the second backoff, twice the first
        assert ctrl.process_next_work_item()
        assert ctrl.queue.num_requeues(REQUEST) == 0  # succeeded: forgotten
        assert not _jobset_exists(cluster)
        assert _failed(cluster) == DEADLINE_FAILED | {"lastTransitionTime": "2026-12-01T12:00:00Z"}
        assert [w for w in cluster.writes if w[0] == "delete"] == [("delete", "JobSet", "tj")] * 3
        assert [e[1] for e in recorder.events] == ["JobSetDeletionFailed"] * 2
    finally:
        ctrl.stop()


@pytest.mark.parametrize(
    "message",
    ["TrainJob exceeded its active deadline", MESSAGE_JOBSET_DELETION_PENDING],
    ids=["deleted-before-the-restart-failed", "retrying-before-the-restart"],
)
def test_after_a_restart_a_trainjob_failed_by_its_deadline_gets_its_remaining_jobset_deleted(
    message: str,
) -> None:
    # The process that failed the TrainJob stopped before its JobSet was gone (or was an upstream controller,
    # which never retries). A finished TrainJob is not rebuilt, but its status step still sees the deadline.
    tj = trainjob_object(activeDeadlineSeconds=60)
    tj["status"] = {"conditions": [DEADLINE_FAILED | {"message": message}]}
    cluster, recorder = FakeCluster(runtime_object(), tj, running_jobset()), FakeRecorder()
    assert reconciler(cluster, recorder).reconcile(REQUEST).is_zero()
    assert not _jobset_exists(cluster)
    assert [w for w in cluster.writes if w[0] in ("apply", "delete")] == [("delete", "JobSet", "tj")]
    assert _failed(cluster) == DEADLINE_FAILED
    assert recorder.events == []


@pytest.mark.parametrize(
    "jobset",
    [
        None,
        running_jobset(
            metadata={"name": "tj", "namespace": "ns", "deletionTimestamp": "2026-12-01T11:59:00Z"}
        ),
        running_jobset(metadata={"name": "tj", "namespace": "ns", "ownerReferences": []}),
    ],
    ids=["gone", "being-deleted", "not-the-trainjobs"],
)
def test_a_trainjob_failed_by_its_deadline_sends_no_delete_when_there_is_nothing_to_delete(
    jobset: dict[str, Any] | None,
) -> None:
    tj = trainjob_object(activeDeadlineSeconds=60)
    tj["status"] = {"conditions": [DEADLINE_FAILED]}
    objects = [runtime_object(), tj] + ([jobset] if jobset is not None else [])
    cluster, recorder = FakeCluster(*objects), FakeRecorder()
    assert reconciler(cluster, recorder).reconcile(REQUEST).is_zero()
    assert cluster.writes == []
    assert _jobset_exists(cluster) is (jobset is not None)


def test_a_failed_jobset_deletion_is_counted_under_its_own_reason() -> None:
    cluster = FakeCluster(runtime_object(), trainjob_object(activeDeadlineSeconds=60), running_jobset())
    cluster.fail_deletes = [ServerError("etcd is down", status=500)]
    before = _failures("JobSetDeletionFailed")
    with pytest.raises(ServerError, match="etcd is down"):
        reconciler(cluster, FakeRecorder()).reconcile(REQUEST)
    assert _failures("JobSetDeletionFailed") == before + 1


# --- Flux: the CURVE Secret is created once, with a random key --------------------------------------------


def _flux_runtime() -> dict[str, Any]:
    runtime = runtime_object()
    runtime["spec"]["mlPolicy"] = {"numNodes": 1, "flux": {"numProcPerNode": 1}}
    return runtime


def _curve_certificate(cluster: FakeCluster) -> str | None:
    secret = MemoryReader.get(cluster.reader, "v1", "Secret", "tj-flux-curve", "ns")
    return None if secret is None else base64.b64decode(secret["data"]["curve.cert"]).decode()


def test_the_flux_curve_secret_is_created_once_and_recreated_with_a_new_key_when_deleted() -> None:
    cluster, recorder = FakeCluster(_flux_runtime(), trainjob_object()), FakeRecorder()
    r = reconciler(cluster, recorder)
    r.reconcile(REQUEST)
    first = _curve_certificate(cluster)
    assert first is not None
    assert hashlib.sha256(b"tj-uid").digest().hex() not in first  # not the UID-derived key of upstream
    cluster.writes.clear()
    r.reconcile(REQUEST)
    r.reconcile(REQUEST)
    assert ("apply", "Secret", "tj-flux-curve") not in cluster.writes
    assert _curve_certificate(cluster) == first
    cluster.reader.delete("v1", "Secret", "tj-flux-curve", "ns")  # deleted by someone
    r.reconcile(REQUEST)
    recreated = _curve_certificate(cluster)
    assert recreated is not None and recreated != first
    assert recorder.events == []


def test_a_runtime_whose_snapshot_a_configmap_cannot_hold_fails_the_trainjob_applying_nothing() -> None:
    # Was: the snapshot's apply refused by the API server (`Too long: may not be more than 1048576 bytes`)
    # at every retry, for ever, with only events.
    script = "x" * (1 << 20)
    runtime = _with_node_container(runtime_object(), env=[{"name": "SCRIPT", "value": script}])
    cluster, recorder = FakeCluster(runtime, trainjob_object(trainer={})), FakeRecorder()
    assert reconciler(cluster, recorder).reconcile(REQUEST).is_zero()  # no exception: nothing to retry
    failed = _failed(cluster)
    assert failed["reason"] == "RuntimeNotBuildable"
    assert failed["message"].startswith(
        'clustertrainingruntimes.trainer.kubeflow.org "torch" cannot be built: its runtime snapshot would be '
    )
    assert failed["message"].endswith(" bytes of YAML, more than a ConfigMap holds (1048576 bytes)")
    assert [w for w in cluster.writes if w[0] == "apply"] == []
