"""The manager binary SIGTERMed in the middle of a burst stops gracefully within its timeout, and a manager
started afterwards finishes whatever the first left half done.

``trainer-controller-manager`` runs with leader election (as shipped) and the ServiceAccount. A burst of
TrainJobs is created; once some of them have their JobSet and others not yet, the process gets SIGTERM. It
must exit with status 0 within its graceful-shutdown timeout (30 s), releasing its Lease. A second process
then takes the Lease at once (released, not expired) and every TrainJob ends with exactly one JobSet and
its status; the JobSets the first process made keep their uid.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from controller.client.client import Client
from support import reliability

BURST = 150
GRACEFUL_TIMEOUT = 30.0  # ManagerOptions.graceful_shutdown_timeout (controller.manager.manager): the default


def _made(admin: Client, namespace: str) -> dict[str, str]:
    return {
        j["metadata"]["name"]: j["metadata"]["uid"] for j in admin.list(reliability.JOBSET, namespace).items
    }


def test_sigterm_mid_burst_stops_within_the_timeout_and_a_restart_finishes_the_work(  # noqa: PLR0917
    admin: Client,
    service_account_kubeconfig: Path,
    namespace: str,
    tmp_path: Path,
    clean_lease: None,
    figures: Any,
    profile: Any,
) -> None:
    admin.create(reliability.torch_runtime(namespace), field_manager=reliability.USER)
    stops: list[float] = []
    half_done: list[int] = []
    for run in range(profile.runs):
        first = reliability.ManagerProcess(
            tmp_path / f"first-{run}", service_account_kubeconfig, name=f"first-{run}"
        )
        second = reliability.ManagerProcess(
            tmp_path / f"second-{run}", service_account_kubeconfig, name=f"second-{run}"
        )
        try:
            first.start()
            reliability.eventually(lambda first=first: _leading(first), timeout=90, interval=0.2)
            names = [f"g{run}-{i:03d}" for i in range(BURST)]
            reliability.create_all(admin, [reliability.trainjob(namespace, n) for n in names])
            reliability.wait_for(
                lambda names=names: len(set(_made(admin, namespace)) & set(names)) >= 10, timeout=60
            )

            first.terminate()
            signalled = time.monotonic()
            code = first.wait(GRACEFUL_TIMEOUT + 15)
            stops.append(time.monotonic() - signalled)
            assert code == 0, f"exit status {code}\n{first.tail()}"
            assert stops[-1] <= GRACEFUL_TIMEOUT, f"stopped after {stops[-1]:.1f} s"
            assert first.events("leader.released"), first.tail()
            assert first.events("setup.stopped"), first.tail()
            left = reliability.inventory(admin, namespace, names)
            half_done.append(len(left.lost))
            made_before = {n: u for n, u in _made(admin, namespace).items() if n in set(names)}

            second.start()
            found = reliability.eventually(
                lambda names=names: reliability.converged(admin, namespace, names), timeout=120, interval=0.5
            )
            assert found.duplicated == [] and found.orphaned == []
            assert {n: found.jobsets[n] for n in made_before} == made_before, "a JobSet was made twice"
        finally:
            first.stop()
            second.stop()
    figures.report(
        f"SIGTERM mid-burst ({profile.name})",
        runs=profile.runs,
        trainjobs_per_run=BURST,
        faults_injected=profile.runs,
        unfinished_at_stop=half_done,
        stop_s_median_max=reliability.median_max(stops),
        graceful_timeout_s=GRACEFUL_TIMEOUT,
        lost=0,
        duplicated=0,
    )


def _leading(process: Any) -> None:
    assert process.running(), f"{process.name} exited:\n{process.tail()}"
    assert process.events("manager.controllers_started"), f"{process.name} is not leading yet"
