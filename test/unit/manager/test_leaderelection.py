"""Leader election: client-go tools/leaderelection/leaderelection_test.go, as behaviour, on a fake Lease API
and a fake clock."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from controller import metrics
from controller.client.gvk import GVK
from controller.clock import FakeClock
from controller.manager.leaderelection import JITTER_FACTOR, LeaderElector, LeaseLock, new_identity

LEASE = GVK("coordination.k8s.io", "v1", "Lease")


class Calls:
    """What the callbacks observed: the state a manager would act on."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.stopped_at: float | None = None
        self.leaders: list[str] = []


def elector(
    api: Any,
    clock: FakeClock,
    identity: str,
    calls: Calls | None = None,
    *,
    name: str = "lock",
    release_on_cancel: bool = True,
    jitter: float = 0.0,
) -> LeaderElector:
    calls = calls or Calls()

    def stopped() -> None:
        calls.stopped_at = clock.monotonic()
        calls.stopped.set()

    return LeaderElector(
        LeaseLock(api, namespace="ns", name="lock", identity=identity, gvk=LEASE),
        name=name,
        on_started_leading=calls.started.set,
        on_stopped_leading=stopped,
        on_new_leader=calls.leaders.append,
        lease_duration=15.0,
        renew_deadline=10.0,
        retry_period=2.0,
        release_on_cancel=release_on_cancel,
        clock=clock,
        jitter=lambda: jitter,
    )


def other_holds(api: Any, holder: str = "bing", duration: int = 15, **extra: Any) -> None:
    api.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "lock", "namespace": "ns"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, **extra},
        }
    )


def slowpath(name: str) -> float:
    return metrics.REGISTRY.get_sample_value("leader_election_slowpath_total", {"name": name}) or 0.0


def master(name: str) -> float | None:
    return metrics.REGISTRY.get_sample_value("leader_election_master_status", {"name": name})


# --- validation -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("timings", "message"),
    [
        ((10.0, 10.0, 2.0), "lease_duration must be greater than renew_deadline"),
        ((15.0, 2.4, 2.0), "renew_deadline must be greater than retry_period"),
        ((15.0, 10.0, 0.0), "positive"),
    ],
)
def test_timings_are_validated_as_client_go_does(
    lease_api: Any, clock: FakeClock, timings: tuple[float, float, float], message: str
) -> None:
    lease, renew, retry = timings
    with pytest.raises(ValueError, match=message):
        LeaderElector(
            LeaseLock(lease_api, namespace="ns", name="lock", identity="baz", gvk=LEASE),
            name="lock",
            on_started_leading=lambda: None,
            on_stopped_leading=lambda: None,
            lease_duration=lease,
            renew_deadline=renew,
            retry_period=retry,
            clock=clock,
        )


def test_identity_is_hostname_and_a_uuid() -> None:
    host, _, uid = new_identity().rpartition("_")
    assert host and len(uid) == 36 and new_identity() != new_identity()


# --- tryAcquireOrRenew (testTryAcquireOrRenew) ------------------------------------------------------------


def test_acquire_from_no_object(lease_api: Any, clock: FakeClock) -> None:
    # "acquire from no object"
    le = elector(lease_api, clock, "baz")
    assert le.try_acquire_or_renew() is True
    spec = lease_api.spec()
    assert spec["holderIdentity"] == "baz"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert spec["acquireTime"] == spec["renewTime"] == "2026-01-01T00:00:00.000000Z"
    assert le.is_leader()


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({}, id="acquire from object without annotations"),
        pytest.param({"holderIdentity": ""}, id="acquire from unled object"),
    ],
)
def test_acquire_from_an_unheld_lease(lease_api: Any, clock: FakeClock, spec: dict[str, Any]) -> None:
    lease_api.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "lock", "namespace": "ns"},
            "spec": spec,
        }
    )
    le = elector(lease_api, clock, "baz")
    assert le.try_acquire_or_renew() is True
    assert lease_api.spec()["holderIdentity"] == "baz"
    assert lease_api.spec()["leaseTransitions"] == 1


def test_dont_acquire_from_led_acked_object(lease_api: Any, clock: FakeClock) -> None:
    # "don't acquire from led, acked object"
    other_holds(lease_api)
    calls = Calls()
    le = elector(lease_api, clock, "baz", calls)
    assert le.try_acquire_or_renew() is False
    assert lease_api.spec()["holderIdentity"] == "bing"
    assert le.get_leader() == "bing" and not le.is_leader()


def test_acquire_from_led_object_with_the_lease_duration_seconds(lease_api: Any, clock: FakeClock) -> None:
    # "acquire from led object with the lease duration seconds": fails, then succeeds after 3 s
    other_holds(lease_api, duration=3)
    le = elector(lease_api, clock, "baz")
    assert le.try_acquire_or_renew() is False
    clock.step(2.9)
    assert le.try_acquire_or_renew() is False
    clock.step(0.2)
    assert le.try_acquire_or_renew() is True
    assert lease_api.spec()["holderIdentity"] == "baz"
    assert lease_api.spec()["leaseTransitions"] == 1


def test_acquire_from_led_unacked_object(lease_api: Any, clock: FakeClock) -> None:
    # "acquire from led, unacked object": the holder stopped renewing; expiry counts from when *we* first
    # saw the unchanged record, on our clock.
    other_holds(lease_api)
    le = elector(lease_api, clock, "baz")
    assert le.try_acquire_or_renew() is False
    clock.step(10.0)
    assert le.try_acquire_or_renew() is False, "same record: still within 15 s of our first observation"
    clock.step(5.1)
    assert le.try_acquire_or_renew() is True


def test_a_renewal_by_the_holder_restarts_our_expiry_clock(lease_api: Any, clock: FakeClock) -> None:
    other_holds(lease_api)
    le = elector(lease_api, clock, "baz")
    assert le.try_acquire_or_renew() is False
    clock.step(14.0)
    lease_api.edit(renewTime="2026-01-01T00:00:14.000000Z")  # the holder renews
    assert le.try_acquire_or_renew() is False
    clock.step(14.0)
    assert le.try_acquire_or_renew() is False, "observed the change 14 s ago, lease is 15 s"
    clock.step(1.1)
    assert le.try_acquire_or_renew() is True


def test_the_holders_wall_clock_does_not_matter(lease_api: Any, clock: FakeClock) -> None:
    # Timestamps in the lease come from another host's clock (skewed here by decades); only local
    # observation time counts.
    other_holds(lease_api, renewTime="1990-01-01T00:00:00.000000Z", acquireTime="1990-01-01T00:00:00.000000Z")
    le = elector(lease_api, clock, "baz")
    assert le.try_acquire_or_renew() is False


def test_acquire_from_empty_led_acked_object(lease_api: Any, clock: FakeClock) -> None:
    # "acquire from empty led, acked object": an empty holder is free even within the duration
    other_holds(lease_api, holder="", duration=1)
    le = elector(lease_api, clock, "baz")
    assert le.try_acquire_or_renew() is True


def test_renew_already_acquired_object_keeps_transitions_and_acquire_time(
    lease_api: Any, clock: FakeClock
) -> None:
    # "renew already acquired object"
    le = elector(lease_api, clock, "baz")
    assert le.try_acquire_or_renew() is True
    clock.step(2.0)
    assert le.try_acquire_or_renew() is True
    spec = lease_api.spec()
    assert spec["holderIdentity"] == "baz"
    assert spec["leaseTransitions"] == 0
    assert spec["acquireTime"] == "2026-01-01T00:00:00.000000Z"
    assert spec["renewTime"] == "2026-01-01T00:00:02.000000Z"


def test_exercise_fast_path_after_lock_acquired(lease_api: Any, clock: FakeClock, fresh_name: str) -> None:
    # "Exercise fast path after lock acquired": renewals need no read and do not count as slow path
    le = elector(lease_api, clock, "baz", name=fresh_name)
    assert le.try_acquire_or_renew() is True
    for _ in range(3):
        clock.step(2.0)
        assert le.try_acquire_or_renew() is True
    assert slowpath(fresh_name) == 0


def test_fallback_to_slow_path_after_fast_path_fails(
    lease_api: Any, clock: FakeClock, fresh_name: str
) -> None:
    # "Fallback to slow path after fast path fails": someone else wrote the lease (new resourceVersion),
    # so the optimistic update conflicts; the slow path reads, finds us still holder, and renews.
    le = elector(lease_api, clock, "baz", name=fresh_name)
    assert le.try_acquire_or_renew() is True
    lease_api.edit(preferredHolder="")  # a no-op edit that still bumps the resourceVersion
    clock.step(2.0)
    assert le.try_acquire_or_renew() is True
    assert slowpath(fresh_name) == 1
    assert lease_api.spec()["holderIdentity"] == "baz"
    assert lease_api.spec()["leaseTransitions"] == 0


def test_lease_transitions_count_holder_changes_only(lease_api: Any, clock: FakeClock) -> None:
    a = elector(lease_api, clock, "a", release_on_cancel=True)
    b = elector(lease_api, clock, "b")
    assert a.try_acquire_or_renew() is True
    clock.step(2.0)
    assert a.try_acquire_or_renew() is True
    assert lease_api.spec()["leaseTransitions"] == 0
    assert b.try_acquire_or_renew() is False
    clock.step(15.1)  # a stops renewing; b's observation of a's record is now stale
    assert b.try_acquire_or_renew() is True
    assert lease_api.spec()["leaseTransitions"] == 1
    assert lease_api.spec()["holderIdentity"] == "b"


class UpdateAfter:
    """A Lease API through which every update first lets ``interleave`` run: a forced interleaving."""

    def __init__(self, api: Any, interleave: Callable[[], object]) -> None:
        self._api = api
        self._interleave = interleave

    def get(self, gvk: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        return self._api.get(gvk, name, namespace)  # type: ignore[no-any-return]

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self._api.create(obj)  # type: ignore[no-any-return]

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._interleave()
        return self._api.update(obj)  # type: ignore[no-any-return]


def test_of_two_candidates_racing_for_a_free_lease_only_one_wins(lease_api: Any, clock: FakeClock) -> None:
    # Optimistic concurrency: b reads the free lease, then a takes it, then b's PUT carries a stale
    # resourceVersion and is refused.
    other_holds(lease_api, holder="")
    a = elector(lease_api, clock, "a")
    b = elector(UpdateAfter(lease_api, a.try_acquire_or_renew), clock, "b")
    assert b.try_acquire_or_renew() is False
    assert a.is_leader() and not b.is_leader()
    assert lease_api.spec()["holderIdentity"] == "a"
    assert lease_api.spec()["leaseTransitions"] == 1


def test_a_failing_api_makes_an_attempt_fail_without_raising(lease_api: Any, clock: FakeClock) -> None:
    le = elector(lease_api, clock, "baz")
    lease_api.down = True
    assert le.try_acquire_or_renew() is False
    lease_api.down = False
    assert le.try_acquire_or_renew() is True


# --- release ----------------------------------------------------------------------------------------------


def test_release_clears_the_holder_so_a_standby_takes_over_at_once(lease_api: Any, clock: FakeClock) -> None:
    # "release acquired lock from no object" / ReleaseOnCancel
    a = elector(lease_api, clock, "a")
    b = elector(lease_api, clock, "b")
    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False
    assert a.release() is True
    spec = lease_api.spec()
    assert spec["holderIdentity"] == ""
    assert spec["leaseDurationSeconds"] == 1
    assert spec["leaseTransitions"] == 0
    assert not a.is_leader()
    assert b.try_acquire_or_renew() is True, "no need to wait out the 15 s lease"


def test_release_leaves_a_lease_someone_else_took_alone(lease_api: Any, clock: FakeClock) -> None:
    # Deliberate deviation: client-go would clear a lease another candidate took after we last looked.
    a = elector(lease_api, clock, "a")
    assert a.try_acquire_or_renew() is True
    lease_api.edit(holderIdentity="b", leaseTransitions=1)
    assert a.release() is True
    assert lease_api.spec()["holderIdentity"] == "b"


# --- the loops, on a thread -------------------------------------------------------------------------------


def step_until(clock: FakeClock, done: Callable[[], bool], step: float = 0.5, limit: float = 120.0) -> None:
    start = clock.monotonic()
    idle = threading.Event()
    while not done():
        assert clock.monotonic() - start <= limit, "condition not reached in fake time"
        clock.step(step)
        idle.wait(0.002)  # yields to the elector thread; fake time moves only through step()


def test_a_leader_that_cannot_renew_stops_leading_after_renew_deadline_before_lease_expiry(
    lease_api: Any, clock: FakeClock, fresh_name: str
) -> None:
    calls = Calls()
    le = elector(lease_api, clock, "baz", calls, name=fresh_name)
    le.start()
    try:
        step_until(clock, calls.started.is_set)
        assert master(fresh_name) == 1
        # Renewals keep it while the API answers.
        step_until(clock, lambda: lease_api.spec()["renewTime"] >= "2026-01-01T00:00:20", limit=60)
        assert not calls.stopped.is_set()
        last_renew = lease_api.spec()["renewTime"]
        lease_api.down = True
        outage = clock.monotonic()
        step_until(clock, calls.stopped.is_set, step=0.25)
        assert calls.stopped_at is not None
        lost_after = calls.stopped_at - outage
        # The last successful renewal was at most one retry period before the outage began; a standby may
        # take over 15 s after it. We stop within the renew deadline (10 s) plus one retry period.
        assert 8.0 <= lost_after <= 12.5, lost_after
        assert master(fresh_name) == 0
        assert lease_api.spec()["renewTime"] == last_renew
    finally:
        le.stop(5)


def test_stopping_the_elector_releases_the_lease(lease_api: Any, clock: FakeClock, fresh_name: str) -> None:
    calls = Calls()
    le = elector(lease_api, clock, "baz", calls, name=fresh_name)
    le.start()
    step_until(clock, calls.started.is_set)
    le.stop(5)
    assert calls.stopped.is_set()
    assert lease_api.spec()["holderIdentity"] == ""
    assert master(fresh_name) == 0
    assert not any(t.name == f"leader-election/{fresh_name}" for t in threading.enumerate())


@pytest.mark.parametrize("jitter", [0.0, 0.5, 1.0], ids=["no jitter", "half jitter", "the most jitter"])
def test_a_standby_takes_over_after_the_leader_vanishes(
    lease_api: Any, clock: FakeClock, jitter: float
) -> None:
    # The bound test/integration/test_manager_integration.py derives for real time, checked in fake time:
    # a lease duration after the standby last saw the record change, which it sees up to one jittered retry
    # period late, plus up to one more jittered retry period to notice the expiry; plus one clock step here.
    lease_duration, retry_period, step = 15.0, 2.0, 0.5
    a_calls, b_calls = Calls(), Calls()
    a = elector(lease_api, clock, "a", a_calls, name="lock-a", release_on_cancel=False)
    b = elector(lease_api, clock, "b", b_calls, name="lock-b", jitter=jitter)
    a.start()
    step_until(clock, a_calls.started.is_set)
    b.start()
    try:
        step_until(clock, lambda: "a" in b_calls.leaders)
        assert not b_calls.started.is_set()
        a.stop(5)  # a vanishes without releasing (as after SIGKILL)
        vanished = clock.monotonic()
        step_until(clock, b_calls.started.is_set)
        took = clock.monotonic() - vanished
        jittered_retry = retry_period * (1 + JITTER_FACTOR * jitter)
        # At least a lease duration after a's last renewal, which was at most one retry period before.
        assert lease_duration - retry_period <= took <= lease_duration + 2 * jittered_retry + step, took
        assert lease_api.spec()["holderIdentity"] == "b"
        assert b_calls.leaders[-1] == "b"
    finally:
        b.stop(5)
        a.stop(5)


def test_on_stopped_leading_is_called_even_if_never_leading(lease_api: Any, clock: FakeClock) -> None:
    other_holds(lease_api)
    calls = Calls()
    le = elector(lease_api, clock, "baz", calls)
    le.start()
    step_until(clock, lambda: calls.leaders == ["bing"])
    le.stop(5)
    assert calls.stopped.is_set() and not calls.started.is_set()
    assert lease_api.spec()["holderIdentity"] == "bing"


def test_check_reports_a_leader_that_stopped_renewing(lease_api: Any, clock: FakeClock) -> None:
    le = elector(lease_api, clock, "baz")
    assert le.try_acquire_or_renew() is True
    le.check(5.0)
    clock.step(20.1)
    with pytest.raises(RuntimeError, match="failed election to renew"):
        le.check(5.0)
