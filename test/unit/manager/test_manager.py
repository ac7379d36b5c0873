"""The manager: controller-runtime pkg/manager/manager_test.go and internal_test.go, as behaviour, with a fake
cache, recording runnables, the fake Lease API and a fake clock. Servers are real, on 127.0.0.1:0.

``FakeCache`` models only the lifecycle (start, stop, wait for sync that succeeds or times out at once);
``Lifecycle`` runnables append what happened to them to a shared journal, which is the state under test.
The tests of a stop during the cache sync wait and of the metrics endpoint use the real informer cache and
a real controller instead.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.cache.informer_cache import InformerCache
from controller.client import errors
from controller.client.client import Client
from controller.client.gvk import GVK
from controller.client.transport import Transport
from controller.clock import FakeClock
from controller.controller.controller import Controller
from controller.controller.handler import EnqueueRequestForObject
from controller.controller.reconcile import Request, Result
from controller.controller.source import Kind
from controller.informers.testing import FakeListerWatcher
from controller.manager.manager import LeaderElectionLost, Manager, ManagerError, ManagerOptions
from controller.serving import app, httpserver

CONFIGMAP = GVK("", "v1", "ConfigMap")


class Journal:
    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.entries: list[str] = []

    def add(self, entry: str) -> None:
        with self.lock:
            self.entries.append(entry)
            self.lock.notify_all()

    def wait_for(self, entry: str, timeout: float = 10.0) -> bool:
        with self.lock:
            return self.lock.wait_for(lambda: entry in self.entries, timeout)


class FakeCache:
    def __init__(self, journal: Journal, *, syncs: bool = True) -> None:
        self.journal = journal
        self.syncs = syncs

    def get_informer(self, gvk: Any, *, block_until_synced: bool = True) -> Any:
        raise AssertionError("not used")

    def start(self) -> None:
        self.journal.add("cache.start")

    def stop(self) -> None:
        self.journal.add("cache.stop")

    def wait_for_cache_sync(self, timeout: float | None = None, stop: threading.Event | None = None) -> bool:
        self.journal.add(f"cache.synced={self.syncs}")
        return self.syncs


class Lifecycle:
    def __init__(
        self, journal: Journal, name: str, *, leader: bool, on_start: Callable[[], None] | None = None
    ):
        self.journal = journal
        self.name = name
        self.leader = leader
        self.on_start = on_start

    def start(self, stop: threading.Event) -> None:
        self.journal.add(f"{self.name}.start")
        if self.on_start is not None:
            self.on_start()

    def stop(self, timeout: float | None = None) -> bool:
        self.journal.add(f"{self.name}.stop(timeout={timeout})")
        return True

    def need_leader_election(self) -> bool:
        return self.leader


@pytest.fixture
def journal() -> Journal:
    return Journal()


def manager(journal: Journal, clock: FakeClock, **options: Any) -> Manager:
    options.setdefault("health_probe_bind_address", "127.0.0.1:0")
    options.setdefault("metrics_bind_address", "127.0.0.1:0")
    cache = FakeCache(journal, syncs=options.pop("syncs", True))
    lease_client = options.pop("leader_election_client", None)
    return Manager(
        object(),  # type: ignore[arg-type]
        ManagerOptions(clock=clock, **options),
        cache=cache,
        leader_election_client=lease_client,
    )


@pytest.fixture
def running(in_thread: Any) -> Iterator[Callable[[Manager], list[Any]]]:
    """Runs managers on threads; stops and joins them at the end of the test."""
    runs: list[tuple[Manager, threading.Thread]] = []

    def run(mgr: Manager) -> list[Any]:
        thread, out = in_thread(mgr.run, name="test/manager")
        runs.append((mgr, thread))
        return out

    yield run
    for mgr, thread in runs:
        mgr.stop()
        thread.join(10)
        assert not thread.is_alive()


def test_start_order_and_stop_in_reverse(journal: Journal, clock: FakeClock, in_thread: Any) -> None:
    # internal.go Start: servers → caches → other runnables → leader election runnables; stop in reverse
    mgr = manager(journal, clock)
    mgr.add(Lifecycle(journal, "plain", leader=False))
    mgr.add(Lifecycle(journal, "ctrl-a", leader=True))
    mgr.add(Lifecycle(journal, "ctrl-b", leader=True))
    thread, out = in_thread(mgr.run)
    assert journal.wait_for("ctrl-b.start")
    mgr.stop()
    thread.join(10)
    assert out == [None]  # run returned without raising
    assert journal.entries == [
        "cache.start",
        "cache.synced=True",
        "plain.start",
        "ctrl-a.start",
        "ctrl-b.start",
        "ctrl-b.stop(timeout=30.0)",
        "ctrl-a.stop(timeout=30.0)",
        "plain.stop(timeout=30.0)",
        "cache.stop",
    ]


def test_health_and_metrics_are_served_while_running(
    journal: Journal, clock: FakeClock, running: Callable[[Manager], list[Any]], http_get: Any
) -> None:
    mgr = manager(journal, clock)
    ready = threading.Event()
    mgr.add_healthz_check("ping", lambda: None)
    mgr.add_readyz_check(
        "controllers", lambda: None if ready.is_set() else (_ for _ in ()).throw(RuntimeError("not yet"))
    )
    mgr.add(Lifecycle(journal, "ctrl", leader=True))
    running(mgr)
    assert journal.wait_for("ctrl.start")
    assert http_get(mgr.health_probe_address, "/healthz") == (200, "ok")
    assert http_get(mgr.health_probe_address, "/readyz")[0] == 500
    ready.set()
    assert http_get(mgr.health_probe_address, "/readyz/controllers") == (200, "ok")
    status, body = http_get(mgr.metrics_address, "/metrics")
    assert status == 200
    assert "# TYPE controller_runtime_reconcile_total counter" in body
    assert "_created" not in body
    assert http_get(mgr.metrics_address, "/other")[0] == 404


def test_caches_that_do_not_sync_fail_the_start_and_nothing_is_left_running(
    journal: Journal, clock: FakeClock
) -> None:
    mgr = manager(journal, clock, syncs=False)
    mgr.add(Lifecycle(journal, "ctrl", leader=True))
    with pytest.raises(ManagerError, match="caches did not sync"):
        mgr.run()
    assert "ctrl.start" not in journal.entries
    assert journal.entries[-1] == "cache.stop"
    assert not any(t.name.startswith(("metrics/", "health-probe/")) for t in threading.enumerate())


def test_a_stop_during_the_cache_sync_wait_ends_run_at_once_and_starts_nothing_more(
    journal: Journal, clock: FakeClock, in_thread: Any
) -> None:
    # controller-runtime: WaitForCacheSync(ctx) ends when the manager's context is cancelled.
    api = FakeListerWatcher()
    api.list_errors.extend(errors.ServerError("down", status=503) for _ in range(10_000))
    api.watch_errors.extend(errors.ServerError("down", status=503) for _ in range(10_000))
    cache = InformerCache(lambda gvk, **selectors: api, clock=clock, gc_tuning=False)
    cache.get_informer(CONFIGMAP)  # not started: returns at once
    mgr = Manager(
        object(),  # type: ignore[arg-type]
        ManagerOptions(
            clock=clock, health_probe_bind_address="127.0.0.1:0", metrics_bind_address="127.0.0.1:0"
        ),
        cache=cache,
    )
    mgr.add(Lifecycle(journal, "plain", leader=False))
    mgr.add(Lifecycle(journal, "ctrl", leader=True))
    thread, out = in_thread(mgr.run, name="test/manager")
    for _ in range(20):  # 20 s of the 2-minute wait pass: the manager is still waiting for the caches
        clock.step(1.0)
        thread.join(0.005)
    assert thread.is_alive()
    mgr.stop()
    try:
        # The manager stops its runnables within a second of fake time, not after the 100 s left to wait.
        step_until(clock, lambda: "plain.stop(timeout=30.0)" in journal.entries, limit=1.0)
    finally:
        clock.step(300.0)  # should it fail: the sync wait times out, so the manager still ends
        thread.join(10)
    assert out == [None]  # a graceful stop, not "caches did not sync"
    assert [entry for entry in journal.entries if entry.endswith(".start")] == []
    assert not cache.has_synced()
    assert not any(
        t.name.startswith(("informer/", "metrics/", "health-probe/")) for t in threading.enumerate()
    )


class Idle:
    def reconcile(self, request: Request) -> Result:
        return Result()


def exposition_samples(text: str) -> set[str]:
    """Every sample as Go's exposition writes it (labels sorted by name), e.g. ``m{a="1",b="2"} 0.0``."""
    samples = set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples.add(f"{sample.name}{{{labels}}} {sample.value!r}")
    return samples


def test_the_metrics_endpoint_serves_the_registry_under_controller_runtimes_names(  # noqa: PLR0917 - fixtures
    journal: Journal,
    clock: FakeClock,
    lease_api: Any,
    fresh_name: str,
    new_informer: Callable[..., Any],
    running: Callable[[Manager], list[Any]],
    http_get: Any,
) -> None:
    # controller-runtime pkg/metrics, pkg/internal/controller/metrics and the workqueue provider: what a
    # started controller, a leader and one REST request put on /metrics.
    api_stub = app.Server(
        "test-apiserver",
        ("127.0.0.1", 0),
        lambda path, query, headers: httpserver.Response(
            status=200, body=b'{"major": "1"}', content_type="application/json"
        ),
    )
    api_stub.start()
    client = Client(Transport.for_url("http://{}:{}".format(*api_stub.address)), qps=0)
    try:
        mgr = manager(
            journal,
            clock,
            leader_election=True,
            leader_election_id=fresh_name,
            leader_election_namespace="ns",
            leader_election_client=lease_api,
        )
        controller = Controller(fresh_name, Idle(), use_priority_queue=False, clock=clock)
        controller.watch(Kind(new_informer(), EnqueueRequestForObject()))
        mgr.add(controller)
        mgr.add(Lifecycle(journal, "after", leader=True))
        running(mgr)
        assert journal.wait_for("after.start")  # the controller, added before it, has started
        # The REST metrics are the process's: an earlier test's stub on the same ephemeral port counts under
        # the same host label, so the request is counted as a difference.
        _, before = http_get(mgr.metrics_address, "/metrics")
        assert client.get_raw("/version") == {"major": "1"}
        status, body = http_get(mgr.metrics_address, "/metrics")
    finally:
        client.close()
        api_stub.stop()
    assert status == 200
    name, host = fresh_name, "{}:{}".format(*api_stub.address)
    expected = {
        *(
            f'controller_runtime_reconcile_total{{controller="{name}",result="{result}"}} 0.0'
            for result in ("success", "error", "requeue", "requeue_after")
        ),
        f'controller_runtime_reconcile_errors_total{{controller="{name}"}} 0.0',
        f'controller_runtime_terminal_reconcile_errors_total{{controller="{name}"}} 0.0',
        f'controller_runtime_max_concurrent_reconciles{{controller="{name}"}} 1.0',
        f'controller_runtime_active_workers{{controller="{name}"}} 0.0',
        f'controller_runtime_reconcile_time_seconds_count{{controller="{name}"}} 0.0',
        f'workqueue_depth{{controller="{name}",name="{name}",priority=""}} 0.0',
        f'workqueue_adds_total{{controller="{name}",name="{name}"}} 0.0',
        f'workqueue_retries_total{{controller="{name}",name="{name}"}} 0.0',
        f'leader_election_master_status{{name="{name}"}} 1.0',
    }
    assert expected - exposition_samples(body) == set()
    request = f'rest_client_requests_total{{code="200",host="{host}",method="GET"}} '
    counted = [
        sum(
            float(sample.removeprefix(request))
            for sample in exposition_samples(text)
            if sample.startswith(request)
        )
        for text in (before, body)
    ]
    assert counted[1] - counted[0] == 1.0
    for family, kind in (
        ("controller_runtime_reconcile_total", "counter"),
        ("controller_runtime_reconcile_time_seconds", "histogram"),
        ("workqueue_depth", "gauge"),
        ("rest_client_requests_total", "counter"),
        ("leader_election_master_status", "gauge"),
    ):
        assert f"# TYPE {family} {kind}\n" in body
    assert [line for line in body.splitlines() if "_created" in line] == []


def test_configuration_after_start_and_duplicate_names_are_refused(
    journal: Journal, clock: FakeClock, running: Callable[[Manager], list[Any]]
) -> None:
    mgr = manager(journal, clock)
    mgr.add(Lifecycle(journal, "ctrl", leader=True))
    with pytest.raises(ValueError, match="already added"):
        mgr.add(Lifecycle(journal, "ctrl", leader=True))
    running(mgr)
    assert journal.wait_for("ctrl.start")
    with pytest.raises(ManagerError):
        mgr.add(Lifecycle(journal, "late", leader=True))
    with pytest.raises(ManagerError):
        mgr.add_healthz_check("late", lambda: None)


@pytest.mark.parametrize("address", ["0.0.0.0:8080", "[::]:8080", ":8080"])
def test_servers_refuse_every_interface_addresses_unless_allowed(
    journal: Journal, clock: FakeClock, address: str
) -> None:
    with pytest.raises(ValueError, match="allow_all_interfaces"):
        ManagerOptions(metrics_bind_address=address)
    with pytest.raises(ValueError, match="allow_all_interfaces"):
        ManagerOptions(health_probe_bind_address=address)
    mgr = manager(journal, clock, metrics_bind_address=address, allow_all_interfaces=True)
    assert mgr.options.allow_all_interfaces


def test_the_servers_bind_loopback_by_default_and_an_explicit_address_when_told() -> None:
    defaults = ManagerOptions()
    assert (defaults.health_probe_bind_address, defaults.metrics_bind_address) == (
        "127.0.0.1:8081",
        "127.0.0.1:8080",
    )
    pod_ip = ManagerOptions(
        metrics_bind_address="10.244.1.7:8080", health_probe_bind_address="10.244.1.7:8081"
    )
    assert pod_ip.metrics_bind_address == "10.244.1.7:8080"


def test_manager_options_hold_controller_runtimes_defaults() -> None:
    opts = ManagerOptions()
    assert (opts.lease_duration, opts.renew_deadline, opts.retry_period) == (15.0, 10.0, 2.0)
    assert (opts.graceful_shutdown_timeout, opts.cache_sync_timeout) == (30.0, 120.0)
    assert (opts.qps, opts.burst) == (50.0, 100)
    assert not opts.leader_election and not opts.allow_all_interfaces
    with pytest.raises(ValueError, match="leader_election_id"):
        ManagerOptions(leader_election=True)
    with pytest.raises(ValueError, match="lease_duration > renew_deadline > retry_period"):
        ManagerOptions(leader_election=True, leader_election_id="x", renew_deadline=20.0)


# --- leader election --------------------------------------------------------------------------------------


def elected_manager(journal: Journal, clock: FakeClock, lease_api: Any, identity: str) -> Manager:
    mgr = manager(
        journal,
        clock,
        leader_election=True,
        leader_election_id="trainer-lock",
        leader_election_namespace="ns",
        leader_election_client=lease_api,
        identity=identity,
    )
    mgr.add(Lifecycle(journal, f"{identity}.plain", leader=False))
    mgr.add(Lifecycle(journal, f"{identity}.ctrl", leader=True))
    return mgr


def step_until(clock: FakeClock, done: Callable[[], bool], limit: float = 60.0) -> None:
    start, pause = clock.monotonic(), threading.Event()
    while not done():
        assert clock.monotonic() - start <= limit, "not reached in fake time"
        clock.step(0.5)
        pause.wait(0.002)  # yields to the manager's threads; fake time moves only through step()


def test_controllers_start_only_once_the_lease_is_held(
    journal: Journal, clock: FakeClock, lease_api: Any, running: Callable[[Manager], list[Any]]
) -> None:
    other = elected_manager(journal, clock, lease_api, "a")
    running(other)
    assert journal.wait_for("a.ctrl.start")
    standby = elected_manager(journal, clock, lease_api, "b")
    running(standby)
    assert journal.wait_for("b.plain.start")
    step_until(clock, lambda: clock.monotonic() >= 1030)  # 30 s of renewals by a
    assert "b.ctrl.start" not in journal.entries
    assert lease_api.spec("ns", "trainer-lock")["holderIdentity"] == "a"


def test_graceful_stop_releases_the_lease_after_the_controllers_stop_and_a_standby_takes_over(
    journal: Journal,
    clock: FakeClock,
    lease_api: Any,
    running: Callable[[Manager], list[Any]],
    in_thread: Any,
) -> None:
    leader = elected_manager(journal, clock, lease_api, "a")
    thread, out = in_thread(leader.run)
    assert journal.wait_for("a.ctrl.start")
    standby = elected_manager(journal, clock, lease_api, "b")
    running(standby)
    assert journal.wait_for("b.plain.start")
    leader.stop()
    thread.join(10)
    assert out == [None]
    assert lease_api.spec("ns", "trainer-lock")["holderIdentity"] in ("", "b")
    stopped_at = clock.monotonic()
    step_until(clock, lambda: "b.ctrl.start" in journal.entries)
    assert clock.monotonic() - stopped_at <= 2.0 * 2.2 + 0.5, "within a jittered retry period"
    assert journal.entries.index("a.ctrl.stop(timeout=30.0)") < journal.entries.index("b.ctrl.start")


def test_losing_the_lease_stops_controllers_at_once_and_run_raises(
    journal: Journal, clock: FakeClock, lease_api: Any, in_thread: Any
) -> None:
    mgr = elected_manager(journal, clock, lease_api, "a")
    thread, out = in_thread(mgr.run)
    assert journal.wait_for("a.ctrl.start")
    lease_api.down = True
    outage = clock.monotonic()
    step_until(clock, lambda: "a.ctrl.stop(timeout=0)" in journal.entries)
    assert clock.monotonic() - outage <= 12.5, "before a standby could take the 15 s lease"
    thread.join(10)
    assert len(out) == 1 and isinstance(out[0], LeaderElectionLost)
    assert "a.plain.stop(timeout=0.0)" in journal.entries
    assert not any(t.name.startswith("leader-election/") for t in threading.enumerate())


def test_run_until_signal_stops_gracefully_on_sigterm(journal: Journal, clock: FakeClock) -> None:
    mgr = manager(journal, clock)
    mgr.add(Lifecycle(journal, "ctrl", leader=True, on_start=lambda: os.kill(os.getpid(), signal.SIGTERM)))
    before = signal.getsignal(signal.SIGTERM)
    mgr.run_until_signal()
    assert journal.entries[-2:] == ["ctrl.stop(timeout=30.0)", "cache.stop"]
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_manager_without_runnables_idles_until_stopped(
    journal: Journal, clock: FakeClock, in_thread: Any, http_get: Any
) -> None:
    mgr = manager(journal, clock)
    thread, out = in_thread(mgr.run)
    assert journal.wait_for("cache.synced=True")
    assert http_get(mgr.health_probe_address, "/healthz")[0] == 200
    mgr.stop()
    thread.join(10)
    assert out == [None]
    assert journal.entries == ["cache.start", "cache.synced=True", "cache.stop"]
