"""TrainJob status: the finished conditions copied from the JobSet, and the active deadline.

Each behaviour has its own case, so a change to one comparison fails a test named after it:
- only a JobSet condition whose status is ``"True"`` becomes a TrainJob ``Complete``/``Failed`` condition
  (Go: `jobset.Status` copies `Completed`/`Failed` when `meta.IsStatusConditionTrue`);
- a TrainJob counts as finished only with ``Complete`` or ``Failed`` at ``"True"``;
- the deadline (`runtime.core.status.check_deadline`, Go `reconcileDeadline`): not before it, not exactly at
  it, once past it; never while suspended; the clock restarts at the last resume; once failed by it, the
  JobSet's deletion is asked for in every later status step.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from runtime.core import RuntimeRegistry
from runtime.core.status import DeadlineCheck, check_deadline, format_time
from runtime.framework import Framework, MemoryReader
from runtime.plugins import builtin_registry

if TYPE_CHECKING:
    from runtime.testing import Make

REGISTRY = RuntimeRegistry(Framework(builtin_registry()))
_JOBS_STATUS = {"replicatedJobsStatus": [{"name": "node", "succeeded": 2}]}


def _cond(type_: str, status: str, reason: str = "R", message: str = "m") -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-01-02T03:04:05Z",
    }


def _types(conditions: list[dict[str, Any]]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in conditions}


# --- conditions copied from the JobSet ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("jobset_condition", "expected"),
    [
        pytest.param(
            _cond("Completed", "True", "AllJobsCompleted"), {"Complete": "True"}, id="Completed True"
        ),
        pytest.param(_cond("Completed", "False"), {}, id="Completed False is not copied"),
        pytest.param(_cond("Completed", "Unknown"), {}, id="Completed Unknown is not copied"),
        pytest.param(_cond("Failed", "True", "FailedJobs"), {"Failed": "True"}, id="Failed True"),
        pytest.param(_cond("Failed", "False"), {}, id="Failed False is not copied"),
        pytest.param(_cond("Suspended", "True"), {}, id="other JobSet conditions are not copied"),
    ],
)
def test_only_a_true_jobset_condition_finishes_the_trainjob(
    make: Make, jobset_condition: dict[str, Any], expected: dict[str, str]
) -> None:
    reader = MemoryReader([make.jobset(status={**_JOBS_STATUS, "conditions": [jobset_condition]})])
    update = REGISTRY.next_status(make.trainjob(), reader, make.now)
    assert _types(update.status.get("conditions", [])) == expected


def test_a_copied_complete_condition_keeps_the_jobset_reason_and_message(make: Make) -> None:
    completed = _cond("Completed", "True", "AllJobsCompleted", "jobset completed successfully")
    reader = MemoryReader([make.jobset(status={**_JOBS_STATUS, "conditions": [completed]})])
    [complete] = REGISTRY.next_status(make.trainjob(), reader, make.now).status["conditions"]
    assert complete == {**completed, "type": "Complete"}


# --- what counts as finished, for the deadline -------------------------------------------------------------


def _late_trainjob(make: Make, *conditions: dict[str, Any]) -> Any:
    """A TrainJob with a 60 s deadline, created an hour before `make.now`."""
    return make.trainjob(
        activeDeadlineSeconds=60,
        created=format_time(make.now - timedelta(hours=1)),
        status={"conditions": list(conditions)},
    )


@pytest.mark.parametrize("finished", ["Complete", "Failed"])
def test_a_finished_trainjob_is_not_timed(make: Make, finished: str) -> None:
    trainjob = _late_trainjob(make, _cond(finished, "True"))
    assert check_deadline(trainjob, trainjob["status"], make.now) == DeadlineCheck()


@pytest.mark.parametrize("condition", ["Complete", "Failed"])
def test_a_false_complete_or_failed_condition_does_not_stop_the_deadline(make: Make, condition: str) -> None:
    trainjob = _late_trainjob(make, _cond(condition, "False"))
    assert check_deadline(trainjob, trainjob["status"], make.now) == DeadlineCheck(exceeded=True)


def test_a_trainjob_past_its_deadline_fails_and_its_jobset_is_deleted(make: Make) -> None:
    reader = MemoryReader([make.jobset(status=_JOBS_STATUS)])
    update = REGISTRY.next_status(_late_trainjob(make), reader, make.now)
    assert update.delete_jobset is True
    assert update.requeue_after is None
    [failed] = update.status["conditions"]
    assert (failed["type"], failed["status"], failed["reason"]) == ("Failed", "True", "DeadlineExceeded")


@pytest.mark.parametrize(
    ("failed", "delete"),
    [
        pytest.param(_cond("Failed", "True", "DeadlineExceeded"), True, id="failed by the deadline"),
        pytest.param(_cond("Failed", "True", "FailedJobs"), False, id="failed by its jobs"),
        pytest.param(_cond("Complete", "True", "AllJobsCompleted"), False, id="complete"),
    ],
)
def test_a_trainjob_failed_by_its_deadline_keeps_asking_for_its_jobset_deletion(
    make: Make, failed: dict[str, Any], delete: bool
) -> None:
    # trainer#3833, #3994: upstream deletes once, when the deadline passes; a failed delete is never retried.
    # The verdict holds in every later reconcile (and after a restart), so the controller retries it.
    reader = MemoryReader([make.jobset(status=_JOBS_STATUS)])
    update = REGISTRY.next_status(_late_trainjob(make, failed), reader, make.now)
    assert update.delete_jobset is delete
    assert update.status["conditions"] == [failed]


# --- the deadline's clock -----------------------------------------------------------------------------------


def _created(make: Make, seconds_ago: float, **fields: Any) -> Any:
    return make.trainjob(
        activeDeadlineSeconds=100, created=format_time(make.now - timedelta(seconds=seconds_ago)), **fields
    )


def test_before_the_deadline_the_trainjob_is_requeued_for_the_time_left(make: Make) -> None:
    trainjob = _created(make, 30)
    assert check_deadline(trainjob, {}, make.now) == DeadlineCheck(requeue_after=70.0)


def test_exactly_at_the_deadline_it_is_not_exceeded_yet_and_is_checked_again_in_a_second(make: Make) -> None:
    trainjob = _created(make, 100)
    assert check_deadline(trainjob, {}, make.now) == DeadlineCheck(requeue_after=1.0)


def test_one_second_past_the_deadline_it_is_exceeded(make: Make) -> None:
    trainjob = _created(make, 101)
    assert check_deadline(trainjob, {}, make.now) == DeadlineCheck(exceeded=True)


def test_a_suspended_trainjob_is_not_timed(make: Make) -> None:
    trainjob = _created(make, 1000, suspend=True)
    assert check_deadline(trainjob, {}, make.now) == DeadlineCheck()


def test_a_trainjob_without_a_deadline_is_not_timed(make: Make) -> None:
    trainjob = make.trainjob(created=format_time(make.now - timedelta(days=365)))
    assert check_deadline(trainjob, {}, make.now) == DeadlineCheck()


def test_the_clock_restarts_at_the_last_resume(make: Make) -> None:
    resumed = {**_cond("Suspended", "False", "Resumed"), "lastTransitionTime": format_time(make.now)}
    trainjob = _created(make, 1000, suspend=False)
    status = {"conditions": [resumed]}
    assert check_deadline(trainjob, status, make.now) == DeadlineCheck(requeue_after=100.0)
    assert check_deadline(trainjob, status, make.now + timedelta(seconds=101)) == DeadlineCheck(exceeded=True)


def test_a_stale_suspended_true_condition_does_not_restart_the_clock(make: Make) -> None:
    # Suspended=True is left over until the status is rewritten; only a Suspended=False marks a resume.
    stale = {**_cond("Suspended", "True", "Suspended"), "lastTransitionTime": format_time(make.now)}
    trainjob = _created(make, 1000, suspend=False)
    assert check_deadline(trainjob, {"conditions": [stale]}, make.now) == DeadlineCheck(exceeded=True)


# --- a JobSet that is gone ----------------------------------------------------------------------------------


def test_a_complete_trainjob_keeps_its_status_when_its_jobset_is_gone(make: Make) -> None:
    complete = _cond("Complete", "True", "AllJobsCompleted")
    update = REGISTRY.next_status(make.trainjob(status={"conditions": [complete]}), MemoryReader(), make.now)
    assert update.error is None
    assert update.status["conditions"] == [complete]


def test_a_complete_false_trainjob_whose_jobset_is_gone_reports_the_missing_jobset(make: Make) -> None:
    not_complete = _cond("Complete", "False")
    update = REGISTRY.next_status(
        make.trainjob(status={"conditions": [not_complete]}), MemoryReader(), make.now
    )
    assert update.error is not None and "not found" in str(update.error)
