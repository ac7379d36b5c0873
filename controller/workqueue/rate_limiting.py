"""A delaying work queue that asks a rate limiter how long a retried item should wait.

Go origin: client-go ``util/workqueue/rate_limiting_queue.go`` (``TypedRateLimitingInterface``,
``rateLimitingType``).

Guarantees, on top of :class:`~controller.workqueue.delaying.DelayingQueue`'s:

- ``add_rate_limited(item)`` is exactly ``add_after(item, rate_limiter.when(item))``.
- ``forget`` and ``num_requeues`` are the rate limiter's: ``forget`` clears the backoff of an item (call it
  when the item succeeds or is given up on; it does not replace ``done``).
- The rate limiter is called without any queue lock held.

:class:`RateLimitingInterface` is the seam the controller's worker loop is written against; both
:class:`RateLimitingQueue` and :class:`~controller.workqueue.priority.PriorityQueue` satisfy it.

Deliberately missing: injecting a custom delaying queue (``TypedRateLimitingQueueConfig.DelayingQueue``);
subclass instead.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol, TypeVar

from controller.clock import REAL_CLOCK, Clock
from controller.workqueue.delaying import DelayingInterface, DelayingQueue
from controller.workqueue.metrics import MetricsProvider
from controller.workqueue.queue import Ordering
from controller.workqueue.rate_limiters import RateLimiter, default_controller_rate_limiter

T = TypeVar("T", bound=Hashable)


class RateLimitingInterface(DelayingInterface[T], Protocol[T]):
    """A queue that rate limits retried items (client-go ``TypedRateLimitingInterface``)."""

    def add_rate_limited(self, item: T) -> None:
        """Add ``item`` once the rate limiter says it may be retried."""
        ...

    def forget(self, item: T) -> None:
        """Stop tracking ``item``'s retries (success or given up); still call ``done``."""
        ...

    def num_requeues(self, item: T) -> int:
        """How many times ``item`` has been rate-limited since it was last forgotten."""
        ...


class RateLimitingQueue(DelayingQueue[T]):
    """A :class:`~controller.workqueue.delaying.DelayingQueue` with a rate limiter.

    ``rate_limiter`` defaults to :func:`~controller.workqueue.rate_limiters.default_controller_rate_limiter`
    on the queue's clock. Remember to call :meth:`forget`, or failures of an item are tracked forever.
    """

    def __init__(
        self,
        rate_limiter: RateLimiter[T] | None = None,
        *,
        name: str = "",
        clock: Clock = REAL_CLOCK,
        metrics_provider: MetricsProvider | None = None,
        ordering: Ordering[T] | None = None,
    ) -> None:
        super().__init__(name=name, clock=clock, metrics_provider=metrics_provider, ordering=ordering)
        self.rate_limiter: RateLimiter[T] = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter(clock=clock)
        )

    def add_rate_limited(self, item: T) -> None:
        """``add_after(item, rate_limiter.when(item))``."""
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """Clear ``item``'s backoff in the rate limiter; the caller still owes ``done``."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """The rate limiter's count of ``item``'s retries."""
        return self.rate_limiter.num_requeues(item)
