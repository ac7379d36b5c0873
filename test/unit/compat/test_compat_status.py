"""The TrainJob status we compute parses with the Kubeflow Python SDK's strict models, and reads as intended.

`RuntimeRegistry.next_status` (the Suspended condition, the JobSet plugin's status, the active deadline) is
run against JobSets in each state the SDK distinguishes; the TrainJob, with the status the controller would
write, is then parsed as `get_job`/`list_jobs` parse it (`TrainerV1alpha1TrainJob(List).from_dict`).

`from_dict` alone is lenient about conditions: it fills a missing `type`, `status`, `reason` or `message` with
"" (the OpenAPI defaults) and only insists on `lastTransitionTime`. So each condition and each `jobsStatus`
item is also validated field by field with `model_validate`, which requires all of them, as metav1.Condition
and the CRD schema do.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from kubeflow_trainer_api import models
from pydantic import ValidationError

from runtime.core import RuntimeRegistry, StatusUpdate
from runtime.framework import Framework, MemoryReader
from runtime.plugins import builtin_registry

if TYPE_CHECKING:
    from conftest import SdkRules, Wire

REGISTRY = RuntimeRegistry(Framework(builtin_registry()))
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
CREATED = "2026-01-02T03:00:00Z"
EARLIER = "2026-01-02T03:02:00Z"
NAME, NAMESPACE = "k3f9a0c1d2e4", "team-a"
CONDITION_FIELDS = {"type", "status", "reason", "message", "lastTransitionTime"}
COUNTERS = {"ready", "succeeded", "failed", "active", "suspended"}


def _trainjob(
    *,
    suspend: bool = False,
    status: dict[str, Any] | None = None,
    kind: str = "ClusterTrainingRuntime",
    deadline: int | None = None,
) -> dict[str, Any]:
    """A TrainJob as kube-apiserver returns it (defaults applied, server metadata present)."""
    spec: dict[str, Any] = {
        "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": kind, "name": "torch-distributed"},
        "trainer": {"numNodes": 2, "command": ["bash", "-c", 'torchrun "train.py"']},
        "suspend": suspend,
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
    }
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    obj: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "uid": "0b9f5c8e-1111-4222-8333-944455556666",
            "generation": 1,
            "resourceVersion": "4242",
            "creationTimestamp": CREATED,
        },
        "spec": spec,
    }
    if status is not None:
        obj["status"] = copy.deepcopy(status)
    return obj


def _condition(type_: str, reason: str, message: str, status: str = "True") -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": EARLIER,
        "observedGeneration": 1,
    }


def _job(name: str = "node", **counts: int) -> dict[str, Any]:
    return {"name": name, **{counter: counts.get(counter, 0) for counter in sorted(COUNTERS)}}


def _jobset(
    *, suspend: bool = False, conditions: list[dict[str, Any]] | None = None, **status: Any
) -> dict[str, Any]:
    """A JobSet as JobSet v0.12 reports it."""
    body: dict[str, Any] = {"restarts": 0, **status}
    if conditions:
        body["conditions"] = conditions
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "generation": 1},
        "spec": {"suspend": suspend},
        "status": body,
    }


COMPLETED = _condition("Completed", "AllJobsCompleted", "jobset completed successfully")
FAILED = _condition("Failed", "FailedJobs", "jobset failed due to one or more job failures")
MAX_RESTARTS = _condition(
    "Failed", "ReachedMaxRestarts", "jobset failed due to reaching max number of restarts"
)
JOBSET_SUSPENDED = _condition("Suspended", "SuspendedJobs", "jobset is suspended")
STARTUP = _condition("StartupPolicyCompleted", "AllReplicatedJobsStarted", "all replicated jobs have started")


@dataclass(frozen=True)
class Flow:
    id: str
    trainjob: dict[str, Any]
    jobset: dict[str, Any] | None
    sdk_status: str
    """What the SDK's `get_job` reports (no pods counted)."""
    conditions: list[tuple[str, str, str]]
    """(type, status, reason) of every TrainJob condition, in order."""
    now: datetime = NOW


RESUMED_FROM = {
    "conditions": [
        {**_condition("Suspended", "Suspended", "TrainJob is suspended"), "lastTransitionTime": CREATED},
    ]
}

FLOWS = [
    Flow(
        "running",
        _trainjob(),
        _jobset(conditions=[STARTUP], replicatedJobsStatus=[_job(ready=1, active=1)]),
        "Created",
        [],
    ),
    Flow(
        "completed",
        _trainjob(),
        _jobset(
            conditions=[STARTUP, COMPLETED],
            terminalState="Completed",
            replicatedJobsStatus=[_job(succeeded=1)],
        ),
        "Complete",
        [("Complete", "True", "AllJobsCompleted")],
    ),
    Flow(
        "failed",
        _trainjob(),
        _jobset(conditions=[FAILED], terminalState="Failed", replicatedJobsStatus=[_job(failed=1)]),
        "Failed",
        [("Failed", "True", "FailedJobs")],
    ),
    Flow(
        "failed-after-max-restarts",
        _trainjob(),
        _jobset(
            conditions=[MAX_RESTARTS],
            terminalState="Failed",
            restarts=3,
            replicatedJobsStatus=[_job(failed=1)],
        ),
        "Failed",
        [("Failed", "True", "ReachedMaxRestarts")],
    ),
    Flow(
        "suspended",
        _trainjob(suspend=True),
        _jobset(suspend=True, conditions=[JOBSET_SUSPENDED], replicatedJobsStatus=[_job(suspended=1)]),
        "Created",
        [("Suspended", "True", "Suspended")],
    ),
    Flow(
        "resumed",
        _trainjob(status=RESUMED_FROM),
        _jobset(replicatedJobsStatus=[_job(ready=1, active=1)]),
        "Created",
        [("Suspended", "False", "Resumed")],
    ),
    Flow(
        "deadline-exceeded",
        _trainjob(deadline=60),
        _jobset(replicatedJobsStatus=[_job(ready=1, active=1)]),
        "Failed",
        [("Failed", "True", "DeadlineExceeded")],
    ),
    Flow(
        "failed-and-jobset-deleted-by-ttl",
        _trainjob(status={"conditions": [_condition("Failed", "FailedJobs", "jobset failed")]}),
        None,
        "Failed",
        [("Failed", "True", "FailedJobs")],
    ),
    Flow(
        "unsupported-runtime-kind",
        _trainjob(kind="MyRuntime"),
        None,
        "Failed",
        [("Failed", "True", "TrainingRuntimeNotSupported")],
    ),
    Flow(
        "jobset-counters-missing",
        _trainjob(),
        _jobset(replicatedJobsStatus=[{"name": "node", "active": 2}]),
        "Created",
        [],
    ),
]


def _next(trainjob: dict[str, Any], jobset: dict[str, Any] | None, now: datetime = NOW) -> StatusUpdate:
    reader = MemoryReader([jobset] if jobset is not None else [])
    update = REGISTRY.next_status(trainjob, reader, now)  # type: ignore[arg-type]
    assert update.error is None, update.error
    return update


def _check_strictly(status: dict[str, Any]) -> None:
    """Every condition and jobsStatus item complete, as metav1.Condition and the CRD require."""
    for condition in status.get("conditions", []):
        assert set(condition) >= CONDITION_FIELDS, condition
        assert (
            condition["type"] and condition["reason"] and condition["status"] in ("True", "False", "Unknown")
        )
        models.IoK8sApimachineryPkgApisMetaV1Condition.model_validate(condition)
    for item in status.get("jobsStatus", []):
        assert set(item) == {"name", *COUNTERS}, item
        models.TrainerV1alpha1JobStatus.model_validate(item)


@pytest.mark.parametrize("flow", FLOWS, ids=[f.id for f in FLOWS])
def test_the_status_parses_with_the_sdk_models_and_reads_as_intended(
    flow: Flow, sdk: SdkRules, wire: Wire
) -> None:
    update = _next(flow.trainjob, flow.jobset, flow.now)
    trainjob = {**flow.trainjob, "status": update.status}
    _check_strictly(update.status)
    sent = wire.sent(trainjob)
    parsed = models.TrainerV1alpha1TrainJob.from_dict(sent)
    assert parsed is not None
    assert wire.losses(models.TrainerV1alpha1TrainJob, sent) == []
    assert sdk.trainjob_status(parsed) == flow.sdk_status
    assert [
        (c["type"], c["status"], c["reason"]) for c in update.status.get("conditions", [])
    ] == flow.conditions
    if flow.jobset is not None and "replicatedJobsStatus" in flow.jobset["status"]:
        assert [j["name"] for j in update.status["jobsStatus"]] == ["node"]
    listed = models.TrainerV1alpha1TrainJobList.from_dict(
        wire.sent(
            {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJobList", "items": [trainjob]}
        )
    )
    assert listed is not None and len(listed.items) == 1


def test_the_deadline_failure_also_asks_to_delete_the_jobset() -> None:
    flow = next(f for f in FLOWS if f.id == "deadline-exceeded")
    update = _next(flow.trainjob, flow.jobset)
    assert update.delete_jobset is True
    failed = update.status["conditions"][0]
    assert failed["message"] == "TrainJob exceeded its active deadline"


def test_the_jobset_messages_reach_the_sdk_unchanged(sdk: SdkRules, wire: Wire) -> None:
    flow = next(f for f in FLOWS if f.id == "completed")
    update = _next(flow.trainjob, flow.jobset)
    parsed = models.TrainerV1alpha1TrainJob.from_dict(wire.sent({**flow.trainjob, "status": update.status}))
    assert parsed is not None and parsed.status is not None and parsed.status.conditions is not None
    (complete,) = parsed.status.conditions
    assert (complete.reason, complete.message) == ("AllJobsCompleted", "jobset completed successfully")
    assert complete.last_transition_time == datetime(2026, 1, 2, 3, 2, tzinfo=UTC)


def test_running_needs_every_node_step_and_no_conditions(sdk: SdkRules, wire: Wire) -> None:
    # The SDK says Running only when the TrainJob has no conditions and every node pod runs; a resumed
    # TrainJob keeps its Suspended=False condition, so the SDK says Created while it runs (as upstream).
    running = _next(_trainjob(), _jobset(replicatedJobsStatus=[_job(ready=1, active=1)]))
    model = models.TrainerV1alpha1TrainJob.from_dict(wire.sent({**_trainjob(), "status": running.status}))
    assert model is not None
    assert sdk.trainjob_status(model, running_node_steps=2, num_nodes=2) == "Running"
    assert sdk.trainjob_status(model, running_node_steps=1, num_nodes=2) == "Created"
    resumed_job = _trainjob(status=RESUMED_FROM)
    resumed = _next(resumed_job, _jobset(replicatedJobsStatus=[_job(ready=1, active=1)]))
    model = models.TrainerV1alpha1TrainJob.from_dict(wire.sent({**resumed_job, "status": resumed.status}))
    assert model is not None
    assert sdk.trainjob_status(model, running_node_steps=2, num_nodes=2) == "Created"


def test_a_whole_life_keeps_the_status_parseable_and_ends_complete(sdk: SdkRules, wire: Wire) -> None:
    # suspended → resumed → running → completed, one reconcile each, status carried over as the API
    # server stores it; kubectl's State column (`.status.conditions[-1:].type`) ends at Complete.
    steps: list[tuple[Callable[[dict[str, Any]], dict[str, Any]], dict[str, Any]]] = [
        (lambda s: _trainjob(suspend=True, status=s), _jobset(suspend=True, conditions=[JOBSET_SUSPENDED])),
        (lambda s: _trainjob(status=s), _jobset(replicatedJobsStatus=[_job(active=1)])),
        (
            lambda s: _trainjob(status=s),
            _jobset(conditions=[STARTUP], replicatedJobsStatus=[_job(ready=1, active=1)]),
        ),
        (
            lambda s: _trainjob(status=s),
            _jobset(conditions=[STARTUP, COMPLETED], replicatedJobsStatus=[_job(succeeded=1)]),
        ),
    ]
    status: dict[str, Any] = {}
    now = NOW
    for make_trainjob, jobset in steps:
        trainjob = make_trainjob(status)
        status = wire.stored(wire.sent(_next(trainjob, jobset, now).status))
        _check_strictly(status)
        parsed = models.TrainerV1alpha1TrainJob.from_dict(wire.sent({**trainjob, "status": status}))
        assert parsed is not None
        now += timedelta(minutes=1)
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        ("Suspended", "False"),
        ("Complete", "True"),
    ]
    assert status["conditions"][-1]["type"] == "Complete"
    assert sdk.trainjob_status(parsed) == "Complete"


def test_the_sdk_models_refuse_incomplete_conditions_and_counters(wire: Wire) -> None:
    # The checks above can fail: what the SDK would choke on, and what only model_validate catches.
    no_time = _trainjob(
        status={"conditions": [{"type": "Complete", "status": "True", "reason": "R", "message": ""}]}
    )
    with pytest.raises(ValidationError):
        models.TrainerV1alpha1TrainJob.from_dict(wire.sent(no_time))
    no_counter = _trainjob(
        status={"jobsStatus": [{"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": 1}]}
    )
    with pytest.raises(ValidationError):
        models.TrainerV1alpha1TrainJob.from_dict(wire.sent(no_counter))
    no_reason = {"type": "Complete", "status": "True", "message": "m", "lastTransitionTime": CREATED}
    assert models.IoK8sApimachineryPkgApisMetaV1Condition.from_dict(no_reason) is not None  # lenient
    with pytest.raises(ValidationError):
        models.IoK8sApimachineryPkgApisMetaV1Condition.model_validate(no_reason)
