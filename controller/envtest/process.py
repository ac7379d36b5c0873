"""Child processes of a test control plane, and the guarantee that none outlives the Python process.

Go origin: controller-runtime ``pkg/internal/testing/process`` (start, wait for a health URL, stop with
SIGTERM then SIGKILL). Guarantees:

- Each child runs in its own session and process group, so a Ctrl-C aimed at the test runner's terminal does
  not reach it half-way through a test, and :meth:`ManagedProcess.stop` signals the whole group.
- :meth:`ManagedProcess.stop` sends SIGTERM, waits up to a grace period, then SIGKILLs and reaps. It is
  idempotent and safe to call on a process that already exited.
- Every running process (and every control plane, through :func:`register`) is tracked until stopped.
  Tracked objects are stopped, newest first, by an ``atexit`` hook (normal exit, an uncaught exception and
  Ctrl-C, which Python turns into KeyboardInterrupt and a normal exit), registered at the first
  registration.
- **Signals are the caller's choice.** The library installs no signal handler by default. A test runner
  that wants SIGTERM to stop the control plane too calls :func:`install_sigterm_handler` from its main
  thread (this repository's integration conftest does): the handler stops everything tracked and then lets
  SIGTERM take its previous course. It is installed only if SIGTERM still has its default disposition or a
  Python handler (which it then chains to); an ignored SIGTERM stays ignored.
- As a last line of defence on Linux, when ``setpriv`` is available and the process is started from the
  main thread, the child gets SIGKILL when its parent dies, which covers SIGKILL of the test runner too.
  (The kernel ties this to the *thread* that started the child, hence main thread only.)

Deliberately missing: restarting crashed processes, and capturing output in memory. Output goes to a log
file; :meth:`ManagedProcess.log_tail` shows its end when something fails. The tracking registry is
module-level state on purpose: ``atexit`` and signal handlers are per-process, and so is the registry.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from controller.clock import REAL_CLOCK, Clock
from controller.envtest.errors import StartError


class Stoppable(Protocol):
    """Something the exit hooks can stop."""

    def stop(self) -> None: ...


class ManagedProcess:
    """One child process in its own process group, with its output in a log file.

    Not thread-safe: one owner starts and stops it.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        die_with_parent: bool = True,
    ) -> None:
        self.name = name
        self.argv = tuple(argv)
        self.log_path = log_path
        self._die_with_parent = die_with_parent
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._popen is None else self._popen.pid

    def running(self) -> bool:
        """True while the child has been started and has not exited."""
        return self._popen is not None and self._popen.poll() is None

    def returncode(self) -> int | None:
        """The exit status once the child exited (negative: killed by that signal), else None."""
        return None if self._popen is None else self._popen.poll()

    def start(self) -> None:
        """Start the child, appending its stdout and stderr to the log file."""
        if self.running():
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        argv = list(self.argv)
        if self._die_with_parent and _can_tie_to_parent():
            argv = [_SETPRIV, "--pdeathsig", "KILL", "--", *argv]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        register(self)

    def wait_for_exit(self, timeout: float | None = None) -> int | None:
        """Wait until the child exits (at most ``timeout`` seconds); return its exit status, or None."""
        if self._popen is None:
            raise RuntimeError(f"{self.name} has not been started")
        try:
            return self._popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace`` seconds, and reap the child."""
        popen = self._popen
        if popen is None:
            return
        try:
            if popen.poll() is None:
                _signal_group(popen.pid, signal.SIGTERM)
                try:
                    popen.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    _signal_group(popen.pid, signal.SIGKILL)
                    popen.wait(timeout=grace)
        finally:
            unregister(self)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the log file, or a note that there is none."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                text = f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return f"(no log at {self.log_path})"
        return "\n".join(text.splitlines()[-lines:])

    def __repr__(self) -> str:
        if self._popen is None:
            state = "new"
        elif (code := self._popen.poll()) is None:
            state = f"running pid={self._popen.pid}"
        else:
            state = f"exited code={code}"
        return f"ManagedProcess({self.name!r}, {state}, log={str(self.log_path)!r})"


def _signal_group(pid: int, sig: signal.Signals) -> None:
    # The child leads its own group (pgid == pid); if the group is gone there is nothing left to signal.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


_SETPRIV = shutil.which("setpriv") or ""


def _can_tie_to_parent() -> bool:
    on_main_thread = threading.current_thread() is threading.main_thread()
    return sys.platform == "linux" and bool(_SETPRIV) and on_main_thread


# -- tracking and exit hooks ------------------------------------------------------------------------------


class ProcessRegistry:
    """Everything started and not yet stopped, in start order, plus the exit hooks that stop it.

    The module's registry registers its ``atexit`` hook on first use; ``install_hooks=False`` makes an inert
    one (for tests). The SIGTERM handler is only installed by :meth:`install_sigterm_handler`.
    """

    def __init__(self, *, install_hooks: bool = True) -> None:
        # Reentrant: the SIGTERM handler runs on the main thread and may interrupt a holder of the lock.
        self._lock = threading.RLock()
        self._tracked: dict[int, Stoppable] = {}  # id(obj) -> obj; dicts keep insertion order
        self._install_hooks = install_hooks
        self._atexit_installed = False
        self._sigterm_installed = False
        self._previous_sigterm: Any = None

    def register(self, obj: Stoppable) -> None:
        with self._lock:
            self._tracked[id(obj)] = obj
            if self._install_hooks:
                self._ensure_hooks()

    def unregister(self, obj: Stoppable) -> None:
        with self._lock:
            self._tracked.pop(id(obj), None)

    def tracked(self) -> list[Stoppable]:
        with self._lock:
            return list(self._tracked.values())

    def stop_all(self) -> None:
        for obj in reversed(self.tracked()):
            try:
                obj.stop()
            except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
                # At exit nobody can catch this; report it and carry on so one failure leaks nothing else.
                sys.stderr.write(f"envtest: stopping {obj!r} at exit failed: {exc!r}\n")
            self.unregister(obj)

    def _ensure_hooks(self) -> None:
        if not self._atexit_installed:
            atexit.register(self.stop_all)
            self._atexit_installed = True

    def install_sigterm_handler(self) -> bool:
        """Opt in: SIGTERM stops everything tracked, then takes its previous course. Main thread only;
        idempotent. Returns whether the handler is installed (not when SIGTERM is ignored)."""
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("signal handlers can only be installed from the main thread")
        with self._lock:
            if not self._sigterm_installed:
                previous = signal.getsignal(signal.SIGTERM)
                if previous is signal.SIG_DFL or callable(previous):
                    self._previous_sigterm = previous
                    signal.signal(signal.SIGTERM, self._on_sigterm)
                    self._sigterm_installed = True
            return self._sigterm_installed

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.stop_all()
        previous = self._previous_sigterm
        if callable(previous):
            previous(signum, frame)
            return
        # Default disposition: terminate as if we had not been here.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


_REGISTRY = ProcessRegistry()


def register(obj: Stoppable) -> None:
    """Track ``obj`` until :func:`unregister`; the exit hooks stop whatever is still tracked."""
    _REGISTRY.register(obj)


def unregister(obj: Stoppable) -> None:
    """Stop tracking ``obj`` (it was stopped by its owner)."""
    _REGISTRY.unregister(obj)


def install_sigterm_handler() -> bool:
    """Opt in (from the main thread) to stopping everything tracked on SIGTERM; see the module docstring."""
    return _REGISTRY.install_sigterm_handler()


def tracked() -> list[Stoppable]:
    """Everything currently tracked, oldest first (for tests and diagnostics)."""
    return _REGISTRY.tracked()


def stop_all() -> None:
    """Stop everything tracked, newest first; report (never raise) failures, so one cannot block the rest."""
    _REGISTRY.stop_all()


# -- start-up helpers -------------------------------------------------------------------------------------

PORT_ATTEMPTS = 5
"""How many times a start on freshly chosen ports is tried when another process takes one meanwhile."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the caller must retry if it is taken meanwhile)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_until_ready(
    process: ManagedProcess,
    ready: Callable[[], bool],
    *,
    timeout: float,
    clock: Clock = REAL_CLOCK,
    interval: float = 0.1,
) -> None:
    """Poll ``ready()`` until it returns True; raise StartError if the process exits or ``timeout`` passes.

    ``ready`` must return False (not raise) while the process is still coming up.
    """
    deadline = clock.monotonic() + timeout
    never = threading.Event()  # nothing sets it: clock.wait() is our stoppable-in-principle sleep
    while True:
        code = process.returncode()
        if code is not None:
            raise StartError.for_process(process, f"{process.name} exited with code {code} during start-up")
        if ready():
            return
        if clock.monotonic() >= deadline:
            raise StartError.for_process(process, f"{process.name} was not ready after {timeout:g} s")
        clock.wait(never, interval)


def start_until_ready(
    process: ManagedProcess, ready: Callable[[], bool], *, timeout: float, clock: Clock = REAL_CLOCK
) -> None:
    """Start ``process`` and :func:`wait_until_ready`; if it is not ready, stop it and raise StartError."""
    process.start()
    try:
        wait_until_ready(process, ready, timeout=timeout, clock=clock)
    except StartError:
        process.stop()
        raise


def retry_port_races(
    start: Callable[[], None], *, pause: float = 0.0, clock: Clock = REAL_CLOCK, attempts: int = PORT_ATTEMPTS
) -> None:
    """Call ``start`` until it returns, again (``pause`` seconds later) after each StartError caused by a
    port taken meanwhile, at most ``attempts`` times; any other error, or the last one, propagates."""
    never = threading.Event()  # nothing sets it: clock.wait() below is a pause
    for attempt in range(1, attempts + 1):
        try:
            start()
            return
        except StartError as exc:
            if not exc.address_in_use or attempt == attempts:
                raise
        if pause > 0:
            clock.wait(never, pause)
