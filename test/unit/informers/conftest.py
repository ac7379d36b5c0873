"""Fixtures for the informer tests.

- ``auto_clock``: a clock on which every wait that would time out returns at once, having advanced time by
  its timeout. It makes backoff loops run instantly and deterministically, and the elapsed fake time is the
  sum of the delays waited: what the backoff tests measure. Waits without a timeout block on their event.
- ``recorder``: a factory of handlers that record the notifications they receive, with ``wait_for`` to
  block (on a condition, not a sleep) until the background delivery thread has delivered what a test
  expects.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from typing import Any

import pytest

from controller.informers.store import DeletedFinalStateUnknown, meta_namespace_key


class AutoAdvanceClock:
    """A ``Clock`` whose timed waits return immediately after moving time forward by the timeout."""

    def __init__(self, start: float = 1000.0) -> None:
        self._lock = threading.Lock()
        self._mono = start
        self.waited: list[float] = []

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def now(self) -> dt.datetime:
        with self._lock:
            return dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=self._mono)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._mono += seconds

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        if event.is_set():
            return True
        if timeout is None:
            return event.wait()
        with self._lock:
            self._mono += max(timeout, 0.0)
            self.waited.append(timeout)
        return event.is_set()


class Recorder:
    """A ResourceEventHandler that writes down what it was told, as readable tuples.

    ``("add", key, rv, is_in_initial_list)``, ``("update", key, old_rv, new_rv)``,
    ``("delete", key, rv, is_tombstone)``. ``gate``, when given, must be set before each notification is
    handled: a slow handler under the test's control.
    """

    def __init__(self, gate: threading.Event | None = None) -> None:
        self._cond = threading.Condition()
        self.events: list[tuple[Any, ...]] = []
        self.objects: list[Any] = []
        self.gate = gate

    def _record(self, event: tuple[Any, ...], obj: Any) -> None:
        if self.gate is not None:
            self.gate.wait(30)
        with self._cond:
            self.events.append(event)
            self.objects.append(obj)
            self._cond.notify_all()

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self._record(("add", meta_namespace_key(obj), _rv(obj), is_in_initial_list), obj)

    def on_update(self, old: Any, new: Any) -> None:
        self._record(("update", meta_namespace_key(new), _rv(old), _rv(new)), new)

    def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            self._record(("delete", obj.key, _rv(obj.obj), True), obj)
        else:
            self._record(("delete", meta_namespace_key(obj), _rv(obj), False), obj)

    def wait_for(self, predicate: Callable[[list[tuple[Any, ...]]], bool], timeout: float = 10.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self.events), timeout)

    def wait_for_count(self, n: int, timeout: float = 10.0) -> list[tuple[Any, ...]]:
        assert self.wait_for(lambda ev: len(ev) >= n, timeout), f"got only {self.events}"
        with self._cond:
            return list(self.events)


def _rv(obj: Any) -> str | None:
    if isinstance(obj, dict):
        rv = obj.get("metadata", {}).get("resourceVersion")
        return rv if isinstance(rv, str) else None
    return None


@pytest.fixture
def auto_clock() -> AutoAdvanceClock:
    return AutoAdvanceClock()


@pytest.fixture
def recorder() -> Callable[..., Recorder]:
    return Recorder
