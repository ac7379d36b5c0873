"""Client-side request throttling: a token bucket, after client-go's ``util/flowcontrol``.

Go origin: ``k8s.io/client-go/util/flowcontrol/throttle.go`` (``NewTokenBucketRateLimiterWithClock``), which
wraps ``golang.org/x/time/rate.Limiter``. The REST client keeps one bucket per resource type (as
controller-runtime keeps one REST client per type) and calls :meth:`TokenBucketRateLimiter.accept` on it
before every request, so requests for one resource never exceed ``qps`` per second on average, with bursts
of up to ``burst``. Kubeflow Trainer runs with QPS 50 / burst 100; those are the defaults here.

Guarantees (those of ``rate.Limiter``):

- The bucket starts full: the first ``burst`` requests pass at once.
- Tokens accrue continuously at ``qps`` per second up to ``burst``.
- :meth:`accept` *reserves* a token, possibly driving the balance negative, then waits until the reservation
  matures. Reservations are first come, first served: a later caller never overtakes an earlier one.
- A wait interrupted by ``stop`` cancels its reservation and returns the token, so aborted callers do not
  slow down the rest.
- Time comes from the injected :class:`~controller.clock.Clock`; tests step a ``FakeClock``.

Deliberately missing: ``rate.Limiter``'s precise restore arithmetic on cancel (it also accounts for tokens
reserved after the cancelled one; we return the whole token), ``AcceptN``/``Reserve`` for n > 1, and changing
``qps`` or ``burst`` after construction. A limiter with ``qps <= 0`` is not a thing: pass no limiter to the
client instead (controller-runtime's ``QPS: -1``).
"""

from __future__ import annotations

import threading

from controller.clock import REAL_CLOCK, Clock


class TokenBucketRateLimiter:
    """A thread-safe token bucket: ``qps`` tokens per second, at most ``burst`` banked."""

    def __init__(self, qps: float = 50.0, burst: int = 100, *, clock: Clock = REAL_CLOCK) -> None:
        if qps <= 0:
            raise ValueError(f"qps must be positive, got {qps}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self._qps = float(qps)
        self._burst = burst
        self._clock = clock
        self._lock = threading.Lock()
        # Invariant: _tokens <= _burst; it is negative while reservations wait for their turn.
        self._tokens = float(burst)
        # The clock reading _tokens was last brought up to date at.
        self._last = clock.monotonic()

    @property
    def qps(self) -> float:
        return self._qps

    @property
    def burst(self) -> int:
        return self._burst

    def _advance(self, now: float) -> None:
        """Credit the tokens accrued since the last update (caller holds the lock)."""
        elapsed = now - self._last
        if elapsed > 0:
            self._tokens = min(float(self._burst), self._tokens + elapsed * self._qps)
            self._last = now

    def try_accept(self) -> bool:
        """Take a token if one is available now; never blocks."""
        with self._lock:
            self._advance(self._clock.monotonic())
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False

    def wait_time(self) -> float:
        """Seconds until a token would be available to a new caller; 0 if one is available now.

        Takes nothing: two callers told 0 may still race for one token.
        """
        with self._lock:
            self._advance(self._clock.monotonic())
            if self._tokens >= 1.0:
                return 0.0
            return (1.0 - self._tokens) / self._qps

    def accept(self, stop: threading.Event | None = None) -> bool:
        """Block until a token is ours. Returns True, or False if ``stop`` was set first (token returned)."""
        if stop is not None and stop.is_set():
            return False
        with self._lock:
            now = self._clock.monotonic()
            self._advance(now)
            self._tokens -= 1.0
            if self._tokens >= 0:
                return True
            ready_at = now - self._tokens / self._qps
        waiter = stop if stop is not None else threading.Event()
        remaining = ready_at - self._clock.monotonic()
        if remaining > 0 and self._clock.wait(waiter, remaining):
            with self._lock:
                self._advance(self._clock.monotonic())
                self._tokens = min(float(self._burst), self._tokens + 1.0)
            return False
        return True

    def __repr__(self) -> str:
        with self._lock:
            tokens = self._tokens
        return f"TokenBucketRateLimiter(qps={self._qps:g}, burst={self._burst}, tokens={tokens:.2f})"
