"""The manager against a real kube-apiserver (Tier 1): a toy reconciler converges, and leader election
between two manager processes (``support.toy_manager``) lets only the leader reconcile and fails over.

What is checked: "a toy reconciler on a test CRD converges; two managers with leader election:
only the leader reconciles, SIGKILL of the leader → the other takes over within 20 s", plus the graceful
case: SIGTERM releases the lease, so the takeover takes a retry period rather than a lease duration.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from controller.client.client import Client
from controller.client.errors import NotFound
from controller.client.gvk import GVK
from controller.controller.builder import ControllerBuilder
from controller.envtest import ControlPlane, namespaced_crd
from controller.manager.leaderelection import JITTER_FACTOR
from controller.manager.manager import Manager, ManagerOptions
from support import toy_manager
from support.toy_manager import (
    DEFAULT_RETRY_PERIOD,
    LEASE_DURATION,
    TIMING_MARGIN,
    ToyReconciler,
    worst_takeover,
)

HERE = Path(__file__).resolve().parent
TOY = GVK("toy.controller.test", "v1", "Toy")
CONFIGMAP = GVK("", "v1", "ConfigMap")
LEASE = GVK("coordination.k8s.io", "v1", "Lease")
REASONS = "toy.controller.test/reconciled-by"

TOY_CRD = namespaced_crd(
    TOY.group,
    TOY.kind,
    spec={"type": "object", "properties": {"message": {"type": "string"}}},
    status={"type": "object", "properties": {"observedMessage": {"type": "string"}}},
)


@pytest.fixture(scope="module")
def toys(control_plane: ControlPlane) -> None:
    control_plane.install_crds([TOY_CRD])


@pytest.fixture
def client(kubeconfig: Path, toys: None) -> Iterator[Client]:
    c = Client.load(str(kubeconfig))
    yield c
    c.close()


def toy(namespace: str, name: str, message: str) -> dict[str, Any]:
    return {
        "apiVersion": TOY.api_version,
        "kind": "Toy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"message": message},
    }


def configmap(client: Client, namespace: str, name: str) -> dict[str, Any]:
    try:
        return client.get(CONFIGMAP, f"{name}-toy", namespace)
    except NotFound as exc:
        raise AssertionError(f"no ConfigMap {name}-toy yet") from exc


# --- one manager, in process ------------------------------------------------------------------------------


def test_a_toy_reconciler_converges_and_follows_updates(
    kubeconfig: Path, client: Client, namespace: str, eventually: Callable[..., Any]
) -> None:

    manager = Manager.from_kubeconfig(
        str(kubeconfig),
        options=ManagerOptions(health_probe_bind_address="127.0.0.1:0", metrics_bind_address="127.0.0.1:0"),
    )
    ControllerBuilder(manager).for_(TOY).owns(CONFIGMAP).complete(ToyReconciler(manager, "in-process"))
    failure: list[BaseException] = []

    def run() -> None:
        try:
            manager.run()
        except BaseException as exc:
            failure.append(exc)

    runner = threading.Thread(target=run, name="test/manager")
    runner.start()
    try:
        client.create(toy(namespace, "one", "hello"))

        def converged(message: str) -> None:
            cm = configmap(client, namespace, "one")
            assert cm["data"] == {"message": message}
            status = client.get(TOY, "one", namespace).get("status") or {}
            assert status.get("observedMessage") == message

        eventually(lambda: converged("hello"), timeout=20)
        owner = configmap(client, namespace, "one")["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("Toy", "one", True)

        # A spec change is followed.
        client.patch(TOY, "one", {"spec": {"message": "world"}}, namespace)
        eventually(lambda: converged("world"), timeout=20)

        # Deleting the owned ConfigMap wakes the owner, which puts it back.
        client.delete(CONFIGMAP, "one-toy", namespace)
        eventually(lambda: converged("world"), timeout=20)

        # Metrics saw the reconciles.
        import http.client

        conn = http.client.HTTPConnection(*manager.metrics_address, timeout=5)  # type: ignore[misc]
        conn.request("GET", "/metrics")
        body = conn.getresponse().read().decode()
        conn.close()
        assert 'controller_runtime_reconcile_total{controller="toy",result="success"}' in body
    finally:
        manager.stop()
        runner.join(40)
        manager.client.close()
    assert not runner.is_alive()
    assert failure == []


# --- two manager processes with leader election -----------------------------------------------------------


class ToyProcess:
    """One ``support/toy_manager.py`` subprocess; its JSON log lines are collected by a reader thread."""

    def __init__(self, kubeconfig: Path, namespace: str, identity: str, *extra_args: str) -> None:
        self.identity = identity
        self.lines: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [
                sys.executable,
                toy_manager.__file__,
                "--kubeconfig",
                str(kubeconfig),
                "--namespace",
                namespace,
                "--identity",
                identity,
                "--leader-election",
                *extra_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        self._reader = threading.Thread(target=self._read, name=f"test/toy-log/{identity}")
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            try:
                line = orjson.loads(raw)
            except orjson.JSONDecodeError:
                line = {"event": "raw", "text": raw.decode(errors="replace")}
            with self._lock:
                self.lines.append(line)

    def events(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [line for line in self.lines if line.get("event") == name]

    def stop(self) -> int | None:
        if self.process.poll() is None:
            self.process.kill()
        code = self.process.wait(30)
        self._reader.join(10)
        return code

    def log_tail(self) -> str:
        with self._lock:
            return "\n".join(str(line) for line in self.lines[-30:])


@pytest.fixture
def toy_processes(kubeconfig: Path, namespace: str, toys: None) -> Iterator[Callable[..., ToyProcess]]:
    started: list[ToyProcess] = []

    def start(identity: str, *extra_args: str) -> ToyProcess:
        proc = ToyProcess(kubeconfig, namespace, identity, *extra_args)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


def holder(client: Client, namespace: str) -> str:
    try:
        lease = client.get(LEASE, "toy-controller", namespace)
    except NotFound as exc:
        raise AssertionError("no lease yet") from exc
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def reconciled_by(client: Client, namespace: str, name: str) -> str:
    return str(configmap(client, namespace, name)["metadata"]["annotations"][REASONS])


def equals(actual: Any, expected: Any) -> Any:
    assert actual == expected, f"{actual!r} != {expected!r}"
    return actual


def two_managers(
    start: Callable[..., ToyProcess],
    client: Client,
    namespace: str,
    eventually: Callable[..., Any],
    *extra_args: str,
) -> tuple[ToyProcess, ToyProcess]:
    a, b = start("toy-a", *extra_args), start("toy-b", *extra_args)

    def leader_known() -> str:
        name = holder(client, namespace)
        assert name in ("toy-a", "toy-b"), name
        return name

    leader_name = eventually(leader_known, timeout=30, retry_on=(AssertionError,))
    return (a, b) if leader_name == "toy-a" else (b, a)


def test_only_the_leader_reconciles_and_a_standby_takes_over_after_sigkill(
    client: Client, namespace: str, toy_processes: Callable[..., ToyProcess], eventually: Callable[..., Any]
) -> None:
    # Retry period 1 s: the algorithm's worst case is 15 + 2 x 2.2 = 19.4 s (the target is 20 s), and the
    # bound adds a real margin to it rather than the 0.6 s left below 20 s. The figure is printed.
    retry_period = 1.0
    leader, standby = two_managers(
        toy_processes, client, namespace, eventually, "--retry-period", str(retry_period)
    )
    for i in range(3):
        client.create(toy(namespace, f"t{i}", f"m{i}"))
    for i in range(3):
        writer = eventually(lambda i=i: reconciled_by(client, namespace, f"t{i}"), timeout=30)
        assert writer == leader.identity
    assert leader.events("toy.reconciled"), leader.log_tail()
    assert standby.events("toy.reconciled") == [], "a standby must not reconcile"

    leader.process.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    bound = worst_takeover(retry_period)
    eventually(lambda: equals(holder(client, namespace), standby.identity), timeout=bound + 5, interval=0.1)
    took = time.monotonic() - killed
    assert took <= bound, f"takeover took {took:.1f} s (bound {bound:.1f} s)\n{standby.log_tail()}"
    leader.stop()
    client.create(toy(namespace, "after", "takeover"))
    eventually(lambda: equals(reconciled_by(client, namespace, "after"), standby.identity), timeout=30)
    print(f"\ntakeover after SIGKILL: {took:.1f} s")


def test_sigterm_releases_the_lease_so_the_standby_takes_over_fast(
    client: Client, namespace: str, toy_processes: Callable[..., ToyProcess], eventually: Callable[..., Any]
) -> None:
    leader, standby = two_managers(toy_processes, client, namespace, eventually)
    eventually(lambda: equals(bool(standby.events("leader.observed")), True), timeout=30)
    leader.process.send_signal(signal.SIGTERM)
    stopped = time.monotonic()
    assert leader.process.wait(35) == 0, leader.log_tail()
    released = leader.events("leader.released")
    assert released, leader.log_tail()
    # Released: the standby needs one jittered retry period to notice, not a lease duration.
    bound = DEFAULT_RETRY_PERIOD * (1 + JITTER_FACTOR) + TIMING_MARGIN
    assert bound < LEASE_DURATION
    eventually(lambda: equals(holder(client, namespace), standby.identity), timeout=15, interval=0.1)
    took = time.monotonic() - stopped
    assert took < bound, f"takeover after a graceful stop took {took:.1f} s: the lease was not released"
    client.create(toy(namespace, "after", "graceful"))
    assert eventually(lambda: reconciled_by(client, namespace, "after"), timeout=30) == standby.identity
    print(f"\ntakeover after SIGTERM: {took:.1f} s")


# --- events -----------------------------------------------------------------------------------------------


def test_recorded_events_are_accepted_by_the_api_server_and_repeats_counted(
    client: Client, namespace: str
) -> None:
    from controller.manager.recorder import EventBroadcaster

    owner = client.create(toy(namespace, "evented", "x"))
    broadcaster = EventBroadcaster(client)
    recorder = broadcaster.new_recorder("toy-controller")
    broadcaster.start()
    for _ in range(3):
        recorder.event(owner, "Normal", "Reconciled", "wrote the ConfigMap")
    recorder.event(owner, "Warning", "Failed", "y" * 5000)
    broadcaster.stop()
    stats = broadcaster.statistics()
    assert (stats.created, stats.patched, stats.failed, stats.dropped) == (2, 2, 0, 0)
    events = client.list(GVK("", "v1", "Event"), namespace=namespace).items
    by_reason = {e["reason"]: e for e in events if e["involvedObject"]["name"] == "evented"}
    assert by_reason["Reconciled"]["count"] == 3
    assert by_reason["Reconciled"]["involvedObject"]["uid"] == owner["metadata"]["uid"]
    assert by_reason["Reconciled"]["source"]["component"] == "toy-controller"
    assert len(by_reason["Failed"]["message"]) == 1024
