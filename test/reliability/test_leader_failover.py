"""Two ``trainer-controller-manager`` processes with leader election, client-go's default timings (lease
15 s, renew deadline 10 s, retry period 2 s), the shipped RBAC: the leader killed with SIGKILL, cut off from
kube-apiserver by a network partition, or robbed of its Lease.

- SIGKILL: the standby takes the Lease within 28.8 s (client-go's worst case with these timings, a lease
  duration plus two retry periods jittered by up to +120 %, 15 + 2 x 4.4 = 23.8 s, plus the 5 s scheduling
  margin of ``test/integration/test_manager_integration.py``, whose toy-manager takeover test this one
  builds on rather than repeats) and reconciles what the leader left: TrainJobs created before,
  during and after the failover each end with exactly one JobSet, the JobSets made before the kill keep
  their uid (nothing was made twice).
- Partition: each manager reaches kube-apiserver through its own fault proxy; the leader's stops
  forwarding (connections stay open and silent). The leader's renewals time out, at its renew deadline it
  stops its controllers and exits with status 3 (``LeaderElectionLost``); the standby takes over as above.
- Lease taken: another holder writes the Lease; the leader exits with status 3, and TrainJobs created after
  it said so get no JobSet until the standby holds the Lease; then every one does. As client-go's, a
  leader that cannot renew keeps leading until its renew deadline has passed (it stops there, not at the
  first failed renewal).

The partition and lost-Lease cases run with short timings (lease 6 s, renew deadline 4 s, retry 1 s) in
the default run and with client-go's in the soak; the SIGKILL case always with client-go's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controller.client.client import Client
from support import reliability
from support.toy_manager import worst_takeover

HERE = Path(__file__).resolve().parent
# The takeover bound of the toy-manager test (client-go's worst case plus the scheduling margin), reused.

DEFAULT = reliability.DEFAULT_TIMINGS  # client-go's, as the shipped configuration
BOUND = worst_takeover(DEFAULT.retry_period)
assert reliability.DEFAULT_TIMINGS.worst_takeover() == BOUND, (
    "reliability.LeaseTimings drifted from the toy test's bound"
)
EXIT_LEADER_ELECTION_LOST = 3
START_TIMEOUT = 90.0


def _timings(profile: Any) -> Any:
    """The partition and lost-Lease scenarios show behaviour, not the default figures: short timings in
    the default run (a third of the wait), client-go's in the soak."""
    return reliability.SHORT_TIMINGS if profile.name == "ci" else DEFAULT


@pytest.fixture
def processes(tmp_path: Path, clean_lease: None) -> Iterator[Callable[..., Any]]:
    started: list[Any] = []

    def start(name: str, kubeconfig: Path, **options: Any) -> Any:
        process = reliability.ManagerProcess(tmp_path / name, kubeconfig, name=name, **options).start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


def _elect(admin: Client, pair: tuple[Any, Any]) -> tuple[Any, Any]:
    """(leader, standby) once one of the pair holds the Lease and the other has seen it."""

    def leader() -> tuple[Any, Any]:
        for process in pair:
            assert process.running(), f"{process.name} exited:\n{process.tail()}"
        holder = reliability.lease_holder(admin)
        by_identity = {p.identity: p for p in pair}
        assert holder in by_identity, f"holder {holder!r} is not one of {sorted(by_identity)}"
        elected = by_identity[holder]
        other = pair[1] if elected is pair[0] else pair[0]
        assert other.events("leader.observed"), f"{other.name} has not seen the leader yet"
        assert elected.events("manager.controllers_started"), (
            f"{elected.name} has not started its controllers"
        )
        return elected, other

    result: tuple[Any, Any] = reliability.eventually(leader, timeout=START_TIMEOUT, interval=0.2)
    return result


def _jobset_uids(admin: Client, namespace: str, names: list[str]) -> dict[str, str]:
    found = reliability.converged(admin, namespace, names)
    return {name: found.jobsets[name] for name in names}


def test_the_standby_takes_over_within_client_go_bounds_after_sigkill_of_the_leader(  # noqa: PLR0917
    admin: Client,
    service_account_kubeconfig: Path,
    namespace: str,
    processes: Callable[..., Any],
    figures: Any,
    profile: Any,
) -> None:
    admin.create(reliability.torch_runtime(namespace), field_manager=reliability.USER)
    took: list[float] = []
    trainjobs = 0
    for run in range(profile.runs):
        reliability.delete_lease(admin)
        a = processes(f"kill{run}-a", service_account_kubeconfig)
        b = processes(f"kill{run}-b", service_account_kubeconfig)
        leader, standby = _elect(admin, (a, b))
        before = [f"k{run}-before-{i}" for i in range(10)]
        reliability.create_all(admin, [reliability.trainjob(namespace, n) for n in before])
        uids = reliability.eventually(
            lambda before=before: _jobset_uids(admin, namespace, before), timeout=60
        )
        around = [f"k{run}-around-{i}" for i in range(10)]
        reliability.create_all(admin, [reliability.trainjob(namespace, n) for n in around])

        leader.kill()
        killed = time.monotonic()
        reliability.eventually(
            lambda standby=standby: _holds(admin, standby), timeout=BOUND + 10, interval=0.1
        )
        took.append(time.monotonic() - killed)
        assert took[-1] <= BOUND, f"takeover took {took[-1]:.1f} s (bound {BOUND:.1f} s)\n{standby.tail()}"
        assert leader.process.returncode() == -9

        after = [f"k{run}-after-{i}" for i in range(10)]
        reliability.create_all(admin, [reliability.trainjob(namespace, n) for n in after])
        names = before + around + after
        found = reliability.eventually(
            lambda names=names: reliability.converged(admin, namespace, names), timeout=60
        )
        assert found.duplicated == [] and found.orphaned == []
        assert {n: found.jobsets[n] for n in before} == uids, "a JobSet made before the kill was made again"
        trainjobs += len(names)
        standby.stop()
    figures.report(
        f"leader SIGKILL, standby takes over ({profile.name})",
        runs=profile.runs,
        faults_injected=profile.runs,
        trainjobs=trainjobs,
        lost=0,
        duplicated=0,
        failover_s_median_max=reliability.median_max(took),
        bound_s=BOUND,
    )


def _holds(admin: Client, process: Any) -> None:
    holder = reliability.lease_holder(admin)
    assert holder == process.identity, f"holder is {holder!r}"


def test_a_partitioned_leader_exits_non_zero_and_the_standby_takes_over(  # noqa: PLR0917
    admin: Client,
    service_account_kubeconfig: Path,
    namespace: str,
    processes: Callable[..., Any],
    proxies: Any,
    figures: Any,
    profile: Any,
) -> None:
    admin.create(reliability.torch_runtime(namespace), field_manager=reliability.USER)
    timings = _timings(profile)
    bound = timings.worst_takeover()
    took: list[float] = []
    exited: list[float] = []
    for run in range(profile.runs):
        reliability.delete_lease(admin)
        pair = []
        routes = {}
        for side in ("a", "b"):
            proxy = proxies.new(f"part{run}-{side}")
            kubeconfig = proxies.kubeconfig(proxy, service_account_kubeconfig, f"part{run}-{side}")
            process = processes(f"part{run}-{side}", kubeconfig, timings=timings)
            pair.append(process)
            routes[process.name] = proxy
        leader, standby = _elect(admin, (pair[0], pair[1]))
        before = [f"p{run}-before-{i}" for i in range(10)]
        reliability.create_all(admin, [reliability.trainjob(namespace, n) for n in before])
        uids = reliability.eventually(
            lambda before=before: _jobset_uids(admin, namespace, before), timeout=60
        )

        cut_off = routes[leader.name]
        cut_off.blackhole()
        partitioned = time.monotonic()
        during = [f"p{run}-during-{i}" for i in range(10)]
        reliability.create_all(admin, [reliability.trainjob(namespace, n) for n in during])

        code = leader.wait(timings.renew_deadline + 30)
        exited.append(time.monotonic() - partitioned)
        assert code == EXIT_LEADER_ELECTION_LOST, f"exit status {code}\n{leader.tail()}"
        assert leader.events("setup.leader_election_lost"), leader.tail()
        reliability.eventually(
            lambda standby=standby: _holds(admin, standby), timeout=bound + 10, interval=0.1
        )
        took.append(time.monotonic() - partitioned)
        assert took[-1] <= bound, f"takeover took {took[-1]:.1f} s (bound {bound:.1f} s)"
        # Nothing the partitioned leader sent after the cut reached kube-apiserver.
        assert cut_off.exchanges(since=partitioned) == []

        names = before + during
        found = reliability.eventually(
            lambda names=names: reliability.converged(admin, namespace, names), timeout=60
        )
        assert found.duplicated == [] and found.orphaned == []
        assert {n: found.jobsets[n] for n in before} == uids
        # Not healed: what the dead leader sent into the partition is dropped with the proxy at teardown.
        standby.stop()
    figures.report(
        f"leader partitioned from kube-apiserver ({profile.name})",
        runs=profile.runs,
        faults_injected=profile.runs,
        lost=0,
        duplicated=0,
        lease_renew_retry_s=f"{timings.lease_duration:g}/{timings.renew_deadline:g}/{timings.retry_period:g}",
        leader_exit_s_median_max=reliability.median_max(exited),
        leader_exit_status=EXIT_LEADER_ELECTION_LOST,
        failover_s_median_max=reliability.median_max(took),
        bound_s=bound,
    )


def test_a_leader_whose_lease_is_taken_takes_no_new_work_and_exits_non_zero(  # noqa: PLR0917
    admin: Client,
    service_account_kubeconfig: Path,
    namespace: str,
    processes: Callable[..., Any],
    figures: Any,
    profile: Any,
) -> None:
    admin.create(reliability.torch_runtime(namespace), field_manager=reliability.USER)
    timings = _timings(profile)
    a = processes("taken-a", service_account_kubeconfig, timings=timings)
    b = processes("taken-b", service_account_kubeconfig, timings=timings)
    leader, standby = _elect(admin, (a, b))

    lease = admin.get(reliability.LEASE, reliability.LEASE_NAME, reliability.OPERATOR_NAMESPACE)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease["spec"].update(
        holderIdentity="someone-else", leaseDurationSeconds=3600, renewTime=now, acquireTime=now
    )
    admin.update(lease)
    taken = time.monotonic()
    # As client-go, a leader that cannot renew keeps leading until its renew deadline (10 s) has passed.
    reliability.eventually(lambda: _logged_loss(leader), timeout=timings.renew_deadline + 20, interval=0.1)
    noticed = time.monotonic() - taken

    late = [f"late-{i}" for i in range(5)]
    reliability.create_all(admin, [reliability.trainjob(namespace, n) for n in late])
    code = leader.wait(30)
    assert code == EXIT_LEADER_ELECTION_LOST, f"exit status {code}\n{leader.tail()}"
    # Nobody leads (the Lease is someone else's for an hour): the TrainJobs wait, none gets a JobSet.
    quiet_until = time.monotonic() + 3.0
    while time.monotonic() < quiet_until:
        assert [n for n in late if not reliability.absent(admin, reliability.JOBSET, n, namespace)] == []
        time.sleep(0.25)

    reliability.delete_lease(admin)  # the other holder goes away: the standby acquires at its next try
    reliability.eventually(lambda: _holds(admin, standby), timeout=timings.worst_takeover(), interval=0.1)
    found = reliability.eventually(lambda: reliability.converged(admin, namespace, late), timeout=60)
    assert found.duplicated == []
    figures.report(
        f"leader loses its Lease ({profile.name})",
        runs=1,
        lease_renew_retry_s=f"{timings.lease_duration:g}/{timings.renew_deadline:g}/{timings.retry_period:g}",
        faults_injected=1,
        lost=0,
        duplicated=0,
        noticed_s=noticed,
        exit_status=code,
        jobsets_made_by_the_old_leader_after_the_loss=0,
    )


def _logged_loss(process: Any) -> None:
    if not process.events("manager.leader_election_lost"):
        assert process.running(), f"{process.name} exited before logging the loss:\n{process.tail()}"
        raise AssertionError(f"{process.name} has not noticed the loss yet")
