"""`controller.manager.memory`: glibc's arenas limited, free heap pages given back on a period."""

from __future__ import annotations

import threading

import pytest

from controller.clock import FakeClock
from controller.manager.memory import MemoryScavenger, limit_malloc_arenas, malloc_trim


def test_the_scavenger_trims_once_per_period_and_its_thread_ends_with_stop() -> None:
    clock = FakeClock()
    trimmed = threading.Semaphore(0)

    def trim() -> bool:
        trimmed.release()
        return True

    scavenger = MemoryScavenger(60.0, trim=trim, clock=clock)
    scavenger.start(threading.Event())
    assert [t for t in threading.enumerate() if t.name == "memory-scavenger"]
    for expected in (1, 2, 3):
        while clock.waiters() == 0:
            clock.wake()
        assert not trimmed.acquire(blocking=False)  # nothing before the period is up
        clock.step(60.0)
        assert trimmed.acquire(timeout=5)
        assert scavenger.trims in (expected - 1, expected)
    assert scavenger.stop(timeout=5)
    clock.wake()
    assert not [t for t in threading.enumerate() if t.name == "memory-scavenger"]
    assert scavenger.stop(timeout=1)  # idempotent
    assert not scavenger.need_leader_election()


def test_a_scavenger_never_started_stops_at_once() -> None:
    assert MemoryScavenger().stop(timeout=0)
    with pytest.raises(ValueError, match="period"):
        MemoryScavenger(0)


def test_an_explicit_malloc_arena_max_in_the_environment_is_left_alone() -> None:
    assert limit_malloc_arenas(environ={"MALLOC_ARENA_MAX": "4"}) is False


def test_glibc_calls_answer_without_raising() -> None:
    assert isinstance(malloc_trim(), bool)
