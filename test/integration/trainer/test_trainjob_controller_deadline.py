"""The TrainJob controller's active deadline against a real kube-apiserver: upstream's scenarios 13 to 16
(upstream `test/integration/controller/trainjob_controller_test.go`, "Timeouts"): a TrainJob past its
deadline fails with `DeadlineExceeded`, none fails before it or while suspended, and resuming restarts the
timer.

The manager runs in this process exactly as in production (its informers, five TrainJob workers, leader
election). Tier 1 has no JobSet controller and no garbage collector: the tests write JobSet status.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from controller.client.client import Client
from support import trainer_objects as _objects

JOBSET = _objects.JOBSET
TRAINJOB = _objects.TRAINJOB
Eventually = _objects.Eventually
absent = _objects.absent
conditions = _objects.conditions
container = _objects.container
get = _objects.get
job = _objects.job
runtime = _objects.runtime
trainjob = _objects.trainjob
_create = _objects.create

pytestmark = pytest.mark.allow_thread_leaks


# --- Timeouts ---------------------------------------------------------------------------------------------


def _mock_runtime(client: Client) -> None:
    spec = runtime(None, "mock-deadline", job("node", container(image="test:runtime"), ancestor="trainer"))
    try:
        _create(client, spec)
    except Exception as exc:
        if "already exists" not in str(exc):
            raise


def _deadline_exceeded(client: Client, namespace: str) -> bool:
    return any(c[2] == "DeadlineExceeded" for c in conditions(get(client, TRAINJOB, "tj", namespace)))


def test_13_fail_with_deadline_exceeded_when_active_deadline_expires(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _mock_runtime(client)
    _create(
        client,
        trainjob(namespace, "tj", "mock-deadline", kind="ClusterTrainingRuntime", activeDeadlineSeconds=1),
    )

    def expired() -> None:
        got = get(client, TRAINJOB, "tj", namespace)
        assert ("Failed", "True", "DeadlineExceeded", "TrainJob exceeded its active deadline") in conditions(
            got
        )
        assert absent(client, JOBSET, "tj", namespace)

    eventually(expired, timeout=20)


@pytest.mark.parametrize("suspend", [False, True], ids=["14-not-exceeded", "15-suspended"])
def test_14_15_no_deadline_exceeded_before_the_deadline_or_while_suspended(
    trainer: Any, client: Client, namespace: str, eventually: Eventually, suspend: bool
) -> None:
    _mock_runtime(client)
    seconds = 1 if suspend else 3600
    _create(
        client,
        trainjob(
            namespace,
            "tj",
            "mock-deadline",
            kind="ClusterTrainingRuntime",
            activeDeadlineSeconds=seconds,
            suspend=suspend,
        ),
    )
    eventually(lambda: get(client, JOBSET, "tj", namespace), timeout=20)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert not _deadline_exceeded(client, namespace)
        time.sleep(0.25)


def test_16_reset_deadline_timer_upon_resume(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _mock_runtime(client)
    _create(
        client,
        trainjob(
            namespace,
            "tj",
            "mock-deadline",
            kind="ClusterTrainingRuntime",
            activeDeadlineSeconds=2,
            suspend=True,
        ),
    )
    eventually(lambda: get(client, JOBSET, "tj", namespace), timeout=20)
    time.sleep(2.5)  # longer than the deadline: suspended time does not count
    assert not _deadline_exceeded(client, namespace)
    client.patch(TRAINJOB, "tj", {"spec": {"suspend": False}}, namespace)

    def expired() -> None:
        assert _deadline_exceeded(client, namespace)
        assert absent(client, JOBSET, "tj", namespace)

    eventually(expired, timeout=20)
