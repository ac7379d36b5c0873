"""controller.client.flowcontrol: the token bucket every request waits on (client-go ``util/flowcontrol``).

Cases mirror ``client-go/util/flowcontrol/throttle_test.go``; time is a FakeClock, so nothing here sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from controller.client.flowcontrol import TokenBucketRateLimiter
from controller.clock import FakeClock


def _accept_in_thread(
    limiter: TokenBucketRateLimiter, name: str, stop: threading.Event | None = None
) -> tuple[threading.Thread, list[bool]]:
    result: list[bool] = []
    # Daemon, so a failing test cannot hang the interpreter at exit; the leak check still reports it.
    thread = threading.Thread(
        target=lambda: result.append(limiter.accept(stop)), name=f"test/{name}", daemon=True
    )
    thread.start()
    return thread, result


def test_the_bucket_starts_full_and_then_refuses(clock: FakeClock) -> None:
    # TestBasicThrottle
    limiter = TokenBucketRateLimiter(1, 3, clock=clock)
    assert [limiter.try_accept() for _ in range(3)] == [True, True, True]
    assert limiter.try_accept() is False


def test_tokens_come_back_at_qps(clock: FakeClock) -> None:
    # TestIncrementThrottle
    limiter = TokenBucketRateLimiter(1, 1, clock=clock)
    assert limiter.try_accept()
    assert not limiter.try_accept()
    clock.step(0.5)
    assert not limiter.try_accept()
    clock.step(0.5)
    assert limiter.try_accept()


def test_an_idle_bucket_never_banks_more_than_burst(clock: FakeClock) -> None:
    limiter = TokenBucketRateLimiter(10, 2, clock=clock)
    clock.step(3600)
    assert [limiter.try_accept() for _ in range(3)] == [True, True, False]


def test_wait_time_says_when_the_next_token_comes_and_takes_nothing(clock: FakeClock) -> None:
    limiter = TokenBucketRateLimiter(4, 1, clock=clock)
    assert limiter.wait_time() == 0.0
    assert limiter.try_accept()
    assert limiter.wait_time() == pytest.approx(0.25)
    clock.step(0.1)
    assert limiter.wait_time() == pytest.approx(0.15)
    clock.step(0.15)
    assert limiter.wait_time() == 0.0
    assert limiter.try_accept()


def test_accept_takes_a_banked_token_without_waiting(clock: FakeClock) -> None:
    limiter = TokenBucketRateLimiter(1, 2, clock=clock)
    assert limiter.accept() and limiter.accept()
    assert clock.waiters() == 0


def test_accept_blocks_until_the_clock_reaches_its_turn(
    clock: FakeClock, wait_until: Callable[..., None]
) -> None:
    # TestThrottle: with the bucket empty, accept returns only once 1/qps has passed.
    # (Steps are binary fractions so the fake time adds up exactly.)
    limiter = TokenBucketRateLimiter(4, 1, clock=clock)
    assert limiter.accept()
    thread, result = _accept_in_thread(limiter, "accept")
    wait_until(lambda: clock.waiters() == 1)
    clock.step(0.125)
    assert thread.is_alive() and result == []
    clock.step(0.125)
    thread.join(5)
    assert result == [True]


def test_waiting_callers_are_served_in_reservation_order(
    clock: FakeClock, wait_until: Callable[..., None]
) -> None:
    limiter = TokenBucketRateLimiter(4, 1, clock=clock)
    assert limiter.accept()
    first, first_result = _accept_in_thread(limiter, "first")
    wait_until(lambda: clock.waiters() == 1)
    second, second_result = _accept_in_thread(limiter, "second")
    wait_until(lambda: clock.waiters() == 2)
    clock.step(0.25)
    first.join(5)
    assert first_result == [True]
    assert second.is_alive() and second_result == []
    clock.step(0.25)
    second.join(5)
    assert second_result == [True]


def test_a_stopped_wait_returns_false_and_gives_its_token_back(
    clock: FakeClock, wait_until: Callable[..., None]
) -> None:
    # TestWait (a cancelled context): the reservation is cancelled.
    limiter = TokenBucketRateLimiter(1, 1, clock=clock)
    assert limiter.accept()
    stop = threading.Event()
    thread, result = _accept_in_thread(limiter, "stopped", stop)
    wait_until(lambda: clock.waiters() == 1)
    stop.set()
    clock.wake()
    thread.join(5)
    assert result == [False]
    # Had the token not come back, the next one would be 2 s away.
    assert limiter.wait_time() == pytest.approx(1.0)


def test_accept_with_stop_already_set_takes_nothing(clock: FakeClock) -> None:
    limiter = TokenBucketRateLimiter(1, 1, clock=clock)
    stop = threading.Event()
    stop.set()
    assert limiter.accept(stop) is False
    assert limiter.try_accept()


def test_qps_and_burst_must_be_positive(clock: FakeClock) -> None:
    with pytest.raises(ValueError, match="qps"):
        TokenBucketRateLimiter(0, 1, clock=clock)
    with pytest.raises(ValueError, match="burst"):
        TokenBucketRateLimiter(1, 0, clock=clock)


def test_the_defaults_are_kubeflow_trainers(clock: FakeClock) -> None:
    limiter = TokenBucketRateLimiter(clock=clock)
    assert (limiter.qps, limiter.burst) == (50.0, 100)
    assert repr(limiter) == "TokenBucketRateLimiter(qps=50, burst=100, tokens=100.00)"
