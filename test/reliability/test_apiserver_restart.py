"""kube-apiserver restarted in the middle of a burst of 200 TrainJobs: every TrainJob converges, no object is
duplicated or lost, and no failed reconcile is left unretried.

The manager runs in this process as production runs it (ServiceAccount, shipped RBAC, five workers). The
burst is created by an admin client; half-way through, kube-apiserver is stopped and started again on the
same port with the same etcd (``ControlPlane.restart_apiserver``), while the rest of the burst keeps
coming (a create refused or broken meanwhile is retried; AlreadyExists after a retry means the first try
went through). Every open watch and connection of the manager breaks; its informers relist, its workers
fail and retry. Afterwards each TrainJob has exactly one JobSet, controlled by it, and ``Suspended=True``;
the work queue is empty (nothing is waiting for a retry).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from controller.client.client import Client
from controller.envtest import ControlPlane
from support import reliability

BURST = 200


def test_a_burst_of_200_trainjobs_converges_across_an_apiserver_restart(  # noqa: PLR0917 - fixtures
    control_plane: ControlPlane,
    admin: Client,
    service_account_kubeconfig: Path,
    namespace: str,
    figures: Any,
    profile: Any,
) -> None:
    admin.create(reliability.torch_runtime(namespace), field_manager=reliability.USER)
    restarts: list[float] = []
    converge: list[float] = []
    retried_creates = 0
    errors_seen = 0.0
    done_at_restart: list[int] = []
    for run in range(profile.runs):
        names = [f"burst{run}-{i:03d}" for i in range(BURST)]
        jobs = [reliability.trainjob(namespace, name) for name in names]
        manager = reliability.TrainerManager(service_account_kubeconfig, name=f"restart-{run}").start()
        errors_before = reliability.reconcile_errors()
        try:
            began = time.monotonic()
            retried_creates += reliability.create_all(admin, jobs[: BURST // 2])
            failures: list[BaseException] = []
            done_at_restart.append(len(reliability.inventory(admin, namespace, names).jobsets))

            def restart(failures: list[BaseException] = failures) -> None:
                started = time.monotonic()
                try:
                    control_plane.restart_apiserver()
                except BaseException as exc:
                    failures.append(exc)
                restarts.append(time.monotonic() - started)

            restarter = threading.Thread(target=restart, name="test/apiserver-restart")
            restarter.start()
            try:
                retried_creates += reliability.create_all(admin, jobs[BURST // 2 :])
            finally:
                restarter.join(180)
            assert not restarter.is_alive() and not failures, failures

            found = reliability.eventually(
                lambda names=names: reliability.converged(admin, namespace, names), timeout=180, interval=1.0
            )
            converge.append(time.monotonic() - began)
            assert found.lost == [] and found.duplicated == [] and found.orphaned == [], found
            assert len(found.jobsets) == BURST
            # Every failed reconcile was retried until it succeeded: nothing is left queued or backing off.
            reliability.eventually(manager.queue_idle, timeout=30, interval=0.5)
            assert manager.failures == []
            errors_seen += reliability.reconcile_errors() - errors_before
        finally:
            manager.stop()
    figures.report(
        f"apiserver restart mid-burst ({profile.name})",
        runs=profile.runs,
        trainjobs_per_run=BURST,
        faults_injected=profile.runs,
        lost=0,
        duplicated=0,
        jobsets_made_when_the_restart_began=done_at_restart,
        restart_s_median_max=reliability.median_max(restarts),
        converged_s_median_max=reliability.median_max(converge),
        creates_retried=retried_creates,
        reconcile_errors_all_retried=int(errors_seen),
    )
