"""Fixtures for the workqueue tests: a fake clock, unique queue names, bounded waits, joined helper threads.

No test here sleeps to order events. A test that needs another thread to reach a point waits for an
observable condition with ``wait_until`` (a bounded poll, as client-go's ``wait.Poll``), a
``threading.Event``, or a join with a timeout; fake time moves only through ``FakeClock.step``.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.clock import FakeClock
from controller.envtest import wait_until
from controller.metrics import REGISTRY

BOUND = 5.0  # seconds any handshake may take before the test fails

_names = itertools.count()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[], str]:
    """Queue names unique in the process: the metrics registry is process-global."""
    base = request.node.name.replace("[", "_").replace("]", "").replace("-", "_")[:40]

    def make() -> str:
        return f"{base}_{next(_names)}"

    return make


@pytest.fixture(name="wait_until")
def wait_until_fixture() -> Callable[..., None]:
    """:func:`controller.envtest.wait_until`, bounded by :data:`BOUND` and re-checking every 0.5 ms."""
    return functools.partial(wait_until, timeout=BOUND, interval=0.0005)


@dataclass
class Spawned:
    """A helper thread started by a test, its result and its exception."""

    thread: threading.Thread
    result: Any = None
    error: BaseException | None = None
    finished: threading.Event = field(default_factory=threading.Event)

    def join(self, timeout: float = BOUND) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self.thread.name} did not finish within {timeout}s"
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def spawn() -> Iterator[Callable[..., Spawned]]:
    """Start ``fn(*args)`` in a named thread; every thread is joined (bounded) at teardown."""
    started: list[Spawned] = []

    def start(fn: Callable[..., Any], *args: Any, name: str = "test/helper") -> Spawned:
        def run() -> None:
            try:
                spawned.result = fn(*args)
            except BaseException as exc:
                spawned.error = exc
            finally:
                spawned.finished.set()

        spawned = Spawned(thread=threading.Thread(target=run, name=name, daemon=True))
        started.append(spawned)
        spawned.thread.start()
        return spawned

    yield start
    for spawned in started:
        spawned.thread.join(BOUND)


def blocked_waiters(condition: threading.Condition) -> int:
    """How many threads are blocked in ``condition.wait()`` (CPython keeps them in ``_waiters``)."""
    with condition:
        return len(condition._waiters)  # type: ignore[attr-defined]


@pytest.fixture(name="blocked_waiters")
def blocked_waiters_fixture() -> Callable[[threading.Condition], int]:
    return blocked_waiters


def sample(metric: str, name: str, **labels: str) -> float:
    """A sample of a workqueue series for queue ``name``, 0.0 when absent."""
    value = REGISTRY.get_sample_value(metric, {"name": name, "controller": name, **labels})
    return 0.0 if value is None else value


@pytest.fixture(name="sample")
def sample_fixture() -> Callable[..., float]:
    return sample
