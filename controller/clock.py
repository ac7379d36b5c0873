"""Injectable time, after k8s.io/utils/clock.

Everything in ``controller/`` that waits or measures time takes a :class:`Clock`, so unit tests step a
:class:`FakeClock` instead of sleeping. Guarantees:

- ``monotonic()`` never goes backwards; it is what deadlines, backoff and leases are computed from.
- ``now()`` is wall-clock UTC, used only for timestamps written to the API (conditions, events, leases).
- ``wait(event, timeout)`` blocks until ``event`` is set or ``timeout`` seconds of *this clock's* time pass.
  With the fake clock, time passes only when a test calls :meth:`FakeClock.step`, which wakes every waiter
  whose deadline has been reached.

Deliberately missing: timers and tickers as objects (callers loop over ``wait``), and sleeping without an
event to interrupt it (every wait in this project must be stoppable).
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from typing import Protocol


class Clock(Protocol):
    """The time source every component takes."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...

    def now(self) -> _dt.datetime:
        """Wall-clock time, timezone-aware UTC."""
        ...

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        """Block until ``event`` is set (True) or ``timeout`` seconds pass (False); None waits forever."""
        ...


class RealClock:
    """The system clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> _dt.datetime:
        return _dt.datetime.now(_dt.UTC)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        if timeout is not None and timeout <= 0:
            return event.is_set()
        return event.wait(timeout)

    def __repr__(self) -> str:
        return "RealClock()"


REAL_CLOCK = RealClock()


class FakeClock:
    """A clock that moves only when :meth:`step` or :meth:`set` is called.

    Thread-safe. Threads blocked in :meth:`wait` wake when their event is set, or when the clock is stepped
    to or past their deadline. :meth:`waiters` tells a test how many threads are currently blocked, so it can
    wait for a background thread to reach its wait before stepping
    (``eventually(lambda: clk.waiters() == 1)``).
    """

    def __init__(self, start: float = 1000.0, *, wall: _dt.datetime | None = None) -> None:
        self._lock = threading.Condition()
        self._mono = start
        self._wall0 = wall or _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)
        self._start = start
        self._waiting = 0

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def now(self) -> _dt.datetime:
        with self._lock:
            return self._wall0 + _dt.timedelta(seconds=self._mono - self._start)

    def step(self, seconds: float) -> None:
        """Advance time by ``seconds`` (>= 0) and wake waiters whose deadline passed."""
        if seconds < 0:
            raise ValueError("a clock never steps backwards")
        with self._lock:
            self._mono += seconds
            self._lock.notify_all()

    def set(self, monotonic: float) -> None:
        """Move time forward to ``monotonic``."""
        with self._lock:
            if monotonic < self._mono:
                raise ValueError("a clock never steps backwards")
            self._mono = monotonic
            self._lock.notify_all()

    def waiters(self) -> int:
        """How many threads are blocked in :meth:`wait` right now."""
        with self._lock:
            return self._waiting

    def wake(self) -> None:
        """Re-check every waiter's event (call after setting an event a waiter watches)."""
        with self._lock:
            self._lock.notify_all()

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        with self._lock:
            deadline = None if timeout is None else self._mono + timeout
            self._waiting += 1
            try:
                while not event.is_set():
                    if deadline is not None and self._mono >= deadline:
                        return False
                    # Poll the event with a short real timeout: events set by other threads do not
                    # notify this condition. Fake time still only moves through step()/set().
                    self._lock.wait(0.005)
                return True
            finally:
                self._waiting -= 1

    def __repr__(self) -> str:
        return f"FakeClock(monotonic={self._mono:.3f}, waiters={self._waiting})"
