"""What the benchmark creates and watches: TrainJobs at a pace, their arrival times, the managers'
progress."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmark.scale import CONTROLLER, CREATE_THREADS, NAMESPACE, RUNTIME
from benchmark.scale.managers import Session, workers_started_at
from benchmark.scale.metrics import Sample, metric_sum, parse_prometheus
from controller.client.errors import ApiError, Gone, TransportError, WatchTimeout
from controller.client.gvk import GVK


def trainjob(name: str, runtime: str = RUNTIME) -> dict[str, Any]:
    """A small torch TrainJob on ``runtime``: two nodes, one GPU each."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "runtimeRef": {"name": runtime},
            "trainer": {
                "numNodes": 2,
                "command": ["torchrun", "train.py"],
                "resourcesPerNode": {
                    "requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": 1},
                    "limits": {"nvidia.com/gpu": 1},
                },
            },
        },
    }


# ============================================================================================= observers


class Arrivals:
    """A watch on one kind in :data:`NAMESPACE` from a known resourceVersion, in a named thread: the
    monotonic time each name was first seen ADDED. Re-watches from the last resourceVersion when a watch
    ends; on 410 Gone it re-lists and stamps the names it had missed with the re-list time."""

    def __init__(self, session: Session, gvk: GVK, resource: str) -> None:
        self._session = session
        self._gvk = gvk
        self._resource = resource
        self.first_seen: dict[str, float] = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._watch: Any = None
        listed = session.api.list(gvk, NAMESPACE)
        session.count("LIST", resource)
        now = time.monotonic()
        for item in listed.items:
            self.first_seen.setdefault(item["metadata"]["name"], now)
        self._rv = listed.resource_version
        self._thread = threading.Thread(target=self._run, name=f"bench/watch-{resource}", daemon=True)

    def __enter__(self) -> Arrivals:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        watch = self._watch
        if watch is not None:
            watch.stop()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._watch = self._session.api.watch(self._gvk, NAMESPACE, resource_version=self._rv)
                for event in self._watch:
                    if event.type == "ERROR":
                        raise event.as_error()
                    if event.type == "ADDED":
                        stamp = time.monotonic()
                        with self._cond:
                            self.first_seen.setdefault(event.object["metadata"]["name"], stamp)
                            self._cond.notify_all()
                    self._rv = event.object.get("metadata", {}).get("resourceVersion") or self._rv
            except Gone:
                if not self._stop.is_set():
                    self._relist()
            except (ApiError, TransportError, WatchTimeout):
                if not self._stop.is_set():
                    self._stop.wait(0.5)  # then watch again from the last resourceVersion
            finally:
                if self._watch is not None:
                    self._watch.stop()

    def _relist(self) -> None:
        listed = self._session.api.list(self._gvk, NAMESPACE)
        self._session.count("LIST", self._resource)
        now = time.monotonic()
        with self._cond:
            for item in listed.items:
                self.first_seen.setdefault(item["metadata"]["name"], now)
            self._cond.notify_all()
        self._rv = listed.resource_version

    def count(self, prefix: str = "") -> int:
        with self._cond:
            return sum(1 for name in self.first_seen if name.startswith(prefix))

    def wait_for(self, names: Sequence[str], timeout: float) -> bool:
        """Until every name in ``names`` was seen, at most ``timeout`` seconds; whether they all were."""
        deadline = time.monotonic() + timeout
        wanted = set(names)
        with self._cond:
            while not wanted <= self.first_seen.keys():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 1.0))
        return True

    def times(self, names: Iterable[str]) -> dict[str, float]:
        with self._cond:
            return {n: self.first_seen[n] for n in names if n in self.first_seen}


def manager_samples(handle: Any) -> list[Sample]:
    return parse_prometheus(handle.metrics_text())


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    reconciles: float
    errors: float
    depth: float
    active: float


def progress(handle: Any) -> Progress:
    samples = parse_prometheus(
        handle.metrics_text(),
        ("controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total", "workqueue_depth",
         "controller_runtime_active_workers"),
    )  # fmt: skip
    return Progress(
        reconciles=metric_sum(samples, "controller_runtime_reconcile_total", controller=CONTROLLER),
        errors=metric_sum(samples, "controller_runtime_reconcile_errors_total", controller=CONTROLLER),
        depth=metric_sum(samples, "workqueue_depth", name=CONTROLLER),
        active=metric_sum(samples, "controller_runtime_active_workers", controller=CONTROLLER),
    )


def wait_settled(handle: Any, *, quiet: float = 2.0, timeout: float = 600.0, interval: float = 0.25) -> float:
    """Poll the manager's metrics until its TrainJob queue is empty, no worker is busy and no reconcile
    happened for ``quiet`` seconds; returns the monotonic time the quiet period began."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    last = progress(handle)
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        pause.wait(interval)
        now = progress(handle)
        if now.reconciles != last.reconciles or now.depth or now.active:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet:
            return quiet_since
        last = now
    raise TimeoutError(f"{handle.name} did not settle within {timeout:g} s")


def wait_workers_started(which: str, handle: Any, timeout: float = 120.0) -> float:
    """The Unix time the TrainJob controller's workers started, waiting for the log line."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while time.monotonic() < deadline:
        started = workers_started_at(which, handle)
        if started is not None and started >= handle.started_at:
            return started
        if not handle.running():
            raise RuntimeError(f"{handle.name} exited; see {handle.log}")
        pause.wait(0.1)
    raise TimeoutError(f"{handle.name} did not start its workers within {timeout:g} s; see {handle.log}")


# ============================================================================================= load


def _timed_create(
    session: Session, answered: dict[str, float], latencies: dict[str, float] | None
) -> Callable[[Mapping[str, Any]], None]:
    """A create that records when it was answered (and, with ``latencies``, its round trip) by name."""

    def create(obj: Mapping[str, Any]) -> None:
        sent = time.monotonic()
        session.api.create(obj)
        done = time.monotonic()
        answered[obj["metadata"]["name"]] = done
        if latencies is not None:
            latencies[obj["metadata"]["name"]] = done - sent

    return create


def create_all(
    session: Session,
    objects: Sequence[Mapping[str, Any]],
    threads: int = CREATE_THREADS,
    *,
    latencies: dict[str, float] | None = None,
) -> dict[str, float]:
    """Create ``objects`` with ``threads`` client threads as fast as the API server takes them; returns
    the monotonic time each create was answered. ``latencies``, when given, receives each create request's
    round trip in seconds (from the moment its thread sends it)."""
    answered: dict[str, float] = {}
    create = _timed_create(session, answered, latencies)
    with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="bench/create") as pool:
        for future in [pool.submit(create, obj) for obj in objects]:
            future.result()
    session.count("POST", "trainjobs", len(objects))
    return answered


def create_paced(
    session: Session,
    objects: Sequence[Mapping[str, Any]],
    rate: float,
    threads: int = CREATE_THREADS,
    *,
    latencies: dict[str, float] | None = None,
) -> tuple[dict[str, float], float]:
    """Create ``objects`` open-loop at ``rate`` per second (create i is sent at start + i / rate, however
    long earlier ones take); returns the answer times and the largest lateness of a send, in seconds.
    ``latencies`` as in :func:`create_all`."""
    answered: dict[str, float] = {}
    late = 0.0
    pause = threading.Event()
    create = _timed_create(session, answered, latencies)
    with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="bench/paced") as pool:
        futures = []
        start = time.monotonic()
        for i, obj in enumerate(objects):
            due = start + i / rate
            wait = due - time.monotonic()
            if wait > 0:
                pause.wait(wait)
            late = max(late, time.monotonic() - due)
            futures.append(pool.submit(create, obj))
        for future in futures:
            future.result()
    session.count("POST", "trainjobs", len(objects))
    return answered, late


# ============================================================================================= scenarios
