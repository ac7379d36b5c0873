"""Child processes: own process group, SIGTERM then SIGKILL, tracking for the exit hooks, start-up polling.

These start real (tiny, shell) processes: process groups and signals are what is under test. Nothing sleeps
on a timer: waits end when a process exits, and start-up timeouts run on a clock that advances by itself.
"""

from __future__ import annotations

import datetime as _dt
import os
import select
import signal
import socket
import threading
from pathlib import Path

import pytest

from controller.envtest.errors import StartError
from controller.envtest.process import (
    PORT_ATTEMPTS,
    ManagedProcess,
    ProcessRegistry,
    free_port,
    retry_port_races,
    start_until_ready,
    tracked,
    wait_until_ready,
)


class SteppingClock:
    """A fake clock whose wait() returns at once, having advanced time by the timeout."""

    def __init__(self) -> None:
        self.now_s = 0.0
        self.waits = 0

    def monotonic(self) -> float:
        return self.now_s

    def now(self) -> _dt.datetime:
        return _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(seconds=self.now_s)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        self.waits += 1
        self.now_s += timeout or 0.0
        return event.is_set()


def _shell(tmp_path: Path, script: str, name: str = "child") -> ManagedProcess:
    return ManagedProcess(name, ["sh", "-c", script], tmp_path / f"{name}.log", die_with_parent=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_child_runs_in_its_own_process_group_and_is_tracked_until_stopped(tmp_path: Path) -> None:
    proc = _shell(tmp_path, "exec sleep 60")
    proc.start()
    try:
        assert proc.pid is not None
        assert os.getpgid(proc.pid) == proc.pid != os.getpgid(0)
        assert proc in tracked()
    finally:
        proc.stop()
    assert not proc.running()
    assert proc.returncode() == -signal.SIGTERM
    assert proc not in tracked()


def test_stop_signals_the_whole_group_not_only_the_leader(tmp_path: Path) -> None:
    # The grandchild holds the write end of a FIFO; the FIFO reads EOF once every writer is gone.
    fifo, ready = tmp_path / "fifo", tmp_path / "ready"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        proc = _shell(tmp_path, f"(exec 3>{fifo}; touch {ready}; exec sleep 60) & wait")
        proc.start()
        try:
            wait_until_ready(proc, ready.exists, timeout=10, interval=0.01)
        finally:
            proc.stop()
        readable, _, _ = select.select([reader], [], [], 10)
        assert readable, "the grandchild still holds the FIFO open"
        assert os.read(reader, 1) == b""
    finally:
        os.close(reader)


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    proc = _shell(tmp_path, f"trap '' TERM; touch {ready}; while :; do sleep 0.05; done")
    proc.start()
    wait_until_ready(proc, ready.exists, timeout=10, interval=0.01)
    proc.stop(grace=0.2)
    assert proc.returncode() == -signal.SIGKILL


def test_stop_is_idempotent_and_harmless_before_start_and_after_exit(tmp_path: Path) -> None:
    proc = _shell(tmp_path, "exit 3")
    proc.stop()
    proc.start()
    assert proc.wait_for_exit(timeout=10) == 3
    proc.stop()
    proc.stop()
    assert proc.returncode() == 3
    assert proc not in tracked()


def test_starting_a_running_process_again_is_refused(tmp_path: Path) -> None:
    proc = _shell(tmp_path, "exec sleep 60")
    proc.start()
    try:
        with pytest.raises(RuntimeError, match="already running"):
            proc.start()
    finally:
        proc.stop()


def test_output_goes_to_the_log_and_the_tail_shows_its_last_lines(tmp_path: Path) -> None:
    proc = _shell(tmp_path, "for i in 1 2 3 4 5; do echo line $i; done; echo oops >&2")
    proc.start()
    assert proc.wait_for_exit(timeout=10) == 0
    assert proc.log_tail(lines=3) == "line 4\nline 5\noops"
    assert "no log" in _shell(tmp_path, "true", name="never-started").log_tail()


def test_stop_all_stops_everything_tracked_newest_first_and_carries_on_after_a_failure() -> None:
    registry = ProcessRegistry(install_hooks=False)  # never the module's: that one may own a control plane
    order: list[str] = []

    class Recorder:
        def __init__(self, name: str, fail: bool = False) -> None:
            self.name, self.fail = name, fail

        def stop(self) -> None:
            order.append(self.name)
            if self.fail:
                raise OSError("cannot stop")

    first, broken, last = Recorder("first"), Recorder("broken", fail=True), Recorder("last")
    for obj in (first, broken, last):
        registry.register(obj)
    registry.unregister(first)
    registry.register(first)  # re-registering moves it to the end
    registry.stop_all()
    assert order == ["first", "last", "broken"]
    assert registry.tracked() == []


def test_wait_until_ready_returns_once_ready(tmp_path: Path) -> None:
    answers = iter([False, False, True])
    clock = SteppingClock()
    proc = _shell(tmp_path, "exec sleep 60")
    proc.start()
    try:
        wait_until_ready(proc, lambda: next(answers), timeout=5, clock=clock, interval=0.5)
    finally:
        proc.stop()
    assert clock.waits == 2


def test_wait_until_ready_gives_up_after_the_timeout_with_the_log_tail(tmp_path: Path) -> None:
    proc = _shell(tmp_path, "echo starting up; exec sleep 60")
    proc.start()
    try:
        wait_until_ready(proc, lambda: (tmp_path / "child.log").read_text() != "", timeout=5, interval=0.01)
        with pytest.raises(StartError, match=r"(?s)child was not ready after 3 s.*starting up") as err:
            wait_until_ready(proc, lambda: False, timeout=3, clock=SteppingClock(), interval=0.5)
    finally:
        proc.stop()
    assert not err.value.address_in_use


def test_wait_until_ready_fails_fast_when_the_process_exits(tmp_path: Path) -> None:
    proc = _shell(tmp_path, "echo 'listen tcp 127.0.0.1:1: bind: address already in use'; exit 1")
    proc.start()
    assert proc.wait_for_exit(timeout=10) == 1
    with pytest.raises(StartError, match="exited with code 1 during start-up") as err:
        wait_until_ready(proc, lambda: False, timeout=60, clock=SteppingClock())
    assert err.value.address_in_use
    proc.stop()


def test_a_process_that_never_gets_ready_is_stopped_by_start_until_ready(tmp_path: Path) -> None:
    proc = _shell(tmp_path, "exec sleep 60")
    with pytest.raises(StartError, match="not ready after 2 s"):
        start_until_ready(proc, lambda: False, timeout=2, clock=SteppingClock())
    assert not proc.running()
    assert proc not in tracked()


def test_a_start_that_lost_its_port_is_tried_again_after_a_pause() -> None:
    clock = SteppingClock()
    failures = [StartError("bind: address already in use", address_in_use=True)] * 2
    attempts: list[float] = []

    def start() -> None:
        attempts.append(clock.monotonic())
        if failures:
            raise failures.pop()

    retry_port_races(start, pause=0.5, clock=clock)
    assert attempts == [0.0, 0.5, 1.0]


def test_other_start_failures_and_the_last_lost_port_are_not_retried() -> None:
    attempts: list[int] = []

    def broken() -> None:
        attempts.append(1)
        raise StartError("exited with code 1")

    with pytest.raises(StartError, match="exited with code 1"):
        retry_port_races(broken)
    assert len(attempts) == 1

    def unlucky() -> None:
        attempts.append(1)
        raise StartError("address already in use", address_in_use=True)

    attempts.clear()
    with pytest.raises(StartError, match="address already in use"):
        retry_port_races(unlucky)
    assert len(attempts) == PORT_ATTEMPTS


def test_free_port_is_a_bindable_loopback_port() -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_the_sigterm_hook_stops_everything_then_chains_to_the_previous_handler() -> None:
    registry = ProcessRegistry(install_hooks=False)
    events: list[str] = []

    class Plane:
        def stop(self) -> None:
            events.append("stopped")

    registry.register(Plane())
    registry._previous_sigterm = lambda signum, frame: events.append(f"previous({signum})")
    registry._on_sigterm(signal.SIGTERM, None)
    assert events == ["stopped", f"previous({signal.SIGTERM})"]
    assert registry.tracked() == []


def test_registering_installs_no_signal_handler_until_the_caller_opts_in() -> None:
    before = signal.getsignal(signal.SIGTERM)
    registry = ProcessRegistry(install_hooks=False)

    class Plane:
        def stop(self) -> None:
            pass

    registry.register(Plane())
    assert signal.getsignal(signal.SIGTERM) is before  # library code changed no process-wide state
    try:
        assert registry.install_sigterm_handler() is (before is signal.SIG_DFL or callable(before))
        if registry.install_sigterm_handler():  # idempotent
            assert signal.getsignal(signal.SIGTERM) == registry._on_sigterm
            assert registry._previous_sigterm is before
    finally:
        signal.signal(signal.SIGTERM, before)
