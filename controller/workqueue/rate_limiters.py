"""Rate limiters: how long an item should wait before it is retried.

Go origin: client-go ``util/workqueue/default_rate_limiters.go`` and, for :class:`BucketRateLimiter`,
``golang.org/x/time/rate`` (``Limiter.Reserve().Delay()``).

Guarantees:

- ``when(item)`` returns seconds (a float) and records one failure of ``item`` where the limiter counts them;
  ``forget(item)`` clears that record; ``num_requeues(item)`` reports it. Callers must ``forget`` an item
  once it succeeds or is given up on, or its count (and memory) stays.
- Every limiter is thread-safe.
- :class:`ItemExponentialFailureRateLimiter` never overflows: a delay too large for Go's ``time.Duration``
  (or for a float) is the maximum delay.
- :class:`BucketRateLimiter` reserves a token on every ``when``: the delay it returns is the time until that
  reservation may act, so ``burst`` calls return 0 and each later call waits ``1/qps`` longer than the last
  (tokens refill at ``qps`` per second of the injected clock, up to ``burst``).

Deliberately missing: the untyped/deprecated constructors, and reservation cancellation (client-go never
cancels a workqueue reservation either).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from controller.clock import REAL_CLOCK, Clock

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)

INF_DURATION = (2**63 - 1) / 1e9
"""Go's ``rate.InfDuration`` (the largest ``time.Duration``) in seconds: the delay of a reservation that can
never act."""


class RateLimiter(Protocol[T_contra]):
    """Decides how long an item waits before its next attempt (client-go ``TypedRateLimiter``)."""

    def when(self, item: T_contra) -> float:
        """Seconds ``item`` should wait; counts one more failure of it."""
        ...

    def forget(self, item: T_contra) -> None:
        """Stop tracking ``item`` (it succeeded, or was given up on)."""
        ...

    def num_requeues(self, item: T_contra) -> int:
        """How many failures of ``item`` are being tracked."""
        ...


class _PerItemFailures(Generic[T]):
    """The failures counted per item, as both of client-go's per-item limiters keep them (``failures`` under
    a mutex): ``num_requeues`` and ``forget`` read and clear the count that ``when`` adds to."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: dict[T, int] = {}

    def _count_failure(self, item: T) -> int:
        """Count one more failure of ``item``; return how many were counted before it."""
        with self._lock:
            before = self._failures.get(item, 0)
            self._failures[item] = before + 1
        return before

    def num_requeues(self, item: T) -> int:
        with self._lock:
            return self._failures.get(item, 0)

    def forget(self, item: T) -> None:
        with self._lock:
            self._failures.pop(item, None)
            if not self._failures:
                self._failures.clear()  # frees the emptied table (controller.workqueue.queue, "Memory")


class ItemExponentialFailureRateLimiter(_PerItemFailures[T]):
    """``base * 2**failures`` per item, capped at ``max``.

    client-go ``TypedItemExponentialFailureRateLimiter``. The first ``when`` of an item returns ``base``.
    Giving up after too many failures is the caller's job.
    """

    def __init__(self, base: float = 0.005, max: float = 1000.0) -> None:
        super().__init__()
        self._base = base
        self._max = max

    def when(self, item: T) -> float:
        exp = self._count_failure(item)
        try:
            backoff = self._base * 2.0**exp
        except OverflowError:
            return self._max
        # Go computes in integer nanoseconds and caps at the largest Duration before comparing with max.
        if backoff > INF_DURATION:
            return self._max
        return min(backoff, self._max)

    def __repr__(self) -> str:
        return f"ItemExponentialFailureRateLimiter(base={self._base}, max={self._max})"


class ItemFastSlowRateLimiter(_PerItemFailures[T]):
    """``fast`` for an item's first ``max_fast_attempts`` failures, ``slow`` after
    (client-go ``TypedItemFastSlowRateLimiter``)."""

    def __init__(self, fast: float, slow: float, max_fast_attempts: int) -> None:
        super().__init__()
        self._fast = fast
        self._slow = slow
        self._max_fast_attempts = max_fast_attempts

    def when(self, item: T) -> float:
        failures = self._count_failure(item) + 1
        return self._fast if failures <= self._max_fast_attempts else self._slow

    def __repr__(self) -> str:
        return (
            f"ItemFastSlowRateLimiter(fast={self._fast}, slow={self._slow}, "
            f"max_fast_attempts={self._max_fast_attempts})"
        )


class BucketRateLimiter(Generic[T]):
    """An overall token bucket, shared by all items (client-go ``TypedBucketRateLimiter`` over
    ``rate.NewLimiter(qps, burst)``).

    ``when`` reserves one token and returns how long until the reservation may act, as
    ``Limiter.Reserve().Delay()``: the bucket starts full; ``qps`` may be ``math.inf`` (never waits). A
    reservation that can never act (``burst`` < 1, or ``qps`` <= 0 with the bucket empty) returns
    :data:`INF_DURATION`. It tracks no item: ``num_requeues`` is 0 and ``forget`` does nothing.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, *, clock: Clock = REAL_CLOCK) -> None:
        self._qps = qps
        self._burst = burst
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._last: float | None = None  # clock time of the last reservation (rate.Limiter.last)

    def when(self, item: T) -> float:
        if self._qps == math.inf:
            return 0.0
        with self._lock:
            now = self._clock.monotonic()
            # advance: refill for the time since the last reservation, up to burst
            elapsed = 0.0 if self._last is None else max(0.0, now - self._last)
            tokens = min(self._tokens + self._tokens_from(elapsed), float(self._burst))
            tokens -= 1
            wait = 0.0 if tokens >= 0 else self._duration_from(-tokens)
            if self._burst < 1 or wait == INF_DURATION:
                return INF_DURATION
            self._last = now
            self._tokens = tokens
            return wait

    def _tokens_from(self, seconds: float) -> float:
        return seconds * self._qps if self._qps > 0 else 0.0

    def _duration_from(self, tokens: float) -> float:
        if self._qps <= 0:
            return INF_DURATION
        return min(tokens / self._qps, INF_DURATION)

    def num_requeues(self, item: T) -> int:
        return 0

    def forget(self, item: T) -> None:
        pass

    def __repr__(self) -> str:
        return f"BucketRateLimiter(qps={self._qps}, burst={self._burst})"


class MaxOfRateLimiter(Generic[T]):
    """The longest delay of several limiters (client-go ``TypedMaxOfRateLimiter``).

    Every limiter is asked on every ``when`` (so each records the failure). Combined with a token bucket,
    the burst may appear exceeded when some items were delayed longer by another limiter.
    """

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        self._limiters = limiters

    def when(self, item: T) -> float:
        delay = 0.0
        for limiter in self._limiters:
            delay = max(delay, limiter.when(item))
        return delay

    def num_requeues(self, item: T) -> int:
        return max((limiter.num_requeues(item) for limiter in self._limiters), default=0)

    def forget(self, item: T) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def __repr__(self) -> str:
        return f"MaxOfRateLimiter({', '.join(repr(limiter) for limiter in self._limiters)})"


class WithMaxWaitRateLimiter(Generic[T]):
    """Caps another limiter's delay at ``max_delay`` (client-go ``TypedWithMaxWaitRateLimiter``)."""

    def __init__(self, limiter: RateLimiter[T], max_delay: float) -> None:
        self._limiter = limiter
        self._max_delay = max_delay

    def when(self, item: T) -> float:
        return min(self._limiter.when(item), self._max_delay)

    def num_requeues(self, item: T) -> int:
        return self._limiter.num_requeues(item)

    def forget(self, item: T) -> None:
        self._limiter.forget(item)

    def __repr__(self) -> str:
        return f"WithMaxWaitRateLimiter({self._limiter!r}, max_delay={self._max_delay})"


def default_controller_rate_limiter(*, clock: Clock = REAL_CLOCK) -> MaxOfRateLimiter[T]:
    """Per-item exponential backoff (5 ms to 1000 s) and an overall bucket of 10 qps, burst 100
    (client-go ``DefaultTypedControllerRateLimiter``). The bucket only paces retries."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(10.0, 100, clock=clock),
    )


def default_item_based_rate_limiter() -> ItemExponentialFailureRateLimiter[T]:
    """Per-item exponential backoff, 1 ms to 1000 s (client-go ``DefaultTypedItemBasedRateLimiter``)."""
    return ItemExponentialFailureRateLimiter(0.001, 1000.0)
