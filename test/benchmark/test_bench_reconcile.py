"""Benchmark: no-op reconciles per second through the full Controller ("no-op reconciles per second
per core"). Run with ``pytest -m benchmark -s test/benchmark/test_bench_reconcile.py``.

Path measured: an in-memory source delivers an add event per object → predicates (none) → the
``EnqueueRequestForObject`` handler → the priority queue (with its Prometheus metrics) → N worker threads →
the reconcile handler (UUID reconcile ID, structlog context binding, metrics, forget) → a reconciler that
does nothing. Reported: wall-clock throughput, and throughput per CPU-second of the process (what one core
sustains; the GIL makes extra workers add no CPU parallelism for pure-Python work).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from controller.controller.controller import Controller
from controller.controller.handler import EnqueueRequestForObject
from controller.controller.reconcile import Request, Result
from controller.controller.source import Kind

pytestmark = pytest.mark.benchmark

OBJECTS = 20_000


class MemorySource:
    """An informer stand-in: registered handlers get events on the caller's thread; always synced."""

    def __init__(self) -> None:
        self.handlers: list[Any] = []

    def add_event_handler(self, handler: Any, resync_period: float | None = None) -> Any:
        self.handlers.append(handler)
        return self

    def remove_event_handler(self, registration: Any) -> None:
        self.handlers.clear()

    def has_synced(self) -> bool:
        return True

    def add(self, obj: dict[str, Any], initial: bool) -> None:
        for handler in self.handlers:
            handler.on_add(obj, initial)


class NoOp:
    def __init__(self, expected: int) -> None:
        self.count = 0
        self.expected = expected
        self.lock = threading.Lock()
        self.done = threading.Event()

    def reconcile(self, request: Request) -> Result:
        with self.lock:
            self.count += 1
            if self.count == self.expected:
                self.done.set()
        return Result()


@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("use_priority_queue", [True, False], ids=["priority-queue", "rate-limiting-queue"])
def test_noop_reconciles_per_second(workers: int, use_priority_queue: bool) -> None:
    objects = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"cm-{i}", "namespace": "bench", "resourceVersion": "1"},
        }
        for i in range(OBJECTS)
    ]
    reconciler = NoOp(OBJECTS)
    name = f"bench-{workers}-{'pq' if use_priority_queue else 'rl'}"
    ctrl = Controller(
        name, reconciler, max_concurrent_reconciles=workers, use_priority_queue=use_priority_queue
    )
    source = MemorySource()
    ctrl.watch(Kind(source, EnqueueRequestForObject()))
    try:
        assert ctrl.warmup()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        for obj in objects:
            source.add(obj, True)
        wall1, cpu1 = time.perf_counter(), time.process_time()
        ctrl.start()
        assert reconciler.done.wait(300)
        wall2, cpu2 = time.perf_counter(), time.process_time()
    finally:
        ctrl.stop(30)
    enqueue_rate = OBJECTS / (wall1 - wall0)
    enqueue_cpu_us = (cpu1 - cpu0) / OBJECTS * 1e6
    reconcile_wall = OBJECTS / (wall2 - wall1)
    reconcile_cpu = OBJECTS / max(cpu2 - cpu1, 1e-9)
    print(
        f"\n{name}: {OBJECTS} objects; events→queue {enqueue_rate:,.0f}/s "
        f"({enqueue_cpu_us:.1f} µs CPU each); "
        f"no-op reconciles {reconcile_wall:,.0f}/s wall, {reconcile_cpu:,.0f}/s per CPU-second "
        f"({(cpu2 - cpu1) / OBJECTS * 1e6:.1f} µs CPU each)"
    )
