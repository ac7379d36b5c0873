"""Workqueue throughput: add/get/done per second, printed (run with ``-m benchmark -s``; no timed assertions).

Measured on the real clock:

- ``sequential``: one thread adds, gets and marks done one key at a time (client-go ``BenchmarkQueue``).
- ``N workers``: the main thread adds distinct keys while N worker threads get and mark done; the figure is
  keys processed per second from the first add to the last ``done``.

Each is run for the plain queue, the rate-limiting queue and the priority queue, unnamed (no metrics) and
named (recording controller-runtime's ``workqueue_*`` metrics).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from controller.workqueue import PriorityQueue, Queue, RateLimitingQueue

N = 50_000

_names = itertools.count()


def _name(kind: str) -> str:
    return f"bench_{kind}_{next(_names)}"


QUEUES: dict[str, Callable[[], Any]] = {
    "Queue": Queue[int],
    "Queue (metrics)": lambda: Queue[int](name=_name("queue")),
    "RateLimitingQueue": RateLimitingQueue[int],
    "RateLimitingQueue (metrics)": lambda: RateLimitingQueue[int](name=_name("rlq")),
    "PriorityQueue": PriorityQueue[int],
    "PriorityQueue (metrics)": lambda: PriorityQueue[int](name=_name("pq")),
}


def sequential(q: Any, n: int) -> float:
    start = time.perf_counter()
    for key in range(n):
        q.add(key)
        item, _ = q.get()
        q.done(item)
    return n / (time.perf_counter() - start)


def with_workers(q: Any, n: int, workers: int) -> float:
    processed = itertools.count(1)
    all_done = threading.Event()

    def work() -> None:
        while True:
            item, _ = q.get()
            if item is None:
                return
            q.done(item)
            if next(processed) == n:
                all_done.set()

    threads = [threading.Thread(target=work, name=f"bench/worker-{i}") for i in range(workers)]
    for t in threads:
        t.start()
    start = time.perf_counter()
    for key in range(n):
        q.add(key)
    assert all_done.wait(120), "the workers did not process every key"
    elapsed = time.perf_counter() - start
    q.shut_down()
    for t in threads:
        t.join()
    return n / elapsed


@pytest.mark.benchmark
def test_workqueue_add_get_done_throughput() -> None:
    rows: list[tuple[str, float, float, float]] = []
    for label, make in QUEUES.items():
        figures = []
        for run in (
            lambda q: sequential(q, N),
            lambda q: with_workers(q, N, 1),
            lambda q: with_workers(q, N, 16),
        ):
            q = make()
            try:
                figures.append(run(q))
            finally:
                q.shut_down()
        rows.append((label, *figures))
    print()
    print(f"workqueue add/get/done, {N:,} distinct keys, items per second")
    print(f"{'queue':<30}{'sequential':>14}{'1 worker':>14}{'16 workers':>14}")
    for label, seq, one, sixteen in rows:
        print(f"{label:<30}{seq:>14,.0f}{one:>14,.0f}{sixteen:>14,.0f}")


@pytest.mark.benchmark
def test_workqueue_rate_limited_and_priority_add_cost() -> None:
    """What an error requeue and a prioritised add cost on the producer side."""
    results: dict[str, float] = {}
    q = RateLimitingQueue[int]()
    try:
        start = time.perf_counter()
        for key in range(N):
            q.add_rate_limited(key)
        results["RateLimitingQueue.add_rate_limited"] = N / (time.perf_counter() - start)
    finally:
        q.shut_down()
    pq = PriorityQueue[int]()
    try:
        start = time.perf_counter()
        for key in range(N):
            pq.add_with_opts(key, priority=key % 3 - 1)
        results["PriorityQueue.add_with_opts (3 priorities)"] = N / (time.perf_counter() - start)
        start = time.perf_counter()
        for key in range(N):
            pq.add_with_opts(key, priority=2)  # every key already queued: raise its priority
        results["PriorityQueue.add_with_opts (raise priority)"] = N / (time.perf_counter() - start)
        start = time.perf_counter()
        for _ in range(N):
            item, _, _ = pq.get_with_priority()
            assert item is not None
            pq.done(item)
        results["PriorityQueue.get_with_priority + done"] = N / (time.perf_counter() - start)
    finally:
        pq.shut_down()
    print()
    for label, rate in results.items():
        print(f"{label:<50}{rate:>14,.0f} /s")
