"""`controller.manager.memory`: glibc's arenas limited, free heap pages given back when work ends and on a
period."""

from __future__ import annotations

import threading

import pytest

from controller.clock import FakeClock
from controller.envtest import wait_until
from controller.manager.memory import MemoryScavenger, limit_malloc_arenas, malloc_trim


class _Process:
    """The scavenger's view of the process: CPU seconds that a test spends, and the trims it saw."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.reads = 0
        self.trimmed: list[float] = []

    def cpu_time(self) -> float:
        self.reads += 1
        return self.cpu


def _scavenger(process: _Process, clock: FakeClock, **kwargs: float) -> MemoryScavenger:
    def trim() -> bool:
        process.trimmed.append(clock.monotonic())
        return True

    scavenger = MemoryScavenger(trim=trim, cpu_time=process.cpu_time, clock=clock, **kwargs)
    scavenger.start(threading.Event())
    wait_until(lambda: clock.waiters() == 1, timeout=5, interval=0.0005)
    return scavenger


def _poll(process: _Process, clock: FakeClock, seconds: float, *, cpu: float = 0.0) -> None:
    """One poll of ``seconds`` during which the process spent ``cpu`` CPU seconds; returns once the
    scavenger has read the CPU time and is waiting again."""
    reads = process.reads
    process.cpu += cpu
    clock.step(seconds)
    wait_until(lambda: process.reads > reads and clock.waiters() == 1, timeout=5, interval=0.0005)


def test_an_idle_process_is_trimmed_once_per_period_and_the_thread_ends_with_stop() -> None:
    clock, process = FakeClock(start=0.0), _Process()
    scavenger = _scavenger(process, clock, period=60.0, poll=10.0)
    assert [t for t in threading.enumerate() if t.name == "memory-scavenger"]
    for _ in range(18):
        _poll(process, clock, 10.0)
    assert process.trimmed == [60.0, 120.0, 180.0]
    assert scavenger.trims == 3
    assert scavenger.stop(timeout=5)
    assert not [t for t in threading.enumerate() if t.name == "memory-scavenger"]
    assert scavenger.stop(timeout=1)  # idempotent
    assert not scavenger.need_leader_election()


def test_the_end_of_a_spell_of_work_is_trimmed_at_the_first_idle_poll() -> None:
    clock, process = FakeClock(start=0.0), _Process()
    scavenger = _scavenger(process, clock, period=60.0, poll=1.0, min_gap=5.0)
    for _ in range(10):  # ten busy seconds: a restart's lists and initial reconciles
        _poll(process, clock, 1.0, cpu=0.9)
    assert process.trimmed == []  # nothing while the work goes on
    _poll(process, clock, 1.0, cpu=0.05)  # a twentieth of a core: idle
    assert process.trimmed == [11.0]
    for _ in range(20):  # idle again: nothing more until the period is up
        _poll(process, clock, 1.0, cpu=0.01)
    assert process.trimmed == [11.0]
    scavenger.stop(timeout=5)


def test_work_ending_soon_after_a_trim_waits_for_the_gap_and_a_busy_process_still_trims_each_period() -> None:
    clock, process = FakeClock(start=0.0), _Process()
    scavenger = _scavenger(process, clock, period=60.0, poll=1.0, min_gap=5.0)
    _poll(process, clock, 1.0, cpu=0.5)
    _poll(process, clock, 1.0)
    assert process.trimmed == []  # 2 s after the start: within the gap
    for _ in range(2):
        _poll(process, clock, 1.0)
    assert process.trimmed == []
    _poll(process, clock, 1.0)
    assert process.trimmed == [5.0]  # the first idle poll once the gap has passed
    # Alternating work and rest every second: at most one trim per gap.
    for _ in range(20):
        _poll(process, clock, 1.0, cpu=0.5)
        _poll(process, clock, 1.0)
    gaps = [b - a for a, b in zip(process.trimmed, process.trimmed[1:], strict=False)]
    assert gaps == [6.0] * 6  # the first rest once 5 s have passed: every third cycle
    # Busy without a pause: the period still trims.
    before = len(process.trimmed)
    for _ in range(130):
        _poll(process, clock, 1.0, cpu=1.0)
    assert len(process.trimmed) - before == 2
    scavenger.stop(timeout=5)


def test_a_scavenger_never_started_stops_at_once() -> None:
    assert MemoryScavenger().stop(timeout=0)
    with pytest.raises(ValueError, match="period"):
        MemoryScavenger(0)
    with pytest.raises(ValueError, match="poll"):
        MemoryScavenger(60.0, poll=61.0)
    with pytest.raises(ValueError, match="min_gap"):
        MemoryScavenger(60.0, min_gap=-1.0)


def test_an_explicit_malloc_arena_max_in_the_environment_is_left_alone() -> None:
    assert limit_malloc_arenas(environ={"MALLOC_ARENA_MAX": "4"}) is False


def test_glibc_calls_answer_without_raising() -> None:
    assert isinstance(malloc_trim(), bool)
